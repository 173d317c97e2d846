"""The CUDA backend on a GPU: gato._cuda's kernels against the host run of the same code
(gato._cuda_host) and against the CPU backend, on iiwa14 N = 32 figure-8 windows.

These need gato._cuda (built where nvcc is found) and a CUDA device; without them every
test skips with the reason ("no CUDA device (...)" / "gato._cuda is not built"). With
GATO_REQUIRE_GPU=1 (bench/gpu_check.sh) a missing device fails instead of skipping.
The host-side checks of the same numeric core are test/test_cuda_core.py (the feedback gains:
test/test_cuda_gains.py; the EE orientation term: test/test_cuda_orientation.py).
"""
import os

import numpy as np
import pytest

import gato

from test_cuda_core import B, DT, N, fig8_windows

OK, WHY = gato.cuda_backend.cuda_device()
if not OK and os.environ.get("GATO_REQUIRE_GPU") == "1":
    raise RuntimeError(f"GATO_REQUIRE_GPU=1 but {WHY}")
pytestmark = pytest.mark.skipif(not OK, reason=WHY if WHY.startswith("no CUDA device") else f"no CUDA device: {WHY}")


def solvers(dtype, linsys, batch=B, **kw):
    p = dict(max_sqp_iters=5, linsys=linsys, dtype=dtype, **kw)
    urdf = gato.robot_urdf("iiwa14")
    return (gato.BSQP(urdf, batch, N, DT, backend="cuda", **p),
            gato.BSQP(urdf, batch, N, DT, backend="cuda_host", **p),
            gato.BSQP(urdf, batch, N, DT, backend="cpu", **p))


