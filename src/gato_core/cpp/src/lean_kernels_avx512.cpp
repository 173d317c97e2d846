// The multi-lane kernels of the lean articulated-body algorithm compiled for
// AVX-512 (F, DQ) + FMA (this TU only: see CMakeLists.txt), 8 doubles per lane
// vector: the line search's 8 step sizes in one pass per knot, the KKT stage's
// knots 8 at a time. The same source as the AVX2 kernels (lean_kernels_impl.hpp),
// the same operations per lane, so each lane's bits are those of the AVX2 kernels'
// (test/test_lean_dynamics.py compares the two). lean_kernels.cpp hands them out
// only on CPUs that report AVX-512F; floats stay on the AVX2 kernels (8 floats).
// Inline namespace gato::lean::isa_avx512 (GATO_LEAN_ISA), as for the AVX2 TU.
#define GATO_LEAN_ISA isa_avx512
#include "lean_kernels_impl.hpp"

namespace gato {
namespace lean {
namespace avx512 {
Kernels<double> kernels_double(int n) { return make_kernels<double, d8>(n); }
}  // namespace avx512
}  // namespace lean
}  // namespace gato
