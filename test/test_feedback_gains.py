"""gato.BSQP.feedback_gains: the plan's time-varying Riccati gains (docs/solver_method.md,
"Feedback gains"), through the public API only.

- against a NumPy reference on the same linearisation (debug_setup_kkt's blocks): the dense
  KKT system of the equality-constrained QP started at knot k, solved for unit initial
  states, gives du_k/dx_k column by column (no Riccati recursion in the reference);
- against central finite differences of a converged solve's u_0 with respect to x_0, at a
  zero-residual plan (the Gauss-Newton model is the exact Hessian there);
- bad input: the exact errors; and a gains call leaves the next solve bit for bit unchanged.
The CUDA backend's gains (the same model, its own code): test/test_cuda_gains.py.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from conftest import build_core_consumer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solver_inputs import HOME as ROBOTS, goal_ref, perturbed_state  # noqa: E402

INTEGRATORS = ["euler", "semi_implicit", "rk4"]


def dense_tail_gain(kkt, row, k):
    """du_k/dx_k (nu, nx) of the LQ model of knots k..N-1: the dense KKT solve of
    min sum_j 1/2 [dx_j; du_j]' [[Q_j, S_j'], [S_j, R_j]] [dx_j; du_j] + 1/2 dx' Q_{N-1} dx
    s.t. dx_k = e_i, dx_{j+1} = A_j dx_j + B_j du_j, for every unit vector e_i."""
    Q, R, S, A, B = (kkt[n][row] for n in ("Q", "R", "S", "A", "B"))
    N, nx, nu = Q.shape[0], Q.shape[1], R.shape[1]
    n_knots = N - k
    nz = n_knots * nx + (n_knots - 1) * nu
    H = np.zeros((nz, nz))
    xi = lambda j: slice((j - k) * nx, (j - k + 1) * nx)  # noqa: E731
    ui = lambda j: slice(n_knots * nx + (j - k) * nu, n_knots * nx + (j - k + 1) * nu)  # noqa: E731
    for j in range(k, N):
        H[xi(j), xi(j)] = Q[j]
        if j < N - 1:
            H[ui(j), ui(j)] = R[j]
            H[ui(j), xi(j)] = S[j]
            H[xi(j), ui(j)] = S[j].T
    C = np.zeros((n_knots * nx, nz))
    C[:nx, xi(k)] = np.eye(nx)
    for j in range(k, N - 1):
        r = slice((j - k + 1) * nx, (j - k + 2) * nx)
        C[r, xi(j + 1)] = np.eye(nx)
        C[r, xi(j)] = -A[j]
        C[r, ui(j)] = -B[j]
    KKT = np.block([[H, C.T], [C, np.zeros((C.shape[0], C.shape[0]))]])
    rhs = np.zeros((KKT.shape[0], nx))
    rhs[nz:nz + nx] = np.eye(nx)
    sol = np.linalg.solve(KKT, rhs)
    return sol[ui(k)]


def rel_err(got, want):
    return np.abs(got - want).max() / np.abs(want).max()


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("u_ref", ["zero", "gravity"])
def test_gains_match_the_dense_lq_reference(robot, integrator, u_ref):
    """Every K_k of batch row 1 equals the dense KKT solution of the LQ model on the same
    linearisation to 1e-8 (max-norm, relative), at a plan partway to an offset goal (nonzero
    residuals and barriers on), with the cross blocks of u_ref = gravity or without."""
    rng = np.random.default_rng(11)
    N, dt, B = 8, 0.02, 2
    s = gato.BSQP(gato.robot_urdf(robot), B, N, dt, integrator=integrator, max_sqp_iters=3, linsys="bdsv",
                  u_ref=u_ref, u_cost=1e-4, q_lim_cost=0.01, vel_lim_cost=0.01, ctrl_lim_cost=1e-3)
    xs = np.stack([perturbed_state(ROBOTS[robot], rng) for _ in range(B)])
    refs = np.stack([goal_ref(s, x) for x in xs])
    res = s.solve(xs, refs)
    K = s.feedback_gains(1)
    assert K.shape == (N - 1, s.nu, s.nx) and K.dtype == np.float64
    kkt = s.debug_setup_kkt(np.asarray(res.xu), xs, refs)
    if u_ref == "gravity":
        assert np.abs(kkt["S"][1]).max() > 0  # the cross blocks are in the model
    for k in range(N - 1):
        want = dense_tail_gain(kkt, 1, k)
        assert rel_err(K[k], want) < 1e-8, (k, rel_err(K[k], want))
    # Row 0 is a different plan: its gains differ.
    assert rel_err(s.feedback_gains(0)[0], K[0]) > 1e-6


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_active_rows_enter_the_gains_through_their_linearisation(robot):
    """An augmented-Lagrangian EE terminal equality row (always active) is in the model the
    gains come from: they equal the dense LQ reference on the blocks with the row's
    Gauss-Newton Hessian, and differ from the gains of the same plan without the row."""
    rng = np.random.default_rng(12)
    N, dt = 8, 0.02
    s = gato.BSQP(gato.robot_urdf(robot), 1, N, dt, max_sqp_iters=4, linsys="bdsv", u_cost=1e-4)
    x = perturbed_state(ROBOTS[robot], rng)
    ref = goal_ref(s, x)
    s.enable_limit_al()  # appended rows take the limit groups' mechanism (AL)
    s.enable_ee_terminal_equality(ref[6 * (N - 1):6 * (N - 1) + 3], rho=50.0)
    res = s.solve(x[None], ref[None])
    K = s.feedback_gains()
    kkt = s.debug_setup_kkt(np.asarray(res.xu), x[None], ref[None])
    for k in range(N - 1):
        assert rel_err(K[k], dense_tail_gain(kkt, 0, k)) < 1e-8
    s.disable_row_groups()
    assert rel_err(s.feedback_gains()[0], K[0]) > 1e-3


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("u_ref", ["zero", "gravity"])
def test_core_gains_equal_their_numpy_twin(robot, u_ref):
    """The C++ recursion (BatchSolver::feedback_gains) and the NumPy one (riccati_gains on
    debug_setup_kkt's blocks) agree to 1e-10, zero-weight floor included (u_cost = 0)."""
    rng = np.random.default_rng(13)
    for u_cost in (1e-4, 0.0):
        s = gato.BSQP(gato.robot_urdf(robot), 2, 6, 0.025, max_sqp_iters=2, u_ref=u_ref, u_cost=u_cost)
        xs = np.stack([perturbed_state(ROBOTS[robot], rng) for _ in range(2)])
        s.solve(xs, np.stack([goal_ref(s, x) for x in xs]))
        for row in (0, 1):
            assert rel_err(s.feedback_gains(row), s.feedback_gains_numpy(row)) < 1e-10


def test_core_gains_allocate_nothing(tmp_path):
    """A C++ consumer of find_package(gato_core) calls BatchSolver::feedback_gains 200 times
    (u_ref zero and gravity) on iiwa14 and indy7 (the fixed-size kernels) while a malloc hook
    counts: no heap call; its control allocation proves the hook counts."""
    exe = build_core_consumer("gains_alloc", tmp_path / "build")
    for robot in ROBOTS:
        run = subprocess.run([str(exe), str(gato.robot_urdf(robot)), gato.robot_info(robot)["ee_frame"]],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        out = dict(line.split("=", 1) for line in run.stdout.split())
        assert int(out["control_allocs"]) >= 1, "the malloc hook does not count: the check would be meaningless"
        assert int(out["calls"]) == 200 and int(out["failed"]) == 0 and int(out["nonfinite"]) == 0
        assert float(out["kmax"]) > 1.0
        assert int(out["gains_allocs"]) == 0 and int(out["gains_frees"]) == 0, run.stdout


def test_float32_gains_follow_the_float64_ones():
    """The float32 solver's gains (its own float32 recursion) at its converged plan are those
    of the float64 solver at its converged plan to float32 accuracy."""
    K64 = equilibrium_solver("iiwa14", "euler")[0].feedback_gains()
    K32 = equilibrium_solver("iiwa14", "euler", dtype=np.float32)[0].feedback_gains()
    assert K32.dtype == np.float64
    assert rel_err(K32, K64) < 1e-3


def equilibrium_solver(robot, integrator, N=8, dt=0.02, dtype=np.float64):
    """A solver and a converged plan whose residuals and multipliers vanish: the arm at rest
    at its home pose, the reference its own EE position, u_ref = gravity (the plan holds
    u = g(q) at zero cost), barriers off. There the Gauss-Newton model is the exact Hessian."""
    s = gato.BSQP(gato.robot_urdf(robot), 1, N, dt, integrator=integrator, max_sqp_iters=60, linsys="bdsv",
                  u_ref="gravity", q_lim_cost=0.0, u_cost=1e-3, qd_cost=0.05, dtype=dtype)
    q = ROBOTS[robot]
    x0 = np.r_[q, np.zeros(s.nv)]
    ref = np.tile(np.r_[s.ee_pos(q), 0.0, 0.0, 0.0], N)
    xu = np.asarray(s.solve(x0[None], ref[None]).xu)
    return s, x0, ref, xu


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_gains_are_the_finite_difference_sensitivity_of_u0(robot, integrator):
    """K_0 = du_0/dx_0 of a converged solve (central differences, h = 1e-5, each solve warm
    from the nominal plan and converged) to 1e-5 relative (max-norm)."""
    s, x0, ref, xu = equilibrium_solver(robot, integrator)
    res = s.solve(x0[None], ref[None], xu)
    assert bool(res.stats.kkt_converged[0])
    K0 = s.feedback_gains()[0]
    nx, nu, h = s.nx, s.nu, 1e-5
    D = np.zeros((nu, nx))
    for i in range(nx):
        d = np.zeros(nx)
        d[i] = h
        up, um = (s.solve((x0 + sgn * d)[None], ref[None], xu) for sgn in (1, -1))
        assert bool(up.stats.kkt_converged[0]) and bool(um.stats.kkt_converged[0])
        D[:, i] = (np.asarray(up.xu)[0, nx:nx + nu] - np.asarray(um.xu)[0, nx:nx + nu]) / (2 * h)
    assert rel_err(K0, D) < 1e-5, rel_err(K0, D)
    assert np.abs(K0).max() > 1.0  # a real feedback (N*m/rad), not a vanishing one


def test_gains_follow_solve_warm_and_the_row():
    """solve_warm records its plan too; the gains of a row are those of that row's plan."""
    s, x0, ref, xu = equilibrium_solver("iiwa14", "euler")
    K = s.feedback_gains()
    s2 = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 8, 0.02, params=s.params)
    s2.set_warm(xu)
    s2.solve_warm(x0, ref[None])
    np.testing.assert_allclose(s2.feedback_gains(0), K, rtol=1e-10, atol=1e-10)


def test_a_gains_call_leaves_the_next_solve_unchanged():
    """feedback_gains re-assembles the KKT blocks; the solver state a solve carries (duals,
    rho) is untouched: the next solve is bit for bit that of a twin solver without the call."""
    rng = np.random.default_rng(5)
    kw = dict(max_sqp_iters=2, q_lim_cost=0.01)
    a, b = (gato.BSQP(gato.robot_urdf("indy7"), 2, 8, 0.02, **kw) for _ in range(2))
    xs = np.stack([perturbed_state(ROBOTS["indy7"], rng) for _ in range(2)])
    refs = np.stack([goal_ref(a, x) for x in xs])
    ra, rb = a.solve(xs, refs), b.solve(xs, refs)
    a.feedback_gains(0)
    a.feedback_gains(1)
    ra, rb = a.solve(xs, refs, ra.xu), b.solve(xs, refs, rb.xu)
    np.testing.assert_array_equal(np.asarray(ra.xu), np.asarray(rb.xu))


def test_bad_input_gets_clear_errors():
    s = gato.BSQP(gato.robot_urdf("indy7"), 2, 6, 0.02)
    for f in (s.feedback_gains, s.feedback_gains_numpy):
        with pytest.raises(ValueError, match=r"^feedback_gains: no solved plan yet: call solve\(\) or solve_warm\(\) "
                                             r"first$"):
            f()
    x = np.r_[ROBOTS["indy7"], np.zeros(6)]
    s.solve(np.stack([x, x]), np.stack([goal_ref(s, x)] * 2))
    for bad in (2, -1, True, 0.0, "0"):
        with pytest.raises(ValueError, match=r"^feedback_gains: row: expected an integer in \[0, 2\), got "):
            s.feedback_gains(bad)


def test_riccati_gains_refuses_a_model_without_a_minimizer():
    """An indefinite control Hessian (no unique minimizer) and a non-finite block are refused
    naming what was wrong."""
    from gato.core.feedback_gains import riccati_gains

    nx, nu = 2, 1
    Q = np.stack([np.eye(nx)] * 3)
    R = -np.ones((2, nu, nu))
    S = np.zeros((2, nu, nx))
    A = np.stack([np.eye(nx)] * 2)
    B = np.zeros((2, nx, nu))
    with pytest.raises(ValueError, match=r"not positive definite at knot 1"):
        riccati_gains(Q, R, S, A, B)
    A[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"linearisation A contains NaN or Inf"):
        riccati_gains(Q, -R, S, A, B)
