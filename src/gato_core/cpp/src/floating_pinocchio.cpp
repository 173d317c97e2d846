// The floating-base plant (gato/floating.hpp) over pinocchio's free-flyer model, in double:
// the one translation unit of it that includes pinocchio (~75 s, ~3 GB to compile).
#include "gato/floating.hpp"

#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/center-of-mass.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include <Eigen/Geometry>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace gato {

using Vec = Eigen::VectorXd;
using V3 = Eigen::Vector3d;
using V6 = Eigen::Matrix<double, 6, 1>;
// The argument types of the pin wheel's explicit instantiations (libpinocchio_default,
// PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION): the dynamics algorithms take Eigen::Ref,
// the configuration-space ones (integrate, difference, dIntegrate, dDifference) plain
// VectorXd / MatrixXd. A call with exactly these types links the library's compiled
// algorithm instead of instantiating it in this TU (as plant_pinocchio.cpp does).
using CRef = Eigen::Ref<const Vec>;

struct FloatingPlant::Impl {
  pinocchio::Model model;
  std::vector<std::string> frame_names;
  std::vector<pinocchio::FrameIndex> frames;
  // Per contact: the velocity columns of its parent joint's support (root first) and the
  // pinocchio joint of each column (columns of one joint share it).
  std::vector<std::vector<int>> cols, col_joint;
};

struct FloatingPlant::Data {
  explicit Data(const pinocchio::Model& m, int nc)
      : data(m), fext(m.njoints, pinocchio::Force::Zero()), Jc(6, m.nv), Jall(6 * nc, m.nv),
        Jw(6, m.nv), tau(m.nv), dtau_dq(m.nv, m.nv), v1(m.nv), dq(m.nv), Dq0(m.nv, m.nv),
        Dq1(m.nv, m.nv) {}
  pinocchio::Data data;
  std::vector<pinocchio::Force> fext;
  pinocchio::Data::Matrix6x Jc;  // one contact frame's LWA Jacobian
  Eigen::MatrixXd Jall;          // all of them stacked (6 nc x nv)
  Eigen::MatrixXd Jw;            // the world-frame joint Jacobian (motion subspaces)
  Vec tau;
  Eigen::MatrixXd dtau_dq;
  Vec v1, dq;
  Eigen::MatrixXd Dq0, Dq1;
  Eigen::MatrixXd da_dq, da_dv, da_du, da_df;  // step_derivatives' scratch
  bool bw_on = false;                           // set_base_wrench: F, T world aligned at the base origin
  V3 bw_f = V3::Zero(), bw_t = V3::Zero();
};

namespace {
Eigen::Matrix3d skew(const V3& a) {
  Eigen::Matrix3d S;
  S << 0, -a.z(), a.y(), a.z(), 0, -a.x(), -a.y(), a.x(), 0;
  return S;
}
/// The base rotation of q (quaternion x, y, z, w at q[3:7], as pinocchio's free-flyer reads it).
Eigen::Matrix3d base_rotation(const double* q) {
  return Eigen::Quaterniond(q[6], q[3], q[4], q[5]).toRotationMatrix();
}
}  // namespace

void FloatingPlant::DataDeleter::operator()(Data* d) const { delete d; }

FloatingPlant::FloatingPlant(const std::string& urdf_path, const std::vector<std::string>& contact_frames)
    : impl_(std::make_unique<Impl>()) {
  if (!std::filesystem::is_regular_file(urdf_path))
    throw std::invalid_argument("urdf_path: URDF file not found: " + urdf_path);
  pinocchio::Model& m = impl_->model;
  try {
    pinocchio::urdf::buildModel(urdf_path, pinocchio::JointModelFreeFlyer(), m);
  } catch (const std::exception& e) {
    throw std::invalid_argument("urdf_path: cannot parse URDF " + urdf_path + ": " + e.what());
  }
  if (m.nq != m.nv + 1 || m.nv < 7)
    throw std::invalid_argument("urdf_path: expected 1-DoF joints under the free-flyer root (nq = nv + 1, "
                                "nv > 6); " + urdf_path + " has nq=" + std::to_string(m.nq) +
                                " nv=" + std::to_string(m.nv));
  for (const std::string& name : contact_frames) {
    if (!m.existFrame(name))
      throw std::invalid_argument("contact_frames: no frame named '" + name + "' in " + urdf_path);
    for (const std::string& seen : impl_->frame_names)
      if (seen == name) throw std::invalid_argument("contact_frames: frame '" + name + "' given twice");
    const pinocchio::FrameIndex fid = m.getFrameId(name);
    impl_->frame_names.push_back(name);
    impl_->frames.push_back(fid);
    std::vector<int> cols, joints;
    for (pinocchio::JointIndex j : m.supports[m.frames[fid].parentJoint]) {
      if (j == 0) continue;  // the universe
      for (int c = 0; c < m.joints[j].nv(); ++c) {
        cols.push_back(m.joints[j].idx_v() + c);
        joints.push_back(int(j));
      }
    }
    impl_->cols.push_back(std::move(cols));
    impl_->col_joint.push_back(std::move(joints));
  }
}

