"""gato.references: one definition per curve (figure-8, minimum-jerk segments, goal
sequences, hold, sampled trajectories), the window protocol, and that every user gets
the same numbers: gato.tasks, the autotuner, the benchmark problem, the policy's
references and (bit for bit) the ROS reference node's logic of today."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from gato import references as R
from gato import tasks
from gato.policy import GoalReference, TrajectoryReference

ROOT = Path(__file__).resolve().parents[1]
CENTRE = np.array([0.62, 0.0, 0.46])


def fd(ref, t, h=1e-6):
    return (ref.positions(t + h) - ref.positions(t - h)) / (2 * h)


def test_figure8_geometry_window_and_velocities():
    f = R.Figure8(CENTRE, 0.15, 0.1, theta=math.pi / 2, period=4.0)
    t = np.linspace(0.0, 4.0, 401)
    p = f.positions(t)
    assert np.allclose(p[0], CENTRE) and np.allclose(p[-1], CENTRE)      # starts and ends at the crossing
    assert np.ptp(p[:, 0]) < 1e-12                                      # theta = pi/2: the y-z plane
    assert np.ptp(p[:, 1]) == pytest.approx(0.3, abs=1e-4) and np.ptp(p[:, 2]) == pytest.approx(0.2, abs=1e-4)
    w = f.window(0.5, 8, 0.03125)
    assert isinstance(w, R.ReferenceWindow) and w.n_knots == 8 and w.knot_dt == 0.03125
    assert w.stamp_ns == 500_000_000
    assert np.array_equal(w.positions, f.positions(0.5 + 0.03125 * np.arange(8)))
    tm = np.linspace(0.1, 3.9, 37)
    np.testing.assert_allclose(f.velocities(tm), fd(f, tm), atol=1e-7)
    flat = w.solver_layout().reshape(8, 6)
    assert np.array_equal(flat[:, :3], w.positions) and not np.any(flat[:, 3:])
    assert f.covers(1e6, 32, 0.03125) and not f.done(1e6)
    with pytest.raises(ValueError, match="period"):
        R.Figure8(CENTRE, 0.1, 0.1, period=0.0)
    with pytest.raises(ValueError, match="centre"):
        R.Figure8([0.0, 1.0], 0.1, 0.1)


def test_every_figure8_user_gets_the_one_curve():
    """gato.tasks.figure8, the autotuner's probe and the benchmark problem are Figure8 samples."""
    p = tasks.figure8(0.01, 0.15, 0.08, CENTRE, 0.3, 2.5, cycles=2)
    assert np.array_equal(p, R.Figure8(CENTRE, 0.15, 0.08, 0.3, 2.5).positions(np.arange(500) * 0.01))
    from gato.tools.autotune_linsys import figure8 as probe

    flat = probe(CENTRE, 8, 0.03125, 1.0).reshape(-1, 6)
    want = R.Figure8(CENTRE, 0.1, 0.05, math.pi / 2, 4.0).positions(np.arange(len(flat)) * 0.03125)
    assert len(flat) == 32 + 8 + 1 and np.array_equal(flat[:, :3], want) and not np.any(flat[:, 3:])
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import fig8_problem as fp
    finally:
        sys.path.remove(str(ROOT / "bench"))
    bench = R.Figure8(CENTRE, fp.AMP[0], fp.AMP[1], math.pi / 2, fp.PERIOD)
    assert np.array_equal(fp.ref_window(CENTRE, 0.25, 16), bench.positions(0.25 + fp.DT * np.arange(16)))
    assert fp.figure8(CENTRE, 0.5).shape == (3,)


