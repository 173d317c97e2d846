// pinocchio implementation of gato::Plant<S>. Included by exactly one TU per
// scalar type (plant_double.cpp, plant_float.cpp).
#pragma once

#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include <Eigen/Geometry>
#include <filesystem>
#include <stdexcept>

#include "gato/lean_model.hpp"
#include "gato/plant.hpp"

namespace gato {

template <typename S>
struct Plant<S>::Impl {
  using Model = pinocchio::ModelTpl<S>;
  using Data = pinocchio::DataTpl<S>;
  using Force = pinocchio::ForceTpl<S>;
  Model model;
  pinocchio::FrameIndex ee_frame = 0;
  int ee_body = 0;
  PlantLimits<S> limits;
  std::unique_ptr<lean::Model<S>> lean;  // null: some joint is not 1-DoF revolute / prismatic
  lean::View<S> lean_view{};
  lean::Kernels<S> lean_k1{};             // scalar kernels
  bool use_lean = true;
};

namespace detail {
template <typename S>
class PinocchioWorkspace : public PlantWorkspace<S> {
 public:
  using Model = pinocchio::ModelTpl<S>;
  PinocchioWorkspace(const Model& m, std::size_t lean_bytes)
      : data(m), fext(m.njoints, pinocchio::ForceTpl<S>::Zero()), J6(6, m.nv), lean(lean_bytes),
        lean_out(lean_bytes ? 3 * m.nv * m.nv + 3 * m.nv : 0) {
    J6.setZero();
  }
  pinocchio::DataTpl<S> data;
  std::vector<pinocchio::ForceTpl<S>> fext;
  MatX<S> J6;
  lean::Scratch lean;
  std::vector<S> lean_out;  // row-major dq, dv, Minv, J of the lean derivatives
};

template <typename S>
PinocchioWorkspace<S>& cast(PlantWorkspace<S>& ws) {
  return static_cast<PinocchioWorkspace<S>&>(ws);
}

// Our layout per body is [angular(3); linear(3)] in the joint-local frame;
// pinocchio's Force is (linear, angular).
template <typename S>
void load_fext(PinocchioWorkspace<S>& w, const S* fext, int nbodies) {
  for (int b = 0; b < nbodies; ++b) {
    const S* f = fext + 6 * b;
    w.fext[b + 1].angular() << f[0], f[1], f[2];
    w.fext[b + 1].linear() << f[3], f[4], f[5];
  }
}

// The canonical model of lean_aba.hpp, or null when a joint is not a 1-DoF
// revolute or prismatic joint (then pinocchio does everything). Each joint
// frame is rotated about its origin by Ra (Ra e_z = joint axis), so that every
// axis is +z; whatever is expressed in a joint frame is rotated along.
template <typename S>
std::unique_ptr<lean::Model<S>> build_lean_model(const pinocchio::Model& m,
                                                 pinocchio::FrameIndex ee_frame) {
  using M3 = Eigen::Matrix3d;
  using V3 = Eigen::Vector3d;
  const int n = m.njoints - 1;
  if (n != m.nv || n != m.nq || n < 1) return nullptr;
  if (!m.gravity.angular().isZero(0)) return nullptr;
  auto L = std::make_unique<lean::Model<S>>();
  L->n = n;
  L->parent.resize(n);
  L->idx.resize(n);
  L->prismatic.resize(n);
  L->Rt.resize(9 * n);
  L->pt.resize(3 * n);
  L->mass.resize(n);
  L->B0.resize(9 * n);
  L->C0.resize(9 * n);
  L->armature.resize(n);
  L->Rf.resize(9 * n);
  L->rotated.resize(n);
  L->last.resize(n);
  L->com.resize(3 * n);
  L->Icom.resize(9 * n);
  auto put3 = [](std::vector<S>& dst, int i, const M3& R) {
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) dst[9 * i + 3 * r + c] = S(R(r, c));
  };
  auto skew = [](const V3& v) {
    M3 P;
    P << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
    return P;
  };
  std::vector<M3> Ra(m.njoints, M3::Identity());
  const V3 ez = V3::UnitZ();
  for (int i = 1; i <= n; ++i) {
    const auto& jm = m.joints[i];
    if (jm.nq() != 1 || jm.nv() != 1 || jm.idx_q() != jm.idx_v()) return nullptr;
    const int pj = static_cast<int>(m.parents[i]);
    if (pj >= i) return nullptr;
    // Motion subspace and placement at q = 0.7: a pure rotation about the
    // axis (revolute) or translation along it (prismatic), nothing else.
    auto jd = jm.createData();
    Eigen::VectorXd q = Eigen::VectorXd::Zero(m.nq), v = Eigen::VectorXd::Zero(m.nv);
    const double qa = 0.7;
    q[jm.idx_q()] = qa;
    v[jm.idx_v()] = 1;
    jm.calc(jd, q, v);
    const pinocchio::Motion mo = jd.v();
    const pinocchio::SE3 Mq = jd.M();
    const bool rev = mo.linear().isZero(0) && std::abs(mo.angular().norm() - 1) < 1e-12;
    const bool pri = mo.angular().isZero(0) && std::abs(mo.linear().norm() - 1) < 1e-12;
    if (!rev && !pri) return nullptr;
    const V3 a = rev ? V3(mo.angular()) : V3(mo.linear());
    if (rev) {
      if (!Mq.translation().isZero(1e-12) ||
          !Mq.rotation().isApprox(Eigen::AngleAxisd(qa, a).toRotationMatrix(), 1e-12)) {
        return nullptr;
      }
    } else if (!Mq.rotation().isIdentity(1e-12) || !Mq.translation().isApprox(qa * a, 1e-12)) {
      return nullptr;
    }
    if (a != ez) Ra[i] = Eigen::Quaterniond::FromTwoVectors(ez, a).toRotationMatrix();
    const int b = i - 1;
    L->parent[b] = pj - 1;
    L->idx[b] = jm.idx_v();
    L->prismatic[b] = pri;
    const pinocchio::SE3& jp = m.jointPlacements[i];
    const M3 Rt = Ra[pj].transpose() * jp.rotation() * Ra[i];
    const V3 pt = Ra[pj].transpose() * jp.translation();
    put3(L->Rt, b, Rt);
    for (int r = 0; r < 3; ++r) L->pt[3 * b + r] = S(pt[r]);
    const auto& I = m.inertias[i];
    const double mass = I.mass();
    const V3 c = Ra[i].transpose() * I.lever();
    const M3 Ic = Ra[i].transpose() * I.inertia().matrix() * Ra[i];
    const M3 C = skew(c);
    L->mass[b] = S(mass);
    put3(L->B0, b, -mass * C);
    put3(L->C0, b, Ic - mass * C * C);
    put3(L->Icom, b, Ic);
    for (int r = 0; r < 3; ++r) L->com[3 * b + r] = S(c[r]);
    L->armature[b] = S(m.armature[jm.idx_v()]);
    put3(L->Rf, b, Ra[i].transpose());
    L->rotated[b] = a != ez;
  }
  // Subtrees must be contiguous in body order (the derivative passes rely on
  // it); pinocchio's depth-first numbering guarantees it, so this only guards.
  for (int b = n - 1; b >= 0; --b) {
    L->last[b] = std::max(L->last[b], b);
    const int p = L->parent[b];
    if (p >= 0) L->last[p] = std::max(L->last[p], L->last[b]);
  }
  for (int b = 0; b < n; ++b) {
    for (int c = b + 1; c <= L->last[b]; ++c) {
      int a = c;
      while (a > b) a = L->parent[a];
      if (a != b) return nullptr;
    }
  }
  const V3 g = -m.gravity.linear();
  for (int r = 0; r < 3; ++r) L->g[r] = S(g[r]);
  const auto& f = m.frames[ee_frame];
  const int j = static_cast<int>(f.parentJoint);
  const V3 pe = Ra[j].transpose() * f.placement.translation();
  L->ee_body = j - 1;
  for (int r = 0; r < 3; ++r) L->ee_p[r] = S(pe[r]);
  return L;
}
}  // namespace detail

