// Typed Python classes of the solver's plain structs and enums (gato._core.Settings,
// RowGroupSpec, AdmmConfig, SolveStats; LinSys, Integrator, LineSearch, RowKind,
// RowMech, AdmmLinSys). One field table per struct drives its properties, its
// dict conversion (from_dict / to_dict) and its repr, so a field is named once
// here and its default once in the C++ struct (gato/types.hpp, gato/rowgroups.hpp).
// Dicts remain accepted wherever a struct is (the reference's consumers pass
// them): they convert through the same table, and an unknown key or a value of
// the wrong type raises ValueError naming the struct and the field.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gato/rowgroups.hpp"
#include "gato/solver.hpp"
#include "gato/types.hpp"

namespace gato::pytypes {

namespace py = pybind11;

inline std::string repr_of(py::handle v) { return py::cast<std::string>(py::repr(v)); }

/// A C-ordered numpy array of S (other layouts and dtypes are converted on the way in).
template <typename S>
using Arr = py::array_t<S, py::array::c_style | py::array::forcecast>;

/// The plant's URDF limits as the dict {"q_lo", "q_hi", "qd", "u"} of float64 (nv,) arrays
/// [rad or m, rad/s or m/s, N*m or N].
template <typename Limits>
py::dict limits_dict(const Limits& L) {
        py::dict d;
        d["q_lo"] = py::array_t<double>(L.q_lo.size(), L.q_lo.template cast<double>().eval().data());
        d["q_hi"] = py::array_t<double>(L.q_hi.size(), L.q_hi.template cast<double>().eval().data());
        d["qd"] = py::array_t<double>(L.qd_max.size(), L.qd_max.template cast<double>().eval().data());
        d["u"] = py::array_t<double>(L.u_max.size(), L.u_max.template cast<double>().eval().data());
        return d;
}

/// ValueError "name: expected shape (a, b), got (c, d)" unless ``a`` has exactly ``shape``.
template <typename S>
void check_shape(const Arr<S>& a, std::initializer_list<long> shape, const char* name) {
  bool ok = a.ndim() == long(shape.size());
  int i = 0;
  for (long s : shape) ok = ok && a.shape(i++) == s;
  if (ok) return;
  std::ostringstream os;
  os << name << ": expected shape (";
  i = 0;
  for (long s : shape) os << (i++ ? ", " : "") << s;
  os << "), got (";
  for (long d = 0; d < a.ndim(); ++d) os << (d ? ", " : "") << a.shape(d);
  os << ")";
  throw py::value_error(os.str());
}

[[noreturn]] inline void bad_value(const char* what, const std::string& field, const std::string& expected,
                                   py::handle v) {
  throw py::value_error(std::string(what) + ": " + field + ": expected " + expected + ", got " + repr_of(v));
}

/// The Python class of a bound enum (py::type::of does not take enums in pybind11 3).
template <typename E>
py::object enum_class() {
  return py::reinterpret_borrow<py::object>(py::detail::get_type_handle(typeid(E), /*throw_if_missing=*/true));
}

inline py::object obj(py::handle v) { return py::reinterpret_borrow<py::object>(v); }

/// An enum member from the enum itself, its name (case-insensitive: "bdsv_first"
/// or "BDSV_FIRST") or its integer value (the legacy dict form).
template <typename E>
E parse_enum(py::handle v, const char* what, const std::string& field) {
  py::object cls = enum_class<E>();
  if (py::isinstance(v, cls)) return py::cast<E>(v);
  py::dict members = cls.attr("__members__");
  const bool is_int = !py::isinstance<py::bool_>(v) && py::hasattr(v, "__index__") && !py::isinstance<py::float_>(v);
  if (py::isinstance<py::str>(v)) {
    std::string s = py::cast<std::string>(v);
    for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    if (members.contains(s)) return py::cast<E>(members[py::str(s)]);
  } else if (is_int) {
    const long i = py::cast<long>(py::int_(obj(v)));
    for (auto item : members)
      if (py::cast<long>(py::int_(obj(item.second))) == i) return py::cast<E>(item.second);
  }
  std::string names;
  for (auto item : members) {
    std::string n = py::cast<std::string>(item.first);
    for (auto& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
    names += (names.empty() ? "" : ", ") + n;
  }
  bad_value(what, field, "one of " + names + " (a " + py::cast<std::string>(cls.attr("__name__")) +
                             " member, its name or its integer value)", v);
}

/// Converts one Python value to a field's C++ type; ValueError naming the field otherwise.
template <typename V>
V parse_value(py::handle v, const char* what, const std::string& field) {
  if constexpr (std::is_same_v<V, bool>) {
    if (py::isinstance<py::bool_>(v) || py::isinstance(v, py::module_::import("numpy").attr("bool_")))
      return py::cast<bool>(v);
    bad_value(what, field, "a bool", v);
  } else if constexpr (std::is_integral_v<V>) {
    if (!py::isinstance<py::bool_>(v) && !py::isinstance<py::float_>(v) && py::hasattr(v, "__index__"))
      return py::cast<V>(py::int_(obj(v)));
    bad_value(what, field, "an integer", v);
  } else if constexpr (std::is_floating_point_v<V>) {
    if (!py::isinstance<py::bool_>(v) && (py::isinstance<py::float_>(v) || py::hasattr(v, "__index__") ||
                                          py::hasattr(v, "__float__")) && !py::isinstance<py::str>(v))
      return V(py::cast<double>(py::float_(obj(v))));
    bad_value(what, field, "a number", v);
  } else {  // std::vector<...>
    try {
      if (py::isinstance<py::str>(v)) throw py::cast_error();
      return py::cast<V>(v);
    } catch (const py::cast_error&) {
      bad_value(what, field, "a sequence of numbers", v);
    }
  }
}

/// The field table of one struct T: name, getter, setter.
template <typename T>
class Fields {
 public:
  explicit Fields(const char* what) : what_(what) {}

  template <typename V>
  Fields& add(const char* name, V T::*pm) {
    const char* what = what_;
    const std::string n = name;
    items_.push_back({n, [pm](const T& t) { return py::cast(t.*pm); },
                      [pm, what, n](T& t, py::handle v) { t.*pm = parse_value<V>(v, what, n); }});
    return *this;
  }
  template <typename E>
  Fields& add_enum(const char* name, E T::*pm) {
    const char* what = what_;
    const std::string n = name;
    items_.push_back({n, [pm](const T& t) { return py::cast(t.*pm); },
                      [pm, what, n](T& t, py::handle v) { t.*pm = parse_enum<E>(v, what, n); }});
    return *this;
  }
  /// An enum kept as an int in the struct (RowGroupSpec::kind / mech).
  template <typename E>
  Fields& add_enum_int(const char* name, int T::*pm) {
    const char* what = what_;
    const std::string n = name;
    items_.push_back({n, [pm](const T& t) { return py::cast(static_cast<E>(t.*pm)); },
                      [pm, what, n](T& t, py::handle v) { t.*pm = static_cast<int>(parse_enum<E>(v, what, n)); }});
    return *this;
  }

  /// A T from a mapping of field overrides over the struct's defaults.
  T from_mapping(py::handle m) const {
    if (!py::isinstance<py::dict>(m) && !py::hasattr(m, "items"))
      throw py::value_error(std::string(what_) + ": expected a " + what_ + " or a dict, got " + repr_of(m));
    T t{};
    for (auto kv : py::reinterpret_borrow<py::object>(m).attr("items")()) {
      auto pair = py::reinterpret_borrow<py::tuple>(kv);
      if (!py::isinstance<py::str>(pair[0]))
        throw py::value_error(std::string(what_) + ": keys must be field names (str), got " + repr_of(pair[0]));
      const std::string k = py::cast<std::string>(pair[0]);
      const Item* it = find(k);
      if (it == nullptr) {
        std::string names;
        for (const auto& i : items_) names += (names.empty() ? "" : ", ") + i.name;
        throw py::value_error(std::string(what_) + ": unknown key '" + k + "' (fields: " + names + ")");
      }
      it->set(t, pair[1]);
    }
    return t;
  }
  /// A T from a T or a mapping (the dict form of the reference's consumers).
  T from_py(py::handle h) const {
    if (py::isinstance<T>(h)) return py::cast<T>(h);
    if (h.is_none()) return T{};
    return from_mapping(h);
  }
  py::dict to_dict(const T& t) const {
    py::dict d;
    for (const auto& i : items_) d[py::str(i.name)] = i.get(t);
    return d;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& i : items_) v.push_back(i.name);
    return v;
  }

  /// Properties, from_dict, to_dict, fields, ==, repr and a keyword constructor on cls.
  template <typename Cls>
  void bind(Cls& cls) const {
    const Fields* self = this;  // the tables are static (see settings_fields & co.)
    cls.def(py::init([self](py::kwargs kw) { return self->from_mapping(kw); }),
            (std::string("A ") + what_ + " with the struct's defaults; keyword arguments override fields.").c_str());
    for (const auto& i : items_) {
      const Item* ip = &i;
      cls.def_property(i.name.c_str(), [ip](const T& t) { return ip->get(t); },
                       [ip](T& t, py::handle v) { ip->set(t, v); });
    }
    cls.def_static("from_dict", [self](py::handle d) { return self->from_mapping(d); }, py::arg("d"),
                   "Convert a dict of field overrides (unknown key or bad value: ValueError naming it).");
    cls.def("to_dict", [self](const T& t) { return self->to_dict(t); }, "The fields as a dict.");
    cls.def_property_readonly_static("fields", [self](py::handle) { return self->names(); },
                                     "Field names, in declaration order.");
    cls.def("__eq__", [self](const T& a, py::handle b) {
      if (!py::isinstance<T>(b)) return false;
      return self->to_dict(a).equal(self->to_dict(py::cast<T>(b)));
    });
    const char* what = what_;
    cls.def("__repr__", [self, what](const T& t) {
      std::string s = std::string(what) + "(";
      bool first = true;
      for (const auto& i : self->items_) {
        s += (first ? "" : ", ") + i.name + "=" + repr_of(i.get(t));
        first = false;
      }
      return s + ")";
    });
    cls.def(py::pickle([self](const T& t) { return self->to_dict(t); },
                       [self](py::dict d) { return self->from_mapping(d); }));
  }

 private:
  struct Item {
    std::string name;
    std::function<py::object(const T&)> get;
    std::function<void(T&, py::handle)> set;
  };
  const Item* find(const std::string& k) const {
    for (const auto& i : items_)
      if (i.name == k) return &i;
    return nullptr;
  }
  const char* what_;
  std::vector<Item> items_;
};

inline const Fields<Settings>& settings_fields() {
  static const Fields<Settings> f = [] {
    Fields<Settings> t("Settings");
    t.add("max_sqp_iters", &Settings::max_sqp_iters)
        .add("max_pcg_iters", &Settings::max_pcg_iters)
        .add("pcg_tol", &Settings::pcg_tol)
        .add("solve_ratio", &Settings::solve_ratio)
        .add("mu", &Settings::mu)
        .add("rho", &Settings::rho)
        .add("adapt_rho", &Settings::adapt_rho)
        .add_enum("linsys", &Settings::linsys)
        .add_enum("integrator", &Settings::integrator)
        .add_enum("line_search", &Settings::line_search)
        .add("q_cost", &Settings::q_cost)
        .add("qd_cost", &Settings::qd_cost)
        .add("u_cost", &Settings::u_cost)
        .add("N_cost", &Settings::N_cost)
        .add("q_lim_cost", &Settings::q_lim_cost)
        .add("vel_lim_cost", &Settings::vel_lim_cost)
        .add("ctrl_lim_cost", &Settings::ctrl_lim_cost)
        .add_enum("u_ref", &Settings::u_ref)
        .add("rot_cost", &Settings::rot_cost)
        .add("N_rot_cost", &Settings::N_rot_cost);
    return t;
  }();
  return f;
}

inline const Fields<RowGroupSpec>& row_group_fields() {
  static const Fields<RowGroupSpec> f = [] {
    Fields<RowGroupSpec> t("RowGroupSpec");
    t.add_enum_int<RowKind>("kind", &RowGroupSpec::kind)
        .add_enum_int<RowMech>("mech", &RowGroupSpec::mech)
        .add("n_rows", &RowGroupSpec::n_rows)
        .add("knot_lo", &RowGroupSpec::knot_lo)
        .add("knot_hi", &RowGroupSpec::knot_hi)
        .add("lo", &RowGroupSpec::lo)
        .add("hi", &RowGroupSpec::hi)
        .add("mask", &RowGroupSpec::mask)
        .add("weight", &RowGroupSpec::weight)
        .add("delta", &RowGroupSpec::delta)
        .add("sigma", &RowGroupSpec::sigma)
        .add("cone", &RowGroupSpec::cone)
        .add("admm_iters", &RowGroupSpec::admm_iters)
        .add("C", &RowGroupSpec::C)
        .add("d", &RowGroupSpec::d)
        .add("target", &RowGroupSpec::target)
        .add("reset_state", &RowGroupSpec::reset_state)
        .add("admm_reinit", &RowGroupSpec::admm_reinit)
        .add("admm_reclip", &RowGroupSpec::admm_reclip);
    return t;
  }();
  return f;
}

inline const Fields<AdmmConfig>& admm_fields() {
  static const Fields<AdmmConfig> f = [] {
    Fields<AdmmConfig> t("AdmmConfig");
    t.add("iters", &AdmmConfig::iters)
        .add("eps_abs", &AdmmConfig::eps_abs)
        .add("eps_rel", &AdmmConfig::eps_rel)
        .add("check_every", &AdmmConfig::check_every)
        .add_enum("linsys", &AdmmConfig::linsys)
        .add("merit", &AdmmConfig::merit)
        .add("rho_adapt", &AdmmConfig::rho_adapt);
    return t;
  }();
  return f;
}

/// The statistics of the last solve as Python sees them: arrays trimmed to the
/// iterations run (B entries, n = iters_run). Times in microseconds, as the
/// reference's SolverStats fixes them (field names carry the unit).
struct PyStats {
  long solve_time_us = 0;
  int iters_run = 0;
  bool budget_hit = false;
  py::array_t<int> sqp_iters;            // (B)
  py::array_t<bool> kkt_converged;       // (B)
  py::array_t<double> initial_merit, final_merit;  // (B)
  py::array_t<int> pcg_iters;            // (B, n)
  py::array_t<double> min_merit, step_size;        // (B, n)
  py::array_t<bool> exact_step;          // (B, n) eh: the exact Hessian's step was taken
  py::array_t<double> pcg_times_us;      // (n) slowest entry per iteration
  std::vector<LinSys> linsys_used;       // (n) the path entry 0 took
  double kkt_us = 0, schur_us = 0, linsys_us = 0, linesearch_us = 0;  // per-stage, summed over entries
  int n_groups = 0;
  py::object row_max_violation = py::none(), row_sum_violation = py::none();  // (B, G)
  py::object admm_r_prim = py::none(), admm_r_dual = py::none();              // (B)
  py::object admm_iters = py::none(), admm_linsys_iters = py::none();         // (B)
};

inline PyStats make_stats(const SolveStats& st, int B, int max_iters) {
  const int n = st.iters_run, I = max_iters;
  auto take = [&](const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    py::array_t<T> a({B, n});
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < n; ++i) a.mutable_at(b, i) = v[size_t(b) * I + i];
    return a;
  };
  PyStats p;
  p.solve_time_us = st.solve_time_us;
  p.iters_run = n;
  p.budget_hit = st.budget_hit;
  p.sqp_iters = py::array_t<int>(B, st.sqp_iters.data());
  p.kkt_converged = py::array_t<bool>(B);
  for (int b = 0; b < B; ++b) p.kkt_converged.mutable_at(b) = st.converged[b] != 0;
  p.initial_merit = py::array_t<double>(B, st.initial_merit.data());
  p.final_merit = py::array_t<double>(B, st.final_merit.data());
  p.pcg_iters = take(st.pcg_iters);
  p.min_merit = take(st.min_merit);
  p.step_size = take(st.step_size);
  p.exact_step = py::array_t<bool>({B, n});
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < n; ++i)
      p.exact_step.mutable_at(b, i) = st.exact_step.size() == size_t(B) * I && st.exact_step[size_t(b) * I + i] != 0;
  p.pcg_times_us = py::array_t<double>(n, st.linsys_time_us.data());
  for (int i = 0; i < n; ++i) p.linsys_used.push_back(static_cast<LinSys>(st.linsys_used[i]));
  p.kkt_us = st.t_kkt_us;
  p.schur_us = st.t_schur_us;
  p.linsys_us = st.t_linsys_us;
  p.linesearch_us = st.t_linesearch_us;
  const int G = st.n_groups;
  p.n_groups = G;
  if (G > 0) {
    py::array_t<double> vmax({B, G}), vsum({B, G});
    for (int b = 0; b < B; ++b)
      for (int g = 0; g < G; ++g) {
        vmax.mutable_at(b, g) = st.row_max_violation[size_t(b) * G + g];
        vsum.mutable_at(b, g) = st.row_sum_violation[size_t(b) * G + g];
      }
    p.row_max_violation = vmax;
    p.row_sum_violation = vsum;
    p.admm_r_prim = py::array_t<double>(B, st.admm_r_prim.data());
    p.admm_r_dual = py::array_t<double>(B, st.admm_r_dual.data());
    p.admm_iters = py::array_t<int>(B, st.admm_iters.data());
    p.admm_linsys_iters = py::array_t<int>(B, st.admm_linsys_iters.data());
  }
  return p;
}