def test_min_jerk_segment_and_its_rate():
    assert R.min_jerk(0.0) == 0.0 and R.min_jerk(1.0) == 1.0 and R.min_jerk(0.5) == 0.5
    assert R.min_jerk(-1.0) == 0.0 and R.min_jerk(2.0) == 1.0
    s = np.linspace(0, 1, 101)
    assert np.all(np.diff(R.min_jerk(s)) >= 0)
    a, b = np.array([0.5, 0.0, 0.4]), np.array([0.6, 0.2, 0.3])
    seg = R.MinJerkSegment(a, b, t_start=1.0, ramp=0.8)
    p = seg.positions([0.0, 1.0, 1.4, 1.8, 5.0])
    np.testing.assert_allclose(p, [a, a, 0.5 * (a + b), b, b], atol=1e-15)
    tm = np.linspace(0.9, 1.9, 41)
    np.testing.assert_allclose(seg.velocities(tm), fd(seg, tm), atol=1e-6)
    step = R.MinJerkSegment(a, b, 1.0, 0.0)
    assert np.array_equal(step.positions([0.0, 3.0]), [b, b]) and not np.any(step.velocities([0.5]))
    with pytest.raises(ValueError, match="ramp"):
        R.MinJerkSegment(a, b, 0.0, -1.0)


def test_goal_sequence_schedule_hold_and_rates():
    start = np.array([0.5, 0.0, 0.5])
    g = np.array([[0.6, 0.1, 0.5], [0.6, -0.1, 0.4]])
    seq = R.GoalSequence(g, hold_s=2.0, ramp_s=0.5, start=start)
    p = seq.positions([0.0, 0.25, 0.5, 1.9, 2.0, 2.5, 4.5, -1.0])
    np.testing.assert_allclose(p, [start, 0.5 * (start + g[0]), g[0], g[0], g[0], g[1], g[0], start], atol=1e-15)
    tm = np.linspace(0.05, 3.95, 79)
    np.testing.assert_allclose(seq.velocities(tm), fd(seq, tm), atol=1e-6)
    assert R.GoalSequence(g, 1.0, 5.0, start).ramp_s == 1.0      # the ramp is clipped to the hold
    hold = R.Hold(start)
    w = hold.window(3.0, 4, 0.1)
    assert np.array_equal(w.positions, np.tile(start, (4, 1))) and not np.any(w.velocities)


def test_sampled_trajectory_grid_windows_interpolation_and_coverage():
    T, dt = 20, 0.1
    pts = np.stack([np.arange(T) * 0.01, np.zeros(T), np.full(T, 0.5)], axis=1)
    tr = R.SampledTrajectory(pts, dt)
    w = tr.window(0.3, 5, dt)                               # on the grid: exact sample copies
    assert np.array_equal(w.positions, pts[3:8]) and w.velocities is None
    assert tr.index(0.3) == 3                               # 0.3 / 0.1 = 2.9999999999999996
    assert np.array_equal(tr.window(10.0, 5, dt).positions, pts[15:20])     # clamped to the last horizon
    wi = tr.window(0.05, 3, 0.05)                           # another spacing: linear interpolation
    np.testing.assert_allclose(wi.positions[:, 0], [0.005, 0.01, 0.015], atol=1e-15)
    assert tr.covers(1.5, 5, dt) and not tr.covers(1.6, 5, dt)
    assert tr.covers(1.5, 9, 0.05) and not tr.covers(1.55, 9, 0.05)
    assert not tr.done(1.9) and tr.done(2.0)
    with pytest.raises(ValueError, match="N"):
        tr.window(0.0, 21, dt)
    with pytest.raises(ValueError, match="positions"):
        R.SampledTrajectory(np.full((4, 3), np.nan), dt)


def test_policy_references_are_views_of_the_core_references():
    T, N, dt = 12, 4, 0.1
    flat = np.concatenate([np.random.default_rng(0).uniform(size=(T, 3)), np.zeros((T, 3))], axis=1).ravel()
    tr = TrajectoryReference(flat, dt, N)
    core = R.SampledTrajectory(flat.reshape(-1, 6)[:, :3], dt)
    for t in (0.0, 0.3, 0.75, 5.0):
        assert np.array_equal(tr.window(t), core.window(t, N, dt).solver_layout())
    g = GoalReference([0.6, 0.0, 0.5], 8)
    assert np.array_equal(g.window(2.0), R.Hold([0.6, 0.0, 0.5]).window(2.0, 8, 0.1).solver_layout())


