// gato_cuda_check: a self-contained GPU check of the CUDA backend, for a machine that has
// a GPU and its driver but nothing else of the project (no Python, no pinocchio): the
// kernels (kernels.cu) against the host run of the same header code (sqp.hpp), and their
// solve time. The robot comes from a model file that gato._cuda_host writes on any machine
// (Dynamics64.model_bytes(): the DevModel<double> bytes); the problem is built here: B
// figure-8 windows (N knots, dt 0.01 s, start 10 samples apart) around the EE at q0, the
// state q0 at rest, the hold trajectory (the problem of test/test_cuda_core.py).
//
//   gato_cuda_check MODEL_FILE [--iters 5] [--N 32] [--repeats 10] [--B 1,16,128,1024] [--host-only]
//
// Prints one JSON object per line: per dtype and linsys the max |xu_gpu - xu_host| after
// `iters` SQP iterations (B = 64), per dtype the feedback gains (sqp_gains.hpp) of one plan
// from the one-thread launch against the host run (max |dK| / max |K|), per dtype the same
// plan check with the EE orientation term on (orientation_gpu_vs_host), then per dtype and B
// the median / min / max wall time of one solve on the GPU (and on the host for B <= 16).
// Exit status 1 when a GPU plan (position-only or with the orientation term) differs from the
// host's by more than 1e-6 (double) / 0.1
// (float: a gross-error bound; device sinf / cosf and FMA contraction round differently from
// the host) or the gains by more than 1e-8 / 1e-2 relative, 2 on a CUDA error.
// Built by CMake next to gato._cuda (target gato_cuda_check); bench/gpu_check.sh runs it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "device_api.hpp"
#include "gato_cuda/sqp.hpp"
#include "gato_cuda/sqp_gains.hpp"

using namespace gato::cuda;

