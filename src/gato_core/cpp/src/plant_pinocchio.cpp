// The pinocchio side of the plant (plant_pinocchio.hpp), in double: the only
// plant translation unit that includes pinocchio.
#include "plant_pinocchio.hpp"

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

namespace gato {
namespace detail {

using Vec = Eigen::VectorXd;
using V3 = Eigen::Vector3d;
// The argument types of the pin wheel's explicit instantiations (libpinocchio_default,
// PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION): a call with exactly these types links the
// library's compiled algorithm instead of instantiating it here (~60 % of this TU's
// compile time before). Ref of a contiguous Map: no copy.
using CRef = Eigen::Ref<const Vec>;
using J6Mat = pinocchio::Data::Matrix6x;

struct PinoData {
  explicit PinoData(const pinocchio::Model& m)
      : data(m), fext(m.njoints, pinocchio::Force::Zero()), J6(6, m.nv) {
    J6.setZero();
  }
  pinocchio::Data data;
  std::vector<pinocchio::Force> fext;
  J6Mat J6;
};

void PinoDataDeleter::operator()(PinoData* d) const { delete d; }

struct PinoModel::Impl {
  pinocchio::Model model;
  pinocchio::FrameIndex ee_frame = 0;
  int ee_body = 0;
  pinocchio::Inertia ee_nominal = pinocchio::Inertia::Zero();  // the EE body's URDF inertia
};

namespace {

// Our layout per body is [angular(3); linear(3)] in the joint-local frame;
// pinocchio's Force is (linear, angular).
void load_fext(PinoData& d, const double* fext, int nbodies) {
  for (int b = 0; b < nbodies; ++b) {
    const double* f = fext + 6 * b;
    d.fext[b + 1].angular() << f[0], f[1], f[2];
    d.fext[b + 1].linear() << f[3], f[4], f[5];
  }
}

V3 frame_origin(const pinocchio::Model& m, const pinocchio::Data& d, pinocchio::FrameIndex f) {
  const auto& frame = m.frames[f];
  return d.oMi[frame.parentJoint].act(frame.placement).translation();
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
}  // namespace

PinoModel::PinoModel(const std::string& urdf_path, const std::string& ee_frame)
    : impl_(std::make_unique<Impl>()) {
  if (!std::filesystem::exists(urdf_path)) {
    throw std::invalid_argument("model_path: URDF file not found: " + urdf_path);
  }
  pinocchio::Model& m = impl_->model;
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
  impl_->ee_frame = m.getFrameId(ee_frame);
  impl_->ee_body = static_cast<int>(m.frames[impl_->ee_frame].parentJoint) - 1;
  impl_->ee_nominal = m.inertias[impl_->ee_body + 1];
}

void PinoModel::set_ee_payload(double mass, const double* com, const double* Icom) {
  pinocchio::Model& m = impl_->model;
  const auto& frame = m.frames[impl_->ee_frame];
  pinocchio::Inertia I = impl_->ee_nominal;
  if (mass > 0) {
    const Eigen::Map<const Eigen::Vector3d> c(com);
    Eigen::Matrix3d Ic = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(Icom);
    Ic = 0.5 * (Ic + Ic.transpose());
    const Eigen::Matrix3d R = frame.placement.rotation();
    // EE-frame coordinates -> the parent joint's frame
    I += pinocchio::Inertia(mass, frame.placement.act(Eigen::Vector3d(c)), R * Ic * R.transpose());
  }
  m.inertias[impl_->ee_body + 1] = I;
}

PinoModel::~PinoModel() = default;

int PinoModel::nq() const { return impl_->model.nq; }
int PinoModel::nv() const { return impl_->model.nv; }
int PinoModel::njoints() const { return impl_->model.njoints; }
int PinoModel::nframes() const { return int(impl_->model.nframes); }
int PinoModel::ee_frame() const { return static_cast<int>(impl_->ee_frame); }
int PinoModel::ee_body() const { return impl_->ee_body; }

std::vector<std::string> PinoModel::joint_names() const {
  return std::vector<std::string>(impl_->model.names.begin() + 1, impl_->model.names.end());
}
std::vector<std::string> PinoModel::frame_names() const {
  std::vector<std::string> out;
  for (const auto& f : impl_->model.frames) out.push_back(f.name);
  return out;
}
int PinoModel::frame_id(const std::string& name) const {
  if (!impl_->model.existFrame(name)) return -1;
  return static_cast<int>(impl_->model.getFrameId(name));
}

void PinoModel::limits(Vec& q_lo, Vec& q_hi, Vec& qd_max, Vec& u_max) const {
  const auto& m = impl_->model;
  q_lo = m.lowerPositionLimit;
  q_hi = m.upperPositionLimit;
  qd_max = m.upperVelocityLimit;
  u_max = m.upperEffortLimit;
}

template <typename S>
std::unique_ptr<lean::Model<S>> PinoModel::lean_model() const {
  return build_lean_model<S>(impl_->model, impl_->ee_frame);
}
template std::unique_ptr<lean::Model<double>> PinoModel::lean_model<double>() const;
template std::unique_ptr<lean::Model<float>> PinoModel::lean_model<float>() const;

PinoDataPtr PinoModel::make_data() const { return PinoDataPtr(new PinoData(impl_->model)); }

void PinoModel::aba(PinoData& d, const double* q, const double* v, const double* tau,
                    const double* fext, double* qdd, double* ee) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq), V = Eigen::Map<const Vec>(v, m.nv),
             T = Eigen::Map<const Vec>(tau, m.nv);
  Eigen::Map<Vec> out(qdd, m.nv);
  // The WORLD convention leaves data.oMi valid: the EE comes for free.
  const auto conv = ee ? pinocchio::Convention::WORLD : pinocchio::Convention::LOCAL;
  if (fext) {
    load_fext(d, fext, m.njoints - 1);
    out = pinocchio::aba(m, d.data, Q, V, T, d.fext, conv);
  } else {
    out = pinocchio::aba(m, d.data, Q, V, T, conv);
  }
  if (ee) V3::Map(ee) = frame_origin(m, d.data, impl_->ee_frame);
}

void PinoModel::aba_derivatives(PinoData& d, const double* q, const double* v, const double* tau,
                                const double* fext, double* qdd, Eigen::MatrixXd& dq,
                                Eigen::MatrixXd& dv, Eigen::MatrixXd& Minv, double* ee,
                                Eigen::MatrixXd* J) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq), V = Eigen::Map<const Vec>(v, m.nv),
             T = Eigen::Map<const Vec>(tau, m.nv);
  if (fext) {
    load_fext(d, fext, m.njoints - 1);
    pinocchio::computeABADerivatives(m, d.data, Q, V, T, d.fext);
  } else {
    pinocchio::computeABADerivatives(m, d.data, Q, V, T);
  }
  Eigen::Map<Vec>(qdd, m.nv) = d.data.ddq;
  dq = d.data.ddq_dq;
  dv = d.data.ddq_dv;
  // pinocchio fills only the upper triangle of Minv.
  Minv.resize(m.nv, m.nv);
  Minv.triangularView<Eigen::Upper>() = d.data.Minv.triangularView<Eigen::Upper>();
  Minv.triangularView<Eigen::StrictlyLower>() = d.data.Minv.transpose().triangularView<Eigen::StrictlyLower>();
  // ABA derivatives leave data.oMi and the world joint Jacobians data.J valid.
  if (ee) V3::Map(ee) = frame_origin(m, d.data, impl_->ee_frame);
  if (J) {
    d.J6.setZero();
    pinocchio::getFrameJacobian(m, d.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, d.J6);
    *J = d.J6.topRows<3>();
  }
}

