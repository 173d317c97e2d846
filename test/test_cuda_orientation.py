"""The EE orientation cost term on the CUDA backend (issue 30): the shared host + device code
(gato_cuda/sqp_kkt.hpp orientation_term, gato_cuda/so3.hpp, rbd.hpp ee_rotation /
ee_angular_jacobian) run on the host (backend="cuda_host", gato._cuda_host) against the CPU
backend (cpp/src/cost_terms.hpp EeOrientationTerm), on iiwa14 and indy7 with each integrator:
the EE rotation and angular Jacobian against pinocchio, the KKT blocks, the merit, the plans of
2 SQP iterations, per-knot weights (the table's 4th column), per-axis factors, float32, the
feedback gains, weight 0 bit for bit, and the setters' errors. The GPU run of the same code:
test/test_cuda_gpu.py::test_gpu_orientation_term_matches_the_host_run_and_the_cpu_backend.
"""
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import gato
from gato import _cuda_host as H

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solver_inputs import HOME as ROBOTS, goal_ref, perturbed_state, random_traj  # noqa: E402

INTEGRATORS = ["euler", "semi_implicit", "rk4"]
B, N, DT = 2, 8, 0.02
ROT = dict(rot_cost=3.0, N_rot_cost=20.0)
AXES = np.array([1.0, 0.4, 2.0])
#: cuda_host against the CPU backend, max-norm error relative to the largest entry (issue 30: ~1e-9).
#: Measured: KKT blocks <= 8e-16 (A 7e-12, the dynamics' own, as with the term off), plans after 2
#: SQP iterations <= 1.7e-10.
REL_TOL = 1e-9
#: The final merit of two plans REL_TOL apart. With the term on, the last bits of R(q) are amplified
#: through the steps: the CPU backend's own two kinematics paths (lean kernels vs pinocchio,
#: ``_s.lean_dynamics = False``) give plans up to 1.8e-10 and final merits up to 4.9e-8 apart on
#: these problems (term off: 1e-13 / 2e-10), cuda_host vs the CPU up to 1.7e-10 / 7.2e-8. The merit
#: of the SAME plan agrees to 1e-10 (measured <= 6e-12 at these plans, 4e-14 at a random trajectory).
MERIT_RTOL = 5e-7


def rel_err(got, want):
    want = np.asarray(want, dtype=np.float64)
    return float(np.abs(np.asarray(got, dtype=np.float64) - want).max() / max(np.abs(want).max(), 1e-300))


def pair(robot, dtype=np.float64, **kw):
    """The CPU backend and the host run of the CUDA backend with the same settings."""
    p = {**dict(max_sqp_iters=2, linsys="bdsv", dtype=dtype), **kw}
    urdf = gato.robot_urdf(robot)
    return gato.BSQP(urdf, B, N, DT, **p), gato.BSQP(urdf, B, N, DT, backend="cuda_host", **p)


def ee_rotation(robot, q):
    """The EE frame's world rotation at q (pinocchio)."""
    urdf = str(gato.robot_urdf(robot))
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(gato.robot_info(robot)["ee_frame"])].rotation.copy()


def turned(R0, n, rng):
    """(n, 3) target orientations: R0 turned by random 0.2-0.5 rad rotations (rotation vectors,
    world frame)."""
    out = np.zeros((n, 3))
    for k in range(n):
        d = rng.standard_normal(3)
        d *= (0.2 + 0.3 * rng.random()) / np.linalg.norm(d)
        out[k] = pin.log3(R0 @ pin.exp3(d))
    return out


def problem(solver, robot, seed):
    """B perturbed states near the robot's home pose, EE goals 7 cm off, and per knot the target
    orientation: the EE's at the state turned by a random 0.2-0.5 rad rotation: (xs (B, nx),
    refs (B, 6N))."""
    rng = np.random.default_rng(seed)
    xs = np.stack([perturbed_state(ROBOTS[robot], rng) for _ in range(B)])
    refs = np.stack([goal_ref(solver, x) for x in xs]).reshape(B, N, 6)
    for b in range(B):
        refs[b, :, 3:6] = turned(ee_rotation(robot, xs[b, :solver.nq]), N, rng)
    return xs, refs.reshape(B, 6 * N)


