// gato::Plant<S>: the lean articulated-body kernels in S (lean_model.hpp) and,
// for everything else, pinocchio in double (plant_pinocchio.hpp), S arrays
// converted at the boundary. Included by exactly one TU per scalar type
// (plant_double.cpp, plant_float.cpp); neither includes pinocchio.
#pragma once

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <type_traits>
#include <vector>

#include "gato/lean_model.hpp"
#include "gato/plant.hpp"
#include "plant_pinocchio.hpp"

namespace gato {

template <typename S>
struct Plant<S>::Impl {
  Impl(const std::string& urdf_path, const std::string& ee_frame) : pino(urdf_path, ee_frame) {}
  detail::PinoModel pino;
  PlantLimits<S> limits;
  std::unique_ptr<lean::Model<S>> lean;  // null: some joint is not 1-DoF revolute / prismatic
  lean::View<S> lean_view{};
  lean::Kernels<S> lean_k1{};             // scalar kernels
  bool use_lean = true;
};

namespace detail {

constexpr int kMaxBufs = 6;

/// A Plant workspace: the pinocchio Data and, for S = float, the double copies
/// of the arrays crossing into pinocchio (reused: no allocation once sized).
template <typename S>
class PinocchioWorkspace : public PlantWorkspace<S> {
 public:
  PinocchioWorkspace(const PinoModel& m, std::size_t lean_bytes)
      : pino(m.make_data()), lean(lean_bytes),
        lean_out(lean_bytes ? 3 * m.nv() * m.nv() + 3 * m.nv() : 0) {}
  PinoDataPtr pino;
  lean::Scratch lean;
  std::vector<S> lean_out;  // row-major dq, dv, Minv, J of the lean derivatives
  std::vector<double> buf[kMaxBufs];
  Eigen::MatrixXd Dq, Dv, Mi, J;

