"""Degenerate input to the solver: zero weights that would make a KKT block singular
(docs/solver_method.md, "Zero weights") solve, and what is meaningless is refused
with a ValueError naming the field, through gato.BSQP / gato.SolverParams and
through the ROS parameter path."""
import sys
from pathlib import Path

import numpy as np
import pytest

import gato

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference.numpy_bsqp import RefProblem  # noqa: E402

Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])
N = 10


def _problem(seed=3):
    rng = np.random.default_rng(seed)
    x0 = np.r_[Q0 + 0.05 * rng.standard_normal(7), 0.3 * rng.standard_normal(7)]
    return x0


def _goal_ref(solver, x0, offset=(0.08, 0.05, -0.06)):
    p = solver.ee_pos(x0[:solver.nq]) + np.asarray(offset)
    return np.tile(np.r_[p, 0.0, 0.0, 0.0], solver.N)


def _table(col, knots, value=0.0):
    t = np.tile([2.0, 0.01, 2e-6], (N, 1))
    t[-1, 0] = 50.0
    t[list(knots), col] = value
    return t


# Each case: (SolverParams overrides, set_u_cost_vec, set_cost_weights_per_knot).
ZERO_WEIGHT_CASES = {
    "u_cost=0": (dict(u_cost=0.0), None, None),
    "qd_cost=0": (dict(qd_cost=0.0), None, None),
    "qd_cost=0, adapt_rho off": (dict(qd_cost=0.0, adapt_rho=False), None, None),
    "u_cost=qd_cost=0": (dict(u_cost=0.0, qd_cost=0.0), None, None),
    "u_cost=1e-9, below the floor": (dict(u_cost=1e-9), None, None),
    "u_cost_vec with a zero": ({}, np.array([1e-3, 0.0, 1e-3, 1e-3, 0.0, 1e-3, 1e-3]), None),
    "table u column zero at knots 2, 5": ({}, None, _table(2, [2, 5])),
    "table qd column zero at knots 0, 4, 9": ({}, None, _table(1, [0, 4, 9])),
}


