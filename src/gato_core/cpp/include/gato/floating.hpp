// The floating-base (free-flyer) plant of the C++ core (issue 34, first building block
// of the solver side). This first version runs pinocchio's free-flyer model (aba,
// computeABADerivatives, integrate / difference and their Jacobians) in double, in one
// translation unit (floating_pinocchio.cpp); the lean kernels can take it over later.
// No pinocchio include here.
//
// Conventions (pinocchio's and the consumer contract's schema 2 states; the same as the
// NumPy oracle test/reference/numpy_floating.py):
//   q  (nq = 7 + n): base position in the world (m), base orientation as a unit
//                    quaternion (x, y, z, w), the n joint angles (rad).
//   v  (nv = 6 + n): base linear (m/s) and angular (rad/s) velocity in the BASE frame,
//                    then the joint velocities (rad/s).
//   x = (q, v), nx = nq + nv; tangent vectors dx = (dq, dv) have ndx = 2 nv entries.
//   x1 (-) x0 = (difference(q0, q1), v1 - v0);  x (+) dx = (integrate(q, dq), v + dv).
//   u  (n): actuated joint torques (N m); the generalized force is (0_6, u).
//   f  (6 nc): one wrench per contact frame, world aligned, applied at the frame origin,
//             (force N, torque N m); it adds J_c(q)^T f_c (J_c: LOCAL_WORLD_ALIGNED).
//   a = M(q)^-1 ((0_6, u) + sum_c J_c^T f_c + tau_b - h(q, v)).
//   tau_b (set_base_wrench, per Data; zero unless set): a known external wrench on the base,
//             world-aligned force F (N) and torque T (N m) at the base frame origin,
//             tau_b = (R^T F, R^T T, 0_n) (R: the base orientation).
//   Semi-implicit Euler (the reference's): v' = v + dt a, q' = integrate(q, dt v').
//   Explicit Euler: v' = v + dt a, q' = integrate(q, dt v + dt^2/2 a) (the fixed-base
//   core's kEuler on the manifold). RK4 is not implemented on the floating base.
// Matrices are column-major Eigen (the bindings hand them to NumPy as they are).
#pragma once

#include <Eigen/Core>
#include <memory>
#include <string>
#include <vector>

#include "gato/types.hpp"

namespace gato {

class FloatingPlant {
 public:
  using Mat = Eigen::MatrixXd;
  /// Largest accepted | |quat| - 1 | of an input configuration (the oracle's).
  static constexpr double kQuatNormTol = 1e-6;

  /// Per-thread scratch (pinocchio Data and the contact terms).
  struct Data;
  struct DataDeleter {
    void operator()(Data* d) const;
  };
  using DataPtr = std::unique_ptr<Data, DataDeleter>;

  /// Loads the URDF with a free-flyer root. Throws std::invalid_argument naming
  /// urdf_path (missing file) or contact_frames (unknown or repeated frame).
  FloatingPlant(const std::string& urdf_path, const std::vector<std::string>& contact_frames);
  ~FloatingPlant();
  FloatingPlant(const FloatingPlant&) = delete;
  FloatingPlant& operator=(const FloatingPlant&) = delete;

  int nq() const;
  int nv() const;
  int nu() const { return nv() - 6; }
  int nc() const;
  int nx() const { return nq() + nv(); }
  int ndx() const { return 2 * nv(); }
  const std::vector<std::string>& contact_frames() const;
  std::vector<std::string> joint_names() const;  // the actuated joints, in u's order
  double total_mass() const;
  DataPtr make_data() const;

  // ---- input checks (std::invalid_argument, the message starts with `name`) ----
  /// All n entries finite.
  static void check_finite(const double* a, long n, const char* name);
  /// A configuration: finite, base quaternion of unit norm (kQuatNormTol).
  void check_q(const double* q, const char* name) const;
  /// A state (q, v): check_q on its first nq entries, v finite.
  void check_x(const double* x, const char* name) const;
  /// dt finite and > 0.
  static void check_dt(double dt);

  // ---- manifold operations (no checks: call the check_* first) ----
  /// dx = x1 (-) x0 (ndx).
  void difference(const double* x0, const double* x1, double* dx) const;
  /// xo = x (+) dx (nx).
  void integrate(const double* x, const double* dx, double* xo) const;
  /// Jacobians of x1 (-) x0 with respect to tangent perturbations of x0 and x1 (ndx x ndx each).
  void difference_jacobians(const double* x0, const double* x1, Mat& D0, Mat& D1) const;

  // ---- dynamics; f may be null (no contact wrenches) ----
  /// The known external base wrench every later dynamics call with d adds (tau_b above):
  /// w = (F (3) N, T (3) N m), world aligned, at the base frame origin; null or all zeros: none
  /// (the dynamics and derivatives then run exactly as without it, bit for bit).
  void set_base_wrench(Data& d, const double* w) const;
  /// The wrench d carries (6; zeros when none).
  static void base_wrench(const Data& d, double* w);
  /// J (6 nc x nv): the contact frames' LOCAL_WORLD_ALIGNED Jacobians stacked, rows (linear; angular).
  void contact_jacobians(Data& d, const double* q, Mat& J) const;
  /// The contact frames' world positions p (3 nc: x, y, z per frame, m) and their stacked
  /// Jacobians J as contact_jacobians (rows 6c..6c+2 are dp_c / d dq in the tangent of q).
  void contact_kinematics(Data& d, const double* q, double* p, Mat& J) const;
  /// a (nv): pinocchio's aba with the wrenches as joint-frame external forces.
  void forward_dynamics(Data& d, const double* q, const double* v, const double* u, const double* f,
                        double* a) const;
  /// a and its derivatives: da_dq (nv x nv, tangent of q), da_dv (nv x nv), da_du (nv x n),
  /// da_df (nv x 6 nc). computeABADerivatives at the total generalized force, plus
  /// M^-1 d(sum J_c^T f_c)/dq in closed form (motion-subspace cross products).
  void forward_dynamics_derivatives(Data& d, const double* q, const double* v, const double* u,
                                    const double* f, double* a, Mat& da_dq, Mat& da_dv, Mat& da_du,
                                    Mat& da_df) const;
  /// Throws std::invalid_argument naming integrator unless it is kSemiImplicit or kEuler.
  static void check_integrator(Integrator integ);
  /// One step of integ (kSemiImplicit or kEuler): xn (nx).
  void step(Data& d, const double* x, const double* u, const double* f, double dt, double* xn,
            Integrator integ = Integrator::kSemiImplicit) const;
  /// The step and its tangent Jacobians: A = dx'/ddx (ndx x ndx), B_u (ndx x n), B_f (ndx x 6 nc);
  /// input perturbation x (+) dx, output x'_pert (-) x'.
  void step_derivatives(Data& d, const double* x, const double* u, const double* f, double dt,
                        double* xn, Mat& A, Mat& Bu, Mat& Bf,
                        Integrator integ = Integrator::kSemiImplicit) const;

  // ---- the tangent state cost ----
  /// e = x (-) x_ref (ndx); cost 1/2 e^T diag(w) e (returned), its gradient in the tangent of x
  /// (ndx; null: skipped) and its Gauss-Newton Hessian D^T diag(w) D (ndx x ndx; null: skipped),
  /// D = d e / d dx (dDifference). w: ndx weights (>= 0; the caller checks).
  double state_cost(const double* x, const double* x_ref, const double* w, double* grad, Mat* hess) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gato
