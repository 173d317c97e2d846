// The stage cost l_k of BatchSolverImpl as components (docs/solver_method.md, "Cost at
// knot k" and "Cost terms as components"). Each term writes its value, gradient and
// Gauss-Newton Hessian in one function, `add<D>`: D = false is the value-only path of the
// line search (the derivative code is compiled out), D = true the KKT stage's
// value-plus-derivatives path (crocoddyl's calc / calcDiff in one place). StageCost composes
// the registered terms per knot; CostModel is what they read, shared by every batch entry.
//
// Adding a term: write a struct like the ones below and add it to one of the lists in
// StageCost (DenseTerms: terms on the position block through the EE kinematics; StateTerms /
// ControlTerms: separable terms with a diagonal Hessian on one state / control coordinate).
// A term that needs kinematics the dynamics pass does not produce yet (orientation, a
// collision distance) also needs that quantity added to Knot.
//
// Order of the sums: the value is accumulated into `acc` term by term in list order (state
// terms joint by joint, all of a joint's terms before the next joint's), the order the
// solver always used. `acc` is the knot's own sum on the line-search path and the running
// merit on the KKT path (as before), so the two agree to rounding, not bit for bit.
// Included by solver_impl.hpp only.
#pragma once

#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gato/barrier.hpp"
#include "gato/types.hpp"
#include "so3.hpp"

namespace gato {
namespace cost {

/// Which coordinate of the knot a separable term acts on.
enum class Var { kQ, kV, kU };

/// The part of the problem every batch entry shares (read-only during a solve): the scalar
/// weights of Settings, the per-knot table, the per-joint control and posture vectors and the
/// margin-shrunk limit boxes. Weights stay double and are cast at use, as the solver always did.
template <typename S, int NV>
struct CostModel {
  using VecNV = Eigen::Matrix<S, NV, 1>;
  int N = 0, nv = 0, nu = 0;
  double q_cost = 0, qd_cost = 0, u_cost = 0, N_cost = 0;           // Settings scalars
  double q_lim_cost = 0, vel_lim_cost = 0, ctrl_lim_cost = 0;       // barrier weights
  std::vector<double> knot_w;  // N x 3 [ee, qd, u] per knot, empty = the scalars
  std::vector<double> u_vec;   // nu per-joint control weights, empty = the scalar / table
  std::vector<double> q_pos_w, q_nom;  // posture anchor weights and target (nv, or N x nv per knot)
  VecNV lo_q, hi_q, max_qd, max_u;    // barrier boxes (URDF box shrunk by kLimitMargin)
  bool u_ref_gravity = false;         // Settings::u_ref: the control term penalises u - g(q)
  double rot_cost = 0, N_rot_cost = 0;  // orientation weights, running / terminal [1/rad^2]
  double rot_axis[3] = {1, 1, 1};       // per-axis factors (tool frame), set_rot_axis_weights
  std::vector<double> rot_knot_w;       // N per-knot orientation weights, empty = the scalars