void PinoModel::frame_position(PinoData& d, const double* q, double* p, int fid) const {
  const auto& m = impl_->model;
  const auto f = fid < 0 ? impl_->ee_frame : static_cast<pinocchio::FrameIndex>(fid);
  pinocchio::forwardKinematics(m, d.data, CRef(Eigen::Map<const Vec>(q, m.nq)));
  V3::Map(p) = frame_origin(m, d.data, f);
}

void PinoModel::ee_position_jacobian(PinoData& d, const double* q, double* p, Eigen::MatrixXd& J) const {
  const auto& m = impl_->model;
  pinocchio::computeJointJacobians(m, d.data, CRef(Eigen::Map<const Vec>(q, m.nq)));  // also runs FK
  V3::Map(p) = frame_origin(m, d.data, impl_->ee_frame);
  d.J6.setZero();
  pinocchio::getFrameJacobian(m, d.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, d.J6);
  J = d.J6.topRows<3>();
}

void PinoModel::points_kinematics(PinoData& d, const double* q, int n, const int* frames,
                                  const double* local, double* pos, double* J) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq);
  if (J) {
    pinocchio::computeJointJacobians(m, d.data, Q);  // also runs forward kinematics
  } else {
    pinocchio::forwardKinematics(m, d.data, Q);
  }
  const int nv = m.nv;
  for (int i = 0; i < n; ++i) {
    const auto& fr = m.frames[static_cast<pinocchio::FrameIndex>(frames[i])];
    const auto& oMi = d.data.oMi[fr.parentJoint];
    const V3 p = oMi.act(fr.placement.act(V3(Eigen::Map<const V3>(local + 3 * i))));
    V3::Map(pos + 3 * i) = p;
    if (!J) continue;
    // The point moves with its joint: v_p = v_joint_origin + omega x (p - joint origin).
    d.J6.setZero();
    Eigen::Ref<J6Mat> J6(d.J6);
    pinocchio::getJointJacobian(m, d.data, fr.parentJoint, pinocchio::LOCAL_WORLD_ALIGNED, J6);
    const V3 r = p - oMi.translation();
    for (int j = 0; j < nv; ++j) {
      const V3 vo = d.J6.col(j).head<3>();
      const V3 om = d.J6.col(j).tail<3>();
      const V3 vp = vo + om.cross(r);
      for (int a = 0; a < 3; ++a) J[(size_t(i) * 3 + a) * nv + j] = vp[a];
    }
  }
}