FloatingPlant::~FloatingPlant() = default;
int FloatingPlant::nq() const { return impl_->model.nq; }
int FloatingPlant::nv() const { return impl_->model.nv; }
int FloatingPlant::nc() const { return int(impl_->frames.size()); }
const std::vector<std::string>& FloatingPlant::contact_frames() const { return impl_->frame_names; }

std::vector<std::string> FloatingPlant::joint_names() const {
  const auto& m = impl_->model;
  return std::vector<std::string>(m.names.begin() + 2, m.names.end());  // universe, root_joint first
}

double FloatingPlant::total_mass() const { return pinocchio::computeTotalMass(impl_->model); }

FloatingPlant::DataPtr FloatingPlant::make_data() const { return DataPtr(new Data(impl_->model, nc())); }

// ------------------------------------------------------------------ checks

void FloatingPlant::check_finite(const double* a, long n, const char* name) {
  for (long i = 0; i < n; ++i)
    if (!std::isfinite(a[i]))
      throw std::invalid_argument(std::string(name) + ": contains NaN or inf (entry " + std::to_string(i) + ")");
}

void FloatingPlant::check_q(const double* q, const char* name) const {
  check_finite(q, nq(), name);
  const double norm = std::sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6]);
  if (!(std::abs(norm - 1.0) <= kQuatNormTol)) {
    std::ostringstream os;
    os.precision(9);
    os << name << ": base quaternion (entries 3:7, x y z w) has norm " << norm << ", expected 1";
    throw std::invalid_argument(os.str());
  }
}

void FloatingPlant::check_x(const double* x, const char* name) const {
  check_q(x, name);
  check_finite(x + nq(), nv(), name);
}

void FloatingPlant::check_dt(double dt) {
  if (!(std::isfinite(dt) && dt > 0)) {
    std::ostringstream os;
    os << "dt: expected a finite positive number of seconds, got " << dt;
    throw std::invalid_argument(os.str());
  }
}

// --------------------------------------------------------- manifold operations

void FloatingPlant::difference(const double* x0, const double* x1, double* dx) const {
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv;
  Eigen::Map<Vec> out(dx, 2 * nv);
  const Vec q0 = Eigen::Map<const Vec>(x0, nq), q1 = Eigen::Map<const Vec>(x1, nq);
  out.head(nv) = pinocchio::difference(m, q0, q1);
  out.tail(nv) = Eigen::Map<const Vec>(x1 + nq, nv) - Eigen::Map<const Vec>(x0 + nq, nv);
}

void FloatingPlant::integrate(const double* x, const double* dx, double* xo) const {
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv;
  Eigen::Map<Vec> out(xo, nq + nv);
  const Vec q = Eigen::Map<const Vec>(x, nq), dq = Eigen::Map<const Vec>(dx, nv);
  out.head(nq) = pinocchio::integrate(m, q, dq);
  out.tail(nv) = Eigen::Map<const Vec>(x + nq, nv) + Eigen::Map<const Vec>(dx + nv, nv);
}

void FloatingPlant::difference_jacobians(const double* x0, const double* x1, Mat& D0, Mat& D1) const {
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv;
  const Vec q0 = Eigen::Map<const Vec>(x0, nq), q1 = Eigen::Map<const Vec>(x1, nq);
  D0.setZero(2 * nv, 2 * nv);
  D1.setZero(2 * nv, 2 * nv);
  // pinocchio writes only the joints' own blocks: J starts at zero.
  Mat J = Mat::Zero(nv, nv);
  pinocchio::dDifference(m, q0, q1, J, pinocchio::ARG0);
  D0.topLeftCorner(nv, nv) = J;
  J.setZero();
  pinocchio::dDifference(m, q0, q1, J, pinocchio::ARG1);
  D1.topLeftCorner(nv, nv) = J;
  D0.bottomRightCorner(nv, nv).diagonal().setConstant(-1.0);
  D1.bottomRightCorner(nv, nv).diagonal().setConstant(1.0);
}

// ----------------------------------------------------------------- dynamics

