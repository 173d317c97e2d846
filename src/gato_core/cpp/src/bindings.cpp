// pybind11 module gato._core: the C++ solver core, wrapped 1:1. The Python
// facade (gato.interface.BSQP) owns validation, array kinds and copies; this
// layer checks shapes again so a bad call raises instead of reading garbage.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <sstream>
#include <string>

#include "gato/solver.hpp"

namespace py = pybind11;
using namespace gato;

namespace {

template <typename S>
using Arr = py::array_t<S, py::array::c_style | py::array::forcecast>;

template <typename S>
void check_shape(const Arr<S>& a, std::initializer_list<long> shape, const char* name) {
  bool ok = a.ndim() == long(shape.size());
  int i = 0;
  for (long s : shape) ok = ok && a.shape(i++) == s;
  if (!ok) {
    std::ostringstream os;
    os << name << ": expected shape (";
    i = 0;
    for (long s : shape) os << (i++ ? ", " : "") << s;
    os << "), got (";
    for (long d = 0; d < a.ndim(); ++d) os << (d ? ", " : "") << a.shape(d);
    os << ")";
    throw py::value_error(os.str());
  }
}

Settings settings_from_dict(const py::dict& d) {
  Settings s;
  for (auto item : d) {
    const std::string k = py::cast<std::string>(item.first);
    py::handle v = item.second;
    if (k == "max_sqp_iters") s.max_sqp_iters = py::cast<int>(v);
    else if (k == "max_pcg_iters") s.max_pcg_iters = py::cast<int>(v);
    else if (k == "pcg_tol") s.pcg_tol = py::cast<double>(v);
    else if (k == "solve_ratio") s.solve_ratio = py::cast<double>(v);
    else if (k == "mu") s.mu = py::cast<double>(v);
    else if (k == "rho") s.rho = py::cast<double>(v);
    else if (k == "adapt_rho") s.adapt_rho = py::cast<bool>(v);
    else if (k == "linsys") s.linsys = static_cast<LinSys>(py::cast<int>(v));
    else if (k == "integrator") s.integrator = static_cast<Integrator>(py::cast<int>(v));
    else if (k == "line_search") s.line_search = static_cast<LineSearch>(py::cast<int>(v));
    else if (k == "q_cost") s.q_cost = py::cast<double>(v);
    else if (k == "qd_cost") s.qd_cost = py::cast<double>(v);
    else if (k == "u_cost") s.u_cost = py::cast<double>(v);
    else if (k == "N_cost") s.N_cost = py::cast<double>(v);
    else if (k == "q_lim_cost") s.q_lim_cost = py::cast<double>(v);
    else if (k == "vel_lim_cost") s.vel_lim_cost = py::cast<double>(v);
    else if (k == "ctrl_lim_cost") s.ctrl_lim_cost = py::cast<double>(v);
    else throw py::value_error("settings: unknown key '" + k + "'");
  }
  return s;
}

RowGroupSpec group_from_dict(const py::dict& d) {
  RowGroupSpec g;
  for (auto item : d) {
    const std::string k = py::cast<std::string>(item.first);
    py::handle v = item.second;
    if (k == "kind") g.kind = py::cast<int>(v);
    else if (k == "mech") g.mech = py::cast<int>(v);
    else if (k == "n_rows") g.n_rows = py::cast<int>(v);
    else if (k == "knot_lo") g.knot_lo = py::cast<int>(v);
    else if (k == "knot_hi") g.knot_hi = py::cast<int>(v);
    else if (k == "lo") g.lo = py::cast<std::vector<double>>(v);
    else if (k == "hi") g.hi = py::cast<std::vector<double>>(v);
    else if (k == "mask") g.mask = py::cast<std::vector<unsigned char>>(v);
    else if (k == "weight") g.weight = py::cast<double>(v);
    else if (k == "delta") g.delta = py::cast<double>(v);
    else if (k == "sigma") g.sigma = py::cast<double>(v);
    else if (k == "cone") g.cone = py::cast<bool>(v);
    else if (k == "admm_iters") g.admm_iters = py::cast<int>(v);
    else if (k == "C") g.C = py::cast<std::vector<double>>(v);
    else if (k == "d") g.d = py::cast<std::vector<double>>(v);
    else if (k == "target") g.target = py::cast<std::vector<double>>(v);
    else if (k == "reset_state") g.reset_state = py::cast<bool>(v);
    else if (k == "admm_reinit") g.admm_reinit = py::cast<bool>(v);
    else if (k == "admm_reclip") g.admm_reclip = py::cast<bool>(v);
    else throw py::value_error("row group: unknown key '" + k + "'");
  }
  return g;
}

template <typename S>
std::vector<double> to_vec(const Arr<double>& a) {
  return std::vector<double>(a.data(), a.data() + a.size());
}

/// Solver plus a spare plant workspace for the host-side kinematics helpers.
template <typename S>
struct PySolver {
  std::shared_ptr<Plant<S>> plant;
  std::unique_ptr<BatchSolver<S>> solver;
  std::unique_ptr<PlantWorkspace<S>> ws;
  std::unique_ptr<DynamicsScratch<S>> dyn;

