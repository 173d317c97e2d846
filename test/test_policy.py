"""gato.policy: TrajectoryReference / GoalReference window semantics and MPCPolicy in a
closed loop (the plant is the solver's own integrator, BSQP.sim_forward)."""
import numpy as np
import pytest

import gato
from gato.policy import GoalReference, MPCPolicy, TrajectoryReference
from gato.tools.autotune_linsys import figure8

Q0 = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0])
X0 = np.concatenate([Q0, np.zeros(7)])
URDF = gato.robot_urdf("iiwa14")


def numbered(T):
    """(6T,) trajectory whose knot j is [j, 10j, 100j, 0, 0, 0]: window starts are readable."""
    j = np.arange(T, dtype=np.float64)
    return np.stack([j, 10 * j, 100 * j, 0 * j, 0 * j, 0 * j], axis=1).reshape(-1)


def start_knot(w):
    return int(w[0])


# ------------------------------------------------------------------ references
def test_trajectory_reference_knot_semantics():
    ref = TrajectoryReference(numbered(10), 0.1, 4)     # T = 10 knots, last valid start 6
    assert ref.T == 10 and ref.last_start == 6
    w = ref.window(0.0)
    assert w.shape == (24,) and np.array_equal(w, numbered(10)[:24])
    assert start_knot(ref.window(0.25)) == 2            # floor(t / dt_knot)
    assert start_knot(ref.window(0.3)) == 3             # 0.3 / 0.1 = 2.9999999999999996 is knot 3
    assert start_knot(ref.window(0.6)) == 6
    assert start_knot(ref.window(0.7)) == 6             # clamped to the last full horizon
    assert start_knot(ref.window(50.0)) == 6
    assert start_knot(ref.window(-1.0)) == 0
    assert [ref.done(t) for t in (0.0, 0.6, 0.69, 0.7, 5.0)] == [False, False, False, True, True]
    w[:] = -1                                           # windows are copies
    assert start_knot(ref.window(0.0)) == 0
    two_d = TrajectoryReference(numbered(10).reshape(10, 6), 0.1, 4)
    assert np.array_equal(two_d.window(0.2), ref.window(0.2))


def test_trajectory_reference_bad_input():
    with pytest.raises(ValueError, match="traj_flat"):
        TrajectoryReference(np.zeros(13), 0.1, 2)
    with pytest.raises(ValueError, match="shorter than the horizon"):
        TrajectoryReference(numbered(3), 0.1, 4)
    with pytest.raises(ValueError, match="dt_knot"):
        TrajectoryReference(numbered(10), 0.0, 4)
    with pytest.raises(ValueError, match="N"):
        TrajectoryReference(numbered(10), 0.1, 1)
    with pytest.raises(ValueError, match="t"):
        TrajectoryReference(numbered(10), 0.1, 4).window(float("nan"))


def test_goal_reference():
    g = GoalReference([0.5, -0.1, 0.7], 3)
    w = g.window(12.0)
    assert np.array_equal(w, [0.5, -0.1, 0.7, 0, 0, 0] * 3)
    assert not g.done(0.0) and not g.done(1e6)
    with pytest.raises(ValueError, match="goal_xyz"):
        GoalReference([0.5, 0.1], 3)


# ------------------------------------------------------------------ MPCPolicy
def test_policy_reset_clock_obs_mapping_and_budget():
    s = gato.BSQP(URDF, 1, 16, 0.03125, max_sqp_iters=50)
    goal = GoalReference(s.ee_pos(Q0) + [0.0, 0.1, 0.0], 16)
    # limits="off": the converged ADMM fixed point would end the SQP loop before the budget test
    ctrl = gato.MPCController(s, linsys="pcg", limits="off")
    pol = MPCPolicy(ctrl, goal, 0.01, obs_to_state=lambda o: o["state"], budget_s=1e-6)
    warm = pol.reset({"state": X0})
    assert pol.t == 0.0 and warm.xu.shape == (1, s.xu_size) and int(warm.stats.sqp_iters[0]) > 1
    u = pol({"state": X0})
    r = pol.last_result
    assert np.array_equal(u, r.u) and u.shape == (7,)
    assert r.pred_err == 0.0                          # the warm-up's plan starts at X0
    assert r.iterations == 1 and r.budget_hit         # the policy's budget reached the controller
    pol({"state": X0})
    assert pol.t == pytest.approx(0.02) and not pol.done
    with pytest.raises(ValueError, match="dt_step"):
        MPCPolicy(ctrl, goal, -0.01)
    with pytest.raises(ValueError, match="reference"):
        MPCPolicy(ctrl, object(), 0.01)


def test_policy_slides_the_window_on_its_clock():
    s = gato.BSQP(URDF, 1, 4, 0.1)
    seen = []

    class Rec(TrajectoryReference):
        def window(self, t):
            seen.append(t)
            return super().window(t)

    traj = np.tile(np.concatenate([s.ee_pos(Q0), np.zeros(3)]), 10)
    pol = MPCPolicy(gato.MPCController(s), Rec(traj, 0.1, 4), 0.05)
    pol.reset(X0)
    for _ in range(3):
        pol(X0)
    assert seen == pytest.approx([0.0, 0.0, 0.05, 0.1])


@pytest.mark.slow
def test_policy_tracks_figure8_in_closed_loop():
    """iiwa14, N = 32 knots of 0.03125 s, 100 Hz control, one 4 s figure-8 period of
    half-width 0.1 m around the start EE position; linsys left to the controller (the CPU default, bdsv).
    Measured (2 cores, float64): mean EE error 9.0 mm, max 15.2 mm."""
    N, dtk, ctrl_dt, dur = 32, 0.03125, 0.01, 4.0
    s = gato.BSQP(URDF, 1, N, dtk)
    traj = figure8(s.ee_pos(Q0), N, dtk, dur, amplitude=0.1, period=4.0)
    ref = TrajectoryReference(traj, dtk, N)
    ctrl = gato.MPCController(s)
    assert ctrl.linsys == "bdsv"
    pol = MPCPolicy(ctrl, ref, ctrl_dt)
    x = X0.copy()
    pol.reset(x)
    errs, ee = [], []
    for _ in range(int(round(dur / ctrl_dt))):
        u = pol(x)
        assert np.all(np.isfinite(u)) and np.all(np.abs(u) <= s.limits["u"])
        x = np.asarray(s.sim_forward(x, u, ctrl_dt))[0]
        ee.append(s.ee_pos(x[:7]))
        errs.append(np.linalg.norm(ee[-1] - ref.window(pol.t)[:3]))
    errs, ee = np.array(errs), np.array(ee)
    assert errs.mean() < 0.015
    assert errs.max() < 0.025
    # the arm really travelled the figure-8 (0.2 m wide, 0.1 m tall), not a stand-still near its centre
    assert np.ptp(ee[:, 1]) > 0.18 and np.ptp(ee[:, 2]) > 0.08
