// Constraint row groups of BatchSolverImpl (docs/constraints.md): telemetry,
// relaxed log barrier, ADMM projection and PHR augmented Lagrangian on the
// canonical limit boxes and the appended groups. Included by solver_impl.hpp.
//
// Conventions: a group's knot k indexes knots (state blocks, EE terminal) or
// controls (torque box, LIN_U); rows g(z) with bounds lo <= g <= hi, or the
// cone ||[g1, g2]|| <= g0. Every function here works in preallocated storage.
#pragma once

namespace gato {

template <typename S, int NV>
bool BatchSolverImpl<S, NV>::live(const Group& G, int k, int i) {
  return G.mask.empty() || G.mask[size_t(k) * G.n + i] != 0;
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::row_values(const Group& G, int b, int k, const S* xu, const S* ee,
                                        S* out) const {
  const S* x = xu + size_t(k) * (nx_ + nu_);
  switch (G.kind) {
    case RowKind::kQBox:
      for (int j = 0; j < nv_; ++j) out[j] = x[j];
      break;
    case RowKind::kQdBox:
      for (int j = 0; j < nv_; ++j) out[j] = x[nv_ + j];
      break;
    case RowKind::kUBox:
      for (int j = 0; j < nu_; ++j) out[j] = x[nx_ + j];
      break;
    case RowKind::kEeTerminal:
      for (int i = 0; i < 3; ++i) out[i] = ee[i] - G.target[3 * b + i];
      break;
    case RowKind::kLinU: {
      const S* u = x + nx_;
      for (int i = 0; i < G.n; ++i) {
        S v = G.d[i];
        for (int j = 0; j < nu_; ++j) v += G.C[size_t(i) * nu_ + j] * u[j];
        out[i] = v;
      }
      break;
    }
    case RowKind::kCollision:
      collision_rows(*entries_[b], k, x, out, false);
      break;
    default:
      for (int i = 0; i < G.n; ++i) out[i] = 0;
  }
}

// Clearance of every collision sphere at knot k (state x); with jac, the rows'
// Jacobians d g_i / d q = n_i' J_i (nearest obstacle's unit normal times the sphere
// centre's position Jacobian) into e.rows.cJ at knot k.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::collision_rows(Entry& e, int k, const S* x, S* out, bool jac) const {
  const int n = col_.n, nv = nv_;
  plant_->points_kinematics(*e.ws, x, n, col_.frames.data(), col_.local.data(), e.rows.cpos.data(),
                            jac ? e.rows.cJp.data() : nullptr);
  S grad[3];
  for (int i = 0; i < n; ++i) {
    out[i] = collision::sphere_clearance(col_.obs.data(), col_.n_obs, &e.rows.cpos[3 * i], col_.radius[i], grad);
    if (!jac) continue;
    S* row = &e.rows.cJ[(size_t(k) * n + i) * nv];
    const S* Jp = &e.rows.cJp[size_t(i) * 3 * nv];
    for (int j = 0; j < nv; ++j) row[j] = grad[0] * Jp[j] + grad[1] * Jp[nv + j] + grad[2] * Jp[2 * nv + j];
  }
}

// Gradient: q_k / r_k += G' v.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::add_GT(const Group& G, Entry& e, int k, const S* v) const {
  switch (G.kind) {
    case RowKind::kQBox:
      for (int j = 0; j < nv_; ++j) e.qv[k][j] += v[j];
      break;
    case RowKind::kQdBox:
      for (int j = 0; j < nv_; ++j) e.qv[k][nv_ + j] += v[j];
      break;
    case RowKind::kUBox:
      for (int j = 0; j < nu_; ++j) e.rv[k][j] += v[j];
      break;
    case RowKind::kEeTerminal:
      for (int j = 0; j < nv_; ++j) {
        e.qv[k][j] += e.rows.Jee(0, j) * v[0] + e.rows.Jee(1, j) * v[1] + e.rows.Jee(2, j) * v[2];
      }
      break;
    case RowKind::kLinU:
      for (int i = 0; i < G.n; ++i) {
        if (v[i] == S(0)) continue;
        for (int j = 0; j < nu_; ++j) e.rv[k][j] += G.C[size_t(i) * nu_ + j] * v[i];
      }
      break;
    case RowKind::kCollision:
      for (int i = 0; i < G.n; ++i) {
        if (v[i] == S(0)) continue;
        const S* ji = &e.rows.cJ[(size_t(k) * G.n + i) * nv_];
        for (int j = 0; j < nv_; ++j) e.qv[k][j] += ji[j] * v[i];
      }
      break;
    default:
      break;
  }
}

