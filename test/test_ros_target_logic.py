"""The controller node's Cartesian target interfaces without ROS (gato_ros.target_logic,
gato_ros.frames): a PoseStamped goal on a minimum-jerk path into the reference window, the
servo twist with its clamp and timeout, frames through the tf tree, and bad input refused with
its reason while the running target is kept. Synthetic time (ns stamps), no wall clock."""
import numpy as np
import pytest

from gato_ros.frames import FrameTree, quat_to_matrix
from gato_ros.target_logic import TargetLogic

MS = 1_000_000
CFG = {"target_frame": "", "goal_speed_mps": 0.1, "goal_min_duration_s": 0.5, "target_max_distance_m": 1.0,
       "servo_max_speed_mps": 0.25, "servo_timeout_s": 0.1, "traj_posture_weight": 20.0, "N": 32, "dt": 0.03125}
EE0 = np.array([0.5, 0.0, 0.6])
IDENT = [0.0, 0.0, 0.0, 1.0]


def _logic(**over):
    return TargetLogic({**CFG, **over}, "world")


def _qz(angle):
    """Quaternion (x, y, z, w) of a rotation by ``angle`` about z."""
    return [0.0, 0.0, np.sin(angle / 2), np.cos(angle / 2)]


# ---------------------------------------------------------------- frames
def test_frame_tree_chains_transforms_and_refuses_unknown_or_unconnected_frames():
    f = FrameTree()
    assert f.set_transform("world", "base", [1.0, 0.0, 0.0], _qz(np.pi / 2)) is None
    assert f.set_transform("base", "tool", [0.0, 0.5, 0.0], IDENT) is None
    R, t = f.lookup("world", "tool")
    # tool origin: base (1, 0, 0) + Rz(90) (0, 0.5, 0) = (0.5, 0, 0)
    assert np.allclose(R @ np.zeros(3) + t, [0.5, 0.0, 0.0])
    assert np.allclose(R @ [1.0, 0, 0], [0.0, 1.0, 0.0])
    Ri, ti = f.lookup("tool", "world")                 # the inverse
    assert np.allclose(Ri @ (R @ [0.3, -0.2, 0.1] + t) + ti, [0.3, -0.2, 0.1])
    assert f.lookup("world", "camera") is None          # unknown
    f.set_transform("map", "odom", [0, 0, 0], IDENT)
    assert f.lookup("world", "odom") is None            # another tree
    assert np.allclose(f.lookup("world", "world")[1], 0.0)


def test_frame_tree_refuses_bad_transforms_with_their_reason():
    f = FrameTree()
    assert "non-finite translation" in f.set_transform("world", "a", [np.nan, 0, 0], IDENT)
    assert "not a rotation" in f.set_transform("world", "a", [0, 0, 0], [0, 0, 0, 0])
    assert "must be non-empty and different" in f.set_transform("a", "a", [0, 0, 0], IDENT)
    assert f.rejected == 3 and f.lookup("world", "a") is None
    f.set_transform("world", "a", [0, 0, 0], IDENT)
    f.set_transform("other", "a", [0, 0, 0], IDENT)     # a new parent replaces the edge (tf2's rule)
    assert f.reparented == 1 and f.lookup("world", "a") is None and f.lookup("other", "a") is not None


def test_quat_to_matrix_matches_a_rotation_about_z():
    R = quat_to_matrix(_qz(0.3))
    assert np.allclose(R, [[np.cos(0.3), -np.sin(0.3), 0], [np.sin(0.3), np.cos(0.3), 0], [0, 0, 1]])


