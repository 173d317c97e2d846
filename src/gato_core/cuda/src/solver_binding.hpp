// The Python class of a CUDA-backend batch driver (HostBatch in gato._cuda_host,
// DeviceBatch in gato._cuda): the subset of gato._core.Solver{64,32}'s methods that
// gato.BSQP calls, with the same argument forms (Settings objects or dicts, enum names,
// shapes checked) and the same gato._core.SolveStats (gato._core must be imported first:
// the Settings / enum / SolveStats types are its registrations, shared through pybind11).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <vector>

#include "batch_core.hpp"
#include "bindings_types.hpp"

namespace gato {
namespace cuda {

namespace py = pybind11;

template <typename S>
using PyArr = pytypes::Arr<S>;

inline std::vector<double> vec_of(const PyArr<double>& a) { return std::vector<double>(a.data(), a.data() + a.size()); }

template <typename Batch>
void bind_solver(py::module_& m, const char* name) {
  using S = typename std::remove_reference_t<decltype(std::declval<Batch>().lambda())>::value_type;
  py::class_<Batch>(m, name)
      .def(py::init([](const std::string& urdf, const std::string& ee, int B, int N, double dt,
                       const py::object& settings, int /*threads*/) {
             return new Batch(urdf, ee, B, N, dt, pytypes::settings_fields().from_py(settings));
           }),
           py::arg("urdf"), py::arg("ee_frame"), py::arg("batch"), py::arg("N"), py::arg("dt"),
           py::arg("settings") = py::none(), py::arg("threads") = 1)
      .def_property_readonly("nq", [](const Batch& b) { return b.nv(); })
      .def_property_readonly("nv", [](const Batch& b) { return b.nv(); })
      .def_property_readonly("nx", [](const Batch& b) { return 2 * b.nv(); })
      .def_property_readonly("nu", [](const Batch& b) { return b.nv(); })
      .def_property_readonly("N", [](const Batch& b) { return b.N(); })
      .def_property_readonly("batch", [](const Batch& b) { return b.batch(); })
      .def_property_readonly("xu_size", [](const Batch& b) { return b.xu_size(); })
      .def_property_readonly("nbodies", [](const Batch& b) { return b.plant().nbodies(); })
      .def_property_readonly("ee_body", [](const Batch& b) { return b.plant().ee_body(); })
      .def_property_readonly("ee_frame_id", [](const Batch& b) { return b.plant().ee_frame_id(); })
      .def_property_readonly("joint_names", [](const Batch& b) { return b.plant().joint_names(); })
      .def("frame_id", [](const Batch& b, const std::string& n) { return b.plant().frame_id(n); })
      .def_property_readonly("limits", [](const Batch& b) {
        return pytypes::limits_dict(b.plant().limits());
      })
      .def("set_settings", [](Batch& b, const py::object& d) { b.set_settings(pytypes::settings_fields().from_py(d)); })
      .def_property_readonly("settings", [](const Batch& b) { return b.settings(); })
      .def("set_collect_stats", [](Batch&, bool) {})  // the statistics are always collected (per entry, cheap)
      .def("set_linsys", [](Batch& b, const py::object& l) {
        b.set_linsys(pytypes::parse_enum<LinSys>(l, "set_linsys", "linsys"));
      })
      .def("set_rho_batch", [](Batch& b, const PyArr<double>& v) { b.set_rho_batch(vec_of(v)); })
      .def("set_mu_batch", [](Batch& b, const PyArr<double>& v) { b.set_mu_batch(vec_of(v)); })
      .def("set_pcg_tol_batch", [](Batch& b, const PyArr<double>& v) { b.set_pcg_tol_batch(vec_of(v)); })
      .def("set_drho_batch", [](Batch& b, const PyArr<double>& v, bool d) { b.set_drho_batch(vec_of(v), d); })
      .def("set_knot_weights", [](Batch& b, const PyArr<double>& v) { b.set_knot_weights(vec_of(v)); })
      .def("set_rot_axis_weights", [](Batch& b, const PyArr<double>& v) { b.set_rot_axis_weights(vec_of(v)); })
      .def("set_rot_knot_weights", [](Batch& b, const PyArr<double>& v) { b.set_rot_knot_weights(vec_of(v)); })
      .def("set_u_cost_vec", [](Batch& b, const PyArr<double>& v) { b.set_u_cost_vec(vec_of(v)); })
      .def("set_q_pos_cost", [](Batch& b, const PyArr<double>& v) { b.set_q_pos_cost(vec_of(v)); })
      .def("set_q_nom", [](Batch& b, const PyArr<double>& v) { b.set_q_nom(vec_of(v)); })
      .def("set_fext", [](Batch& b, const PyArr<S>& f) {
        if (f.size() == 0) {
          b.set_fext({});
          return;
        }
        pytypes::check_shape<S>(f, {b.batch(), b.N(), 6L * b.plant().nbodies()}, "f_ext");
        b.set_fext(std::vector<S>(f.data(), f.data() + f.size()));
      })
      .def_property_readonly("has_fext", [](const Batch& b) { return b.has_fext(); })
      .def("reset_rho", [](Batch& b) { b.reset_rho(); })
      .def("reset_dual", [](Batch& b) { b.reset_dual(); })
      .def("rho", [](const Batch& b, int i) { return b.rho(i); })
      .def("solve",
           [](Batch& b, const PyArr<S>& x, const PyArr<S>& ref, py::array_t<S, py::array::c_style> xu,
              double budget_s) {
             pytypes::check_shape<S>(x, {b.batch(), 2L * b.nv()}, "xcur_B");
             pytypes::check_shape<S>(ref, {b.batch(), 6L * b.N()}, "eepos_goals_B");
             PyArr<S> xu_c = xu;
             pytypes::check_shape<S>(xu_c, {b.batch(), b.xu_size()}, "xu");
             S* out = xu.mutable_data();
             py::gil_scoped_release nogil;
             b.solve(x.data(), ref.data(), out, budget_s);
           },
           py::arg("x"), py::arg("ref"), py::arg("xu"), py::arg("budget_s") = 0.0)
      .def("stats", [](const Batch& b) {
        return pytypes::make_stats(b.stats(), b.batch(), b.settings().max_sqp_iters);
      })
      .def("get_lambda", [](const Batch& b) {
        py::array_t<S> out({long(b.batch()), long(b.N()), 2L * b.nv()});
        std::copy(b.lambda().begin(), b.lambda().end(), out.mutable_data());
        return out;
      })
      .def("feedback_gains", [](Batch& b, int row, const PyArr<S>& xu, const PyArr<S>& x, const PyArr<S>& ref) {
        const long N = b.N(), nx = 2L * b.nv(), nu = b.nv();
        if (row < 0 || row >= b.batch())
          throw py::value_error("feedback_gains: row: expected an integer in [0, " + std::to_string(b.batch()) +
                                "), got " + std::to_string(row));
        pytypes::check_shape<S>(xu, {b.xu_size()}, "xu");
        pytypes::check_shape<S>(x, {nx}, "x_s");
        pytypes::check_shape<S>(ref, {6 * N}, "ref");
        py::array_t<S> K({N - 1, nu, nx});
        int bad;
        {
          S* out = K.mutable_data();
          py::gil_scoped_release nogil;
          bad = b.feedback_gains(row, xu.data(), x.data(), ref.data(), out);
        }
        if (bad == kGainsNotFinite)
          throw py::value_error("feedback gains: the plan's linearisation (dynamics, cost) is not finite");
        if (bad >= 0)
          throw py::value_error("feedback gains: R_k + B_k' P_k+1 B_k is not positive definite at knot " +
                                std::to_string(bad));
        return K;
      }, py::arg("row"), py::arg("xu"), py::arg("x_s"), py::arg("ref"),
         "(N-1, nu, nx) feedback gains of row's plan xu (L) from x_s (nx) toward ref (6N) "
         "(gato_cuda/sqp_gains.hpp, where this driver runs its iterations).")
      .def("merit", [](Batch& b, const PyArr<S>& xu, const PyArr<S>& x, const PyArr<S>& ref) {
        pytypes::check_shape<S>(xu, {b.batch(), b.xu_size()}, "xu_B");
        pytypes::check_shape<S>(x, {b.batch(), 2L * b.nv()}, "xcur_B");
        pytypes::check_shape<S>(ref, {b.batch(), 6L * b.N()}, "eepos_goals_B");
        py::array_t<S> out(b.batch());
        b.merit(xu.data(), x.data(), ref.data(), out.mutable_data());
        return out;
      })
      .def("sim_forward", [](const Batch& b, const PyArr<S>& x, const PyArr<S>& u, double h) {
        pytypes::check_shape<S>(x, {b.batch(), 2L * b.nv()}, "xk");
        pytypes::check_shape<S>(u, {b.batch(), long(b.nv())}, "uk");
        py::array_t<S> out({long(b.batch()), 2L * b.nv()});
        b.sim_forward(x.data(), u.data(), S(h), out.mutable_data());
        return out;
      })
      .def("frame_position", [](const Batch& b, const PyArr<S>& q, int fid) {
        if (q.size() != b.nv()) throw py::value_error("q: expected " + std::to_string(b.nv()) + " joint positions");
        py::array_t<S> p(3);
        b.frame_position(q.data(), p.mutable_data(), fid);
        return p;
      })
      .def("get_state", [](const Batch&) -> py::object {
        throw py::value_error("get_solver_state: not on the CUDA backend yet (docs/cuda.md)");
      })
      .def("set_state", [](Batch&, const py::object&) {
        throw py::value_error("set_solver_state: not on the CUDA backend yet (docs/cuda.md)");
      })
      .def("debug_setup_kkt", [](Batch& b, const PyArr<S>& xu, const PyArr<S>& x, const PyArr<S>& ref) -> py::object {
        if (!Batch::kOnHost) throw py::value_error("debug_setup_kkt: not on the CUDA backend (docs/cuda.md)");
        // The host run (gato._cuda_host): step 1's blocks from the shared code, as the CPU's.
        const long B = b.batch(), N = b.N(), nx = 2L * b.nv(), nu = b.nv();
        pytypes::check_shape<S>(xu, {B, b.xu_size()}, "xu_B");
        pytypes::check_shape<S>(x, {B, nx}, "xcur_B");
        pytypes::check_shape<S>(ref, {B, 6 * N}, "eepos_goals_B");
        py::array_t<S> Q({B, N, nx, nx}), R({B, N - 1, nu, nu}), q({B, N, nx}), r({B, N - 1, nu}),
            A({B, N - 1, nx, nx}), Bm({B, N - 1, nx, nu}), c({B, N, nx}), Suq({B, N - 1, nu, nx});
        b.debug_setup_kkt(xu.data(), x.data(), ref.data(), Q.mutable_data(), R.mutable_data(), q.mutable_data(),
                          r.mutable_data(), A.mutable_data(), Bm.mutable_data(), c.mutable_data(), Suq.mutable_data());
        py::dict d;
        d["Q"] = Q; d["R"] = R; d["q"] = q; d["r"] = r; d["A"] = A; d["B"] = Bm; d["c"] = c; d["S"] = Suq;
        return d;
      })
      .def("set_admm_config", [](Batch&, const py::args&) {
        throw py::value_error("set_admm_config: the CUDA backend has no constraint row groups yet "
                              "(docs/cuda.md); use backend='cpu'");
      })
      .def("set_row_groups", [](Batch&, const py::iterable& groups) {
        for (auto g : groups) {
          (void)g;
          throw py::value_error("set_row_groups: the CUDA backend has no constraint row groups yet "
                                "(docs/cuda.md); use backend='cpu'");
        }
      });
}

}  // namespace cuda
}  // namespace gato