def table4(seed, n=N):
    """(n, 4) per-knot [ee, qd, u, rot] weights, the orientation column zero at knots 1 and 4."""
    rng = np.random.default_rng(seed)
    t = np.column_stack([1.0 + 2.0 * rng.random(n), 0.05 + 0.2 * rng.random(n), 1e-4 + 1e-3 * rng.random(n),
                         1.0 + 4.0 * rng.random(n)])
    t[[1, 4], 3] = 0.0
    return t


# --------------------------------------------------------------------------- kinematics
@pytest.mark.parametrize("robot", ["iiwa14", "indy7", "ur5e", "fr3", "gen3"])
def test_ee_rotation_and_angular_jacobian_match_pinocchio(robot):
    """rbd.hpp ee_rotation (the body's rotation times the calibrated frame axes ee_R) and
    ee_angular_jacobian against pinocchio's frame placement and LOCAL_WORLD_ALIGNED Jacobian."""
    urdf = str(gato.robot_urdf(robot))
    frame = gato.robot_info(robot)["ee_frame"]
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    fid = model.getFrameId(frame)
    dyn, dyn32 = H.Dynamics64(urdf, frame), H.Dynamics32(urdf, frame)
    rng = np.random.default_rng(1)
    for _ in range(6):
        q = rng.uniform(-1.5, 1.5, model.nv)
        R, Jw = dyn.ee_rotation(q)
        pin.computeJointJacobians(model, data, q)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(R, data.oMf[fid].rotation, rtol=0, atol=1e-12)
        Jp = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)[3:]
        np.testing.assert_allclose(Jw, Jp, rtol=0, atol=1e-12)
        R32, Jw32 = dyn32.ee_rotation(q.astype(np.float32))
        assert R32.dtype == np.float32
        np.testing.assert_allclose(R32, R, rtol=0, atol=2e-5)
        np.testing.assert_allclose(Jw32, Jw, rtol=0, atol=2e-5)


# --------------------------------------------------------------------------- KKT and plans
@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_kkt_blocks_and_merit_match_the_cpu_backend(robot, integrator):
    """debug_setup_kkt (the host run of setup_kkt) and merit (the line search's value path) at a
    dynamically inconsistent trajectory, orientation on with per-axis factors: every block equal
    to the CPU backend's to REL_TOL; the orientation term is really in Q and q."""
    cpu, host = pair(robot, integrator=integrator, u_ref="gravity", u_cost=1e-4, **ROT)
    for s in (cpu, host):
        s.set_rot_axis_weights(AXES)
    xs, refs = problem(cpu, robot, 31)
    rng = np.random.default_rng(32)
    xu = np.stack([random_traj(cpu, x, rng, 3.0) for x in xs])
    kc, kh = cpu.debug_setup_kkt(xu, xs, refs), host.debug_setup_kkt(xu, xs, refs)
    for name in ("Q", "q", "R", "r", "A", "B", "c", "S"):
        assert kh[name].shape == kc[name].shape, name
        assert rel_err(kh[name], kc[name]) < REL_TOL, (name, rel_err(kh[name], kc[name]))
    np.testing.assert_allclose(host.merit(xu, xs, refs), cpu.merit(xu, xs, refs), rtol=1e-12)
    off, _ = pair(robot, integrator=integrator, u_ref="gravity", u_cost=1e-4)
    k0 = off.debug_setup_kkt(xu, xs, refs)
    assert rel_err(kh["Q"], k0["Q"]) > 1e-3 and rel_err(kh["q"], k0["q"]) > 1e-3