// Hessian: Q_k / R_k += G' diag(h) G.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::add_GT_diag_G(const Group& G, Entry& e, int k, const S* h) const {
  switch (G.kind) {
    case RowKind::kQBox:
      for (int j = 0; j < nv_; ++j) e.Q[k](j, j) += h[j];
      break;
    case RowKind::kQdBox:
      for (int j = 0; j < nv_; ++j) e.Q[k](nv_ + j, nv_ + j) += h[j];
      break;
    case RowKind::kUBox:
      for (int j = 0; j < nu_; ++j) e.R[k](j, j) += h[j];
      break;
    case RowKind::kEeTerminal:
      for (int i = 0; i < 3; ++i) {
        if (h[i] == S(0)) continue;
        for (int a = 0; a < nv_; ++a)
          for (int c = 0; c < nv_; ++c) e.Q[k](a, c) += h[i] * e.rows.Jee(i, a) * e.rows.Jee(i, c);
      }
      break;
    case RowKind::kLinU:
      for (int i = 0; i < G.n; ++i) {
        if (h[i] == S(0)) continue;
        const S* ci = G.C.data() + size_t(i) * nu_;
        for (int a = 0; a < nu_; ++a)
          for (int c = 0; c < nu_; ++c) e.R[k](a, c) += h[i] * ci[a] * ci[c];
      }
      break;
    case RowKind::kCollision:
      for (int i = 0; i < G.n; ++i) {
        if (h[i] == S(0)) continue;
        const S* ji = &e.rows.cJ[(size_t(k) * G.n + i) * nv_];
        for (int a = 0; a < nv_; ++a)
          for (int c = 0; c < nv_; ++c) e.Q[k](a, c) += h[i] * ji[a] * ji[c];
      }
      break;
    default:
      break;
  }
}

// Hessian with a dense row-space block H (n x n, row-major): LIN_U cones.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::add_GT_dense_G(const Group& G, Entry& e, int k, const S* H) const {
  if (G.kind != RowKind::kLinU) return;
  const int n = G.n;
  for (int a = 0; a < nu_; ++a) {
    for (int c = 0; c < nu_; ++c) {
      S v = 0;
      for (int i = 0; i < n; ++i) {
        const S cia = G.C[size_t(i) * nu_ + a];
        if (cia == S(0)) continue;
        for (int j = 0; j < n; ++j) v += cia * H[i * n + j] * G.C[size_t(j) * nu_ + c];
      }
      e.R[k](a, c) += v;
    }
  }
}

// The ADMM proximal fold rho G'G: boxes on the diagonals, the EE rows as
// rho J'J on the (dense) position block, LIN_U rows as rho C'C on R.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::fold(const Group& G, Entry& e, int k, S rho) const {
  switch (G.kind) {
    case RowKind::kQBox:
      for (int j = 0; j < nv_; ++j) e.Q[k](j, j) += rho;
      break;
    case RowKind::kQdBox:
      for (int j = 0; j < nv_; ++j) e.Q[k](nv_ + j, nv_ + j) += rho;
      break;
    case RowKind::kUBox:
      for (int j = 0; j < nu_; ++j) e.R[k](j, j) += rho;
      break;
    case RowKind::kEeTerminal:
      for (int a = 0; a < nv_; ++a)
        for (int c = 0; c < nv_; ++c)
          e.Q[k](a, c) += rho * (e.rows.Jee(0, a) * e.rows.Jee(0, c) + e.rows.Jee(1, a) * e.rows.Jee(1, c) +
                                 e.rows.Jee(2, a) * e.rows.Jee(2, c));
      break;
    case RowKind::kLinU:
      for (int a = 0; a < nu_; ++a)
        for (int c = 0; c < nu_; ++c) e.R[k](a, c) += rho * G.CtC(a, c);
      break;
    case RowKind::kCollision:
      for (int i = 0; i < G.n; ++i) {
        const S* ji = &e.rows.cJ[(size_t(k) * G.n + i) * nv_];
        for (int a = 0; a < nv_; ++a)
          for (int c = 0; c < nv_; ++c) e.Q[k](a, c) += rho * ji[a] * ji[c];
      }
      break;
    default:
      break;
  }
}

// out = G dz at knot k (the linearized change of the rows).
template <typename S, int NV>
void BatchSolverImpl<S, NV>::G_dz(const Group& G, const Entry& e, int k, S* out) const {
  const S* dx = e.dz.data() + size_t(k) * (nx_ + nu_);
  switch (G.kind) {
    case RowKind::kQBox:
      for (int j = 0; j < nv_; ++j) out[j] = dx[j];
      break;
    case RowKind::kQdBox:
      for (int j = 0; j < nv_; ++j) out[j] = dx[nv_ + j];
      break;
    case RowKind::kUBox:
      for (int j = 0; j < nu_; ++j) out[j] = dx[nx_ + j];
      break;
    case RowKind::kEeTerminal:
      for (int i = 0; i < 3; ++i) {
        S v = 0;
        for (int j = 0; j < nv_; ++j) v += e.rows.Jee(i, j) * dx[j];
        out[i] = v;
      }
      break;
    case RowKind::kLinU: {
      const S* du = dx + nx_;
      for (int i = 0; i < G.n; ++i) {
        S v = 0;
        for (int j = 0; j < nu_; ++j) v += G.C[size_t(i) * nu_ + j] * du[j];
        out[i] = v;
      }
      break;
    }
    case RowKind::kCollision:
      for (int i = 0; i < G.n; ++i) {
        const S* ji = &e.rows.cJ[(size_t(k) * G.n + i) * nv_];
        S v = 0;
        for (int j = 0; j < nv_; ++j) v += ji[j] * dx[j];
        out[i] = v;
      }
      break;
    default:
      for (int i = 0; i < G.n; ++i) out[i] = 0;
  }
}

