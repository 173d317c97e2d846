// gains_alloc URDF EE_FRAME: a batch of one solves 5 SQP iterations toward a fixed EE point,
// then 200 BatchSolver::feedback_gains() calls (u_ref zero and gravity, 100 each) run while
// a malloc hook counts heap calls. Prints "key=value" lines; a control allocation proves
// the hook counts. (The fixed-size kernels, 6 and 7 DoF, are meant to allocate nothing.)
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "gato/solver.hpp"

#include "../malloc_hook.hpp"  // g_counting, g_allocs, g_frees, count_control_allocation

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gains_alloc URDF EE_FRAME\n");
    return 2;
  }
  auto plant = std::make_shared<gato::Plant<double>>(argv[1], argv[2]);
  const int nv = plant->nv(), nx = 2 * nv, nu = nv, N = 16;
  const auto& L = plant->limits();
  gato::Settings set;
  set.max_sqp_iters = 5;
  std::vector<double> xs(nx, 0.0), ref(6 * N, 0.0), K(size_t(N - 1) * nu * nx, 0.0);
  for (int j = 0; j < nv; ++j) xs[j] = 0.5 * (L.q_lo[j] + L.q_hi[j]) + 0.1;
  for (int k = 0; k < N; ++k) ref[6 * k] = 0.4, ref[6 * k + 1] = 0.1, ref[6 * k + 2] = 0.5;

  if (!count_control_allocation()) return 3;  // the hook must count, or the zeros prove nothing

  long calls = 0, failed = 0, nonfinite = 0, allocs = 0, frees = 0;
  double kmax = 0;
  for (gato::URef uref : {gato::URef::kZero, gato::URef::kGravity}) {
    set.u_ref = uref;
    auto solver = gato::BatchSolver<double>::create(plant, 1, N, 0.02, set, 1);
    std::vector<double> xu(solver->xu_size(), 0.0);
    for (int k = 0; k < N; ++k)
      for (int i = 0; i < nx; ++i) xu[size_t(k) * (nx + nu) + i] = xs[i];
    solver->solve(xs.data(), ref.data(), xu.data(), 0.0);
    solver->feedback_gains(0, xu.data(), xs.data(), ref.data(), K.data());  // warm: first-touch paths
    g_counting = true;
    for (int i = 0; i < 100; ++i) {
      ++calls;
      if (solver->feedback_gains(0, xu.data(), xs.data(), ref.data(), K.data()) >= 0) ++failed;
    }
    g_counting = false;
    allocs += g_allocs, frees += g_frees;
    g_allocs = g_frees = 0;
    for (double v : K) {
      if (!std::isfinite(v)) ++nonfinite;
      kmax = std::fmax(kmax, std::fabs(v));
    }
  }
  std::printf("calls=%ld\nfailed=%ld\nnonfinite=%ld\nkmax=%.6g\ngains_allocs=%ld\ngains_frees=%ld\n", calls, failed,
              nonfinite, kmax, allocs, frees);
  return 0;
}
