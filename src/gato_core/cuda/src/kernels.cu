// The CUDA kernels of the BSQP backend and their host launchers (device_api.hpp).
// First version: one CUDA thread runs one batch entry's whole SQP iteration
// (gato_cuda/sqp.hpp, the code the host tests check), one launch per iteration; the
// feedback gains of a solved plan (gato_cuda/sqp_gains.hpp) in one thread, on request.
// Only the gato_cuda headers are included: no Eigen, pybind11 or pinocchio under nvcc.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "device_api.hpp"
#include "gato_cuda/sqp.hpp"
#include "gato_cuda/sqp_gains.hpp"

namespace gato {
namespace cuda {
namespace dev {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

// Per-thread stack: the dual-number RNEA of the derivatives keeps its per-body arrays
// (Dual<S, 16>) and the RK4 stages in local memory (ptxas -v: about 95 KB in double,
// 28 KB in float for sm_90); the default 1 KiB is far too small. Set from the kernel's own figure.
constexpr size_t kStackMargin = 4 * 1024;

template <typename S>
__global__ void iterate_kernel(SqpShared<S> P, Arrays<S> a, int B, int I, int it) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  SqpEntryStats<S>& es = a.stats[b];
  if (es.converged || es.stopped) return;
  SqpEntry<S> e;
  e.xs = a.xs + size_t(b) * P.nx;
  e.ref = a.ref + size_t(b) * 6 * P.N;
  e.fext = P.has_fext ? a.fext + size_t(b) * P.N * 6 * P.nv : nullptr;
  e.xu = a.xu + size_t(b) * P.L;
  e.lam = a.lam + size_t(b) * P.N * P.nx;
  e.st = &a.st[b];
  e.stats = &es;
  e.pcg_iters = a.pcg_iters + size_t(b) * I;
  e.min_merit = a.min_merit + size_t(b) * I;
  e.step_size = a.step_size + size_t(b) * I;
  carve(e.w, a.work + size_t(b) * a.work_per_entry, P.N, P.nv);
  sqp_iterate(P, e, it);
}

// The feedback gains of one plan: one thread (the recursion over knots is sequential).
template <typename S>
__global__ void gains_kernel(SqpShared<S> P, S* xu, const S* xs, const S* ref, const S* fext, S* work, S* K,
                             int* info) {
  if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
  SqpEntry<S> e{};
  e.xs = xs;
  e.ref = ref;
  e.fext = fext;
  e.xu = xu;
  carve(e.w, work, P.N, P.nv);
  *info = riccati_gains(P, e, K);
}

// Raise the per-thread stack to the kernel's own local-memory figure plus the margin (once per kernel).
template <typename Kernel>
void ensure_stack(Kernel kernel, bool* done) {
  if (*done) return;
  cudaFuncAttributes fa;
  check(cudaFuncGetAttributes(&fa, kernel), "cudaFuncGetAttributes");
  size_t cur = 0;
  check(cudaDeviceGetLimit(&cur, cudaLimitStackSize), "cudaDeviceGetLimit (stack)");
  const size_t need = fa.localSizeBytes + kStackMargin;
  if (cur < need) check(cudaDeviceSetLimit(cudaLimitStackSize, need), "cudaDeviceSetLimit (stack)");
  *done = true;
}
}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

std::string device_name() {
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

void* alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return p;
}
void release(void* p) {
  if (p) cudaFree(p);
}
void upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
}
void download(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
}

template <typename S>
void iterate(const SqpShared<S>& P, const Arrays<S>& a, int B, int I, int it) {
  static bool stack_set = false;
  ensure_stack(iterate_kernel<S>, &stack_set);
  const int threads = 64;
  iterate_kernel<S><<<(B + threads - 1) / threads, threads>>>(P, a, B, I, it);
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "kernel");
}

template void iterate<float>(const SqpShared<float>&, const Arrays<float>&, int, int, int);
template void iterate<double>(const SqpShared<double>&, const Arrays<double>&, int, int, int);

template <typename S>
int gains(const SqpShared<S>& P, S* xu, const S* xs, const S* ref, const S* fext, S* work, S* K, int* info) {
  static bool stack_set = false;
  ensure_stack(gains_kernel<S>, &stack_set);
  gains_kernel<S><<<1, 1>>>(P, xu, xs, ref, fext, work, K, info);
  check(cudaGetLastError(), "kernel launch (gains)");
  check(cudaDeviceSynchronize(), "kernel (gains)");
  int code = 0;
  download(&code, info, sizeof(int));
  return code;
}

template int gains<float>(const SqpShared<float>&, float*, const float*, const float*, const float*, float*, float*,
                          int*);
template int gains<double>(const SqpShared<double>&, double*, const double*, const double*, const double*, double*,
                           double*, int*);

}  // namespace dev
}  // namespace cuda
}  // namespace gato