  void set_weights(const Settings& s) {
    q_cost = s.q_cost;
    qd_cost = s.qd_cost;
    u_cost = s.u_cost;
    N_cost = s.N_cost;
    q_lim_cost = s.q_lim_cost;
    vel_lim_cost = s.vel_lim_cost;
    ctrl_lim_cost = s.ctrl_lim_cost;
    u_ref_gravity = s.u_ref == URef::kGravity;
    rot_cost = s.rot_cost;
    N_rot_cost = s.N_rot_cost;
  }
  /// Orientation weight of knot k: the per-knot vector, else N_rot_cost at the last knot and
  /// rot_cost before.
  S rot_weight(int k) const {
    if (!rot_knot_w.empty()) return S(rot_knot_w[k]);
    return S(k == N - 1 ? N_rot_cost : rot_cost);
  }
  /// Whether any knot has an orientation term (the EE rotation is computed only then).
  bool rot_on() const {
    if (!rot_knot_w.empty()) {
      for (double w : rot_knot_w)
        if (w > 0) return true;
      return false;
    }
    return rot_cost > 0 || N_rot_cost > 0;
  }
  /// EE weight w_k: the table's column 0, else N_cost at the last knot and q_cost before.
  S ee_weight(int k) const {
    if (!knot_w.empty()) return S(knot_w[3 * k]);
    return S(k == N - 1 ? N_cost : q_cost);
  }
  /// Velocity weight v_k.
  S qd_weight(int k) const { return S(knot_w.empty() ? qd_cost : knot_w[3 * k + 1]); }
  /// Control weight s_kj (the per-joint vector is the most specific setting).
  S u_weight(int k, int j) const {
    if (!u_vec.empty()) return S(u_vec[j]);
    return S(knot_w.empty() ? u_cost : knot_w[3 * k + 2]);
  }
};

/// The knot a term is evaluated at: x (nx), u (nu; null at the last knot), the EE position
/// p(q) (3), the reference p_ref,k (3) and, for the derivatives only, the EE Jacobian (3 x nv).
/// uref (nu; null = zero): the control reference g(q_k) of u_ref = gravity, and for the
/// derivatives dg (nv x nv, column-major, dg[i + nv j] = dg_i/dq_j).
template <typename S, typename MatJ>
struct Knot {
  int k;
  const S* x;
  const S* u;
  const S* ee;
  const S* ref;
  const MatJ* J;
  const S* uref = nullptr;
  const S* dg = nullptr;
  // The orientation term: the EE rotation (3 x 3 column-major, world <- EE; null when no knot
  // has an orientation weight) and, for the derivatives, the world angular Jacobian (3 x nv).
  const S* rot = nullptr;
  const MatJ* Jw = nullptr;
  // Optional: R_ref (3 x 3 column-major, exp of ref[3:6]) cached by the solver, and on the
  // value-only path the orientation error e = log(R_refᵀ R) computed by the caller.
  const S* rref = nullptr;
  const S* elog = nullptr;
};

/// Where the derivatives go (D = true): the stage blocks Q (nx x nx), q (nx), R (nu x nu),
/// r (nu); R and r are null at the last knot. Suq (nu x nv; null unless the knot has a
/// control reference): the Gauss-Newton cross block d2l/du dq of the control term.
template <typename MatXX, typename VecNX, typename MatUU, typename VecNU>
struct KnotDerivs {
  MatXX& Q;
  VecNX& q;
  MatUU* R;
  VecNU* r;
  MatUU* Suq = nullptr;
};

// ---------------------------------------------------------------------------------------
// Dense terms: act on the position block through the EE kinematics. `first` is true for the
// first dense term of the list, which assigns the position block instead of adding to it
// (Q and q are zeroed before the terms run).

/// EE position tracking: ½ w_k ‖p(q) − p_ref‖², gradient w_k Jᵀ(p − p_ref), Gauss-Newton
/// Hessian w_k JᵀJ.
template <typename S, int NV>
struct EePositionTerm {
  using Vec3 = Eigen::Matrix<S, 3, 1>;
  template <bool D, bool first, typename Model, typename K, typename Der>
  static void add(const Model& m, const K& p, S& acc, Der* der) {
    static_assert(first, "EePositionTerm assigns the position block: register it first");
    const S w = m.ee_weight(p.k);
    const Vec3 d = Eigen::Map<const Vec3>(p.ee) - Eigen::Map<const Vec3>(p.ref);
    for (int i = 0; i < 3; ++i) acc += S(0.5) * w * d[i] * d[i];
    if constexpr (D) {
      const auto& J = *p.J;
      if constexpr (NV == Eigen::Dynamic) {
        const int nv = m.nv;
        der->Q.topLeftCorner(nv, nv).noalias() = w * J.transpose() * J;
        der->q.head(nv).noalias() = w * J.transpose() * d;
      } else {
        der->Q.template topLeftCorner<NV, NV>().noalias() = w * J.transpose() * J;
        der->q.template head<NV>().noalias() = w * J.transpose() * d;
      }
    }
  }
};

/// R_ref,k = exp(ref[3:6] of knot k) (column-major) for the orientation term, cached per batch
/// entry: update() recomputes a knot only where its rotation-vector slots changed since the
/// last call (the same exp, so the same bits; a NaN slot always recomputes). Sized once
/// (size(N)) outside the solve.
template <typename S>
struct RefRotations {
  std::vector<S> key, R;  // N x 3 slots, N x 9 rotations
  void size(int N) {
    key.assign(size_t(N) * 3, std::numeric_limits<S>::quiet_NaN());
    R.assign(size_t(N) * 9, S(0));
  }
  /// ref: N x 6 (the solver's reference of one entry); returns N x 9.
  const S* update(const S* ref, int N) {
    for (int k = 0; k < N; ++k) {
      const S* r = ref + 6 * k + 3;
      S* kk = key.data() + 3 * k;
      if (kk[0] == r[0] && kk[1] == r[1] && kk[2] == r[2]) continue;
      Eigen::Map<so3::M3<S>>(R.data() + 9 * k) = so3::exp<S>(so3::V3<S>(r[0], r[1], r[2]));
      kk[0] = r[0];
      kk[1] = r[1];
      kk[2] = r[2];
    }
    return R.data();
  }
};

/// EE orientation tracking: ½ w_k Σ_a c_a e_a², e = log(R_refᵀ R(q)) (rad, tool frame),
/// R_ref = exp(ref[3:6]) (the reference's rotation vector, world frame), c the per-axis
/// factors. Gauss-Newton with J_e = Jr⁻¹(e) Rᵀ J_ω (J_ω the world angular Jacobian):
/// gradient J_eᵀ (w c ∘ e), Hessian J_eᵀ diag(w c) J_e. Not evaluated while w_k = 0.
/// R_ref comes from p.rref where the solver caches it (else exp here); on the value-only
/// path p.elog, where given, is e itself (the line search's lanes compute it, atan2 in lanes).
/// Jr⁻¹(e) shares the log map's sin / cos (so3::log's jc): one atan2 per knot.
template <typename S, int NV>
struct EeOrientationTerm {
  using V3 = so3::V3<S>;
  using M3 = so3::M3<S>;
  template <bool D, bool first, typename Model, typename K, typename Der>
  static void add(const Model& m, const K& p, S& acc, Der* der) {
    static_assert(!first, "EeOrientationTerm adds to the position block: register it after EePositionTerm");
    const S w = m.rot_weight(p.k);
    if (!(w > S(0))) return;
    V3 e;
    S jc = 0;
    if (!D && p.elog) {
      e = Eigen::Map<const V3>(p.elog);
    } else {
      const M3 R = Eigen::Map<const M3>(p.rot);
      const M3 Rt = p.rref ? M3(Eigen::Map<const M3>(p.rref))
                           : so3::exp<S>(V3(p.ref[3], p.ref[4], p.ref[5]));
      e = so3::log<S>(M3(Rt.transpose() * R), D ? &jc : nullptr);
    }
    V3 we;
    for (int a = 0; a < 3; ++a) {
      we[a] = w * S(m.rot_axis[a]) * e[a];
      acc += S(0.5) * we[a] * e[a];
    }
    if constexpr (D) {
      const M3 A = so3::jr_inv<S>(e, jc) * Eigen::Map<const M3>(p.rot).transpose();
      using MatJ = std::decay_t<decltype(*p.Jw)>;
      const MatJ Je = A * (*p.Jw);
      MatJ WJ = Je;
      for (int a = 0; a < 3; ++a) WJ.row(a) *= w * S(m.rot_axis[a]);
      if constexpr (NV == Eigen::Dynamic) {
        const int nv = m.nv;
        der->Q.topLeftCorner(nv, nv).noalias() += Je.transpose() * WJ;
        der->q.head(nv).noalias() += Je.transpose() * (we);
      } else {
        der->Q.template topLeftCorner<NV, NV>().noalias() += Je.transpose() * WJ;
        der->q.template head<NV>().noalias() += Je.transpose() * (we);
      }
    }
  }
};

// ---------------------------------------------------------------------------------------
// Separable terms: one coordinate z of block `var` (joint j), value into acc, gradient into
// *g and Hessian diagonal into *h (D = true only; null otherwise). Constructed once per knot
// (per-knot weights are looked up there).

/// Posture anchor ½ a_kj (q_j − q_nom,kj)². q_pos_w and q_nom hold one row (nv: every knot the
/// same) or one row per knot (N x nv, row-major: a joint trajectory to track), independently.
template <typename S, int NV>
struct PostureTerm {
  static constexpr Var var = Var::kQ;
  const double* a;   // knot k's weight row
  const double* qn;  // knot k's target row
  PostureTerm(const CostModel<S, NV>& m, int k)
      : a(m.q_pos_w.data() + (m.q_pos_w.size() > size_t(m.nv) ? size_t(k) * m.nv : 0)),
        qn(m.q_nom.data() + (m.q_nom.size() > size_t(m.nv) ? size_t(k) * m.nv : 0)) {}
  template <bool D>
  void add(int j, S z, S& acc, S* g, S* h) const {
    const S a_j = S(a[j]);
    const S dq = z - S(qn[j]);
    acc += S(0.5) * a_j * dq * dq;
    if constexpr (D) {
      *h += a_j;
      *g += a_j * dq;
    }
  }
};

/// Joint velocity ½ v_k qd_j².
template <typename S, int NV>
struct VelocityTerm {
  static constexpr Var var = Var::kV;
  S vw;
  VelocityTerm(const CostModel<S, NV>& m, int k) : vw(m.qd_weight(k)) {}
  template <bool D>
  void add(int, S z, S& acc, S* g, S* h) const {
    acc += S(0.5) * vw * z * z;
    if constexpr (D) {
      *h += vw;
      *g += vw * z;
    }
  }
};

/// Control effort ½ s_kj (u_j − uref_j)², uref = 0 (u_ref = zero) or g(q_k) (u_ref = gravity:
/// StageCost passes z = u_j − g_j(q) and adds the q-derivatives through dg/dq, see
/// gravity_coupling).
template <typename S, int NV>
struct ControlTerm {
  static constexpr Var var = Var::kU;
  static constexpr bool kAboutURef = true;  // z is u_j − uref_j
  const CostModel<S, NV>& m;
  int k;
  ControlTerm(const CostModel<S, NV>& model, int knot) : m(model), k(knot) {}
  template <bool D>
  void add(int j, S z, S& acc, S* g, S* h) const {
    const S s = m.u_weight(k, j);
    acc += S(0.5) * s * z * z;
    if constexpr (D) {
      *h += s;
      *g += s * z;
    }
  }
};

/// Relaxed-log box barrier weight · β(z) on [lo', hi'] (gato/barrier.hpp); not evaluated
/// at all while its weight is 0. The box and weight of each block: BoxOf below.
template <typename S, int NV, Var V>
struct BarrierTerm {
  static constexpr Var var = V;
  const CostModel<S, NV>& m;
  S w;
  BarrierTerm(const CostModel<S, NV>& model, int)
      : m(model),
        w(S(V == Var::kQ ? model.q_lim_cost : V == Var::kV ? model.vel_lim_cost : model.ctrl_lim_cost)) {}
  template <bool D>
  void add(int j, S z, S& acc, S* g, S* h) const {
    if (!(w > 0)) return;
    S lo, hi;
    if constexpr (V == Var::kQ) {
      lo = m.lo_q[j];
      hi = m.hi_q[j];
    } else if constexpr (V == Var::kV) {
      lo = -m.max_qd[j];
      hi = m.max_qd[j];
    } else {
      lo = -m.max_u[j];
      hi = m.max_u[j];
    }
    acc += box_barrier<S>(z, lo, hi, w, g, h);  // g, h null on the value-only path
  }
};

template <typename... T>
struct TermList {};

/// Whether a control term acts on u − uref (kAboutURef) rather than on u (barriers: the box
/// is on the torque itself).
template <typename T, typename = void>
struct AboutURef : std::false_type {};
template <typename T>
struct AboutURef<T, std::void_t<decltype(T::kAboutURef)>> : std::bool_constant<T::kAboutURef> {};

// ---------------------------------------------------------------------------------------
/// l_k and, with D, its Gauss-Newton blocks: the registered terms composed per knot.
template <typename S, int NV>
struct StageCost {
  // The registered terms, in the order their values are summed.
  using DenseTerms = TermList<EePositionTerm<S, NV>, EeOrientationTerm<S, NV>>;
  using StateTerms = TermList<PostureTerm<S, NV>, BarrierTerm<S, NV, Var::kQ>, VelocityTerm<S, NV>,
                              BarrierTerm<S, NV, Var::kV>>;
  using ControlTerms = TermList<ControlTerm<S, NV>, BarrierTerm<S, NV, Var::kU>>;