template <typename S>
Plant<S>::Plant(const std::string& urdf_path, const std::string& ee_frame)
    : impl_(std::make_unique<Impl>()) {
  if (!std::filesystem::exists(urdf_path)) {
    throw std::invalid_argument("model_path: URDF file not found: " + urdf_path);
  }
  pinocchio::Model m;
  try {
    pinocchio::urdf::buildModel(urdf_path, m);
  } catch (const std::exception& e) {
    throw std::invalid_argument("model_path: cannot parse URDF " + urdf_path + ": " + e.what());
  }
  if (m.nq != m.nv) {
    throw std::invalid_argument(
        "model_path: only fixed-base robots with revolute/prismatic joints are supported "
        "(nq == nv); " + urdf_path + " has nq=" + std::to_string(m.nq) +
        " nv=" + std::to_string(m.nv));
  }
  if (m.nv == 0) throw std::invalid_argument("model_path: the URDF has no movable joint");
  if (!m.existFrame(ee_frame)) {
    throw std::invalid_argument("ee_frame: frame '" + ee_frame + "' not found in " + urdf_path);
  }
  impl_->model = m.template cast<S>();
  impl_->ee_frame = m.getFrameId(ee_frame);
  impl_->ee_body = static_cast<int>(m.frames[impl_->ee_frame].parentJoint) - 1;
  auto& L = impl_->limits;
  L.q_lo = m.lowerPositionLimit.template cast<S>();
  L.q_hi = m.upperPositionLimit.template cast<S>();
  L.qd_max = m.upperVelocityLimit.template cast<S>();
  L.u_max = m.upperEffortLimit.template cast<S>();
  impl_->lean = detail::build_lean_model<S>(m, impl_->ee_frame);
  if (impl_->lean) {
    impl_->lean_view = impl_->lean->view();
    impl_->lean_k1 = lean::kernels<S>(1, impl_->lean->n);
  }
}