  PySolver(const std::string& urdf, const std::string& ee, int B, int N, double dt,
           const py::dict& settings, int threads) {
    plant = std::make_shared<Plant<S>>(urdf, ee);
    solver = BatchSolver<S>::create(plant, B, N, S(dt), settings_from_dict(settings), threads);
    ws = plant->make_workspace();
    dyn = std::make_unique<DynamicsScratch<S>>(plant->nv());
  }
};

template <typename S>
void bind_solver(py::module_& m, const char* name) {
  using P = PySolver<S>;
  py::class_<P>(m, name)
      .def(py::init<const std::string&, const std::string&, int, int, double, const py::dict&, int>(),
           py::arg("urdf"), py::arg("ee_frame"), py::arg("batch"), py::arg("N"), py::arg("dt"),
           py::arg("settings"), py::arg("threads") = 1)
      .def_property_readonly("nq", [](const P& p) { return p.solver->nq(); })
      .def_property_readonly("nv", [](const P& p) { return p.solver->nv(); })
      .def_property_readonly("nx", [](const P& p) { return p.solver->nx(); })
      .def_property_readonly("nu", [](const P& p) { return p.solver->nu(); })
      .def_property_readonly("N", [](const P& p) { return p.solver->N(); })
      .def_property_readonly("batch", [](const P& p) { return p.solver->batch(); })
      .def_property_readonly("xu_size", [](const P& p) { return p.solver->xu_size(); })
      .def_property_readonly("threads", [](const P& p) { return p.solver->num_threads(); })
      .def_property_readonly("nbodies", [](const P& p) { return p.plant->nbodies(); })
      .def_property_readonly("ee_body", [](const P& p) { return p.plant->ee_body(); })
      .def_property_readonly("ee_frame_id", [](const P& p) { return p.plant->ee_frame_id(); })
      .def_property_readonly("joint_names", [](const P& p) { return p.plant->joint_names(); })
      .def_property_readonly("frame_names", [](const P& p) { return p.plant->frame_names(); })
      .def("frame_id", [](const P& p, const std::string& n) { return p.plant->frame_id(n); })
      .def_property_readonly("limits", [](const P& p) {
        const auto& L = p.plant->limits();
        py::dict d;
        d["q_lo"] = py::array_t<double>(L.q_lo.size(), L.q_lo.template cast<double>().eval().data());
        d["q_hi"] = py::array_t<double>(L.q_hi.size(), L.q_hi.template cast<double>().eval().data());
        d["qd"] = py::array_t<double>(L.qd_max.size(), L.qd_max.template cast<double>().eval().data());
        d["u"] = py::array_t<double>(L.u_max.size(), L.u_max.template cast<double>().eval().data());
        return d;
      })
      .def("set_settings", [](P& p, const py::dict& d) { p.solver->set_settings(settings_from_dict(d)); })
      .def("set_collect_stats", [](P& p, bool on) { p.solver->set_collect_stats(on); })
      .def("set_linsys", [](P& p, int l) { p.solver->set_linsys(static_cast<LinSys>(l)); })
      .def("set_rho_batch", [](P& p, const Arr<double>& v) { p.solver->set_rho_batch(to_vec<S>(v)); })
      .def("set_mu_batch", [](P& p, const Arr<double>& v) { p.solver->set_mu_batch(to_vec<S>(v)); })
      .def("set_pcg_tol_batch", [](P& p, const Arr<double>& v) { p.solver->set_pcg_tol_batch(to_vec<S>(v)); })
      .def("set_drho_batch", [](P& p, const Arr<double>& v, bool d) { p.solver->set_drho_batch(to_vec<S>(v), d); })
      .def("set_knot_weights", [](P& p, const Arr<double>& v) { p.solver->set_knot_weights(to_vec<S>(v)); })
      .def("set_u_cost_vec", [](P& p, const Arr<double>& v) { p.solver->set_u_cost_vec(to_vec<S>(v)); })
      .def("set_q_pos_cost", [](P& p, const Arr<double>& v) { p.solver->set_q_pos_cost(to_vec<S>(v)); })
      .def("set_q_nom", [](P& p, const Arr<double>& v) { p.solver->set_q_nom(to_vec<S>(v)); })
      .def("set_fext", [](P& p, const Arr<S>& f) {
        const auto& s = *p.solver;
        if (f.size() == 0) { p.solver->set_fext({}); return; }
        check_shape<S>(f, {s.batch(), s.N(), 6L * p.plant->nbodies()}, "f_ext");
        p.solver->set_fext(std::vector<S>(f.data(), f.data() + f.size()));
      })
      .def_property_readonly("has_fext", [](const P& p) { return p.solver->has_fext(); })
      .def("reset_rho", [](P& p) { p.solver->reset_rho(); })
      .def("reset_dual", [](P& p) { p.solver->reset_dual(); })
      .def("rho", [](const P& p, int b) { return p.solver->rho(b); })
      .def("solve", [](P& p, const Arr<S>& x, const Arr<S>& ref, py::array_t<S, py::array::c_style> xu, double budget_s) {
        auto& s = *p.solver;
        check_shape<S>(x, {s.batch(), s.nx()}, "xcur_B");
        check_shape<S>(ref, {s.batch(), 6L * s.N()}, "eepos_goals_B");
        Arr<S> xu_c = xu;
        check_shape<S>(xu_c, {s.batch(), s.xu_size()}, "xu");
        S* out = xu.mutable_data();
        {
          py::gil_scoped_release nogil;
          s.solve(x.data(), ref.data(), out, budget_s);
        }
      }, py::arg("x"), py::arg("ref"), py::arg("xu"), py::arg("budget_s") = 0.0)
      .def("set_row_groups", [](P& p, const py::list& groups) {
        std::vector<RowGroupSpec> v;
        for (auto g : groups) v.push_back(group_from_dict(py::cast<py::dict>(g)));
        p.solver->set_row_groups(v);
      })
      .def("set_admm_config", [](P& p, int iters, double eps_abs, double eps_rel, int check_every,
                                 int linsys, bool merit, bool rho_adapt) {
        AdmmConfig c;
        c.iters = iters; c.eps_abs = eps_abs; c.eps_rel = eps_rel; c.check_every = check_every;
        c.linsys = static_cast<AdmmLinSys>(linsys); c.merit = merit; c.rho_adapt = rho_adapt;
        p.solver->set_admm_config(c);
      }, py::arg("iters"), py::arg("eps_abs"), py::arg("eps_rel"), py::arg("check_every"),
         py::arg("linsys"), py::arg("merit"), py::arg("rho_adapt"))
      .def("get_row_state", [](const P& p, int which) {
        const auto& s = *p.solver;
        py::array_t<S> out({long(s.batch()), long(kMaxRowGroups), long(s.N()), long(kMaxRowsPerGroup)});
        s.get_row_state(which, out.mutable_data());
        return out;
      })
      .def("get_admm_rho_scale", [](const P& p) {
        py::array_t<double> out(p.solver->batch());
        p.solver->get_admm_rho_scale(out.mutable_data());
        return out;
      })
      .def("get_state", [](const P& p) {
        const auto& s = *p.solver;
        py::array_t<double> out({long(s.batch()), long(s.state_size())});
        s.get_state(out.mutable_data());
        return out;
      })
      .def("set_state", [](P& p, const Arr<double>& v) {
        auto& s = *p.solver;
        check_shape<double>(v, {s.batch(), s.state_size()}, "solver_state");
        p.solver->set_state(v.data());
      })
      .def("stats", [](const P& p) {
        const auto& st = p.solver->stats();
        const int B = p.solver->batch(), I = p.solver->settings().max_sqp_iters, n = st.iters_run;
        auto take = [&](const auto& v) {
          using T = typename std::decay_t<decltype(v)>::value_type;
          py::array_t<T> a({B, n});
          for (int b = 0; b < B; ++b) for (int i = 0; i < n; ++i) a.mutable_at(b, i) = v[size_t(b) * I + i];
          return a;
        };
        py::dict d;
        d["solve_time_us"] = st.solve_time_us;
        d["iters_run"] = n;
        d["budget_hit"] = st.budget_hit;
        d["sqp_iters"] = py::array_t<int>(B, st.sqp_iters.data());
        py::array_t<bool> conv(B);
        for (int b = 0; b < B; ++b) conv.mutable_at(b) = st.converged[b] != 0;
        d["kkt_converged"] = conv;
        d["initial_merit"] = py::array_t<double>(B, st.initial_merit.data());
        d["final_merit"] = py::array_t<double>(B, st.final_merit.data());
        d["pcg_iters"] = take(st.pcg_iters);
        d["min_merit"] = take(st.min_merit);
        d["step_size"] = take(st.step_size);
        d["pcg_times_us"] = py::array_t<double>(n, st.linsys_time_us.data());
        std::vector<int> used(st.linsys_used.begin(), st.linsys_used.begin() + n);
        d["linsys_used"] = used;
        py::dict prof;
        prof["kkt_us"] = st.t_kkt_us;
        prof["schur_us"] = st.t_schur_us;
        prof["linsys_us"] = st.t_linsys_us;
        prof["linesearch_us"] = st.t_linesearch_us;
        d["profile"] = prof;
        const int G = st.n_groups;
        d["n_groups"] = G;
        if (G > 0) {
          py::array_t<double> vmax({B, G}), vsum({B, G});
          for (int b = 0; b < B; ++b)
            for (int g = 0; g < G; ++g) {
              vmax.mutable_at(b, g) = st.row_max_violation[size_t(b) * G + g];
              vsum.mutable_at(b, g) = st.row_sum_violation[size_t(b) * G + g];
            }
          d["row_max_violation"] = vmax;
          d["row_sum_violation"] = vsum;
          d["admm_r_prim"] = py::array_t<double>(B, st.admm_r_prim.data());
          d["admm_r_dual"] = py::array_t<double>(B, st.admm_r_dual.data());
          d["admm_iters"] = py::array_t<int>(B, st.admm_iters.data());
          d["admm_linsys_iters"] = py::array_t<int>(B, st.admm_linsys_iters.data());
        }
        return d;
      })
      .def("debug_setup_kkt", [](P& p, const Arr<S>& xu, const Arr<S>& x, const Arr<S>& ref) {
        auto& s = *p.solver;
        const long B = s.batch(), N = s.N(), nx = s.nx(), nu = s.nu();
        check_shape<S>(xu, {B, s.xu_size()}, "xu_B");
        check_shape<S>(x, {B, nx}, "xcur_B");
        check_shape<S>(ref, {B, 6 * N}, "eepos_goals_B");
        py::array_t<S> Q({B, N, nx, nx}), R({B, N - 1, nu, nu}), q({B, N, nx}), r({B, N - 1, nu}),
            A({B, N - 1, nx, nx}), Bm({B, N - 1, nx, nu}), c({B, N, nx});
        s.debug_setup_kkt(xu.data(), x.data(), ref.data(), Q.mutable_data(), R.mutable_data(),
                          q.mutable_data(), r.mutable_data(), A.mutable_data(), Bm.mutable_data(),
                          c.mutable_data());
        py::dict d;
        d["Q"] = Q; d["R"] = R; d["q"] = q; d["r"] = r; d["A"] = A; d["B"] = Bm; d["c"] = c;
        return d;
      })
      .def("merit", [](P& p, const Arr<S>& xu, const Arr<S>& x, const Arr<S>& ref) {
        auto& s = *p.solver;
        check_shape<S>(xu, {s.batch(), s.xu_size()}, "xu_B");
        check_shape<S>(x, {s.batch(), s.nx()}, "xcur_B");
        check_shape<S>(ref, {s.batch(), 6L * s.N()}, "eepos_goals_B");
        py::array_t<S> out(s.batch());
        s.merit(xu.data(), x.data(), ref.data(), out.mutable_data());
        return out;
      })
      .def("get_lambda", [](const P& p) {
        const auto& s = *p.solver;
        py::array_t<S> out({long(s.batch()), long(s.N()), long(s.nx())});
        s.get_lambda(out.mutable_data());
        return out;
      })
      .def("sim_forward", [](P& p, const Arr<S>& x, const Arr<S>& u, double h) {
        auto& s = *p.solver;
        check_shape<S>(x, {s.batch(), s.nx()}, "xk");
        check_shape<S>(u, {s.batch(), s.nu()}, "uk");
        py::array_t<S> out({long(s.batch()), long(s.nx())});
        s.sim_forward(x.data(), u.data(), S(h), out.mutable_data());
        return out;
      })
      // Host-side kinematics and dynamics of the solver's own plant (tests, tools).
      .def_property_readonly("lean_dynamics_available",
                             [](const P& p) { return p.plant->lean_model() != nullptr; })
      .def_property("lean_dynamics", [](const P& p) { return p.plant->use_lean(); },
                    [](P& p, bool on) { p.plant->set_use_lean(on); })
      .def("frame_position", [](P& p, const Arr<S>& q, int fid) {
        check_shape<S>(q, {p.plant->nq()}, "q");
        py::array_t<S> out(3);
        p.plant->frame_position(*p.ws, q.data(), out.mutable_data(), fid);
        return out;
      }, py::arg("q"), py::arg("frame_id") = -1)
      .def("ee_position_jacobian", [](P& p, const Arr<S>& q) {
        check_shape<S>(q, {p.plant->nq()}, "q");
        py::array_t<S> pos(3);
        MatX<S> J(3, p.plant->nv());
        p.plant->ee_position_jacobian(*p.ws, q.data(), pos.mutable_data(), J);
        MatX<S> Jt = J.transpose();  // row-major copy out
        py::array_t<S> Ja({3L, long(p.plant->nv())});
        for (int i = 0; i < 3; ++i) for (int j = 0; j < p.plant->nv(); ++j) Ja.mutable_at(i, j) = J(i, j);
        return py::make_tuple(pos, Ja);
      })
      .def("forward_dynamics", [](P& p, const Arr<S>& q, const Arr<S>& v, const Arr<S>& tau, py::object fext) {
        const long nv = p.plant->nv();
        check_shape<S>(q, {nv}, "q"); check_shape<S>(v, {nv}, "qd"); check_shape<S>(tau, {nv}, "u");
        Arr<S> f;
        const S* fp = nullptr;
        if (!fext.is_none()) {
          f = py::cast<Arr<S>>(fext);
          check_shape<S>(f, {6L * p.plant->nbodies()}, "f_ext");
          fp = f.data();
        }
        py::array_t<S> out(nv);
        p.plant->forward_dynamics(*p.ws, q.data(), v.data(), tau.data(), fp, out.mutable_data());
        return out;
      }, py::arg("q"), py::arg("qd"), py::arg("u"), py::arg("f_ext") = py::none())
      .def("forward_dynamics_derivatives", [](P& p, const Arr<S>& q, const Arr<S>& v, const Arr<S>& tau) {
        const long nv = p.plant->nv();
        check_shape<S>(q, {nv}, "q"); check_shape<S>(v, {nv}, "qd"); check_shape<S>(tau, {nv}, "u");
        py::array_t<S> qdd(nv);
        MatX<S> dq(nv, nv), dv(nv, nv), Mi(nv, nv);
        p.plant->forward_dynamics_derivatives(*p.ws, q.data(), v.data(), tau.data(), nullptr,
                                              qdd.mutable_data(), dq, dv, Mi);
        auto out = [&](const MatX<S>& M) {
          py::array_t<S> a({nv, nv});
          for (int i = 0; i < nv; ++i) for (int j = 0; j < nv; ++j) a.mutable_at(i, j) = M(i, j);
          return a;
        };
        return py::make_tuple(qdd, out(dq), out(dv), out(Mi));
      })
      .def("linearize", [](P& p, const Arr<S>& x, const Arr<S>& u, py::object fext) {
        // One knot interval of the solver's integrator: (x+, A, B).
        const long nv = p.plant->nv(), nx = 2 * nv;
        check_shape<S>(x, {nx}, "x"); check_shape<S>(u, {nv}, "u");
        Arr<S> f;
        const S* fp = nullptr;
        if (!fext.is_none()) {
          f = py::cast<Arr<S>>(fext);
          check_shape<S>(f, {6L * p.plant->nbodies()}, "f_ext");
          fp = f.data();
        }
        py::array_t<S> xn(nx);
        MatX<S> A(nx, nx), B(nx, nv);
        dynamics_linearize(*p.plant, *p.ws, *p.dyn, p.solver->settings().integrator, p.solver->dt(),
                           x.data(), u.data(), fp, xn.mutable_data(), A, B);
        py::array_t<S> Aa({nx, nx}), Ba({nx, nv});
        for (int i = 0; i < nx; ++i) {
          for (int j = 0; j < nx; ++j) Aa.mutable_at(i, j) = A(i, j);
          for (int j = 0; j < nv; ++j) Ba.mutable_at(i, j) = B(i, j);
        }
        return py::make_tuple(xn, Aa, Ba);
      }, py::arg("x"), py::arg("u"), py::arg("f_ext") = py::none());
}

}  // namespace

