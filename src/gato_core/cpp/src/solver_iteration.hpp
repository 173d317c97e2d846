// The iteration of BatchSolverImpl (docs/solver_method.md, "One SQP iteration"):
// iterate() runs steps 1-5 on one batch entry (KKT, Schur, linear solve, step-size
// choice, trust region) and solve() the batch loop of step 6 (thread pool, time
// budget, stopping rule, statistics). Included by solver_impl.hpp only.
#pragma once

#include <chrono>

namespace gato {

namespace detail {
using Clock = std::chrono::steady_clock;
// The exact-Hessian step's trust test: actual / predicted merit decrease of the full step.
inline constexpr double kEhTrustRatio = 0.75;
inline double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}
}  // namespace detail

template <typename S, int NV>
void BatchSolverImpl<S, NV>::iterate(Entry& e, int it) {
  using detail::Clock;
  using detail::us_since;
  const bool timed = collect_;
  Clock::time_point t0;
  if (timed) t0 = Clock::now();
  e.merit0 = setup_kkt(e);
  if (it == 0) e.merit_initial = e.merit0;
  e.iters = it + 1;
  if (timed) e.t_kkt += us_since(t0);
  if (!std::isfinite(double(e.merit0))) {  // diverged: nothing sensible to step from
    e.stopped = true;
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    return;
  }
  const bool admm = has_admm_;
  if (admm) {
    admm_prepare(e);   // linearize the ADMM rows, fold rho G'G, keep the plain gradients
    admm_gradient(e);  // + G'(y + rho (g - z)) for the first inner iteration
  }
  if (timed) t0 = Clock::now();
  // The exact Hessian solves its KKT system by a Riccati recursion (solver_hessian.hpp): the
  // backward pass counts as the factorization, and it gives the step and the multipliers
  // itself. With ADMM rows it keeps the Schur complement of its modified stage blocks (the inner
  // loop reuses that factorization).
  const bool riccati = eh_ && !admm;
  bool ok = riccati ? riccati_eh(e) : factor_schur(e);
  if (timed) e.t_schur += us_since(t0);
  const auto t_lin = Clock::now();  // the linear-solve time is always reported (pcg_times_us)
  LinSys mode = set_.linsys;
  if (mode == LinSys::kBdsvFirst) mode = it == 0 ? LinSys::kBdsv : LinSys::kPcg;
  e.last_linsys = mode;
  int pcg_it = 0;
  if (riccati) {
    // dz, the multipliers (in e.r) and converged are set; which blocks gave the step, for the stats.
    if (ok) {
      e.lam = e.r;
      e.exact_it[it] = e.eh.exact_step;
    }
  } else if (ok && admm) {
    // OSQP-style inner loop on the folded system (recovers dz itself).
    ok = admm_inner(e, pcg_it);
  } else if (ok) {
    // Residual of the warm dual; its energy is the convergence test on both
    // paths (preconditioned for PCG, exact M^-1 for the direct solve).
    matvec(e, e.lam, e.Mp);
    e.r = e.rhs - e.Mp;
    if (mode == LinSys::kPcg) {
      ok = factor_preconditioner(e);
      if (ok) {
        precondition(e, e.r, e.z);
        e.converged = std::abs(e.r.dot(e.z)) < pcg_floor();
        pcg_it = solve_pcg(e);
      }
    } else {
      ok = solve_bdsv(e);
    }
  }
  e.pcg_iters[it] = pcg_it;
  e.linsys_us[it] = us_since(t_lin);
  e.t_lin += e.linsys_us[it];
  if (timed) t0 = Clock::now();
  if (!ok) {
    // Not positive definite: keep z and lam, regularize harder.
    e.rho = std::min(e.rho * S(100), S(kRhoMax));
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    e.converged = false;
    if (timed) e.t_ls += us_since(t0);
    return;
  }
  if (admm) {
    if (admm_.merit) {
      // The merit compares against the row state the inner loop just produced.
      e.merit0 += rows_cost(e, e.xu.data(), e.ee[N_ - 1].data(), false, true);
      if (it == 0) e.merit_initial = e.merit0;
    }
  } else if (!riccati) {
    recover_step(e);
  }
  const bool first = set_.line_search == LineSearch::kFirst;
  S m_full = std::numeric_limits<S>::infinity();  // the merit at alpha = 1
  auto search = [&](S& best, S& best_alpha) {  // the merit's best step size along e.dz
    best = std::numeric_limits<S>::infinity();
    best_alpha = 0;
    S alpha = 1;
    if (use_lanes()) {
      // All step sizes at once (the 'best' rule looks at every one anyway).
      S alphas[kLineSearchSteps], m[kLineSearchSteps];
      for (int i = 0; i < kLineSearchSteps; ++i, alpha *= S(0.5)) alphas[i] = alpha;
      trial_merits_lanes(e, alphas, m);
      m_full = m[0];
      for (int i = 0; i < kLineSearchSteps; ++i) {
        if (m[i] < best) {  // strict: ties keep the larger alpha
          best = m[i];
          best_alpha = alphas[i];
        }
      }
    } else {
      for (int i = 0; i < kLineSearchSteps; ++i, alpha *= S(0.5)) {
        const S m = trial_merit(e, alpha);
        if (i == 0) m_full = m;
        if (m < best) {  // strict: ties keep the larger alpha
          best = m;
          best_alpha = alpha;
        }
        if (first && best < e.merit0) break;  // backtracking: the first strict decrease
      }
    }
  };
  S best, best_alpha;
  search(best, best_alpha);
  // The exact model is trusted where its full step lowers the merit by at least 3/4 of what the
  // model predicts (the trust-region ratio; near the optimum it tends to 1) and the line search
  // kept alpha >= 1/2. Elsewhere (far from the optimum) the Gauss-Newton step is computed too
  // (one more backward pass, no second-order terms) and the lower merit of the two is taken; so
  // the local phase stays Newton's, quadratic. The watchdog: the first exact step after a
  // Gauss-Newton step of rule (a) or of this test skips the test (from Gauss-Newton iterates the
  // ratio can settle below the threshold and keep every step Gauss-Newton). Measured on tuning
  // seeds (docs/solver_method.md, "Exact Hessian"), with a Levenberg-Marquardt shift driven by
  // the same ratio (dropped).
  const bool trusted = riccati && e.eh.trust_next;
  if (riccati) e.eh.trust_next = e.eh.cold_gn;
  const bool poor_model = riccati && e.eh.exact_step && !trusted &&
                          (best_alpha < S(0.5) ||
                           !(e.eh.pred > S(0) && e.merit0 - m_full >= S(detail::kEhTrustRatio) * e.eh.pred));
  if (poor_model) {
    e.eh.dz_x = e.dz;
    e.eh.lam_x = e.lam;
    const bool conv_x = e.converged;
    e.eh.force_gn = true;
    const bool ok_gn = riccati_eh(e);
    e.eh.force_gn = false;
    S best_gn = std::numeric_limits<S>::infinity(), alpha_gn = 0;
    if (ok_gn) search(best_gn, alpha_gn);
    if (ok_gn && best_gn < best) {
      best = best_gn;
      best_alpha = alpha_gn;
      e.lam = e.r;
      e.exact_it[it] = 0;
      e.eh.trust_next = true;
    } else {
      e.dz = e.eh.dz_x;
      e.lam = e.eh.lam_x;
      e.converged = conv_x;
    }
  }
  const bool accept = best < e.merit0;
  e.min_merit[it] = double(best);
  if (accept) {
    e.xu.noalias() += best_alpha * e.dz;
    e.step_size[it] = double(best_alpha);
    e.merit_final = best;
  } else {
    e.step_size[it] = -1;
    e.merit_final = e.merit0;
  }
  if (set_.adapt_rho) {
    const S f = e.drho_factor;
    if (accept) {
      e.drho = std::min(e.drho / f, S(1) / f);
    } else {
      e.drho = std::max(e.drho * f, f);
    }
    e.rho = std::clamp(e.rho * e.drho, S(kRhoMin), S(kRhoMax));
    if (!accept && e.rho >= S(kRhoMax)) e.rho = S(kRhoResetAfterCap);
  }
  if (timed) e.t_ls += us_since(t0);
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::solve(const S* x_s, const S* ref, S* xu, double budget_s) {
  using detail::Clock;
  using detail::us_since;
  const auto t_start = Clock::now();
  const int iters_max = set_.max_sqp_iters;
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    Eigen::Map<VecNX>(e.x(0), nx_) = Eigen::Map<const VecNX>(e.xs, nx_);  // knot 0 is the measured state
    e.drho = 1;
    e.converged = e.stopped = false;
    e.iters = 0;
    e.t_kkt = e.t_schur = e.t_lin = e.t_ls = 0;
    std::fill(e.pcg_iters.begin(), e.pcg_iters.end(), 0);
    std::fill(e.min_merit.begin(), e.min_merit.end(), 0.0);
    std::fill(e.step_size.begin(), e.step_size.end(), 0.0);
    std::fill(e.exact_it.begin(), e.exact_it.end(), char(0));
    std::fill(e.linsys_us.begin(), e.linsys_us.end(), 0.0);
    e.rows.admm_it = e.rows.admm_lin = 0;
    e.rows.admm_rp = e.rows.admm_rd = 0;
  }
  const bool budgeted = budget_s > 0;
  const double budget_us = budget_s * 1e6;
  stats_.budget_hit = false;
  std::fill(this_iter_us_.begin(), this_iter_us_.end(), -1.0);
  const int need = std::max(1, int(std::ceil(set_.solve_ratio * B_ - 1e-9)));
  int it = 0;
  for (; it < iters_max; ++it) {
    if (budgeted && it > 0) {
      double pred = prev_iter_us_[it];
      if (pred < 0) pred = *std::max_element(this_iter_us_.begin(), this_iter_us_.begin() + it);
      if (us_since(t_start) + pred > budget_us) {
        stats_.budget_hit = true;
        break;
      }
    }
    int active = 0;
    for (auto& e : entries_) active += !(e->converged || e->stopped);
    if (active == 0) break;
    const auto t_it = Clock::now();
    auto body = [&](int b) {
      Entry& e = *entries_[b];
      if (!(e.converged || e.stopped)) iterate(e, it);
    };
    pool_.run(B_, body);
    this_iter_us_[it] = us_since(t_it);
    stats_.linsys_used[it] = char(entries_[0]->last_linsys);
    int n_conv = 0;
    for (auto& e : entries_) n_conv += e->converged;
    if (n_conv >= need) {
      ++it;
      break;
    }
  }
  const int run = it;
  if (!groups_.empty()) {
    // AL dual update and the true violation, on the returned plan.
    auto fin = [&](int b) { rows_finish(*entries_[b]); };
    pool_.run(B_, fin);
  }
  if (budgeted) {
    for (int i = 0; i < iters_max; ++i) prev_iter_us_[i] = i < run ? this_iter_us_[i] : -1.0;
  }
  // Results and statistics (the vectors were sized in set_settings).
  stats_.iters_run = run;
  stats_.t_kkt_us = stats_.t_schur_us = stats_.t_linsys_us = stats_.t_linesearch_us = 0;
  std::fill(stats_.linsys_time_us.begin(), stats_.linsys_time_us.end(), 0.0);
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    Eigen::Map<Vec>(xu + size_t(b) * L_, L_) = e.xu;
    stats_.sqp_iters[b] = e.iters;
    stats_.converged[b] = e.converged;
    stats_.initial_merit[b] = double(e.merit_initial);
    stats_.final_merit[b] = double(e.merit_final);
    for (int i = 0; i < iters_max; ++i) {
      stats_.pcg_iters[size_t(b) * iters_max + i] = e.pcg_iters[i];
      stats_.min_merit[size_t(b) * iters_max + i] = e.min_merit[i];
      stats_.step_size[size_t(b) * iters_max + i] = e.step_size[i];
      stats_.exact_step[size_t(b) * iters_max + i] = e.exact_it[i];
      stats_.linsys_time_us[i] = std::max(stats_.linsys_time_us[i], e.linsys_us[i]);
    }
    stats_.t_kkt_us += e.t_kkt;
    stats_.t_schur_us += e.t_schur;
    stats_.t_linsys_us += e.t_lin;
    stats_.t_linesearch_us += e.t_ls;
    const int G = int(groups_.size());
    for (int gi = 0; gi < G; ++gi) {
      stats_.row_max_violation[size_t(b) * G + gi] = e.rows.vmax[gi];
      stats_.row_sum_violation[size_t(b) * G + gi] = e.rows.vsum[gi];
    }
    if (G > 0) {
      stats_.admm_r_prim[b] = e.rows.admm_rp;
      stats_.admm_r_dual[b] = e.rows.admm_rd;
      stats_.admm_iters[b] = e.rows.admm_it;
      stats_.admm_linsys_iters[b] = e.rows.admm_lin;
    }
  }
  stats_.solve_time_us = long(us_since(t_start));
}

}  // namespace gato
