"""The BSQP posture anchor with one target and weight row per knot (issue 31: the controller node
tracks joint trajectories through it): gato.BSQP.set_q_nom / set_q_pos_cost take (nq,) or
(N, nq); the per-knot rows reach the solve (the plan follows a ramp of targets), equal rows give
the same plan as one row, and bad tables are refused naming the argument."""
import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
from gato.core.bsqp import BSQP  # noqa: E402
from gato.robots.registry import robot_urdf  # noqa: E402
from gato.sim.scenarios import Q_READY  # noqa: E402

N = 16


@pytest.fixture(scope="module")
def solver():
    return BSQP(robot_urdf("iiwa14"), 1, N, 0.03125)


def _solve(s, q0):
    x0 = np.r_[q0, np.zeros(s.nq)]
    ref = np.tile(np.r_[s.ee_pos(q0), 0.0, 0.0, 0.0], N)
    s.reset_dual()
    xu = None
    for _ in range(5):
        r = s.solve(x0[None, :], ref[None, :], xu)
        xu = np.asarray(r.xu)
    return xu[0]


def _knot_q(s, xu):
    step = 3 * s.nq
    return np.array([xu[k * step:k * step + s.nq] for k in range(N)])


def test_per_knot_targets_reach_the_solve_and_equal_rows_match_one_row(solver):
    s = solver
    q0 = np.asarray(Q_READY["iiwa14"], dtype=float)
    try:
        qn = np.tile(q0, (N, 1))
        qn[:, 0] += np.linspace(0.0, 0.3, N)             # A1 ramps over the horizon
        s.set_q_nom(qn)
        s.set_q_pos_cost(np.full((N, s.nq), 50.0))
        q = _knot_q(s, _solve(s, q0))
        # the plan follows the ramp knot by knot (the last knots bend back toward the static EE
        # reference: its terminal weight N_cost); one row at the ramp's mean would not
        inner = slice(2, N - 3)
        assert np.abs(q[inner, 0] - qn[inner, 0]).max() < 0.01, q[:, 0] - qn[:, 0]
        assert q[N // 2, 0] > 0.15
        s.set_q_nom(np.tile(q0, (N, 1)))
        a = _solve(s, q0)
        s.set_q_nom(q0)
        s.set_q_pos_cost(50.0)
        b = _solve(s, q0)
        assert np.allclose(a, b, rtol=0, atol=1e-9)         # the same problem (solver state carried: rounding)
    finally:
        s.set_q_nom(None)
        s.set_q_pos_cost(0.0)


@pytest.mark.parametrize("call,arg,msg", [
    ("set_q_nom", np.zeros((N + 1, 7)), r"q_nom: expected \(7,\) or per knot \(16, 7\), got \(17, 7\)"),
    ("set_q_nom", np.full((N, 7), np.nan), "q_nom: entries must be finite"),
    ("set_q_pos_cost", np.zeros((N, 6)), r"weight: expected \(7,\) or per knot \(16, 7\), got \(16, 6\)"),
    ("set_q_pos_cost", -np.ones((N, 7)), "weight: anchor weights must be >= 0"),
])
def test_bad_posture_tables_are_refused_naming_the_argument(solver, call, arg, msg):
    with pytest.raises(ValueError, match=msg):
        getattr(solver, call)(arg)
