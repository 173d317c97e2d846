// The floating-base contact-force SQP (gato/floating_sqp.hpp). No pinocchio include: the
// plant (floating_pinocchio.cpp) does the dynamics; this TU is Eigen only.
#include "gato/floating_sqp.hpp"

#include <Eigen/Cholesky>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace gato {

namespace {
void check_nonneg(const Eigen::VectorXd& w, const char* name) {
  FloatingPlant::check_finite(w.data(), w.size(), name);
  for (long i = 0; i < w.size(); ++i)
    if (w[i] < 0) throw std::invalid_argument(std::string(name) + ": weights must be >= 0");
}
void check_size(long got, long want, const char* name) {
  if (got != want)
    throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(want) + " entries, got " +
                                std::to_string(got));
}
// Projection onto the second-order cone K = {(t, z): ||z|| <= t} of R^3 and its Jacobian.
void soc_project(const Eigen::Vector3d& v, Eigen::Vector3d& p, Eigen::Matrix3d* D) {
  const double t = v[0];
  const Eigen::Vector2d z = v.tail<2>();
  const double nz = z.norm();
  if (nz <= t) {
    p = v;
    if (D) D->setIdentity();
  } else if (nz <= -t) {
    p.setZero();
    if (D) D->setZero();
  } else {
    const Eigen::Vector2d zh = z / nz;
    const double a = 0.5 * (t + nz);
    p << a, a * zh;
    if (D) {
      (*D)(0, 0) = 0.5;
      D->block<1, 2>(0, 1) = 0.5 * zh.transpose();
      D->block<2, 1>(1, 0) = 0.5 * zh;
      D->block<2, 2>(1, 1) = 0.5 * zh * zh.transpose() +
                             a / nz * (Eigen::Matrix2d::Identity() - zh * zh.transpose());
    }
  }
}
}  // namespace

FloatingSQP::FloatingSQP(const std::string& urdf_path, const std::vector<std::string>& contact_frames, int N,
                         double dt, Integrator integ)
    : plant_(std::make_unique<FloatingPlant>(urdf_path, contact_frames)), N_(N), dt_(dt), integ_(integ) {
  if (N < 2) throw std::invalid_argument("N: the horizon needs at least 2 knots, got " + std::to_string(N));
  FloatingPlant::check_dt(dt);
  FloatingPlant::check_integrator(integ);
  data_ = plant_->make_data();
  const int nv = plant_->nv(), n = nu(), f = nf();
  wx_ = Vec::Zero(2 * nv);
  wxN_ = Vec::Zero(2 * nv);
  r_ = Vec::Constant(n, 1e-4);
  uref_ = Vec::Zero(n);
  wf_ = Vec::Constant(f, 1e-2);  // the contract's fc default
  fref_ = Vec::Zero(f);
  xref_ = Mat::Zero(nx(), 1);
  xref_(6, 0) = 1.0;  // identity quaternion (x, y, z, w)
  ptgt_ = Mat::Zero(3 * plant_->nc(), 1);
  fplant_.resize(f);
  p_.resize(3 * plant_->nc());
}

FloatingSQP::~FloatingSQP() = default;

void FloatingSQP::set_state_weights(const Vec& w_running, const Vec& w_terminal) {
  check_size(w_running.size(), ndx(), "w_running");
  check_size(w_terminal.size(), ndx(), "w_terminal");
  check_nonneg(w_running, "w_running");
  check_nonneg(w_terminal, "w_terminal");
  wx_ = w_running;
  wxN_ = w_terminal;
}

void FloatingSQP::set_x_ref(const Mat& xref) {
  check_size(xref.rows(), nx(), "x_ref");
  if (xref.cols() != 1 && xref.cols() != N_)
    throw std::invalid_argument("x_ref: expected 1 or N = " + std::to_string(N_) + " knots, got " +
                                std::to_string(xref.cols()));
  for (long k = 0; k < xref.cols(); ++k) plant_->check_x(xref.col(k).data(), "x_ref");
  xref_ = xref;
}

void FloatingSQP::set_u_cost(const Vec& r) {
  check_size(r.size(), nu(), "u_cost");
  check_nonneg(r, "u_cost");
  r_ = r;
}

void FloatingSQP::set_u_ref(const Vec& uref) {
  check_size(uref.size(), nu(), "u_ref");
  FloatingPlant::check_finite(uref.data(), uref.size(), "u_ref");
  uref_ = uref;
}

void FloatingSQP::set_fc_cost(const Vec& wf) {
  check_size(wf.size(), nf(), "fc_cost");
  check_nonneg(wf, "fc_cost");
  wf_ = wf;
}

