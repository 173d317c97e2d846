"""Joint-space targets without ROS (gato_ros.trajectory_logic): FollowJointTrajectory /
JointTrajectory validation with the control_msgs error code and a reason naming the rule, the
sampling the MPC's posture knots follow (cubic Hermite through the points, from the measured
state), and the outcome against path and goal tolerances. Synthetic times, no ROS."""
import numpy as np
import pytest

from gato_ros.trajectory_logic import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, PATH_TOLERANCE_VIOLATED, SUCCESSFUL,
                                       InvalidTrajectory, TrajectoryTracker, parse_trajectory)

J = ["A1", "A2", "A3"]
LO, HI = np.full(3, -2.0), np.full(3, 2.0)
DEF = {"traj_path_tolerance_rad": 0.1, "traj_goal_tolerance_rad": 0.01, "traj_goal_time_s": 1.0}
S = 10**9


def _parse(names, points, **kw):
    return parse_trajectory(names, points, J, LO, HI, defaults=DEF, **kw)


def test_a_trajectory_in_another_joint_order_is_reordered_and_gets_the_default_tolerances():
    tr = _parse(["A3", "A1", "A2"], [(1.0, [0.3, 0.1, 0.2], []), (2.0, [0.6, 0.4, 0.5], [])])
    assert np.allclose(tr.q, [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]) and tr.qd is None
    assert np.allclose(tr.path_tol, 0.1) and np.allclose(tr.goal_tol, 0.01) and tr.goal_time_s == 1.0
    assert np.all(np.isinf(tr.goal_vel_tol))


def test_tolerances_per_joint_zero_is_the_default_and_negative_is_none():
    tr = _parse(J, [(1.0, [0, 0, 0], [])], path_tolerance=[("A2", 0.05, 0.0), ("A3", -1.0, 0.0)],
                goal_tolerance=[("A1", 0.002, 0.01), ("A2", 0.0, 0.0)], goal_time_tolerance_s=0.5)
    assert np.allclose(tr.path_tol[:2], [0.1, 0.05]) and np.isinf(tr.path_tol[2])
    assert np.allclose(tr.goal_tol, [0.002, 0.01, 0.01]) and tr.goal_vel_tol[0] == 0.01
    assert tr.goal_time_s == 0.5


@pytest.mark.parametrize("names,points,kw,reason", [
    (["A1", "A2", "Z9"], [(1.0, [0, 0, 0], [])], {}, "['Z9'] not controlled"),
    (["A1", "A2"], [(1.0, [0, 0], [])], {}, "['A3'] missing"),
    (["A1", "A1", "A2"], [(1.0, [0, 0, 0], [])], {}, "repeated names"),
    (J, [], {}, "empty trajectory"),
    (J, [(1.0, [0, 0], [])], {}, "points[0].positions: 2 values for 3 joint names"),
    (J, [(1.0, [0, 0, 0], [0, 0])], {}, "points[0].velocities: 2 values"),
    (J, [(1.0, [0, 0, 0], [0, 0, 0]), (2.0, [0, 0, 0], [])], {}, "given for some points only"),
    (J, [(1.0, [0, np.nan, 0], [])], {}, "points[0]: non-finite"),
    (J, [(1.0, [0, 0, 0], []), (1.0, [0, 0, 0], [])], {}, "points[1].time_from_start: 1 s, must be >= 0 and after"),
    (J, [(2.0, [0, 0, 0], []), (1.0, [0, 0, 0], [])], {}, "points[1].time_from_start"),
    (J, [(-0.1, [0, 0, 0], [])], {}, "points[0].time_from_start: -0.1 s"),
    (J, [(1.0, [0, 2.5, 0], [])], {}, "points[0]: A2 = 2.5000 rad is beyond its URDF limits [-2.0000, 2.0000]"),
    (J, [(1.0, [0, 0, 0], [])], {"goal_tolerance": [("B7", 0.1, 0.0)]}, "goal_tolerance: joint 'B7'"),
    (J, [(1.0, [0, 0, 0], [])], {"path_tolerance": [("A1", np.inf, 0.0)]}, "non-finite tolerance for A1"),
])
def test_bad_trajectories_are_refused_invalid_goal_with_the_reason(names, points, kw, reason):
    with pytest.raises(InvalidTrajectory) as e:
        _parse(names, points, **kw)
    assert e.value.code == INVALID_GOAL and reason in str(e.value), str(e.value)


def test_sampling_starts_at_the_measured_state_passes_every_point_and_holds_the_last():
    tr = _parse(J, [(1.0, [0.2, 0.0, 0.0], []), (2.0, [0.4, 0.2, 0.0], []), (3.0, [0.4, 0.4, 0.0], [])])
    q0 = np.array([0.0, 0.0, 0.1])
    tk = TrajectoryTracker(tr, 5 * S, q0, np.zeros(3))
    assert tk.duration_s == 3.0
    q, qd = tk.sample([5 * S, 6 * S, 7 * S, 8 * S, 20 * S])
    assert np.allclose(q[0], q0) and np.allclose(q[1:4], tr.q) and np.allclose(q[4], tr.q[-1])
    assert np.allclose(qd[0], 0) and np.allclose(qd[-1], 0)
    # inner velocity: centred difference (0.4 - 0.0) / 2 s on A1 at the first point
    assert qd[1][0] == pytest.approx(0.2)
    # the derivative of the sampled position is the sampled velocity
    t = np.array([5.5, 6.3, 7.7]) * S
    dq_num = (tk.sample(t.astype(np.int64) + 1000)[0] - tk.sample(t.astype(np.int64) - 1000)[0]) / 2e-6
    assert np.allclose(tk.sample(t.astype(np.int64))[1], dq_num, atol=1e-5)


def test_given_velocities_are_met_and_a_point_at_time_zero_replaces_the_measured_start():
    tr = _parse(J, [(0.0, [0.1, 0.1, 0.1], [0, 0, 0]), (1.0, [0.3, 0.1, 0.1], [0.5, 0, 0])])
    tk = TrajectoryTracker(tr, 0, np.zeros(3), np.zeros(3))
    q, qd = tk.sample([0, S - 1])
    assert np.allclose(q[0], [0.1, 0.1, 0.1]) and qd[1][0] == pytest.approx(0.5, abs=1e-6)


def test_outcomes_successful_path_and_goal_tolerance_violated():
    tr = _parse(J, [(1.0, [0.2, 0.0, 0.0], [])])
    tk = TrajectoryTracker(tr, 0, np.zeros(3), np.zeros(3))
    q_mid = tk.sample([S // 2])[0][0]
    assert tk.check(S // 2, q_mid + 0.05, np.zeros(3)) == (None, "")          # within the path tolerance
    code, why = tk.check(S // 2, q_mid + [0, 0.15, 0], np.zeros(3))
    assert code == PATH_TOLERANCE_VIOLATED and "A2 off the path by 0.1500 rad" in why
    assert tk.check(S, [0.2, 0.0, 0.0], np.zeros(3))[0] == SUCCESSFUL
    assert tk.check(S + S // 2, [0.25, 0.0, 0.0], np.zeros(3)) == (None, "")  # settling: goal_time_s = 1 s
    code, why = tk.check(2 * S + 1, [0.25, 0.0, 0.0], np.zeros(3))
    assert code == GOAL_TOLERANCE_VIOLATED and why.startswith("A1 0.0500 rad from the goal 1 s after")
