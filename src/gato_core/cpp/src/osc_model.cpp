// OscKinematics: the model-based inputs of the operational-space controller
// (tool pose, world twist, world Jacobian, mass matrix, gravity) from URDFs.
// The only OSC translation unit that includes pinocchio (~75 s, ~3 GB).
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/parsers/urdf.hpp>

#include <Eigen/Geometry>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "gato/osc.hpp"

namespace gato {

namespace {

struct RobotSlot {
  const pinocchio::Model* model = nullptr;
  pinocchio::FrameIndex frame = 0;
  std::unique_ptr<pinocchio::Data> data;
  pinocchio::Data::Matrix6x J;
};

}  // namespace

struct OscKinematics::Impl {
  std::map<std::string, std::unique_ptr<pinocchio::Model>> models;  // by URDF path
  std::vector<RobotSlot> robots;
  std::vector<int> dofs, offset;
  int max_n = 0;
};

OscKinematics::OscKinematics(const std::vector<std::string>& urdf_paths,
                             const std::vector<std::string>& tool_frames)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  if (urdf_paths.empty()) throw std::invalid_argument("urdf_paths: at least one robot is required");
  if (tool_frames.size() != urdf_paths.size())
    throw std::invalid_argument("tool_frames: expected one per robot (" + std::to_string(urdf_paths.size()) +
                                "), got " + std::to_string(tool_frames.size()));
  int total = 0;
  for (size_t r = 0; r < urdf_paths.size(); ++r) {
    const std::string& path = urdf_paths[r];
    auto it = s.models.find(path);
    if (it == s.models.end()) {
      if (!std::filesystem::is_regular_file(path))
        throw std::invalid_argument("urdf_paths: file not found: " + path);
      auto m = std::make_unique<pinocchio::Model>();
      pinocchio::urdf::buildModel(path, *m);
      if (m->nq != m->nv)
        throw std::invalid_argument("urdf_paths: " + path + " has a joint with nq != nv (floating base or "
                                    "spherical joint); the OSC controls fixed-base 1-DoF joints");
      it = s.models.emplace(path, std::move(m)).first;
    }
    const pinocchio::Model& m = *it->second;
    if (!m.existFrame(tool_frames[r]))
      throw std::invalid_argument("tool_frames: robot " + std::to_string(r) + ": frame '" + tool_frames[r] +
                                  "' is not in " + path);
    RobotSlot slot;
    slot.model = &m;
    slot.frame = m.getFrameId(tool_frames[r]);
    slot.data = std::make_unique<pinocchio::Data>(m);
    slot.J = pinocchio::Data::Matrix6x::Zero(6, m.nv);
    s.robots.push_back(std::move(slot));
    s.dofs.push_back(m.nv);
    s.offset.push_back(total);
    total += m.nv;
    s.max_n = std::max(s.max_n, int(m.nv));
  }
}

OscKinematics::~OscKinematics() = default;
int OscKinematics::robots() const { return int(impl_->robots.size()); }
const std::vector<int>& OscKinematics::dofs() const { return impl_->dofs; }
int OscKinematics::max_dofs() const { return impl_->max_n; }

void OscKinematics::compute(const double* joint_q, const double* joint_qd, double* pose, double* twist,
                            double* jacobian, double* mass_matrix, double* gravity) {
  Impl& s = *impl_;
  const int mx = s.max_n;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
  for (size_t r = 0; r < s.robots.size(); ++r) {
    RobotSlot& rs = s.robots[r];
    const pinocchio::Model& m = *rs.model;
    pinocchio::Data& d = *rs.data;
    const int n = m.nv, off = s.offset[r];
    // Ref: the pin wheel's compiled algorithms (plant_pinocchio.cpp), not instantiated here.
    const Eigen::Ref<const Eigen::VectorXd> q = Eigen::Map<const Eigen::VectorXd>(joint_q + off, n),
                                           v = Eigen::Map<const Eigen::VectorXd>(joint_qd + off, n);
    pinocchio::forwardKinematics(m, d, q, v);
    pinocchio::computeJointJacobians(m, d);  // uses the placements just computed
    pinocchio::updateFramePlacement(m, d, rs.frame);
    const pinocchio::SE3& T = d.oMf[rs.frame];
    const Eigen::Quaterniond quat(T.rotation());
    double* p = pose + 7 * r;
    p[0] = T.translation()[0], p[1] = T.translation()[1], p[2] = T.translation()[2];
    p[3] = quat.x(), p[4] = quat.y(), p[5] = quat.z(), p[6] = quat.w();
    const pinocchio::Motion vel = pinocchio::getFrameVelocity(m, d, rs.frame, pinocchio::LOCAL_WORLD_ALIGNED);
    Eigen::Map<Eigen::Matrix<double, 6, 1>>(twist + 6 * r) << vel.linear(), vel.angular();
    rs.J.setZero();
    pinocchio::getFrameJacobian(m, d, rs.frame, pinocchio::LOCAL_WORLD_ALIGNED, rs.J);
    RowMap Jout(jacobian + size_t(r) * 6 * mx, 6, mx, Eigen::OuterStride<>(mx));
    Jout.leftCols(n) = rs.J;
    if (n < mx) Jout.rightCols(mx - n).setZero();
    if (mass_matrix) {
      pinocchio::crba(m, d, q);
      d.M.triangularView<Eigen::StrictlyLower>() = d.M.transpose().triangularView<Eigen::StrictlyLower>();
      RowMap Mout(mass_matrix + size_t(r) * mx * mx, mx, mx, Eigen::OuterStride<>(mx));
      Mout.setZero();
      Mout.topLeftCorner(n, n) = d.M;
    }
    if (gravity) {
      pinocchio::computeGeneralizedGravity(m, d, q);
      Eigen::Map<Eigen::VectorXd>(gravity + off, n) = d.g;
    }
  }
}

}  // namespace gato
