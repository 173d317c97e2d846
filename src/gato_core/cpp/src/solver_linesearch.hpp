// The merit of BatchSolverImpl's trial points (docs/solver_method.md, step 4):
// trial_merit (one step size, scalar dynamics), trial_merits_lanes (all step sizes
// through the multi-lane lean kernels, summed in the same order) and the public
// merit(). The choice among the step sizes is in iterate() (solver_iteration.hpp).
// Included by solver_impl.hpp only.
#pragma once

namespace gato {

namespace detail {
// (x1 + alpha dx1 - xn).lpNorm<1>() of a fixed 14-vector of doubles with xn's entries W apart
// (one lane of the rollouts' lane-minor XN), in the order of Eigen's reduction (3.4: 2-double
// packets (0, 1) ... (12, 13), summed (p0 + (p1 + p2)) + ((p3 + p4) + (p5 + p6)), then the
// packet's two halves), so the same bits as the copy into a VecNX and its lpNorm<1> without
// the copies (bench_solver_ab.py --identity checks it).
inline double l1_defect14(const double* x1, const double* dx1, double alpha, const double* xn, int W) {
  double d[14];
  for (int i = 0; i < 14; ++i) d[i] = std::abs(x1[i] + alpha * dx1[i] - xn[i * W]);
  const double ev = (d[0] + (d[2] + d[4])) + ((d[6] + d[8]) + (d[10] + d[12]));
  const double od = (d[1] + (d[3] + d[5])) + ((d[7] + d[9]) + (d[11] + d[13]));
  return ev + od;
}
}  // namespace detail

template <typename S, int NV>
S BatchSolverImpl<S, NV>::trial_merit(Entry& e, S alpha) {
  const int nx = nx_, nu = nu_;
  e.trial = e.xu;
  e.trial.noalias() += alpha * e.dz;
  S cost = 0, defect = 0;
  const S* rref = cost_.rot_on() ? e.rref.update(e.ref, N_) : nullptr;
  for (int k = 0; k < N_; ++k) {
    const S* x = e.trial.data() + k * (nx + nu);
    if (k < N_ - 1) {
      const S* u = x + nx;
      // One ABA pass gives f(x, u) and the EE position at x.
      dynamics_step(*plant_, *e.ws, e.dyn, set_.integrator, dt_, x, u, fext_ptr(e.b, k),
                    e.xnext.data(), e.ee[k].data());
      defect += (Eigen::Map<const VecNX>(x + nx + nu, nx) - e.xnext).template lpNorm<1>();
      cost += stage_cost_value(k, x, u, e.ee[k].data(), e.ref, gravity_ref(e, x, true), rotation_of(e, x),
                               rref);
    } else {
      plant_->frame_position(*e.ws, x, e.ee[k].data());
      cost += stage_cost_value(k, x, nullptr, e.ee[k].data(), e.ref, nullptr, rotation_of(e, x), rref);
    }
  }
  defect += (Eigen::Map<const VecNX>(e.trial.data(), nx) - Eigen::Map<const VecNX>(e.xs, nx))
                .template lpNorm<1>();
  if (!groups_.empty()) cost += rows_cost(e, e.trial.data(), e.ee[N_ - 1].data(), false, admm_.merit);
  const S m = cost + e.mu * defect;
  return std::isfinite(double(m)) ? m : std::numeric_limits<S>::infinity();
}

// trial_merit at every alpha of `alphas` (kLineSearchSteps of them), W at a time
// through the multi-lane lean kernels: the same sums in the same order as
// trial_merit, so the merits differ only by the rounding of the dynamics.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::trial_merits_lanes(Entry& e, const S* alphas, S* out) {
  constexpr int G = kLineSearchSteps;
  const int nx = nx_, nu = nu_, W = lk_.W;
  S cost[G] = {}, defect[G] = {}, ee_last[G][3] = {};
  S *X = e.lanes.lx.data(), *U = e.lanes.lu.data(), *XN = e.lanes.lxn.data(), *EE = e.lanes.lee.data();
  // The orientation term: the EE rotations from the same kinematics pass as the positions,
  // its error e = log(R_ref' R) of the W lanes at once (rot_logs: the angle's atan2 in lanes).
  S* RR = cost_.rot_on() ? e.lanes.lrot.data() : nullptr;
  const S* rref = RR ? e.rref.update(e.ref, N_) : nullptr;
  S elog[3 * kMaxLanes];
  void* scr = e.lanes.lscr.data();
  const bool lane_cost = lane_cost_ok();
  S lc[kMaxLanes];
  for (int k = 0; k < N_; ++k) {
    const S* x = e.xu.data() + k * (nx + nu);
    const S* dx = e.dz.data() + k * (nx + nu);
    const bool last = k == N_ - 1;
    for (int g0 = 0; g0 < G; g0 += W) {
      for (int i = 0; i < nx; ++i)
        for (int l = 0; l < W; ++l) X[i * W + l] = x[i] + alphas[g0 + l] * dx[i];
      if (!last) {
        for (int i = 0; i < nu; ++i)
          for (int l = 0; l < W; ++l) U[i * W + l] = x[nx + i] + alphas[g0 + l] * dx[nx + i];
        lk_.step(lview_, scr, int(set_.integrator), dt_, X, U, fext_ptr(e.b, k), XN, EE, RR);
      } else if (RR) {
        lk_.pose(lview_, scr, X, EE, RR, nullptr);  // q: the first nv rows of X
      } else {
        lk_.ee(lview_, scr, X, EE);
      }
      const bool rk = RR && cost_.rot_weight(k) > S(0);
      if (rk) rot_logs(RR, rref + 9 * k, elog);
      if (lane_cost) stage_cost_lanes(k, X, last ? nullptr : U, EE, e.ref, lc);
      for (int l = 0; l < W; ++l) {
        const int a = g0 + l;
        const S alpha = alphas[a];
        S ee[3] = {EE[l], EE[W + l], EE[2 * W + l]};
        const S* el = rk ? elog + 3 * l : nullptr;
        if (!lane_cost)
          for (int i = 0; i < nx; ++i) e.t_nx2[i] = X[i * W + l];
        if (!last) {
          const S* x1 = x + nx + nu;
          const S* dx1 = dx + nx + nu;
          if constexpr (NX == 14 && std::is_same_v<S, double>) {
            defect[a] += detail::l1_defect14(x1, dx1, alpha, XN + l, W);
          } else {
            for (int i = 0; i < nx; ++i) {
              e.t_nx[i] = x1[i] + alpha * dx1[i];
              e.xnext[i] = XN[i * W + l];
            }
            defect[a] += (e.t_nx - e.xnext).template lpNorm<1>();
          }
          if (lane_cost) {
            cost[a] += lc[l];
          } else {
            for (int i = 0; i < nu; ++i) e.t_nu[i] = U[i * W + l];
            cost[a] += stage_cost_value(k, e.t_nx2.data(), e.t_nu.data(), ee, e.ref,
                                        gravity_ref(e, e.t_nx2.data(), true), nullptr, nullptr, el);
          }
        } else {
          cost[a] += lane_cost ? lc[l]
                               : stage_cost_value(k, e.t_nx2.data(), nullptr, ee, e.ref, nullptr,
                                                  nullptr, nullptr, el);
          for (int i = 0; i < 3; ++i) ee_last[a][i] = ee[i];
        }
      }
    }
  }
  for (int a = 0; a < G; ++a) {
    const S alpha = alphas[a];
    for (int i = 0; i < nx; ++i) e.t_nx[i] = e.xu[i] + alpha * e.dz[i];
    defect[a] += (e.t_nx - Eigen::Map<const VecNX>(e.xs, nx)).template lpNorm<1>();
    if (!groups_.empty()) {
      e.trial = e.xu;
      e.trial.noalias() += alpha * e.dz;
      cost[a] += rows_cost(e, e.trial.data(), ee_last[a], false, admm_.merit);
    }
    const S m = cost[a] + e.mu * defect[a];
    out[a] = std::isfinite(double(m)) ? m : std::numeric_limits<S>::infinity();
  }
}

