// The floating-base contact-force trajectory optimizer of the C++ core (issue 34):
// a Gauss-Newton SQP over a horizon of N knots for gato::FloatingPlant, with a Riccati
// backward pass and a forward rollout on the manifold with a backtracking line search
// (single shooting: the states are always a rollout of the controls from x0, so the
// linearized dynamics have no defects). CPU, double, one thread. No pinocchio include.
//
// Variables (the reference's xu layout): states x_0 .. x_{N-1} (nx each, schema 2: base
// position, quaternion xyzw, joints; base-frame twist, joint rates) and controls
// w_0 .. w_{N-2}, w = (u, fc): u the nu actuated joint torques (N m), fc the nf = 6 nc
// contact wrenches in the consumer contract's fc layout: per contact frame a 6-wide
// block [n (3, N m); f (3, N)], world aligned, about the frame origin (FloatingPlant's
// wrenches are (f; n): the solver permutes at the plant boundary).
//
// Cost (all terms quadratic penalties; none of them is a hard constraint):
//   running knot k < N-1:  1/2 e_k^T diag(w_x) e_k, e_k = x_k (-) xref_k (tangent, ndx)
//                        + 1/2 sum_i r_i (u_i - uref_i)^2
//                        + 1/2 sum_i wf_i (fc_i - fcref_i)^2        (default wf = 1e-2, fcref = 0)
//                        + 1/2 w_p ||p(q_k) - ptgt_k||^2             (contact positions, 3 nc)
//                        + 1/2 w_cone sum max(r_j, 0)^2              (friction pyramid, see below)
//   terminal knot N-1:     the state term with w_xN and the contact-position term.
// The friction term's rows per contact (f = (fx, fy, fz)): fz_min - fz, +-fx - mu fz,
// +-fy - mu fz; only positive rows cost (a one-sided quadratic penalty, not a constraint).
// The Hessian is Gauss-Newton: the state term's D^T W D (D = dDifference), J_p^T w_p J_p,
// the active pyramid rows' outer products; no second derivative of the dynamics.
//
// Hard rows (RowGroup, add_row_group): linear rows on the fc block (fc boxes, friction cones,
// g = C fc + d, interval bounds or one second-order cone) and contact-position rows
// (g = p_c(q_k) - target_k, interval bounds), enforced by an augmented Lagrangian (PHR) whose
// outer loop runs inside solve (set_al: up to outer_iters multiplier updates, each after an
// inner SQP to max_iters, the group's rho grown where its violation did not fall 4x); the
// multipliers persist across solves (reset_duals). Telemetry groups only report.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gato/floating.hpp"
#include "gato/types.hpp"

namespace gato {

class FloatingSQP {
 public:
  using Mat = Eigen::MatrixXd;
  using Vec = Eigen::VectorXd;

  /// The linear-quadratic subproblem at a trajectory (what the Riccati pass solves).
  struct LQ {
    std::vector<Mat> A, B;        // N-1 of each: ndx x ndx, ndx x nw (tangent; fc columns in [n; f])
    std::vector<Mat> Hxx, Hww;    // N (ndx x ndx), N-1 (nw x nw)
    std::vector<Vec> gx, gw;      // N (ndx), N-1 (nw)
  };
  /// A hard row group (augmented Lagrangian; docs/floating_solver.md).
  struct RowGroup {
    enum Kind { kFc = 0, kContactPos = 1 };
    enum Mech { kTelemetry = 0, kAL = 3 };  // the ids of gato.rowkinds
    int kind = kFc;
    int mech = kAL;
    bool cone = false;  // kFc only: 3 rows (g0, g1, g2) in the SOC ||(g1, g2)|| <= g0
    int knot_lo = 0, knot_hi = -1;  // [lo, hi); -1: N-1 (kFc, control knots) or N (kContactPos)
    double rho = 1.0;
    Mat C;       // kFc: m x nf, g = C fc + d ([n; f] columns)
    Vec d;       // kFc: m
    Mat target;  // kContactPos: 3nc x 1 or 3nc x N
    Vec lo, hi;  // m each (unused for a cone)
    Mat lam;     // m x N multipliers (interval: signed; cone: in the cone)
    int rows() const { return kind == kFc ? int(C.rows()) : int(lo.size()); }
  };
  struct Result {
    int iters = 0;
    int al_iters = 0;                 // multiplier updates in this solve
    std::vector<double> violation;    // per row group, the returned plan's max violation
    bool converged = false;
    double cost = 0.0, cost0 = 0.0;  // final and initial (after the warm rollout)
    double last_alpha = 0.0, last_decrease = 0.0, reg = 0.0;
    int line_search_fails = 0;
    bool cold = false;  // the cold start was used
  };