void FloatingSQP::set_fc_ref(const Vec& ref) {
  check_size(ref.size(), nf(), "fc_ref");
  FloatingPlant::check_finite(ref.data(), ref.size(), "fc_ref");
  fref_ = ref;
}

void FloatingSQP::set_contact_pos_cost(double weight, const Mat& targets) {
  if (!std::isfinite(weight) || weight < 0)
    throw std::invalid_argument("contact_pos_weight: expected a finite number >= 0");
  check_size(targets.rows(), 3 * plant_->nc(), "contact_targets");
  if (targets.cols() != 1 && targets.cols() != N_)
    throw std::invalid_argument("contact_targets: expected 1 or N = " + std::to_string(N_) + " knots, got " +
                                std::to_string(targets.cols()));
  FloatingPlant::check_finite(targets.data(), targets.size(), "contact_targets");
  wp_ = weight;
  ptgt_ = targets;
}

void FloatingSQP::set_friction(double mu, double fz_min, double weight) {
  if (!std::isfinite(mu) || mu <= 0) throw std::invalid_argument("mu: expected a finite number > 0");
  if (!std::isfinite(fz_min) || fz_min < 0) throw std::invalid_argument("fz_min: expected a finite number >= 0");
  if (!std::isfinite(weight) || weight < 0)
    throw std::invalid_argument("friction_weight: expected a finite number >= 0");
  mu_ = mu;
  fzmin_ = fz_min;
  wcone_ = weight;
}

const double* FloatingSQP::fc_to_plant(const double* fc) const {
  for (int c = 0; c < plant_->nc(); ++c)
    for (int i = 0; i < 3; ++i) {
      fplant_[6 * c + i] = fc[6 * c + 3 + i];  // force
      fplant_[6 * c + 3 + i] = fc[6 * c + i];  // moment
    }
  return fplant_.data();
}

double FloatingSQP::knot_cost(int k, const double* x, const double* w, Vec* gx, Vec* gw, Mat* Hxx,
                              Mat* Hww) const {
  const int nv = plant_->nv(), n = nu(), f = nf(), nc = plant_->nc(), nd = ndx();
  const bool last = (k == N_ - 1);
  const Vec& wx = last ? wxN_ : wx_;
  double cost;
  if (gx) gx->resize(nd);
  if (Hxx) {
    Hxx->resize(nd, nd);
    cost = plant_->state_cost(x, xref_at(k), wx.data(), gx ? gx->data() : nullptr, Hxx);
  } else {
    cost = plant_->state_cost(x, xref_at(k), wx.data(), gx ? gx->data() : nullptr, nullptr);
  }
  if (wp_ > 0 && nc > 0) {
    plant_->contact_kinematics(*data_, x, p_.data(), J_);
    const double* tgt = ptgt_.col(ptgt_.cols() == 1 ? 0 : k).data();
    for (int c = 0; c < nc; ++c) {
      const Eigen::Vector3d e = p_.segment<3>(3 * c) - Eigen::Map<const Eigen::Vector3d>(tgt + 3 * c);
      cost += 0.5 * wp_ * e.squaredNorm();
      const auto Jp = J_.middleRows(6 * c, 3);
      if (gx) gx->head(nv).noalias() += wp_ * Jp.transpose() * e;
      if (Hxx) Hxx->topLeftCorner(nv, nv).noalias() += wp_ * Jp.transpose() * Jp;
    }
  }
  if (last) return cost + al_terms(k, x, nullptr, gx, nullptr, Hxx, nullptr);
  if (gw) gw->setZero(n + f);
  if (Hww) Hww->setZero(n + f, n + f);
  for (int i = 0; i < n; ++i) {
    const double e = w[i] - uref_[i];
    cost += 0.5 * r_[i] * e * e;
    if (gw) (*gw)[i] = r_[i] * e;
    if (Hww) (*Hww)(i, i) = r_[i];
  }
  for (int i = 0; i < f; ++i) {
    const double e = w[n + i] - fref_[i];
    cost += 0.5 * wf_[i] * e * e;
    if (gw) (*gw)[n + i] = wf_[i] * e;
    if (Hww) (*Hww)(n + i, n + i) = wf_[i];
  }
  if (wcone_ > 0) {
    for (int c = 0; c < nc; ++c) {
      const int o = n + 6 * c + 3;  // the force half (fx, fy, fz) of frame c's [n; f] block
      const double fx = w[o], fy = w[o + 1], fz = w[o + 2];
      // rows r_j = a_j . (fx, fy, fz) + b_j
      const double a[5][3] = {{0, 0, -1}, {1, 0, -mu_}, {-1, 0, -mu_}, {0, 1, -mu_}, {0, -1, -mu_}};
      const double b[5] = {fzmin_, 0, 0, 0, 0};
      for (int j = 0; j < 5; ++j) {
        const double r = a[j][0] * fx + a[j][1] * fy + a[j][2] * fz + b[j];
        if (r <= 0) continue;
        cost += 0.5 * wcone_ * r * r;
        for (int s = 0; s < 3; ++s) {
          if (gw) (*gw)[o + s] += wcone_ * r * a[j][s];
          if (Hww)
            for (int t = 0; t < 3; ++t) (*Hww)(o + s, o + t) += wcone_ * a[j][s] * a[j][t];
        }
      }
    }
  }
  return cost + al_terms(k, x, w, gx, gw, Hxx, Hww);
}