void PinoModel::ee_rotation(PinoData& d, const double* q, double* R, Eigen::MatrixXd* Jw) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq);
  if (Jw) {
    pinocchio::computeJointJacobians(m, d.data, Q);  // also runs forward kinematics
  } else {
    pinocchio::forwardKinematics(m, d.data, Q);
  }
  const auto& frame = m.frames[impl_->ee_frame];
  Eigen::Matrix3d::Map(R) = d.data.oMi[frame.parentJoint].act(frame.placement).rotation();
  if (Jw) {
    d.J6.setZero();
    pinocchio::getFrameJacobian(m, d.data, impl_->ee_frame, pinocchio::LOCAL_WORLD_ALIGNED, d.J6);
    *Jw = d.J6.bottomRows<3>();
  }
}

void PinoModel::gravity(PinoData& d, const double* q, double* g, Eigen::MatrixXd* dg_dq) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq);
  Eigen::Map<Vec>(g, m.nv) = pinocchio::computeGeneralizedGravity(m, d.data, Q);
  if (dg_dq) {
    dg_dq->resize(m.nv, m.nv);
    dg_dq->setZero();
    Eigen::Ref<Eigen::MatrixXd> G(*dg_dq);
    pinocchio::computeGeneralizedGravityDerivatives(m, d.data, Q, G);
  }
}

void PinoModel::rnea(PinoData& d, const double* q, const double* v, const double* qdd,
                     const double* fext, double* tau) const {
  const auto& m = impl_->model;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq), V = Eigen::Map<const Vec>(v, m.nv),
             A = Eigen::Map<const Vec>(qdd, m.nv);
  if (fext) {
    load_fext(d, fext, m.njoints - 1);
    Eigen::Map<Vec>(tau, m.nv) = pinocchio::rnea(m, d.data, Q, V, A, d.fext);
  } else {
    Eigen::Map<Vec>(tau, m.nv) = pinocchio::rnea(m, d.data, Q, V, A);
  }
}

}  // namespace detail
}  // namespace gato