@pytest.mark.parametrize("linsys", ["bdsv", "pcg", "bdsv_first"])
def test_gpu_matches_the_host_run_and_the_cpu_backend_in_double(linsys):
    gpu, host, cpu = solvers(np.float64, linsys)
    x, ref, xu = fig8_windows(None, np.float64)
    rg, rh, rc = (s.solve(x, ref, xu_warm=xu) for s in (gpu, host, cpu))
    # The same code on another processor (the device's sin / cos / log within an ulp or two
    # of the host's): equal to rounding, like the host run against the CPU backend.
    np.testing.assert_allclose(rg.xu, rh.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.xu, rc.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.stats.final_merit, rc.stats.final_merit, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(rg.stats.step_size, rc.stats.step_size)
    np.testing.assert_array_equal(rg.stats.pcg_iters, rc.stats.pcg_iters)
    np.testing.assert_allclose(gpu.get_lambda(), cpu.get_lambda(), rtol=0, atol=1e-6 * np.abs(cpu.get_lambda()).max())
    np.testing.assert_allclose(gpu.rho(), cpu.rho(), rtol=1e-12)
    # The second solve starts from the kept dual and rho next to the optimum, where rounding
    # alone may pick another step size (test_cuda_core.py): merits to 1e-8, plans to 1e-4.
    rg, rc = (s.solve(x, ref, xu_warm=xu) for s in (gpu, cpu))
    np.testing.assert_allclose(rg.stats.final_merit, rc.stats.final_merit, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.xu, rc.xu, rtol=0, atol=1e-4)


def test_gpu_float32_tracks_the_double_solution():
    """float32 after 5 iterations is ~0.1 off the double merit on both CPU paths (measured:
    CPU float32 0.09-0.14, host run 0.11-0.15 of |merit| ~3.5): the GPU must do as well."""
    gpu, _, cpu32 = solvers(np.float32, "bdsv")
    _, _, cpu64 = solvers(np.float64, "bdsv")
    x, ref, xu = fig8_windows(None, np.float64)
    m64 = np.asarray(cpu64.solve(x, ref, xu_warm=xu).stats.final_merit)
    args = (x.astype(np.float32), ref.astype(np.float32))
    got = gpu.solve(*args, xu_warm=xu.astype(np.float32))
    err_cpu = np.abs(np.asarray(cpu32.solve(*args, xu_warm=xu.astype(np.float32)).stats.final_merit) - m64).max()
    err_gpu = np.abs(np.asarray(got.stats.final_merit) - m64).max()
    assert err_gpu <= max(3 * err_cpu, 0.01 * np.abs(m64).max()), (err_gpu, err_cpu)
    assert np.all(np.asarray(got.stats.final_merit) < np.asarray(got.stats.initial_merit))


def test_gpu_large_batch_and_its_state_between_solves():
    """B = 256 entries (4 launch blocks of 64 threads), per-entry rho / mu, reset_dual."""
    Bb = 256
    gpu, host, _ = solvers(np.float64, "pcg", batch=Bb)
    x4, ref4, xu4 = fig8_windows(None, np.float64)
    x, ref, xu = (np.repeat(a, Bb // B, axis=0) for a in (x4, ref4, xu4))
    rng = np.random.default_rng(5)
    x = x + np.c_[0.02 * rng.standard_normal((Bb, 7)), np.zeros((Bb, 7))]
    mu = rng.uniform(5, 15, Bb)
    for s in (gpu, host):
        s._s.set_mu_batch(mu)
    rg, rh = gpu.solve(x, ref, xu_warm=xu), host.solve(x, ref, xu_warm=xu)
    np.testing.assert_allclose(rg.xu, rh.xu, rtol=0, atol=1e-8)
    gpu.reset_dual()
    host.reset_dual()
    rg, rh = gpu.solve(x, ref, xu_warm=rg.xu), host.solve(x, ref, xu_warm=rh.xu)
    np.testing.assert_allclose(rg.xu, rh.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(gpu.get_lambda(), host.get_lambda(), rtol=0, atol=1e-6 * np.abs(host.get_lambda()).max())


def test_gpu_external_wrench_and_knot_weights():
    gpu, _, cpu = solvers(np.float64, "bdsv")
    rng = np.random.default_rng(6)
    f = rng.standard_normal((B, N, 42))
    kw = np.abs(rng.standard_normal((N, 3))) * [2.0, 0.01, 1e-5]
    for s in (gpu, cpu):
        s.set_f_ext_B(f)
        s.set_cost_weights_per_knot(kw)
    x, ref, xu = fig8_windows(None, np.float64)
    rg, rc = gpu.solve(x, ref, xu_warm=xu), cpu.solve(x, ref, xu_warm=xu)
    np.testing.assert_allclose(rg.xu, rc.xu, rtol=0, atol=1e-8)


@pytest.mark.parametrize("integrator", ["semi_implicit", "rk4"])
def test_gpu_other_integrators(integrator):
    gpu, _, cpu = solvers(np.float64, "bdsv", integrator=integrator)
    x, ref, xu = fig8_windows(None, np.float64)
    rg, rc = gpu.solve(x, ref, xu_warm=xu), cpu.solve(x, ref, xu_warm=xu)
    np.testing.assert_allclose(rg.xu, rc.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.stats.final_merit, rc.stats.final_merit, rtol=0, atol=1e-8)


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit", "rk4"])
def test_gpu_feedback_gains_match_the_host_run_and_the_cpu_backend(integrator):
    """BSQP.feedback_gains on backend="cuda" (gato_cuda/sqp_gains.hpp in one GPU thread) with a
    wrench band and knot weights: on the CPU backend's plan, equal to the host run of the same code
    and to the CPU backend's gains to 1e-8 (max-norm, relative); of its own plan, to the CPU's
    gains of the CPU's plan to 1e-6; float32 on that plan as close to the double gains as the host
    run's float32 (or within 1e-3)."""
    gpu, host, cpu = solvers(np.float64, "bdsv", integrator=integrator)
    gpu32, host32, _ = solvers(np.float32, "bdsv", integrator=integrator)
    rng = np.random.default_rng(8)
    f = rng.standard_normal((B, N, 42))
    kw = np.abs(rng.standard_normal((N, 3))) * [2.0, 0.01, 1e-5]
    for s in (gpu, host, cpu, gpu32, host32):
        s.set_f_ext_B(f)
        s.set_cost_weights_per_knot(kw)
    x, ref, xu = fig8_windows(None, np.float64)
    plan = np.asarray(cpu.solve(x, ref, xu_warm=xu).xu)
    gpu.solve(x, ref, xu_warm=xu)

    def rel(a, b):
        return np.abs(np.asarray(a, dtype=np.float64) - b).max() / np.abs(b).max()

    for row in range(B):
        args = (plan[row], x[row], ref[row])
        Kc = cpu.feedback_gains(row)
        Kg = gpu._s.feedback_gains(row, *args)
        assert Kg.shape == (N - 1, 7, 14)
        assert rel(Kg, host._s.feedback_gains(row, *args)) < 1e-8
        assert rel(Kg, Kc) < 1e-8
        assert rel(gpu.feedback_gains(row), Kc) < 1e-6
        args32 = tuple(a.astype(np.float32) for a in args)
        err_gpu = rel(gpu32._s.feedback_gains(row, *args32), Kc)
        err_host = rel(host32._s.feedback_gains(row, *args32), Kc)
        assert err_gpu <= max(3 * err_host, 1e-3), (row, err_gpu, err_host)
    with pytest.raises(ValueError, match=r"^feedback_gains: row: expected an integer in \[0, 4\), got 4$"):
        gpu._s.feedback_gains(B, plan[0], x[0], ref[0])


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_gpu_orientation_term_matches_the_host_run_and_the_cpu_backend(integrator):
    """The EE orientation term (gato_cuda/sqp_kkt.hpp orientation_term) on the GPU: rot_cost /
    N_rot_cost, per-axis factors and the per-knot table's 4th column (uploaded with the solve),
    targets 0.2-0.5 rad from the EE's orientation: plans equal to the host run's and the CPU
    backend's to 1e-8, merits to 1e-8; float32 as close to the double plan as the host run's."""
    from test_cuda_core import Q0
    from test_cuda_orientation import ee_rotation, table4, turned

    kw = dict(integrator=integrator, rot_cost=3.0, N_rot_cost=20.0)
    gpu, host, cpu = solvers(np.float64, "bdsv", **kw)
    gpu32, host32, _ = solvers(np.float32, "bdsv", **kw)
    for s in (gpu, host, cpu, gpu32, host32):
        s.set_rot_axis_weights([1.0, 0.4, 2.0])
        s.set_cost_weights_per_knot(table4(11, N))
    x, ref, xu = fig8_windows(None, np.float64)
    rng = np.random.default_rng(15)
    ref = ref.reshape(B, N, 6)
    for b in range(B):
        ref[b, :, 3:] = turned(ee_rotation("iiwa14", Q0), N, rng)
    ref = ref.reshape(B, 6 * N)
    rg, rh, rc = (s.solve(x, ref, xu_warm=xu) for s in (gpu, host, cpu))
    np.testing.assert_allclose(rg.xu, rh.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.xu, rc.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rg.stats.final_merit, rc.stats.final_merit, rtol=0, atol=1e-8)
    args = (x.astype(np.float32), ref.astype(np.float32))
    g32 = np.asarray(gpu32.solve(*args, xu_warm=xu.astype(np.float32)).xu, dtype=np.float64)
    h32 = np.asarray(host32.solve(*args, xu_warm=xu.astype(np.float32)).xu, dtype=np.float64)
    want = np.asarray(rc.xu)
    assert np.abs(g32 - want).max() <= max(3 * np.abs(h32 - want).max(), 1e-3)
