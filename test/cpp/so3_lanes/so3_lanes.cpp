// so3.hpp's lane forms against libm (test/test_so3_lanes.py compiles and runs this): the
// branch-free atan2 of the line search's lanes (so3::atan2_lanes) against std::atan2, and
// the log map / inverse right Jacobian that share one atan2 (so3::log with jc, log_finish)
// against the libm forms they replace (t / (2 sin t) v; cot(t/2) from cos / sin of t/2), and
// both against a long double evaluation of the same maps on the same R. Prints JSON: the
// largest relative errors.
#include <cmath>
#include <cstdio>
#include <random>

#include "so3.hpp"

using namespace gato;
using V3 = so3::V3<double>;
using M3 = so3::M3<double>;

// The libm forms (so3.hpp before the lane forms).
static V3 log_libm(const M3& R) {
  const double c = std::min(1.0, std::max(-1.0, (R.trace() - 1.0) / 2.0));
  const V3 v(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));
  const double t = std::atan2(0.5 * v.norm(), c);
  if (t < 1e-4) return (0.5 + t * t / 12.0) * v;
  return (t / (2.0 * std::sin(t))) * v;  // the cases below pi - 1e-3 only
}
static M3 jr_inv_libm(const V3& e) {
  const double t2 = e.squaredNorm(), t = std::sqrt(t2);
  const double c = t < 1e-4 ? 1.0 / 12.0 + t2 / 720.0 : 1.0 / t2 - std::cos(t / 2) / (2 * t * std::sin(t / 2));
  const M3 H = so3::hat<double>(e);
  return M3::Identity() + 0.5 * H + c * H * H;
}

// The same in long double from the same double R (the reference both are measured against):
// the log map and the coefficient of e^ e^ in Jr^-1 (series below 1e-3 rad).
static V3 log_ld(const M3& R, double* jc) {
  typedef long double L;
  const L c = std::min(L(1), std::max(L(-1), (L(R(0, 0)) + R(1, 1) + R(2, 2) - 1) / 2));
  const L v[3] = {L(R(2, 1)) - R(1, 2), L(R(0, 2)) - R(2, 0), L(R(1, 0)) - R(0, 1)};
  const L n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  const L t = std::atan2(n / 2, c);
  const L f = t < 1e-6L ? 0.5L + t * t / 12 : t / (2 * std::sin(t));
  *jc = double(t < 1e-3L ? 1.0L / 12 + t * t / 720 + t * t * t * t / 30240
                         : 1 / (t * t) - std::cos(t / 2) / (2 * t * std::sin(t / 2)));
  return V3(double(f * v[0]), double(f * v[1]), double(f * v[2]));
}

int main() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> U(-1.0, 1.0);
  // atan2 with y >= 0: random directions, magnitudes over 1e-300 .. 1e300, exact axes.
  double at_rel = 0, at_abs = 0;
  long n_at = 0;
  auto check_at = [&](double y, double x) {
    double yy[4] = {y, y, y, y}, xx[4] = {x, x, x, x}, out[4];
    so3::atan2_lanes<double>(yy, xx, out, 4);
    const double ref = std::atan2(y, x);
    const double d = std::abs(out[0] - ref);
    at_abs = std::max(at_abs, d);
    if (ref != 0) at_rel = std::max(at_rel, d / std::abs(ref));
    else if (out[0] != 0) at_rel = 1;
    ++n_at;
  };
  std::uniform_real_distribution<double> E(-300, 300);
  for (int i = 0; i < 2000000; ++i) {
    const double s = std::pow(10.0, E(rng) * (i % 2 ? 1.0 : 0.02));
    check_at(std::abs(U(rng)) * s, U(rng) * s);
  }
  const double sp[] = {0.0, 1e-310, 1e-20, 1e-8, 0.5, 1.0, 2.0, 1e20};
  for (double y : sp)
    for (double x : sp) {
      check_at(y, x);
      check_at(y, -x);
    }
  // The log map and Jr^-1 on rotations at angles from 1e-9 to pi - 1e-3.
  double log_rel = 0, jr_rel = 0, lane_rel = 0, ld_new = 0, ld_libm = 0, ld_jr_new = 0, ld_jr_libm = 0;
  long n_log = 0;
  for (int i = 0; i < 400000; ++i) {
    V3 ax(U(rng), U(rng), U(rng));
    ax.normalize();
    const double f = std::abs(U(rng));
    const double t = i % 3 == 0 ? std::pow(10.0, -9 + 8.0 * f) : (M_PI - 1.001e-3) * f;
    const M3 R = so3::exp<double>(V3(t * ax));
    double jc = 0;
    const V3 e = so3::log<double>(R, &jc);
    const V3 el = log_libm(R);
    log_rel = std::max(log_rel, (e - el).norm() / el.norm());
    const M3 J = so3::jr_inv<double>(e, jc), Jl = jr_inv_libm(el);
    jr_rel = std::max(jr_rel, (J - Jl).norm() / Jl.norm());
    // The lane form: parts, atan2 in lanes, log_finish.
    const so3::LogParts<double> p = so3::log_parts<double>(R);
    double y[2] = {p.s, p.s}, x[2] = {p.c, p.c}, tt[2];
    so3::atan2_lanes<double>(y, x, tt, 2);
    const V3 e2 = so3::log_finish<double>(R, p, tt[0]);
    lane_rel = std::max(lane_rel, (e2 - el).norm() / el.norm());
    double jcl = 0;
    const V3 eld = log_ld(R, &jcl);
    ld_new = std::max(ld_new, (e2 - eld).norm() / eld.norm());
    ld_libm = std::max(ld_libm, (el - eld).norm() / eld.norm());
    const M3 Jld = so3::jr_inv<double>(eld, jcl);
    ld_jr_new = std::max(ld_jr_new, (J - Jld).norm() / Jld.norm());
    ld_jr_libm = std::max(ld_jr_libm, (Jl - Jld).norm() / Jld.norm());
    ++n_log;
  }
  std::printf("{\"atan2_n\": %ld, \"atan2_max_rel\": %.3e, \"atan2_max_abs\": %.3e, \"log_n\": %ld, "
              "\"log_max_rel\": %.3e, \"jr_inv_max_rel\": %.3e, \"lane_log_max_rel\": %.3e, "
              "\"ld_lane_log\": %.3e, \"ld_libm_log\": %.3e, \"ld_jr_inv\": %.3e, \"ld_libm_jr_inv\": %.3e}\n",
              n_at, at_rel, at_abs, n_log, log_rel, jr_rel, lane_rel, ld_new, ld_libm, ld_jr_new, ld_jr_libm);
  return 0;
}