// Plain projection onto the group's set (interval per row, or the cone).
template <typename S, int NV>
void BatchSolverImpl<S, NV>::project(const Group& G, const S* v, S* out) const {
  if (G.cone) {
    rows::soc_project(v, out);
    return;
  }
  for (int i = 0; i < G.n; ++i) out[i] = std::min(std::max(v[i], G.lo[i]), G.hi[i]);
}

// Barrier and AL terms (value; with derivs, their Gauss-Newton gradient and
// Hessian into the KKT blocks) at trajectory xu, EE position ee at knot N-1.
// admm_term adds the ADMM merit y'(g - z) + rho/2 |g - z|^2 at the current (z, y).
template <typename S, int NV>
S BatchSolverImpl<S, NV>::rows_cost(Entry& e, const S* xu, const S* ee, bool derivs,
                                    bool admm_term) {
  S cost = 0;
  S g[kMaxRowsPerGroup], v[kMaxRowsPerGroup], h[kMaxRowsPerGroup], H[9];
  const S inf = std::numeric_limits<S>::infinity();
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (G.mech == RowMech::kTelemetry) continue;
    if (G.mech == RowMech::kAdmm && !admm_term) continue;
    const S w = G.w;
    for (int k = G.klo; k < G.khi; ++k) {
      if (derivs && G.kind == RowKind::kCollision) {
        collision_rows(e, k, xu + size_t(k) * (nx_ + nu_), g, true);  // the KKT point: linearize too
      } else {
        row_values(G, e.b, k, xu, ee, g);
      }
      const int base = rix(gi, k, 0);
      if (G.mech == RowMech::kAdmm) {
        const S rho = w * e.rows.rho_scale;
        for (int i = 0; i < G.n; ++i) {
          if (!live(G, k, G.cone ? 0 : i)) continue;
          const S r = g[i] - e.rows.rz[base + i];
          cost += e.rows.ry[base + i] * r + S(0.5) * rho * r * r;
        }
        continue;
      }
      if (G.cone) {
        if (!live(G, k, 0)) continue;
        if (G.mech == RowMech::kBarrier) {
          // b(g0 - ||[g1, g2]||) with the slack's gradient a (Gauss-Newton Hessian a a').
          const S nt = std::sqrt(g[1] * g[1] + g[2] * g[2]);
          S db, ddb;
          cost += w * rows::relaxed_log(g[0] - nt, G.delta, &db, &ddb);
          if (derivs) {
            const S a[3] = {S(1), nt > 0 ? -g[1] / nt : S(0), nt > 0 ? -g[2] / nt : S(0)};
            for (int i = 0; i < 3; ++i) {
              v[i] = w * db * a[i];
              for (int j = 0; j < 3; ++j) H[3 * i + j] = w * ddb * a[i] * a[j];
            }
            add_GT(G, e, k, v);
            add_GT_dense_G(G, e, k, H);
          }
        } else {
          // rho/2 dist_K(g - lam/rho)^2 - |lam|^2/(2 rho), lam in K.
          const S* lam = &e.rows.lam_hi[base];
          const S vv[3] = {g[0] - lam[0] / w, g[1] - lam[1] / w, g[2] - lam[2] / w};
          S p[3];
          rows::soc_project(vv, p);
          const S t[3] = {vv[0] - p[0], vv[1] - p[1], vv[2] - p[2]};
          cost += S(0.5) * w * (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]) -
                  (lam[0] * lam[0] + lam[1] * lam[1] + lam[2] * lam[2]) / (S(2) * w);
          if (derivs) {
            for (int i = 0; i < 3; ++i) v[i] = w * t[i];
            rows::soc_dist_hessian(vv, H);
            for (int i = 0; i < 9; ++i) H[i] *= w;
            add_GT(G, e, k, v);
            add_GT_dense_G(G, e, k, H);
          }
        }
        continue;
      }
      const S sg = G.sigma > 0 ? G.sigma : inf;
      for (int i = 0; i < G.n; ++i) {
        v[i] = 0;
        h[i] = 0;
        if (!live(G, k, i)) continue;
        S d1, d2;
        if (G.mech == RowMech::kBarrier) {
          if (std::isfinite(double(G.lo[i]))) {
            cost += w * rows::relaxed_log(g[i] - G.lo[i], G.delta, &d1, &d2);
            v[i] += w * d1;
            h[i] += w * d2;
          }
          if (std::isfinite(double(G.hi[i]))) {
            cost += w * rows::relaxed_log(G.hi[i] - g[i], G.delta, &d1, &d2);
            v[i] -= w * d1;
            h[i] += w * d2;
          }
        } else {  // AL (PHR)
          if (G.eq[i]) {
            cost += rows::phr(g[i] - G.lo[i], e.rows.lam_hi[base + i], w, -sg, sg, &d1, &d2);
            v[i] += d1;
            h[i] += d2;
          } else {
            if (std::isfinite(double(G.hi[i]))) {
              cost += rows::phr(g[i] - G.hi[i], e.rows.lam_hi[base + i], w, S(0), sg, &d1, &d2);
              v[i] += d1;
              h[i] += d2;
            }
            if (std::isfinite(double(G.lo[i]))) {
              cost += rows::phr(G.lo[i] - g[i], e.rows.lam_lo[base + i], w, S(0), sg, &d1, &d2);
              v[i] -= d1;
              h[i] += d2;
            }
          }
        }
      }
      if (derivs) {
        add_GT(G, e, k, v);
        add_GT_diag_G(G, e, k, h);
      }
    }
  }
  return cost;
}

