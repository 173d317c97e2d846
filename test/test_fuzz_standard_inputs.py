"""Fuzzing the standard ROS 2 target interfaces without ROS (issue 38 over issue 31's inputs):
seeded malformed geometry_msgs/PoseStamped (~/goal_pose), geometry_msgs/TwistStamped
(~/delta_twist_cmds) and trajectory_msgs/JointTrajectory (~/joint_trajectory and the
FollowJointTrajectory goal's trajectory), real rclpy message classes from test/fuzz_messages.py,
unpacked the way gato_ros.standard_io does and handed to the ROS-free logic
(gato_ros.target_logic.TargetLogic, gato_ros.trajectory_logic).

Asserted for every case: nothing but the documented refusal leaves the logic; a bad message is
refused with a reason and counted exactly once, a harmless one is taken; and what the
controller would track afterwards (the EE reference window, the per-knot posture targets) is
finite, within the target distance, the servo speed and the URDF joint limits."""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("geometry_msgs.msg", _HINT)
import_or_skip("trajectory_msgs.msg", _HINT)
from fuzz_messages import NS, Context, malformed  # noqa: E402

from gato_ros.frames import FrameTree  # noqa: E402
from gato_ros.target_logic import TargetLogic  # noqa: E402
from gato_ros.trajectory_logic import (InvalidTrajectory, TrajectoryTracker, parse_trajectory,  # noqa: E402
                                       points_from_msg)

ROBOT = "iiwa14"
MS = 1_000_000
CFG = {"target_frame": "", "goal_speed_mps": 0.1, "goal_min_duration_s": 0.5, "target_max_distance_m": 1.0,
       "servo_max_speed_mps": 0.25, "servo_timeout_s": 0.1, "traj_posture_weight": 20.0, "N": 32, "dt": 0.03125}
DEFAULTS = {"traj_path_tolerance_rad": 0.2, "traj_goal_tolerance_rad": 0.02, "traj_goal_time_s": 1.0}
EE = np.array([0.5, 0.0, 0.6])
N_CASES = 1500


def _robot():
    """(joint names, q ready (n,), lower, upper, velocity limit) of iiwa14 in its URDF order."""
    import pinocchio as pin

    import gato
    from gato.sim.scenarios import Q_READY

    m = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    return (list(m.names)[1:], np.asarray(Q_READY[ROBOT], dtype=np.float64),
            np.asarray(m.lowerPositionLimit, dtype=np.float64), np.asarray(m.upperPositionLimit, dtype=np.float64),
            np.asarray(m.velocityLimit, dtype=np.float64))


def _frames():
    """The base frame "world" and a "table" frame 2 cm off it, turned 10 degrees about z."""
    f = FrameTree()
    a = np.deg2rad(10.0)
    assert f.set_transform("world", "table", [0.02, 0.0, 0.0], [0.0, 0.0, np.sin(a / 2), np.cos(a / 2)]) is None
    return f


def _ctx(stamp_ns=5 * NS):
    names, q, lo, hi, vlim = _robot()
    return Context(stamp_ns=stamp_ns, names=names, q=q, qd=np.zeros(len(q)), ee=EE.copy(), lower=lo, upper=hi,
                   vel_limit=vlim, frames=("world", "table"))


def _fk(q):
    """A stand-in EE map (the logic needs a function q -> (3,)): finite for finite q."""
    return EE + 0.1 * np.tanh(np.asarray(q, dtype=np.float64)[:3])


def _window_ok(lg, t_ns, what):
    """The window the controller would track at ``t_ns``: finite; None only while no target was
    ever accepted."""
    w = lg.window(t_ns)
    if w is None:
        assert not lg.active, what
        return np.repeat(EE[None, :], CFG["N"], 0)
    assert np.all(np.isfinite(w.positions)), what
    return w.positions