  /// Throws std::invalid_argument naming N (< 2), dt (<= 0, not finite) or integrator.
  FloatingSQP(const std::string& urdf_path, const std::vector<std::string>& contact_frames, int N, double dt,
              Integrator integ = Integrator::kSemiImplicit);
  ~FloatingSQP();

  const FloatingPlant& plant() const { return *plant_; }
  int N() const { return N_; }
  double dt() const { return dt_; }
  int nx() const { return plant_->nx(); }
  int ndx() const { return plant_->ndx(); }
  int nu() const { return plant_->nu(); }
  int nf() const { return 6 * plant_->nc(); }
  int nw() const { return nu() + nf(); }

  // ---- cost setters (std::invalid_argument naming the field on bad values) ----
  void set_state_weights(const Vec& w_running, const Vec& w_terminal);  // ndx each, >= 0
  void set_x_ref(const Mat& xref);           // nx x 1 (all knots) or nx x N (per knot)
  void set_u_cost(const Vec& r);             // nu, >= 0
  void set_u_ref(const Vec& uref);           // nu
  void set_fc_cost(const Vec& wf);           // nf, >= 0 (all zero only with the friction term on)
  void set_fc_ref(const Vec& ref);           // nf, [n; f] per frame
  void set_contact_pos_cost(double weight, const Mat& targets);  // 3nc x 1 or 3nc x N
  void set_friction(double mu, double fz_min, double weight);     // weight 0: off
  void set_max_alpha_halvings(int n) { max_halvings_ = n; }
  /// A known external wrench on the base in the dynamics of the intervals k < knots (-1: all
  /// N-1): w (6) = world-aligned force (N) and torque (N m) at the base frame origin
  /// (FloatingPlant::set_base_wrench). All zeros: none (plans bit-identical to a solver without
  /// it). One wrench per solve (e.g. a hypothesis of the push acting on the robot now).
  void set_base_wrench(const Vec& w, int knots = -1) {
    if (w.size() != 6) throw std::invalid_argument("base_wrench: expected 6 entries, got " + std::to_string(w.size()));
    FloatingPlant::check_finite(w.data(), 6, "base_wrench");
    if (knots < -1) throw std::invalid_argument("knots: expected -1 (all) or a count >= 0, got " + std::to_string(knots));
    bw_ = w;
    bw_knots_ = knots;
    bw_on_ = !w.isZero(0.0) && knots != 0;
  }
  const Vec& base_wrench() const { return bw_; }
  int base_wrench_knots() const { return bw_knots_; }

  // ---- hard rows (std::invalid_argument naming the field on bad values) ----
  /// Validates and appends g (its lam is reset to zeros); returns its index.
  int add_row_group(RowGroup g);
  const std::vector<RowGroup>& row_groups() const { return groups_; }
  void set_row_group_targets(int g, const Mat& targets);  // kContactPos: 3nc x 1 or 3nc x N
  void set_row_group_rho(int g, double rho);
  void set_row_group_mech(int g, int mech);
  void clear_row_groups() { groups_.clear(); }
  void reset_duals();
  /// outer_iters >= 1 multiplier updates per solve (stop early when every AL group's violation
  /// <= tol), rho x growth (>= 1) for a group whose violation did not fall 4x, capped at rho_max.
  void set_al(int outer_iters, double tol, double growth, double rho_max);
  /// Row values g (m) of group gi at knot k; Jx (m x ndx, tangent; zero for kFc), Jw (m x nw).
  void row_values(int gi, int k, const double* x, const double* w, Vec& g, Mat* Jx, Mat* Jw) const;
  bool row_active(const RowGroup& G, int k) const;
  /// The max violation of group gi over its knots at (X, W).
  double row_violation(int gi, const Mat& X, const Mat& W) const;
  /// lam <- the PHR update at (X, W) for every AL group.
  void update_duals(const Mat& X, const Mat& W) const;  // the multipliers are solver state