namespace {

template <typename S>
DevModel<S> cast_model(const DevModel<double>& d) {
  DevModel<S> m;
  m.n = d.n;
  m.ee_body = d.ee_body;
  for (int i = 0; i < kMaxBodies; ++i) {
    m.parent[i] = d.parent[i];
    m.idx[i] = d.idx[i];
    m.prismatic[i] = d.prismatic[i];
    m.rotated[i] = d.rotated[i];
    m.mass[i] = S(d.mass[i]);
    m.armature[i] = S(d.armature[i]);
    m.q_lo[i] = S(d.q_lo[i]);
    m.q_hi[i] = S(d.q_hi[i]);
    m.qd_max[i] = S(d.qd_max[i]);
    m.u_max[i] = S(d.u_max[i]);
    for (int k = 0; k < 9; ++k) {
      m.Rt[9 * i + k] = S(d.Rt[9 * i + k]);
      m.Icom[9 * i + k] = S(d.Icom[9 * i + k]);
      m.Rf[9 * i + k] = S(d.Rf[9 * i + k]);
    }
    for (int k = 0; k < 3; ++k) {
      m.pt[3 * i + k] = S(d.pt[3 * i + k]);
      m.com[3 * i + k] = S(d.com[3 * i + k]);
    }
  }
  for (int k = 0; k < 3; ++k) {
    m.g[k] = S(d.g[k]);
    m.ee_p[k] = S(d.ee_p[k]);
  }
  for (int k = 0; k < 9; ++k) m.ee_R[k] = S(d.ee_R[k]);
  return m;
}

template <typename S>
SqpShared<S> shared_of(const DevModel<double>& md, int N, int linsys) {
  SqpShared<S> P;
  P.model = cast_model<S>(md);
  const int nv = md.n;
  P.N = N;
  P.nv = nv;
  P.nx = 2 * nv;
  P.nu = nv;
  P.L = N * 2 * nv + (N - 1) * nv;
  P.dt = S(0.01);
  P.linsys = linsys;
  for (int j = 0; j < nv; ++j) {
    P.lo_q[j] = P.model.q_lo[j] + S(kMarginD);
    P.hi_q[j] = P.model.q_hi[j] - S(kMarginD);
    P.max_qd[j] = P.model.qd_max[j] - S(kMarginD);
    P.max_u[j] = P.model.u_max[j] - S(kMarginD);
  }
  const bool f = sizeof(S) == sizeof(float);
  P.u_prox = S(f ? 1e-6 : 1e-8);   // gato::kZeroControlProx{32,64}
  P.pcg_floor = S(f ? 1e-6 : 1e-12);
  return P;
}

/// The batch problem and its per-entry state (host arrays).
template <typename S>
struct Batch {
  int B, I;
  std::vector<S> xs, ref, xu, lam;
  std::vector<SqpEntryState<S>> st;
  std::vector<SqpEntryStats<S>> stats;
  std::vector<int> pcg;
  std::vector<S> mm, ss;
};

template <typename S>
Batch<S> make_batch(const SqpShared<S>& P, int B, int I) {
  static const double q7[7] = {0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4};
  const int nv = P.nv, nx = P.nx, N = P.N;
  Batch<S> b{B, I};
  S q0[kMaxBodies];
  for (int j = 0; j < nv; ++j) q0[j] = S(j < 7 ? q7[j] : 0.3);
  WBody<S> w[kMaxBodies];
  kinematics(P.model, q0, w);
  S p0[3];
  ee_position(P.model, w, p0);
  b.xs.assign(size_t(B) * nx, S(0));
  b.ref.assign(size_t(B) * 6 * N, S(0));
  b.xu.assign(size_t(B) * P.L, S(0));
  const double two_pi = 6.283185307179586, period = 2.0;
  for (int e = 0; e < B; ++e) {
    for (int j = 0; j < nv; ++j) b.xs[size_t(e) * nx + j] = q0[j];
    for (int k = 0; k < N; ++k) {
      const double t = (10 * (e % 16) + k) * 0.01, wt = two_pi * t / period;
      S* r = &b.ref[(size_t(e) * N + k) * 6];
      r[0] = S(p0[0] + 0.1 * std::sin(wt));
      r[1] = p0[1];
      r[2] = S(p0[2] + 0.08 * std::sin(2 * wt));
      for (int i = 0; i < nx; ++i) b.xu[size_t(e) * P.L + k * (nx + P.nu) + i] = b.xs[size_t(e) * nx + i];
    }
  }
  b.lam.assign(size_t(B) * N * nx, S(0));
  b.st.assign(B, SqpEntryState<S>{S(0.01), S(1), S(1.2), S(10), S(1e-4)});
  b.stats.assign(B, SqpEntryStats<S>{0, 0, 0, S(0), S(0)});
  b.pcg.assign(size_t(B) * I, 0);
  b.mm.assign(size_t(B) * I, S(0));
  b.ss.assign(size_t(B) * I, S(0));
  return b;
}

template <typename S>
void run_host(const SqpShared<S>& P, Batch<S>& b) {
  std::vector<S> work(size_t(work_size<S>(P.N, P.nv)));
  for (int it = 0; it < b.I; ++it)
    for (int e = 0; e < b.B; ++e) {
      if (b.stats[e].converged || b.stats[e].stopped) continue;
      SqpEntry<S> en;
      en.xs = &b.xs[size_t(e) * P.nx];
      en.ref = &b.ref[size_t(e) * 6 * P.N];
      en.fext = nullptr;
      en.xu = &b.xu[size_t(e) * P.L];
      en.lam = &b.lam[size_t(e) * P.N * P.nx];
      en.st = &b.st[e];
      en.stats = &b.stats[e];
      en.pcg_iters = &b.pcg[size_t(e) * b.I];
      en.min_merit = &b.mm[size_t(e) * b.I];
      en.step_size = &b.ss[size_t(e) * b.I];
      carve(en.w, work.data(), P.N, P.nv);
      sqp_iterate(P, en, it);
    }
}

template <typename T>
T* to_dev(const std::vector<T>& v) {
  T* p = static_cast<T*>(dev::alloc(v.size() * sizeof(T)));
  dev::upload(p, v.data(), v.size() * sizeof(T));
  return p;
}

/// All iterations on the GPU; xu / stats downloaded into b. Returns the wall time [s] of
/// the iterations (launches + the per-iteration flag download, as DeviceBatch does).
template <typename S>
double run_device(const SqpShared<S>& P, Batch<S>& b) {
  dev::Arrays<S> a{};
  a.work_per_entry = work_size<S>(P.N, P.nv);
  a.xs = to_dev(b.xs);
  a.ref = to_dev(b.ref);
  a.fext = nullptr;
  a.xu = to_dev(b.xu);
  a.lam = to_dev(b.lam);
  a.st = to_dev(b.st);
  a.stats = to_dev(b.stats);
  a.pcg_iters = to_dev(b.pcg);
  a.min_merit = to_dev(b.mm);
  a.step_size = to_dev(b.ss);
  a.work = static_cast<S*>(dev::alloc(size_t(b.B) * a.work_per_entry * sizeof(S)));
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < b.I; ++it) {
    dev::iterate(P, a, b.B, b.I, it);
    dev::download(b.stats.data(), a.stats, b.stats.size() * sizeof(b.stats[0]));
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dev::download(b.xu.data(), a.xu, b.xu.size() * sizeof(S));
  for (void* p : {(void*)a.xs, (void*)a.ref, (void*)a.xu, (void*)a.lam, (void*)a.st, (void*)a.stats,
                  (void*)a.pcg_iters, (void*)a.min_merit, (void*)a.step_size, (void*)a.work})
    dev::release(p);
  return dt;
}

template <typename S>
bool compare(const DevModel<double>& md, int N, int I, int linsys, const char* dtype, double tol) {
  const SqpShared<S> P = shared_of<S>(md, N, linsys);
  Batch<S> h = make_batch(P, 64, I), g = make_batch(P, 64, I);
  run_host(P, h);
  run_device(P, g);
  double d = 0, span = 0;
  for (size_t i = 0; i < h.xu.size(); ++i) {
    d = std::max(d, std::abs(double(h.xu[i]) - double(g.xu[i])));
    span = std::max(span, std::abs(double(h.xu[i])));
  }
  const char* names[] = {"pcg", "bdsv", "bdsv_first"};
  std::printf("{\"check\": \"gpu_vs_host\", \"dtype\": \"%s\", \"linsys\": \"%s\", \"B\": 64, \"N\": %d, "
              "\"iters\": %d, \"max_abs_dxu\": %.3e, \"max_abs_xu\": %.3e, \"ok\": %s}\n",
              dtype, names[linsys], N, I, d, span, d <= tol ? "true" : "false");
  return d <= tol;
}

/// The feedback gains of entry 0's plan after I host iterations: riccati_gains in one GPU
/// thread (dev::gains) against the host run of the same code.
template <typename S>
bool compare_gains(const DevModel<double>& md, int N, int I, const char* dtype, double tol) {
  const SqpShared<S> P = shared_of<S>(md, N, 1);
  Batch<S> h = make_batch(P, 1, I);
  run_host(P, h);
  std::vector<S> work(size_t(work_size<S>(P.N, P.nv)));
  const size_t nK = size_t(P.N - 1) * P.nu * P.nx;
  std::vector<S> Kh(nK), Kg(nK, S(0));
  SqpEntry<S> e{};
  e.xs = h.xs.data();
  e.ref = h.ref.data();
  e.fext = nullptr;
  e.xu = h.xu.data();
  carve(e.w, work.data(), P.N, P.nv);
  const int code_host = riccati_gains(P, e, Kh.data());
  S* xu = to_dev(h.xu);
  S* xs = to_dev(h.xs);
  S* ref = to_dev(h.ref);
  S* dwork = static_cast<S*>(dev::alloc(work.size() * sizeof(S)));
  S* dK = static_cast<S*>(dev::alloc(nK * sizeof(S)));
  int* info = static_cast<int*>(dev::alloc(sizeof(int)));
  const int code_gpu = dev::gains(P, xu, xs, ref, static_cast<const S*>(nullptr), dwork, dK, info);
  dev::download(Kg.data(), dK, nK * sizeof(S));
  for (void* p : {(void*)xu, (void*)xs, (void*)ref, (void*)dwork, (void*)dK, (void*)info}) dev::release(p);
  double d = 0, span = 0;
  for (size_t i = 0; i < nK; ++i) {
    d = std::max(d, std::abs(double(Kh[i]) - double(Kg[i])));
    span = std::max(span, std::abs(double(Kh[i])));
  }
  const bool ok = code_host == -1 && code_gpu == -1 && span > 0 && d <= tol * span;
  std::printf("{\"check\": \"gains_gpu_vs_host\", \"dtype\": \"%s\", \"N\": %d, \"iters\": %d, \"host_code\": %d, "
              "\"gpu_code\": %d, \"max_abs_dK\": %.3e, \"max_abs_K\": %.3e, \"ok\": %s}\n",
              dtype, N, I, code_host, code_gpu, d, span, ok ? "true" : "false");
  return ok;
}

/// The EE orientation term on (rot_cost 3, N_rot_cost 20, axis factors 1 / 0.5 / 2): the
/// reference's slots [3:6] of entry e, knot k = the EE orientation at q0 turned by a rotation of
/// 0.2-0.4 rad about an axis that varies with e and k; GPU plans against the host run's.
template <typename S>
bool compare_orientation(const DevModel<double>& md, int N, int I, const char* dtype, double tol) {
  SqpShared<S> P = shared_of<S>(md, N, 1);
  P.rot_cost = 3;
  P.N_rot_cost = 20;
  P.rot_axis[1] = 0.5;
  P.rot_axis[2] = 2;
  P.rot_on = 1;
  Batch<S> h = make_batch(P, 64, I);
  S R0[9];
  {
    WBody<S> w[kMaxBodies];
    kinematics(P.model, &h.xs[0], w);
    ee_rotation(P.model, w, R0);
  }
  for (int e = 0; e < 64; ++e)
    for (int k = 0; k < N; ++k) {
      const double a = 0.1 * e + 0.3 * k, ang = 0.2 + 0.2 * std::abs(std::sin(1.7 * e + k));
      const double ax[3] = {std::cos(a), std::sin(a), 0.5};
      const double nrm = std::sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]);
      S d[3], D[9], T[9];
      for (int i = 0; i < 3; ++i) d[i] = S(ang * ax[i] / nrm);
      so3::exp(d, D);
      so3::mul(R0, D, T);
      so3::log(T, &h.ref[(size_t(e) * N + k) * 6 + 3]);
    }
  Batch<S> g = h;
  run_host(P, h);
  run_device(P, g);
  double dx = 0, span = 0;
  for (size_t i = 0; i < h.xu.size(); ++i) {
    dx = std::max(dx, std::abs(double(h.xu[i]) - double(g.xu[i])));
    span = std::max(span, std::abs(double(h.xu[i])));
  }
  double dm = 0;
  for (int e = 0; e < 64; ++e) dm = std::max(dm, std::abs(double(h.stats[e].merit_final) - double(g.stats[e].merit_final)));
  std::printf("{\"check\": \"orientation_gpu_vs_host\", \"dtype\": \"%s\", \"linsys\": \"bdsv\", \"B\": 64, "
              "\"N\": %d, \"iters\": %d, \"max_abs_dxu\": %.3e, \"max_abs_xu\": %.3e, \"max_abs_dmerit\": %.3e, "
              "\"ok\": %s}\n",
              dtype, N, I, dx, span, dm, dx <= tol ? "true" : "false");
  return dx <= tol;
}