void FloatingPlant::contact_jacobians(Data& d, const double* q, Mat& J) const {
  const auto& m = impl_->model;
  pinocchio::computeJointJacobians(m, d.data, CRef(Eigen::Map<const Vec>(q, m.nq)));  // also runs FK
  J.resize(6 * nc(), m.nv);
  for (int c = 0; c < nc(); ++c) {
    d.Jc.setZero();
    pinocchio::getFrameJacobian(m, d.data, impl_->frames[c], pinocchio::LOCAL_WORLD_ALIGNED, d.Jc);
    J.middleRows(6 * c, 6) = d.Jc;
  }
}

void FloatingPlant::contact_kinematics(Data& d, const double* q, double* p, Mat& J) const {
  contact_jacobians(d, q, J);  // runs the forward kinematics: oMi valid
  const auto& m = impl_->model;
  for (int c = 0; c < nc(); ++c) {
    const auto& frame = m.frames[impl_->frames[c]];
    Eigen::Map<V3>(p + 3 * c) = d.data.oMi[frame.parentJoint].act(frame.placement).translation();
  }
}

void FloatingPlant::forward_dynamics(Data& d, const double* q, const double* v, const double* u,
                                     const double* f, double* a) const {
  const auto& m = impl_->model;
  const int nv = m.nv;
  const CRef Q = Eigen::Map<const Vec>(q, m.nq), V = Eigen::Map<const Vec>(v, nv), T = d.tau;
  d.tau.head(6).setZero();
  d.tau.tail(nv - 6) = Eigen::Map<const Vec>(u, nv - 6);
  if (d.bw_on) {  // tau_b = (R^T F, R^T T, 0)
    const Eigen::Matrix3d R = base_rotation(q);
    d.tau.head<3>() = R.transpose() * d.bw_f;
    d.tau.segment<3>(3) = R.transpose() * d.bw_t;
  }
  if (!f || nc() == 0) {
    Eigen::Map<Vec>(a, nv) = pinocchio::aba(m, d.data, Q, V, T);
    return;
  }
  // Each wrench as a joint-frame external force: about the world origin it is
  // (f, tau + p x f), then moved into its parent joint's frame.
  pinocchio::forwardKinematics(m, d.data, Q);
  for (auto& F : d.fext) F.setZero();
  for (int c = 0; c < nc(); ++c) {
    const auto& frame = m.frames[impl_->frames[c]];
    const pinocchio::SE3& oMi = d.data.oMi[frame.parentJoint];
    const V3 p = oMi.act(frame.placement).translation();
    const V3 fl(f + 6 * c), ta(f + 6 * c + 3);
    const pinocchio::Force Fw(fl, ta + p.cross(fl));
    d.fext[frame.parentJoint] += oMi.actInv(Fw);
  }
  Eigen::Map<Vec>(a, nv) = pinocchio::aba(m, d.data, Q, V, T, d.fext);
}