@pytest.mark.parametrize("case", list(ZERO_WEIGHT_CASES))
def test_zero_weights_follow_the_documented_regularization(case):
    """The C++ core and the NumPy reference of docs/solver_method.md ("Zero weights": a step-only
    weight on a velocity block (rho) or a control (1e-8) whose cost weight is zero) take the same
    four SQP iterations, and every one is accepted (before the rule every step was rejected: a
    plan that never left the hold, silently)."""
    kw, u_vec, table = ZERO_WEIGHT_CASES[case]
    urdf = gato.robot_urdf("iiwa14")
    ee = gato.robot_info("iiwa14")["ee_frame"]
    s = gato.BSQP(urdf, 1, N, 0.02, linsys="bdsv", max_sqp_iters=4, **kw)
    ref_p = RefProblem(urdf, ee, N, 0.02, u_cost_vec=u_vec, knot_weights=table, **kw)
    if u_vec is not None:
        s.set_u_cost_vec(u_vec)
    if table is not None:
        s.set_cost_weights_per_knot(table)
    x0 = _problem()
    ref = _goal_ref(s, x0)
    res = s.solve(x0[None], ref[None])
    xu_ref, records = ref_p.sqp(x0, ref, iters=4)
    np.testing.assert_allclose(res.stats.step_size[0], [r.alpha for r in records])
    assert np.all(res.stats.step_size[0] > 0), res.stats.step_size
    np.testing.assert_allclose(res.xu[0], xu_ref, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(res.stats.final_merit[0], records[-1].merit_after, rtol=1e-7)


def test_nonzero_weights_are_untouched_by_the_rule():
    """A tiny positive weight is the user's cost, not a zero: no trust region on its block
    (the reference without the rule's blocks gives the same iterates)."""
    urdf = gato.robot_urdf("iiwa14")
    ee = gato.robot_info("iiwa14")["ee_frame"]
    s = gato.BSQP(urdf, 1, N, 0.02, linsys="bdsv", max_sqp_iters=3, u_cost=1e-7, qd_cost=1e-4)
    ref_p = RefProblem(urdf, ee, N, 0.02, u_cost=1e-7, qd_cost=1e-4)
    assert not ref_p._rbar(0).any() and not ref_p._ibar(0)[7:, 7:].any()
    x0 = _problem()
    ref = _goal_ref(s, x0)
    res = s.solve(x0[None], ref[None])
    xu_ref, _ = ref_p.sqp(x0, ref, iters=3)
    np.testing.assert_allclose(res.xu[0], xu_ref, rtol=1e-8, atol=1e-8)


def test_zero_torque_weight_converges_to_the_plan_of_a_vanishing_weight():
    """The issue's case: u_cost = 0 used to run every SQP iteration to a rejected step and
    return the hold. Now it converges (kkt_converged, dynamically consistent) to the plan a
    vanishing weight (1e-9) gives: the same end point and the same merit."""
    urdf = gato.robot_urdf("iiwa14")
    x0 = np.r_[Q0, np.zeros(7)]
    q_goal = Q0 + 0.1 * np.random.default_rng(7).standard_normal(7)
    out = {}
    for u_cost in (0.0, 1e-9):
        s = gato.BSQP(urdf, 1, 16, 0.05, max_sqp_iters=400, linsys="bdsv", u_cost=u_cost)
        goal = s.ee_pos(q_goal)
        ref = np.tile(np.r_[goal, 0, 0, 0], s.N)
        res = s.solve(x0, ref)
        kkt = s.debug_setup_kkt(res.xu, x0[None], ref[None])
        assert res.stats.kkt_converged[0], u_cost
        assert np.abs(kkt["c"]).max() < 1e-6, u_cost
        out[u_cost] = (s.ee_pos(res.xu[0, -s.nx:][:7]), res.stats.final_merit[0], goal)
    (p0, m0, goal), (p9, m9, _) = out[0.0], out[1e-9]
    hold_dist = np.linalg.norm(s.ee_pos(Q0) - goal)
    assert np.linalg.norm(p0 - goal) < 0.05 * hold_dist
    np.testing.assert_allclose(p0, p9, atol=1e-4)
    assert m0 <= m9 + 1e-6 and m0 == pytest.approx(m9, abs=1e-3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_zero_torque_weight_in_a_real_time_loop_tracks_like_a_vanishing_weight(dtype):
    """One SQP iteration per tick (MPCController), the plant stepped by the solver's own
    dynamics: u_cost = 0 and 1e-9 reach the goal as u_cost = 1e-6 does (a step damped by rho
    on the torques could not even reach gravity compensation: the arm fell away, 1 m off; in
    float32, 1e-9 without the floor diverged)."""
    from gato.controller import MPCController

    urdf = gato.robot_urdf("iiwa14")
    plant = gato.BSQP(urdf, 1, 16, 0.02)
    final = {}
    for u_cost in (0.0, 1e-9, 1e-6):
        s = gato.BSQP(urdf, 1, 16, 0.02, dtype=dtype, u_cost=u_cost)
        c = MPCController(s, limits="off")
        x = np.r_[Q0, np.zeros(7)]
        goal = s.ee_pos(Q0) + np.array([0.1, 0.05, -0.05])
        ref = np.tile(np.r_[goal, 0, 0, 0], 16)
        for t in range(150):
            r = c.step(x, ref, 0.01 if t else None)
            x = plant.sim_forward(x[None], np.asarray(r.u, dtype=np.float64)[None], 0.01)[0]
        final[u_cost] = np.linalg.norm(plant.ee_pos(x[:7]) - goal)
    start = np.linalg.norm(plant.ee_pos(Q0) - goal)
    assert final[1e-6] < 0.1 * start
    for u_cost in (0.0, 1e-9):
        assert final[u_cost] < 0.1 * start and final[u_cost] < 2 * final[1e-6], final


@pytest.mark.parametrize("kw", [dict(u_cost=0.0, qd_cost=0.0), dict(u_cost=1e-9)], ids=["zero", "1e-9"])
def test_zero_and_tiny_weights_in_float32_take_steps(kw):
    """float32 with a torque weight of 1e-9 used to reject every step (the plan stayed the hold)."""
    urdf = gato.robot_urdf("iiwa14")
    s = gato.BSQP(urdf, 1, 16, 0.05, max_sqp_iters=20, linsys="bdsv", dtype=np.float32, **kw)
    x0 = np.r_[Q0, np.zeros(7)]
    goal = s.ee_pos(Q0) + np.array([0.05, -0.03, 0.04])
    res = s.solve(x0, np.tile(np.r_[goal, 0, 0, 0], s.N))
    assert (res.stats.step_size[0] > 0).sum() >= 10
    assert np.linalg.norm(s.ee_pos(res.xu[0, -s.nx:][:7]) - goal) < 0.5 * np.linalg.norm(s.ee_pos(Q0) - goal)


# --------------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def solver():
    return gato.BSQP(gato.robot_urdf("iiwa14"), 2, 8, 0.02)


@pytest.mark.parametrize("field", ["q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost",
                                   "ctrl_lim_cost", "mu"])
def test_negative_weights_are_refused_naming_the_field(field):
    with pytest.raises(ValueError, match=rf"^{field}: expected a finite number >= 0, got -0.5$"):
        gato.SolverParams(**{field: -0.5})
    with pytest.raises(ValueError, match=rf"^{field}: expected a finite number >= 0, got -0.5$"):
        gato.BSQP(gato.robot_urdf("iiwa14"), 1, 8, 0.02, **{field: -0.5})


def test_refusals_through_the_solver(solver):
    urdf = gato.robot_urdf("iiwa14")
    with pytest.raises(ValueError, match=r"^rho: expected > 0 \(the trust region regularizes"):
        gato.SolverParams(rho=0.0)
    with pytest.raises(ValueError, match=r"^N: expected an integer >= 2 \(knots\), got 1$"):
        gato.BSQP(urdf, 1, 1, 0.02)
    with pytest.raises(ValueError, match=r"^dt: expected a finite knot spacing > 0 s, got 0.0$"):
        gato.BSQP(urdf, 1, 8, 0.0)
    with pytest.raises(ValueError, match=r"^batch_size: expected an integer >= 1, got 0$"):
        gato.BSQP(urdf, 0, 8, 0.02)
    with pytest.raises(ValueError, match=r"^rho_batch: entries must be > 0$"):
        gato.BSQP(urdf, 2, 8, 0.02, rho_batch=[0.01, 0.0])
    with pytest.raises(ValueError, match=r"^u_cost: expected a finite number >= 0, got -1.0$"):
        solver.set_cost_weights(u_cost=-1.0)
    with pytest.raises(ValueError, match=r"^weights: control weights must be >= 0, got \[1.0, -1.0"):
        solver.set_u_cost_vec([1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    t = np.ones((8, 3))
    t[3, 2] = -1e-6
    with pytest.raises(ValueError, match=r"^knot_weights: entries must be finite and >= 0$"):
        solver.set_cost_weights_per_knot(t)


def test_zero_weights_are_accepted_by_every_setter(solver):
    x0 = np.r_[Q0, np.zeros(7)]
    ref = np.tile(np.r_[solver.ee_pos(Q0) + 0.05, 0, 0, 0], 8)
    solver.set_cost_weights(u_cost=0.0, qd_cost=0.0)
    solver.set_u_cost_vec(np.zeros(7))
    solver.set_cost_weights_per_knot(np.zeros((8, 3)) + [[1.0, 0.0, 0.0]])
    res = solver.solve(np.stack([x0, x0]), np.stack([ref, ref]))
    assert np.all(np.isfinite(res.xu)) and np.all(res.stats.step_size[:, 0] > 0)


# --------------------------------------------------------------- the ROS path
def test_ros_parameter_path_accepts_zero_and_refuses_negative_weights():
    from conftest import import_or_skip

    cl = import_or_skip("gato_ros.controller_logic", "build the workspace (scripts/setup.sh)")
    lg = cl.ControllerLogic({"robot": "iiwa14", "N": 16})
    for name in ("u_cost", "qd_cost", "q_cost", "N_cost"):
        assert lg.validate_changes({name: 0.0}) is None
        r = lg.validate_changes({name: -1.0})
        assert r is not None and r.startswith(f"{name}: -1 is out of range [0,"), r
    r = lg.validate_changes({"rho": 0.0})
    assert r is not None and r.startswith("rho: 0 is out of range"), r
    assert "read-only" in lg.validate_changes({"N": 1})
    lg.request_changes({"u_cost": 0.0, "qd_cost": 0.0})
    from gato import tasks
    from gato_ros.types import JointStateSample, ReferenceWindow

    q = tasks.Q_READY["iiwa14"]
    t = 1_000_000_000
    p = lg.solver.ee_pos(q) + np.array([0.0, 0.05, 0.05])
    lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (16, 1))), now_ns=t)
    out = lg.on_joint_state(JointStateSample(t, [f"A{i}" for i in range(1, 8)], q, np.zeros(7)), now_ns=t)
    assert out is not None and out.source == "mpc" and np.all(np.isfinite(out.effort))
    assert lg.solver.params.u_cost == 0.0 and lg.solver.params.qd_cost == 0.0
