// gato._core.OscController: the batched operational-space controller
// (osc.hpp) for Python. gato.osc owns the documented API and its validation;
// this layer checks every array's dtype, layout and size again so a bad call
// raises ValueError (naming the field) instead of reading garbage, and turns
// a step's OscStatus into ValueError. With URDFs it also owns an
// OscKinematics and fills the model inputs itself (the model-based variant).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "gato/osc.hpp"

namespace py = pybind11;

namespace gato {
namespace {

constexpr int kFields = int(OscField::kCount);
// The Python field names, in OscField order.
constexpr std::array<const char*, kFields> kFieldNames = {
    "tool_pose_world", "tool_twist_world", "jacobian_tool_world", "mass_matrix", "gravity_force",
    "desired_tool_pose_operational", "desired_twist_operational", "desired_wrench_world",
    "measured_wrench_world", "operational_frame_pose_world", "motion_stiffness", "motion_damping",
    "wrench_stiffness", "linear_selection_frame_operational", "angular_selection_frame_operational",
    "joint_q", "joint_qd", "joint_q_des_null", "joint_qd_des_null", "null_space_stiffness",
    "null_space_damping"};

// The OscInputs member of each field, in OscField order.
constexpr std::array<const double* OscInputs::*, kFields> kMembers = {
    &OscInputs::tool_pose, &OscInputs::tool_twist, &OscInputs::jacobian, &OscInputs::mass_matrix,
    &OscInputs::gravity, &OscInputs::desired_pose, &OscInputs::desired_twist, &OscInputs::desired_wrench,
    &OscInputs::measured_wrench, &OscInputs::operational_pose, &OscInputs::motion_stiffness,
    &OscInputs::motion_damping, &OscInputs::wrench_stiffness, &OscInputs::linear_selection,
    &OscInputs::angular_selection, &OscInputs::joint_q, &OscInputs::joint_qd, &OscInputs::joint_q_des,
    &OscInputs::joint_qd_des, &OscInputs::null_space_stiffness, &OscInputs::null_space_damping};

using Dbl = py::array_t<double, py::array::c_style>;

std::vector<double> doubles(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return {};
  return py::cast<std::vector<double>>(d[key]);
}

OscConfig config_from(const py::dict& d) {
  static const char* known[] = {"dofs", "inertia_decoupling", "partial_decoupling", "gravity_compensation",
                                "wrench_feedforward", "wrench_feedback", "null_space", "motion_stiffness",
                                "motion_damping", "operational_pose", "motion_axes", "wrench_axes",
                                "wrench_stiffness", "linear_selection", "angular_selection",
                                "null_space_stiffness", "null_space_damping"};
  for (auto item : d) {
    const std::string k = py::cast<std::string>(item.first);
    bool ok = false;
    for (const char* n : known) ok = ok || k == n;
    if (!ok) throw py::value_error("config: unknown key '" + k + "'");
  }
  OscConfig c;
  if (d.contains("dofs")) c.dofs = py::cast<std::vector<int>>(d["dofs"]);
  auto flag = [&](const char* k, bool def) { return d.contains(k) ? py::cast<bool>(d[k]) : def; };
  c.inertia_decoupling = flag("inertia_decoupling", true);
  c.partial_decoupling = flag("partial_decoupling", false);
  c.gravity_compensation = flag("gravity_compensation", true);
  c.wrench_feedforward = flag("wrench_feedforward", false);
  c.wrench_feedback = flag("wrench_feedback", false);
  c.null_space = flag("null_space", false);
  c.motion_stiffness = doubles(d, "motion_stiffness");
  c.motion_damping = doubles(d, "motion_damping");
  c.operational_pose = doubles(d, "operational_pose");
  c.motion_axes = doubles(d, "motion_axes");
  c.wrench_axes = doubles(d, "wrench_axes");
  c.wrench_stiffness = doubles(d, "wrench_stiffness");
  c.linear_selection = doubles(d, "linear_selection");
  c.angular_selection = doubles(d, "angular_selection");
  c.null_space_stiffness = doubles(d, "null_space_stiffness");
  c.null_space_damping = doubles(d, "null_space_damping");
  return c;
}

struct PyOsc {
  std::unique_ptr<OscBatch> osc;
  std::unique_ptr<OscKinematics> kin;
  std::array<long, kFields> need{};  // numbers each field must hold; 0 = not read
  // Model-based variant: the kinematics / dynamics buffers compute() fills.
  std::vector<double> pose, twist, jac, mass, grav;

