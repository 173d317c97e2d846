// Data and entry points of the lean articulated-body algorithm (the algorithm
// itself: src/lean_aba.hpp). Included by the plant, which fills the model from
// pinocchio, and by the solver, which calls the multi-lane kernels; neither
// sees the algorithm, so the pinocchio translation units do not recompile
// when it changes.
//
// The model is stored in a canonical form: every joint frame is rotated (about
// the joint origin) so that the joint axis is +z; the body inertias, child
// joint placements, the EE point and the external forces are expressed in
// these rotated frames. The rotation changes neither qdd nor any world-frame
// result.
#pragma once

#include <cstddef>
#include <vector>


namespace gato {
namespace lean {

/// Raw view of a Model (what the kernels read). Row-major 3x3 matrices.
template <typename S>
struct View {
  int n;                            // bodies = joints = nv
  const int* parent;                // parent body, -1 = the universe
  const int* idx;                   // velocity (= configuration) index of the joint
  const unsigned char* prismatic;   // 0 revolute about z, 1 prismatic along z
  const S* Rt;                      // fixed tree placement in the parent frame (9 per body)
  const S* pt;                      // (3 per body)
  const S* mass;                    // body inertia [[m I, B0], [B0', C0]] (linear-angular)
  const S* B0;                      // (9 per body)
  const S* C0;                      // (9 per body)
  const S* armature;
  const S* Rf;                      // pinocchio joint frame -> canonical frame (9 per body)
  const unsigned char* rotated;     // Rf != I
  const int* last;                  // last body of the subtree of each body (subtrees are
                                    // contiguous: pinocchio numbers the joints depth-first)
  const S* com;                     // centre of mass in the canonical frame (3 per body)
  const S* Icom;                    // rotational inertia about it, canonical axes (9 per body)
  S g[3];                           // linear acceleration of the universe (-gravity)
  int ee_body;                      // body of the EE frame (-1: fixed to the universe)
  S ee_p[3];                        // EE origin in that body's canonical frame (or world)
  // EE frame axes in that body's canonical frame (or world), row-major: R_ee = oR_body ee_R.
  // Model::view() gives the identity (the plant does not store the frame's rotation); a
  // solver with an orientation term sets its copy from Plant::ee_rotation
  // (BatchSolverImpl::calibrate_ee_rotation).
  S ee_R[9];
};

/// Canonical model (owns the arrays of a View).
template <typename S>
struct Model {
  int n = 0;
  std::vector<int> parent, idx, last;
  std::vector<unsigned char> prismatic, rotated;
  std::vector<S> Rt, pt, mass, B0, C0, armature, Rf, com, Icom;
  S g[3] = {0, 0, 0};
  int ee_body = -1;
  S ee_p[3] = {0, 0, 0};

  View<S> view() const {
    return View<S>{n, parent.data(), idx.data(), prismatic.data(), Rt.data(), pt.data(),
                   mass.data(), B0.data(), C0.data(), armature.data(), Rf.data(), rotated.data(),
                   last.data(), com.data(), Icom.data(), {g[0], g[1], g[2]}, ee_body, {ee_p[0], ee_p[1], ee_p[2]},
                   {1, 0, 0, 0, 1, 0, 0, 0, 1}};
  }
};

/// Scratch of the kernels: 64-byte aligned bytes, enough for any lane count.
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(std::size_t bytes) : buf_(bytes / sizeof(double) + 16) {}
  void* data() {
    auto p = reinterpret_cast<std::size_t>(buf_.data());
    return reinterpret_cast<void*>((p + 63) & ~std::size_t(63));
  }

 private:
  std::vector<double> buf_;
};

/// Kernels over W lanes (W independent evaluations at once; W = 1 is the
/// scalar algorithm). Lane-minor arrays: element i of lane l is a[i * W + l].
template <typename S>
struct Kernels {  // an aggregate without initializers: nothing inline to emit per ISA
  int W;
  std::size_t scratch_bytes;  // for a Scratch, given the model size (see kernels())
  /// qdd = FD(q, qd, tau, fext); ee (nullable) = the EE world position.
  /// fext: nullptr or 6 numbers per body (pinocchio joint-local frame,
  /// [angular; linear]), the same for every lane.
  void (*aba)(const View<S>&, void* scratch, const S* q, const S* qd, const S* tau, const S* fext,
              S* qdd, S* ee);
  /// The EE world position from forward kinematics.
  void (*ee)(const View<S>&, void* scratch, const S* q, S* ee);
  /// One integrator step x+ = f(x, u) (docs/solver_method.md, "Dynamics") and
  /// the EE position at x (nullable); R (nullable, only with ee): the EE world
  /// rotation at x (world <- EE, 3 x 3 row-major per lane), from the same pass.
  /// integ: gato::Integrator as int.
  void (*step)(const View<S>&, void* scratch, int integ, S h, const S* x, const S* u,
               const S* fext, S* xn, S* ee, S* R);
  /// Forward kinematics only: the EE world position ee (3, nullable), rotation R
  /// (world <- EE, 3 x 3 row-major) and, nullable, the world angular Jacobian Jw
  /// (3 x n row-major, d omega_world / d qd) per lane. The orientation term's kinematics
  /// (docs/solver_method.md, "Orientation cost").
  void (*pose)(const View<S>&, void* scratch, const S* q, S* ee, S* R, S* Jw);
  /// qdd = FD(q, qd, tau, fext) and its derivatives (src/lean_derivs.hpp):
  /// dq = dqdd/dq, dv = dqdd/dqd, Minv = dqdd/dtau (n x n, row-major per
  /// lane); ee / J (nullable): the EE world position and its position
  /// Jacobian in world axes (3 x n, row-major per lane). Here fext is per
  /// lane: nullptr or 6 per body per lane, lane-minor like everything else.
  void (*derivs)(const View<S>&, void* scratch, const S* q, const S* qd, const S* tau,
                 const S* fext, S* qdd, S* dq, S* dv, S* Minv, S* ee, S* J);
};

/// Kernels of W lanes: W = 1, or the widest multi-lane set this CPU runs
/// (AVX2 + FMA where available, else SSE2: 4 or 2 doubles, 8 or 4 floats)
/// when W = 0. scratch_bytes is for a model of n bodies.
template <typename S>
Kernels<S> kernels(int W, int n);

}  // namespace lean
}  // namespace gato