double FloatingSQP::rollout(const double* x0, const Mat& W, Mat& X) const {
  check_size(W.rows(), nw(), "W");
  check_size(W.cols(), N_ - 1, "W knots");
  X.resize(nx(), N_);
  X.col(0) = Eigen::Map<const Vec>(x0, nx());
  double cost = 0.0;
  for (int k = 0; k < N_ - 1; ++k) {
    cost += knot_cost(k, X.col(k).data(), W.col(k).data(), nullptr, nullptr, nullptr, nullptr);
    wrench_at(k);
    plant_->step(*data_, X.col(k).data(), W.col(k).data(), fc_to_plant(W.col(k).data() + nu()), dt_,
                 X.col(k + 1).data(), integ_);
  }
  cost += knot_cost(N_ - 1, X.col(N_ - 1).data(), nullptr, nullptr, nullptr, nullptr, nullptr);
  return cost;
}

void FloatingSQP::linearize(const Mat& X, const Mat& W, LQ& lq) const {
  const int n = nu(), nc = plant_->nc(), nd = ndx();
  lq.A.resize(N_ - 1);
  lq.B.resize(N_ - 1);
  lq.Hxx.resize(N_);
  lq.Hww.resize(N_ - 1);
  lq.gx.resize(N_);
  lq.gw.resize(N_ - 1);
  Vec xn(nx());
  for (int k = 0; k < N_ - 1; ++k) {
    knot_cost(k, X.col(k).data(), W.col(k).data(), &lq.gx[k], &lq.gw[k], &lq.Hxx[k], &lq.Hww[k]);
    wrench_at(k);
    plant_->step_derivatives(*data_, X.col(k).data(), W.col(k).data(), fc_to_plant(W.col(k).data() + n), dt_,
                             xn.data(), lq.A[k], Bu_, Bf_, integ_);
    lq.B[k].resize(nd, nw());
    lq.B[k].leftCols(n) = Bu_;
    for (int c = 0; c < nc; ++c) {  // plant (f; n) -> contract [n; f]
      lq.B[k].middleCols(n + 6 * c, 3) = Bf_.middleCols(6 * c + 3, 3);
      lq.B[k].middleCols(n + 6 * c + 3, 3) = Bf_.middleCols(6 * c, 3);
    }
  }
  knot_cost(N_ - 1, X.col(N_ - 1).data(), nullptr, &lq.gx[N_ - 1], nullptr, &lq.Hxx[N_ - 1], nullptr);
}

bool FloatingSQP::riccati(const LQ& lq, double reg, Mat& kff, std::vector<Mat>& K, double& dV1,
                          double& dV2) const {
  const int nd = ndx(), m = nw();
  Mat P = lq.Hxx[N_ - 1];
  Vec p = lq.gx[N_ - 1];
  kff.resize(m, N_ - 1);
  K.resize(N_ - 1);
  dV1 = dV2 = 0.0;
  Mat PA(nd, nd), PB(nd, m), Qxx(nd, nd), Qww(m, m), Qwx(m, nd);
  Vec qx(nd), qw(m);
  for (int k = N_ - 2; k >= 0; --k) {
    const Mat& A = lq.A[k];
    const Mat& B = lq.B[k];
    PA.noalias() = P * A;
    PB.noalias() = P * B;
    Qxx = lq.Hxx[k];
    Qxx.noalias() += A.transpose() * PA;
    Qww = lq.Hww[k];
    Qww.noalias() += B.transpose() * PB;
    Qwx.noalias() = B.transpose() * PA;
    qx = lq.gx[k];
    qx.noalias() += A.transpose() * p;
    qw = lq.gw[k];
    qw.noalias() += B.transpose() * p;
    Mat Qreg = Qww;
    Qreg.diagonal().array() += reg;
    Eigen::LLT<Mat> llt(Qreg);
    if (llt.info() != Eigen::Success) return false;
    K[k] = -llt.solve(Qwx);
    kff.col(k) = -llt.solve(qw);
    const Vec kk = kff.col(k);
    const Mat& Kk = K[k];
    dV1 += kk.dot(qw);
    dV2 += 0.5 * kk.dot(Qreg * kk);
    // V = Q at w = kff + K dx: the value function of the LQ subproblem with Hww + reg I
    P = Qxx;
    P.noalias() += Kk.transpose() * Qreg * Kk;
    P.noalias() += Kk.transpose() * Qwx;
    P.noalias() += Qwx.transpose() * Kk;
    P = 0.5 * (P + P.transpose()).eval();
    p = qx;
    p.noalias() += Kk.transpose() * (Qreg * kk);
    p.noalias() += Kk.transpose() * qw;
    p.noalias() += Qwx.transpose() * kk;
  }
  return true;
}