def solve_both(cpu, host, xs, refs):
    return cpu.solve(xs, refs), host.solve(xs, refs)


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_two_sqp_iterations_match_the_cpu_backend(robot, integrator):
    """2 SQP iterations from a hold toward a pose 7 cm and 0.2-0.5 rad away: plans, merits, step
    sizes and the dual equal to the CPU backend's; the orientation error shrinks."""
    cpu, host = pair(robot, integrator=integrator, **ROT)
    xs, refs = problem(cpu, robot, 41)
    rc, rh = solve_both(cpu, host, xs, refs)
    assert rel_err(rh.xu, rc.xu) < REL_TOL, rel_err(rh.xu, rc.xu)
    np.testing.assert_allclose(rh.stats.final_merit, rc.stats.final_merit, rtol=MERIT_RTOL)
    np.testing.assert_allclose(host.merit(rh.xu, xs, refs), cpu.merit(rh.xu, xs, refs), rtol=1e-10)
    np.testing.assert_allclose(rh.stats.initial_merit, rc.stats.initial_merit, rtol=1e-12)
    np.testing.assert_array_equal(rh.stats.step_size, rc.stats.step_size)
    assert rel_err(host.get_lambda(), cpu.get_lambda()) < 1e-7
    assert np.all(np.asarray(rh.stats.final_merit) < np.asarray(rh.stats.initial_merit))
    # The plan turns the tool: the last knot's orientation error is smaller than the hold's.
    nq, st = host.nq, host.nx + host.nu
    for b in range(B):
        Rt = pin.exp3(refs[b, 6 * (N - 1) + 3:6 * N])
        before = np.linalg.norm(pin.log3(Rt.T @ ee_rotation(robot, xs[b, :nq])))
        q_last = np.asarray(rh.xu)[b, (N - 1) * st:(N - 1) * st + nq]
        assert np.linalg.norm(pin.log3(Rt.T @ ee_rotation(robot, q_last))) < before


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_per_knot_table_and_axis_weights_match_the_cpu_backend(robot):
    """The (N, 4) per-knot table (orientation column zero at two knots: no term there), per-axis
    factors with a zero (free spin about the tool's y axis), pcg and RK4, the three barriers and a
    wrench band; then the table cleared (None): the scalar weights again."""
    cpu, host = pair(robot, integrator="rk4", linsys="pcg", q_lim_cost=0.01, vel_lim_cost=0.01,
                     ctrl_lim_cost=1e-3, **ROT)
    rng = np.random.default_rng(51)
    f = 0.5 * rng.standard_normal((B, N, 6 * cpu.n_bodies))
    for s in (cpu, host):
        s.set_cost_weights_per_knot(table4(52))
        s.set_rot_axis_weights([1.5, 0.0, 0.7])
        s.set_f_ext_B(f)
    xs, refs = problem(cpu, robot, 53)
    rc, rh = solve_both(cpu, host, xs, refs)
    assert rel_err(rh.xu, rc.xu) < REL_TOL, rel_err(rh.xu, rc.xu)
    np.testing.assert_allclose(rh.stats.final_merit, rc.stats.final_merit, rtol=MERIT_RTOL)
    np.testing.assert_array_equal(rh.stats.pcg_iters, rc.stats.pcg_iters)
    for s in (cpu, host):
        s.set_cost_weights_per_knot(None)
    rc2, rh2 = solve_both(cpu, host, xs, refs)
    assert rel_err(rh2.xu, rc2.xu) < REL_TOL, rel_err(rh2.xu, rc2.xu)
    assert rel_err(rh2.xu, rh.xu) > 1e-6  # the table mattered


def test_orientation_table_alone_switches_the_term_on():
    """rot_cost = N_rot_cost = 0 and a table whose 4th column is positive: the term is on (as on
    the CPU backend); a zero 4th column: off."""
    cpu, host = pair("iiwa14")
    xs, refs = problem(cpu, "iiwa14", 61)
    t = table4(62)
    for s in (cpu, host):
        s.set_cost_weights_per_knot(t)
    rc, rh = solve_both(cpu, host, xs, refs)
    assert rel_err(rh.xu, rc.xu) < REL_TOL
    t0 = t.copy()
    t0[:, 3] = 0
    for s in (cpu, host):
        s.set_cost_weights_per_knot(t0)
    rc0, rh0 = solve_both(cpu, host, xs, refs)
    assert rel_err(rh0.xu, rc0.xu) < REL_TOL
    assert rel_err(rh0.xu, rh.xu) > 1e-6


def test_weight_zero_leaves_the_plans_bit_for_bit():
    """Orientation weight 0 (the default): the orientation slots are never read and the axis
    factors and a zero 4th table column change nothing: plans, merits and duals bit for bit those
    of a solver that never heard of the term (refs with zero slots), for each integrator."""
    for integrator in INTEGRATORS:
        _, plain = pair("indy7", integrator=integrator, max_sqp_iters=4)
        _, touched = pair("indy7", integrator=integrator, max_sqp_iters=4)
        xs, refs = problem(plain, "indy7", 71)
        zero_slots = refs.reshape(B, N, 6).copy()
        zero_slots[:, :, 3:] = 0
        t = table4(72)
        plain.set_cost_weights_per_knot(t[:, :3])
        t[:, 3] = 0
        touched.set_cost_weights_per_knot(t)
        touched.set_rot_axis_weights([0.3, 2.0, 0.0])
        for _ in range(2):  # a cold solve, then a warm one from the kept dual
            ra = plain.solve(xs, zero_slots.reshape(B, 6 * N))
            rb = touched.solve(xs, refs)
            np.testing.assert_array_equal(rb.xu, ra.xu)
            np.testing.assert_array_equal(rb.stats.final_merit, ra.stats.final_merit)
            np.testing.assert_array_equal(touched.get_lambda(), plain.get_lambda())