  PyOsc(const py::dict& cfg, std::optional<std::vector<std::string>> urdfs,
        std::optional<std::vector<std::string>> frames) {
    OscConfig c = config_from(cfg);
    if (urdfs) {
      try {
        kin = std::make_unique<OscKinematics>(*urdfs, frames ? *frames : std::vector<std::string>());
      } catch (const std::invalid_argument& e) {
        throw py::value_error(e.what());
      }
      if (!c.dofs.empty() && c.dofs != kin->dofs())
        throw py::value_error("dofs: does not match the URDFs' DOF counts");
      c.dofs = kin->dofs();
    }
    try {
      osc = std::make_unique<OscBatch>(std::move(c));
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
    const OscConfig& k = osc->config();
    const long R = osc->robots(), mx = osc->max_dofs(), T = osc->total_dofs();
    const bool wrench = k.wrench_feedforward || k.wrench_feedback;
    auto set = [&](OscField f, long n) { need[int(f)] = n; };
    set(OscField::kToolPose, 7 * R);
    set(OscField::kToolTwist, 6 * R);
    set(OscField::kJacobian, 6 * R * mx);
    if (k.inertia_decoupling) set(OscField::kMassMatrix, R * mx * mx);
    if (k.gravity_compensation) set(OscField::kGravity, T);
    set(OscField::kDesiredPose, 7 * R);
    set(OscField::kDesiredTwist, 6 * R);
    if (wrench) set(OscField::kDesiredWrench, 6 * R);
    if (k.wrench_feedback) set(OscField::kMeasuredWrench, 6 * R);
    if (k.operational_pose.empty()) set(OscField::kOperationalPose, 7 * R);
    if (k.motion_stiffness.empty()) set(OscField::kMotionStiffness, 6 * R);
    if (k.motion_damping.empty()) set(OscField::kMotionDamping, 6 * R);
    if (k.wrench_feedback && k.wrench_stiffness.empty()) set(OscField::kWrenchStiffness, 6 * R);
    if (wrench && k.linear_selection.empty()) set(OscField::kLinearSelection, 4 * R);
    if (wrench && k.angular_selection.empty()) set(OscField::kAngularSelection, 4 * R);
    if (k.null_space || kin) {
      set(OscField::kJointQ, T);
      set(OscField::kJointQd, T);
    }
    if (k.null_space) {
      set(OscField::kJointQDes, T);
      set(OscField::kJointQdDes, T);
      if (k.null_space_stiffness.empty()) set(OscField::kNullSpaceStiffness, T);
      if (k.null_space_damping.empty()) set(OscField::kNullSpaceDamping, T);
    }
    if (kin) {
      pose.assign(7 * R, 0.0);
      twist.assign(6 * R, 0.0);
      jac.assign(6 * R * mx, 0.0);
      mass.assign(R * mx * mx, 0.0);
      grav.assign(T, 0.0);
      // Computed here, not read from the caller.
      for (OscField f : {OscField::kToolPose, OscField::kToolTwist, OscField::kJacobian, OscField::kMassMatrix,
                         OscField::kGravity})
        need[int(f)] = 0;
    }
  }

  const double* field(const py::tuple& in, int f) const {
    if (need[f] == 0) return nullptr;
    py::handle h = in[f];
    if (h.is_none()) throw py::value_error(std::string(kFieldNames[f]) + ": required by this configuration, got None");
    if (!Dbl::check_(h))
      throw py::value_error(std::string(kFieldNames[f]) + ": expected a C-contiguous float64 numpy array");
    auto a = py::reinterpret_borrow<py::array>(h);
    if (a.size() != need[f]) {
      std::ostringstream os;
      os << kFieldNames[f] << ": expected " << need[f] << " numbers, got " << a.size();
      throw py::value_error(os.str());
    }
    return static_cast<const double*>(a.data());
  }

  void step(const py::tuple& in, py::handle out) {
    if (in.size() != size_t(kFields))
      throw py::value_error("inputs: expected a tuple of " + std::to_string(kFields) + " fields");
    if (!Dbl::check_(out) || py::reinterpret_borrow<py::array>(out).size() != osc->total_dofs() ||
        !py::reinterpret_borrow<py::array>(out).writeable())
      throw py::value_error("joint_f: expected a writable C-contiguous float64 array of " +
                            std::to_string(osc->total_dofs()) + " numbers");
    OscInputs x;
    for (int f = 0; f < kFields; ++f) x.*kMembers[f] = field(in, f);
    if (kin) {
      // The model's inputs: reject NaN here, before pinocchio turns it into NaN kinematics.
      const long T = osc->total_dofs();
      for (long i = 0; i < T; ++i)
        if (!std::isfinite(x.joint_q[i]) || !std::isfinite(x.joint_qd[i]))
          throw py::value_error(std::string(std::isfinite(x.joint_q[i]) ? "joint_qd" : "joint_q") +
                                ": contains NaN or Inf (DOF " + std::to_string(i) + ")");
    }
    double* jf = static_cast<double*>(py::reinterpret_borrow<py::array>(out).mutable_data());
    OscStatus st;
    {
      py::gil_scoped_release nogil;
      if (kin) {
        kin->compute(x.joint_q, x.joint_qd, pose.data(), twist.data(), jac.data(),
                     osc->config().inertia_decoupling ? mass.data() : nullptr,
                     osc->config().gravity_compensation ? grav.data() : nullptr);
        x.tool_pose = pose.data();
        x.tool_twist = twist.data();
        x.jacobian = jac.data();
        x.mass_matrix = mass.data();
        x.gravity = grav.data();
      }
      st = osc->step(x, jf);
    }
    if (st.error == OscError::kOk) return;
    std::ostringstream os;
    os << kFieldNames[int(st.field)] << ": robot " << st.robot << ": ";
    switch (st.error) {
      case OscError::kNonFinite: os << "contains NaN or Inf"; break;
      case OscError::kZeroQuaternion: os << "quaternion of zero norm"; break;
      case OscError::kMassNotPd: os << "mass matrix is not positive definite"; break;
      case OscError::kSingularTask: os << "the task-space matrix J M^-1 J^T (or J J^T) is singular "
                                          "(kinematic singularity)"; break;
      default: os << "unknown error"; break;
    }
    throw py::value_error(os.str());
  }

  py::dict kinematics(const py::array_t<double, py::array::c_style | py::array::forcecast>& q,
                      const py::array_t<double, py::array::c_style | py::array::forcecast>& qd) {
    if (!kin) throw py::value_error("kinematics: this controller has no URDF model (model-free variant)");
    const long T = osc->total_dofs(), R = osc->robots(), mx = osc->max_dofs();
    if (q.size() != T) throw py::value_error("joint_q: expected " + std::to_string(T) + " numbers");
    if (qd.size() != T) throw py::value_error("joint_qd: expected " + std::to_string(T) + " numbers");
    py::array_t<double> P({R, 7L}), V({R, 6L}), J({R, 6L, mx}), M({R, mx, mx}), G(T);
    kin->compute(q.data(), qd.data(), P.mutable_data(), V.mutable_data(), J.mutable_data(), M.mutable_data(),
                 G.mutable_data());
    py::dict d;
    d["tool_pose_world"] = P;
    d["tool_twist_world"] = V;
    d["jacobian_tool_world"] = J;
    d["mass_matrix"] = M;
    d["gravity_force"] = G;
    return d;
  }
};


}  // namespace

void bind_osc(py::module_& m) {
  py::class_<PyOsc>(m, "OscController")
      .def(py::init<const py::dict&, std::optional<std::vector<std::string>>,
                    std::optional<std::vector<std::string>>>(),
           py::arg("config"), py::arg("urdfs") = py::none(), py::arg("tool_frames") = py::none())
      .def_property_readonly("robots", [](const PyOsc& p) { return p.osc->robots(); })
      .def_property_readonly("max_dofs", [](const PyOsc& p) { return p.osc->max_dofs(); })
      .def_property_readonly("total_dofs", [](const PyOsc& p) { return p.osc->total_dofs(); })
      .def_property_readonly("dofs", [](const PyOsc& p) { return p.osc->config().dofs; })
      .def_property_readonly("field_names", [](const PyOsc&) {
        return std::vector<std::string>(kFieldNames.begin(), kFieldNames.end());
      })
      .def("step", &PyOsc::step, py::arg("inputs"), py::arg("joint_f"))
      .def("kinematics", &PyOsc::kinematics, py::arg("joint_q"), py::arg("joint_qd"));
}

}  // namespace gato
