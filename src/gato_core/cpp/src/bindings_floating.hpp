// gato._core.FloatingPlant: the floating-base plant (gato/floating.hpp) for Python.
// Included once, by bindings.cpp (no translation unit of its own: the bindings build
// twice, _core and _core_avx2). Every array is checked here (shape, NaN / inf, unit
// quaternion, dt > 0) and a bad one raises ValueError naming the field.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <sstream>
#include <string>

#include "gato/floating.hpp"

namespace gato {
namespace floating_py {
// Internal linkage: this header is compiled into both _core and _core_avx2, and pybind11
// refuses a second registration of one C++ type ("FloatingPlant is already registered")
// when a process loads both; types of an anonymous namespace are distinct per module.
namespace {

namespace py = pybind11;
using In = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Out = py::array_t<double>;

/// The shape as Python writes it: (3,), (4, 6).
inline std::string shape_str(const py::array& a) {
  std::string s = "(";
  for (long i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

/// A 1-D float64 array of n finite numbers (ValueError naming `name` otherwise).
inline In vec(const py::object& o, long n, const char* name) {
  In a;
  try {
    a = py::cast<In>(o);
  } catch (const py::cast_error&) {
    throw py::value_error(std::string(name) + ": expected an array of numbers");
  } catch (const py::error_already_set&) {  // NumPy's conversion failed (e.g. text)
    throw py::value_error(std::string(name) + ": expected an array of numbers");
  }
  if (a.ndim() != 1 || a.shape(0) != n)
    throw py::value_error(std::string(name) + ": expected shape (" + std::to_string(n) + ",), got " +
                          shape_str(a));
  FloatingPlant::check_finite(a.data(), n, name);
  return a;
}

/// A copy of a column-major Eigen matrix as a C-ordered (rows, cols) array.
inline Out to_array(const Eigen::MatrixXd& M) {
  Out a({long(M.rows()), long(M.cols())});
  Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      a.mutable_data(), M.rows(), M.cols()) = M;
  return a;
}

struct PyFloating {
  std::unique_ptr<FloatingPlant> plant;
  FloatingPlant::DataPtr data;
  Eigen::MatrixXd A, B, C, D;  // scratch for the outputs

  PyFloating(const std::string& urdf_path, const std::vector<std::string>& contact_frames)
      : plant(std::make_unique<FloatingPlant>(urdf_path, contact_frames)), data(plant->make_data()) {}

  In x_(const py::object& o, const char* name) const {
    In a = vec(o, plant->nx(), name);
    plant->check_x(a.data(), name);
    return a;
  }
  In q_(const py::object& o, const char* name) const {
    In a = vec(o, plant->nq(), name);
    plant->check_q(a.data(), name);
    return a;
  }
  /// None (no wrenches), or (nc, 6) / (6 nc,) finite numbers.
  const double* f_(const py::object& o, In& keep) const {
    if (o.is_none()) return nullptr;
    const long nc = plant->nc();
    try {
      keep = py::cast<In>(o);
    } catch (const py::cast_error&) {
      throw py::value_error("f: expected an array of numbers");
    } catch (const py::error_already_set&) {  // NumPy's conversion failed (e.g. text)
      throw py::value_error("f: expected an array of numbers");
    }
    const bool ok = (keep.ndim() == 1 && keep.shape(0) == 6 * nc) ||
                    (keep.ndim() == 2 && keep.shape(0) == nc && keep.shape(1) == 6);
    if (!ok)
      throw py::value_error("f: expected shape (" + std::to_string(nc) + ", 6) or (" + std::to_string(6 * nc) +
                            ",), got " + shape_str(keep));
    FloatingPlant::check_finite(keep.data(), 6 * nc, "f");
    return keep.data();
  }
  static double dt_(const py::object& o) {
    if (py::isinstance<py::bool_>(o)) throw py::value_error("dt: expected a number of seconds, got a bool");
    double dt;
    try {
      dt = py::cast<double>(o);
    } catch (const py::cast_error&) {
      throw py::value_error("dt: expected a finite positive number of seconds");
    }
    FloatingPlant::check_dt(dt);
    return dt;
  }

  /// "semi_implicit" (default), "euler", or a gato._core.Integrator; rk4 is refused.
  static Integrator integ_(const py::object& o) {
    Integrator integ;
    if (py::isinstance<py::str>(o)) {
      const std::string n = py::cast<std::string>(o);
      if (n == "semi_implicit") integ = Integrator::kSemiImplicit;
      else if (n == "euler") integ = Integrator::kEuler;
      else if (n == "rk4") integ = Integrator::kRk4;
      else throw py::value_error("integrator: expected 'semi_implicit' or 'euler', got '" + n + "'");
    } else {
      try {
        integ = py::cast<Integrator>(o);
      } catch (const py::cast_error&) {
        throw py::value_error("integrator: expected 'semi_implicit' or 'euler'");
      }
    }
    FloatingPlant::check_integrator(integ);
    return integ;
  }

  Out difference(const py::object& x0, const py::object& x1) {
    In a = x_(x0, "x0"), b = x_(x1, "x1");
    Out dx(plant->ndx());
    plant->difference(a.data(), b.data(), dx.mutable_data());
    return dx;
  }
  Out integrate(const py::object& x, const py::object& dx) {
    In a = x_(x, "x"), b = vec(dx, plant->ndx(), "dx");
    Out xo(plant->nx());
    plant->integrate(a.data(), b.data(), xo.mutable_data());
    return xo;
  }
  py::tuple difference_jacobians(const py::object& x0, const py::object& x1) {
    In a = x_(x0, "x0"), b = x_(x1, "x1");
    plant->difference_jacobians(a.data(), b.data(), A, B);
    return py::make_tuple(to_array(A), to_array(B));
  }
  Out contact_jacobians(const py::object& q) {
    In a = q_(q, "q");
    plant->contact_jacobians(*data, a.data(), A);
    Out J = to_array(A);
    J.resize({long(plant->nc()), 6L, long(plant->nv())});
    return J;
  }
  Out aba(const py::object& q, const py::object& v, const py::object& u, const py::object& f) {
    In Q = q_(q, "q"), V = vec(v, plant->nv(), "v"), U = vec(u, plant->nu(), "u"), keep;
    const double* fp = f_(f, keep);
    Out a(plant->nv());
    plant->forward_dynamics(*data, Q.data(), V.data(), U.data(), fp, a.mutable_data());
    return a;
  }
  py::tuple aba_derivatives(const py::object& q, const py::object& v, const py::object& u, const py::object& f) {
    In Q = q_(q, "q"), V = vec(v, plant->nv(), "v"), U = vec(u, plant->nu(), "u"), keep;
    const double* fp = f_(f, keep);
    Out a(plant->nv());
    plant->forward_dynamics_derivatives(*data, Q.data(), V.data(), U.data(), fp, a.mutable_data(), A, B, C, D);
    return py::make_tuple(a, to_array(A), to_array(B), to_array(C), to_array(D));
  }
  Out step(const py::object& x, const py::object& u, const py::object& f, const py::object& dt,
           const py::object& integrator) {
    In X = x_(x, "x"), U = vec(u, plant->nu(), "u"), keep;
    const double* fp = f_(f, keep);
    const double h = dt_(dt);
    const Integrator integ = integ_(integrator);
    Out xn(plant->nx());
    plant->step(*data, X.data(), U.data(), fp, h, xn.mutable_data(), integ);
    return xn;
  }
  py::tuple linearize(const py::object& x, const py::object& u, const py::object& f, const py::object& dt,
                      const py::object& integrator) {
    In X = x_(x, "x"), U = vec(u, plant->nu(), "u"), keep;
    const double* fp = f_(f, keep);
    const double h = dt_(dt);
    const Integrator integ = integ_(integrator);
    Out xn(plant->nx());
    plant->step_derivatives(*data, X.data(), U.data(), fp, h, xn.mutable_data(), A, B, C, integ);
    return py::make_tuple(xn, to_array(A), to_array(B), to_array(C));
  }
  py::tuple state_cost(const py::object& x, const py::object& x_ref, const py::object& w) {
    In X = x_(x, "x"), R = x_(x_ref, "x_ref"), W = vec(w, plant->ndx(), "w");
    for (long i = 0; i < plant->ndx(); ++i)
      if (W.data()[i] < 0) throw py::value_error("w: weights must be >= 0 (entry " + std::to_string(i) + ")");
    Out g(plant->ndx());
    const double c = plant->state_cost(X.data(), R.data(), W.data(), g.mutable_data(), &A);
    return py::make_tuple(c, g, to_array(A));
  }
};

inline void bind_floating(py::module_& m) {
  py::class_<PyFloating>(m, "FloatingPlant", R"doc(
Floating-base (free-flyer) plant of the C++ core, double precision (issue 34).

FloatingPlant(urdf_path, contact_frames=()) loads the URDF under a free-flyer root
(pinocchio's model in this first version: aba, computeABADerivatives, integrate,
difference, dIntegrate / dDifference). ``contact_frames`` names the frames that take
contact wrenches, in the order of ``f``'s rows.

Shapes and units (n actuated joints, nc contact frames):
  q   (nq = 7 + n,): base position in the world (m), base quaternion (x, y, z, w), joints (rad)
  v   (nv = 6 + n,): base linear (m/s) and angular (rad/s) velocity in the base frame, joints (rad/s)
  x   (nx = nq + nv,) = (q, v);  dx (ndx = 2 nv,) a tangent vector (dq, dv)
  u   (n,): joint torques (N m); the generalized force is (0_6, u)
  f   (nc, 6) or (6 nc,) or None: per contact frame a world-aligned wrench at the frame
      origin, (force N, torque N m); None = no wrenches
  dt  step (s), finite and > 0
Dynamics a = M^-1 ((0_6, u) + sum_c J_c^T f_c - h) (J_c LOCAL_WORLD_ALIGNED).
integrator: "semi_implicit" (default, the reference's): v' = v + dt a, q' = integrate(q, dt v');
"euler": v' = v + dt a, q' = integrate(q, dt v + dt^2/2 a); rk4 is not implemented here.
x1 (-) x0 = (difference(q0, q1), v1 - v0); x (+) dx = (integrate(q, dq), v + dv).
Jacobians are in the tangent space: input perturbation x (+) dx, output x'_pert (-) x'.

Bad input raises ValueError naming the field: wrong shape, NaN / inf, a base quaternion
whose norm is more than 1e-6 from 1, dt <= 0, an unknown contact frame.
One instance owns one scratch: not for concurrent use from several threads.
)doc")
      .def(py::init<const std::string&, const std::vector<std::string>&>(), py::arg("urdf_path"),
           py::arg("contact_frames") = std::vector<std::string>())
      .def_property_readonly("nq", [](const PyFloating& p) { return p.plant->nq(); })
      .def_property_readonly("nv", [](const PyFloating& p) { return p.plant->nv(); })
      .def_property_readonly("nu", [](const PyFloating& p) { return p.plant->nu(); })
      .def_property_readonly("nc", [](const PyFloating& p) { return p.plant->nc(); })
      .def_property_readonly("nx", [](const PyFloating& p) { return p.plant->nx(); })
      .def_property_readonly("ndx", [](const PyFloating& p) { return p.plant->ndx(); })
      .def_property_readonly("contact_frames", [](const PyFloating& p) { return p.plant->contact_frames(); })
      .def_property_readonly("joint_names", [](const PyFloating& p) { return p.plant->joint_names(); },
                             "The actuated joints, in u's order.")
      .def_property_readonly("total_mass", [](const PyFloating& p) { return p.plant->total_mass(); },
                             "kg")
      .def("difference", &PyFloating::difference, py::arg("x0"), py::arg("x1"),
           "x1 (-) x0, shape (ndx,).")
      .def("integrate", &PyFloating::integrate, py::arg("x"), py::arg("dx"), "x (+) dx, shape (nx,).")
      .def("difference_jacobians", &PyFloating::difference_jacobians, py::arg("x0"), py::arg("x1"),
           "(D0, D1): d(x1 (-) x0) / d dx0 and / d dx1, each (ndx, ndx).")
      .def("contact_jacobians", &PyFloating::contact_jacobians, py::arg("q"),
           "J_c per contact frame, shape (nc, 6, nv), LOCAL_WORLD_ALIGNED, rows (linear; angular).")
      .def("aba", &PyFloating::aba, py::arg("q"), py::arg("v"), py::arg("u"), py::arg("f") = py::none(),
           "Acceleration a, shape (nv,) (m/s^2, rad/s^2).")
      .def("aba_derivatives", &PyFloating::aba_derivatives, py::arg("q"), py::arg("v"), py::arg("u"),
           py::arg("f") = py::none(),
           "(a, da_dq, da_dv, da_du, da_df): (nv,), (nv, nv) [tangent of q], (nv, nv), (nv, n), (nv, 6 nc).")
      .def("step", &PyFloating::step, py::arg("x"), py::arg("u"), py::arg("f") = py::none(),
           py::arg("dt") = 0.01, py::arg("integrator") = "semi_implicit", "One step: x', shape (nx,).")
      .def("linearize", &PyFloating::linearize, py::arg("x"), py::arg("u"), py::arg("f") = py::none(),
           py::arg("dt") = 0.01, py::arg("integrator") = "semi_implicit",
           "(x', A, B_u, B_f): the step and its tangent Jacobians, (nx,), (ndx, ndx), (ndx, n), (ndx, 6 nc).")
      .def("step_jacobians",
           [](PyFloating& p, const py::object& x, const py::object& u, const py::object& f, const py::object& dt,
              const py::object& integrator) {
             py::tuple t = p.linearize(x, u, f, dt, integrator);
             return py::make_tuple(t[1], t[2], t[3]);
           },
           py::arg("x"), py::arg("u"), py::arg("f") = py::none(), py::arg("dt") = 0.01,
           py::arg("integrator") = "semi_implicit", "(A, B_u, B_f) of step (as linearize, without x').")
      .def("state_cost", &PyFloating::state_cost, py::arg("x"), py::arg("x_ref"), py::arg("w"),
           "(cost, grad, hess): e = x (-) x_ref (ndx,), cost 1/2 e^T diag(w) e, its gradient in the tangent "
           "of x (ndx,) and Gauss-Newton Hessian D^T diag(w) D (ndx, ndx), D = de/ddx. w (ndx,) >= 0, "
           "units 1/(unit of each tangent entry)^2.");
}

}  // namespace
}  // namespace floating_py
}  // namespace gato