void FloatingSQP::lq_step(const LQ& lq, const Mat& kff, const std::vector<Mat>& K, Mat& dX, Mat& dW) const {
  dX = Mat::Zero(ndx(), N_);
  dW.resize(nw(), N_ - 1);
  for (int k = 0; k < N_ - 1; ++k) {
    dW.col(k) = kff.col(k) + K[k] * dX.col(k);
    dX.col(k + 1) = lq.A[k] * dX.col(k) + lq.B[k] * dW.col(k);
  }
}

void FloatingSQP::hold_controls(const double* x, double* w, double damping, int k) const {
  plant_->check_x(x, "x");
  if (!(damping >= 0.0 && damping <= 1.0)) throw std::invalid_argument("damping: expected a number in [0, 1]");
  const int n = nu(), f = nf(), nv = plant_->nv(), m = nw();
  Vec wr(m), xn(nx()), winv(m);
  wr.head(n) = uref_;
  wr.tail(f) = fref_;
  winv.head(n) = r_.cwiseMax(1e-8).cwiseInverse();
  winv.tail(f) = wf_.cwiseMax(1e-8).cwiseInverse();
  Mat A;
  wrench_at(k);
  plant_->step_derivatives(*data_, x, wr.data(), fc_to_plant(wr.data() + n), dt_, xn.data(), A, Bu_, Bf_, integ_);
  Mat Bv(nv, m);
  Bv.leftCols(n) = Bu_.bottomRows(nv);
  for (int c = 0; c < plant_->nc(); ++c) {  // plant (f; n) -> contract [n; f]
    Bv.middleCols(n + 6 * c, 3) = Bf_.bottomRows(nv).middleCols(6 * c + 3, 3);
    Bv.middleCols(n + 6 * c + 3, 3) = Bf_.bottomRows(nv).middleCols(6 * c, 3);
  }
  const Vec r = (1.0 - damping) * Eigen::Map<const Vec>(x + plant_->nq(), nv) - xn.tail(nv);
  const Mat BW = Bv * winv.asDiagonal();
  const Mat G = BW * Bv.transpose();
  Eigen::Map<Vec>(w, m) = wr + BW.transpose() * G.ldlt().solve(r);
}

void FloatingSQP::cold_start(const double* x0, Mat& X, Mat& W) const {
  plant_->check_x(x0, "x0");
  X.resize(nx(), N_);
  W.resize(nw(), N_ - 1);
  X.col(0) = Eigen::Map<const Vec>(x0, nx());
  for (int k = 0; k < N_ - 1; ++k) {
    hold_controls(X.col(k).data(), W.col(k).data(), 0.5, k);  // sets interval k's wrench
    plant_->step(*data_, X.col(k).data(), W.col(k).data(), fc_to_plant(W.col(k).data() + nu()), dt_,
                 X.col(k + 1).data(), integ_);
  }
}