// Start of an ADMM SQP iteration (right after setup_kkt): the rows' values g0 at
// the KKT point, (re-)initialization of (z, y) where requested, the proximal
// fold rho G'G, and a copy of the plain gradients for the inner iterations.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::admm_prepare(Entry& e) {
  S tmp[kMaxRowsPerGroup];
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (G.mech != RowMech::kAdmm) continue;
    const S rho = G.w * e.rows.rho_scale;
    for (int k = G.klo; k < G.khi; ++k) {
      const int base = rix(gi, k, 0);
      if (G.kind == RowKind::kCollision) {
        collision_rows(e, k, e.x(k), &e.rows.g0[base], true);
      } else {
        row_values(G, e.b, k, e.xu.data(), e.ee[N_ - 1].data(), &e.rows.g0[base]);
      }
      if (e.rows.need_init[gi]) {
        project(G, &e.rows.g0[base], &e.rows.rz[base]);
        for (int i = 0; i < G.n; ++i) e.rows.ry[base + i] = 0;
      } else if (e.rows.need_clip[gi]) {
        project(G, &e.rows.rz[base], tmp);
        for (int i = 0; i < G.n; ++i) e.rows.rz[base + i] = tmp[i];
      }
      fold(G, e, k, rho);
    }
    e.rows.need_init[gi] = e.rows.need_clip[gi] = 0;
  }
  for (int k = 0; k < N_; ++k) e.rows.qv_base[k] = e.qv[k];
  for (int k = 0; k < N_ - 1; ++k) e.rows.rv_base[k] = e.rv[k];
}

// q, r += G'(y + rho (g0 - z)) over the live rows of every ADMM group.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::admm_gradient(Entry& e) {
  S v[kMaxRowsPerGroup];
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (G.mech != RowMech::kAdmm) continue;
    const S rho = G.w * e.rows.rho_scale;
    for (int k = G.klo; k < G.khi; ++k) {
      const int base = rix(gi, k, 0);
      for (int i = 0; i < G.n; ++i) {
        v[i] = live(G, k, G.cone ? 0 : i)
                   ? e.rows.ry[base + i] + rho * (e.rows.g0[base + i] - e.rows.rz[base + i])
                   : S(0);
      }
      add_GT(G, e, k, v);
    }
  }
}

// z <- Pi(g0 + G dz + y/rho), y <- y + rho (g0 + G dz - z); per-group residuals
// r_prim = max |g0 + G dz - z|, r_dual = rho max |z - z_prev| and scale max |z|.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::admm_update(Entry& e) {
  S gl[kMaxRowsPerGroup], vv[kMaxRowsPerGroup], zn[kMaxRowsPerGroup];
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (G.mech != RowMech::kAdmm) continue;
    const S rho = G.w * e.rows.rho_scale;
    const S sr = G.sigma / rho;
    S rp = 0, rd = 0, zm = 0;
    for (int k = G.klo; k < G.khi; ++k) {
      const int base = rix(gi, k, 0);
      G_dz(G, e, k, gl);
      for (int i = 0; i < G.n; ++i) {
        gl[i] += e.rows.g0[base + i];
        vv[i] = gl[i] + e.rows.ry[base + i] / rho;
      }
      if (G.cone) {
        if (!live(G, k, 0)) continue;
        rows::soft_soc(vv, sr, zn);
      } else {
        for (int i = 0; i < G.n; ++i) zn[i] = rows::soft_clip(vv[i], G.lo[i], G.hi[i], sr);
      }
      for (int i = 0; i < G.n; ++i) {
        if (!live(G, k, G.cone ? 0 : i)) continue;
        rd = std::max(rd, std::abs(zn[i] - e.rows.rz[base + i]));
        e.rows.rz[base + i] = zn[i];
        e.rows.ry[base + i] += rho * (gl[i] - zn[i]);
        rp = std::max(rp, std::abs(gl[i] - zn[i]));
        zm = std::max(zm, std::abs(zn[i]));
      }
    }
    e.rows.rprim[gi] = rp;
    e.rows.rdual[gi] = rho * rd;
    e.rows.zmax[gi] = zm;
  }
}