# ---------------------------------------------------------------- goals
def test_pose_goal_is_a_minimum_jerk_path_from_the_measured_ee_to_the_goal_then_held():
    lg = _logic()
    goal = EE0 + [0.0, 0.2, 0.0]
    assert lg.window(0) is None and not lg.active
    assert lg.on_pose("", goal, IDENT, 0, EE0) is None
    T = 0.2 / CFG["goal_speed_mps"]                     # 2 s: distance / goal_speed_mps
    w = lg.window(0)
    assert w.stamp_ns == 0 and w.positions.shape == (32, 3) and w.knot_dt == CFG["dt"]
    assert np.allclose(w.positions[0], EE0)
    # the min-jerk profile at every knot: 10 s^3 - 15 s^4 + 6 s^5
    s = np.clip(np.arange(32) * CFG["dt"] / T, 0, 1)
    assert np.allclose(w.positions[:, 1], 0.2 * (10 * s**3 - 15 * s**4 + 6 * s**5))
    mid = lg.window(int(T / 2 * 1e9))
    assert np.allclose(mid.positions[0], EE0 + [0, 0.1, 0])  # half way at half time
    assert not lg.goal_reached(int(0.99 * T * 1e9)) and lg.goal_reached(int(T * 1e9))
    end = lg.window(int(5 * T * 1e9))
    assert np.allclose(end.positions, goal)              # held
    assert lg.counters.goals_accepted == 1


def test_short_goal_takes_goal_min_duration_and_a_new_goal_preempts_from_the_path():
    lg = _logic()
    lg.on_pose("world", EE0 + [0.01, 0, 0], IDENT, 0, EE0)
    assert lg._goal[3] == pytest.approx(0.5)             # 0.1 s by speed: the minimum applies
    lg2 = _logic()
    lg2.on_pose("", EE0 + [0.2, 0, 0], IDENT, 0, EE0)
    t1 = 1000 * MS                                       # half way: the path is at EE0 + 0.1 x
    p_mid = lg2.current_target(t1, EE0)
    assert lg2.on_pose("", EE0 + [0.1, 0.1, 0], IDENT, t1, EE0 + [0.05, 0, 0]) is None
    w = lg2.window(t1)
    assert np.allclose(w.positions[0], p_mid)            # continues from where the path was, not the EE


def test_tracked_orientation_slerps_from_the_measured_ee_on_the_min_jerk_profile_then_holds():
    """goal_orientation: the window's orientations go from the measured EE orientation to the
    goal's on the position's min-jerk profile (the same 2 s), the goal's after it; a new goal
    starts from where the slerp had reached; without the measured orientation the target is the
    goal's from the start (a constant)."""
    import pinocchio as pin

    from gato.core.references import min_jerk

    R0 = quat_to_matrix(_qz(0.3))
    R1 = quat_to_matrix(_qz(0.3 + np.radians(40.0)))
    t = _logic(goal_orientation=True)
    assert t.on_pose("", EE0 + [0.0, 0.2, 0.0], _qz(0.3 + np.radians(40.0)), 0, EE0, ee_rot_now=R0) is None
    w0 = t.window(0)
    assert np.allclose(pin.exp3(w0.orientations[0]), R0)          # starts at the measured orientation
    for tt in (500, 1000, 1500):                                  # along the path: 40 deg x min_jerk(t / 2 s)
        w = t.window(tt * MS)
        ang = np.degrees(np.linalg.norm(pin.log3(R0.T @ pin.exp3(w.orientations[0]))))
        assert ang == pytest.approx(40.0 * float(min_jerk(tt / 2000)), abs=1e-6)
        assert np.allclose(pin.exp3(w.orientations[0]), t.orientation_at([tt * MS])[0])
    assert np.allclose([pin.exp3(r) for r in t.window(2000 * MS).orientations], R1)      # then held
    # the same slerp's knots ahead: the window predicts the rotation like it predicts the position
    w = t.window(900 * MS)
    assert np.allclose(pin.exp3(w.orientations[-1]), t.orientation_at([900 * MS + round(31 * 0.03125e9)])[0])
    # a new goal mid-way starts its slerp from where the running one is (not the measured EE)
    R_mid = t.orientation_at([1000 * MS])[0]
    assert t.on_pose("", EE0, _qz(0.3), 1000 * MS, EE0, ee_rot_now=R1) is None
    assert np.allclose(pin.exp3(t.window(1000 * MS).orientations[0]), R_mid)
    # no measured orientation: a constant target (the goal's) from the goal's acceptance
    c = _logic(goal_orientation=True)
    assert c.on_pose("", EE0 + [0.0, 0.2, 0.0], _qz(1.0), 0, EE0) is None
    assert np.allclose([pin.exp3(r) for r in c.window(0).orientations], quat_to_matrix(_qz(1.0)))
    # off (the default): position only, whatever the measured orientation
    off = _logic()
    assert off.on_pose("", EE0, _qz(1.0), 0, EE0, ee_rot_now=R0) is None and off.window(0).orientations is None
    assert off.orientation_at([0]) is None
    with pytest.raises(ValueError, match="ee_rot_now"):
        t.on_pose("", EE0, _qz(0.3), 0, EE0, ee_rot_now=np.full((3, 3), np.nan))


