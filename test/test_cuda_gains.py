"""BSQP.feedback_gains on the CUDA backend: the Riccati gains of the shared host + device code
(src/gato_core/cuda/include/gato_cuda/sqp_gains.hpp) run on the host (backend="cuda_host",
gato._cuda_host), against the CPU backend (the C++ core's solver_gains.hpp and its NumPy twin
on debug_setup_kkt's blocks) for the same solved problem, on iiwa14 and indy7 with each
integrator the CUDA backend runs; and the errors. The GPU run of the same code is
test/test_cuda_gpu.py::test_gpu_feedback_gains_match_the_host_run_and_the_cpu_backend.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from gato import _cuda_host  # noqa: F401  (built with every core build of the test set, like test_cuda_core)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solver_inputs import HOME as ROBOTS, goal_ref, perturbed_state  # noqa: E402

INTEGRATORS = ["euler", "semi_implicit", "rk4"]
B, N, DT = 2, 8, 0.02


def rel_err(got, want):
    """Max-norm error relative to the largest entry of want."""
    return np.abs(np.asarray(got) - want).max() / np.abs(want).max()


def pair(robot, dtype=np.float64, **kw):
    """The CPU backend and the host run of the CUDA backend with the same settings."""
    p = dict(max_sqp_iters=3, linsys="bdsv", dtype=dtype, **kw)
    urdf = gato.robot_urdf(robot)
    return gato.BSQP(urdf, B, N, DT, **p), gato.BSQP(urdf, B, N, DT, backend="cuda_host", **p)


def problem(solver, robot, seed):
    """B perturbed states near the robot's home pose and EE goals 7 cm off: (xs (B, nx), refs (B, 6N))."""
    rng = np.random.default_rng(seed)
    xs = np.stack([perturbed_state(ROBOTS[robot], rng) for _ in range(B)])
    return xs, np.stack([goal_ref(solver, x) for x in xs])


def check_rows(cpu, host, xs, refs, own_tol=1e-8):
    """Both backends solve; their plans agree to 1e-8; per row, each backend's gains of its own
    plan agree to own_tol, and the CUDA code's gains of the CPU's plan equal the C++ core's and
    the NumPy twin's to 1e-10 (max-norm, relative). Returns the CUDA code's gains per row."""
    rc, rh = cpu.solve(xs, refs), host.solve(xs, refs)
    plan = np.asarray(rc.xu)
    np.testing.assert_allclose(np.asarray(rh.xu), plan, rtol=0, atol=1e-8)
    out = []
    for row in range(B):
        K = host.feedback_gains(row)
        assert K.shape == (N - 1, host.nu, host.nx) and K.dtype == np.float64
        Kc = cpu.feedback_gains(row)
        assert rel_err(K, Kc) < own_tol, (row, rel_err(K, Kc))
        same = host._s.feedback_gains(row, plan[row], xs[row], refs[row])
        assert rel_err(same, Kc) < 1e-10, (row, rel_err(same, Kc))
        assert rel_err(same, cpu.feedback_gains_numpy(row)) < 1e-10
        assert np.abs(K).max() > 1.0  # a real feedback (N*m/rad), not a vanishing one
        out.append(K)
    assert rel_err(out[0], out[1]) > 1e-6  # the rows' plans differ: so do their gains
    return out


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_cuda_host_gains_equal_the_cpu_backends(robot, integrator):
    """u_ref = gravity (the cost's cross blocks S_k in Qux) and the three limit barriers on (their
    Gauss-Newton Hessians in Q_k, R_k), plans partway to an offset goal after 3 iterations."""
    cpu, host = pair(robot, integrator=integrator, u_ref="gravity", u_cost=1e-4, q_lim_cost=0.01,
                     vel_lim_cost=0.01, ctrl_lim_cost=1e-3)
    check_rows(cpu, host, *problem(cpu, robot, 21))


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_cuda_host_gains_with_knot_weights_a_wrench_and_the_zero_weight_floor(robot):
    """Per-knot weights with zero control weights at every other knot and then per-joint control
    weights with a zero entry (the step's zero-weight floor, no control barrier), u_ref = zero,
    the posture anchor and an external-wrench band per row (the row's own band)."""
    rng = np.random.default_rng(22)
    cpu, host = pair(robot, integrator="semi_implicit", u_ref="zero", u_cost=1e-5, ctrl_lim_cost=0.0)
    nv = cpu.nv
    kw = np.abs(rng.standard_normal((N, 3))) * [2.0, 0.01, 1e-4]
    kw[::2, 2] = 0.0
    f = 2.0 * rng.standard_normal((B, N, 6 * cpu.n_bodies))
    for s in (cpu, host):
        s.set_cost_weights_per_knot(kw)
        s.set_f_ext_B(f)
        s.set_q_pos_cost(np.full(nv, 0.1))
        s.set_q_nom(ROBOTS[robot] + 0.05)
    xs, refs = problem(cpu, robot, 23)
    with_knots = check_rows(cpu, host, xs, refs)
    for s in (cpu, host):
        s.set_cost_weights_per_knot(None)
        s.set_u_cost_vec(np.r_[0.0, np.full(nv - 1, 1e-4)])
    check_rows(cpu, host, xs, refs)
    # The wrench band is each row's own: without it the gains change.
    for s in (cpu, host):
        s.set_f_ext_B(np.zeros((B, 6)))
        s.set_cost_weights_per_knot(kw)
        s.set_u_cost_vec(None)
    assert rel_err(check_rows(cpu, host, xs, refs)[0], with_knots[0]) > 1e-6