def test_reference_window_validation_and_resampling():
    with pytest.raises(ValueError, match="positions"):
        R.ReferenceWindow(0, 0.1, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="knot_dt"):
        R.ReferenceWindow(0, 0.0, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="velocities"):
        R.ReferenceWindow(0, 0.1, np.zeros((2, 3)), velocities=np.zeros((3, 3)))
    w = R.ReferenceWindow(1_000, 0.1, [[0, 0, 0], [1, 0, 0], [2, 0, 0]])
    np.testing.assert_allclose(w.sample(1_000 + 50_000_000, 2, 0.1)[:, 0], [0.5, 1.5])
    from gato.reference_window import ReferenceWindow

    assert ReferenceWindow is R.ReferenceWindow      # one window type


# ------------------------------------------------------------------ the ROS reference node, bit for bit
def _reference_logic():
    from conftest import import_or_skip

    return import_or_skip("gato_ros.reference_logic", "build the workspace and source install/setup.bash")


def test_core_figure8_window_equals_the_ros_reference_logic_bit_for_bit():
    rl = _reference_logic()
    cfg = {"robot": "iiwa14", "mode": "fig8", "fig8_period_s": 3.3, "fig8_amplitude_x": 0.12,
           "fig8_amplitude_z": 0.07, "fig8_theta": 0.4, "n_knots": 40, "knot_dt": 0.03125}
    logic = rl.ReferenceLogic(cfg)
    c = logic.cfg
    core = R.Figure8(logic.start, c["fig8_amplitude_x"], c["fig8_amplitude_z"], c["fig8_theta"], c["fig8_period_s"])
    for t_ns in (0, 218_750_000, 1_000_000_001, 7_333_333_333, 123_456_789_012):
        ros = logic.window(t_ns)
        mine = core.window(R.ns_to_sec(t_ns), c["n_knots"], c["knot_dt"])
        assert mine.stamp_ns == ros.stamp_ns and mine.knot_dt == ros.knot_dt
        assert np.array_equal(mine.positions, ros.positions)


def test_core_goal_sequence_and_hold_equal_the_ros_reference_logic_bit_for_bit():
    rl = _reference_logic()
    goals = [0.6, 0.1, 0.5, 0.6, -0.1, 0.4, 0.55, 0.0, 0.6]
    logic = rl.ReferenceLogic({"robot": "iiwa14", "mode": "goals", "goals": goals, "goal_hold_s": 1.7,
                               "goal_ramp_s": 0.6})
    core = R.GoalSequence(np.reshape(goals, (-1, 3)), logic.cfg["goal_hold_s"], logic.cfg["goal_ramp_s"],
                          logic.start)
    t = np.linspace(-0.5, 12.0, 2001)
    assert np.array_equal(core.positions(t), logic.positions(t))
    hold = rl.ReferenceLogic({"robot": "iiwa14", "mode": "hold"})
    assert np.array_equal(R.Hold(hold.start).positions(t), hold.positions(t))


def test_mpc_policy_takes_a_core_reference():
    """MPCPolicy windows a gato.references.Reference at the solver's N and dt: the same torques as
    the reference API's GoalReference holding the same point."""
    from gato.policy import MPCPolicy

    urdf = gato.robot_urdf("iiwa14")
    x0 = np.r_[tasks.Q_READY["iiwa14"], np.zeros(7)]
    goal = gato.BSQP(urdf, 1, 2, 0.03125).ee_pos(x0[:7]) + [0.0, 0.03, 0.0]
    us = []
    for ref in (R.Hold(goal), GoalReference(goal, 8)):
        pol = MPCPolicy(gato.MPCController(gato.BSQP(urdf, 1, 8, 0.03125)), ref, 0.01)
        pol.reset(x0)
        us.append([pol(x0) for _ in range(3)])
    assert np.array_equal(us[0], us[1])
