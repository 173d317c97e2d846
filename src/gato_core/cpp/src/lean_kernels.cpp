// Kernels of the lean articulated-body algorithm (gato/lean_model.hpp): the
// scalar ones and the SSE2 multi-lane ones, plus the run-time choice of the
// AVX2 ones (lean_kernels_avx2.cpp) where the CPU has AVX2 and FMA.
// No pinocchio here: this TU compiles in seconds.
#include <cstdlib>

#include "lean_kernels_impl.hpp"

namespace gato {
namespace lean {

#ifdef GATO_LEAN_AVX512
namespace avx512 {
Kernels<double> kernels_double(int n);
}  // namespace avx512

static bool env_off(const char* var) {
  const char* off = std::getenv(var);
  return off && *off && *off != '0';
}

// The 8-lane double kernels: CPUs with AVX-512F (and the AVX2 + FMA below);
// GATO_LEAN_NO_AVX512=1 keeps the 4-lane AVX2 ones (tests of both paths).
static bool cpu_has_avx512() {
  static const bool ok = [] {
    __builtin_cpu_init();
    if (env_off("GATO_LEAN_NO_AVX512")) return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return ok;
}
#endif

#ifdef GATO_LEAN_AVX2
namespace avx2 {
Kernels<double> kernels_double(int n);
Kernels<float> kernels_float(int n);
}  // namespace avx2

static bool cpu_has_avx2_fma() {
  static const bool ok = [] {
    __builtin_cpu_init();
    // GATO_LEAN_NO_AVX2=1 forces the SSE2 kernels (tests of both paths);
    // GATO_NO_AVX2=1 forces them too, with the baseline core (gato._native).
    for (const char* var : {"GATO_LEAN_NO_AVX2", "GATO_NO_AVX2"}) {
      const char* off = std::getenv(var);
      if (off && *off && *off != '0') return false;
    }
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}
#endif

template <>
Kernels<double> kernels<double>(int W, int n) {
  if (W == 1) return make_kernels<double, double>(n);
#ifdef GATO_LEAN_AVX2
  if (cpu_has_avx2_fma()) {
#ifdef GATO_LEAN_AVX512
    if (cpu_has_avx512()) return avx512::kernels_double(n);
#endif
    return avx2::kernels_double(n);
  }
#endif
  return make_kernels<double, d2>(n);
}

template <>
Kernels<float> kernels<float>(int W, int n) {
  if (W == 1) return make_kernels<float, float>(n);
#ifdef GATO_LEAN_AVX2
  if (cpu_has_avx2_fma()) return avx2::kernels_float(n);
#endif
  return make_kernels<float, f4>(n);
}

}  // namespace lean
}  // namespace gato
