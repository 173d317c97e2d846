// Rigid-body plant of a fixed-base arm: forward dynamics, its derivatives and
// end-effector kinematics. The pinocchio implementation lives in
// src/plant_impl.hpp and is compiled only in plant_{double,float}.cpp, so the
// solver never includes pinocchio (each TU that does costs ~75 s, ~3 GB).
#pragma once

#include <Eigen/Core>
#include <memory>
#include <string>
#include <vector>

namespace gato {

namespace lean {
template <typename S>
struct Model;
}

template <typename S>
using VecX = Eigen::Matrix<S, Eigen::Dynamic, 1>;
template <typename S>
using MatX = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

/// URDF <limit> tags of the actuated joints (SI units: rad or m, rad/s or m/s, N·m or N).
template <typename S>
struct PlantLimits {
  VecX<S> q_lo, q_hi;  // position box (nq)
  VecX<S> qd_max;      // symmetric velocity box (nv)
  VecX<S> u_max;       // symmetric effort box (nv)
};

/// Per-thread scratch of a Plant (pinocchio Data and force buffers).
template <typename S>
class PlantWorkspace {
 public:
  virtual ~PlantWorkspace() = default;
};

template <typename S>
class Plant {
 public:
  using Vec = VecX<S>;
  using Mat = MatX<S>;
  using MatRef = Eigen::Ref<Mat>;

  /// Loads a fixed-base URDF. Throws std::invalid_argument when the file is
  /// missing, the model has a joint with nq != nv, or ee_frame is unknown.
  Plant(const std::string& urdf_path, const std::string& ee_frame);
  ~Plant();
  Plant(const Plant&) = delete;
  Plant& operator=(const Plant&) = delete;

  int nq() const;
  int nv() const;
  /// Moving bodies (pinocchio joints 1..njoints-1): the f_ext slots per knot.
  int nbodies() const;
  /// Body (joint) index, 0-based over moving bodies, that carries the EE frame.
  int ee_body() const;
  const PlantLimits<S>& limits() const;
  std::vector<std::string> joint_names() const;
  std::vector<std::string> frame_names() const;
  /// Frame id of a URDF frame name, -1 when unknown.
  int frame_id(const std::string& name) const;
  int ee_frame_id() const;

  std::unique_ptr<PlantWorkspace<S>> make_workspace() const;

  /// qdd = M(q)^-1 (tau - c(q, v) + sum J^T f_ext). fext: nullptr or
  /// 6*nbodies numbers, per body its joint-local spatial force [angular; linear].
  /// ee (nullable): also writes the EE position (3), from the same kinematics pass.
  void forward_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* tau,
                        const S* fext, S* qdd, S* ee = nullptr) const;
  /// Forward dynamics and its partials: dqdd_dq, dqdd_dv (nv x nv), Minv
  /// (nv x nv, full symmetric). ee / J (nullable): also the EE position (3) and
  /// its 3 x nv world-aligned Jacobian, from the same kinematics pass.
  void forward_dynamics_derivatives(PlantWorkspace<S>& ws, const S* q, const S* v,
                                    const S* tau, const S* fext, S* qdd, MatRef dqdd_dq,
                                    MatRef dqdd_dv, MatRef Minv, S* ee = nullptr,
                                    Mat* J = nullptr) const;
  /// World position (3) of frame fid's origin; fid = -1 means the EE frame.
  void frame_position(PlantWorkspace<S>& ws, const S* q, S* p, int fid = -1) const;
  /// EE position (3) and its 3 x nv world-aligned position Jacobian.
  void ee_position_jacobian(PlantWorkspace<S>& ws, const S* q, S* p, MatRef J) const;
  /// World positions pos (n x 3, row-major) of n points fixed in frames: point i is
  /// local[3i .. 3i+2] (m) in the coordinates of frame frames[i] (a frame id). J
  /// (nullable): their world-aligned position Jacobians, n x 3 x nv row-major
  /// (collision sphere centres; docs/constraints.md).
  void points_kinematics(PlantWorkspace<S>& ws, const S* q, int n, const int* frames, const S* local,
                         S* pos, S* J) const;
  /// Number of frames (valid frame ids are 0 .. nframes()-1).
  int nframes() const;
  /// The canonical model of the lean articulated-body algorithm (lean_aba.hpp),
  /// or nullptr when a joint is not a 1-DoF revolute / prismatic one. The
  /// solver's line search evaluates several trial points at once with it.
  const lean::Model<S>* lean_model() const;
  /// Whether forward_dynamics and the EE frame_position use the lean algorithm
  /// (default: whenever lean_model() exists); off = pinocchio for everything.
  /// For tests and benchmarks; not thread-safe against running solves.
  void set_use_lean(bool on);
  bool use_lean() const;
  /// The model's EE body carries a rigid payload (issue 32): its URDF inertia plus mass kg
  /// (0: none, the URDF's again) with centre com (3) m and rotational inertia about the centre
  /// Icom (3 x 3 row-major) kg m^2, in EE frame coordinates. Updates the pinocchio model and the
  /// lean model's arrays in place (views of them stay valid). Throws std::invalid_argument for
  /// a mass < 0 or a non-finite number. Not thread-safe against running solves.
  void set_ee_payload(double mass, const double* com, const double* Icom);
  /// EE frame rotation R (3 x 3, column-major, world <- EE frame) and, when Jw is not null,
  /// the EE world angular-velocity Jacobian (3 x nv, resized): omega_world = Jw qd.
  void ee_rotation(PlantWorkspace<S>& ws, const S* q, S* R, Mat* Jw = nullptr) const;
  /// Generalized gravity g(q) (nv; N·m or N: the torque that holds q at rest, no f_ext)
  /// and, when dg_dq is not null, its Jacobian dg/dq (nv x nv, resized).
  void gravity(PlantWorkspace<S>& ws, const S* q, S* g, Mat* dg_dq = nullptr) const;
  /// Inverse dynamics tau = M qdd + c - sum J^T f_ext (for tests and tools).
  void inverse_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* qdd,
                        const S* fext, S* tau) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gato