// The residual exit test of set_admm_exit, per ADMM group.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::admm_converged(const Entry& e) const {
  const S ea = S(admm_.eps_abs), er = S(admm_.eps_rel);
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (G.mech != RowMech::kAdmm) continue;
    const S rho = G.w * e.rows.rho_scale;
    if (e.rows.rprim[gi] > ea + er * e.rows.zmax[gi]) return false;
    if (e.rows.rdual[gi] > ea + er * rho * e.rows.zmax[gi]) return false;
  }
  return true;
}

// The inner loop of one SQP iteration. factor_schur has run on the folded
// blocks with the first inner gradient; each inner iteration solves the Schur
// system (warm PCG, or back-substitution with one factor per SQP iteration),
// recovers dz and updates (z, y). Leaves dz of the last inner iteration.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::admm_inner(Entry& e, int& lin_iters) {
  const bool use_pcg = admm_.linsys == AdmmLinSys::kPcg;
  const bool exit_on = admm_.eps_abs > 0 || admm_.eps_rel > 0;
  if (use_pcg ? !factor_preconditioner(e) : !factor_bdsv(e)) return false;
  bool conv0 = false;
  for (int j = 0; j < admm_cap_; ++j) {
    if (j > 0) {
      for (int k = 0; k < N_; ++k) e.qv[k] = e.rows.qv_base[k];
      for (int k = 0; k < N_ - 1; ++k) e.rv[k] = e.rows.rv_base[k];
      admm_gradient(e);
      build_rhs(e);
    }
    matvec(e, e.lam, e.Mp);
    e.r = e.rhs - e.Mp;
    bool lin_ok = true;
    if (use_pcg) {
      precondition(e, e.r, e.z);
      e.converged = std::abs(e.r.dot(e.z)) < pcg_floor();
      const int n = solve_pcg(e);
      lin_iters += n;
      e.rows.admm_lin += n;
      lin_ok = n < set_.max_pcg_iters;
    } else {
      if (!backsolve_bdsv(e)) return false;
      e.rows.admm_lin += 1;
    }
    if (j == 0) conv0 = e.converged;
    recover_step(e);
    admm_update(e);
    ++e.rows.admm_it;
    if (exit_on && lin_ok && admm_converged(e)) break;
  }
  // Summary of the last inner iteration; converged = the linear solve had no
  // work and (z, y) sit at their fixed point.
  S rp = 0, rd = 0;
  bool fixed = true;
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    if (groups_[gi].mech != RowMech::kAdmm) continue;
    rp = std::max(rp, e.rows.rprim[gi]);
    rd = std::max(rd, e.rows.rdual[gi]);
  }
  if (exit_on) {
    fixed = admm_converged(e);
  } else {
    fixed = rp == S(0) && rd == S(0);
  }
  e.rows.admm_rp = double(rp);
  e.rows.admm_rd = double(rd);
  e.converged = conv0 && fixed;
  if (admm_.rho_adapt && !(exit_on && fixed)) {
    // OSQP's rule on scale-free residuals: one scalar per entry, clamped. Only while
    // the inner loop is still iterating: a loop that met its exit test (or whose
    // relative residuals are both below 1e-6) leaves the scale alone, so a converged
    // stretch of MPC ticks does not drift it to a clamp before the next transient.
    S p = 0, d = 0;
    for (int gi = 0; gi < int(groups_.size()); ++gi) {
      const Group& G = groups_[gi];
      if (G.mech != RowMech::kAdmm) continue;
      const S sc = e.rows.zmax[gi] + S(1e-6);
      p = std::max(p, e.rows.rprim[gi] / sc);
      d = std::max(d, e.rows.rdual[gi] / (G.w * e.rows.rho_scale * sc));
    }
    const S ratio = (p + S(1e-6)) / (d + S(1e-6));
    if (ratio > S(5) || ratio < S(0.2)) {
      e.rows.rho_scale = std::clamp(e.rows.rho_scale * std::sqrt(ratio), S(1e-2), S(1e2));
    }
  }
  return true;
}

