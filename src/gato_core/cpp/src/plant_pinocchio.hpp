// The pinocchio side of gato::Plant<S>, always in double. Plant<float> and
// Plant<double> both call it (plant_impl.hpp converts at the boundary), so
// pinocchio is compiled once, for double, in plant_pinocchio.cpp: a float
// instantiation of its algorithms took ~360 s and ~6.8 GB of one compile.
// No pinocchio include here: the Plant TUs that include this stay light.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <string>
#include <vector>

#include "gato/lean_model.hpp"

namespace gato {
namespace detail {

/// Per-thread pinocchio scratch (Data, external forces, the 6 x nv Jacobian).
struct PinoData;
struct PinoDataDeleter {
  void operator()(PinoData* d) const;
};
using PinoDataPtr = std::unique_ptr<PinoData, PinoDataDeleter>;

/// A fixed-base URDF model in pinocchio (double). Arrays are raw pointers in
/// SI units; fext is 6 per moving body, [angular; linear] joint-local.
class PinoModel {
 public:
  /// Throws std::invalid_argument naming model_path / ee_frame (see Plant).
  PinoModel(const std::string& urdf_path, const std::string& ee_frame);
  ~PinoModel();
  PinoModel(const PinoModel&) = delete;
  PinoModel& operator=(const PinoModel&) = delete;

  int nq() const;
  int nv() const;
  int njoints() const;  // pinocchio joints, the universe included
  int nframes() const;
  int ee_frame() const;
  int ee_body() const;  // 0-based over moving bodies
  /// The EE body's inertia: its URDF inertia plus a rigid payload of mass kg (0: none) with
  /// its centre com (3) m and rotational inertia about it Icom (3 x 3 row-major) kg m^2, both
  /// in EE frame coordinates (see Plant::set_ee_payload).
  void set_ee_payload(double mass, const double* com, const double* Icom);
  std::vector<std::string> joint_names() const;
  std::vector<std::string> frame_names() const;
  int frame_id(const std::string& name) const;  // -1 when unknown
  /// URDF limits: position box (nq), velocity and effort bounds (nv).
  void limits(Eigen::VectorXd& q_lo, Eigen::VectorXd& q_hi, Eigen::VectorXd& qd_max,
              Eigen::VectorXd& u_max) const;
  /// The lean canonical model (lean_model.hpp), or null (see Plant::lean_model).
  template <typename S>
  std::unique_ptr<lean::Model<S>> lean_model() const;

  PinoDataPtr make_data() const;
  void aba(PinoData& d, const double* q, const double* v, const double* tau, const double* fext,
           double* qdd, double* ee) const;
  void aba_derivatives(PinoData& d, const double* q, const double* v, const double* tau,
                       const double* fext, double* qdd, Eigen::MatrixXd& dq, Eigen::MatrixXd& dv,
                       Eigen::MatrixXd& Minv, double* ee, Eigen::MatrixXd* J) const;
  void frame_position(PinoData& d, const double* q, double* p, int fid) const;
  void ee_position_jacobian(PinoData& d, const double* q, double* p, Eigen::MatrixXd& J) const;
  void points_kinematics(PinoData& d, const double* q, int n, const int* frames, const double* local,
                         double* pos, double* J) const;
  void ee_rotation(PinoData& d, const double* q, double* R, Eigen::MatrixXd* Jw) const;
  void gravity(PinoData& d, const double* q, double* g, Eigen::MatrixXd* dg_dq) const;
  void rnea(PinoData& d, const double* q, const double* v, const double* qdd, const double* fext,
            double* tau) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detail
}  // namespace gato