def test_float32_is_as_close_to_the_double_solution_as_the_cpu_float32():
    cpu64, _ = pair("iiwa14", max_sqp_iters=3, **ROT)
    cpu32, host32 = pair("iiwa14", dtype=np.float32, max_sqp_iters=3, **ROT)
    for s in (cpu64, cpu32, host32):
        s.set_rot_axis_weights(AXES)
    xs, refs = problem(cpu64, "iiwa14", 81)
    want = np.asarray(cpu64.solve(xs, refs).xu)
    a = np.asarray(cpu32.solve(xs.astype(np.float32), refs.astype(np.float32)).xu, dtype=np.float64)
    r = host32.solve(xs.astype(np.float32), refs.astype(np.float32))
    b = np.asarray(r.xu, dtype=np.float64)
    assert np.abs(b - want).max() <= max(3 * np.abs(a - want).max(), 1e-3), (np.abs(b - want).max(),
                                                                            np.abs(a - want).max())
    assert np.all(np.asarray(r.stats.final_merit) < np.asarray(r.stats.initial_merit))


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_feedback_gains_with_the_orientation_term_equal_the_cpu_backends(integrator):
    """riccati_gains on setup_kkt's blocks with the orientation term in Q: the CUDA code's gains of
    the CPU backend's plan equal the CPU's to 1e-10 (relative, max-norm)."""
    cpu, host = pair("iiwa14", integrator=integrator, max_sqp_iters=3, **ROT)
    for s in (cpu, host):
        s.set_cost_weights_per_knot(table4(91))
    xs, refs = problem(cpu, "iiwa14", 92)
    plan = np.asarray(cpu.solve(xs, refs).xu)
    _, off = pair("iiwa14", integrator=integrator, max_sqp_iters=3)
    off.set_cost_weights_per_knot(table4(91)[:, :3])
    for row in range(B):
        K = host._s.feedback_gains(row, plan[row], xs[row], refs[row])
        Kc = cpu.feedback_gains(row)
        assert rel_err(K, Kc) < 1e-10, (row, rel_err(K, Kc))
        assert rel_err(K, off._s.feedback_gains(row, plan[row], xs[row], refs[row])) > 1e-4  # the term is in


# --------------------------------------------------------------------------- the setters
def test_the_setters_and_their_errors_are_the_cpu_backends():
    """Both backends accept a positive weight through the constructor, set_cost_weights and the
    table, and refuse the same bad input with the same message."""
    cpu, host = pair("iiwa14")
    xs, refs = problem(cpu, "iiwa14", 101)
    for s in (cpu, host):
        s.set_cost_weights(rot_cost=2.0, N_rot_cost=10.0)
        assert (s.params.rot_cost, s.params.N_rot_cost) == (2.0, 10.0)
    rc, rh = solve_both(cpu, host, xs, refs)
    assert rel_err(rh.xu, rc.xu) < REL_TOL

    def messages(call):
        out = []
        for s in (cpu, host):
            with pytest.raises(ValueError) as e:
                call(s)
            out.append(str(e.value))
        assert out[0] == out[1], out
        return out[0]

    assert "rot_axis_weights: expected 3 numbers" in messages(lambda s: s.set_rot_axis_weights([1.0, 2.0]))
    assert "finite and >= 0" in messages(lambda s: s.set_rot_axis_weights([1.0, -1.0, 1.0]))
    assert "knot_weights" in messages(lambda s: s.set_cost_weights_per_knot(-table4(1)))
    assert "rot_cost" in messages(lambda s: s.set_cost_weights(rot_cost=-1.0))
    assert "rot_knot_weights: expected N numbers" in messages(lambda s: s._s.set_rot_knot_weights(np.ones(3)))
    assert "rot_axis_weights: expected 3 numbers" in messages(lambda s: s._s.set_rot_axis_weights(np.ones(4)))
    bad = refs.copy()
    bad[0, 3:6] = [4.0, 0.0, 0.0]
    assert "> pi" in messages(lambda s: s.solve(xs, bad))
    bad[0, 3:6] = [np.nan, 0.0, 0.0]
    assert "NaN or Inf" in messages(lambda s: s.solve(xs, bad))
