// OscBatch: the operational-space control law of docs/osc.md, one robot after
// another over the batch. Everything a step touches is allocated in the
// constructor: per distinct DOF count one Work (Eigen matrices sized for it),
// fixed-size 3x3 / 6x6 algebra otherwise.
#include "gato/osc.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gato {

namespace {

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;
using Mat3 = Eigen::Matrix3d;
using Mat6 = Eigen::Matrix<double, 6, 6>;
using Vec3 = Eigen::Vector3d;
using Vec6 = Eigen::Matrix<double, 6, 1>;
using RowMap = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                          Eigen::OuterStride<>>;

bool finite(const double* p, int n) {
  for (int i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// Unit quaternion (x, y, z, w) from 4 numbers; false when the norm is ~0.
bool unit_quat(const double* q, Eigen::Quaterniond& out) {
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!(n > 1e-9)) return false;
  out = Eigen::Quaterniond(q[3] / n, q[0] / n, q[1] / n, q[2] / n);
  return true;
}

// World rotation vector of qd * qc^-1 [rad]: the shortest rotation taking the
// current orientation to the desired one (angle in [0, pi]).
Vec3 rotation_error(const Eigen::Quaterniond& qd, const Eigen::Quaterniond& qc) {
  Eigen::Quaterniond e = qd * qc.conjugate();
  if (e.w() < 0) e.coeffs() = -e.coeffs();
  const Vec3 v = e.vec();
  const double s = v.norm();
  if (s < 1e-12) return 2.0 * v;
  return (2.0 * std::atan2(s, e.w()) / s) * v;
}

// Diagonal weights given in the frame R, as a world-frame 3x3 block.
Mat3 selection_block(const Mat3& R, const double* w) {
  return R * Vec3(w[0], w[1], w[2]).asDiagonal() * R.transpose();
}

}  // namespace

// Scratch for the robots with one DOF count n.
struct OscWork {
  Mat J, M, MinvJt;     // 6 x n, n x n, n x 6
  Eigen::LLT<Mat> llt;  // of M
  Vec tau, tau0, y;     // n
  explicit OscWork(int n) : J(6, n), M(n, n), MinvJt(n, 6), llt(n), tau(n), tau0(n), y(n) {}
};

struct OscBatch::Impl {
  OscConfig cfg;
  int R = 0, max_n = 0, total = 0;
  std::vector<int> offset;  // compact offset of each robot
  std::vector<std::unique_ptr<OscWork>> work;  // by DOF count
};

namespace {

void need_size(const std::vector<double>& v, size_t n, bool allow_empty, const char* name) {
  if ((allow_empty && v.empty()) || v.size() == n) return;
  throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(n) + " values" +
                              (allow_empty ? " or none" : "") + ", got " + std::to_string(v.size()));
}

}  // namespace

OscBatch::OscBatch(OscConfig cfg) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  const int R = int(cfg.dofs.size());
  if (R == 0) throw std::invalid_argument("dofs: at least one robot is required");
  s.offset.resize(R);
  for (int r = 0; r < R; ++r) {
    const int n = cfg.dofs[r];
    if (n <= 0) throw std::invalid_argument("dofs: robot " + std::to_string(r) + " has " + std::to_string(n) + " DOFs");
    if (cfg.inertia_decoupling && n < 6)
      throw std::invalid_argument("dofs: robot " + std::to_string(r) + " has " + std::to_string(n) +
                                  " DOFs; inertia decoupling needs at least 6");
    if (cfg.null_space && n <= 6)
      throw std::invalid_argument("dofs: robot " + std::to_string(r) + " has " + std::to_string(n) +
                                  " DOFs; null-space control needs more than 6");
    s.offset[r] = s.total;
    s.total += n;
    s.max_n = std::max(s.max_n, n);
  }
  s.R = R;
  const bool wrench = cfg.wrench_feedforward || cfg.wrench_feedback;
  need_size(cfg.motion_stiffness, 6 * R, true, "motion_stiffness");
  need_size(cfg.motion_damping, 6 * R, true, "motion_damping");
  need_size(cfg.operational_pose, 7 * R, true, "operational_pose");
  if (cfg.motion_axes.empty()) cfg.motion_axes.assign(6 * R, 1.0);
  need_size(cfg.motion_axes, 6 * R, false, "motion_axes");
  if (wrench) need_size(cfg.wrench_axes, 6 * R, false, "wrench_axes");
  if (cfg.wrench_feedback) need_size(cfg.wrench_stiffness, 6 * R, true, "wrench_stiffness");
  need_size(cfg.linear_selection, 4 * R, true, "linear_selection");
  need_size(cfg.angular_selection, 4 * R, true, "angular_selection");
  if (cfg.null_space) {
    need_size(cfg.null_space_stiffness, s.total, true, "null_space_stiffness");
    need_size(cfg.null_space_damping, s.total, true, "null_space_damping");
  }
  s.work.resize(s.max_n + 1);
  for (int n : cfg.dofs)
    if (!s.work[n]) s.work[n] = std::make_unique<OscWork>(n);
  s.cfg = std::move(cfg);
}