void FloatingSQP::sqp_loop(Mat& X, Mat& W, std::vector<Mat>& K, int max_iters, double tol, Result& res,
                           double& cost, double& reg) const {
  LQ lq;
  Mat kff, Xn(nx(), N_), Wn(nw(), N_ - 1);
  Vec dx(ndx());
  for (int it = 0; it < max_iters; ++it) {
    linearize(X, W, lq);
    double dV1 = 0, dV2 = 0;
    bool ok = false;
    for (int tries = 0; tries < 12; ++tries) {
      if (riccati(lq, reg, kff, K, dV1, dV2)) {
        ok = true;
        break;
      }
      reg = reg == 0.0 ? 1e-6 : reg * 10.0;
    }
    ++res.iters;  // over every inner loop of the solve
    res.reg = reg;
    if (!ok) break;
    res.converged = false;
    if (-dV1 <= tol * std::max(1.0, std::abs(cost))) {
      res.converged = true;
      break;
    }
    bool accepted = false;
    double alpha = 1.0;
    for (int h = 0; h <= max_halvings_; ++h, alpha *= 0.5) {
      Xn.col(0) = X.col(0);
      double c = 0.0;
      bool finite = true;
      for (int k = 0; k < N_ - 1; ++k) {
        plant_->difference(X.col(k).data(), Xn.col(k).data(), dx.data());
        Wn.col(k) = W.col(k) + alpha * kff.col(k) + K[k] * dx;
        c += knot_cost(k, Xn.col(k).data(), Wn.col(k).data(), nullptr, nullptr, nullptr, nullptr);
        wrench_at(k);
        plant_->step(*data_, Xn.col(k).data(), Wn.col(k).data(), fc_to_plant(Wn.col(k).data() + nu()), dt_,
                     Xn.col(k + 1).data(), integ_);
        if (!Xn.col(k + 1).allFinite()) {
          finite = false;
          break;
        }
      }
      if (!finite) continue;
      c += knot_cost(N_ - 1, Xn.col(N_ - 1).data(), nullptr, nullptr, nullptr, nullptr, nullptr);
      const double predicted = -(alpha * dV1 + alpha * alpha * dV2);
      if (std::isfinite(c) && cost - c >= 1e-4 * predicted && c < cost) {
        res.last_decrease = cost - c;
        res.last_alpha = alpha;
        cost = c;
        X.swap(Xn);
        W.swap(Wn);
        accepted = true;
        break;
      }
    }
    if (!accepted) {
      ++res.line_search_fails;
      reg = reg == 0.0 ? 1e-6 : reg * 10.0;
      if (reg > 1e6) break;
      continue;
    }
    reg = reg > 1e-9 ? reg * 0.1 : 0.0;
  }
}

// ---------------------------------------------------------------- hard rows (AL)
int FloatingSQP::add_row_group(RowGroup g) {
  const int nc = plant_->nc();
  if (g.mech != RowGroup::kAL && g.mech != RowGroup::kTelemetry)
    throw std::invalid_argument("mech: the floating solver runs 'al' and 'telemetry' row groups");
  if (!std::isfinite(g.rho) || g.rho <= 0) throw std::invalid_argument("rho: expected a finite number > 0");
  int m;
  if (g.kind == RowGroup::kFc) {
    if (g.C.cols() != nf() || g.C.rows() < 1)
      throw std::invalid_argument("C: expected shape (m, " + std::to_string(nf()) + "), m >= 1");
    FloatingPlant::check_finite(g.C.data(), g.C.size(), "C");
    m = int(g.C.rows());
    if (g.d.size() == 0) g.d = Vec::Zero(m);
    check_size(g.d.size(), m, "d");
    FloatingPlant::check_finite(g.d.data(), m, "d");
    if (g.cone && m != 3) throw std::invalid_argument("C: a cone needs 3 rows");
    if (g.knot_hi < 0) g.knot_hi = N_ - 1;
    if (g.knot_lo < 0 || g.knot_lo >= g.knot_hi || g.knot_hi > N_ - 1)
      throw std::invalid_argument("knot_lo / knot_hi: expected 0 <= knot_lo < knot_hi <= N-1 = " +
                                  std::to_string(N_ - 1) + " (control knots)");
  } else if (g.kind == RowGroup::kContactPos) {
    if (nc == 0) throw std::invalid_argument("contact_frames: the solver has no contact frame");
    m = 3 * nc;
    if (g.cone) throw std::invalid_argument("cone: contact-position rows are interval rows");
    if (g.knot_hi < 0) g.knot_hi = N_;
    if (g.knot_lo < 0 || g.knot_lo >= g.knot_hi || g.knot_hi > N_)
      throw std::invalid_argument("knot_lo / knot_hi: expected 0 <= knot_lo < knot_hi <= N = " + std::to_string(N_));
    if (g.target.size() == 0) g.target = Mat::Zero(m, 1);
  } else {
    throw std::invalid_argument("kind: expected kFc or kContactPos");
  }
  if (!g.cone) {
    if (g.lo.size() == 0) g.lo = Vec::Zero(m);
    if (g.hi.size() == 0) g.hi = Vec::Zero(m);
    check_size(g.lo.size(), m, "lo");
    check_size(g.hi.size(), m, "hi");
    for (int i = 0; i < m; ++i) {
      if (std::isnan(g.lo[i]) || std::isnan(g.hi[i]))
        throw std::invalid_argument("lo / hi: NaN at row " + std::to_string(i));
      if (g.lo[i] > g.hi[i]) throw std::invalid_argument("lo > hi at row " + std::to_string(i));
      if (g.lo[i] == std::numeric_limits<double>::infinity() || g.hi[i] == -std::numeric_limits<double>::infinity())
        throw std::invalid_argument("lo / hi: lo = +inf or hi = -inf leaves no feasible value");
    }
  }
  groups_.push_back(std::move(g));
  if (groups_.back().kind == RowGroup::kContactPos) {
    try {
      set_row_group_targets(int(groups_.size()) - 1, groups_.back().target);
    } catch (...) {
      groups_.pop_back();
      throw;
    }
  }
  groups_.back().lam = Mat::Zero(m, N_);
  return int(groups_.size()) - 1;
}