void FloatingPlant::forward_dynamics_derivatives(Data& d, const double* q, const double* v, const double* u,
                                                 const double* f, double* a, Mat& da_dq, Mat& da_dv,
                                                 Mat& da_du, Mat& da_df) const {
  const auto& m = impl_->model;
  const int nv = m.nv, nu = nv - 6, nc = this->nc();
  const CRef Q = Eigen::Map<const Vec>(q, m.nq), V = Eigen::Map<const Vec>(v, nv), T = d.tau;
  d.tau.head(6).setZero();
  d.tau.tail(nu) = Eigen::Map<const Vec>(u, nu);
  d.dtau_dq.setZero();
  if (d.bw_on) {
    // tau_b = (R^T F, R^T T, 0); along the base's tangent rotation (R -> R Exp(dth)):
    // d(R^T F)/d dth = [R^T F]x, the same for T; nothing else moves it.
    const Eigen::Matrix3d R = base_rotation(q);
    const V3 fb = R.transpose() * d.bw_f, tb = R.transpose() * d.bw_t;
    d.tau.head<3>() = fb;
    d.tau.segment<3>(3) = tb;
    d.dtau_dq.block<3, 3>(0, 3) = skew(fb);
    d.dtau_dq.block<3, 3>(3, 3) = skew(tb);
  }
  if (nc > 0) {
    contact_jacobians(d, q, d.Jall);  // leaves data.J (world motion subspaces) and oMi valid
    if (f) {
      d.Jw = d.data.J;
      for (int c = 0; c < nc; ++c) {
        const V3 fl(f + 6 * c), ta(f + 6 * c + 3);
        d.tau.noalias() += d.Jall.middleRows(6 * c, 6).transpose() * Eigen::Map<const V6>(f + 6 * c);
        // tau_c = sum_i S_i . F with S_i the world motion subspace of a support column and
        // F = (f, tau + p x f) about the world origin. Along column k of the support:
        // dS_i/dq_k = S_k x S_i where joint(k) <= joint(i) (k moves i; within the free-flyer
        // all pairs), and dF/dq_k = (0, dp/dq_k x f) with dp/dq_k the LWA Jacobian's linear column.
        const auto& frame = m.frames[impl_->frames[c]];
        const V3 p = d.data.oMi[frame.parentJoint].act(frame.placement).translation();
        const V3 n = ta + p.cross(fl);
        const std::vector<int>& cols = impl_->cols[c];
        const std::vector<int>& jnt = impl_->col_joint[c];
        const int s = int(cols.size());
        for (int kk = 0; kk < s; ++kk) {
          const int k = cols[kk];
          const V3 vk = d.Jw.col(k).head<3>(), wk = d.Jw.col(k).tail<3>();
          const V3 dn = d.Jall.block<3, 1>(6 * c, k).cross(fl);  // d(p x f)/dq_k
          for (int ii = 0; ii < s; ++ii) {
            const int i = cols[ii];
            const V3 vi = d.Jw.col(i).head<3>(), wi = d.Jw.col(i).tail<3>();
            double g = wi.dot(dn);
            if (jnt[kk] <= jnt[ii]) {
              // (S_k x S_i) . F, motion cross: (w_k x v_i + v_k x w_i, w_k x w_i).
              g += (wk.cross(vi) + vk.cross(wi)).dot(fl) + wk.cross(wi).dot(n);
            }
            d.dtau_dq(i, k) += g;
          }
        }
      }
    }
  }
  pinocchio::computeABADerivatives(m, d.data, Q, V, T);
  Eigen::Map<Vec>(a, nv) = d.data.ddq;
  auto& Minv = d.data.Minv;  // pinocchio fills only the upper triangle
  Minv.triangularView<Eigen::StrictlyLower>() = Minv.transpose().triangularView<Eigen::StrictlyLower>();
  da_dq = d.data.ddq_dq;
  if ((nc > 0 && f) || d.bw_on) da_dq.noalias() += Minv * d.dtau_dq;
  da_dv = d.data.ddq_dv;
  da_du = Minv.rightCols(nu);
  if (nc > 0)
    da_df.noalias() = Minv * d.Jall.transpose();
  else
    da_df.resize(nv, 0);
}

void FloatingPlant::set_base_wrench(Data& d, const double* w) const {
  d.bw_on = false;
  d.bw_f.setZero();
  d.bw_t.setZero();
  if (!w) return;
  check_finite(w, 6, "base_wrench");
  for (int i = 0; i < 6; ++i) d.bw_on = d.bw_on || w[i] != 0.0;
  if (!d.bw_on) return;
  d.bw_f = V3(w);
  d.bw_t = V3(w + 3);
}

void FloatingPlant::base_wrench(const Data& d, double* w) {
  Eigen::Map<V3> F(w), T(w + 3);
  F = d.bw_f;
  T = d.bw_t;
}

void FloatingPlant::check_integrator(Integrator integ) {
  if (integ != Integrator::kSemiImplicit && integ != Integrator::kEuler)
    throw std::invalid_argument("integrator: the floating base steps with semi_implicit or euler "
                                "(rk4 is not implemented on the manifold)");
}

void FloatingPlant::step(Data& d, const double* x, const double* u, const double* f, double dt, double* xn,
                         Integrator integ) const {
  check_integrator(integ);
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv;
  Eigen::Map<const Vec> V(x + nq, nv);
  forward_dynamics(d, x, x + nq, u, f, d.v1.data());  // a
  if (integ == Integrator::kEuler)
    d.dq = dt * V + (0.5 * dt * dt) * d.v1;
  d.v1 = V + dt * d.v1;
  if (integ == Integrator::kSemiImplicit) d.dq = dt * d.v1;
  Eigen::Map<Vec>(xn + nq, nv) = d.v1;
  const Vec Q = Eigen::Map<const Vec>(x, nq);
  Eigen::Map<Vec>(xn, nq) = pinocchio::integrate(m, Q, d.dq);
}