template <typename S>
Plant<S>::~Plant() = default;

template <typename S>
int Plant<S>::nq() const { return impl_->model.nq; }
template <typename S>
int Plant<S>::nv() const { return impl_->model.nv; }
template <typename S>
int Plant<S>::nbodies() const { return impl_->model.njoints - 1; }
template <typename S>
int Plant<S>::ee_body() const { return impl_->ee_body; }
template <typename S>
const PlantLimits<S>& Plant<S>::limits() const { return impl_->limits; }
template <typename S>
int Plant<S>::ee_frame_id() const { return static_cast<int>(impl_->ee_frame); }

template <typename S>
std::vector<std::string> Plant<S>::joint_names() const {
  return std::vector<std::string>(impl_->model.names.begin() + 1, impl_->model.names.end());
}
template <typename S>
std::vector<std::string> Plant<S>::frame_names() const {
  std::vector<std::string> out;
  for (const auto& f : impl_->model.frames) out.push_back(f.name);
  return out;
}
template <typename S>
int Plant<S>::frame_id(const std::string& name) const {
  if (!impl_->model.existFrame(name)) return -1;
  return static_cast<int>(impl_->model.getFrameId(name));
}

template <typename S>
const lean::Model<S>* Plant<S>::lean_model() const { return impl_->lean.get(); }
template <typename S>
void Plant<S>::set_use_lean(bool on) { impl_->use_lean = on; }
template <typename S>
bool Plant<S>::use_lean() const { return impl_->use_lean && impl_->lean; }

template <typename S>
std::unique_ptr<PlantWorkspace<S>> Plant<S>::make_workspace() const {
  return std::make_unique<detail::PinocchioWorkspace<S>>(
      impl_->model, impl_->lean ? impl_->lean_k1.scratch_bytes : 0);
}

