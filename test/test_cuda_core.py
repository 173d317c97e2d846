"""The CUDA backend's numeric core (src/gato_core/cuda/include/gato_cuda) run on the host.

gato._cuda_host compiles the very header functions the kernels run (GATO_HD: host +
device) with the host compiler, so these tests run without a GPU:
- the device rigid-body dynamics (world-frame RNEA, CRBA + Cholesky, dual-number
  derivatives) against pinocchio's aba / computeABADerivatives and finite differences;
- the per-entry SQP iteration against the CPU backend on iiwa14 N = 32 figure-8 windows
  (Euler, semi-implicit Euler and RK4)
  (double: the same trajectory to 1e-8; float32: as close to the double solution as the
  CPU backend's float32);
- gato.BSQP(backend="cuda_host") through the public API, and backend selection errors.
The GPU runs of the same code are test/test_cuda_gpu.py.
"""
import numpy as np
import pinocchio as pin
import pytest

import gato
from gato import _cuda_host as H
from gato.tasks import figure8

from test_lean_dynamics import pin_fext, synthetic_tree_urdf

ARMS = ["iiwa14", "indy7", "ur5e", "fr3", "gen3"]
Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])


def check_dynamics(dyn, model, frame, rng, atol, trials=8, fext_every=2):
    data = model.createData()
    fid = model.getFrameId(frame)
    n = model.nv
    for trial in range(trials):
        q = rng.uniform(-1.5, 1.5, n)
        v = 2 * rng.standard_normal(n)
        tau = 20 * rng.standard_normal(n)
        fext = 5 * rng.standard_normal(6 * n) if trial % fext_every == 1 else None
        qdd, dq, dv, Minv, ee, J = dyn.derivatives(q, v, tau, fext)
        if fext is None:
            pin.computeABADerivatives(model, data, q, v, tau)
        else:
            pin.computeABADerivatives(model, data, q, v, tau, pin_fext(model, fext))
        want_Minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
        for got, want in ((qdd, data.ddq), (dq, data.ddq_dq), (dv, data.ddq_dv), (Minv, want_Minv)):
            scale = max(1.0, np.abs(want).max())
            np.testing.assert_allclose(got, want, rtol=0, atol=atol * scale)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(ee, data.oMf[fid].translation, rtol=0, atol=atol)
        Jp = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        np.testing.assert_allclose(J, Jp, rtol=0, atol=atol)
        # The value-only path (the line search's) gives the same qdd and EE position.
        qdd2, ee2 = dyn.forward_dynamics(q, v, tau, fext)
        np.testing.assert_allclose(qdd2, qdd, rtol=0, atol=1e-12 * max(1.0, np.abs(qdd).max()))
        np.testing.assert_allclose(ee2, ee, rtol=0, atol=1e-14)


@pytest.mark.parametrize("robot", ARMS)
def test_device_dynamics_match_pinocchio_on_the_bundled_arms(robot):
    urdf = str(gato.robot_urdf(robot))
    frame = gato.robot_info(robot)["ee_frame"]
    check_dynamics(H.Dynamics64(urdf, frame), pin.buildModelFromUrdf(urdf), frame, np.random.default_rng(0), 1e-9)


def test_device_dynamics_match_pinocchio_on_a_tree_with_unaligned_and_prismatic_axes(tmp_path):
    urdf = str(synthetic_tree_urdf(tmp_path / "tree.urdf"))
    model = pin.buildModelFromUrdf(urdf)
    assert model.nv == 8  # the backend's largest arm (max_bodies)
    assert H.max_bodies == 8
    check_dynamics(H.Dynamics64(urdf, "ee_link"), model, "ee_link", np.random.default_rng(1), 1e-9)


