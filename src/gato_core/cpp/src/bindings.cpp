// pybind11 module gato._core: the C++ solver core, wrapped 1:1. The Python
// facade (gato.interface.BSQP) owns validation, array kinds and copies; this
// layer checks shapes again so a bad call raises instead of reading garbage.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <sstream>
#include <string>

#include "bindings_floating.hpp"
#include "bindings_types.hpp"
#include "gato/solver.hpp"

namespace py = pybind11;
using namespace gato;

namespace {

using pytypes::Arr;
using pytypes::check_shape;

/// A copy of M as a C-ordered array of M's shape.
template <typename S>
py::array_t<S> to_array(const MatX<S>& M) {
  py::array_t<S> a({long(M.rows()), long(M.cols())});
  for (long i = 0; i < M.rows(); ++i)
    for (long j = 0; j < M.cols(); ++j) a.mutable_at(i, j) = M(i, j);
  return a;
}

/// The optional per-body external wrench argument f_ext (None: no wrench), shape (6 nbodies,)
/// checked: its data, or nullptr for None. `keep` holds the converted array while the
/// pointer is in use.
template <typename S>
const S* optional_fext(const py::object& fext, long nbodies, Arr<S>& keep) {
  if (fext.is_none()) return nullptr;
  keep = py::cast<Arr<S>>(fext);
  check_shape<S>(keep, {6L * nbodies}, "f_ext");
  return keep.data();
}

/// Settings from a gato._core.Settings, a dict of field overrides (the legacy form)
/// or None (the defaults); ValueError naming an unknown key or a bad value.
Settings settings_from(py::handle h) { return pytypes::settings_fields().from_py(h); }

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
           const py::object& settings, int threads) {
    const Settings st = settings_from(settings);
    plant = std::make_shared<Plant<S>>(urdf, ee);
    solver = BatchSolver<S>::create(plant, B, N, S(dt), st, threads);
    ws = plant->make_workspace();
    dyn = std::make_unique<DynamicsScratch<S>>(plant->nv());
  }
};