OscBatch::~OscBatch() = default;
int OscBatch::robots() const { return impl_->R; }
int OscBatch::max_dofs() const { return impl_->max_n; }
int OscBatch::total_dofs() const { return impl_->total; }
const OscConfig& OscBatch::config() const { return impl_->cfg; }

OscStatus OscBatch::step(const OscInputs& in, double* joint_f) {
  Impl& s = *impl_;
  const OscConfig& c = s.cfg;
  const bool wrench = c.wrench_feedforward || c.wrench_feedback;
  const int mx = s.max_n;
  OscStatus st;
  auto fail = [&](OscError e, int r, OscField f) {
    st.error = e;
    st.robot = r;
    st.field = f;
    return st;
  };
  // Pointer to robot r's slice: the baked value when there is one, else the input.
  auto pick = [](const std::vector<double>& baked, const double* input, int stride, int r) {
    return baked.empty() ? input + size_t(stride) * r : baked.data() + size_t(stride) * r;
  };

  for (int r = 0; r < s.R; ++r) {
    const int n = c.dofs[r], off = s.offset[r];
    OscWork& w = *s.work[n];
    const double* pose = in.tool_pose + 7 * r;
    const double* twist = in.tool_twist + 6 * r;
    const double* dpose = in.desired_pose + 7 * r;
    const double* dtwist = in.desired_twist + 6 * r;
    const double* opose = pick(c.operational_pose, in.operational_pose, 7, r);
    const double* kp = pick(c.motion_stiffness, in.motion_stiffness, 6, r);
    const double* kd = pick(c.motion_damping, in.motion_damping, 6, r);
    if (!finite(pose, 7)) return fail(OscError::kNonFinite, r, OscField::kToolPose);
    if (!finite(twist, 6)) return fail(OscError::kNonFinite, r, OscField::kToolTwist);
    if (!finite(dpose, 7)) return fail(OscError::kNonFinite, r, OscField::kDesiredPose);
    if (!finite(dtwist, 6)) return fail(OscError::kNonFinite, r, OscField::kDesiredTwist);
    if (!finite(opose, 7)) return fail(OscError::kNonFinite, r, OscField::kOperationalPose);
    if (!finite(kp, 6)) return fail(OscError::kNonFinite, r, OscField::kMotionStiffness);
    if (!finite(kd, 6)) return fail(OscError::kNonFinite, r, OscField::kMotionDamping);
    const RowMap Jin(in.jacobian + size_t(r) * 6 * mx, 6, n, Eigen::OuterStride<>(mx));
    if (!Jin.allFinite()) return fail(OscError::kNonFinite, r, OscField::kJacobian);
    w.J = Jin;

    Eigen::Quaterniond q_t, q_d, q_o;
    if (!unit_quat(pose + 3, q_t)) return fail(OscError::kZeroQuaternion, r, OscField::kToolPose);
    if (!unit_quat(dpose + 3, q_d)) return fail(OscError::kZeroQuaternion, r, OscField::kDesiredPose);
    if (!unit_quat(opose + 3, q_o)) return fail(OscError::kZeroQuaternion, r, OscField::kOperationalPose);
    const Mat3 Ro = q_o.toRotationMatrix();
    const Vec3 p_o(opose[0], opose[1], opose[2]);

    // Pose and twist errors in the operational frame; the PD term back in the world.
    const Vec3 p_des = p_o + Ro * Vec3(dpose[0], dpose[1], dpose[2]);
    const Vec3 ep = Ro.transpose() * (p_des - Vec3(pose[0], pose[1], pose[2]));
    const Vec3 er = Ro.transpose() * rotation_error(q_o * q_d, q_t);
    const Vec3 ev = Vec3(dtwist[0], dtwist[1], dtwist[2]) - Ro.transpose() * Vec3(twist[0], twist[1], twist[2]);
    const Vec3 ew = Vec3(dtwist[3], dtwist[4], dtwist[5]) - Ro.transpose() * Vec3(twist[3], twist[4], twist[5]);
    Vec6 a;
    for (int i = 0; i < 3; ++i) {
      a[i] = kp[i] * ep[i] + kd[i] * ev[i];
      a[3 + i] = kp[3 + i] * er[i] + kd[3 + i] * ew[i];
    }
    a.head<3>() = Ro * a.head<3>().eval();
    a.tail<3>() = Ro * a.tail<3>().eval();

    // Generalized selection: the motion axes filter the PD term, the wrench axes the wrench term.
    Mat3 Rf = Ro, Rt = Ro;
    const double* mw = c.motion_axes.data() + 6 * r;
    if (wrench) {
      const double* ls = pick(c.linear_selection, in.linear_selection, 4, r);
      const double* as = pick(c.angular_selection, in.angular_selection, 4, r);
      if (!finite(ls, 4)) return fail(OscError::kNonFinite, r, OscField::kLinearSelection);
      if (!finite(as, 4)) return fail(OscError::kNonFinite, r, OscField::kAngularSelection);
      Eigen::Quaterniond ql, qa;
      if (!unit_quat(ls, ql)) return fail(OscError::kZeroQuaternion, r, OscField::kLinearSelection);
      if (!unit_quat(as, qa)) return fail(OscError::kZeroQuaternion, r, OscField::kAngularSelection);
      Rf = Ro * ql.toRotationMatrix();
      Rt = Ro * qa.toRotationMatrix();
      a.head<3>() = selection_block(Rf, mw) * a.head<3>().eval();
      a.tail<3>() = selection_block(Rt, mw + 3) * a.tail<3>().eval();
    }

    // Task force F (world): Lambda a with decoupling, a itself without.
    Vec6 F = a;
    Mat6 Lam;
    if (c.inertia_decoupling || c.null_space) {
      if (c.inertia_decoupling) {
        const RowMap Min(in.mass_matrix + size_t(r) * mx * mx, n, n, Eigen::OuterStride<>(mx));
        if (!Min.allFinite()) return fail(OscError::kNonFinite, r, OscField::kMassMatrix);
        w.M = Min;
        w.llt.compute(w.M);
        if (w.llt.info() != Eigen::Success) return fail(OscError::kMassNotPd, r, OscField::kMassMatrix);
        w.MinvJt = w.J.transpose();
        w.llt.solveInPlace(w.MinvJt);
        Mat6 A;
        A.noalias() = w.J * w.MinvJt;  // J M^-1 J^T (noalias: no dynamic-size temporary)
        if (c.partial_decoupling) {
          Lam.setZero();
          Eigen::LLT<Mat3> lp(A.topLeftCorner<3, 3>()), lr(A.bottomRightCorner<3, 3>());
          if (lp.info() != Eigen::Success || lr.info() != Eigen::Success)
            return fail(OscError::kSingularTask, r, OscField::kJacobian);
          Lam.topLeftCorner<3, 3>() = lp.solve(Mat3::Identity());
          Lam.bottomRightCorner<3, 3>() = lr.solve(Mat3::Identity());
        } else {
          Eigen::LLT<Mat6> la(A);
          if (la.info() != Eigen::Success) return fail(OscError::kSingularTask, r, OscField::kJacobian);
          Lam = la.solve(Mat6::Identity());
        }
        F = Lam * a;
      }
    }

    if (wrench) {
      const double* Fd = in.desired_wrench + 6 * r;
      if (!finite(Fd, 6)) return fail(OscError::kNonFinite, r, OscField::kDesiredWrench);
      Vec6 cmd = Vec6::Zero();
      if (c.wrench_feedforward) cmd = Eigen::Map<const Vec6>(Fd);
      if (c.wrench_feedback) {
        const double* Fm = in.measured_wrench + 6 * r;
        const double* kw = pick(c.wrench_stiffness, in.wrench_stiffness, 6, r);
        if (!finite(Fm, 6)) return fail(OscError::kNonFinite, r, OscField::kMeasuredWrench);
        if (!finite(kw, 6)) return fail(OscError::kNonFinite, r, OscField::kWrenchStiffness);
        const Vec6 err = Eigen::Map<const Vec6>(Fd) - Eigen::Map<const Vec6>(Fm);
        const Vec3 el = Ro.transpose() * err.head<3>(), ea = Ro.transpose() * err.tail<3>();
        cmd.head<3>() += Ro * Vec3(kw[0] * el[0], kw[1] * el[1], kw[2] * el[2]);
        cmd.tail<3>() += Ro * Vec3(kw[3] * ea[0], kw[4] * ea[1], kw[5] * ea[2]);
      }
      const double* ww = c.wrench_axes.data() + 6 * r;
      F.head<3>() += selection_block(Rf, ww) * cmd.head<3>();
      F.tail<3>() += selection_block(Rt, ww + 3) * cmd.tail<3>();
    }

    w.tau.noalias() = w.J.transpose() * F;
    if (c.gravity_compensation) {
      const double* g = in.gravity + off;
      if (!finite(g, n)) return fail(OscError::kNonFinite, r, OscField::kGravity);
      w.tau += Eigen::Map<const Vec>(g, n);
    }

    if (c.null_space) {
      const double* q = in.joint_q + off;
      const double* qd = in.joint_qd + off;
      const double* qdes = in.joint_q_des + off;
      const double* qddes = in.joint_qd_des + off;
      const double* kn = c.null_space_stiffness.empty() ? in.null_space_stiffness + off : c.null_space_stiffness.data() + off;
      const double* dn = c.null_space_damping.empty() ? in.null_space_damping + off : c.null_space_damping.data() + off;
      if (!finite(q, n)) return fail(OscError::kNonFinite, r, OscField::kJointQ);
      if (!finite(qd, n)) return fail(OscError::kNonFinite, r, OscField::kJointQd);
      if (!finite(qdes, n)) return fail(OscError::kNonFinite, r, OscField::kJointQDes);
      if (!finite(qddes, n)) return fail(OscError::kNonFinite, r, OscField::kJointQdDes);
      if (!finite(kn, n)) return fail(OscError::kNonFinite, r, OscField::kNullSpaceStiffness);
      if (!finite(dn, n)) return fail(OscError::kNonFinite, r, OscField::kNullSpaceDamping);
      for (int i = 0; i < n; ++i) w.y[i] = kn[i] * (qdes[i] - q[i]) + dn[i] * (qddes[i] - qd[i]);
      if (c.inertia_decoupling) w.tau0.noalias() = w.M * w.y;
      else w.tau0 = w.y;
      Vec6 z;
      if (c.inertia_decoupling && !c.partial_decoupling) {
        // Dynamically consistent: N^T tau0 = tau0 - J^T Lambda J M^-1 tau0.
        w.y = w.tau0;
        w.llt.solveInPlace(w.y);
        z.noalias() = w.J * w.y;
        z = (Lam * z).eval();
      } else {
        // Moore-Penrose: N^T tau0 = tau0 - J^T (J J^T)^-1 J tau0.
        Mat6 JJt;
        JJt.noalias() = w.J * w.J.transpose();
        Eigen::LLT<Mat6> lj(JJt);
        if (lj.info() != Eigen::Success) return fail(OscError::kSingularTask, r, OscField::kJacobian);
        z.noalias() = w.J * w.tau0;
        z = lj.solve(z);
      }
      w.tau += w.tau0;
      w.tau.noalias() -= w.J.transpose() * z;
    }
    Eigen::Map<Vec>(joint_f + off, n) = w.tau;
  }
  return st;
}

}  // namespace gato