def test_an_angular_twist_turns_the_servo_orientation_from_the_measured_one_clamped_then_holds():
    """The twist's angular part (base frame) turns an orientation target from the measured EE
    orientation at the angular velocity while the twist is in force; faster than
    servo_max_angular_rps: scaled down and counted; a twist without an angular part then holds the
    orientation reached; without a measured orientation the angular part is ignored, counted."""
    import pinocchio as pin

    R0 = quat_to_matrix(_qz(0.3))
    t = _logic(servo_timeout_s=0.5)
    assert t.on_twist("", [0.0, 0.0, 0.0], [0.0, 0.0, 0.2], 0, EE0, ee_rot_now=R0) is None
    w = t.window(0)
    assert w.orientations is not None and np.allclose(pin.exp3(w.orientations[0]), R0)
    # knot k at k dt, up to the timeout (0.5 s): exp(0.2 z t) R0
    for k in (4, 12, 31):
        tk = min(k * 0.03125, 0.5)
        assert np.allclose(pin.exp3(w.orientations[k]), quat_to_matrix(_qz(0.2 * tk)) @ R0, atol=1e-12)
    assert np.allclose(w.positions, EE0)                         # no linear part: the position held
    t.window(250 * MS)                                           # re-based at 0.25 s
    # a twist without an angular part keeps the orientation reached (not the measured one)
    assert t.on_twist("", [0.01, 0.0, 0.0], [0.0, 0.0, 0.0], 300 * MS, EE0, ee_rot_now=np.eye(3)) is None
    w = t.window(300 * MS)
    assert np.allclose([pin.exp3(r) for r in w.orientations], quat_to_matrix(_qz(0.2 * 0.3)) @ R0)
    # too fast: scaled down to servo_max_angular_rps (0.5 rad/s), counted with the reason
    c = t.counters.twists_clamped
    assert t.on_twist("", [0.0, 0.0, 0.0], [0.0, 3.0, 4.0], 400 * MS, EE0) is None
    assert t.counters.twists_clamped == c + 1 and "clamped to servo_max_angular_rps = 0.5" in t.last_reason
    w = t.window(400 * MS)
    turn = pin.log3(pin.exp3(w.orientations[0]).T @ pin.exp3(w.orientations[8]))
    assert np.linalg.norm(turn) == pytest.approx(0.5 * 8 * 0.03125, rel=1e-9)
    # no measured orientation and none tracked: the angular part is ignored (counted), position only
    n = _logic()
    assert n.on_twist("", [0.01, 0.0, 0.0], [0.0, 0.0, 0.2], 0, EE0) is None
    assert n.counters.angular_ignored == 1 and n.window(0).orientations is None
    # NaN angular: refused with the reason, the running target kept
    assert "non-finite" in t.on_twist("", [0.0, 0.0, 0.0], [np.nan, 0.0, 0.0], 500 * MS, EE0)


def test_goal_in_another_frame_is_transformed_and_unknown_frame_refused_and_counted():
    lg = _logic()
    lg.frames.set_transform("world", "table", [0.4, 0.0, 0.5], _qz(np.pi))
    assert lg.on_pose("table", [-0.1, 0.05, 0.1], IDENT, 0, EE0) is None
    assert np.allclose(lg._goal[2], [0.5, -0.05, 0.6])   # Rz(180) (-0.1, 0.05, 0.1) + (0.4, 0, 0.5)
    assert np.allclose(lg.goal_orientation, quat_to_matrix(_qz(np.pi)))
    before = lg._goal
    why = lg.on_pose("camera_link", [0.0, 0.0, 0.0], IDENT, 10 * MS, EE0)
    assert "frame 'camera_link' is unknown or not connected to 'world'" in why
    assert lg.counters.unknown_frame == 1 and lg.counters.goals_rejected == 1
    assert lg._goal is before                            # the running goal is kept