  // ---- evaluation (for the solver and its tests) ----
  /// Cost of knot k (0 <= k < N) at x (nx) and, for k < N-1, w (nw; ignored at N-1).
  /// gx (ndx), gw (nw), Hxx, Hww: its gradient (tangent of x) and GN Hessian (null: skipped).
  double knot_cost(int k, const double* x, const double* w, Vec* gx, Vec* gw, Mat* Hxx, Mat* Hww) const;
  /// X (nx x N) = the rollout of W (nw x N-1) from x0; returns the total cost.
  double rollout(const double* x0, const Mat& W, Mat& X) const;
  /// The LQ subproblem at (X, W) (X a rollout of W).
  void linearize(const Mat& X, const Mat& W, LQ& lq) const;
  /// The Riccati pass on lq with every Hww + reg I (the exact solution of that regularized LQ
  /// subproblem): feedforward kff (nw x N-1), gains K (N-1 of nw x ndx);
  /// returns false when a Qww is not positive definite. dV1, dV2: the predicted decrease terms.
  bool riccati(const LQ& lq, double reg, Mat& kff, std::vector<Mat>& K, double& dV1, double& dV2) const;
  /// The step of the LQ subproblem: dX (ndx x N, dX_0 = 0), dW (nw x N-1) from kff / K.
  void lq_step(const LQ& lq, const Mat& kff, const std::vector<Mat>& K, Mat& dX, Mat& dW) const;

  /// The "hold" control w (nw) at x: the next velocity is v' = (1 - damping) v (damping 0: zero
  /// acceleration; exact, a is affine in w), closest to (u_ref, fc_ref) in the control and fc
  /// weights (a weight below 1e-8 counts as 1e-8):
  /// w = w_ref + W^-1 Bv^T (Bv W^-1 Bv^T)^-1 ((1 - damping) v - v'(w_ref)), Bv = dv'/dw.
  /// The base wrench is the one of interval k (set_base_wrench).
  void hold_controls(const double* x, double* w, double damping = 0.0, int k = 0) const;
  /// The cold start: X, W the rollout from x0 of w_k = hold_controls(x_k, 0.5) (a hold that
  /// halves the velocity each knot: an open-loop constant control diverges within a few knots).
  void cold_start(const double* x0, Mat& X, Mat& W) const;
  /// Gauss-Newton SQP from x0 with the controls W (nw x N-1) as the warm start; on return
  /// X (nx x N) and W hold the solution, K (N-1 gains, nw x ndx) its feedback. Stops when
  /// the predicted decrease is below tol (relative to the cost) or after max_iters.
  /// Warm start as a policy: when X comes in with N columns and K with N-1 gains (a previous
  /// solve's plan, e.g. shifted by one knot), the first rollout is the closed loop
  /// w_k = W_k + K_k (x_k (-) X_k) (open-loop controls from a perturbed x0 diverge within a
  /// few knots on a legged robot); otherwise the open-loop rollout of W. With try_cold, the
  /// cold start (cold_start) replaces the warm one when its cost is lower.
  Result solve(const double* x0, Mat& X, Mat& W, std::vector<Mat>& K, int max_iters, double tol,
               bool try_cold = false) const;

 private:
  std::unique_ptr<FloatingPlant> plant_;
  FloatingPlant::DataPtr data_;
  int N_;
  double dt_;
  Integrator integ_;
  Vec wx_, wxN_, r_, uref_, wf_, fref_;
  Mat xref_;            // nx x 1 or nx x N
  double wp_ = 0.0;
  Mat ptgt_;            // 3nc x 1 or 3nc x N
  double mu_ = 0.7, fzmin_ = 0.0, wcone_ = 0.0;
  int max_halvings_ = 10;
  Vec bw_ = Vec::Zero(6);  // set_base_wrench
  int bw_knots_ = -1;
  bool bw_on_ = false;
  /// Points the plant's base wrench at interval k's (set_base_wrench) before a step there.
  void wrench_at(int k) const {
    plant_->set_base_wrench(*data_, bw_on_ && (bw_knots_ < 0 || k < bw_knots_) ? bw_.data() : nullptr);
  }
  mutable Vec fplant_;  // scratch: fc in the plant's (f; n) order
  mutable Vec p_;
  mutable Mat J_, Ax_, Bu_, Bf_;
  mutable std::vector<RowGroup> groups_;  // mutable: solve updates the multipliers
  int al_outer_ = 1;
  double al_tol_ = 1e-6, al_growth_ = 10.0, al_rho_max_ = 1e8;
  mutable std::vector<double> rho_scale_;  // per group, this solve's growth

  double al_terms(int k, const double* x, const double* w, Vec* gx, Vec* gw, Mat* Hxx, Mat* Hww) const;
  double total_cost(const Mat& X, const Mat& W) const;
  void sqp_loop(Mat& X, Mat& W, std::vector<Mat>& K, int max_iters, double tol, Result& res, double& cost,
                double& reg) const;

  const double* fc_to_plant(const double* fc) const;
  const double* xref_at(int k) const { return xref_.col(xref_.cols() == 1 ? 0 : k).data(); }
};

}  // namespace gato
