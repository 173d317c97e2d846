// pinocchio implementation of gato::Plant<S>. Included by exactly one TU per
// scalar type (plant_double.cpp, plant_float.cpp).
#pragma once

#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include <filesystem>
#include <stdexcept>

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
};

namespace detail {
template <typename S>
class PinocchioWorkspace : public PlantWorkspace<S> {
 public:
  using Model = pinocchio::ModelTpl<S>;
  explicit PinocchioWorkspace(const Model& m)
      : data(m), fext(m.njoints, pinocchio::ForceTpl<S>::Zero()), J6(6, m.nv) {
    J6.setZero();
  }
  pinocchio::DataTpl<S> data;
  std::vector<pinocchio::ForceTpl<S>> fext;
  MatX<S> J6;
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
std::unique_ptr<PlantWorkspace<S>> Plant<S>::make_workspace() const {
  return std::make_unique<detail::PinocchioWorkspace<S>>(impl_->model);
}

template <typename S>
void Plant<S>::forward_dynamics(PlantWorkspace<S>& ws, const S* q, const S* v, const S* tau,
                                const S* fext, S* qdd, S* ee) const {
  auto& w = detail::cast(ws);
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