inline void bind_types(py::module_& m) {
  py::enum_<LinSys>(m, "LinSys", "Path of the Schur system S lambda = gamma (docs/solver_method.md).")
      .value("PCG", LinSys::kPcg)
      .value("BDSV", LinSys::kBdsv)
      .value("BDSV_FIRST", LinSys::kBdsvFirst);
  py::enum_<Integrator>(m, "Integrator", "Knot-interval integrator of the dynamics.")
      .value("EULER", Integrator::kEuler)
      .value("SEMI_IMPLICIT", Integrator::kSemiImplicit)
      .value("RK4", Integrator::kRk4);
  py::enum_<LineSearch>(m, "LineSearch", "Line search over alpha = 2^-i: lowest merit of all, or first decrease.")
      .value("BEST", LineSearch::kBest)
      .value("FIRST", LineSearch::kFirst);
  py::enum_<URef>(m, "URef", "What the control cost penalises: u (ZERO, the reference) or u - g(q) (GRAVITY).")
      .value("ZERO", URef::kZero)
      .value("GRAVITY", URef::kGravity);
  py::enum_<RowKind>(m, "RowKind", "Row-group kinds (gato/rowgroups.hpp, docs/constraints.md).")
      .value("Q_BOX", RowKind::kQBox)
      .value("QD_BOX", RowKind::kQdBox)
      .value("U_BOX", RowKind::kUBox)
      .value("EE_TERMINAL", RowKind::kEeTerminal)
      .value("LIN_U", RowKind::kLinU)
      .value("COLLISION", RowKind::kCollision)
      .value("CONTACT_POS", RowKind::kContactPos);
  py::enum_<RowMech>(m, "RowMech", "Row-group mechanisms (docs/constraints.md).")
      .value("TELEMETRY", RowMech::kTelemetry)
      .value("BARRIER", RowMech::kBarrier)
      .value("ADMM", RowMech::kAdmm)
      .value("AL", RowMech::kAl);
  py::enum_<AdmmLinSys>(m, "AdmmLinSys", "Linear solver of the ADMM inner loop.")
      .value("PCG", AdmmLinSys::kPcg)
      .value("BDSV_FACTOR", AdmmLinSys::kBdsvFactor);

  py::class_<Settings> s(m, "Settings",
                         "Solver settings (gato/types.hpp): the one place their defaults are written; "
                         "gato.SolverParams and the ROS parameter schema read them from here.");
  settings_fields().bind(s);
  py::class_<RowGroupSpec> g(m, "RowGroupSpec", "One constraint row group as the host describes it "
                                                 "(gato/rowgroups.hpp).");
  row_group_fields().bind(g);
  py::class_<AdmmConfig> a(m, "AdmmConfig", "ADMM inner-loop settings shared by every ADMM group.");
  admm_fields().bind(a);

  py::class_<PyStats>(m, "SolveStats", "Statistics of the last solve (B entries, n = iters_run iterations; "
                                       "times in microseconds).")
      .def_readonly("solve_time_us", &PyStats::solve_time_us)
      .def_readonly("iters_run", &PyStats::iters_run)
      .def_readonly("budget_hit", &PyStats::budget_hit)
      .def_readonly("sqp_iters", &PyStats::sqp_iters)
      .def_readonly("kkt_converged", &PyStats::kkt_converged)
      .def_readonly("initial_merit", &PyStats::initial_merit)
      .def_readonly("final_merit", &PyStats::final_merit)
      .def_readonly("pcg_iters", &PyStats::pcg_iters)
      .def_readonly("min_merit", &PyStats::min_merit)
      .def_readonly("step_size", &PyStats::step_size)
      .def_readonly("exact_step", &PyStats::exact_step)
      .def_readonly("pcg_times_us", &PyStats::pcg_times_us)
      .def_readonly("linsys_used", &PyStats::linsys_used)
      .def_readonly("kkt_us", &PyStats::kkt_us)
      .def_readonly("schur_us", &PyStats::schur_us)
      .def_readonly("linsys_us", &PyStats::linsys_us)
      .def_readonly("linesearch_us", &PyStats::linesearch_us)
      .def_readonly("n_groups", &PyStats::n_groups)
      .def_readonly("row_max_violation", &PyStats::row_max_violation)
      .def_readonly("row_sum_violation", &PyStats::row_sum_violation)
      .def_readonly("admm_r_prim", &PyStats::admm_r_prim)
      .def_readonly("admm_r_dual", &PyStats::admm_r_dual)
      .def_readonly("admm_iters", &PyStats::admm_iters)
      .def_readonly("admm_linsys_iters", &PyStats::admm_linsys_iters)
      .def_property_readonly("profile", [](const PyStats& p) {
        py::dict d;
        d["kkt_us"] = p.kkt_us;
        d["schur_us"] = p.schur_us;
        d["linsys_us"] = p.linsys_us;
        d["linesearch_us"] = p.linesearch_us;
        return d;
      }, "Per-stage wall time summed over the batch entries {kkt_us, schur_us, linsys_us, linesearch_us}.");
}

}  // namespace gato::pytypes
