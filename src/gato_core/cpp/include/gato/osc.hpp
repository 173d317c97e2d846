// Batched operational-space (task-space impedance) controller, after Khatib's
// formulation with a generalized selection matrix, for fleets of fixed-base
// robots with different DOF counts. docs/osc.md states the control law.
//
// OscBatch is the model-free law: the caller supplies each robot's tool pose,
// twist, world Jacobian, mass matrix and gravity torques. OscKinematics
// computes those from URDFs (pinocchio, compiled only in osc_model.cpp, so
// this header stays pinocchio-free). Both preallocate every buffer at
// construction: step() / compute() do not allocate.
//
// Layouts (all double, row-major, robots in order):
//   pose   7 per robot (px, py, pz, qx, qy, qz, qw)  [m, unit quaternion]
//   twist / wrench  6 per robot (linear, angular)    [m/s, rad/s] / [N, N·m]
//   jacobian  robots x 6 x max_dofs (padded), mass  robots x max_dofs x max_dofs
//   joint-space vectors (gravity, q, qd, gains, joint_f): compact, sum(dofs).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gato {

/// Construction-time configuration. A gain / frame vector left empty is read
/// from OscInputs on every step instead ("not baked").
struct OscConfig {
  std::vector<int> dofs;  // controlled DOFs per robot (> 0; >= 6 with decoupling; > 6 with null space)
  bool inertia_decoupling = true;
  bool partial_decoupling = false;
  bool gravity_compensation = true;
  bool wrench_feedforward = false;
  bool wrench_feedback = false;
  bool null_space = false;
  std::vector<double> motion_stiffness;      // 6 per robot, operational frame
  std::vector<double> motion_damping;        // 6 per robot
  std::vector<double> operational_pose;      // 7 per robot (world pose of the operational frame)
  std::vector<double> motion_axes;           // 6 per robot (always baked; default all 1)
  std::vector<double> wrench_axes;           // 6 per robot (always baked when wrench control is on)
  std::vector<double> wrench_stiffness;      // 6 per robot
  std::vector<double> linear_selection;      // 4 per robot (quaternion relative to the operational frame)
  std::vector<double> angular_selection;     // 4 per robot
  std::vector<double> null_space_stiffness;  // sum(dofs)
  std::vector<double> null_space_damping;    // sum(dofs)
};

/// One step's inputs. Pointers for disabled features and for baked values are
/// ignored (may be null); every other one must point at a full batch.
struct OscInputs {
  const double* tool_pose = nullptr;
  const double* tool_twist = nullptr;
  const double* jacobian = nullptr;
  const double* mass_matrix = nullptr;
  const double* gravity = nullptr;
  const double* desired_pose = nullptr;
  const double* desired_twist = nullptr;
  const double* desired_wrench = nullptr;
  const double* measured_wrench = nullptr;
  const double* operational_pose = nullptr;
  const double* motion_stiffness = nullptr;
  const double* motion_damping = nullptr;
  const double* wrench_stiffness = nullptr;
  const double* linear_selection = nullptr;
  const double* angular_selection = nullptr;
  const double* joint_q = nullptr;
  const double* joint_qd = nullptr;
  const double* joint_q_des = nullptr;
  const double* joint_qd_des = nullptr;
  const double* null_space_stiffness = nullptr;
  const double* null_space_damping = nullptr;
};

/// Which OscInputs field a step error is about (same order as the struct).
enum class OscField : int {
  kToolPose, kToolTwist, kJacobian, kMassMatrix, kGravity, kDesiredPose, kDesiredTwist,
  kDesiredWrench, kMeasuredWrench, kOperationalPose, kMotionStiffness, kMotionDamping,
  kWrenchStiffness, kLinearSelection, kAngularSelection, kJointQ, kJointQd, kJointQDes,
  kJointQdDes, kNullSpaceStiffness, kNullSpaceDamping, kCount
};

enum class OscError : int {
  kOk = 0,
  kNonFinite,        // NaN / Inf in a field
  kZeroQuaternion,   // a quaternion of norm ~ 0
  kMassNotPd,        // mass matrix not positive definite (Cholesky failed)
  kSingularTask,     // J M^-1 J^T (or J J^T) not invertible: kinematic singularity
};

/// Outcome of a step: the first problem found (robot index, field), or kOk.
/// On an error joint_f is left unspecified for that robot and all later ones.
struct OscStatus {
  OscError error = OscError::kOk;
  int robot = -1;
  OscField field = OscField::kCount;
};

class OscBatch {
 public:
  /// Throws std::invalid_argument for an inconsistent configuration.
  explicit OscBatch(OscConfig cfg);
  ~OscBatch();
  OscBatch(const OscBatch&) = delete;
  OscBatch& operator=(const OscBatch&) = delete;

  int robots() const;
  int max_dofs() const;
  int total_dofs() const;
  const OscConfig& config() const;
  /// Joint torques [N·m or N] into joint_f (total_dofs). Allocation-free.
  OscStatus step(const OscInputs& in, double* joint_f);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Tool kinematics and joint-space dynamics of a fleet from URDFs (pinocchio),
/// in OscBatch's input layouts. Robots sharing a URDF share one model.
class OscKinematics {
 public:
  /// Throws std::invalid_argument for a missing URDF, an unknown tool frame,
  /// or a joint with nq != nv (floating bases, spherical joints).
  OscKinematics(const std::vector<std::string>& urdf_paths, const std::vector<std::string>& tool_frames);
  ~OscKinematics();
  OscKinematics(const OscKinematics&) = delete;
  OscKinematics& operator=(const OscKinematics&) = delete;

  int robots() const;
  const std::vector<int>& dofs() const;
  int max_dofs() const;
  /// From joint_q / joint_qd (compact): tool pose and world twist, the world
  /// tool Jacobian (padded, zero beyond a robot's DOFs), and when non-null the
  /// mass matrix (padded, zero padding) and gravity torques (compact).
  /// Allocation-free.
  void compute(const double* joint_q, const double* joint_qd, double* pose, double* twist,
               double* jacobian, double* mass_matrix, double* gravity);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gato
