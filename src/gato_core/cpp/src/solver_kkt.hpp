// The KKT assembly of BatchSolverImpl (docs/solver_method.md, steps 1-2): the
// stage cost's two paths over the cost terms of src/cost_terms.hpp, setup_kkt and
// the multi-lane linearization of the knots. Included by solver_impl.hpp only.
#pragma once

namespace gato {

template <typename S, int NV>
const S* BatchSolverImpl<S, NV>::fext_ptr(int b, int k) const {
  if (!has_fext_) return nullptr;
  return fext_.data() + (size_t(b) * N_ + k) * 6 * plant_->nbodies();
}

// Value of l_k at (x, u) (u null at the last knot) given the EE position ee: the
// value-only path of the cost terms (src/cost_terms.hpp), summed per knot.
template <typename S, int NV>
S BatchSolverImpl<S, NV>::stage_cost_value(int k, const S* x, const S* u, const S* ee,
                                           const S* ref, const S* uref, const S* rot,
                                           const S* rref, const S* elog) const {
  using Derivs = cost::KnotDerivs<MatXX, VecNX, MatUU, VecNU>;
  const cost::Knot<S, MatJ> p{k,    x,   u,       ee,  ref + 6 * k, nullptr, uref, nullptr, rot,
                              nullptr, rref ? rref + 9 * k : nullptr, elog};
  S l = 0;
  cost::StageCost<S, NV>::template add<false>(cost_, p, l, static_cast<Derivs*>(nullptr));
  return l;
}

template <typename S, int NV>
S BatchSolverImpl<S, NV>::setup_kkt(Entry& e) {
  const int nv = nv_, nx = nx_;
  const bool kkt_lanes = use_kkt_lanes();
  const bool rot_lanes = cost_.rot_on() && lean_rot();
  const S* rref = cost_.rot_on() ? e.rref.update(e.ref, N_) : nullptr;  // R_ref per knot
  S cost = 0, defect = 0;
  for (int k = 0; k < N_; ++k) {
    const S* x = e.x(k);
    MatXX& Q = e.Q[k];
    VecNX& q = e.qv[k];
    Vec3& ee = e.ee[k];
    // Dynamics first: the same kinematics pass yields the EE position and Jacobian.
    if (kkt_lanes) {
      const int W = lk_.W, l = k % W;
      if (l == 0) linearize_lanes(e, k);
      for (int r = 0; r < 3; ++r) {
        ee[r] = e.lanes.kee[r * W + l];
        for (int j = 0; j < nv; ++j) e.J(r, j) = e.lanes.kJ[(r * nv + j) * W + l];
      }
      if (k < N_ - 1) {
        auto& d = e.dyn;
        for (int i = 0; i < nv; ++i) {
          d.qdd[i] = e.lanes.kqdd[i * W + l];
          for (int j = 0; j < nv; ++j) {
            const int o = (i * nv + j) * W + l;
            d.Qq(i, j) = e.lanes.kdq[o];
            d.Qv(i, j) = e.lanes.kdv[o];
            d.Minv(i, j) = e.lanes.kMi[o];
          }
        }
        euler_linearize(set_.integrator, dt_, nv, x, d, e.xnext.data(), e.A[k], e.Bm[k]);
        e.c[k + 1] = Eigen::Map<const VecNX>(e.x(k + 1), nx) - e.xnext;
        defect += e.c[k + 1].template lpNorm<1>();
      }
    } else if (k < N_ - 1) {
      dynamics_linearize(*plant_, *e.ws, e.dyn, set_.integrator, dt_, x, e.u(k), fext_ptr(e.b, k),
                         e.xnext.data(), e.A[k], e.Bm[k], ee.data(), &e.Jdyn);
      e.J = e.Jdyn;
      e.c[k + 1] = Eigen::Map<const VecNX>(e.x(k + 1), nx) - e.xnext;
      defect += e.c[k + 1].template lpNorm<1>();
    } else {
      plant_->ee_position_jacobian(*e.ws, x, ee.data(), e.Jdyn);
      e.J = e.Jdyn;
    }
    // The cost terms' values and Gauss-Newton blocks (src/cost_terms.hpp), summed into
    // the merit in term order.
    cost::Knot<S, MatJ> p{k, x, k < N_ - 1 ? e.u(k) : nullptr, ee.data(), e.ref + 6 * k, &e.J};
    cost::KnotDerivs<MatXX, VecNX, MatUU, VecNU> der{Q, q, k < N_ - 1 ? &e.R[k] : nullptr,
                                                     k < N_ - 1 ? &e.rv[k] : nullptr};
    if (gravity_on() && k < N_ - 1) {
      // u_ref = gravity: g(q_k) and dg/dq (pinocchio) for the control term and its cross block.
      plant_->gravity(*e.ws, x, e.ug[k].data(), &e.dg_dyn);
      e.dg[k] = e.dg_dyn;
      p.uref = e.ug[k].data();
      p.dg = e.dg[k].data();
      der.Suq = &e.Suq[k];
    }
    if (rot_lanes) {
      // The orientation term: EE rotation and world angular Jacobian of W knots per
      // multi-lane forward-kinematics pass.
      const int W = lk_.W, l = k % W;
      if (l == 0) rotation_lanes(e, k);
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) e.Rot[k](r, c) = e.lanes.krot[(3 * r + c) * W + l];
        for (int j = 0; j < nv; ++j) e.Jw(r, j) = e.lanes.kJw[(r * nv + j) * W + l];
      }
      p.rot = e.Rot[k].data();
      p.Jw = &e.Jw;
      p.rref = rref + 9 * k;
    } else if (cost_.rot_on()) {
      // The same from pinocchio (no lean model, or lean dynamics off).
      plant_->ee_rotation(*e.ws, x, e.Rot[k].data(), &e.Jw_dyn);
      e.Jw = e.Jw_dyn;
      p.rot = e.Rot[k].data();
      p.Jw = &e.Jw;
      p.rref = rref + 9 * k;
    }
    cost::StageCost<S, NV>::template add<true>(cost_, p, cost, &der);
  }
  e.c[0] = Eigen::Map<const VecNX>(e.x(0), nx) - Eigen::Map<const VecNX>(e.xs, nx);
  defect += e.c[0].template lpNorm<1>();
  if (!groups_.empty()) {
    e.rows.Jee = e.J;  // the loop ends at knot N-1
    cost += rows_cost(e, e.xu.data(), e.ee[N_ - 1].data(), true, false);
  }
  // The exact Hessian's second-order terms with the multipliers of the last step.
  if (eh_) second_order(e, e.lam.data());
  return cost + e.mu * defect;
}

