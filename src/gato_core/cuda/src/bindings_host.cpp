// gato._cuda_host: the CUDA backend's numeric core (src/gato_core/cuda/include/gato_cuda)
// compiled for the HOST by the C++ compiler, always built (no nvcc needed). The tests
// check the very functions the kernels run against pinocchio, finite differences and the
// CPU backend here; the GPU module gato._cuda (bindings_cuda.cpp + kernels.cu) wraps the
// same headers on the device.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "gato/plant.hpp"
#include "model_export.hpp"
#include "solver_binding.hpp"

namespace py = pybind11;

namespace {

template <typename S>
using Arr = py::array_t<S, py::array::c_style | py::array::forcecast>;

template <typename S>
const S* need(const Arr<S>& a, py::ssize_t n, const char* name) {
  if (a.size() != n) throw py::value_error(std::string(name) + ": expected " + std::to_string(n) + " numbers");
  return a.data();
}

/// The device dynamics on the host, for the tests.
template <typename S>
struct Dynamics {
  std::unique_ptr<gato::Plant<S>> plant;
  gato::cuda::DevModel<S> m;
  Dynamics(const std::string& urdf, const std::string& ee) : plant(new gato::Plant<S>(urdf, ee)) {
    m = gato::cuda::export_model(*plant);
  }
};

template <typename S>
void bind_dynamics(py::module_& mod, const char* name) {
  using D = Dynamics<S>;
  py::class_<D>(mod, name)
      .def(py::init<const std::string&, const std::string&>(), py::arg("urdf_path"), py::arg("ee_frame"))
      .def_property_readonly("nv", [](const D& d) { return d.m.n; })
      .def("model_bytes", [](const D& d) {
        return py::bytes(reinterpret_cast<const char*>(&d.m), sizeof(d.m));
      }, "The DevModel's bytes (x86-64 layout): the model file of gato_cuda_check (bench/gpu_check.sh)")
      .def("forward_dynamics",
           [](const D& d, const Arr<S>& q, const Arr<S>& v, const Arr<S>& tau, py::object fext) {
             const int n = d.m.n;
             Arr<S> f;
             if (!fext.is_none()) f = fext.cast<Arr<S>>();
             Arr<S> qdd(n), ee(3);
             gato::cuda::FdScratch<S> s;
             if (!gato::cuda::forward_dynamics(d.m, s, need(q, n, "q"), need(v, n, "v"), need(tau, n, "tau"),
                                               fext.is_none() ? nullptr : need(f, 6 * n, "fext"),
                                               qdd.mutable_data(), ee.mutable_data()))
               throw py::value_error("q: the joint-space inertia is not positive definite");
             return py::make_tuple(qdd, ee);
           },
           py::arg("q"), py::arg("v"), py::arg("tau"), py::arg("fext") = py::none())
      .def("derivatives",
           [](const D& d, const Arr<S>& q, const Arr<S>& v, const Arr<S>& tau, py::object fext) {
             const int n = d.m.n;
             Arr<S> f;
             if (!fext.is_none()) f = fext.cast<Arr<S>>();
             Arr<S> qdd(n), dq({n, n}), dv({n, n}), Mi({n, n}), ee(3), J({3, n});
             gato::cuda::FdScratch<S> s;
             if (!gato::cuda::forward_dynamics_derivatives(
                     d.m, s, need(q, n, "q"), need(v, n, "v"), need(tau, n, "tau"),
                     fext.is_none() ? nullptr : need(f, 6 * n, "fext"), qdd.mutable_data(), dq.mutable_data(),
                     dv.mutable_data(), Mi.mutable_data(), ee.mutable_data(), J.mutable_data()))
               throw py::value_error("q: the joint-space inertia is not positive definite");
             return py::make_tuple(qdd, dq, dv, Mi, ee, J);
           },
           py::arg("q"), py::arg("v"), py::arg("tau"), py::arg("fext") = py::none())
      .def("ee_rotation",
           [](const D& d, const Arr<S>& q) {
             const int n = d.m.n;
             Arr<S> R({3, 3}), Jw({3, n});
             gato::cuda::WBody<S> w[gato::cuda::kMaxBodies];
             gato::cuda::kinematics(d.m, need(q, n, "q"), w);
             gato::cuda::ee_rotation(d.m, w, R.mutable_data());
             gato::cuda::ee_angular_jacobian(d.m, w, Jw.mutable_data());
             return py::make_tuple(R, Jw);
           },
           py::arg("q"), "(R (3, 3) world <- EE, Jw (3, nv) world angular Jacobian) at q: the orientation "
                         "term's kinematics (rbd.hpp)");
}

}  // namespace

PYBIND11_MODULE(_cuda_host, m) {
  m.doc() = "The CUDA backend's numeric core run on the host (tests; see docs/cuda.md)";
  m.attr("max_bodies") = gato::cuda::kMaxBodies;
  bind_dynamics<double>(m, "Dynamics64");
  bind_dynamics<float>(m, "Dynamics32");
  gato::cuda::bind_solver<gato::cuda::HostBatch<double>>(m, "HostSolver64");
  gato::cuda::bind_solver<gato::cuda::HostBatch<float>>(m, "HostSolver32");
}