  /// x (n numbers) as double: x itself for S = double, else a copy in buf[k].
  const double* in(int k, const S* x, std::size_t n) {
    if constexpr (std::is_same_v<S, double>) {
      return x;
    } else {
      if (!x) return nullptr;
      buf[k].resize(n);
      std::copy(x, x + n, buf[k].begin());
      return buf[k].data();
    }
  }
  /// Where pinocchio writes an output of n numbers meant for x (null stays null).
  double* out(int k, S* x, std::size_t n) {
    if constexpr (std::is_same_v<S, double>) {
      return x;
    } else {
      if (!x) return nullptr;
      buf[k].resize(n);
      return buf[k].data();
    }
  }
  /// Copies an output written through out(k, x, n) back into x.
  void back(int k, S* x, std::size_t n) const {
    if constexpr (!std::is_same_v<S, double>) {
      if (x) std::copy(buf[k].begin(), buf[k].begin() + n, x);
    }
  }
};

template <typename S>
PinocchioWorkspace<S>& cast(PlantWorkspace<S>& ws) {
  return static_cast<PinocchioWorkspace<S>&>(ws);
}

}  // namespace detail

template <typename S>
Plant<S>::Plant(const std::string& urdf_path, const std::string& ee_frame)
    : impl_(std::make_unique<Impl>(urdf_path, ee_frame)) {
  Eigen::VectorXd lo, hi, qd, u;
  impl_->pino.limits(lo, hi, qd, u);
  auto& L = impl_->limits;
  L.q_lo = lo.template cast<S>();
  L.q_hi = hi.template cast<S>();
  L.qd_max = qd.template cast<S>();
  L.u_max = u.template cast<S>();
  impl_->lean = impl_->pino.template lean_model<S>();
  if (impl_->lean) {
    impl_->lean_view = impl_->lean->view();
    impl_->lean_k1 = lean::kernels<S>(1, impl_->lean->n);
  }
}

template <typename S>
Plant<S>::~Plant() = default;

template <typename S>
int Plant<S>::nq() const { return impl_->pino.nq(); }
template <typename S>
int Plant<S>::nv() const { return impl_->pino.nv(); }
template <typename S>
int Plant<S>::nbodies() const { return impl_->pino.njoints() - 1; }
template <typename S>
int Plant<S>::ee_body() const { return impl_->pino.ee_body(); }
template <typename S>
const PlantLimits<S>& Plant<S>::limits() const { return impl_->limits; }
template <typename S>
int Plant<S>::ee_frame_id() const { return impl_->pino.ee_frame(); }
template <typename S>
std::vector<std::string> Plant<S>::joint_names() const { return impl_->pino.joint_names(); }
template <typename S>
std::vector<std::string> Plant<S>::frame_names() const { return impl_->pino.frame_names(); }
template <typename S>
int Plant<S>::frame_id(const std::string& name) const { return impl_->pino.frame_id(name); }
template <typename S>
int Plant<S>::nframes() const { return impl_->pino.nframes(); }

template <typename S>
const lean::Model<S>* Plant<S>::lean_model() const { return impl_->lean.get(); }
template <typename S>
void Plant<S>::set_use_lean(bool on) { impl_->use_lean = on; }

template <typename S>
void Plant<S>::set_ee_payload(double mass, const double* com, const double* Icom) {
  bool ok = std::isfinite(mass) && mass >= 0;
  for (int i = 0; i < 3; ++i) ok = ok && std::isfinite(com[i]);
  for (int i = 0; i < 9; ++i) ok = ok && std::isfinite(Icom[i]);
  if (!ok) throw std::invalid_argument("payload: expected a mass >= 0 kg and finite com / inertia");
  impl_->pino.set_ee_payload(mass, com, Icom);
  if (impl_->lean) {  // same sizes: copy into the arrays the solvers' views point at
    auto fresh = impl_->pino.template lean_model<S>();
    auto& L = *impl_->lean;
    for (auto [dst, src] : {std::pair{&L.mass, &fresh->mass}, std::pair{&L.B0, &fresh->B0},
                            std::pair{&L.C0, &fresh->C0}, std::pair{&L.com, &fresh->com},
                            std::pair{&L.Icom, &fresh->Icom}})
      std::copy(src->begin(), src->end(), dst->begin());
  }
}
template <typename S>
bool Plant<S>::use_lean() const { return impl_->use_lean && impl_->lean; }

template <typename S>
std::unique_ptr<PlantWorkspace<S>> Plant<S>::make_workspace() const {
  return std::make_unique<detail::PinocchioWorkspace<S>>(
      impl_->pino, impl_->lean ? impl_->lean_k1.scratch_bytes : 0);
}

template <typename S>
void Plant<S>::forward_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* tau,
                                const S* fext, S* qdd, S* ee) const {
  auto& w = detail::cast(ws);
  if (use_lean()) {
    impl_->lean_k1.aba(impl_->lean_view, w.lean.data(), q, v, tau, fext, qdd, ee);
    return;
  }
  const int n = nv();
  impl_->pino.aba(*w.pino, w.in(0, q, n), w.in(1, v, n), w.in(2, tau, n), w.in(3, fext, 6 * nbodies()),
                  w.out(4, qdd, n), w.out(5, ee, 3));
  w.back(4, qdd, n);
  w.back(5, ee, 3);
}