def test_cuda_host_float32_gains_follow_the_float64_ones():
    """The float32 build of the same code on a float32 copy of a float64 plan: as close to the
    float64 gains as the CPU backend's float32 recursion on that plan (or within 1e-3)."""
    robot = "iiwa14"
    cpu64, host64 = pair(robot, u_ref="gravity", u_cost=1e-3)
    cpu32, host32 = pair(robot, dtype=np.float32, u_ref="gravity", u_cost=1e-3)
    xs, refs = problem(cpu64, robot, 24)
    plan = np.asarray(cpu64.solve(xs, refs).xu)
    args64 = (plan[0], xs[0], refs[0])
    args32 = tuple(a.astype(np.float32) for a in args64)
    K64 = cpu64._s.feedback_gains(0, *args64)
    np.testing.assert_allclose(host64._s.feedback_gains(0, *args64), K64, rtol=0, atol=1e-10 * np.abs(K64).max())
    K32h, K32c = host32._s.feedback_gains(0, *args32), cpu32._s.feedback_gains(0, *args32)
    assert K32h.dtype == np.float32
    err_h, err_c = rel_err(K32h, K64), rel_err(K32c, K64)
    assert err_h <= max(3 * err_c, 1e-3), (err_h, err_c)


def test_a_cuda_host_gains_call_leaves_the_next_solve_unchanged():
    """riccati_gains runs setup_kkt in a workspace of its own: the dual and rho a solve carries are
    untouched, so the next solve is bit for bit that of a twin solver without the call."""
    _, a = pair("indy7", q_lim_cost=0.01)
    _, b = pair("indy7", q_lim_cost=0.01)
    xs, refs = problem(a, "indy7", 25)
    ra, rb = a.solve(xs, refs), b.solve(xs, refs)
    a.feedback_gains(0)
    a.feedback_gains(1)
    ra, rb = a.solve(xs, refs, ra.xu), b.solve(xs, refs, rb.xu)
    np.testing.assert_array_equal(np.asarray(ra.xu), np.asarray(rb.xu))
    np.testing.assert_array_equal(a.get_lambda(), b.get_lambda())


def test_cuda_host_gains_errors_name_what_is_wrong():
    cpu, host = pair("indy7")
    with pytest.raises(ValueError, match=r"^feedback_gains: no solved plan yet: call solve\(\) or solve_warm\(\) "):
        host.feedback_gains()
    xs, refs = problem(cpu, "indy7", 26)
    plan = np.asarray(host.solve(xs, refs).xu)
    for bad in (2, -1, True, 0.0, "0"):
        with pytest.raises(ValueError, match=r"^feedback_gains: row: expected an integer in \[0, 2\), got "):
            host.feedback_gains(bad)
    # The module's own checks (its callers: BSQP, the planners).
    with pytest.raises(ValueError, match=r"^feedback_gains: row: expected an integer in \[0, 2\), got 5$"):
        host._s.feedback_gains(5, plan[0], xs[0], refs[0])
    with pytest.raises(ValueError, match=r"^xu: expected shape"):
        host._s.feedback_gains(0, plan[0, :-1], xs[0], refs[0])
    with pytest.raises(ValueError, match=r"^ref: expected shape"):
        host._s.feedback_gains(0, plan[0], xs[0], refs[0, :-6])
    bad_plan = plan[0].copy()
    bad_plan[host.nx + 2] = np.nan  # a control of knot 0
    with pytest.raises(ValueError, match=r"^feedback gains: the plan's linearisation \(dynamics, cost\) is not "):
        host._s.feedback_gains(0, bad_plan, xs[0], refs[0])
    with pytest.raises(ValueError, match=r"^feedback_gains_numpy: not available on the 'cuda_host' backend"):
        host.feedback_gains_numpy(0)