namespace {
void check_group(int g, size_t n) {
  if (g < 0 || size_t(g) >= n)
    throw std::invalid_argument("g: expected a row-group index in [0, " + std::to_string(n) + "), got " +
                                std::to_string(g));
}
}  // namespace

void FloatingSQP::set_row_group_targets(int g, const Mat& targets) {
  check_group(g, groups_.size());
  RowGroup& G = groups_[g];
  if (G.kind != RowGroup::kContactPos)
    throw std::invalid_argument("g: group " + std::to_string(g) + " is not a contact-position group");
  check_size(targets.rows(), G.rows(), "targets");
  if (targets.cols() != 1 && targets.cols() != N_)
    throw std::invalid_argument("targets: expected 1 or N = " + std::to_string(N_) + " knots, got " +
                                std::to_string(targets.cols()));
  FloatingPlant::check_finite(targets.data(), targets.size(), "targets");
  G.target = targets;
}

void FloatingSQP::set_row_group_rho(int g, double rho) {
  check_group(g, groups_.size());
  if (!std::isfinite(rho) || rho <= 0) throw std::invalid_argument("rho: expected a finite number > 0");
  groups_[g].rho = rho;
}

void FloatingSQP::set_row_group_mech(int g, int mech) {
  check_group(g, groups_.size());
  if (mech != RowGroup::kAL && mech != RowGroup::kTelemetry)
    throw std::invalid_argument("mech: the floating solver runs 'al' and 'telemetry' row groups");
  groups_[g].mech = mech;
  groups_[g].lam.setZero();
}

void FloatingSQP::reset_duals() {
  for (auto& G : groups_) G.lam.setZero();
}

void FloatingSQP::set_al(int outer_iters, double tol, double growth, double rho_max) {
  if (outer_iters < 1) throw std::invalid_argument("al_iters: expected an integer >= 1");
  if (!std::isfinite(tol) || tol < 0) throw std::invalid_argument("al_tol: expected a finite number >= 0");
  if (!std::isfinite(growth) || growth < 1) throw std::invalid_argument("rho_growth: expected a finite number >= 1");
  if (!std::isfinite(rho_max) || rho_max <= 0) throw std::invalid_argument("rho_max: expected a finite number > 0");
  al_outer_ = outer_iters;
  al_tol_ = tol;
  al_growth_ = growth;
  al_rho_max_ = rho_max;
}

bool FloatingSQP::row_active(const RowGroup& G, int k) const {
  if (G.kind == RowGroup::kFc && k >= N_ - 1) return false;
  return k >= G.knot_lo && k < G.knot_hi;
}

void FloatingSQP::row_values(int gi, int k, const double* x, const double* w, Vec& g, Mat* Jx, Mat* Jw) const {
  const RowGroup& G = groups_[gi];
  const int m = G.rows(), nv = plant_->nv();
  if (G.kind == RowGroup::kFc) {
    if (!w) throw std::invalid_argument("k: fc rows live on the control knots 0 .. N-2 (no w at the last knot)");
    g = G.C * Eigen::Map<const Vec>(w + nu(), nf()) + G.d;
    if (Jx) Jx->setZero(m, ndx());
    if (Jw) {
      Jw->setZero(m, nw());
      Jw->rightCols(nf()) = G.C;
    }
    return;
  }
  plant_->contact_kinematics(*data_, x, p_.data(), J_);
  g = p_ - G.target.col(G.target.cols() == 1 ? 0 : k);
  if (Jx) {
    Jx->setZero(m, ndx());
    for (int c = 0; c < plant_->nc(); ++c) Jx->block(3 * c, 0, 3, nv) = J_.middleRows(6 * c, 3);
  }
  if (Jw) Jw->setZero(m, nw());
}