template <typename S>
void bind_solver(py::module_& m, const char* name) {
  using P = PySolver<S>;
  py::class_<P>(m, name)
      .def(py::init<const std::string&, const std::string&, int, int, double, const py::object&, int>(),
           py::arg("urdf"), py::arg("ee_frame"), py::arg("batch"), py::arg("N"), py::arg("dt"),
           py::arg("settings") = py::none(), py::arg("threads") = 1)
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
        return pytypes::limits_dict(p.plant->limits());
      })
      .def("set_settings", [](P& p, const py::object& d) { p.solver->set_settings(settings_from(d)); },
           py::arg("settings"), "Replace the settings: a Settings or a dict of overrides over the defaults.")
      .def_property_readonly("settings", [](const P& p) { return p.solver->settings(); },
                             "A copy of the solver's Settings.")
      .def("set_collect_stats", [](P& p, bool on) { p.solver->set_collect_stats(on); })
      .def("set_linsys", [](P& p, const py::object& l) {
        p.solver->set_linsys(pytypes::parse_enum<LinSys>(l, "set_linsys", "linsys"));
      }, py::arg("linsys"))
      .def("set_rho_batch", [](P& p, const Arr<double>& v) { p.solver->set_rho_batch(to_vec<S>(v)); })
      .def("set_mu_batch", [](P& p, const Arr<double>& v) { p.solver->set_mu_batch(to_vec<S>(v)); })
      .def("set_pcg_tol_batch", [](P& p, const Arr<double>& v) { p.solver->set_pcg_tol_batch(to_vec<S>(v)); })
      .def("set_drho_batch", [](P& p, const Arr<double>& v, bool d) { p.solver->set_drho_batch(to_vec<S>(v), d); })
      .def("set_knot_weights", [](P& p, const Arr<double>& v) { p.solver->set_knot_weights(to_vec<S>(v)); })
      .def("set_u_cost_vec", [](P& p, const Arr<double>& v) { p.solver->set_u_cost_vec(to_vec<S>(v)); })
      .def("set_q_pos_cost", [](P& p, const Arr<double>& v) { p.solver->set_q_pos_cost(to_vec<S>(v)); })
      .def("set_q_nom", [](P& p, const Arr<double>& v) { p.solver->set_q_nom(to_vec<S>(v)); })
      .def("set_rot_axis_weights", [](P& p, const Arr<double>& v) { p.solver->set_rot_axis_weights(to_vec<S>(v)); })
      .def("set_rot_knot_weights", [](P& p, const Arr<double>& v) { p.solver->set_rot_knot_weights(to_vec<S>(v)); })
      .def("set_fext", [](P& p, const Arr<S>& f) {
        const auto& s = *p.solver;
        if (f.size() == 0) { p.solver->set_fext({}); return; }
        check_shape<S>(f, {s.batch(), s.N(), 6L * p.plant->nbodies()}, "f_ext");
        p.solver->set_fext(std::vector<S>(f.data(), f.data() + f.size()));
      })
      .def_property_readonly("has_fext", [](const P& p) { return p.solver->has_fext(); })
      .def("set_ee_payload", [](P& p, double mass, const Arr<double>& com, const Arr<double>& Icom) {
             if (com.size() != 3 || Icom.size() != 9)
               throw py::value_error("payload: expected com (3,) m and Icom (3, 3) kg m^2");
             p.plant->set_ee_payload(mass, com.data(), Icom.data());
           },
           py::arg("mass"), py::arg("com"), py::arg("Icom"),
           "The EE body's inertia: the URDF's plus a rigid payload of mass kg (0: none) centred at com "
           "(EE frame, m) with rotational inertia Icom (3 x 3, EE axes, kg m^2) about its centre.")
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
      .def("set_row_groups", [](P& p, const py::iterable& groups) {
        std::vector<RowGroupSpec> v;
        for (auto g : groups) v.push_back(pytypes::row_group_fields().from_py(g));
        p.solver->set_row_groups(v);
      }, py::arg("groups"), "Install the row groups: RowGroupSpec objects or dicts of their fields.")
      .def("set_admm_config", [](P& p, const py::object& c) {
        p.solver->set_admm_config(pytypes::admm_fields().from_py(c));
      }, py::arg("config"), "ADMM inner-loop settings: an AdmmConfig or a dict of its fields.")
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
      .def("set_collision", [](P& p, const std::vector<int>& frames, const Arr<double>& centres,
                               const Arr<double>& radii, const Arr<double>& obstacles) {
        p.solver->set_collision(frames, to_vec<S>(centres), to_vec<S>(radii), to_vec<S>(obstacles));
      }, py::arg("frames"), py::arg("centres"), py::arg("radii"), py::arg("obstacles"),
         "Collision model: sphere frame ids (n), centres (n*3, frame coordinates), radii (n), "
         "obstacle table (11 numbers per obstacle; docs/constraints.md).")
      .def_property_readonly("n_spheres", [](const P& p) { return p.solver->n_spheres(); })
      .def("collision_clearance", [](P& p, const Arr<S>& q) {
        check_shape<S>(q, {p.plant->nq()}, "q");
        const int n = p.solver->n_spheres(), nv = p.plant->nv();
        py::array_t<S> d(n);
        py::array_t<S> J({long(n), long(nv)});
        p.solver->collision_clearance(q.data(), d.mutable_data(), J.mutable_data());
        return py::make_tuple(d, J);
      }, py::arg("q"), "Sphere clearances (n) [m] at q and their Jacobian (n, nv).")
      .def("points_kinematics", [](P& p, const Arr<S>& q, const std::vector<int>& frames, const Arr<S>& local) {
        check_shape<S>(q, {p.plant->nq()}, "q");
        const int n = int(frames.size()), nv = p.plant->nv();
        check_shape<S>(local, {n, 3}, "local");
        for (int f : frames)
          if (f < 0 || f >= p.plant->nframes()) throw py::value_error("frames: frame id out of range");
        py::array_t<S> pos({long(n), 3L});
        py::array_t<S> J({long(n), 3L, long(nv)});
        p.plant->points_kinematics(*p.ws, q.data(), n, frames.data(), local.data(), pos.mutable_data(),
                                   J.mutable_data());
        return py::make_tuple(pos, J);
      }, py::arg("q"), py::arg("frames"), py::arg("local"),
         "World positions (n, 3) of points fixed in frames and their position Jacobians (n, 3, nv).")
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
        return pytypes::make_stats(p.solver->stats(), p.solver->batch(), p.solver->settings().max_sqp_iters);
      }, "The SolveStats of the last solve.")
      .def("debug_setup_kkt", [](P& p, const Arr<S>& xu, const Arr<S>& x, const Arr<S>& ref) {
        auto& s = *p.solver;
        const long B = s.batch(), N = s.N(), nx = s.nx(), nu = s.nu();
        check_shape<S>(xu, {B, s.xu_size()}, "xu_B");
        check_shape<S>(x, {B, nx}, "xcur_B");
        check_shape<S>(ref, {B, 6 * N}, "eepos_goals_B");
        py::array_t<S> Q({B, N, nx, nx}), R({B, N - 1, nu, nu}), q({B, N, nx}), r({B, N - 1, nu}),
            A({B, N - 1, nx, nx}), Bm({B, N - 1, nx, nu}), c({B, N, nx}), Suq({B, N - 1, nu, nx});
        s.debug_setup_kkt(xu.data(), x.data(), ref.data(), Q.mutable_data(), R.mutable_data(),
                          q.mutable_data(), r.mutable_data(), A.mutable_data(), Bm.mutable_data(),
                          c.mutable_data(), Suq.mutable_data());
        py::dict d;
        d["Q"] = Q; d["R"] = R; d["q"] = q; d["r"] = r; d["A"] = A; d["B"] = Bm; d["c"] = c;
        d["S"] = Suq;  // cross blocks d2l/du dx (u_ref = gravity; zero otherwise)
        return d;
      })
      .def("set_exact_hessian", [](P& p, bool on) { p.solver->set_exact_hessian(on); },
           "Exact-Hessian stage blocks (the 'eh' variant) on or off (Gauss-Newton).")
      .def_property_readonly("exact_hessian", [](const P& p) { return p.solver->exact_hessian(); })
      .def("debug_stage_hessian", [](P& p, const Arr<S>& xu, const Arr<S>& x, const Arr<S>& ref,
                                     const Arr<S>& lam) {
        auto& s = *p.solver;
        const long B = s.batch(), N = s.N(), nx = s.nx(), nz = s.nx() + s.nu();
        check_shape<S>(xu, {B, s.xu_size()}, "xu_B");
        check_shape<S>(x, {B, nx}, "xcur_B");
        check_shape<S>(ref, {B, 6 * N}, "eepos_goals_B");
        check_shape<S>(lam, {B, N, nx}, "lam");
        py::array_t<S> H({B, N, nz, nz});
        s.debug_stage_hessian(xu.data(), x.data(), ref.data(), lam.data(), H.mutable_data());
        return H;
      }, "(B, N, nx+nu, nx+nu) exact Lagrangian stage Hessians at xu with multipliers lam (B, N, nx).")
      .def("debug_ee_pose", [](P& p, const Arr<S>& q) -> py::object {
        auto& s = *p.solver;
        const long nv = s.nu();
        if (q.ndim() != 2 || q.shape(1) != nv) {
          throw std::invalid_argument("q: expected shape (M, " + std::to_string(nv) + ")");
        }
        const long M = q.shape(0);
        py::array_t<S> R({M, 3L, 3L}), Jw({M, 3L, nv});
        if (!s.debug_ee_pose(int(M), q.data(), R.mutable_data(), Jw.mutable_data())) return py::none();
        return py::make_tuple(R, Jw);
      }, "(R (M, 3, 3), Jw (M, 3, nv)): the EE world rotation and angular Jacobian at q (M, nv) from "
         "the multi-lane lean kernels (the orientation term's kinematics); None without a lean model.")
      .def("feedback_gains", [](P& p, int b, const Arr<S>& xu, const Arr<S>& x, const Arr<S>& ref) {
        auto& s = *p.solver;
        const long N = s.N(), nx = s.nx(), nu = s.nu();
        if (b < 0 || b >= s.batch())
          throw py::value_error("feedback_gains: row: expected an integer in [0, " + std::to_string(s.batch()) +
                                "), got " + std::to_string(b));
        check_shape<S>(xu, {s.xu_size()}, "xu");
        check_shape<S>(x, {nx}, "x_s");
        check_shape<S>(ref, {6 * N}, "ref");
        py::array_t<S> K({N - 1, nu, nx});
        const int bad = s.feedback_gains(b, xu.data(), x.data(), ref.data(), K.mutable_data());
        if (bad >= 0)
          throw py::value_error("feedback gains: R_k + B_k' P_k+1 B_k is not positive definite at knot " +
                                std::to_string(bad));
        return K;
      }, "(N-1, nu, nx) feedback gains of row b's plan xu (L) from x_s (nx) toward ref (6N).")
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
        return py::make_tuple(pos, to_array<S>(J));
      })
      .def("forward_dynamics", [](P& p, const Arr<S>& q, const Arr<S>& v, const Arr<S>& tau, py::object fext) {
        const long nv = p.plant->nv();
        check_shape<S>(q, {nv}, "q"); check_shape<S>(v, {nv}, "qd"); check_shape<S>(tau, {nv}, "u");
        Arr<S> f;
        const S* fp = optional_fext<S>(fext, p.plant->nbodies(), f);
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
        return py::make_tuple(qdd, to_array<S>(dq), to_array<S>(dv), to_array<S>(Mi));
      })
      .def("linearize", [](P& p, const Arr<S>& x, const Arr<S>& u, py::object fext) {
        // One knot interval of the solver's integrator: (x+, A, B).
        const long nv = p.plant->nv(), nx = 2 * nv;
        check_shape<S>(x, {nx}, "x"); check_shape<S>(u, {nv}, "u");
        Arr<S> f;
        const S* fp = optional_fext<S>(fext, p.plant->nbodies(), f);
        py::array_t<S> xn(nx);
        MatX<S> A(nx, nx), B(nx, nv);
        dynamics_linearize(*p.plant, *p.ws, *p.dyn, p.solver->settings().integrator, p.solver->dt(),
                           x.data(), u.data(), fp, xn.mutable_data(), A, B);
        return py::make_tuple(xn, to_array<S>(A), to_array<S>(B));
      }, py::arg("x"), py::arg("u"), py::arg("f_ext") = py::none());
}

}  // namespace

namespace gato {
void bind_executor(py::module_& m);  // bindings_executor.cpp
void bind_osc(py::module_& m);       // bindings_osc.cpp
/// The solver settings from a Settings, a dict of overrides or None (settings_from), for
/// bindings_executor.cpp.
Settings settings_from_py(const py::object& d) { return settings_from(d); }
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
  pytypes::bind_types(m);
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
  gato::floating_py::bind_floating(m);
}
