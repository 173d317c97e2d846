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
#include "gato/floating_sqp.hpp"

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
  Out contact_positions(const py::object& q) {
    In a = q_(q, "q");
    Out p({long(plant->nc()), 3L});
    plant->contact_kinematics(*data, a.data(), p.mutable_data(), A);
    return p;
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

/// gato._core.FloatingSQP: arrays are (knots, width) C-ordered on the Python side, which is
/// the column-major (width, knots) Eigen layout the solver holds.
struct PySQP {
  std::unique_ptr<FloatingSQP> sqp;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  PySQP(const std::string& urdf_path, const std::vector<std::string>& contact_frames, int N,
        const py::object& dt, const py::object& integrator)
      : sqp(std::make_unique<FloatingSQP>(urdf_path, contact_frames, N, PyFloating::dt_(dt),
                                          PyFloating::integ_(integrator))) {}

  /// A (rows, width) table of finite numbers, or one (width,) row broadcast when allow_one.
  Eigen::MatrixXd table(const py::object& o, long rows, long width, const char* name, bool allow_one) const {
    In a;
    try {
      a = py::cast<In>(o);
    } catch (const py::cast_error&) {
      throw py::value_error(std::string(name) + ": expected an array of numbers");
    } catch (const py::error_already_set&) {
      throw py::value_error(std::string(name) + ": expected an array of numbers");
    }
    long r;
    if (allow_one && a.ndim() == 1 && a.shape(0) == width) r = 1;
    else if (a.ndim() == 2 && a.shape(0) == rows && a.shape(1) == width) r = rows;
    else
      throw py::value_error(std::string(name) + ": expected shape (" + std::to_string(rows) + ", " +
                            std::to_string(width) + ")" + (allow_one ? " or (" + std::to_string(width) + ",)" : "") +
                            ", got " + shape_str(a));
    FloatingPlant::check_finite(a.data(), r * width, name);
    return Eigen::Map<const Eigen::MatrixXd>(a.data(), width, r);
  }
  /// A scalar broadcast to n entries, or an (n,) vector.
  Eigen::VectorXd weights(const py::object& o, long n, const char* name) const {
    if (py::isinstance<py::bool_>(o)) throw py::value_error(std::string(name) + ": expected a number, got a bool");
    if (py::isinstance<py::float_>(o) || py::isinstance<py::int_>(o))
      return Eigen::VectorXd::Constant(n, py::cast<double>(o));
    In a = vec(o, n, name);
    return Eigen::Map<const Eigen::VectorXd>(a.data(), n);
  }
  static Out cols_to_rows(const Eigen::MatrixXd& M) {  // (width, knots) -> (knots, width)
    Out a({long(M.cols()), long(M.rows())});
    std::copy(M.data(), M.data() + M.size(), a.mutable_data());
    return a;
  }
  static Out stack(const std::vector<Eigen::MatrixXd>& Ms) {
    const long r = Ms.empty() ? 0 : Ms[0].rows(), c = Ms.empty() ? 0 : Ms[0].cols();
    Out a({long(Ms.size()), r, c});
    for (size_t k = 0; k < Ms.size(); ++k)
      Eigen::Map<RowMat>(a.mutable_data() + k * r * c, r, c) = Ms[k];
    return a;
  }
  static Out stackv(const std::vector<Eigen::VectorXd>& vs) {
    Eigen::MatrixXd M(vs.empty() ? 0 : vs[0].size(), vs.size());
    for (size_t k = 0; k < vs.size(); ++k) M.col(k) = vs[k];
    return cols_to_rows(M);
  }
  In x0_(const py::object& o) const {
    In a = vec(o, sqp->nx(), "x0");
    sqp->plant().check_x(a.data(), "x0");
    return a;
  }
  Eigen::MatrixXd W_(const py::object& o) const { return table(o, sqp->N() - 1, sqp->nw(), "W", false); }
  /// The cold start (FloatingSQP::cold_start).
  Eigen::MatrixXd default_W(const double* x0) const {
    Eigen::MatrixXd X, W;
    sqp->cold_start(x0, X, W);
    return W;
  }
  Out hold_controls(const py::object& x, double damping) {
    In X = vec(x, sqp->nx(), "x");
    Out w(sqp->nw());
    sqp->hold_controls(X.data(), w.mutable_data(), damping);
    return w;
  }

  void set_state_weights(const py::object& wr, const py::object& wt) {
    const Eigen::VectorXd a = weights(wr, sqp->ndx(), "w_running");
    const Eigen::VectorXd b = wt.is_none() ? a : weights(wt, sqp->ndx(), "w_terminal");
    sqp->set_state_weights(a, b);
  }
  void set_x_ref(const py::object& o) {
    sqp->set_x_ref(table(o, sqp->N(), sqp->nx(), "x_ref", true));
  }
  void set_u_cost(const py::object& o) { sqp->set_u_cost(weights(o, sqp->nu(), "u_cost")); }
  void set_u_ref(const py::object& o) {
    const Eigen::VectorXd u = o.is_none() ? Eigen::VectorXd::Zero(sqp->nu()) : weights(o, sqp->nu(), "u_ref");
    sqp->set_u_ref(u);
  }
  void set_fc_cost(const py::object& o) { sqp->set_fc_cost(weights(o, sqp->nf(), "fc_cost")); }
  void set_fc_ref(const py::object& o) {
    Eigen::VectorXd f = Eigen::VectorXd::Zero(sqp->nf());
    if (!o.is_none()) {
      In a;
      try {
        a = py::cast<In>(o);
      } catch (const py::cast_error&) {
        throw py::value_error("fc_ref: expected an array of numbers");
      } catch (const py::error_already_set&) {
        throw py::value_error("fc_ref: expected an array of numbers");
      }
      if (a.size() != 0) {
        const long nc = sqp->plant().nc();
        const bool ok = (a.ndim() == 1 && a.shape(0) == 6 * nc) ||
                        (a.ndim() == 2 && a.shape(0) == nc && a.shape(1) == 6);
        if (!ok)
          throw py::value_error("fc_ref: expected shape (" + std::to_string(6 * nc) + ",) or (" + std::to_string(nc) +
                                ", 6), got " + shape_str(a));
        FloatingPlant::check_finite(a.data(), 6 * nc, "fc_ref");
        f = Eigen::Map<const Eigen::VectorXd>(a.data(), 6 * nc);
      }
    }
    sqp->set_fc_ref(f);
  }
  void set_contact_pos_cost(const py::object& weight, const py::object& targets) {
    if (py::isinstance<py::bool_>(weight)) throw py::value_error("contact_pos_weight: expected a number");
    double w;
    try {
      w = py::cast<double>(weight);
    } catch (const py::cast_error&) {
      throw py::value_error("contact_pos_weight: expected a number");
    }
    const long nc = sqp->plant().nc();
    In a;
    try {
      a = py::cast<In>(targets);
    } catch (const py::cast_error&) {
      throw py::value_error("contact_targets: expected an array of numbers");
    } catch (const py::error_already_set&) {
      throw py::value_error("contact_targets: expected an array of numbers");
    }
    Eigen::MatrixXd T;
    if (a.ndim() == 2 && a.shape(0) == nc && a.shape(1) == 3) {
      FloatingPlant::check_finite(a.data(), 3 * nc, "contact_targets");
      T = Eigen::Map<const Eigen::MatrixXd>(a.data(), 3 * nc, 1);
    } else {
      T = table(targets, sqp->N(), 3 * nc, "contact_targets", true);
    }
    sqp->set_contact_pos_cost(w, T);
  }


  // ---- hard rows (FloatingSQP::RowGroup; the Python layer gato.core.floating_bsqp names them)
  static Eigen::VectorXd raw(const py::object& o, const char* name) {  // +-inf allowed; C++ refuses NaN
    if (o.is_none()) return Eigen::VectorXd();
    In a;
    try {
      a = py::cast<In>(o);
    } catch (const py::error_already_set&) {
      throw py::value_error(std::string(name) + ": expected an array of numbers");
    }
    if (a.ndim() != 1) throw py::value_error(std::string(name) + ": expected a 1-D array, got " + shape_str(a));
    return Eigen::Map<const Eigen::VectorXd>(a.data(), a.shape(0));
  }
  static Eigen::MatrixXd mat2(const py::object& o, const char* name) {
    In a;
    try {
      a = py::cast<In>(o);
    } catch (const py::error_already_set&) {
      throw py::value_error(std::string(name) + ": expected an array of numbers");
    }
    if (a.ndim() != 2) throw py::value_error(std::string(name) + ": expected a 2-D array, got " + shape_str(a));
    return Eigen::Map<const RowMat>(a.data(), a.shape(0), a.shape(1));
  }
  int add_fc_rows(const py::object& C, const py::object& d, const py::object& lo, const py::object& hi, bool cone,
                  int mech, double rho, int knot_lo, int knot_hi) {
    FloatingSQP::RowGroup g;
    g.kind = FloatingSQP::RowGroup::kFc;
    g.C = mat2(C, "C");
    g.d = raw(d, "d");
    g.lo = raw(lo, "lo");
    g.hi = raw(hi, "hi");
    g.cone = cone;
    g.mech = mech;
    g.rho = rho;
    g.knot_lo = knot_lo;
    g.knot_hi = knot_hi;
    return sqp->add_row_group(std::move(g));
  }
  /// (N, 3nc) per knot or (3nc,) for all knots -> (3nc, N or 1)
  Eigen::MatrixXd targets_(const py::object& t) const {
    return table(t, sqp->N(), 3 * sqp->plant().nc(), "targets", true);
  }
  int add_contact_pos_rows(const py::object& targets, const py::object& lo, const py::object& hi, int mech,
                           double rho, int knot_lo, int knot_hi) {
    FloatingSQP::RowGroup g;
    g.kind = FloatingSQP::RowGroup::kContactPos;
    g.target = targets_(targets);
    g.lo = raw(lo, "lo");
    g.hi = raw(hi, "hi");
    g.mech = mech;
    g.rho = rho;
    g.knot_lo = knot_lo;
    g.knot_hi = knot_hi;
    return sqp->add_row_group(std::move(g));
  }
  py::tuple row_values(int g, int k, const py::object& x, const py::object& w) {
    if (g < 0 || g >= int(sqp->row_groups().size())) throw py::value_error("g: expected a row-group index");
    if (k < 0 || k >= sqp->N()) throw py::value_error("k: expected 0 <= k < N");
    In X = x0_(x);
    In Wv;
    const bool last = k == sqp->N() - 1;
    if (!last) Wv = vec(w, sqp->nw(), "w");
    Eigen::VectorXd v;
    Eigen::MatrixXd Jx, Jw;
    sqp->row_values(g, k, X.data(), last ? nullptr : Wv.data(), v, &Jx, &Jw);
    return py::make_tuple(Out(v.size(), v.data()), to_array(Jx), to_array(Jw));
  }
  double row_violation(int g, const py::object& X, const py::object& W) {
    if (g < 0 || g >= int(sqp->row_groups().size())) throw py::value_error("g: expected a row-group index");
    return sqp->row_violation(g, table(X, sqp->N(), sqp->nx(), "X", false), W_(W));
  }
  Out duals(int g) const {
    if (g < 0 || g >= int(sqp->row_groups().size())) throw py::value_error("g: expected a row-group index");
    return cols_to_rows(sqp->row_groups()[g].lam);
  }

  py::tuple knot_cost(int k, const py::object& x, const py::object& w) {
    if (k < 0 || k >= sqp->N()) throw py::value_error("k: expected 0 <= k < N = " + std::to_string(sqp->N()));
    In X = vec(x, sqp->nx(), "x");
    sqp->plant().check_x(X.data(), "x");
    In Wv;
    const bool last = k == sqp->N() - 1;
    if (!last) Wv = vec(w, sqp->nw(), "w");
    Eigen::VectorXd gx, gw;
    Eigen::MatrixXd Hxx, Hww;
    const double c = sqp->knot_cost(k, X.data(), last ? nullptr : Wv.data(), &gx, last ? nullptr : &gw, &Hxx,
                                    last ? nullptr : &Hww);
    if (last) return py::make_tuple(c, Out(gx.size(), gx.data()), py::none(), to_array(Hxx),
                                    py::none());
    return py::make_tuple(c, Out(gx.size(), gx.data()),
                          Out(gw.size(), gw.data()), to_array(Hxx), to_array(Hww));
  }
  py::tuple rollout(const py::object& x0, const py::object& W) {
    In X0 = x0_(x0);
    Eigen::MatrixXd X;
    const double c = sqp->rollout(X0.data(), W_(W), X);
    return py::make_tuple(c, cols_to_rows(X));
  }
  py::dict lq(const py::object& x0, const py::object& W) {
    In X0 = x0_(x0);
    Eigen::MatrixXd X, Wm = W_(W);
    sqp->rollout(X0.data(), Wm, X);
    FloatingSQP::LQ l;
    sqp->linearize(X, Wm, l);
    py::dict d;
    d["X"] = cols_to_rows(X);
    d["A"] = stack(l.A);
    d["B"] = stack(l.B);
    d["Hxx"] = stack(l.Hxx);
    d["Hww"] = stack(l.Hww);
    d["gx"] = stackv(l.gx);
    d["gw"] = stackv(l.gw);
    return d;
  }
  py::tuple riccati_step(const py::object& x0, const py::object& W, double reg) {
    if (!std::isfinite(reg) || reg < 0) throw py::value_error("reg: expected a finite number >= 0");
    In X0 = x0_(x0);
    Eigen::MatrixXd X, Wm = W_(W), kff, dX, dW;
    sqp->rollout(X0.data(), Wm, X);
    FloatingSQP::LQ l;
    sqp->linearize(X, Wm, l);
    std::vector<Eigen::MatrixXd> K;
    double dV1, dV2;
    if (!sqp->riccati(l, reg, kff, K, dV1, dV2))
      throw py::value_error("reg: Qww is not positive definite at this trajectory; raise reg");
    sqp->lq_step(l, kff, K, dX, dW);
    return py::make_tuple(cols_to_rows(dX), cols_to_rows(dW), stack(K), dV1, dV2);
  }
  py::dict solve(const py::object& x0, const py::object& W, int max_iters, double tol, const py::object& Xw,
                 const py::object& Kw, bool try_cold) {
    In X0 = x0_(x0);
    Eigen::MatrixXd Wm = W.is_none() ? default_W(X0.data()) : W_(W), X;
    std::vector<Eigen::MatrixXd> K;
    if (Xw.is_none() != Kw.is_none()) throw py::value_error("X: warm X and K come together (both or neither)");
    if (!Xw.is_none()) {
      if (W.is_none()) throw py::value_error("W: a warm X / K needs the warm W");
      X = table(Xw, sqp->N(), sqp->nx(), "X", false);
      In k;
      try {
        k = py::cast<In>(Kw);
      } catch (const py::error_already_set&) {
        throw py::value_error("K: expected an array of numbers");
      }
      const long m = sqp->nw(), nd = sqp->ndx();
      if (k.ndim() != 3 || k.shape(0) != sqp->N() - 1 || k.shape(1) != m || k.shape(2) != nd)
        throw py::value_error("K: expected shape (" + std::to_string(sqp->N() - 1) + ", " + std::to_string(m) + ", " +
                              std::to_string(nd) + "), got " + shape_str(k));
      FloatingPlant::check_finite(k.data(), k.size(), "K");
      for (int i = 0; i < sqp->N() - 1; ++i) K.push_back(Eigen::Map<const RowMat>(k.data() + i * m * nd, m, nd));
    }
    FloatingSQP::Result r;
    {
      py::gil_scoped_release nogil;
      r = sqp->solve(X0.data(), X, Wm, K, max_iters, tol, try_cold);
    }
    py::dict d;
    d["X"] = cols_to_rows(X);
    d["W"] = cols_to_rows(Wm);
    d["K"] = stack(K);
    d["cost"] = r.cost;
    d["cost0"] = r.cost0;
    d["iters"] = r.iters;
    d["converged"] = r.converged;
    d["line_search_fails"] = r.line_search_fails;
    d["reg"] = r.reg;
    d["last_alpha"] = r.last_alpha;
    d["cold"] = r.cold;
    d["al_iters"] = r.al_iters;
    d["violation"] = r.violation;
    return d;
  }
};

inline void bind_floating_sqp(py::module_& m) {
  py::class_<PySQP>(m, "FloatingSQP", R"doc(
Floating-base contact-force trajectory optimizer (issue 34; gato/floating_sqp.hpp): a
Gauss-Newton SQP over N knots of the FloatingPlant (semi-implicit Euler, step dt) with a
Riccati backward pass and a forward rollout on the manifold with a backtracking line search
(single shooting). Controls w = (u (nu joint torques, N m), fc (nf = 6 nc): per contact frame a
world-aligned wrench [n (N m); f (N)] about the frame origin, the consumer contract's fc layout).
Arrays over knots are (knots, width): X (N, nx), W (N-1, nw), K (N-1, nw, ndx).
Cost: tangent state cost to x_ref, control cost to u_ref, fc cost to fc_ref (default weight
1e-2), contact-position penalty to per-knot targets, friction-pyramid penalty (all quadratic
penalties); hard rows (add_fc_rows: fc boxes / friction cones, add_contact_pos_rows) under an
augmented Lagrangian whose outer loop runs inside solve (set_al; docs/floating_solver.md).
Bad input raises ValueError naming the field.
One instance owns one scratch: not for concurrent use from several threads (solve releases the GIL).
Python wrapper with SolveResult-style accessors: gato.floating.FloatingMPC (docs/floating_solver.md).
)doc")
      .def(py::init<const std::string&, const std::vector<std::string>&, int, const py::object&,
                    const py::object&>(),
           py::arg("urdf_path"), py::arg("contact_frames"), py::arg("N"), py::arg("dt") = 0.02,
           py::arg("integrator") = "semi_implicit")
      .def_property_readonly("N", [](const PySQP& s) { return s.sqp->N(); })
      .def_property_readonly("dt", [](const PySQP& s) { return s.sqp->dt(); })
      .def_property_readonly("nx", [](const PySQP& s) { return s.sqp->nx(); })
      .def_property_readonly("ndx", [](const PySQP& s) { return s.sqp->ndx(); })
      .def_property_readonly("nu", [](const PySQP& s) { return s.sqp->nu(); })
      .def_property_readonly("nf", [](const PySQP& s) { return s.sqp->nf(); })
      .def_property_readonly("nw", [](const PySQP& s) { return s.sqp->nw(); })
      .def_property_readonly("contact_frames", [](const PySQP& s) { return s.sqp->plant().contact_frames(); })
      .def("set_state_weights", &PySQP::set_state_weights, py::arg("w_running"), py::arg("w_terminal") = py::none(),
           "Tangent state weights (ndx,) or a scalar; w_terminal None = w_running.")
      .def("set_x_ref", &PySQP::set_x_ref, py::arg("x_ref"), "(nx,) for every knot or (N, nx) per knot.")
      .def("set_u_cost", &PySQP::set_u_cost, py::arg("u_cost"), "(nu,) or a scalar, >= 0 (default 1e-4).")
      .def("set_u_ref", &PySQP::set_u_ref, py::arg("u_ref") = py::none(), "(nu,); None = zeros.")
      .def("set_fc_cost", &PySQP::set_fc_cost, py::arg("weight"), "(nf,) or a scalar, >= 0 (default 1e-2).")
      .def("set_fc_ref", &PySQP::set_fc_ref, py::arg("ref") = py::none(),
           "(nf,) or (nc, 6) in [n; f] per frame; None / empty = zeros.")
      .def("set_contact_pos_cost", &PySQP::set_contact_pos_cost, py::arg("weight"), py::arg("targets"),
           "Penalty 1/2 weight ||p_c(q_k) - target||^2; targets (nc, 3), (3 nc,) or (N, 3 nc) (m).")
      .def("set_friction",
           [](PySQP& s, double mu, double fz_min, double weight) { s.sqp->set_friction(mu, fz_min, weight); },
           py::arg("mu"), py::arg("fz_min") = 0.0, py::arg("weight") = 0.0,
           "Friction-pyramid / unilateral PENALTY on every frame's force: 1/2 weight max(r, 0)^2 over the rows "
           "fz_min - fz, +-fx - mu fz, +-fy - mu fz. weight 0 = off (default).")
      .def("add_fc_rows", &PySQP::add_fc_rows, py::arg("C"), py::arg("d") = py::none(), py::arg("lo") = py::none(),
           py::arg("hi") = py::none(), py::arg("cone") = false, py::arg("mech") = 3, py::arg("rho") = 1.0,
           py::arg("knot_lo") = 0, py::arg("knot_hi") = -1,
           "Hard rows g = C fc + d (C (m, nf), [n; f] columns) on control knots [knot_lo, knot_hi) (-1: N-1), "
           "lo <= g <= hi (None: 0) or, cone=True, (g0, g1, g2) in the SOC; mech 3 = AL, 0 = telemetry. Index.")
      .def("add_contact_pos_rows", &PySQP::add_contact_pos_rows, py::arg("targets"), py::arg("lo") = py::none(),
           py::arg("hi") = py::none(), py::arg("mech") = 3, py::arg("rho") = 1.0, py::arg("knot_lo") = 1,
           py::arg("knot_hi") = -1,
           "Hard rows g = p_c(q_k) - target_k (3 nc) on state knots [knot_lo, knot_hi) (-1: N); targets (3nc,) "
           "or (N, 3nc). Index.")
      .def("set_row_group_targets",
           [](PySQP& s, int g, const py::object& t) { s.sqp->set_row_group_targets(g, s.targets_(t)); },
           py::arg("g"), py::arg("targets"))
      .def("set_row_group_rho", [](PySQP& s, int g, double rho) { s.sqp->set_row_group_rho(g, rho); },
           py::arg("g"), py::arg("rho"))
      .def("set_row_group_mech", [](PySQP& s, int g, int mech) { s.sqp->set_row_group_mech(g, mech); },
           py::arg("g"), py::arg("mech"))
      .def("clear_row_groups", [](PySQP& s) { s.sqp->clear_row_groups(); })
      .def("reset_duals", [](PySQP& s) { s.sqp->reset_duals(); })
      .def("set_al", [](PySQP& s, int n, double tol, double growth, double rho_max) {
             s.sqp->set_al(n, tol, growth, rho_max);
           },
           py::arg("al_iters"), py::arg("al_tol") = 1e-6, py::arg("rho_growth") = 10.0, py::arg("rho_max") = 1e8,
           "AL outer loop: up to al_iters multiplier updates per solve (stop when every AL group's violation <= "
           "al_tol), a group's rho x rho_growth (this solve only) where its violation did not fall 4x.")
      .def_property_readonly("n_row_groups", [](const PySQP& s) { return int(s.sqp->row_groups().size()); })
      .def("row_values", &PySQP::row_values, py::arg("g"), py::arg("k"), py::arg("x"), py::arg("w") = py::none(),
           "(g (m,), Jx (m, ndx) tangent, Jw (m, nw)) of row group g at knot k.")
      .def("row_violation", &PySQP::row_violation, py::arg("g"), py::arg("X"), py::arg("W"))
      .def("duals", &PySQP::duals, py::arg("g"), "The multipliers of group g, (N, m).")
      .def("hold_controls", &PySQP::hold_controls, py::arg("x"), py::arg("damping") = 0.0,
           "The hold control (nw,) at x: next velocity (1 - damping) v (0: zero acceleration), closest to "
           "(u_ref, fc_ref) in the u / fc weights (a weight below 1e-8 counts as 1e-8).")
      .def("cold_start",
           [](PySQP& s, const py::object& x0) {
             In X0 = s.x0_(x0);
             return s.cols_to_rows(s.default_W(X0.data()));
           },
           py::arg("x0"),
           "The cold start's controls W (N-1, nw): hold_controls(x_k, 0.5) along their own rollout from x0.")
      .def("knot_cost", &PySQP::knot_cost, py::arg("k"), py::arg("x"), py::arg("w") = py::none(),
           "(cost, gx, gw, Hxx, Hww) of knot k (gw / Hww None at the terminal knot); gradients in the tangent.")
      .def("rollout", &PySQP::rollout, py::arg("x0"), py::arg("W"), "(cost, X): the rollout of W from x0.")
      .def("lq", &PySQP::lq, py::arg("x0"), py::arg("W"),
           "The LQ subproblem at the rollout of W: dict X, A, B, Hxx, Hww, gx, gw.")
      .def("riccati_step", &PySQP::riccati_step, py::arg("x0"), py::arg("W"), py::arg("reg") = 0.0,
           "(dX (N, ndx), dW (N-1, nw), K (N-1, nw, ndx), dV1, dV2): the Riccati solution of lq(x0, W).")
      .def(
          "set_base_wrench",
          [](PySQP& s, const py::object& w, int knots) {
            Eigen::VectorXd b = Eigen::VectorXd::Zero(6);
            if (!w.is_none()) b = Eigen::Map<const Eigen::VectorXd>(vec(w, 6, "base_wrench").data(), 6);
            if (knots < -1) throw py::value_error("knots: expected -1 (all) or a count >= 0, got " + std::to_string(knots));
            s.sqp->set_base_wrench(b, knots);
          },
          py::arg("w"), py::arg("knots") = -1,
          "Plan under a known external base wrench: (6,) world-aligned force (N) and torque (N m) at the base "
          "origin, in the dynamics of intervals k < knots (-1: all). None or zeros: none (plans as without it).")
      .def_property_readonly("base_wrench", [](const PySQP& s) { return Out(6, s.sqp->base_wrench().data()); })
      .def_property_readonly("base_wrench_knots", [](const PySQP& s) { return s.sqp->base_wrench_knots(); })
      .def("solve", &PySQP::solve, py::arg("x0"), py::arg("W") = py::none(), py::arg("max_iters") = 10,
           py::arg("tol") = 1e-8, py::arg("X") = py::none(), py::arg("K") = py::none(),
           py::arg("try_cold") = false,
           "Gauss-Newton SQP from x0 warm-started at W (None: cold_start(x0)); with X (N, nx) and K (N-1, nw, "
           "ndx) the warm start is the policy W_k + K_k (x_k (-) X_k) rolled out from x0; try_cold: keep the "
           "cold start when it costs less. dict X, W, K, cost, cost0, iters, converged, line_search_fails, reg, "
           "last_alpha, cold.");
}

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
Dynamics a = M^-1 ((0_6, u) + sum_c J_c^T f_c + tau_b - h) (J_c LOCAL_WORLD_ALIGNED; tau_b the
base wrench of set_base_wrench, zero unless set).
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
      .def("contact_positions", &PyFloating::contact_positions, py::arg("q"),
           "World positions of the contact frames' origins, shape (nc, 3) (m).")
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
           "units 1/(unit of each tangent entry)^2.")
      .def(
          "set_base_wrench",
          [](PyFloating& p, const py::object& w) {
            if (w.is_none()) return p.plant->set_base_wrench(*p.data, nullptr);
            In a = vec(w, 6, "base_wrench");
            p.plant->set_base_wrench(*p.data, a.data());
          },
          py::arg("w"),
          "A known external wrench on the base for every later aba / step / linearize call: (6,) = world-"
          "aligned force (N) and torque (N m) at the base frame origin; it adds (R^T F, R^T T, 0) to the "
          "generalized force. None or zeros: none.")
      .def_property_readonly(
          "base_wrench",
          [](const PyFloating& p) {
            Out w(6);
            FloatingPlant::base_wrench(*p.data, w.mutable_data());
            return w;
          },
          "(6,) the base wrench set (zeros: none).");
  bind_floating_sqp(m);
}

}  // namespace
}  // namespace floating_py
}  // namespace gato