double FloatingSQP::row_violation(int gi, const Mat& X, const Mat& W) const {
  check_group(gi, groups_.size());
  const RowGroup& G = groups_[gi];
  double v = 0.0;
  Vec g;
  for (int k = 0; k < N_; ++k) {
    if (!row_active(G, k)) continue;
    row_values(gi, k, X.col(k).data(), k < N_ - 1 ? W.col(k).data() : nullptr, g, nullptr, nullptr);
    if (G.cone) {
      v = std::max(v, g.tail<2>().norm() - g[0]);
    } else {
      for (int i = 0; i < G.rows(); ++i) v = std::max(v, std::max(G.lo[i] - g[i], g[i] - G.hi[i]));
    }
  }
  return v;
}

void FloatingSQP::update_duals(const Mat& X, const Mat& W) const {
  Vec g;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    RowGroup& G = groups_[gi];
    if (G.mech != RowGroup::kAL) continue;
    const double rho = G.rho * (gi < rho_scale_.size() ? rho_scale_[gi] : 1.0);
    for (int k = 0; k < N_; ++k) {
      if (!row_active(G, k)) continue;
      row_values(int(gi), k, X.col(k).data(), k < N_ - 1 ? W.col(k).data() : nullptr, g, nullptr, nullptr);
      if (G.cone) {  // lam <- Pi_K(lam - rho g)
        Eigen::Vector3d p;
        soc_project(G.lam.col(k).head<3>() - rho * g.head<3>(), p, nullptr);
        G.lam.col(k).head<3>() = p;
      } else {  // signed: lam <- rho (v - clip(v, lo, hi)), v = g + lam / rho
        for (int i = 0; i < G.rows(); ++i) {
          const double v = g[i] + G.lam(i, k) / rho;
          G.lam(i, k) = rho * (v - std::min(std::max(v, G.lo[i]), G.hi[i]));
        }
      }
    }
  }
}

double FloatingSQP::al_terms(int k, const double* x, const double* w, Vec* gx, Vec* gw, Mat* Hxx,
                             Mat* Hww) const {
  double cost = 0.0;
  Vec g, e;
  Mat Jx, Jw, H;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const RowGroup& G = groups_[gi];
    if (G.mech != RowGroup::kAL || !row_active(G, k)) continue;
    const double rho = G.rho * (gi < rho_scale_.size() ? rho_scale_[gi] : 1.0);
    const bool need = gx || gw || Hxx || Hww;
    row_values(int(gi), k, x, w, g, need ? &Jx : nullptr, need ? &Jw : nullptr);
    const int m = G.rows();
    e.resize(m);
    H.setZero(m, m);
    const auto lam = G.lam.col(k);
    if (G.cone) {  // (rho/2) dist_K(g - lam/rho)^2 - |lam|^2 / (2 rho)
      const Eigen::Vector3d v = g.head<3>() - lam.head<3>() / rho;
      Eigen::Vector3d p;
      Eigen::Matrix3d D;
      soc_project(v, p, &D);
      e = v - p;
      H = rho * (Eigen::Matrix3d::Identity() - D);
      cost += 0.5 * rho * e.squaredNorm() - lam.head<3>().squaredNorm() / (2 * rho);
    } else {  // per row (rho/2) dist_[lo,hi](g + lam/rho)^2 - lam^2 / (2 rho)
      for (int i = 0; i < m; ++i) {
        const double v = g[i] + lam[i] / rho;
        e[i] = v - std::min(std::max(v, G.lo[i]), G.hi[i]);
        if (e[i] != 0.0 || G.lo[i] == G.hi[i]) H(i, i) = rho;
        cost += 0.5 * rho * e[i] * e[i] - lam[i] * lam[i] / (2 * rho);
      }
    }
    if (!need) continue;
    const Vec grad = rho * e;
    if (G.kind == RowGroup::kContactPos) {
      if (gx) gx->noalias() += Jx.transpose() * grad;
      if (Hxx) Hxx->noalias() += Jx.transpose() * H * Jx;
    } else {
      if (gw) gw->noalias() += Jw.transpose() * grad;
      if (Hww) Hww->noalias() += Jw.transpose() * H * Jw;
    }
  }
  return cost;
}

double FloatingSQP::total_cost(const Mat& X, const Mat& W) const {
  double c = 0.0;
  for (int k = 0; k < N_ - 1; ++k)
    c += knot_cost(k, X.col(k).data(), W.col(k).data(), nullptr, nullptr, nullptr, nullptr);
  return c + knot_cost(N_ - 1, X.col(N_ - 1).data(), nullptr, nullptr, nullptr, nullptr, nullptr);
}