def test_pose_goals_bad_ones_refused_and_counted_once_targets_stay_finite_and_near():
    """1,500 PoseStamped goals (1-3 mutations each): a refusal iff a bad mutation, counted once in
    goals_rejected (unknown frames also in unknown_frame); every accepted goal starts a path whose
    window is finite and ends within target_max_distance_m of the measured EE."""
    rng = np.random.default_rng(3801)
    ctx = _ctx()
    lg = TargetLogic(CFG, "world", _frames())
    t, n_bad = 10 * MS, 0
    for i in range(N_CASES):
        m, bad, names = malformed("PoseStamped", ctx, rng)
        before = (lg.counters.goals_rejected, lg.counters.goals_accepted, lg.counters.unknown_frame)
        p, o = m.pose.position, m.pose.orientation
        why = lg.on_pose(m.header.frame_id, [p.x, p.y, p.z], [o.x, o.y, o.z, o.w], t, EE)
        c = lg.counters
        if bad:
            n_bad += 1
            assert why and "refused" in why, f"case {i}: {names} accepted"
            assert (c.goals_rejected, c.goals_accepted) == (before[0] + 1, before[1]), (i, names)
            # the frame is looked up after the position and orientation checks: counted when reached
            seen = c.unknown_frame - before[2]
            assert seen == (names == ["frame_unknown"]) or (seen == 0 or "frame_unknown" in names), (i, names, why)
        else:
            assert why is None, f"case {i}: a valid goal ({names}) was refused: {why}"
            assert (c.goals_rejected, c.goals_accepted) == (before[0], before[1] + 1), (i, names)
        pos = _window_ok(lg, t, (i, names))
        far = _window_ok(lg, t + 60 * NS, (i, names))[-1]       # long after: the goal, held
        assert np.linalg.norm(far - EE) <= CFG["target_max_distance_m"] + 1e-9, (i, names, far)
        assert np.linalg.norm(pos[0] - EE) <= CFG["target_max_distance_m"] + 1e-9, (i, names, pos[0])
        t += 10 * MS
    assert n_bad >= N_CASES // 3, n_bad


def test_twists_bad_ones_refused_and_counted_fast_ones_clamped_and_the_servo_never_outruns_its_limit():
    """1,500 TwistStamped commands: non-finite or in an unknown frame refused (counted once);
    too fast ones (up to 1e308 m/s) clamped and counted, never refused; the window the servo
    target produces is finite and moves at most servo_max_speed_mps between knots."""
    rng = np.random.default_rng(3802)
    ctx = _ctx()
    lg = TargetLogic(CFG, "world", _frames())
    t, n_bad, n_fast = 10 * MS, 0, 0
    vmax, dt = CFG["servo_max_speed_mps"], CFG["dt"]
    for i in range(N_CASES):
        m, bad, names = malformed("TwistStamped", ctx, rng)
        c = lg.counters
        before = (c.twists_rejected, c.twists_accepted, c.twists_clamped)
        v, w = m.twist.linear, m.twist.angular
        why = lg.on_twist(m.header.frame_id, [v.x, v.y, v.z], [w.x, w.y, w.z], t, EE)
        if bad:
            n_bad += 1
            assert why and "refused" in why, f"case {i}: {names} accepted"
            assert (c.twists_rejected, c.twists_accepted) == (before[0] + 1, before[1]), (i, names)
        else:
            assert why is None, f"case {i}: a valid twist ({names}) was refused: {why}"
            assert (c.twists_rejected, c.twists_accepted) == (before[0], before[1] + 1), (i, names)
            if "too_fast" in names:
                n_fast += 1
                assert c.twists_clamped == before[2] + 1, (i, names)
        pos = _window_ok(lg, t, (i, names))
        step = np.linalg.norm(np.diff(pos, axis=0), axis=1) / dt
        assert np.all(step <= vmax * (1 + 1e-9)), (i, names, step.max())
        t += 10 * MS
    assert n_bad >= N_CASES // 4 and n_fast >= N_CASES // 10, (n_bad, n_fast)


def test_clamped_huge_twist_keeps_its_direction():
    """A twist of 1e308 m/s along x (its norm overflows a plain sqrt of squares) is clamped to
    servo_max_speed_mps along x, not to zero."""
    lg = TargetLogic(CFG, "world")
    assert lg.on_twist("", [1e308, 1e308, 0.0], [0.0, 0.0, 0.0], 10 * MS, EE) is None
    pos = lg.window(10 * MS).positions
    v = (pos[1] - pos[0]) / CFG["dt"]
    assert np.allclose(v, [vmax := CFG["servo_max_speed_mps"] / np.sqrt(2), vmax, 0.0], rtol=1e-9), v