namespace gato {
void bind_executor(py::module_& m);  // bindings_executor.cpp
void bind_osc(py::module_& m);       // bindings_osc.cpp
/// The solver settings from a Python dict (settings_from_dict), for bindings_executor.cpp.
Settings settings_from_py(const py::dict& d) { return settings_from_dict(d); }
/// check_shape for float64 arrays, for bindings_executor.cpp.
void check_shape_f64(const py::array_t<double, py::array::c_style | py::array::forcecast>& a,
                     std::initializer_list<long> shape, const char* name) {
  check_shape<double>(a, shape, name);
}
}

// The same sources build two modules (CMakeLists.txt): _core for any x86-64
// CPU and _core_avx2 with AVX2 + FMA; gato._native imports the one the CPU runs.
#ifndef GATO_MODULE_NAME
#define GATO_MODULE_NAME _core
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define GATO_MODULE_ISA "avx2+fma"
#else
#define GATO_MODULE_ISA "baseline"
#endif

PYBIND11_MODULE(GATO_MODULE_NAME, m) {
  m.doc() = "gato C++ core: batched SQP solver (CPU backend) over a pinocchio plant";
  m.attr("ISA") = GATO_MODULE_ISA;
  bind_solver<double>(m, "Solver64");
  bind_solver<float>(m, "Solver32");
  m.attr("LINSYS_PCG") = int(LinSys::kPcg);
  m.attr("LINSYS_BDSV") = int(LinSys::kBdsv);
  m.attr("LINSYS_BDSV_FIRST") = int(LinSys::kBdsvFirst);
  m.attr("INTEGRATOR_EULER") = int(Integrator::kEuler);
  m.attr("INTEGRATOR_SEMI_IMPLICIT") = int(Integrator::kSemiImplicit);
  m.attr("INTEGRATOR_RK4") = int(Integrator::kRk4);
  m.attr("LIMIT_MARGIN") = kLimitMargin;
  m.attr("BARRIER_EPS") = kBarrierEps;
  m.attr("MAX_ROW_GROUPS") = kMaxRowGroups;
  m.attr("MAX_ROWS_PER_GROUP") = kMaxRowsPerGroup;
  gato::bind_executor(m);
  gato::bind_osc(m);
}