FloatingSQP::Result FloatingSQP::solve(const double* x0, Mat& X, Mat& W, std::vector<Mat>& K, int max_iters,
                                       double tol, bool try_cold) const {
  plant_->check_x(x0, "x0");
  check_size(W.rows(), nw(), "W");
  check_size(W.cols(), N_ - 1, "W knots");
  FloatingPlant::check_finite(W.data(), W.size(), "W");
  if (max_iters < 1) throw std::invalid_argument("max_iters: expected >= 1");
  if (!std::isfinite(tol) || tol < 0) throw std::invalid_argument("tol: expected a finite number >= 0");
  Result res;
  Mat kff, Xn(nx(), N_), Wn(nw(), N_ - 1);
  Vec dx(ndx());
  double cost;
  const bool policy = X.cols() == N_ && X.rows() == nx() && int(K.size()) == N_ - 1;
  if (policy) {
    for (int k = 0; k < N_ - 1; ++k)
      if (K[k].rows() != nw() || K[k].cols() != ndx())
        throw std::invalid_argument("K: expected N-1 gains of shape (nw, ndx)");
    FloatingPlant::check_finite(X.data(), X.size(), "X");
    Xn.col(0) = Eigen::Map<const Vec>(x0, nx());
    cost = 0.0;
    for (int k = 0; k < N_ - 1; ++k) {
      plant_->difference(X.col(k).data(), Xn.col(k).data(), dx.data());
      Wn.col(k) = W.col(k) + K[k] * dx;
      cost += knot_cost(k, Xn.col(k).data(), Wn.col(k).data(), nullptr, nullptr, nullptr, nullptr);
      wrench_at(k);
      plant_->step(*data_, Xn.col(k).data(), Wn.col(k).data(), fc_to_plant(Wn.col(k).data() + nu()), dt_,
                   Xn.col(k + 1).data(), integ_);
    }
    cost += knot_cost(N_ - 1, Xn.col(N_ - 1).data(), nullptr, nullptr, nullptr, nullptr, nullptr);
    X.swap(Xn);
    W.swap(Wn);
  } else {
    cost = rollout(x0, W, X);
  }
  if (try_cold || !std::isfinite(cost)) {
    cold_start(x0, Xn, Wn);
    const double c = rollout(x0, Wn, Xn);
    if (c < cost || !std::isfinite(cost)) {
      cost = c;
      X.swap(Xn);
      W.swap(Wn);
      res.cold = true;
    }
  }
  res.cost0 = cost;
  double reg = 0.0;
  rho_scale_.assign(groups_.size(), 1.0);
  bool any_al = false;
  for (const auto& G : groups_) any_al = any_al || G.mech == RowGroup::kAL;
  std::vector<double> prev(groups_.size(), std::numeric_limits<double>::infinity());
  res.violation.assign(groups_.size(), 0.0);
  for (int outer = 0; outer < (any_al ? al_outer_ : 1); ++outer) {
    if (outer > 0) cost = total_cost(X, W);  // the multipliers / rho moved: the same plan costs anew
    sqp_loop(X, W, K, max_iters, tol, res, cost, reg);
    bool met = true;
    for (size_t g = 0; g < groups_.size(); ++g) {
      res.violation[g] = row_violation(int(g), X, W);
      if (groups_[g].mech == RowGroup::kAL && res.violation[g] > al_tol_) met = false;
    }
    if (!any_al) break;
    // the PHR multiplier update on the returned plan (also after the last inner solve: repeat
    // solves continue the outer loop, as the fixed-base AL groups do)
    update_duals(X, W);
    ++res.al_iters;
    if (met) break;
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (res.violation[g] > 0.25 * prev[g] && res.violation[g] > al_tol_)
        rho_scale_[g] = std::min(rho_scale_[g] * al_growth_, al_rho_max_ / groups_[g].rho);
      prev[g] = res.violation[g];
    }
  }
  res.cost = cost;
  LQ lq;
  // the gains of the returned trajectory (the feedback the caller applies between solves)
  linearize(X, W, lq);
  double dV1, dV2;
  double r = reg;
  bool ok = riccati(lq, r, kff, K, dV1, dV2);
  while (!ok && r < 1e6) {
    r = r == 0.0 ? 1e-6 : r * 10.0;
    ok = riccati(lq, r, kff, K, dV1, dV2);
  }
  if (!ok) K.assign(N_ - 1, Mat::Zero(nw(), ndx()));  // no feedback rather than a partial one
  return res;
}

}  // namespace gato
