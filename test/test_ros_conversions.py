"""gato_ros.conversions: every Python type survives a round trip through its message,
field for field and bit for bit (arrays, dtypes, optional fields), also through CDR."""
import dataclasses

import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
cv = import_or_skip("gato_ros.conversions", _HINT)
import gato  # noqa: E402
from gato.controller import StepResult  # noqa: E402
from gato_ros.types import JointStateSample, Plan, ReferenceWindow, SolveInput  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402

B, N, NX, NU, I, G = 3, 6, 14, 7, 4, 2
S = N * (NX + NU) - NU


def assert_same(a, b, path="value"):
    """Recursive equality: dataclasses field by field, numpy arrays by dtype kind, shape and bits."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{path}: {type(b).__name__} is not an ndarray"
        assert a.shape == b.shape and a.dtype.kind == b.dtype.kind, f"{path}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
        if a.dtype.kind == "f":
            assert a.astype(np.float64).tobytes() == b.astype(np.float64).tobytes(), path
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)
    else:
        assert a == b and type(a) is type(b), f"{path}: {a!r} != {b!r}"


def full_stats(rng, rows=True):
    return gato.SolverStats(
        solve_time_us=2**35 + 3, sqp_iters=rng.integers(1, I + 1, B).astype(np.int32),
        kkt_converged=np.array([True, False, True]), final_merit=rng.uniform(size=B),
        initial_merit=rng.uniform(1, 2, B), ls_num_iters=8,
        pcg_iters=rng.integers(0, 100, (B, I)).astype(np.int32), pcg_times_us=rng.uniform(size=I),
        min_merit=rng.uniform(size=(B, I)), step_size=np.array([[1, .5, -1, .25]] * B, dtype=float),
        linsys="bdsv_first", budget_hit=True,
        row_max_violation=rng.exponential(size=(B, G)) if rows else None,
        row_sum_violation=rng.exponential(size=(B, G)) if rows else None,
        admm_r_prim=rng.uniform(size=B) if rows else None, admm_r_dual=rng.uniform(size=B) if rows else None,
        admm_iters=rng.integers(1, 9, B).astype(np.int32) if rows else None,
        admm_linsys_iters=rng.integers(1, 99, B).astype(np.int32) if rows else None)


def full_step(rng, rows=True):
    xu = rng.standard_normal((B, S))
    xu[0, :4] = [np.inf, -0.0, 5e-324, -np.inf]
    solve = gato.SolveResult(xu=xu, solve_time_us=123456, stats=full_stats(rng, rows), nx=NX, nu=NU, N=N,
                             n_actuated=NU)
    return StepResult(u=xu[1, NX:NX + NU].copy(), best_id=1, xu_best=xu[1].copy(), solve=solve,
                      hypo_stats={"n": 3, "w": [0.1, 0.2, 0.7]} if rows else None, pred_err=0.0123,
                      reseeded=True, fc=None, iterations=2, budget_hit=True, wall_s=0.0042,
                      admm_linsys="pcg" if rows else "", limits="admm" if rows else "",
                      row_viol=rng.exponential(size=G) if rows else None)


def cdr(msg):
    return deserialize_message(serialize_message(msg), type(msg))


@pytest.mark.parametrize("rows", [True, False], ids=["row_groups", "no_row_groups"])
def test_solver_stats_round_trip(rows):
    st = full_stats(np.random.default_rng(1), rows)
    m = cv.solver_stats_to_msg(st, stamp_ns=1_700_000_000_123_456_789)
    assert (m.batch_size, m.n_iters, m.n_row_groups, m.has_row_stats) == (B, I, G if rows else 0, rows)
    assert cv.time_to_ns(m.header.stamp) == 1_700_000_000_123_456_789
    assert_same(cv.solver_stats_from_msg(cdr(m)), st)


@pytest.mark.parametrize("rows", [True, False], ids=["full", "optional_fields_none"])
def test_step_result_round_trip(rows):
    step = full_step(np.random.default_rng(2), rows)
    m = cdr(cv.step_result_to_msg(step, stamp_ns=42))
    assert cv.time_to_ns(m.header.stamp) == 42 and m.solve.xu_size == S
    back = cv.step_result_from_msg(m)
    assert_same(back, step)


def test_solve_result_from_a_real_solve_round_trips():
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 2, 8, 0.03125)
    q = gato.tasks.Q_READY["iiwa14"]
    res = s.solve(np.r_[q, np.zeros(7)], np.tile(np.r_[s.ee_pos(q) + 0.05, 0, 0, 0], 8))
    assert_same(cv.solve_result_from_msg(cdr(cv.solve_result_to_msg(res))), res)


def test_step_result_from_a_real_controller_tick_round_trips():
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 8, 0.03125)
    q = gato.tasks.Q_READY["iiwa14"]
    step = gato.MPCController(s).step(np.r_[q, np.zeros(7)], np.tile(np.r_[s.ee_pos(q) + 0.05, 0, 0, 0], 8))
    back = cv.step_result_from_msg(cdr(cv.step_result_to_msg(step, 7)))
    # diverged / fallback are not carried by the message (documented): compare the rest
    assert (back.diverged, back.fallback) == (False, "")
    back.diverged, back.fallback = step.diverged, step.fallback
    assert_same(back, step)


def test_reference_window_round_trip_and_validation():
    w = ReferenceWindow(3_000_000_001, 0.03125, np.random.default_rng(3).uniform(size=(5, 3)), frame_id="world")
    m = cdr(cv.reference_to_msg(w))
    assert m.n_knots == 5 and len(m.positions) == 15
    assert_same(cv.reference_from_msg(m), w)
    m.n_knots = 4
    with pytest.raises(ValueError, match="n_knots"):
        cv.reference_from_msg(m)


def test_plan_round_trip_and_accessors():
    rng = np.random.default_rng(4)
    p = Plan(stamp_ns=5, knot_dt=0.03125, nx=NX, nu=NU, n_knots=N, joint_names=[f"A{i}" for i in range(1, 8)],
             xu=rng.standard_normal(S))
    back = cv.plan_from_msg(cdr(cv.plan_to_msg(p)))
    assert_same(back, p)
    assert back.states().shape == (N, NX) and back.controls().shape == (N - 1, NU)
    np.testing.assert_array_equal(back.states()[1], p.xu[NX + NU:2 * NX + NU])
    with pytest.raises(ValueError, match="n_knots"):
        Plan(stamp_ns=0, knot_dt=0.1, nx=NX, nu=NU, n_knots=N, joint_names=[], xu=np.zeros(S - 1))


def test_plan_from_step_is_the_winning_row():
    step = full_step(np.random.default_rng(5))
    p = cv.plan_from_step(step, stamp_ns=9, knot_dt=0.03125, joint_names=["a"] * 7)
    np.testing.assert_array_equal(p.xu, step.xu_best)
    assert (p.nx, p.nu, p.n_knots, p.stamp_ns) == (NX, NU, N, 9)


def test_solve_input_round_trip_and_validation():
    rng = np.random.default_rng(6)
    for rows in (1, 3):
        si = SolveInput(stamp_ns=123_456_789, tick=7, joint_names=[f"A{i}" for i in range(1, 8)],
                        x_measured=rng.standard_normal(NX), reference=rng.standard_normal(6 * N),
                        xu_warm=rng.standard_normal((rows, S)), dt_elapsed=0.01, budget_s=0.0, reset=rows == 3,
                        config_json='{"robot": "iiwa14"}')
        back = cv.solve_input_from_msg(cdr(cv.solve_input_to_msg(si)))
        assert_same(back, si)
        assert back.xu_warm.shape == (rows, S)
    m = cv.solve_input_to_msg(si)
    m.warm_rows = 2                       # 3*S values are not 2 whole rows
    with pytest.raises(ValueError, match="not 2 whole rows"):
        cv.solve_input_from_msg(m)


def test_joint_state_and_commands():
    js = JointStateSample(11, ["A2", "A1"], np.array([0.1, -0.2]), np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    assert_same(cv.joint_state_from_msg(cdr(cv.joint_state_to_msg(js))), js)
    assert list(cv.effort_to_multiarray([1.5, -2.0]).data) == [1.5, -2.0]
    c = cdr(cv.effort_command_to_msg([1.0, 2.0], ["A1", "A2"], 12, "hold", 3))
    assert (cv.time_to_ns(c.header.stamp), list(c.joint_names), list(c.effort), c.source, c.tick) == \
        (12, ["A1", "A2"], [1.0, 2.0], "hold", 3)
    with pytest.raises(ValueError, match="negative"):
        cv.ns_to_time(-1)