def test_device_dynamics_derivatives_match_central_differences():
    urdf = str(gato.robot_urdf("iiwa14"))
    dyn = H.Dynamics64(urdf, "EE")
    rng = np.random.default_rng(2)
    q, v, tau = rng.uniform(-1, 1, 7), rng.standard_normal(7), 2 * rng.standard_normal(7)
    fext = rng.standard_normal(42)
    _, dq, dv, Minv, ee, J = dyn.derivatives(q, v, tau, fext)
    eps = 1e-5  # central differences: truncation ~eps^2, rounding ~1e-16 |qdd| cond(M) / eps
    for j in range(7):
        e = np.zeros(7)
        e[j] = eps
        fd_q = (dyn.forward_dynamics(q + e, v, tau, fext)[0] - dyn.forward_dynamics(q - e, v, tau, fext)[0]) / (2 * eps)
        fd_v = (dyn.forward_dynamics(q, v + e, tau, fext)[0] - dyn.forward_dynamics(q, v - e, tau, fext)[0]) / (2 * eps)
        fd_t = (dyn.forward_dynamics(q, v, tau + e, fext)[0] - dyn.forward_dynamics(q, v, tau - e, fext)[0]) / (2 * eps)
        fd_p = (dyn.forward_dynamics(q + e, v, tau)[1] - dyn.forward_dynamics(q - e, v, tau)[1]) / (2 * eps)
        np.testing.assert_allclose(dq[:, j], fd_q, rtol=0, atol=1e-5 * max(1.0, np.abs(fd_q).max()))
        np.testing.assert_allclose(dv[:, j], fd_v, rtol=0, atol=1e-5 * max(1.0, np.abs(fd_v).max()))
        np.testing.assert_allclose(Minv[:, j], fd_t, rtol=0, atol=1e-5 * max(1.0, np.abs(fd_t).max()))
        np.testing.assert_allclose(J[:, j], fd_p, rtol=0, atol=1e-8)


def test_device_dynamics_float32_agree_with_double():
    urdf = str(gato.robot_urdf("iiwa14"))
    d64, d32 = H.Dynamics64(urdf, "EE"), H.Dynamics32(urdf, "EE")
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v, tau = rng.uniform(-1.5, 1.5, 7), rng.standard_normal(7), 20 * rng.standard_normal(7)
        for a, b in zip(d64.derivatives(q, v, tau), d32.derivatives(q, v, tau)):
            np.testing.assert_allclose(b, a, rtol=0, atol=2e-3 * max(1.0, np.abs(a).max()))


def test_device_dynamics_reject_bad_input():
    dyn = H.Dynamics64(str(gato.robot_urdf("iiwa14")), "EE")
    with pytest.raises(ValueError, match="q: expected 7"):
        dyn.forward_dynamics(np.zeros(6), np.zeros(7), np.zeros(7))
    with pytest.raises(ValueError, match="fext: expected 42"):
        dyn.derivatives(np.zeros(7), np.zeros(7), np.zeros(7), np.zeros(6))
    with pytest.raises(ValueError, match="ee_frame"):
        H.Dynamics64(str(gato.robot_urdf("iiwa14")), "no_such_frame")


# ------------------------------------------------------------------------------------ SQP
B, N, DT = 4, 32, 0.01


def fig8_windows(solver_cls, dtype):
    """B figure-8 windows (each N samples, start 10 samples apart) around the EE at Q0, the
    state Q0 at rest and the hold trajectory: (x (B, 14), ref (B, 6N), xu (B, L))."""
    urdf = str(gato.robot_urdf("iiwa14"))
    p0 = H.Dynamics64(urdf, "EE").forward_dynamics(Q0, np.zeros(7), np.zeros(7))[1]
    path = figure8(DT, 0.1, 0.08, p0, 0.0, 2.0, cycles=2)
    ref = np.zeros((B, N, 6))
    for b in range(B):
        ref[b, :, :3] = path[10 * b:10 * b + N]
    x = np.tile(np.r_[Q0, np.zeros(7)], (B, 1))
    L = N * 21 - 7
    xu = np.zeros((B, L))
    for k in range(N):
        xu[:, k * 21:k * 21 + 14] = x
    return x.astype(dtype), ref.reshape(B, 6 * N).astype(dtype), xu.astype(dtype)


def pair(dtype, linsys, **kw):
    urdf = str(gato.robot_urdf("iiwa14"))
    integ = kw.pop("integrator", "euler")
    st = gato.SolverParams().replace(linsys=linsys, **kw).to_settings(integrator=integ)
    cpu_cls = gato.cuda_backend.solver_class("cpu", dtype)
    host_cls = gato.cuda_backend.solver_class("cuda_host", dtype)
    return cpu_cls(urdf, "EE", B, N, DT, st, 1), host_cls(urdf, "EE", B, N, DT, st, 1)