template <typename S>
void Plant<S>::forward_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* tau,
                                const S* fext, S* qdd, S* ee) const {
  auto& w = detail::cast(ws);
  if (use_lean()) {
    impl_->lean_k1.aba(impl_->lean_view, w.lean.data(), q, v, tau, fext, qdd, ee);
    return;
  }
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq), V(v, m.nv), T(tau, m.nv);
  Eigen::Map<Vec> out(qdd, m.nv);
  // The WORLD convention leaves data.oMi valid: the EE comes for free.
  const auto conv = ee ? pinocchio::Convention::WORLD : pinocchio::Convention::LOCAL;
  if (fext) {
    detail::load_fext(w, fext, nbodies());
    out = pinocchio::aba(m, w.data, Q, V, T, w.fext, conv);
  } else {
    out = pinocchio::aba(m, w.data, Q, V, T, conv);
  }
  if (ee) {
    const auto& frame = m.frames[impl_->ee_frame];
    Eigen::Map<Eigen::Matrix<S, 3, 1>> pos(ee);
    pos = w.data.oMi[frame.parentJoint].act(frame.placement).translation();
  }
}

template <typename S>
void Plant<S>::forward_dynamics_derivatives(PlantWorkspace<S>& ws, const S* q, const S* v,
                                            const S* tau, const S* fext, S* qdd,
                                            MatRef dqdd_dq, MatRef dqdd_dv, MatRef Minv, S* ee,
                                            Mat* J) const {
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  if (use_lean()) {
    using RowMap = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
    const int n = m.nv;
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
  Eigen::Map<const Vec> Q(q, m.nq), V(v, m.nv), T(tau, m.nv);
  if (fext) {
    detail::load_fext(w, fext, nbodies());
    pinocchio::computeABADerivatives(m, w.data, Q, V, T, w.fext);
  } else {
    pinocchio::computeABADerivatives(m, w.data, Q, V, T);
  }
  Eigen::Map<Vec>(qdd, m.nv) = w.data.ddq;
  dqdd_dq = w.data.ddq_dq;
  dqdd_dv = w.data.ddq_dv;
  // pinocchio fills only the upper triangle of Minv.
  Minv.template triangularView<Eigen::Upper>() = w.data.Minv.template triangularView<Eigen::Upper>();
  Minv.template triangularView<Eigen::StrictlyLower>() =
      w.data.Minv.transpose().template triangularView<Eigen::StrictlyLower>();
  // ABA derivatives leave data.oMi and the world joint Jacobians data.J valid.
  if (ee) {
    const auto& frame = m.frames[impl_->ee_frame];
    Eigen::Map<Eigen::Matrix<S, 3, 1>> pos(ee);
    pos = w.data.oMi[frame.parentJoint].act(frame.placement).translation();
  }
  if (J) {
    w.J6.setZero();
    pinocchio::getFrameJacobian(m, w.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, w.J6);
    *J = w.J6.template topRows<3>();
  }
}

template <typename S>
void Plant<S>::frame_position(PlantWorkspace<S>& ws, const S* q, S* p, int fid) const {
  auto& w = detail::cast(ws);
  if (fid < 0 && use_lean()) {
    impl_->lean_k1.ee(impl_->lean_view, w.lean.data(), q, p);
    return;
  }
  const auto& m = impl_->model;
  const auto f = fid < 0 ? impl_->ee_frame : static_cast<pinocchio::FrameIndex>(fid);
  pinocchio::forwardKinematics(m, w.data, Eigen::Map<const Vec>(q, m.nq));
  const auto& frame = m.frames[f];
  Eigen::Map<Eigen::Matrix<S, 3, 1>> pos(p);
  pos = w.data.oMi[frame.parentJoint].act(frame.placement).translation();
}

template <typename S>
void Plant<S>::ee_position_jacobian(PlantWorkspace<S>& ws, const S* q, S* p, MatRef J) const {
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq);
  pinocchio::computeJointJacobians(m, w.data, Q);  // also runs forward kinematics
  const auto& frame = m.frames[impl_->ee_frame];
  Eigen::Map<Eigen::Matrix<S, 3, 1>> pos(p);
  pos = w.data.oMi[frame.parentJoint].act(frame.placement).translation();
  w.J6.setZero();
  pinocchio::getFrameJacobian(m, w.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, w.J6);
  J = w.J6.template topRows<3>();
}