@pytest.mark.parametrize("pos,quat,reason", [
    ([np.nan, 0.0, 0.6], IDENT, "non-finite position"),
    ([0.5, np.inf, 0.6], IDENT, "non-finite position"),
    ([0.5, 0.0, 0.6], [0.0, 0.0, 0.0, 0.0], "orientation quaternion"),
    ([0.5, 0.0, 0.6], [np.nan, 0.0, 0.0, 1.0], "orientation quaternion"),
    ([2.0, 0.0, 0.6], IDENT, "1.500 m from the measured EE (target_max_distance_m = 1)"),
])
def test_bad_pose_goals_are_refused_with_the_reason_and_the_target_kept(pos, quat, reason):
    lg = _logic()
    lg.on_pose("", EE0 + [0, 0.1, 0], IDENT, 0, EE0)
    before = lg.window(50 * MS).positions.copy()
    why = lg.on_pose("", pos, quat, 50 * MS, EE0)
    assert why is not None and reason in why, why
    assert lg.counters.goals_rejected == 1 and lg.last_reason == why
    assert np.allclose(lg.window(50 * MS).positions, before)


# ---------------------------------------------------------------- servo
def _servo_run(lg, v, stream_s, total_s, period_ms=10, frame=""):
    """Ticks every period_ms; a twist every tick for stream_s; returns (t [s], target knot 0)."""
    ts, ps = [], []
    for k in range(int(total_s * 1000 / period_ms) + 1):
        t = k * period_ms * MS
        if t < stream_s * 1e9:
            assert lg.on_twist(frame, v, [0, 0, 0], t, EE0) is None
        w = lg.window(t)
        ts.append(t * 1e-9)
        ps.append(w.positions[0])
    return np.array(ts), np.array(ps)


def test_servo_target_moves_at_the_twist_and_stops_after_the_timeout():
    lg = _logic()
    t, p = _servo_run(lg, [0.1, 0.0, 0.0], 2.0, 3.0)
    # the last twist arrived at t = 1.99 s; it is in force until 1.99 + servo_timeout_s
    stop = 1.99 + CFG["servo_timeout_s"]
    assert np.allclose(p[t <= 1.99, 0] - EE0[0], 0.1 * t[t <= 1.99])
    assert p[-1, 0] - EE0[0] == pytest.approx(0.1 * stop)
    assert np.all(p[t >= stop, 0] == p[-1, 0])           # stopped and held
    assert lg.counters.servo_stops == 1 and lg.counters.twists_accepted == 200
    # the window predicts the motion up to the timeout only: the MPC brakes in time
    w = lg.window(int(3.0e9))
    assert np.ptp(w.positions, axis=0).max() == 0.0


def test_servo_window_predicts_the_motion_until_the_twist_expires():
    lg = _logic(servo_timeout_s=0.1)
    lg.on_twist("", [0.0, 0.0, -0.1], [0, 0, 0], 0, EE0)
    w = lg.window(0)
    tk = np.arange(32) * CFG["dt"]
    assert np.allclose(w.positions[:, 2], EE0[2] - 0.1 * np.minimum(tk, 0.1))


def test_twist_above_the_configured_speed_is_clamped_and_counted():
    lg = _logic(servo_max_speed_mps=0.25)
    assert lg.on_twist("", [0.3, 0.4, 0.0], [0, 0, 0], 0, EE0) is None      # 0.5 m/s
    assert np.allclose(lg._servo_v, [0.15, 0.2, 0.0]) and lg.counters.twists_clamped == 1
    assert "clamped to servo_max_speed_mps = 0.25" in lg.last_reason


