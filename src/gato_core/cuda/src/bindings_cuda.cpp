// gato._cuda: the BSQP batch on the GPU (built only where nvcc is found, GATO_CUDA).
// DeviceBatch keeps the batch's arrays in device memory between solves (warm dual,
// per-entry rho) and runs each SQP iteration as one kernel launch (kernels.cu), the
// feedback gains of a solved row as a one-thread launch; the
// batch loop, settings and statistics are BatchCore's, shared with gato._cuda_host.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch_core.hpp"
#include "device_api.hpp"
#include "solver_binding.hpp"

namespace py = pybind11;

namespace gato {
namespace cuda {

/// An owned device buffer.
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { dev::release(p_); }
  void* get(std::size_t bytes) {  // (re)allocate to at least `bytes`
    if (bytes > n_) {
      dev::release(p_);
      p_ = nullptr;
      p_ = dev::alloc(bytes);
      n_ = bytes;
    }
    return p_;
  }
  void* ptr() const { return p_; }

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

template <typename S>
class DeviceBatch final : public BatchCore<S> {
 public:
  static constexpr bool kOnHost = false;  // debug_setup_kkt stays refused (the blocks live on the GPU)
  DeviceBatch(const std::string& urdf, const std::string& ee, int B, int N, double dt, const Settings& s)
      : BatchCore<S>(urdf, ee, B, N, dt, s) {
    std::string why;
    if (dev::device_count(&why) < 1)
      throw std::runtime_error("backend='cuda': no CUDA device (" + why + "); use backend='cpu'");
  }