// Dynamics derivatives and EE kinematics of knots k0 .. k0 + W - 1 in one
// call of the multi-lane lean kernel (lane l = knot k0 + l). The last knot has
// no control: it runs with u = 0 and only its EE position and Jacobian are
// used. Lanes past the last knot repeat it.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::linearize_lanes(Entry& e, int k0) {
  const int W = lk_.W, nv = nv_, nf = 6 * plant_->nbodies();
  for (int l = 0; l < W; ++l) {
    const int k = std::min(k0 + l, N_ - 1);
    const S* x = e.x(k);
    const bool has_u = k < N_ - 1;
    for (int j = 0; j < nv; ++j) {
      e.lanes.kq[j * W + l] = x[j];
      e.lanes.kv[j * W + l] = x[nv + j];
      e.lanes.ku[j * W + l] = has_u ? e.u(k)[j] : S(0);
    }
    if (has_fext_) {
      const S* f = fext_ptr(e.b, k);
      for (int i = 0; i < nf; ++i) e.lanes.kf[i * W + l] = f[i];
    }
  }
  lk_.derivs(lview_, e.lanes.lscr.data(), e.lanes.kq.data(), e.lanes.kv.data(), e.lanes.ku.data(),
             has_fext_ ? e.lanes.kf.data() : nullptr, e.lanes.kqdd.data(), e.lanes.kdq.data(), e.lanes.kdv.data(),
             e.lanes.kMi.data(), e.lanes.kee.data(), e.lanes.kJ.data());
}

}  // namespace gato