@pytest.mark.parametrize("linsys", ["bdsv", "pcg", "bdsv_first"])
def test_host_sqp_matches_the_cpu_backend_in_double(linsys):
    cpu, host = pair(np.float64, linsys, max_sqp_iters=5)
    x, ref, xu = fig8_windows(None, np.float64)
    a, b = xu.copy(), xu.copy()
    cpu.solve(x, ref, a, 0.0)
    host.solve(x, ref, b, 0.0)
    sc, sh = cpu.stats(), host.stats()
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-8)
    np.testing.assert_allclose(sh.final_merit, sc.final_merit, rtol=1e-10)
    np.testing.assert_allclose(sh.initial_merit, sc.initial_merit, rtol=1e-12)
    np.testing.assert_array_equal(sh.sqp_iters, sc.sqp_iters)
    np.testing.assert_array_equal(sh.step_size, sc.step_size)
    np.testing.assert_array_equal(sh.pcg_iters, sc.pcg_iters)
    np.testing.assert_array_equal(sh.kkt_converged, sc.kkt_converged)
    np.testing.assert_allclose(host.get_lambda(), cpu.get_lambda(), rtol=0, atol=1e-6 * np.abs(cpu.get_lambda()).max())
    assert [host.rho(i) for i in range(B)] == pytest.approx([cpu.rho(i) for i in range(B)], rel=1e-12)
    assert np.all(sh.final_merit < sh.initial_merit)
    # A second solve from the kept dual and rho starts next to the optimum: merit decreases
    # of ~1e-12 there, so rounding alone may pick another step size (measured: 0.5 vs 0.25,
    # plans 4e-6 apart) while the merits still agree to 1e-10.
    cpu.solve(x, ref, a, 0.0)
    host.solve(x, ref, b, 0.0)
    np.testing.assert_allclose(host.stats().final_merit, cpu.stats().final_merit, rtol=1e-10)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)


def test_host_sqp_matches_the_cpu_backend_with_every_cost_term_and_a_wrench():
    """Per-knot weights, per-joint control weights, the posture anchor, all three barriers,
    semi-implicit Euler, first-decrease line search and an external wrench band."""
    cpu, host = pair(np.float64, "bdsv", max_sqp_iters=3, vel_lim_cost=0.01, ctrl_lim_cost=1e-4,
                     line_search="first", integrator="semi_implicit")
    rng = np.random.default_rng(4)
    kw = np.abs(rng.standard_normal((N, 3))) * [2.0, 0.01, 1e-5]
    f = rng.standard_normal((B, N, 6 * 7))
    for s in (cpu, host):
        s.set_knot_weights(kw.ravel())
        s.set_u_cost_vec(np.linspace(1e-6, 1e-5, 7))
        s.set_q_pos_cost(np.full(7, 0.1))
        s.set_q_nom(Q0 + 0.05)
        s.set_fext(f)
    x, ref, a, b = _solve_both(cpu, host)
    np.testing.assert_allclose(host.merit(b, x, ref), cpu.merit(a, x, ref), rtol=1e-10)
    u = rng.standard_normal((B, 7))
    np.testing.assert_allclose(host.sim_forward(x, u, 0.01), cpu.sim_forward(x, u, 0.01), rtol=0, atol=1e-12)



def _solve_both(cpu, host):
    """One solve of each backend from the same figure-8 windows (float64); asserts their plans
    (atol 1e-8) and final merits (rtol 1e-10) agree; returns (x, ref, cpu plan, host plan)."""
    x, ref, xu = fig8_windows(None, np.float64)
    a, b = xu.copy(), xu.copy()
    cpu.solve(x, ref, a, 0.0)
    host.solve(x, ref, b, 0.0)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-8)
    np.testing.assert_allclose(host.stats().final_merit, cpu.stats().final_merit, rtol=1e-10)
    return x, ref, a, b

@pytest.mark.parametrize("linsys", ["bdsv", "pcg"])
def test_host_sqp_matches_the_cpu_backend_with_rk4(linsys):
    """RK4: the stage Jacobians chained as the CPU backend's integrator.hpp does."""
    cpu, host = pair(np.float64, linsys, max_sqp_iters=5, integrator="rk4")
    x, ref, a, b = _solve_both(cpu, host)
    np.testing.assert_array_equal(host.stats().step_size, cpu.stats().step_size)
    np.testing.assert_array_equal(host.stats().pcg_iters, cpu.stats().pcg_iters)
    np.testing.assert_allclose(host.merit(b, x, ref), cpu.merit(a, x, ref), rtol=1e-10)
    u = np.random.default_rng(7).standard_normal((B, 7))
    np.testing.assert_allclose(host.sim_forward(x, u, 0.01), cpu.sim_forward(x, u, 0.01), rtol=0, atol=1e-12)


