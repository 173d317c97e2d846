// osc_alloc URDF_7DOF FRAME_7DOF URDF_6DOF FRAME_6DOF: 10^4 steps of
// OscKinematics::compute() + OscBatch::step(), round robin over three fleets: [7, 6, 7]
// (decoupling, gravity, wrench feedforward + feedback) and two [7, 7] ones with null-space
// control (dynamically consistent and Moore-Penrose projectors), every 97th step stopped
// by a NaN measured wrench, while a malloc hook counts heap calls. Prints "key=value"
// lines; a control allocation proves the hook counts.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gato/osc.hpp"

#include "../malloc_hook.hpp"  // g_counting, g_allocs, g_frees, count_control_allocation

namespace {

struct Fleet {
  gato::OscKinematics kin;
  gato::OscBatch osc;
  std::vector<double> pose, twist, jac, mass, grav, q, qd, des, dtw, fd, fm, qdes, qddes, tau;
  Fleet(const std::vector<std::string>& urdfs, const std::vector<std::string>& frames, gato::OscConfig cfg)
      : kin(urdfs, frames), osc((cfg.dofs = kin.dofs(), cfg)) {
    const int R = kin.robots(), mx = kin.max_dofs(), T = osc.total_dofs();
    pose.resize(7 * R), twist.resize(6 * R), jac.resize(6 * R * mx), mass.resize(R * mx * mx), grav.resize(T);
    q.resize(T), qd.resize(T), des.resize(7 * R), dtw.assign(6 * R, 0.01), fd.assign(6 * R, 0.0),
        fm.assign(6 * R, 0.0), qdes.resize(T), qddes.assign(T, 0.0), tau.resize(T);
    for (int i = 0; i < T; ++i) q[i] = 0.3 + 0.1 * std::sin(i), qd[i] = 0.05 * std::cos(i), qdes[i] = 0.2;
    for (int r = 0; r < R; ++r) fd[6 * r + 2] = -10.0, fm[6 * r + 2] = -9.0;
  }
  gato::OscStatus step(int k) {
    q[0] += 1e-5 * std::sin(0.01 * k);
    kin.compute(q.data(), qd.data(), pose.data(), twist.data(), jac.data(), mass.data(), grav.data());
    des = pose;
    for (size_t r = 0; r < des.size() / 7; ++r) des[7 * r] += 0.01;
    gato::OscInputs in;
    in.tool_pose = pose.data(), in.tool_twist = twist.data(), in.jacobian = jac.data(), in.mass_matrix = mass.data();
    in.gravity = grav.data(), in.desired_pose = des.data(), in.desired_twist = dtw.data();
    in.desired_wrench = fd.data(), in.measured_wrench = fm.data(), in.joint_q = q.data(), in.joint_qd = qd.data();
    in.joint_q_des = qdes.data(), in.joint_qd_des = qddes.data();
    return osc.step(in, tau.data());
  }
};

gato::OscConfig config(int R, bool null_space, bool decoupling) {
  gato::OscConfig c;
  c.inertia_decoupling = decoupling;
  c.wrench_feedforward = c.wrench_feedback = true;
  c.null_space = null_space;
  if (null_space) {  // every robot of these fleets has 7 DOFs
    c.null_space_stiffness.assign(7 * R, decoupling ? 25.0 : 10.0);
    c.null_space_damping.assign(7 * R, decoupling ? 10.0 : 1.0);
  }
  c.motion_stiffness.assign(6 * R, 400.0);
  c.motion_damping.assign(6 * R, 40.0);
  c.operational_pose.assign(7 * R, 0.0);
  c.wrench_axes.assign(6 * R, 0.0);
  c.wrench_stiffness.assign(6 * R, 0.5);
  c.linear_selection.assign(4 * R, 0.0);
  c.angular_selection.assign(4 * R, 0.0);
  for (int r = 0; r < R; ++r) {
    c.operational_pose[7 * r + 6] = 1.0;
    c.wrench_axes[6 * r + 2] = 1.0;
    c.linear_selection[4 * r + 1] = 0.1, c.linear_selection[4 * r + 3] = 1.0;
    c.angular_selection[4 * r + 3] = 1.0;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: osc_alloc URDF_7DOF FRAME_7DOF URDF_6DOF FRAME_6DOF\n");
    return 2;
  }
  const std::string u7 = argv[1], f7 = argv[2], u6 = argv[3], f6 = argv[4];
  Fleet hetero({u7, u6, u7}, {f7, f6, f7}, config(3, false, true));
  Fleet ns_dyn({u7, u7}, {f7, f7}, config(2, true, true));  // dynamically consistent projector
  Fleet ns_mp({u7, u7}, {f7, f7}, config(2, true, false));  // Moore-Penrose projector

  if (!count_control_allocation()) return 3;  // the hook must count, or the zeros prove nothing

  long steps = 0, ok = 0, nan_stops = 0;
  double checksum = 0.0;
  g_counting = true;
  for (int k = 0; k < 10000; ++k) {
    Fleet& f = (k % 3 == 0) ? hetero : (k % 3 == 1) ? ns_dyn : ns_mp;
    if (k % 97 == 0) f.fm[2] = std::numeric_limits<double>::quiet_NaN();
    const gato::OscStatus st = f.step(k);
    f.fm[2] = -9.0;
    ++steps;
    if (st.error == gato::OscError::kOk) {
      ++ok;
      checksum += f.tau[0];
    } else if (st.error == gato::OscError::kNonFinite && st.field == gato::OscField::kMeasuredWrench) {
      ++nan_stops;
    }
  }
  g_counting = false;
  std::printf("steps=%ld\nok=%ld\nnan_stops=%ld\nstep_allocs=%ld\nstep_frees=%ld\nfinite=%d\n", steps, ok, nan_stops,
              g_allocs, g_frees, int(std::isfinite(checksum)));
  return 0;
}