def test_twist_in_a_rotated_frame_is_rotated_and_bad_twists_refused():
    lg = _logic()
    lg.frames.set_transform("world", "tool", [5.0, 5.0, 5.0], _qz(np.pi / 2))
    assert lg.on_twist("tool", [0.1, 0.0, 0.0], [0.0, 0.0, 0.5], 0, EE0) is None
    assert np.allclose(lg._servo_v, [0.0, 0.1, 0.0])     # rotation only: a twist is a free vector
    assert lg.counters.angular_ignored == 1
    v = lg._servo_v.copy()
    assert "non-finite linear" in lg.on_twist("", [np.nan, 0, 0], [0, 0, 0], 10 * MS, EE0)
    assert "frame 'nowhere' is unknown" in lg.on_twist("nowhere", [0.1, 0, 0], [0, 0, 0], 10 * MS, EE0)
    assert lg.counters.twists_rejected == 2 and lg.counters.unknown_frame == 1
    assert np.allclose(lg._servo_v, v)                   # the last valid twist stays in force


def test_a_goal_after_servo_starts_from_the_servo_target_and_servo_after_a_goal_from_the_path():
    lg = _logic()
    lg.on_twist("", [0.1, 0, 0], [0, 0, 0], 0, EE0)
    lg.window(50 * MS)
    p = lg.current_target(50 * MS, EE0)
    assert np.allclose(p, EE0 + [0.005, 0, 0])
    lg.on_pose("", EE0 + [0, 0.1, 0], IDENT, 50 * MS, EE0 + [0.004, 0, 0])
    assert lg.mode == "goal" and np.allclose(lg.window(50 * MS).positions[0], p)
    q = lg.current_target(550 * MS, EE0)
    lg.on_twist("", [0, 0, 0.1], [0, 0, 0], 550 * MS, EE0)
    assert lg.mode == "servo" and np.allclose(lg.window(550 * MS).positions[0], q)


# ---------------------------------------------------------------- joint targets
def _fk(q):
    """A toy EE: the first three joint positions as a point (the logic only needs a function)."""
    return np.asarray(q[:3], dtype=float) + [0.5, 0.0, 0.5]


def test_a_joint_trajectory_gives_per_knot_posture_targets_and_the_ee_window_of_the_same_samples():
    from gato_ros.trajectory_logic import TrajectoryTracker, parse_trajectory

    joints = ["A1", "A2", "A3"]
    defaults = {"traj_path_tolerance_rad": 0.1, "traj_goal_tolerance_rad": 0.01, "traj_goal_time_s": 1.0}
    tr = parse_trajectory(joints, [(1.0, [0.2, 0.0, 0.0], []), (2.0, [0.2, 0.2, 0.0], [])], joints,
                          np.full(3, -2.0), np.full(3, 2.0), defaults=defaults)
    lg = TargetLogic(CFG, "world", ee_pos=_fk)
    assert lg.posture(0) is None
    tk = TrajectoryTracker(tr, 100 * MS, np.zeros(3), np.zeros(3))
    lg.on_trajectory(tk)
    q, w = lg.posture(100 * MS)
    times = 100 * MS + np.round(np.arange(32) * CFG["dt"] * 1e9).astype(np.int64)
    assert q.shape == (32, 3) and np.allclose(q, tk.sample(times)[0]) and np.all(w == 20.0)
    win = lg.window(100 * MS)
    assert np.allclose(win.positions, [_fk(x) for x in q])
    # cancel: hold the measured joints
    lg.hold_joints([0.1, 0.05, 0.0])
    q, _ = lg.posture(500 * MS)
    assert np.allclose(q, [0.1, 0.05, 0.0]) and np.allclose(lg.window(500 * MS).positions, _fk([0.1, 0.05, 0.0]))
    # a pose goal preempts, starting at the held target's EE
    assert lg.on_pose("", EE0, IDENT, 600 * MS, _fk([0.1, 0.05, 0.0])) is None
    assert lg.posture(600 * MS) is None and np.allclose(lg.window(600 * MS).positions[0], _fk([0.1, 0.05, 0.0]))