template <typename S>
void timing(const DevModel<double>& md, int N, int I, const std::vector<int>& Bs, int repeats, const char* dtype) {
  const SqpShared<S> P = shared_of<S>(md, N, 1);
  for (int B : Bs) {
    std::vector<double> tg, th;
    for (int r = 0; r < repeats + 1; ++r) {
      Batch<S> g = make_batch(P, B, I);
      const double t = run_device(P, g);
      if (r > 0) tg.push_back(t * 1e3);  // the first run pays the warm-up
      if (B <= 16 && r < 3) {
        Batch<S> h = make_batch(P, B, I);
        const auto t0 = std::chrono::steady_clock::now();
        run_host(P, h);
        th.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    std::sort(tg.begin(), tg.end());
    std::sort(th.begin(), th.end());
    std::printf("{\"check\": \"solve_time\", \"dtype\": \"%s\", \"B\": %d, \"N\": %d, \"iters\": %d, \"repeats\": %d, "
                "\"gpu_median_ms\": %.4f, \"gpu_min_ms\": %.4f, \"gpu_max_ms\": %.4f",
                dtype, B, N, I, repeats, tg[tg.size() / 2], tg.front(), tg.back());
    if (!th.empty()) std::printf(", \"host_median_ms\": %.4f", th[th.size() / 2]);
    std::printf("}\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_FILE [--iters 5] [--N 32] [--repeats 10] [--B 1,16,128,1024] [--host-only]\n", argv[0]);
    return 64;
  }
  int I = 5, N = 32, repeats = 10;
  std::vector<int> Bs = {1, 16, 128, 1024};
  bool host_only = false;
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--host-only") {
      host_only = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: missing value\n", k.c_str());
      return 64;
    }
    const std::string v = argv[i + 1];
    if (k == "--iters") I = std::stoi(v);
    else if (k == "--N") N = std::stoi(v);
    else if (k == "--repeats") repeats = std::stoi(v);
    else if (k == "--B") {
      Bs.clear();
      size_t s = 0;
      while (s < v.size()) {
        const size_t e = v.find(',', s);
        Bs.push_back(std::stoi(v.substr(s, e == std::string::npos ? std::string::npos : e - s)));
        s = e == std::string::npos ? v.size() : e + 1;
      }
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 64;
    }
  }
  DevModel<double> md;
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() != sizeof(md)) {
    std::fprintf(stderr, "%s: expected %zu bytes (DevModel<double>), got %zu\n", argv[1], sizeof(md), bytes.size());
    return 64;
  }
  std::memcpy(&md, bytes.data(), sizeof(md));
  if (host_only) {  // the problem and the host run only (checks the tool without a GPU)
    const SqpShared<double> P = shared_of<double>(md, N, 1);
    Batch<double> h = make_batch(P, 4, I);
    run_host(P, h);
    std::printf("{\"check\": \"host_only\", \"dtype\": \"float64\", \"linsys\": \"bdsv\", \"B\": 4, \"N\": %d, "
                "\"iters\": %d, \"final_merit\": [%.10f, %.10f, %.10f, %.10f]}\n",
                N, I, h.stats[0].merit_final, h.stats[1].merit_final, h.stats[2].merit_final, h.stats[3].merit_final);
    return 0;
  }
  std::string why;
  if (dev::device_count(&why) < 1) {
    std::printf("{\"check\": \"device\", \"ok\": false, \"why\": \"%s\"}\n", why.c_str());
    return 2;
  }
  std::printf("{\"check\": \"device\", \"ok\": true, \"name\": \"%s\", \"nv\": %d}\n", dev::device_name().c_str(), md.n);
  try {
    bool ok = true;
    for (int ls = 0; ls < 3; ++ls) ok = compare<double>(md, N, I, ls, "float64", 1e-6) && ok;
    for (int ls = 0; ls < 3; ++ls) ok = compare<float>(md, N, I, ls, "float32", 1e-1) && ok;
    ok = compare_gains<double>(md, N, I, "float64", 1e-8) && ok;
    ok = compare_gains<float>(md, N, I, "float32", 1e-2) && ok;
    ok = compare_orientation<double>(md, N, I, "float64", 1e-6) && ok;
    ok = compare_orientation<float>(md, N, I, "float32", 1e-1) && ok;
    timing<double>(md, N, 1, Bs, repeats, "float64");
    timing<float>(md, N, 1, Bs, repeats, "float32");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("{\"check\": \"cuda_error\", \"ok\": false, \"what\": \"%s\"}\n", e.what());
    return 2;
  }
}