  /// Adds l_k at p to acc. With D, also zeroes and fills der's blocks (R, r at k < N-1).
  template <bool D, typename K, typename Der>
  static void add(const CostModel<S, NV>& m, const K& p, S& acc, Der* der) {
    if constexpr (D) {
      der->Q.setZero();
      der->q.setZero();
    }
    dense<D>(m, p, acc, der, DenseTerms{});
    state<D>(m, p, acc, der, StateTerms{});
    if (p.u) {
      if constexpr (D) {
        der->R->setZero();
        der->r->setZero();
      }
      control<D>(m, p, acc, der, ControlTerms{});
      if constexpr (D) {
        if (p.uref) gravity_coupling(m, p, der);
      }
    }
  }

 private:
  template <bool D, typename K, typename Der, typename T0, typename... T>
  static void dense(const CostModel<S, NV>& m, const K& p, S& acc, Der* der, TermList<T0, T...>) {
    T0::template add<D, true>(m, p, acc, der);
    (T::template add<D, false>(m, p, acc, der), ...);
  }

  template <bool D, typename K, typename Der, typename... T>
  static void state(const CostModel<S, NV>& m, const K& p, S& acc, Der* der, TermList<T...>) {
    const std::tuple<T...> terms{T(m, p.k)...};
    const int nv = m.nv;
    for (int j = 0; j < nv; ++j) {
      std::apply([&](const auto&... t) { (one<D>(t, nv, j, p.x, acc, der), ...); }, terms);
    }
  }

