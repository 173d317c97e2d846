// DevModel (gato_cuda/rbd.hpp) from a gato::Plant: the canonical model the CPU core
// already extracts from the URDF (Plant::lean_model, gato/lean_model.hpp) and the URDF
// limits, copied into the fixed-size struct the kernels take by value. Host only
// (Eigen through plant.hpp, no pinocchio).
#pragma once

#include <stdexcept>
#include <string>

#include "gato/lean_model.hpp"
#include "gato/plant.hpp"
#include "gato_cuda/rbd.hpp"

namespace gato {
namespace cuda {

template <typename S>
DevModel<S> export_model(const Plant<S>& plant) {
  const lean::Model<S>* L = plant.lean_model();
  if (!L) throw std::invalid_argument("model_path: the CUDA backend needs 1-DoF revolute / prismatic joints only");
  if (L->n > kMaxBodies || plant.nv() != L->n)
    throw std::invalid_argument("model_path: the CUDA backend takes at most " + std::to_string(kMaxBodies) +
                                " joints, this model has " + std::to_string(L->n));
  DevModel<S> m;
  m.n = L->n;
  for (int i = 0; i < m.n; ++i) {
    m.parent[i] = L->parent[i];
    m.idx[i] = L->idx[i];
    if (m.parent[i] >= i) throw std::invalid_argument("model_path: joints are not numbered parent-first");
    m.prismatic[i] = L->prismatic[i];
    m.rotated[i] = L->rotated[i];
    m.mass[i] = L->mass[i];
    m.armature[i] = L->armature[i];
    for (int k = 0; k < 9; ++k) {
      m.Rt[9 * i + k] = L->Rt[9 * i + k];
      m.Icom[9 * i + k] = L->Icom[9 * i + k];
      m.Rf[9 * i + k] = L->Rf[9 * i + k];
    }
    for (int k = 0; k < 3; ++k) {
      m.pt[3 * i + k] = L->pt[3 * i + k];
      m.com[3 * i + k] = L->com[3 * i + k];
    }
  }
  for (int k = 0; k < 3; ++k) {
    m.g[k] = L->g[k];
    m.ee_p[k] = L->ee_p[k];
  }
  m.ee_body = L->ee_body;
  // ee_R (the EE frame's axes in its body's canonical frame, which the lean model does not
  // store): R_body(0)' R_ee(0), R_body from kinematics() with ee_R = I, R_ee from
  // Plant::ee_rotation (pinocchio, column-major); as the CPU solver's calibrate_ee_rotation.
  {
    S q0[kMaxBodies] = {}, Rb[9];
    WBody<S> w[kMaxBodies];
    kinematics(m, q0, w);
    ee_rotation(m, w, Rb);
    auto ws = plant.make_workspace();
    S Re[9];
    plant.ee_rotation(*ws, q0, Re);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) m.ee_R[3 * r + c] = Rb[r] * Re[3 * c] + Rb[3 + r] * Re[3 * c + 1] + Rb[6 + r] * Re[3 * c + 2];
  }
  const auto& lim = plant.limits();
  for (int j = 0; j < m.n; ++j) {
    m.q_lo[j] = lim.q_lo[j];
    m.q_hi[j] = lim.q_hi[j];
    m.qd_max[j] = lim.qd_max[j];
    m.u_max[j] = lim.u_max[j];
  }
  return m;
}

}  // namespace cuda
}  // namespace gato