template <typename S>
int Plant<S>::nframes() const {
  return int(impl_->model.nframes);
}

template <typename S>
void Plant<S>::points_kinematics(PlantWorkspace<S>& ws, const S* q, int n, const int* frames, const S* local,
                                 S* pos, S* J) const {
  using V3 = Eigen::Matrix<S, 3, 1>;
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq);
  if (J) {
    pinocchio::computeJointJacobians(m, w.data, Q);  // also runs forward kinematics
  } else {
    pinocchio::forwardKinematics(m, w.data, Q);
  }
  const int nv = m.nv;
  for (int i = 0; i < n; ++i) {
    const auto& fr = m.frames[static_cast<pinocchio::FrameIndex>(frames[i])];
    const auto& oMi = w.data.oMi[fr.parentJoint];
    const V3 p = oMi.act(fr.placement.act(V3(Eigen::Map<const V3>(local + 3 * i))));
    Eigen::Map<V3>(pos + 3 * i) = p;
    if (!J) continue;
    // The point moves with its joint: v_p = v_joint_origin + omega x (p - joint origin).
    w.J6.setZero();
    pinocchio::getJointJacobian(m, w.data, fr.parentJoint, pinocchio::LOCAL_WORLD_ALIGNED, w.J6);
    const V3 r = p - oMi.translation();
    for (int j = 0; j < nv; ++j) {
      const V3 vo = w.J6.col(j).template head<3>();
      const V3 om = w.J6.col(j).template tail<3>();
      const V3 vp = vo + om.cross(r);
      for (int a = 0; a < 3; ++a) J[(size_t(i) * 3 + a) * nv + j] = vp[a];
    }
  }
}

template <typename S>
void Plant<S>::ee_rotation(PlantWorkspace<S>& ws, const S* q, S* R, Mat* Jw) const {
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq);
  if (Jw) {
    pinocchio::computeJointJacobians(m, w.data, Q);  // also runs forward kinematics
  } else {
    pinocchio::forwardKinematics(m, w.data, Q);
  }
  const auto& frame = m.frames[impl_->ee_frame];
  Eigen::Map<Eigen::Matrix<S, 3, 3>> Rm(R);
  Rm = w.data.oMi[frame.parentJoint].act(frame.placement).rotation();
  if (Jw) {
    w.J6.setZero();
    pinocchio::getFrameJacobian(m, w.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, w.J6);
    *Jw = w.J6.template bottomRows<3>();
  }
}

template <typename S>
void Plant<S>::gravity(PlantWorkspace<S>& ws, const S* q, S* g, Mat* dg_dq) const {
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq);
  Eigen::Map<Vec>(g, m.nv) = pinocchio::computeGeneralizedGravity(m, w.data, Q);
  if (dg_dq) {
    dg_dq->resize(m.nv, m.nv);
    dg_dq->setZero();
    pinocchio::computeGeneralizedGravityDerivatives(m, w.data, Q, *dg_dq);
  }
}

template <typename S>
void Plant<S>::inverse_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* qdd,
                                const S* fext, S* tau) const {
  auto& w = detail::cast(ws);
  const auto& m = impl_->model;
  Eigen::Map<const Vec> Q(q, m.nq), V(v, m.nv), A(qdd, m.nv);
  if (fext) {
    detail::load_fext(w, fext, nbodies());
    Eigen::Map<Vec>(tau, m.nv) = pinocchio::rnea(m, w.data, Q, V, A, w.fext);
  } else {
    Eigen::Map<Vec>(tau, m.nv) = pinocchio::rnea(m, w.data, Q, V, A);
  }
}

}  // namespace gato