template <typename S>
void Plant<S>::forward_dynamics_derivatives(PlantWorkspace<S>& ws, const S* q, const S* v,
                                            const S* tau, const S* fext, S* qdd,
                                            MatRef dqdd_dq, MatRef dqdd_dv, MatRef Minv, S* ee,
                                            Mat* J) const {
  auto& w = detail::cast(ws);
  const int n = nv();
  if (use_lean()) {
    using RowMap = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
    S* dq = w.lean_out.data();
    S *dv = dq + n * n, *Mi = dv + n * n, *Jr = Mi + n * n;
    S e3[3];
    impl_->lean_k1.derivs(impl_->lean_view, w.lean.data(), q, v, tau, fext, qdd, dq, dv, Mi,
                          e3, J ? Jr : nullptr);
    dqdd_dq = RowMap(dq, n, n);
    dqdd_dv = RowMap(dv, n, n);
    Minv = RowMap(Mi, n, n);
    if (ee) std::copy(e3, e3 + 3, ee);
    if (J) *J = RowMap(Jr, 3, n);
    return;
  }
  impl_->pino.aba_derivatives(*w.pino, w.in(0, q, n), w.in(1, v, n), w.in(2, tau, n),
                              w.in(3, fext, 6 * nbodies()), w.out(4, qdd, n), w.Dq, w.Dv, w.Mi,
                              w.out(5, ee, 3), J ? &w.J : nullptr);
  w.back(4, qdd, n);
  w.back(5, ee, 3);
  dqdd_dq = w.Dq.template cast<S>();
  dqdd_dv = w.Dv.template cast<S>();
  Minv = w.Mi.template cast<S>();
  if (J) *J = w.J.template cast<S>();
}

template <typename S>
void Plant<S>::frame_position(PlantWorkspace<S>& ws, const S* q, S* p, int fid) const {
  auto& w = detail::cast(ws);
  if (fid < 0 && use_lean()) {
    impl_->lean_k1.ee(impl_->lean_view, w.lean.data(), q, p);
    return;
  }
  impl_->pino.frame_position(*w.pino, w.in(0, q, nq()), w.out(4, p, 3), fid);
  w.back(4, p, 3);
}

template <typename S>
void Plant<S>::ee_position_jacobian(PlantWorkspace<S>& ws, const S* q, S* p, MatRef J) const {
  auto& w = detail::cast(ws);
  impl_->pino.ee_position_jacobian(*w.pino, w.in(0, q, nq()), w.out(4, p, 3), w.J);
  w.back(4, p, 3);
  J = w.J.template cast<S>();
}

template <typename S>
void Plant<S>::points_kinematics(PlantWorkspace<S>& ws, const S* q, int n, const int* frames, const S* local,
                                 S* pos, S* J) const {
  auto& w = detail::cast(ws);
  const std::size_t nJ = std::size_t(n) * 3 * nv();
  impl_->pino.points_kinematics(*w.pino, w.in(0, q, nq()), n, frames, w.in(1, local, 3 * n),
                                w.out(4, pos, 3 * n), w.out(5, J, nJ));
  w.back(4, pos, 3 * n);
  w.back(5, J, nJ);
}

template <typename S>
void Plant<S>::ee_rotation(PlantWorkspace<S>& ws, const S* q, S* R, Mat* Jw) const {
  auto& w = detail::cast(ws);
  impl_->pino.ee_rotation(*w.pino, w.in(0, q, nq()), w.out(4, R, 9), Jw ? &w.J : nullptr);
  w.back(4, R, 9);
  if (Jw) *Jw = w.J.template cast<S>();
}

template <typename S>
void Plant<S>::gravity(PlantWorkspace<S>& ws, const S* q, S* g, Mat* dg_dq) const {
  auto& w = detail::cast(ws);
  impl_->pino.gravity(*w.pino, w.in(0, q, nq()), w.out(4, g, nv()), dg_dq ? &w.Dq : nullptr);
  w.back(4, g, nv());
  if (dg_dq) *dg_dq = w.Dq.template cast<S>();
}

template <typename S>
void Plant<S>::inverse_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* qdd,
                                const S* fext, S* tau) const {
  auto& w = detail::cast(ws);
  const int n = nv();
  impl_->pino.rnea(*w.pino, w.in(0, q, n), w.in(1, v, n), w.in(2, qdd, n), w.in(3, fext, 6 * nbodies()),
                   w.out(4, tau, n));
  w.back(4, tau, n);
}

}  // namespace gato