void FloatingPlant::step_derivatives(Data& d, const double* x, const double* u, const double* f, double dt,
                                     double* xn, Mat& A, Mat& Bu, Mat& Bf, Integrator integ) const {
  check_integrator(integ);
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv, nu = nv - 6, nf = 6 * nc();
  const Vec Q = Eigen::Map<const Vec>(x, nq);
  Eigen::Map<const Vec> V(x + nq, nv);
  forward_dynamics_derivatives(d, x, x + nq, u, f, d.v1.data(), d.da_dq, d.da_dv, d.da_du, d.da_df);
  const bool euler = integ == Integrator::kEuler;
  if (euler) d.dq = dt * V + (0.5 * dt * dt) * d.v1;
  d.v1 = V + dt * d.v1;
  if (!euler) d.dq = dt * d.v1;
  Eigen::Map<Vec>(xn + nq, nv) = d.v1;
  Eigen::Map<Vec>(xn, nq) = pinocchio::integrate(m, Q, d.dq);
  d.Dq0.setZero();  // pinocchio writes only the joints' own blocks
  d.Dq1.setZero();
  pinocchio::dIntegrate(m, Q, d.dq, d.Dq0, pinocchio::ARG0);
  pinocchio::dIntegrate(m, Q, d.dq, d.Dq1, pinocchio::ARG1);
  // v' = v + dt a: dv'/d(dq, dv) = [dt da_dq, I + dt da_dv], dv'/du = dt da_du.
  // q' = integrate(q, s): dq'/d* = D0 [for dq] + D1 ds/d*, with
  //   semi-implicit s = dt v':            ds/d* = dt dv'/d*;
  //   euler s = dt v + dt^2/2 a:          ds/d* = dt [0, I] + dt^2/2 da/d*.
  A.resize(2 * nv, 2 * nv);
  auto dv1_dq = A.block(nv, 0, nv, nv);
  auto dv1_dv = A.block(nv, nv, nv, nv);
  dv1_dq = dt * d.da_dq;
  dv1_dv = dt * d.da_dv;
  dv1_dv.diagonal().array() += 1.0;
  Bu.resize(2 * nv, nu);
  Bu.bottomRows(nv) = dt * d.da_du;
  Bf.resize(2 * nv, nf);
  Bf.bottomRows(nv) = dt * d.da_df;
  A.block(0, 0, nv, nv) = d.Dq0;
  if (!euler) {
    A.block(0, 0, nv, nv).noalias() += dt * (d.Dq1 * dv1_dq);
    A.block(0, nv, nv, nv).noalias() = dt * (d.Dq1 * dv1_dv);
    Bu.topRows(nv).noalias() = dt * (d.Dq1 * Bu.bottomRows(nv));
    if (nf > 0) Bf.topRows(nv).noalias() = dt * (d.Dq1 * Bf.bottomRows(nv));
  } else {
    const double h2 = 0.5 * dt * dt;
    A.block(0, 0, nv, nv).noalias() += h2 * (d.Dq1 * d.da_dq);
    A.block(0, nv, nv, nv) = dt * d.Dq1;
    A.block(0, nv, nv, nv).noalias() += h2 * (d.Dq1 * d.da_dv);
    Bu.topRows(nv).noalias() = h2 * (d.Dq1 * d.da_du);
    if (nf > 0) Bf.topRows(nv).noalias() = h2 * (d.Dq1 * d.da_df);
  }
}

double FloatingPlant::state_cost(const double* x, const double* x_ref, const double* w, double* grad,
                                 Mat* hess) const {
  const auto& m = impl_->model;
  const int nq = m.nq, nv = m.nv;
  Vec e(2 * nv);
  difference(x_ref, x, e.data());
  Eigen::Map<const Vec> W(w, 2 * nv);
  const double cost = 0.5 * e.dot(W.cwiseProduct(e));
  if (!grad && !hess) return cost;
  // d e / d dx: dDifference(q_ref, q) with respect to q (ARG1) on the configuration block,
  // the identity on the velocity block.
  Mat Dq = Mat::Zero(nv, nv);  // pinocchio writes only the joints' own blocks
  const Vec q_ref = Eigen::Map<const Vec>(x_ref, nq), q = Eigen::Map<const Vec>(x, nq);
  pinocchio::dDifference(m, q_ref, q, Dq, pinocchio::ARG1);
  const Vec We = W.cwiseProduct(e);
  if (grad) {
    Eigen::Map<Vec> g(grad, 2 * nv);
    g.head(nv).noalias() = Dq.transpose() * We.head(nv);
    g.tail(nv) = We.tail(nv);
  }
  if (hess) {
    hess->setZero(2 * nv, 2 * nv);
    hess->topLeftCorner(nv, nv).noalias() = Dq.transpose() * W.head(nv).asDiagonal() * Dq;
    hess->bottomRightCorner(nv, nv).diagonal() = W.tail(nv);
  }
  return cost;
}

}  // namespace gato
