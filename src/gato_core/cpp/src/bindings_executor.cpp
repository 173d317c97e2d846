// gato._core.PlanExecutor: the real-time plan executor (plan_executor.hpp)
// wrapped for tests and tools. Plans go in as NumPy arrays in the plant's joint
// order; update() returns the torque. Shapes are checked here (ValueError).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "gato/embedded_mpc.hpp"
#include "gato/plan_executor.hpp"

namespace py = pybind11;

namespace gato {
// bindings.cpp: its shape check (ValueError "name: expected shape (...), got (...)").
void check_shape_f64(const py::array_t<double, py::array::c_style | py::array::forcecast>& a,
                     std::initializer_list<long> shape, const char* name);

namespace {

using Arr = py::array_t<double, py::array::c_style | py::array::forcecast>;

void expect_shape(const Arr& a, std::initializer_list<long> shape, const char* name) { check_shape_f64(a, shape, name); }

std::vector<double> gains(const py::object& o, const char* name) {
  if (o.is_none()) return {};
  Arr a = py::cast<Arr>(o);
  if (a.ndim() != 1) throw py::value_error(std::string(name) + ": expected a 1-D array (one value per joint)");
  return std::vector<double>(a.data(), a.data() + a.size());
}

FeedbackMode feedback_mode(const std::string& s) {
  if (s == "pd") return FeedbackMode::kPd;
  if (s == "riccati") return FeedbackMode::kRiccati;
  if (s == "riccati+pd") return FeedbackMode::kRiccatiPd;
  throw py::value_error("feedback: expected 'pd', 'riccati' or 'riccati+pd', got '" + s + "'");
}

ExecutorTunables tunables_from(double plan_timeout, const py::object& kp, const py::object& kd,
                               const py::object& hold_damping, double limit_margin, bool use_plan_gains,
                               double hold_frequency_hz, const std::string& feedback,
                               const py::object& feedback_limit) {
  ExecutorTunables t;
  t.feedback = feedback_mode(feedback);
  t.feedback_limit = gains(feedback_limit, "feedback_limit");
  t.hold_frequency_hz = hold_frequency_hz;
  t.plan_timeout_s = plan_timeout;
  t.kp = gains(kp, "kp");
  t.kd = gains(kd, "kd");
  t.hold_damping = gains(hold_damping, "hold_damping");
  t.limit_margin = limit_margin;
  t.use_plan_gains = use_plan_gains;
  return t;
}

py::array_t<double> vec(const std::vector<double>& v) { return py::array_t<double>(long(v.size()), v.data()); }

/// The executor plus its plant and a plan scratch for submit().
struct PyExecutor {
  std::shared_ptr<Plant<double>> plant;
  std::unique_ptr<PlanExecutor> ex;
  ExecutorPlan scratch;
};

const char* mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::kFollow: return "follow";
    case ExecMode::kHold: return "hold";
    case ExecMode::kNoState: return "no_state";
  }
  return "?";
}

/// EmbeddedMpc plus its plant, a plan and a reference window buffer.
struct PyEmbedded {
  std::shared_ptr<Plant<double>> plant;
  std::unique_ptr<EmbeddedMpc> mpc;
  ExecutorPlan plan;
  EeWindow window;
};

}  // namespace

Settings settings_from_py(const py::object& d);  // bindings.cpp: a Settings, a dict or None