def test_host_sqp_float32_is_as_close_to_the_double_solution_as_the_cpu_float32():
    ref64, _ = pair(np.float64, "bdsv", max_sqp_iters=5)
    cpu32, host32 = pair(np.float32, "bdsv", max_sqp_iters=5)
    x, ref, xu = fig8_windows(None, np.float64)
    want = xu.copy()
    ref64.solve(x, ref, want, 0.0)
    a, b = xu.astype(np.float32), xu.astype(np.float32)
    cpu32.solve(x.astype(np.float32), ref.astype(np.float32), a, 0.0)
    host32.solve(x.astype(np.float32), ref.astype(np.float32), b, 0.0)
    m64 = ref64.stats().final_merit
    err_cpu = np.abs(cpu32.stats().final_merit - m64).max()
    err_host = np.abs(host32.stats().final_merit - m64).max()
    assert err_host <= max(3 * err_cpu, 0.01 * np.abs(m64).max()), (err_host, err_cpu)
    assert np.abs(b - want).max() <= max(3 * np.abs(a - want).max(), 0.05)
    assert np.all(host32.stats().final_merit < host32.stats().initial_merit)


def test_bsqp_backend_cuda_host_through_the_public_api():
    urdf = gato.robot_urdf("iiwa14")
    cpu = gato.BSQP(urdf, B, N, DT, max_sqp_iters=3)
    host = gato.BSQP(urdf, B, N, DT, max_sqp_iters=3, backend="cuda_host")
    assert (cpu.backend, host.backend) == ("cpu", "cuda_host")
    x, ref, _ = fig8_windows(None, np.float64)
    rc, rh = cpu.solve(x, ref), host.solve(x, ref)
    np.testing.assert_allclose(rh.xu, rc.xu, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rh.stats.final_merit, rc.stats.final_merit, rtol=1e-10)
    with pytest.raises(ValueError, match="the CUDA backend has no constraint row groups"):
        host.enable_limit_admm()


def test_backend_selection_errors():
    urdf = gato.robot_urdf("iiwa14")
    with pytest.raises(ValueError, match="backend: expected one of"):
        gato.BSQP(urdf, 1, 4, 0.01, backend="gpu")
    ok, why = gato.cuda_backend.cuda_device()
    if not ok:  # this machine: the clear reason instead of a CUDA error from inside a solve
        with pytest.raises(RuntimeError, match="backend='cuda': .*(not built|no CUDA device)"):
            gato.BSQP(urdf, 1, 4, 0.01, backend="cuda")


# ------------------------------------------------------------------- the standalone check
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
MODEL_FILE = ROOT / "bench" / "cuda_models" / "iiwa14.devmodel"
CHECK_BIN = ROOT / "build" / "gato_core" / "gato_cuda_check"


def test_the_committed_model_file_is_the_exported_iiwa14_model():
    """bench/gpu_check.sh's model file (the standalone check needs no pinocchio) is today's export."""
    dyn = H.Dynamics64(str(gato.robot_urdf("iiwa14")), "EE")
    assert MODEL_FILE.read_bytes() == dyn.model_bytes()


def test_the_standalone_check_builds_the_test_problem():
    """gato_cuda_check --host-only (its problem, the host run of sqp.hpp) gives the CPU backend's
    merits on test_cuda_core's problem: the tool checks the GPU against the right thing."""
    import json
    import subprocess
    if not CHECK_BIN.is_file():
        pytest.skip("gato_cuda_check is built only where nvcc is found (GATO_CUDA=AUTO)")
    out = subprocess.run([str(CHECK_BIN), str(MODEL_FILE), "--iters", "5", "--host-only"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])["final_merit"]
    cpu, _ = pair(np.float64, "bdsv", max_sqp_iters=5)
    x, ref, xu = fig8_windows(None, np.float64)
    cpu.solve(x, ref, xu, 0.0)
    np.testing.assert_allclose(got, cpu.stats().final_merit, rtol=1e-9)
    # Without a GPU it reports the reason and exits 2 instead of crashing.
    ok, why = gato.cuda_backend.cuda_device()
    if not ok:
        r = subprocess.run([str(CHECK_BIN), str(MODEL_FILE)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and '"check": "device", "ok": false' in r.stdout, (r.returncode, r.stdout)
