// Host/device qualifiers of the CUDA backend's numeric core: every function of
// gato_cuda/*.hpp compiles for the GPU (nvcc) and for the host (g++), so the host
// tests run the very code the kernels run.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define GATO_HD __host__ __device__ inline
#else
#define GATO_HD inline
#endif

namespace gato {
namespace cuda {

/// The largest arm the backend takes (bodies = joints = nv). Fixed so that the
/// per-body scratch of one batch entry lives in registers / local memory.
constexpr int kMaxBodies = 8;

// Plain math on the scalar types (float / double); nvcc maps them to the device
// functions, g++ to libm.
GATO_HD double hd_sqrt(double x) { return sqrt(x); }
GATO_HD float hd_sqrt(float x) { return sqrtf(x); }
GATO_HD double hd_log(double x) { return log(x); }
GATO_HD float hd_log(float x) { return logf(x); }
GATO_HD double hd_abs(double x) { return fabs(x); }
GATO_HD float hd_abs(float x) { return fabsf(x); }
GATO_HD double hd_sin(double x) { return sin(x); }
GATO_HD float hd_sin(float x) { return sinf(x); }
GATO_HD double hd_atan2(double y, double x) { return atan2(y, x); }
GATO_HD float hd_atan2(float y, float x) { return atan2f(y, x); }
GATO_HD void hd_sincos(double x, double* s, double* c) {
  *s = sin(x);
  *c = cos(x);
}
GATO_HD void hd_sincos(float x, float* s, float* c) {
  *s = sinf(x);
  *c = cosf(x);
}
template <typename S>
GATO_HD bool hd_isfinite(S x) {
  return x - x == S(0);  // false for inf and NaN, without <cmath> device overloads
}
template <typename S>
GATO_HD S hd_min(S a, S b) { return b < a ? b : a; }
template <typename S>
GATO_HD S hd_max(S a, S b) { return a < b ? b : a; }

}  // namespace cuda
}  // namespace gato