 protected:
  void begin(const S* xs, const S* ref, const S* xu) override {
    const auto& P = this->shared_;
    const int B = this->B_, I = this->set_.max_sqp_iters;
    const size_t Bz = size_t(B);
    a_.work_per_entry = work_size<S>(P.N, P.nv);
    a_.xs = static_cast<S*>(d_xs_.get(Bz * P.nx * sizeof(S)));
    a_.ref = static_cast<S*>(d_ref_.get(Bz * 6 * P.N * sizeof(S)));
    a_.fext = P.has_fext ? static_cast<S*>(d_fext_.get(this->fext_.size() * sizeof(S))) : nullptr;
    a_.xu = static_cast<S*>(d_xu_.get(Bz * P.L * sizeof(S)));
    a_.lam = static_cast<S*>(d_lam_.get(this->lam_.size() * sizeof(S)));
    a_.st = static_cast<SqpEntryState<S>*>(d_st_.get(Bz * sizeof(SqpEntryState<S>)));
    a_.stats = static_cast<SqpEntryStats<S>*>(d_stats_.get(Bz * sizeof(SqpEntryStats<S>)));
    a_.pcg_iters = static_cast<int*>(d_pcg_.get(Bz * I * sizeof(int)));
    a_.min_merit = static_cast<S*>(d_mm_.get(Bz * I * sizeof(S)));
    a_.step_size = static_cast<S*>(d_ss_.get(Bz * I * sizeof(S)));
    a_.work = static_cast<S*>(d_work_.get(Bz * a_.work_per_entry * sizeof(S)));
    dev::upload(a_.xs, xs, Bz * P.nx * sizeof(S));
    dev::upload(a_.ref, ref, Bz * 6 * P.N * sizeof(S));
    if (P.has_fext) dev::upload(a_.fext, this->fext_.data(), this->fext_.size() * sizeof(S));
    dev::upload(a_.xu, xu, Bz * P.L * sizeof(S));
    // The dual and the per-entry parameters live on the host between solves (reset_dual,
    // set_rho_batch, ... act there): uploaded each solve, a few kB.
    dev::upload(a_.lam, this->lam_.data(), this->lam_.size() * sizeof(S));
    dev::upload(a_.st, this->st_.data(), Bz * sizeof(SqpEntryState<S>));
    dev::upload(a_.stats, this->estats_.data(), Bz * sizeof(SqpEntryStats<S>));
    dev::upload(a_.pcg_iters, this->pcg_iters_.data(), Bz * I * sizeof(int));
    dev::upload(a_.min_merit, this->min_merit_.data(), Bz * I * sizeof(S));
    dev::upload(a_.step_size, this->step_size_.data(), Bz * I * sizeof(S));
    if (!this->knot_w_.empty()) {
      void* kw = d_kw_.get(this->knot_w_.size() * sizeof(double));
      dev::upload(kw, this->knot_w_.data(), this->knot_w_.size() * sizeof(double));
      this->shared_.knot_w = static_cast<const double*>(kw);
    }
    if (!this->rot_knot_w_.empty()) {
      void* rw = d_rkw_.get(this->rot_knot_w_.size() * sizeof(double));
      dev::upload(rw, this->rot_knot_w_.data(), this->rot_knot_w_.size() * sizeof(double));
      this->shared_.rot_knot_w = static_cast<const double*>(rw);
    }
  }
  void iterate(int it) override {
    const int B = this->B_;
    dev::iterate(this->shared_, a_, B, this->set_.max_sqp_iters, it);
    dev::download(this->estats_.data(), a_.stats, size_t(B) * sizeof(SqpEntryStats<S>));
  }
  void finish(S* xu) override {
    const auto& P = this->shared_;
    const size_t Bz = size_t(this->B_), I = size_t(this->set_.max_sqp_iters);
    dev::download(xu, a_.xu, Bz * P.L * sizeof(S));
    dev::download(this->lam_.data(), a_.lam, this->lam_.size() * sizeof(S));
    dev::download(this->st_.data(), a_.st, Bz * sizeof(SqpEntryState<S>));
    dev::download(this->estats_.data(), a_.stats, Bz * sizeof(SqpEntryStats<S>));
    dev::download(this->pcg_iters_.data(), a_.pcg_iters, Bz * I * sizeof(int));
    dev::download(this->min_merit_.data(), a_.min_merit, Bz * I * sizeof(S));
    dev::download(this->step_size_.data(), a_.step_size, Bz * I * sizeof(S));
  }
  int gains(int b, const S* xu, const S* xs, const S* ref, S* K) override {
    SqpShared<S> P = this->host_shared();
    const size_t L = size_t(P.L), nx = size_t(P.nx), nr = 6 * size_t(P.N), nK = size_t(P.N - 1) * P.nu * P.nx;
    // The plan, state and reference in one upload buffer; the wrench band and weights of the row.
    S* in = static_cast<S*>(d_gin_.get((L + nx + nr) * sizeof(S)));
    dev::upload(in, xu, L * sizeof(S));
    dev::upload(in + L, xs, nx * sizeof(S));
    dev::upload(in + L + nx, ref, nr * sizeof(S));
    const S* fext = nullptr;
    if (const S* f = this->row_fext(b)) {
      const size_t n = size_t(P.N) * 6 * P.nv;
      void* d = d_gfext_.get(n * sizeof(S));
      dev::upload(d, f, n * sizeof(S));
      fext = static_cast<const S*>(d);
    }
    if (P.knot_w) {
      void* kw = d_gkw_.get(this->knot_w_.size() * sizeof(double));
      dev::upload(kw, this->knot_w_.data(), this->knot_w_.size() * sizeof(double));
      P.knot_w = static_cast<const double*>(kw);
    }
    if (P.rot_knot_w) {
      void* rw = d_grkw_.get(this->rot_knot_w_.size() * sizeof(double));
      dev::upload(rw, this->rot_knot_w_.data(), this->rot_knot_w_.size() * sizeof(double));
      P.rot_knot_w = static_cast<const double*>(rw);
    }
    S* work = static_cast<S*>(d_gwork_.get(size_t(work_size<S>(P.N, P.nv)) * sizeof(S)));
    S* dK = static_cast<S*>(d_gK_.get(nK * sizeof(S)));
    int* info = static_cast<int*>(d_ginfo_.get(sizeof(int)));
    const int code = dev::gains(P, in, in + L, in + L + nx, fext, work, dK, info);
    if (code == -1) dev::download(K, dK, nK * sizeof(S));
    return code;
  }

 private:
  dev::Arrays<S> a_{};
  DevBuf d_xs_, d_ref_, d_fext_, d_xu_, d_lam_, d_st_, d_stats_, d_pcg_, d_mm_, d_ss_, d_work_, d_kw_, d_rkw_;
  DevBuf d_gin_, d_gfext_, d_gkw_, d_grkw_, d_gwork_, d_gK_, d_ginfo_;  // feedback_gains' own (a solve's stay as they are)
};

}  // namespace cuda
}  // namespace gato

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "BSQP on the GPU (the CUDA backend; docs/cuda.md)";
  m.attr("max_bodies") = gato::cuda::kMaxBodies;
  m.def("device_count", [] {
    std::string why;
    const int n = gato::cuda::dev::device_count(&why);
    return py::make_tuple(n, why);
  }, "(number of CUDA devices, the CUDA error text when 0)");
  m.def("device_name", &gato::cuda::dev::device_name, "Name and compute capability of device 0");
  gato::cuda::bind_solver<gato::cuda::DeviceBatch<double>>(m, "Solver64");
  gato::cuda::bind_solver<gato::cuda::DeviceBatch<float>>(m, "Solver32");
}
