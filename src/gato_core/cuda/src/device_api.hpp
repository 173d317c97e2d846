// The host-side entry points of kernels.cu (compiled by nvcc), callable from C++
// compiled by the host compiler: device discovery, memory and the per-iteration launch.
// Plain types only (no CUDA headers), so bindings_cuda.cpp needs no nvcc.
#pragma once

#include <cstddef>
#include <string>

#include "gato_cuda/sqp.hpp"
#include "gato_cuda/sqp_gains.hpp"

namespace gato {
namespace cuda {
namespace dev {

/// Number of CUDA devices; 0 with the CUDA error text in *why when none is usable
/// (no driver, "CUDA driver version is insufficient", no GPU).
int device_count(std::string* why);
/// Name and compute capability of device 0 ("NVIDIA H200 (sm_90)").
std::string device_name();
/// Device memory; throw std::runtime_error naming the CUDA error on failure.
void* alloc(std::size_t bytes);
void release(void* p);
void upload(void* dst, const void* src, std::size_t bytes);
void download(void* dst, const void* src, std::size_t bytes);

/// The device arrays of a batch (lengths in comments; B entries, I = max_sqp_iters).
template <typename S>
struct Arrays {
  S* xs;                      // B nx
  S* ref;                     // B 6N
  S* fext;                    // B N 6 nv (or null)
  S* xu;                      // B L
  S* lam;                     // B N nx
  SqpEntryState<S>* st;       // B
  SqpEntryStats<S>* stats;    // B
  int* pcg_iters;             // B I
  S* min_merit;               // B I
  S* step_size;               // B I
  S* work;                    // B work_size
  long work_per_entry;
};

/// One SQP iteration (sqp_iterate) of every entry that has neither converged nor
/// stopped: one CUDA thread per entry. Synchronous; throws std::runtime_error on a
/// CUDA error.
template <typename S>
void iterate(const SqpShared<S>& P, const Arrays<S>& a, int B, int I, int it);

/// The feedback gains of one plan (sqp_gains.hpp riccati_gains) in one CUDA thread. Every
/// pointer is device memory: xu (L), xs (nx), ref (6N), fext (N 6 nv, or null), work
/// (work_size), K ((N-1) nu nx, written), info (1 int, scratch); P.knot_w / P.rot_knot_w too. Synchronous;
/// returns riccati_gains' code; throws std::runtime_error on a CUDA error.
template <typename S>
int gains(const SqpShared<S>& P, S* xu, const S* xs, const S* ref, const S* fext, S* work, S* K, int* info);

}  // namespace dev
}  // namespace cuda
}  // namespace gato