// stage_cost_value of the W lanes of X (nx x W), U (nu x W; null at the last knot) and EE
// (3 x W) into out (W) where lane_cost_ok(): the terms that are on (EE position, posture,
// velocity, control about zero) in StageCost's order (EE axes, then per joint posture and
// velocity, then per joint control), each lane's sum from 0 with the same expression as the
// term's, so each lane has stage_cost_value's bits.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::stage_cost_lanes(int k, const S* X, const S* U, const S* EE,
                                              const S* ref, S* out) const {
  const int W = lk_.W, nv = nv_;
  const auto& m = cost_;
  S acc[kMaxLanes];
  for (int l = 0; l < W; ++l) acc[l] = S(0);
  const S w = m.ee_weight(k);
  const S* r = ref + 6 * k;
  for (int i = 0; i < 3; ++i)
    for (int l = 0; l < W; ++l) {
      const S d = EE[i * W + l] - r[i];
      acc[l] += S(0.5) * w * d * d;
    }
  const cost::PostureTerm<S, NV> post(m, k);
  const S vw = m.qd_weight(k);
  for (int j = 0; j < nv; ++j) {
    const S a_j = S(post.a[j]), qn = S(post.qn[j]);
    const S* q = X + j * W;
    const S* v = X + (nv + j) * W;
    for (int l = 0; l < W; ++l) {
      const S dq = q[l] - qn;
      acc[l] += S(0.5) * a_j * dq * dq;
      acc[l] += S(0.5) * vw * v[l] * v[l];
    }
  }
  if (U) {
    for (int j = 0; j < nu_; ++j) {
      const S s = m.u_weight(k, j);
      const S* u = U + j * W;
      for (int l = 0; l < W; ++l) acc[l] += S(0.5) * s * u[l] * u[l];
    }
  }
  for (int l = 0; l < W; ++l) out[l] = acc[l];
}

// The orientation error e_l = log(R_ref' R_l) of the W lanes of RR (9 x W, lane-minor,
// row-major rotations) into out (3 x W, lane-major): the log maps' pieces per lane, their one
// transcendental, t = atan2(s, c), for all lanes at once (so3::atan2_lanes), then the maps.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::rot_logs(const S* RR, const S* rref, S* out) const {
  using M3 = so3::M3<S>;
  const int W = lk_.W;
  const M3 RtT = Eigen::Map<const M3>(rref).transpose();
  M3 Mr[kMaxLanes];
  so3::LogParts<S> pr[kMaxLanes];
  S ys[kMaxLanes], xs[kMaxLanes], ts[kMaxLanes];
  for (int l = 0; l < W; ++l) {
    M3 R;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) R(r, c) = RR[(3 * r + c) * W + l];
    Mr[l].noalias() = RtT * R;
    pr[l] = so3::log_parts<S>(Mr[l]);
    ys[l] = pr[l].s;
    xs[l] = pr[l].c;
  }
  so3::atan2_lanes<S>(ys, xs, ts, W);
  for (int l = 0; l < W; ++l)
    Eigen::Map<so3::V3<S>>(out + 3 * l) = so3::log_finish<S>(Mr[l], pr[l], ts[l]);
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::merit(const S* xu, const S* x_s, const S* ref, S* out) {
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    e.dz.setZero();
    out[b] = trial_merit(e, S(0));
  }
}

}  // namespace gato
