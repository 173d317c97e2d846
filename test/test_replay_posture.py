"""Issue 31, replay of the ticks solved with joint posture tables: while the controller tracks a
joint trajectory or a joint hold (``~/follow_joint_trajectory``, ``~/joint_trajectory``) its
solver's posture term carries per-knot targets and weights (gato_ros.target_logic.posture).
gato_msgs/SolveInput records them (``posture_rows`` / ``posture_q`` / ``posture_weight``, empty =
off) and ``gato replay`` programs them as the node did, so those ticks replay exactly. A bag
recorded with SolveInput's definition from before the fields decodes with its own definition:
without joint targets it replays exactly as before; with them, its posture ticks differ and the
report says why. The run over DDS (the FollowJointTrajectory action, recorded and replayed):
test_ros_action_system.py::test_follow_joint_trajectory_succeeds_refuses_cancels_and_preempts."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (gato_msgs)")
from gato_ros import conversions as cv  # noqa: E402
from gato_ros.types import SolveInput  # noqa: E402

ROBOT = "iiwa14"
N = 16                       # a short horizon: the runs stay fast
TRAJ, HOLD, POSE = 5, 25, 32  # ticks: a trajectory starts, a cancel's joint hold, a pose goal (posture off)


def _drive(dq=(0.06, 0.04, 0.0, -0.04, 0.0, 0.04, 0.0)):
    """The ``targets`` hook of record_lockstep_run: the node's TargetLogic as the controller's
    target_source; at tick TRAJ a 3-point 0.3 s joint trajectory (the action's parse and tracker),
    at HOLD a joint hold where the arm is (a cancel), at POSE a pose goal where the EE is."""
    from gato_ros.target_logic import TargetLogic
    from gato_ros.trajectory_logic import TrajectoryTracker, parse_trajectory

    st = {}

    def drive(k, t, ctrl, js):
        if k == 0:
            st["tl"] = ctrl.target_source = TargetLogic(ctrl.cfg, "world", ee_pos=ctrl.ee_position)
        names = ctrl.solver_joint_names
        q = np.array([js.position[js.names.index(n)] for n in names])
        v = np.array([js.velocity[js.names.index(n)] for n in names])
        if k == TRAJ:
            points = [(0.1 * (i + 1), q + np.asarray(dq) * (i + 1) / 3, []) for i in range(3)]
            tr = parse_trajectory(names, points, names, np.full(7, -3.0), np.full(7, 3.0),
                                  defaults={"traj_path_tolerance_rad": 0.2, "traj_goal_tolerance_rad": 0.02,
                                            "traj_goal_time_s": 1.0})
            st["tl"].on_trajectory(TrajectoryTracker(tr, t, q, v))
        elif k == HOLD:
            st["tl"].hold_joints(q)
        elif k == POSE:
            ee = ctrl.ee_position(q)
            assert st["tl"].on_pose("", ee, [0.0, 0.0, 0.0, 1.0], t, ee) is None

    return drive


def _need_knot_posture():
    from gato_ros.trajectory_logic import knot_posture_supported

    if not knot_posture_supported(cl.ControllerLogic({"robot": ROBOT, "N": 4}).solver):
        pytest.skip("the installed gato.BSQP takes no per-knot posture targets (set_q_nom (N, nq))")


def _solve_inputs(bag):
    from gato_ros.bag import read_bag

    return [m for _, m in read_bag(bag, ["/gato_controller/solve_input"])["/gato_controller/solve_input"]]


def test_posture_tables_round_trip_through_solve_input_and_bad_ones_are_refused_by_field():
    q = np.arange(N * 7, dtype=float).reshape(N, 7) * 1e-3
    si = SolveInput(stamp_ns=5, tick=1, joint_names=[f"A{i}" for i in range(1, 8)], x_measured=np.zeros(14),
                    reference=np.zeros(6 * N), xu_warm=np.zeros(5), posture_q=q, posture_weight=20.0)
    assert si.posture_weight.shape == (N, 7) and np.all(si.posture_weight == 20.0)   # a scalar spread per knot
    m = cv.solve_input_to_msg(si)
    assert m.posture_rows == N and len(m.posture_q) == len(m.posture_weight) == N * 7
    back = cv.solve_input_from_msg(m)
    np.testing.assert_array_equal(back.posture_q, q)
    np.testing.assert_array_equal(back.posture_weight, si.posture_weight)
    # the term off: no rows, nothing carried (and an older message without the fields reads the same)
    off = cv.solve_input_to_msg(SolveInput(stamp_ns=5, tick=1, joint_names=["A1"], x_measured=np.zeros(2),
                                           reference=np.zeros(6), xu_warm=np.zeros(3)))
    assert off.posture_rows == 0 and len(off.posture_q) == 0
    assert cv.solve_input_from_msg(off).posture_q is None and cv.solve_input_from_msg(off).posture_weight is None
    m.posture_weight = list(m.posture_weight)[:-1]
    with pytest.raises(ValueError, match="SolveInput.posture_q"):
        cv.solve_input_from_msg(m)
    with pytest.raises(ValueError, match="posture_weight"):
        SolveInput(stamp_ns=5, tick=1, joint_names=["A1"], x_measured=np.zeros(2), reference=np.zeros(6),
                   xu_warm=np.zeros(3), posture_q=q, posture_weight=np.ones((3, 7)))
    with pytest.raises(ValueError, match="posture_q / posture_weight"):
        SolveInput(stamp_ns=5, tick=1, joint_names=["A1"], x_measured=np.zeros(2), reference=np.zeros(6),
                   xu_warm=np.zeros(3), posture_q=q)


def test_a_run_with_a_joint_trajectory_and_a_hold_replays_bit_for_bit(tmp_path):
    """Every tick, the posture ticks included, replays to 1e-9 N*m (a deterministic float64
    solve: exactly); the worst-tick cases carry the posture tables and re-run exactly."""
    _need_knot_posture()
    from gato.replay import replay_bag
    from gato.replay.cases import rerun_cases
    from replay_fixtures import record_lockstep_run

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.4, controller={"N": N}, targets=_drive())
    msgs = _solve_inputs(bag)
    rows = [int(m.posture_rows) for m in msgs]
    assert rows == [0] * TRAJ + [N] * (POSE - TRAJ) + [0] * (40 - POSE), rows
    # the trajectory's targets move per knot; the hold's are one posture at every knot
    traj = np.asarray(msgs[TRAJ + 5].posture_q).reshape(N, 7)
    hold = np.asarray(msgs[HOLD + 2].posture_q).reshape(N, 7)
    assert np.abs(traj[-1] - traj[0]).max() > 1e-3 and np.all(hold == hold[0])
    assert np.all(np.asarray(msgs[TRAJ].posture_weight) > 0)

    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["compared"] == 40 and s["posture_ticks"] == POSE - TRAJ, s
    assert s["matched"] and s["max_du"] <= 1e-9 and s["max_dplan"] <= 1e-9 and s["anchored"] == 0, s
    assert s["problems"] == [], s["problems"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"ticks solved with recorded joint posture targets (joint trajectory / hold) | {POSE - TRAJ} |" in report

    z = np.load(tmp_path / "out" / "worst_ticks.npz")
    assert z["posture_q"].shape == (len(z["x"]), N, 7)
    rr = rerun_cases(tmp_path / "out" / "worst_ticks.npz")
    assert rr["match"].all(), rr["max_du"]


def _old_solve_input():
    """(typestore with SolveInput as defined before the posture fields, encoder of a SolveInput
    value in that definition)."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    from gato_ros.bag import gato_msgs_dir

    lines = (gato_msgs_dir() / "SolveInput.msg").read_text().splitlines()
    old = lines[:next(i for i, ln in enumerate(lines) if ln.startswith("# The joint posture targets"))]
    assert "int32 posture_rows" in lines and not any("posture" in ln for ln in old)
    ts = get_typestore(Stores.ROS2_KILTED)
    ts.register(get_types_from_msg("\n".join(old), "gato_msgs/msg/SolveInput"))
    Msg = ts.types["gato_msgs/msg/SolveInput"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]

    def encode(si):
        m = Msg(header=Header(stamp=Time(sec=si.stamp_ns // 10**9, nanosec=si.stamp_ns % 10**9), frame_id=""),
                tick=si.tick, joint_names=list(si.joint_names), x_measured=si.x_measured, reference=si.reference,
                warm_rows=si.xu_warm.shape[0], xu_warm=si.xu_warm.ravel(), dt_elapsed=si.dt_elapsed,
                budget_s=si.budget_s, reset=si.reset, config_json=si.config_json,
                solver_state_rows=si.solver_state.shape[0], solver_state=si.solver_state.ravel(),
                capped_out=si.capped_out, force_reseed=si.force_reseed, wrench_rows=0,
                wrench_hypotheses=np.zeros(0), orientation_weight=si.orientation_weight)
        return bytes(ts.serialize_cdr(m, "gato_msgs/msg/SolveInput"))

    return ts, encode


def test_a_bag_from_before_the_posture_fields_decodes_and_its_posture_ticks_differ_with_a_note(tmp_path):
    """SolveInput written with its definition from before the posture fields (what an older
    controller recorded while tracking a joint trajectory) decodes with the bag's own definition;
    the ticks before the trajectory match, its posture ticks replay without the posture term and
    differ, and the report's problems say that the bag carries no posture tables. (Such a bag
    without joint targets replays exactly, with no note: test_pose_ros.py and
    test_replay_wrenches.py write theirs with definitions from before these fields.)"""
    _need_knot_posture()
    from gato.replay import replay_bag
    from replay_fixtures import record_lockstep_run

    ts, encode = _old_solve_input()
    bag = record_lockstep_run(tmp_path / "traj", seconds=0.12, controller={"N": N}, typestore_override=ts,
                              solve_input_encoder=encode, targets=_drive())
    assert not hasattr(_solve_inputs(bag)[0], "posture_rows")
    s = replay_bag(bag, tmp_path / "traj_out", log=None, worst=0)
    assert s["compared"] == 12 and s["posture_ticks"] == 0 and not s["matched"], s
    assert s["first_over"]["tick"] == TRAJ + 1 and s["max_du"] > 1e-3, s     # tick numbers count from 1
    assert any("carry no joint posture fields" in p and "replay without them" in p for p in s["problems"]), \
        s["problems"]
    print(f"older definition, joint trajectory: {s['over_tolerance']} of 12 ticks differ, max |du| "
          f"{s['max_du']:.3g} N*m, the first at tick {s['first_over']['tick']}")