def test_joint_trajectories_bad_ones_refused_with_a_reason_and_posture_targets_stay_within_the_limits():
    """1,500 JointTrajectory messages through the node's parse (URDF position and velocity
    limits): a refusal (InvalidTrajectory, INVALID_GOAL, with a reason) iff a bad mutation; an
    accepted one gives per-knot posture targets that are finite and inside the URDF limits at
    every knot of its whole duration, and an EE window of the same samples."""
    rng = np.random.default_rng(3803)
    ctx = _ctx()
    names, q0, lo, hi, vlim = _robot()
    lg = TargetLogic(CFG, "world", ee_pos=_fk)
    t, n_bad = 10 * MS, 0
    for i in range(N_CASES):
        m, bad, muts = malformed("JointTrajectory", ctx, rng)
        try:
            traj = parse_trajectory(m.joint_names, points_from_msg(m.points), names, lo, hi, defaults=DEFAULTS,
                                    velocity_limit=vlim)
        except InvalidTrajectory as e:
            assert bad, f"case {i}: a valid trajectory ({muts}) was refused: {e}"
            assert str(e) and e.code == -1, (i, muts, e)
            n_bad += 1
            continue
        assert not bad, f"case {i}: {muts} accepted"
        lg.on_trajectory(TrajectoryTracker(traj, t, q0, np.zeros(len(q0))))
        for tk in (t, t + int(traj.t[-1] * NS) // 2, t + int(traj.t[-1] * NS) + NS):
            q, wts = lg.posture(tk)
            assert np.all(np.isfinite(q)) and np.all(q >= lo - 1e-12) and np.all(q <= hi + 1e-12), (i, muts)
            assert np.all(wts == CFG["traj_posture_weight"])
            _window_ok(lg, tk, (i, muts))
        t += 10 * MS
    assert n_bad >= N_CASES // 2, n_bad


def test_a_trajectory_faster_than_the_urdf_allows_is_refused_naming_the_joint():
    names, q0, lo, hi, vlim = _robot()
    v = np.zeros(len(names))
    v[3] = 2.0 * vlim[3]
    with pytest.raises(InvalidTrajectory, match=rf"points\[0\]\.velocities: {names[3]} = .* beyond its URDF velocity"):
        parse_trajectory(names, [(1.0, q0, v)], names, lo, hi, defaults=DEFAULTS, velocity_limit=vlim)
    # within the limit: taken
    parse_trajectory(names, [(1.0, q0, 0.5 * v)], names, lo, hi, defaults=DEFAULTS, velocity_limit=vlim)


def test_posture_samples_are_clipped_to_the_limits_where_a_hermite_segment_overshoots():
    """A point at the upper limit reached at full speed: the cubic through it would overshoot;
    the posture target stops at the limit (velocity 0 there)."""
    names, q0, lo, hi, vlim = _robot()
    qa = np.clip(q0, lo + 0.5, hi - 0.5)
    qb = qa.copy()
    qb[0] = hi[0]
    vb = np.zeros(len(names))
    vb[0] = 0.9 * vlim[0]
    traj = parse_trajectory(names, [(0.5, qa, np.zeros(len(names))), (1.5, qb, vb), (3.0, qb, np.zeros(len(names)))],
                            names, lo, hi, defaults=DEFAULTS, velocity_limit=vlim)
    tr = TrajectoryTracker(traj, 0, qa, np.zeros(len(names)))
    ts = np.arange(0, 3 * NS, 10 * MS)
    q, dq = tr.sample(ts)
    assert q[:, 0].max() == hi[0] and np.all(q >= lo) and np.all(q <= hi)
    at_limit = (q[:, 0] == hi[0]) & (ts != int(1.5 * NS))        # the point itself keeps its velocity
    assert at_limit.sum() >= 5 and np.all(dq[at_limit, 0] == 0.0)