  template <bool D, typename K, typename Der, typename... T>
  static void control(const CostModel<S, NV>& m, const K& p, S& acc, Der* der, TermList<T...>) {
    const std::tuple<T...> terms{T(m, p.k)...};
    for (int j = 0; j < m.nu; ++j) {
      std::apply([&](const auto&... t) { (one_u<D>(t, j, p.u, p.uref, acc, der), ...); }, terms);
    }
  }

  // The q-side of ½ Σ_j s_kj (u_j − g_j(q))² (u_ref = gravity), G = dg/dq, e = s ∘ (u − g):
  // gradient q_q −= Gᵀ e, Gauss-Newton Q_qq += Gᵀ diag(s) G and the cross block
  // S_uq = −diag(s) G (the u-side, s and e, came through ControlTerm). The solver
  // eliminates S_uq per knot before the Schur complement (docs/solver_method.md).
  template <typename K, typename Der>
  static void gravity_coupling(const CostModel<S, NV>& m, const K& p, Der* der) {
    using MatG = Eigen::Matrix<S, NV, NV>;
    using VecU = Eigen::Matrix<S, NV, 1>;
    const int nv = m.nv, nu = m.nu;
    const Eigen::Map<const MatG> G(p.dg, nv, nv);
    VecU s(nu), e(nu);
    for (int j = 0; j < nu; ++j) {
      s[j] = m.u_weight(p.k, j);
      e[j] = s[j] * (p.u[j] - p.uref[j]);
    }
    MatG sG = s.asDiagonal() * G;
    if constexpr (NV == Eigen::Dynamic) {
      der->q.head(nv).noalias() -= G.transpose() * e;
      der->Q.topLeftCorner(nv, nv).noalias() += G.transpose() * sG;
    } else {
      der->q.template head<NV>().noalias() -= G.transpose() * e;
      der->Q.template topLeftCorner<NV, NV>().noalias() += G.transpose() * sG;
    }
    *der->Suq = -sG;
  }

  // A state term on coordinate j of its block (q: x[j], qd: x[nv + j]).
  template <bool D, typename T, typename Der>
  static void one(const T& t, int nv, int j, const S* x, S& acc, Der* der) {
    const int i = T::var == Var::kQ ? j : nv + j;
    if constexpr (D) {
      t.template add<D>(j, x[i], acc, &der->q[i], &der->Q(i, i));
    } else {
      t.template add<D>(j, x[i], acc, nullptr, nullptr);
    }
  }

  // A control term on u_j (on u_j − uref_j for a term about the reference, with a reference).
  template <bool D, typename T, typename Der>
  static void one_u(const T& t, int j, const S* u, const S* uref, S& acc, Der* der) {
    S z = u[j];
    if constexpr (AboutURef<T>::value) {
      if (uref) z -= uref[j];
    }
    if constexpr (D) {
      t.template add<D>(j, z, acc, &(*der->r)[j], &(*der->R)(j, j));
    } else {
      t.template add<D>(j, z, acc, nullptr, nullptr);
    }
  }
};

}  // namespace cost
}  // namespace gato