// End of a solve: the AL dual update (once per solve) and the true violation,
// both on the returned plan.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::rows_finish(Entry& e) {
  const bool finite = e.xu.allFinite();
  if (need_ee_ && finite) plant_->frame_position(*e.ws, e.x(N_ - 1), e.rows.ee_fin.data());
  S g[kMaxRowsPerGroup];
  const S inf = std::numeric_limits<S>::infinity();
  for (int gi = 0; gi < int(groups_.size()); ++gi) {
    const Group& G = groups_[gi];
    if (!finite) {
      e.rows.vmax[gi] = e.rows.vsum[gi] = std::numeric_limits<double>::infinity();
      continue;
    }
    const bool al = G.mech == RowMech::kAl;
    const S w = G.w, sg = G.sigma > 0 ? G.sigma : inf;
    double vmax = 0, vsum = 0;
    for (int k = G.klo; k < G.khi; ++k) {
      row_values(G, e.b, k, e.xu.data(), e.rows.ee_fin.data(), g);
      const int base = rix(gi, k, 0);
      if (G.cone) {
        if (!live(G, k, 0)) {
          if (al) for (int i = 0; i < 3; ++i) e.rows.lam_hi[base + i] = 0;
          continue;
        }
        const double viol = std::max(0.0, double(std::sqrt(g[1] * g[1] + g[2] * g[2]) - g[0]));
        vmax = std::max(vmax, viol);
        vsum += viol;
        if (al) {
          S vv[3], p[3];
          for (int i = 0; i < 3; ++i) vv[i] = e.rows.lam_hi[base + i] - w * g[i];
          rows::soc_project(vv, p);
          for (int i = 0; i < 3; ++i) e.rows.lam_hi[base + i] = p[i];
        }
        continue;
      }
      for (int i = 0; i < G.n; ++i) {
        if (!live(G, k, i)) {
          if (al) e.rows.lam_hi[base + i] = e.rows.lam_lo[base + i] = 0;
          continue;
        }
        const double viol = std::max({0.0, double(G.lo[i] - g[i]), double(g[i] - G.hi[i])});
        vmax = std::max(vmax, viol);
        vsum += viol;
        if (!al) continue;
        S& lh = e.rows.lam_hi[base + i];
        S& ll = e.rows.lam_lo[base + i];
        if (G.eq[i]) {
          lh = std::min(std::max(lh + w * (g[i] - G.lo[i]), -sg), sg);
        } else {
          if (std::isfinite(double(G.hi[i]))) lh = std::min(std::max(lh + w * (g[i] - G.hi[i]), S(0)), sg);
          if (std::isfinite(double(G.lo[i]))) ll = std::min(std::max(ll + w * (G.lo[i] - g[i]), S(0)), sg);
        }
      }
    }
    e.rows.vmax[gi] = vmax;
    e.rows.vsum[gi] = vsum;
  }
}

