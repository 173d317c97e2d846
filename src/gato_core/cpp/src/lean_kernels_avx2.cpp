// The multi-lane kernels of the lean articulated-body algorithm compiled for
// AVX2 + FMA (this TU only: -mavx2 -mfma, see CMakeLists.txt), 4 doubles or 8
// floats per lane vector. lean_kernels.cpp hands them out only on CPUs that
// have both. Everything instantiated here lives in the inline namespace
// gato::lean::isa_avx2 (GATO_LEAN_ISA), so the linker cannot mix it up with the
// generic instantiations; the interface (Kernels, View) carries no vector type.
#define GATO_LEAN_ISA isa_avx2
#include "lean_kernels_impl.hpp"

namespace gato {
namespace lean {
namespace avx2 {
Kernels<double> kernels_double(int n) { return make_kernels<double, d4>(n); }
Kernels<float> kernels_float(int n) { return make_kernels<float, f8>(n); }
}  // namespace avx2
}  // namespace lean
}  // namespace gato
