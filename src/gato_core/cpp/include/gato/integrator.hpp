// Discrete dynamics x+ = f(x, u) over one knot interval and its Jacobians, for
// the three integrators of docs/solver_method.md ("Dynamics").
#pragma once

#include <Eigen/Core>

#include "gato/plant.hpp"
#include "gato/types.hpp"

namespace gato {

/// Preallocated scratch for one thread's dynamics evaluations (nv-sized).
template <typename S>
struct DynamicsScratch {
  explicit DynamicsScratch(int nv)
      : qdd(nv), Qq(nv, nv), Qv(nv, nv), Minv(nv, nv), xs(2 * nv), k(4, VecX<S>(2 * nv)),
        Jk(2 * nv, 2 * nv), Uk(2 * nv, nv), dxs(2 * nv, 2 * nv), dus(2 * nv, nv),
        dk(4, MatX<S>(2 * nv, 2 * nv)), duk(4, MatX<S>(2 * nv, nv)) {}
  VecX<S> qdd;
  MatX<S> Qq, Qv, Minv;
  // RK4 stages
  VecX<S> xs;
  std::vector<VecX<S>> k;
  MatX<S> Jk, Uk, dxs, dus;
  std::vector<MatX<S>> dk, duk;
};

/// One step of the plant: xn = f(x, u). fext: nullptr or 6*nbodies numbers.
/// ee (nullable): the EE position at x, from the same kinematics pass.
template <typename S>
void dynamics_step(const Plant<S>& plant, PlantWorkspace<S>& ws, DynamicsScratch<S>& s,
                   Integrator integ, S h, const S* x, const S* u, const S* fext, S* xn,
                   S* ee = nullptr) {
  const int nv = plant.nv(), nx = 2 * nv;
  Eigen::Map<const VecX<S>> X(x, nx);
  Eigen::Map<VecX<S>> XN(xn, nx);
  if (integ == Integrator::kRk4) {
    auto deriv = [&](const S* xi, VecX<S>& out, S* ee_out) {
      plant.forward_dynamics(ws, xi, xi + nv, u, fext, s.qdd.data(), ee_out);
      out.head(nv) = Eigen::Map<const VecX<S>>(xi + nv, nv);
      out.tail(nv) = s.qdd;
    };
    deriv(x, s.k[0], ee);
    s.xs.noalias() = X + (h / 2) * s.k[0];
    deriv(s.xs.data(), s.k[1], nullptr);
    s.xs.noalias() = X + (h / 2) * s.k[1];
    deriv(s.xs.data(), s.k[2], nullptr);
    s.xs.noalias() = X + h * s.k[2];
    deriv(s.xs.data(), s.k[3], nullptr);
    XN.noalias() = X + (h / 6) * (s.k[0] + 2 * s.k[1] + 2 * s.k[2] + s.k[3]);
    return;
  }
  plant.forward_dynamics(ws, x, x + nv, u, fext, s.qdd.data(), ee);
  auto q = X.head(nv);
  auto v = X.tail(nv);
  XN.tail(nv).noalias() = v + h * s.qdd;
  if (integ == Integrator::kEuler) {
    XN.head(nv).noalias() = q + h * v + (h * h / 2) * s.qdd;
  } else {
    XN.head(nv).noalias() = q + h * XN.tail(nv);
  }
}

/// The Euler / semi-implicit Euler step and its Jacobians from the continuous
/// ones in s (qdd, Qq = dqdd/dq, Qv = dqdd/dqd, Minv = dqdd/dtau) at x:
/// xn = f(x, u), A = df/dx, B = df/du.
template <typename S, typename MA, typename MB>
void euler_linearize(Integrator integ, S h, int nv, const S* x, const DynamicsScratch<S>& s,
                     S* xn, MA& A, MB& B) {
  Eigen::Map<const VecX<S>> X(x, 2 * nv);
  Eigen::Map<VecX<S>> XN(xn, 2 * nv);
  auto q = X.head(nv);
  auto v = X.tail(nv);
  XN.tail(nv).noalias() = v + h * s.qdd;
  // Position rows scale with c2 (h^2/2 for constant acceleration, h^2 for
  // semi-implicit Euler, whose position update uses the new velocity).
  const S c2 = integ == Integrator::kEuler ? h * h / 2 : h * h;
  XN.head(nv).noalias() = q + h * v + c2 * s.qdd;
  A.topLeftCorner(nv, nv) = c2 * s.Qq;
  A.topLeftCorner(nv, nv).diagonal().array() += S(1);
  A.topRightCorner(nv, nv) = c2 * s.Qv;
  A.topRightCorner(nv, nv).diagonal().array() += h;
  A.bottomLeftCorner(nv, nv) = h * s.Qq;
  A.bottomRightCorner(nv, nv) = h * s.Qv;
  A.bottomRightCorner(nv, nv).diagonal().array() += S(1);
  B.topRows(nv) = c2 * s.Minv;
  B.bottomRows(nv) = h * s.Minv;
}

/// xn = f(x, u) with A = df/dx (nx x nx) and B = df/du (nx x nu); ee / J
/// (nullable): the EE position and its Jacobian at x, from the same pass.
template <typename S, typename MA, typename MB>
void dynamics_linearize(const Plant<S>& plant, PlantWorkspace<S>& ws, DynamicsScratch<S>& s,
                        Integrator integ, S h, const S* x, const S* u, const S* fext, S* xn,
                        MA& A, MB& B, S* ee = nullptr, MatX<S>* J = nullptr) {
  const int nv = plant.nv(), nx = 2 * nv;
  Eigen::Map<const VecX<S>> X(x, nx);
  Eigen::Map<VecX<S>> XN(xn, nx);
  if (integ == Integrator::kRk4) {
    // Stage i: k_i = F(x_i), dk_i/dx = J_i dx_i/dx, dk_i/du = J_i dx_i/du + U_i.
    const S c[4] = {S(0), h / 2, h / 2, h};
    for (int i = 0; i < 4; ++i) {
      if (i == 0) {
        s.xs = X;
      } else {
        s.xs.noalias() = X + c[i] * s.k[i - 1];
      }
      plant.forward_dynamics_derivatives(ws, s.xs.data(), s.xs.data() + nv, u, fext,
                                         s.qdd.data(), s.Qq, s.Qv, s.Minv, i == 0 ? ee : nullptr,
                                         i == 0 ? J : nullptr);
      s.k[i].head(nv) = s.xs.tail(nv);
      s.k[i].tail(nv) = s.qdd;
      s.Jk.setZero();
      s.Jk.topRightCorner(nv, nv).setIdentity();
      s.Jk.bottomLeftCorner(nv, nv) = s.Qq;
      s.Jk.bottomRightCorner(nv, nv) = s.Qv;
      if (i == 0) {
        s.dk[0] = s.Jk;
        s.duk[0].setZero();
        s.duk[0].bottomRows(nv) = s.Minv;
      } else {
        s.dxs.setIdentity();
        s.dxs.noalias() += c[i] * s.dk[i - 1];
        s.dk[i].noalias() = s.Jk * s.dxs;
        s.dus.noalias() = c[i] * s.duk[i - 1];
        s.duk[i].noalias() = s.Jk * s.dus;
        s.duk[i].bottomRows(nv) += s.Minv;
      }
    }
    XN.noalias() = X + (h / 6) * (s.k[0] + 2 * s.k[1] + 2 * s.k[2] + s.k[3]);
    A.setIdentity();
    A.noalias() += (h / 6) * (s.dk[0] + 2 * s.dk[1] + 2 * s.dk[2] + s.dk[3]);
    B.noalias() = (h / 6) * (s.duk[0] + 2 * s.duk[1] + 2 * s.duk[2] + s.duk[3]);
    return;
  }
  plant.forward_dynamics_derivatives(ws, x, x + nv, u, fext, s.qdd.data(), s.Qq, s.Qv, s.Minv, ee, J);
  euler_linearize(integ, h, nv, x, s, xn, A, B);
}

}  // namespace gato