// ------------------------------------------------------------------ host side
template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_row_groups(const std::vector<RowGroupSpec>& specs) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("row groups: " + m); };
  if (specs.size() > size_t(kMaxRowGroups)) bad("at most " + std::to_string(kMaxRowGroups) + " groups");
  std::vector<Group> gs(specs.size());
  for (size_t gi = 0; gi < specs.size(); ++gi) {
    const RowGroupSpec& sp = specs[gi];
    Group& G = gs[gi];
    const std::string id = "group " + std::to_string(gi) + ": ";
    if (sp.kind < 0 || sp.kind > int(RowKind::kCollision)) bad(id + "kind not supported on the CPU backend");
    if (sp.mech < 0 || sp.mech > int(RowMech::kAl)) bad(id + "unknown mechanism");
    G.kind = RowKind(sp.kind);
    G.mech = RowMech(sp.mech);
    G.n = sp.n_rows;
    if (G.n < 1 || G.n > kMaxRowsPerGroup) bad(id + "n_rows out of range");
    const bool on_u = G.kind == RowKind::kUBox || G.kind == RowKind::kLinU;
    const int kmax = on_u ? N_ - 1 : N_;
    if (sp.knot_lo < 0 || sp.knot_hi > kmax || sp.knot_lo >= sp.knot_hi) bad(id + "bad knot window");
    G.klo = sp.knot_lo;
    G.khi = sp.knot_hi;
    if (int(sp.lo.size()) != G.n || int(sp.hi.size()) != G.n) bad(id + "lo/hi need n_rows entries");
    for (int i = 0; i < G.n; ++i) {
      if (std::isnan(sp.lo[i]) || std::isnan(sp.hi[i]) || sp.lo[i] > sp.hi[i]) bad(id + "bad bounds");
      G.lo[i] = S(sp.lo[i]);
      G.hi[i] = S(sp.hi[i]);
      G.eq[i] = sp.lo[i] == sp.hi[i];
    }
    if (!sp.mask.empty() && sp.mask.size() != size_t(N_) * G.n) bad(id + "mask needs N * n_rows entries");
    G.mask = sp.mask;
    if (G.mech != RowMech::kTelemetry && !(sp.weight > 0)) bad(id + "weight must be > 0");
    G.w = S(sp.weight);
    G.delta = S(sp.delta);
    if (G.mech == RowMech::kBarrier && !(sp.delta > 0)) bad(id + "delta must be > 0");
    G.sigma = S(sp.sigma);
    G.cone = sp.cone;
    G.admm_iters = sp.admm_iters;
    if ((G.kind == RowKind::kQBox || G.kind == RowKind::kQdBox) && G.n != nv_) bad(id + "box needs nv rows");
    if (G.kind == RowKind::kUBox && G.n != nu_) bad(id + "torque box needs nu rows");
    if (G.kind == RowKind::kEeTerminal) {
      if (G.n != 3 || sp.target.size() != size_t(B_) * 3) bad(id + "EE rows need 3 rows and (B, 3) targets");
      G.target.assign(sp.target.begin(), sp.target.end());
    }
    G.CtC = MatUU::Zero(nu_, nu_);
    if (G.kind == RowKind::kLinU) {
      if (sp.C.size() != size_t(G.n) * nu_ || sp.d.size() != size_t(G.n)) bad(id + "C (n_rows x nu) and d (n_rows)");
      G.C.assign(sp.C.begin(), sp.C.end());
      G.d.assign(sp.d.begin(), sp.d.end());
      for (int a = 0; a < nu_; ++a)
        for (int c = 0; c < nu_; ++c) {
          S v = 0;
          for (int i = 0; i < G.n; ++i) v += G.C[size_t(i) * nu_ + a] * G.C[size_t(i) * nu_ + c];
          G.CtC(a, c) = v;
        }
    }
    if (G.cone && (G.kind != RowKind::kLinU || G.n != 3)) bad(id + "cones are LIN_U groups of 3 rows");
    if (G.kind == RowKind::kCollision && (col_.n == 0 || G.n != col_.n))
      bad(id + "collision rows need the collision model (set_collision) and one row per sphere");
  }
  groups_ = std::move(gs);
  has_admm_ = false;
  need_ee_ = false;
  admm_cap_ = std::max(1, admm_.iters);
  for (const Group& G : groups_) {
    if (G.mech == RowMech::kAdmm) {
      has_admm_ = true;
      admm_cap_ = std::max(admm_cap_, G.admm_iters);
    }
    if (G.kind == RowKind::kEeTerminal) need_ee_ = true;
  }
  const int GN = int(groups_.size());
  for (auto& ep : entries_) {
    Entry& e = *ep;
    for (int gi = 0; gi < kMaxRowGroups; ++gi) {
      const bool gone = gi >= GN;
      const RowGroupSpec* sp = gone ? nullptr : &specs[gi];
      if (gone || sp->reset_state) {
        for (int k = 0; k < N_; ++k)
          for (int i = 0; i < kMaxRowsPerGroup; ++i) {
            const int x = rix(gi, k, i);
            e.rows.lam_hi[x] = e.rows.lam_lo[x] = e.rows.rz[x] = e.rows.ry[x] = e.rows.g0[x] = 0;
          }
        e.rows.need_init[gi] = 1;
      }
      if (gone) continue;
      if (sp->admm_reinit) e.rows.need_init[gi] = 1;
      if (sp->admm_reclip) e.rows.need_clip[gi] = 1;
      const Group& G = groups_[gi];
      // An inactive slot carries no AL dual.
      if (!G.mask.empty()) {
        for (int k = 0; k < N_; ++k)
          for (int i = 0; i < G.n; ++i)
            if (!live(G, k, G.cone ? 0 : i)) e.rows.lam_hi[rix(gi, k, i)] = e.rows.lam_lo[rix(gi, k, i)] = 0;
      }
    }
  }
  stats_.n_groups = GN;
  stats_.row_max_violation.assign(size_t(B_) * GN, 0.0);
  stats_.row_sum_violation.assign(size_t(B_) * GN, 0.0);
  stats_.admm_r_prim.assign(B_, 0.0);
  stats_.admm_r_dual.assign(B_, 0.0);
  stats_.admm_iters.assign(B_, 0);
  stats_.admm_linsys_iters.assign(B_, 0);
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_collision(const std::vector<int>& frames, const std::vector<double>& centres,
                                           const std::vector<double>& radii, const std::vector<double>& obstacles) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("collision model: " + m); };
  const int n = int(frames.size());
  constexpr int K = collision::kObstacleStride;
  if (n > kMaxRowsPerGroup) bad("at most " + std::to_string(kMaxRowsPerGroup) + " spheres (one row each)");
  if (centres.size() != size_t(3) * n || radii.size() != size_t(n)) bad("centres (n x 3) and radii (n)");
  if (obstacles.size() % K != 0) bad("obstacles need " + std::to_string(K) + " numbers each");
  for (int i = 0; i < n; ++i) {
    if (frames[i] < 0 || frames[i] >= plant_->nframes()) bad("frame id out of range");
    if (!(radii[i] >= 0) || !std::isfinite(radii[i])) bad("radii must be finite and >= 0");
  }
  for (double v : centres)
    if (!std::isfinite(v)) bad("centres must be finite");
  for (size_t j = 0; j < obstacles.size(); j += K) {
    const int t = int(obstacles[j]);
    if (obstacles[j] != t || t < collision::kSphere || t > collision::kPlane) bad("unknown obstacle type");
    for (int i = 1; i < K; ++i)
      if (!std::isfinite(obstacles[j + i])) bad("obstacle parameters must be finite");
  }
  for (const Group& G : groups_)
    if (G.kind == RowKind::kCollision && G.n != n) bad("the installed collision group has another sphere count");
  col_.n = n;
  col_.frames = frames;
  col_.local.assign(centres.begin(), centres.end());
  col_.radius.assign(radii.begin(), radii.end());
  col_.obs.assign(obstacles.begin(), obstacles.end());
  col_.n_obs = int(obstacles.size() / K);
  for (auto& ep : entries_) {
    ep->rows.cJ.assign(size_t(N_) * n * nv_, S(0));
    ep->rows.cpos.assign(size_t(3) * n, S(0));
    ep->rows.cJp.assign(size_t(3) * n * nv_, S(0));
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::collision_clearance(const S* q, S* d, S* J) {
  Entry& e = *entries_[0];
  const int n = col_.n;
  if (n == 0) return;
  std::vector<S> x(nx_, S(0));
  std::copy(q, q + nv_, x.begin());
  collision_rows(e, 0, x.data(), d, J != nullptr);
  if (J) std::copy(e.rows.cJ.begin(), e.rows.cJ.begin() + size_t(n) * nv_, J);
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_admm_config(const AdmmConfig& c) {
  if (c.iters < 1) throw std::invalid_argument("admm iters: must be >= 1");
  if (!(c.eps_abs >= 0) || !(c.eps_rel >= 0)) throw std::invalid_argument("admm eps: must be >= 0");
  if (c.rho_adapt != admm_.rho_adapt) {
    for (auto& e : entries_) e->rows.rho_scale = 1;
  }
  admm_ = c;
  admm_cap_ = std::max(1, admm_.iters);
  for (const Group& G : groups_) {
    if (G.mech == RowMech::kAdmm) admm_cap_ = std::max(admm_cap_, G.admm_iters);
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::get_row_state(int which, S* out) const {
  const size_t rs = size_t(kMaxRowGroups) * N_ * kMaxRowsPerGroup;
  for (int b = 0; b < B_; ++b) {
    const Entry& e = *entries_[b];
    const std::vector<S>* src = which == 0 ? &e.rows.lam_hi : which == 1 ? &e.rows.lam_lo : which == 2 ? &e.rows.rz : &e.rows.ry;
    std::copy(src->begin(), src->end(), out + size_t(b) * rs);
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::get_admm_rho_scale(double* out) const {
  for (int b = 0; b < B_; ++b) out[b] = double(entries_[b]->rows.rho_scale);
}

// Carried state (exact replay): layout in solver.hpp. Rows beyond a group's n_rows and
// groups beyond the installed ones are never read, so they are not part of it.
template <typename S, int NV>
int BatchSolverImpl<S, NV>::state_size() const {
  int n = N_ * nx_ + 3;
  for (const Group& G : groups_) n += 2 + 4 * N_ * G.n;
  return n;
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::get_state(double* out) const {
  const int K = state_size();
  for (int b = 0; b < B_; ++b) {
    const Entry& e = *entries_[b];
    double* o = out + size_t(b) * K;
    for (int i = 0; i < N_ * nx_; ++i) *o++ = double(e.lam[i]);
    *o++ = double(e.rho);
    *o++ = double(e.drho_factor);
    *o++ = double(e.rows.rho_scale);
    for (int gi = 0; gi < int(groups_.size()); ++gi) {
      const int n = groups_[gi].n;
      *o++ = e.rows.need_init[gi];
      *o++ = e.rows.need_clip[gi];
      for (const std::vector<S>* v : {&e.rows.lam_hi, &e.rows.lam_lo, &e.rows.rz, &e.rows.ry})
        for (int k = 0; k < N_; ++k)
          for (int i = 0; i < n; ++i) *o++ = double((*v)[rix(gi, k, i)]);
    }
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_state(const double* in) {
  const int K = state_size();
  const int L = N_ * nx_;
  // Validate everything first: a refused state leaves the solver as it was.
  for (int b = 0; b < B_; ++b) {
    const double* p = in + size_t(b) * K;
    for (int i = 0; i < K; ++i) {
      if (!std::isfinite(p[i])) throw std::invalid_argument("solver state: non-finite value at index " +
                                                            std::to_string(i) + " of entry " + std::to_string(b));
    }
    if (!(p[L] > 0) || !(p[L + 1] > 0) || !(p[L + 2] > 0))
      throw std::invalid_argument("solver state: rho, its factor and the ADMM rho scale must be > 0 (entry " +
                                  std::to_string(b) + ")");
    const double* f = p + L + 3;
    for (const Group& G : groups_) {
      if ((f[0] != 0 && f[0] != 1) || (f[1] != 0 && f[1] != 1))
        throw std::invalid_argument("solver state: row-group flags must be 0 or 1 (entry " + std::to_string(b) + ")");
      f += 2 + 4 * N_ * G.n;
    }
  }
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    const double* p = in + size_t(b) * K;
    for (int i = 0; i < L; ++i) e.lam[i] = S(*p++);
    e.rho = S(*p++);
    e.drho_factor = S(*p++);
    e.rows.rho_scale = S(*p++);
    for (int gi = 0; gi < int(groups_.size()); ++gi) {
      const int n = groups_[gi].n;
      e.rows.need_init[gi] = static_cast<unsigned char>(*p++);
      e.rows.need_clip[gi] = static_cast<unsigned char>(*p++);
      for (std::vector<S>* v : {&e.rows.lam_hi, &e.rows.lam_lo, &e.rows.rz, &e.rows.ry})
        for (int k = 0; k < N_; ++k)
          for (int i = 0; i < n; ++i) (*v)[rix(gi, k, i)] = S(*p++);
    }
  }
}

}  // namespace gato