void bind_executor(py::module_& m) {
  py::class_<PyEmbedded>(m, "EmbeddedMpc")
      .def(py::init([](const std::string& urdf, const std::string& ee_frame, int N, double dt,
                       const py::object& settings, int warmup_solves, double pose_ee_weight_scale) {
             auto p = std::make_unique<PyEmbedded>();
             p->plant = std::make_shared<Plant<double>>(urdf, ee_frame);
             EmbeddedMpcConfig c;
             c.N = N;
             c.dt = dt;
             c.settings = settings_from_py(settings);
             c.warmup_solves = warmup_solves;
             c.pose_ee_weight_scale = pose_ee_weight_scale;
             p->mpc = std::make_unique<EmbeddedMpc>(p->plant, c);
             p->plan.allocate(p->plant->nv(), N);
             return p;
           }),
           py::arg("urdf"), py::arg("ee_frame"), py::arg("N"), py::arg("dt"), py::arg("settings"),
           py::arg("warmup_solves") = 5, py::arg("pose_ee_weight_scale") = 1.0)
      .def("step", [](PyEmbedded& p, std::int64_t stamp_ns, const Arr& x, const py::object& ref_positions,
                      std::int64_t ref_stamp_ns, double ref_knot_dt, const py::object& ref_orientations) {
        // x (2 nv); ref_positions None or (n, 3) [m] with knot j at ref_stamp_ns + j ref_knot_dt;
        // ref_orientations None or (n, 4) unit quaternions xyzw (issue 30).
        const long nv = p.plant->nv();
        expect_shape(x, {2 * nv}, "x");
        const EeWindow* w = nullptr;
        if (!ref_positions.is_none()) {
          Arr r = py::cast<Arr>(ref_positions);
          const long n = r.ndim() == 2 ? r.shape(0) : -1;
          if (n < 1) throw py::value_error("ref_positions: expected shape (n_knots, 3) with n_knots >= 1");
          expect_shape(r, {n, 3}, "ref_positions");
          if (!(ref_knot_dt > 0.0)) throw py::value_error("ref_knot_dt: must be > 0 s");
          if (p.window.capacity() < n) p.window.allocate(int(n));
          std::copy_n(r.data(), r.size(), p.window.p.begin());
          p.window.n_knots = int(n);
          p.window.stamp_ns = ref_stamp_ns;
          p.window.knot_dt = ref_knot_dt;
          p.window.has_orientations = false;
          if (!ref_orientations.is_none()) {
            Arr o = py::cast<Arr>(ref_orientations);
            expect_shape(o, {n, 4}, "ref_orientations");
            if (!p.window.set_orientations_xyzw(o.data(), int(n)))
              throw py::value_error("ref_orientations: expected finite unit quaternions (x, y, z, w)");
          }
          w = &p.window;
        }
        return p.mpc->step(stamp_ns, x.data(), w, p.plan);
      }, py::arg("stamp_ns"), py::arg("x"), py::arg("ref_positions") = py::none(), py::arg("ref_stamp_ns") = 0,
         py::arg("ref_knot_dt") = 0.0, py::arg("ref_orientations") = py::none(),
         "One MPC step; returns False (and starts cold next time) when the solution is not finite.")
      .def("reset", [](PyEmbedded& p) { p.mpc->reset(); })
      .def_property("pose_ee_weight_scale", [](const PyEmbedded& p) { return p.mpc->pose_ee_weight_scale(); },
                    [](PyEmbedded& p, double v) { p.mpc->set_pose_ee_weight_scale(v); },
                    "factor on q_cost / N_cost of steps toward orientations (issue 30)")
      .def("set_settings", [](PyEmbedded& p, const py::object& s) { p.mpc->set_settings(settings_from_py(s)); })
      .def_property_readonly("ee_orientation_error", [](const PyEmbedded& p) { return p.mpc->ee_orientation_error(); },
                             "[rad] the angle of R_ref^T R_ee of the last step against knot 0's orientation (NaN "
                             "when it solved toward positions only; issue 30)")
      .def_property("gains", [](const PyEmbedded& p) { return p.mpc->gains(); },
                    [](PyEmbedded& p, bool on) { p.mpc->set_gains(on); },
                    "compute the plan's feedback gains every step (plan_K; issue 33)")
      .def_property_readonly("plan_K", [](const PyEmbedded& p) -> py::object {
        // (n_knots - 1, nv, 2 nv) in the executor's sign (torque += K (x_plan - x)), None without gains
        if (!p.plan.has_gains) return py::none();
        const long n = p.plan.n_knots - 1, nv = p.plant->nv();
        py::array_t<double> a({n, nv, 2 * nv});
        std::copy_n(p.plan.K.begin(), n * nv * 2 * nv, a.mutable_data());
        return a;
      })
      .def_property_readonly("xu", [](const PyEmbedded& p) { return vec(p.mpc->xu()); })
      .def_property_readonly("reference", [](const PyEmbedded& p) { return vec(p.mpc->reference()); })
      .def_property_readonly("last_was_cold", [](const PyEmbedded& p) { return p.mpc->last_was_cold(); })
      .def_property_readonly("ee_position_error", [](const PyEmbedded& p) { return p.mpc->ee_position_error(); },
                             "[m] the measured EE of the last step against knot 0 of its reference (NaN before "
                             "the first step and after a failed one; issue 30)")
      .def_property_readonly("plan_x", [](const PyEmbedded& p) {
        const long n = p.plan.n_knots, nx = 2 * p.plant->nv();
        py::array_t<double> a({n, nx});
        std::copy_n(p.plan.x.begin(), n * nx, a.mutable_data());
        return a;
      })
      .def_property_readonly("plan_u", [](const PyEmbedded& p) {
        const long n = p.plan.n_knots - 1, nu = p.plant->nv();
        py::array_t<double> a({n, nu});
        std::copy_n(p.plan.u.begin(), n * nu, a.mutable_data());
        return a;
      });

  using P = PyExecutor;
  py::class_<P>(m, "PlanExecutor")
      .def(py::init([](const std::string& urdf, const std::string& ee_frame, int max_knots, double plan_timeout,
                       const py::object& kp, const py::object& kd, const py::object& hold_damping,
                       double limit_margin, bool use_plan_gains, double hold_frequency_hz,
                       const std::string& feedback, const py::object& feedback_limit) {
             auto p = std::make_unique<P>();
             p->plant = std::make_shared<Plant<double>>(urdf, ee_frame);
             ExecutorConfig c;
             c.max_knots = max_knots;
             c.tunables = tunables_from(plan_timeout, kp, kd, hold_damping, limit_margin, use_plan_gains,
                                        hold_frequency_hz, feedback, feedback_limit);
             p->ex = std::make_unique<PlanExecutor>(p->plant, c);
             p->scratch.allocate(p->plant->nv(), max_knots);
             return p;
           }),
           py::arg("urdf"), py::arg("ee_frame"), py::arg("max_knots") = 128, py::arg("plan_timeout") = 0.1,
           py::arg("kp") = py::none(), py::arg("kd") = py::none(), py::arg("hold_damping") = py::none(),
           py::arg("limit_margin") = 0.05, py::arg("use_plan_gains") = true, py::arg("hold_frequency_hz") = 4.0,
           py::arg("feedback") = "riccati", py::arg("feedback_limit") = py::none())
      .def_property_readonly("nv", [](const P& p) { return p.ex->nv(); })
      .def_property_readonly("max_knots", [](const P& p) { return p.ex->max_knots(); })
      .def_property_readonly("joint_names", [](const P& p) { return p.plant->joint_names(); })
      .def_property_readonly("effort_limit", [](const P& p) {
        const auto& u = p.plant->limits().u_max;
        return py::array_t<double>(u.size(), u.data());
      })
      .def("submit", [](P& p, std::uint64_t seq, std::uint32_t epoch, std::int64_t stamp_ns, double knot_dt,
                        int integrator, const Arr& x, const Arr& u, const py::object& K) {
        const long nv = p.ex->nv(), n = x.ndim() == 2 ? x.shape(0) : -1;
        if (n < 2 || n > p.ex->max_knots())
          throw py::value_error("x: expected (n_knots, " + std::to_string(2 * nv) + ") with 2 <= n_knots <= " +
                                std::to_string(p.ex->max_knots()));
        expect_shape(x, {n, 2 * nv}, "x");
        expect_shape(u, {n - 1, nv}, "u");
        if (integrator < 0 || integrator > 2) throw py::value_error("integrator: expected 0, 1 or 2");
        ExecutorPlan& s = p.scratch;
        s.seq = seq;
        s.epoch = epoch;
        s.stamp_ns = stamp_ns;
        s.knot_dt = knot_dt;
        s.integrator = static_cast<Integrator>(integrator);
        s.n_knots = int(n);
        std::copy_n(x.data(), x.size(), s.x.begin());
        std::copy_n(u.data(), u.size(), s.u.begin());
        s.has_gains = !K.is_none();
        if (s.has_gains) {
          Arr k = py::cast<Arr>(K);
          expect_shape(k, {n - 1, nv, 2 * nv}, "K");
          std::copy_n(k.data(), k.size(), s.K.begin());
        }
        p.ex->submit(s);
      }, py::arg("seq"), py::arg("epoch"), py::arg("stamp_ns"), py::arg("knot_dt"), py::arg("integrator"),
         py::arg("x"), py::arg("u"), py::arg("K") = py::none(),
         "Submit a plan: x (n_knots, 2 nv) [rad, rad/s], u (n_knots - 1, nv) [N*m], K optional "
         "(n_knots - 1, nv, 2 nv). Validation (finite values, sequence, epoch) happens in the next update().")
      .def("update", [](P& p, std::int64_t now_ns, const Arr& q, const Arr& v) {
        const long nv = p.ex->nv();
        expect_shape(q, {nv}, "q");
        expect_shape(v, {nv}, "v");
        py::array_t<double> tau(nv);
        ExecMode mode = p.ex->update(now_ns, q.data(), v.data(), tau.mutable_data());
        return py::make_tuple(tau, mode_name(mode));
      }, py::arg("now_ns"), py::arg("q"), py::arg("v"),
         "One control step: measured q, v (nv) -> (tau (nv) [N*m], mode 'follow' | 'hold' | 'no_state').")
      .def("run_updates", [](P& p, long n, std::int64_t t0_ns, std::int64_t period_ns, const Arr& q, const Arr& v) {
        // n updates at t0 + i * period from a fixed state; returns the last torque (benchmarks, tests).
        const long nv = p.ex->nv();
        expect_shape(q, {nv}, "q");
        expect_shape(v, {nv}, "v");
        py::array_t<double> tau(nv);
        for (long i = 0; i < n; ++i) p.ex->update(t0_ns + i * period_ns, q.data(), v.data(), tau.mutable_data());
        return tau;
      }, py::arg("n"), py::arg("t0_ns"), py::arg("period_ns"), py::arg("q"), py::arg("v"))
      .def("set_tunables", [](P& p, double plan_timeout, const py::object& kp, const py::object& kd,
                              const py::object& hold_damping, double limit_margin, bool use_plan_gains,
                              double hold_frequency_hz, const std::string& feedback,
                              const py::object& feedback_limit) {
        p.ex->set_tunables(tunables_from(plan_timeout, kp, kd, hold_damping, limit_margin, use_plan_gains,
                                         hold_frequency_hz, feedback, feedback_limit));
      }, py::arg("plan_timeout") = 0.1, py::arg("kp") = py::none(), py::arg("kd") = py::none(),
         py::arg("hold_damping") = py::none(), py::arg("limit_margin") = 0.05, py::arg("use_plan_gains") = true,
         py::arg("hold_frequency_hz") = 4.0, py::arg("feedback") = "riccati", py::arg("feedback_limit") = py::none(),
         "Replace the tunables (applied at the next update()); None gains mean 0, None feedback_limit "
         "0.25 x the effort limit.")
      .def("reset", [](P& p) { p.ex->reset(); })
      .def_property_readonly("mode", [](const P& p) { return mode_name(p.ex->mode()); })
      .def_property_readonly("hold_reason", [](const P& p) { return hold_reason_name(p.ex->hold_reason()); })
      .def_property_readonly("has_plan", [](const P& p) { return p.ex->has_plan(); })
      .def_property_readonly("active_seq", [](const P& p) { return p.ex->active_plan().seq; })
      .def_property_readonly("active_epoch", [](const P& p) { return p.ex->active_plan().epoch; })
      .def_property_readonly("q_ref", [](const P& p) { return vec(p.ex->q_ref()); })
      .def_property_readonly("v_ref", [](const P& p) { return vec(p.ex->v_ref()); })
      .def_property_readonly("u_ff", [](const P& p) { return vec(p.ex->u_ff()); })
      .def_property_readonly("tunables", [](const P& p) {
        const auto& t = p.ex->tunables();
        py::dict d;
        d["plan_timeout"] = t.plan_timeout_s;
        d["kp"] = vec(t.kp);
        d["kd"] = vec(t.kd);
        d["hold_damping"] = vec(t.hold_damping);
        d["limit_margin"] = t.limit_margin;
        d["use_plan_gains"] = t.use_plan_gains;
        d["feedback"] = feedback_mode_name(t.feedback);
        d["feedback_limit"] = vec(t.feedback_limit);
        d["hold_frequency_hz"] = t.hold_frequency_hz;
        return d;
      })
      .def_property_readonly("counters", [](const P& p) {
        const auto& c = p.ex->counters();
        py::dict d;
        d["updates"] = c.updates;
        d["follow"] = c.follow;
        d["holds"] = c.holds;
        d["plans_accepted"] = c.plans_accepted;
        d["dropped_out_of_order"] = c.dropped_out_of_order;
        d["dropped_stale_epoch"] = c.dropped_stale_epoch;
        d["dropped_invalid"] = c.dropped_invalid;
        d["nonfinite_states"] = c.nonfinite_states;
        d["nonfinite_outputs"] = c.nonfinite_outputs;
        d["stale_events"] = c.stale_events;
        d["clamped"] = c.clamped;
        d["limit_cuts"] = c.limit_cuts;
        d["dropped_gains"] = c.dropped_gains;
        d["follow_gains"] = c.follow_gains;
        d["gains_saturated"] = c.gains_saturated;
        return d;
      })
      .def("gravity", [](P& p, const Arr& q) {
        // rnea(q, 0, 0) of the executor's plant (nv) [N*m], for tests.
        const long nv = p.ex->nv();
        expect_shape(q, {nv}, "q");
        auto ws = p.plant->make_workspace();
        std::vector<double> z(size_t(nv), 0.0);
        py::array_t<double> g(nv);
        p.plant->inverse_dynamics(*ws, q.data(), z.data(), z.data(), nullptr, g.mutable_data());
        return g;
      }, py::arg("q"));
}

}  // namespace gato
