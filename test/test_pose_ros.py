"""Poses through the ROS layer (issue 30): gato_msgs/EEReference.orientations (unit quaternions
per knot, empty = position only), the reference node's ``orientation`` (tool_down / sweep), the
controller's reference path carrying them with ``orientation_weight`` into the planner's window
and into SolveInput (reference slots [3:6], orientation_weight), ``~/goal_pose`` orientation with
``goal_orientation``, bad quaternions refused by field, the controller status's EE orientation
error beside the position error, and ``gato replay`` of a pose run reproducing it bit for bit.
Logic level (no DDS); synthetic time."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash (scripts/setup.sh)")

from gato.core import messages  # noqa: E402
from gato.core.poses import TOOL_DOWN  # noqa: E402
from gato.core.references import rotvec_to_quat  # noqa: E402
from gato_ros.reference_logic import ReferenceLogic  # noqa: E402
from gato_ros.target_logic import TargetLogic  # noqa: E402

MS = 1_000_000


def _msg(n=4, orientations=None, **over):
    """A duck-typed EEReference (the boundary reads rclpy and rosbags messages alike)."""
    m = SimpleNamespace(header=SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0), frame_id=""), n_knots=n,
                        knot_dt=0.01, positions=np.tile([0.5, 0.0, 0.6], n).tolist())
    if orientations is not None:
        m.orientations = list(orientations)
    for k, v in over.items():
        setattr(m, k, v)
    return m


# ---------------------------------------------------------------- the reference node
def test_reference_node_publishes_tool_down_and_sweeping_orientations():
    none = ReferenceLogic({"robot": "iiwa14"}).window(10**9)
    assert none.orientations is None
    # fr3's EE at q0 points down with its x axis along world x (to 0.04 deg): TOOL_DOWN
    fr3 = ReferenceLogic({"robot": "fr3", "orientation": "tool_down", "mode": "goals", "goal_seed": 3})
    assert np.allclose(fr3.window(10**9).orientations, TOOL_DOWN, atol=1e-3)
    # iiwa14's EE x axis points along world -x at q0: tool down keeping that heading (R = diag(-1, 1, -1)),
    # not a half turn of the wrist to TOOL_DOWN's
    down = ReferenceLogic({"robot": "iiwa14", "orientation": "tool_down", "mode": "goals", "goal_seed": 3})
    w = down.window(10**9)
    assert any(np.allclose(w.orientations, [0.0, s * np.pi, 0.0], atol=1e-6) for s in (1, -1))
    sweep = ReferenceLogic({"robot": "iiwa14", "orientation": "sweep", "sweep_deg": 20.0, "fig8_period_s": 4.0})
    w0, w1 = sweep.window(0), sweep.window(10**9)          # the crossing point; a quarter period later
    assert np.allclose(w0.orientations[0], down.tool_down)
    # a quarter period: the full swing, 20 deg from tool-down (angle of R_down^T R)
    q = rotvec_to_quat(w1.orientations[0])
    qd = rotvec_to_quat(down.tool_down)
    assert np.degrees(2 * np.arccos(min(1.0, abs(float(np.dot(q, qd)))))) == pytest.approx(20.0, abs=1e-6)
    assert np.allclose(w1.positions, ReferenceLogic({"robot": "iiwa14"}).window(10**9).positions)
    with pytest.raises(ValueError, match="orientation: 'sweep'"):
        ReferenceLogic({"robot": "iiwa14", "orientation": "sweep", "mode": "hold"})


# ---------------------------------------------------------------- the message boundary
def test_reference_node_sweeps_about_an_axis_that_keeps_the_wrist_inside_the_joint_box():
    """The node's ``orientation:=sweep`` chooses its axis by the rule of bench/bench_pose_fig8.py's
    protocol ``clear`` (one function, gato.core.sweep_axis.choose_sweep_axis): of 8 horizontal axes,
    one whose exact-IK pose path keeps 0.1 rad inside the solver's joint box, the slowest-asking.
    iiwa14 at the node's defaults: the figure plane's own horizontal axis (the old rule, "h0") leaves
    only 0.027 rad; the chosen one keeps 0.456 rad (axis h90, the plane's normal) and asks the joints
    for 0.41 of their velocity limits instead of 0.70 (exact IK only, measured)."""
    import sys
    from pathlib import Path

    from gato.core import sweep_axis as SA
    from gato.core.poses import PoseFigure8

    ref = ReferenceLogic({"robot": "iiwa14", "orientation": "sweep"})
    ch = ref.sweep_axis
    cands = {name: (ratio, clear) for name, ratio, clear in ch.candidates}
    assert set(cands) == {f"h{d:g}" for d in SA.SWEEP_AXES_DEG}
    assert cands["h0"][1] < SA.SWEEP_CLEARANCE                 # the old rule's axis: measured 0.027 rad
    assert ch.clearance >= SA.SWEEP_CLEARANCE and ch.name == "h90", ch
    assert ch.speed_ratio == min(r for r, c in cands.values() if c >= SA.SWEEP_CLEARANCE)
    theta = ref.cfg["fig8_theta"]
    assert isinstance(ref.reference, PoseFigure8)
    np.testing.assert_allclose(ref.reference.axis, SA.horizontal_axis(theta, 90.0), atol=1e-12)
    # the exact IK of the windows the node publishes keeps that clearance
    from gato.robots.frames import EEKinematics
    from gato.core.bsqp import robot_info, robot_urdf

    kin = EEKinematics(robot_urdf("iiwa14"), robot_info("iiwa14")["ee_frame"])
    qs = SA.pose_ik_path(kin.model, kin.fid, np.asarray(ref.cfg["q0"]), ref.reference, ref.cfg["fig8_period_s"])
    assert SA.limit_clearance(kin.model, qs) == pytest.approx(ch.clearance, abs=1e-12)
    # the benchmark's protocol "clear" runs the same function, not a copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import bench_pose_fig8

    assert bench_pose_fig8.choose_sweep_axis is SA.choose_sweep_axis
    # position-only and tool_down references choose no axis
    assert ReferenceLogic({"robot": "iiwa14"}).sweep_axis is None


def test_ee_reference_orientations_decode_and_old_messages_stay_position_only():
    old = _msg()                                    # no orientations field at all (an older definition)
    assert messages.reference_window(old).orientations is None
    assert messages.reference_window(_msg(orientations=[])).orientations is None
    q = np.tile(rotvec_to_quat(TOOL_DOWN), 4)
    w = messages.reference_window(_msg(orientations=q))
    assert np.allclose(w.orientations, TOOL_DOWN)


@pytest.mark.parametrize("bad, kind, text", [
    (np.tile([0.0, 0.0, 0.0, 1.0], 3), "shape", "EEReference.orientations: holds 12 values, expected n_knots*4"),
    (np.tile([0.0, 0.0, np.nan, 1.0], 4), "nonfinite", "EEReference.orientations: contains NaN or Inf"),
    (np.tile([0.0, 0.0, 0.0, 1.1], 4), "range", "EEReference.orientations: quaternion 0 has norm 1.1"),
    (np.tile([0.0, 0.0, 0.0, 0.0], 4), "range", "EEReference.orientations: quaternion 0 has norm 0"),
])
def test_bad_quaternions_in_ee_reference_are_refused_by_field(bad, kind, text):
    with pytest.raises(messages.Rejected, match=text.replace("*", r"\*")) as e:
        messages.reference_window(_msg(orientations=bad))
    assert e.value.kind == kind


def test_the_controller_counts_a_bad_quaternion_and_keeps_its_reference():
    from gato_ros.controller_logic import ControllerLogic

    ctrl = ControllerLogic({"robot": "iiwa14"})
    ctrl.on_reference_msg(_msg(orientations=np.tile([0.0, 0.0, 0.0, 2.0], 4)), 10**9)
    assert ctrl.status.rejected_references == 1 and ctrl.references.latest is None


# ---------------------------------------------------------------- the controller's reference path
def test_the_tick_solves_on_the_windows_orientations_and_records_them_for_replay():
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.sim_logic import SimWorldLogic

    ctrl = ControllerLogic({"robot": "iiwa14", "reference_sync": True, "orientation_weight": 5.0})
    world = SimWorldLogic({"robot": "iiwa14"})
    ref = ReferenceLogic({"robot": "iiwa14", "orientation": "sweep"})
    seen = []
    planner = ctrl.planner
    step = planner.step

    def spy(x, reference, *a, **kw):
        seen.append(reference)
        return step(x, reference, *a, **kw)

    planner.step = spy
    for _ in range(3):
        t = world.t_ns
        ctrl.on_reference(ref.window(t), t)
        out = ctrl.on_joint_state(world.joint_state(), t)
        world.advance(world.effort_from(out.effort))
    w = seen[-1]
    assert w.orientations is not None and w.orientation_weight == 5.0
    si = out.solve_input
    assert si.orientation_weight == 5.0
    N = ctrl.cfg["N"]
    want = ref.window(si.stamp_ns).solver_reference(si.stamp_ns, N, ctrl.cfg["dt"]).reshape(N, 6)
    assert np.allclose(si.reference.reshape(N, 6)[:, 3:], want[:, 3:], atol=1e-12)
    assert float(ctrl.solver.params.rot_cost) == 5.0
    # a position-only window turns the term off and records weight 0
    ctrl.on_reference(ReferenceLogic({"robot": "iiwa14"}).window(world.t_ns), world.t_ns)
    out = ctrl.on_joint_state(world.joint_state(), world.t_ns)
    assert out.solve_input.orientation_weight == 0.0 and seen[-1].orientations is None
    assert np.all(out.solve_input.reference.reshape(N, 6)[:, 3:] == 0.0)


def test_the_status_reports_the_ee_orientation_error_beside_the_position_error():
    """ControllerStatus's ee_position_error / ee_orientation_error (issue 30): the measured EE
    against knot 0 of the window the tick solved on; the orientation NaN on a position-only
    window, both NaN before the first command."""
    import pinocchio as pin

    from gato.core.bsqp import robot_info, robot_urdf
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.sim_logic import SimWorldLogic

    ctrl = ControllerLogic({"robot": "iiwa14", "reference_sync": True})
    assert np.isnan(ctrl.status.ee_position_error) and np.isnan(ctrl.status.ee_orientation_error)
    world = SimWorldLogic({"robot": "iiwa14"})
    ref = ReferenceLogic({"robot": "iiwa14", "orientation": "sweep"})
    model = pin.buildModelFromUrdf(str(robot_urdf("iiwa14")))
    data = model.createData()
    fid = model.getFrameId(robot_info("iiwa14")["ee_frame"])
    assert ctrl.solver_joint_names == list(model.names)[1:]
    for k in range(20):
        t = world.t_ns
        w = ref.window(t)
        ctrl.on_reference(w, t)
        js = world.joint_state()
        out = ctrl.on_joint_state(js, t)
        assert out.source == "mpc"
        q = np.asarray(js.position, dtype=np.float64)
        pin.forwardKinematics(model, data, q)
        M = pin.updateFramePlacement(model, data, fid)
        st = ctrl.status
        assert st.ee_position_error == pytest.approx(np.linalg.norm(ctrl.ee_position(q) - w.positions[0]), abs=1e-12)
        angle = np.linalg.norm(pin.log3(pin.exp3(w.orientations[0]).T @ M.rotation))
        assert st.ee_orientation_error == pytest.approx(angle, abs=1e-12)
        world.advance(world.effort_from(out.effort))
    # the sweep starts at the measured EE orientation: tracked to well under a degree at 0.2 s
    assert 0.0 < np.degrees(st.ee_orientation_error) < 1.0 and 0.0 < st.ee_position_error < 0.02
    # a position-only window: the orientation error is NaN, the position error still reported
    ctrl.on_reference(ReferenceLogic({"robot": "iiwa14"}).window(world.t_ns), world.t_ns)
    ctrl.on_joint_state(world.joint_state(), world.t_ns)
    assert np.isnan(ctrl.status.ee_orientation_error) and np.isfinite(ctrl.status.ee_position_error)


# ---------------------------------------------------------------- ~/goal_pose
CFG = {"target_frame": "", "goal_speed_mps": 0.1, "goal_min_duration_s": 0.5, "target_max_distance_m": 1.0,
       "servo_max_speed_mps": 0.25, "servo_timeout_s": 0.1, "traj_posture_weight": 20.0, "N": 8, "dt": 0.01}
EE0 = np.array([0.5, 0.0, 0.6])


def test_goal_pose_orientation_is_tracked_only_when_opted_in():
    q = rotvec_to_quat(TOOL_DOWN)
    off = TargetLogic(CFG, "world")
    assert off.on_pose("", EE0 + [0.05, 0, 0], q, 0, EE0) is None
    assert off.window(0).orientations is None                 # the default: position only, as before
    on = TargetLogic({**CFG, "goal_orientation": True}, "world")
    assert on.on_pose("", EE0 + [0.05, 0, 0], q, 0, EE0) is None
    w = on.window(10 * MS)
    assert w.orientations.shape == (8, 3) and np.allclose(w.orientations, TOOL_DOWN)
    # a non-unit or non-finite quaternion is refused (counted, named), the running goal kept
    why = on.on_pose("", EE0, [0.0, 0.0, 0.0, 1.2], 0, EE0)
    assert "orientation quaternion norm 1.2" in why and on.counters.goals_rejected == 1
    why = on.on_pose("", EE0, [0.0, np.inf, 0.0, 1.0], 0, EE0)
    assert "orientation" in why and on.counters.goals_rejected == 2
    assert np.allclose(on.window(10 * MS).orientations, TOOL_DOWN)
    # without opting in, a non-unit quaternion is normalized as before (its orientation is unused)
    assert off.on_pose("", EE0, [0.0, 0.0, 0.0, 1.2], 0, EE0) is None


# ---------------------------------------------------------------- gato replay of a pose run
def test_replay_of_a_pose_run_matches_bit_for_bit(tmp_path):
    import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
    from gato.replay import replay_bag
    from replay_fixtures import record_lockstep_run

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, reference={"orientation": "sweep"})
    said = []
    s = replay_bag(bag, tmp_path / "out", log=said.append)
    assert s["compared"] == 30 and s["matched"] and s["max_du"] <= 1e-9 and s["max_dplan"] <= 1e-9
    assert s["problems"] == []
    # the report shows the orientation error beside the position error (measured EE vs knot 0)
    ee = s["ee_tracking"]
    assert ee["ticks"] == 30 and ee["orientation_ticks"] == 30
    assert 0.0 < ee["position_mean_mm"] < 20.0 and 0.0 < ee["orientation_mean_deg"] < 10.0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "EE position error, mean / max [mm]" in report and "EE orientation error, mean / max [deg]" in report
    # and so does the console: both errors on one line, the summary's numbers
    line = next(ln for ln in said if "EE tracking" in ln)
    assert f"position error mean {ee['position_mean_mm']:.3g} mm" in line
    assert f"orientation error mean {ee['orientation_mean_deg']:.3g} deg" in line and "(30 ticks with" in line


def test_a_bag_from_before_the_orientation_fields_still_replays_exactly(tmp_path):
    """SolveInput written with its definition from before issue 30 (no orientation_weight): decoded
    with the bag's own definition, replayed position only, exactly. (The fixture writes the
    other topics with today's definitions; an old EEReference lacks only the optional
    orientations, which the boundary reads as absent: the first boundary test.)"""
    import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    from gato.replay import replay_bag
    from gato_ros.bag import gato_msgs_dir
    from replay_fixtures import record_lockstep_run

    ts = get_typestore(Stores.ROS2_KILTED)
    lines = (gato_msgs_dir() / "SolveInput.msg").read_text().splitlines()
    lines = lines[:next(i for i, ln in enumerate(lines) if ln.startswith("# The joint posture targets"))]  # later
    old = [ln for ln in lines if ln.strip() != "float64 orientation_weight"]
    assert len(old) == len(lines) - 1
    ts.register(get_types_from_msg("\n".join(old), "gato_msgs/msg/SolveInput"))
    Msg = ts.types["gato_msgs/msg/SolveInput"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]

    def encode(si):
        assert si.orientation_weight == 0.0
        m = Msg(header=Header(stamp=Time(sec=si.stamp_ns // 10**9, nanosec=si.stamp_ns % 10**9), frame_id=""),
                tick=si.tick, joint_names=list(si.joint_names), x_measured=si.x_measured, reference=si.reference,
                warm_rows=si.xu_warm.shape[0], xu_warm=si.xu_warm.ravel(), dt_elapsed=si.dt_elapsed,
                budget_s=si.budget_s, reset=si.reset, config_json=si.config_json,
                solver_state_rows=si.solver_state.shape[0], solver_state=si.solver_state.ravel(),
                capped_out=si.capped_out, force_reseed=si.force_reseed, wrench_rows=0, wrench_hypotheses=np.zeros(0))
        return bytes(ts.serialize_cdr(m, "gato_msgs/msg/SolveInput"))

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.2, typestore_override=ts, solve_input_encoder=encode)
    said = []
    s = replay_bag(bag, tmp_path / "out", log=said.append)
    assert s["compared"] == 20 and s["matched"] and s["max_du"] <= 1e-9 and s["problems"] == []
    # position-only: the report's EE tracking has no orientation row
    assert s["ee_tracking"]["orientation_ticks"] == 0 and s["ee_tracking"]["orientation_mean_deg"] is None
    assert "EE orientation error" not in (tmp_path / "out" / "report.md").read_text()
    line = next(ln for ln in said if "EE tracking" in ln)          # the console: position only
    assert "position error mean" in line and "orientation" not in line


def test_the_worst_ticks_of_a_pose_run_re_solve_the_pose_problem(tmp_path, capsys):
    """worst_ticks.npz of a pose run carries each tick's orientation weight beside its goals
    (slots [3:6] the rotation vectors): ``gato replay FILE.npz`` re-solves the pose problem the
    controller ran (the in-sequence replay's window), not the flat position-only one; a case file
    without the array (an older gato) re-solves position only."""
    import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
    from gato.__main__ import main as gato_main
    from gato.replay import replay_bag
    from gato.replay.cases import rerun_cases
    from replay_fixtures import record_lockstep_run

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.2, reference={"orientation": "sweep"})
    s = replay_bag(bag, tmp_path / "out", worst=3, log=None)
    assert s["matched"]
    path = Path(s["cases"])
    z = dict(np.load(path))
    ow = z["orientation_weight"]
    assert ow.shape == (3,) and np.all(ow == 8.0)               # the controller's default orientation_weight
    rot = z["goals"].reshape(3, -1, 6)[:, :, 3:]
    assert np.all(np.linalg.norm(rot, axis=2) > 0.1)           # the recorded target rotation vectors
    # the standalone re-solve reproduces the file's pose solve bit for bit
    r = rerun_cases(path)
    assert r["n"] == 3 and r["match"].all() and r["max_du"].max() <= 1e-9
    assert gato_main(["replay", str(path)]) == 0 and "all cases reproduce" in capsys.readouterr().out
    # the same ticks solved flat (weight 0, as before the array) give other commands: the weight is used
    flat = {k: v for k, v in z.items() if k != "orientation_weight"}
    np.savez(tmp_path / "flat.npz", **flat)
    rf = rerun_cases(tmp_path / "flat.npz")
    assert rf["n"] == 3 and rf["max_du"].min() > 1.0, rf["max_du"]      # 10-13 N*m (seeded lockstep run)
    # and the pose re-solve is the one near what the robot commanded (1.3-2.0 vs 9.9-11.3 N*m)
    off_pose = np.abs(z["u_standalone"] - z["u_recorded"]).max(axis=1)
    off_flat = np.abs(rf["u"] - z["u_recorded"]).max(axis=1)
    assert np.all(off_flat > 3.0 * off_pose), (off_pose, off_flat)
    assert gato_main(["replay", str(tmp_path / "flat.npz")]) == 1 and "DIFFERS" in capsys.readouterr().out


def test_reference_node_goals_slerp_tool_down_from_the_ee_orientation_at_q0():
    """Goals mode with orientation:=tool_down: as the positions ramp from the EE at q0, the
    orientation is slerped from the EE's at q0 to tool down on the same minimum-jerk ramp
    (R0 exp(s log(R0^T R_down))), then held exactly (as the constant before)."""
    import pinocchio as pin

    from gato.core.references import min_jerk

    q0 = [0.0, 0.6, 0.0, -1.3, 0.0, 1.6, 0.0]        # the wrist tilted 0.4 rad from the default q0
    ref = ReferenceLogic({"robot": "iiwa14", "orientation": "tool_down", "mode": "goals", "goal_seed": 3, "q0": q0,
                          "goal_ramp_s": 0.6, "goal_hold_s": 2.0, "knot_dt": 0.02, "n_knots": 40})
    R0, Rd = pin.exp3(ref.start_rot), pin.exp3(ref.tool_down)
    total = np.linalg.norm(pin.log3(R0.T @ Rd))
    assert total > 0.3                                 # a real turn to make (0.4 rad tilt + the heading)
    w = ref.window(0)
    t = 0.02 * np.arange(40)
    for k in range(40):
        Rk = pin.exp3(w.orientations[k])
        s = min_jerk(min(t[k] / 0.6, 1.0))
        assert np.linalg.norm(pin.log3(R0.T @ Rk)) == pytest.approx(s * total, abs=1e-9)   # along the geodesic
        assert np.linalg.norm(pin.log3(Rk.T @ Rd)) == pytest.approx((1 - s) * total, abs=1e-9)
    assert np.allclose(pin.exp3(w.orientations[0]), R0, atol=1e-12)   # starts at the EE's orientation at q0
    # from the ramp's end on: the constant tool-down target, bit for bit; later windows too
    assert np.array_equal(w.orientations[30:], np.tile(ref.tool_down, (10, 1)))
    assert np.array_equal(ref.window(10**9).orientations, np.tile(ref.tool_down, (40, 1)))
    assert np.array_equal(ref.window(5 * 10**9).orientations, np.tile(ref.tool_down, (40, 1)))  # the next cycle
    # closed loop (logic, lockstep, 0.6 s = the ramp): the tilted start is turned without a jolt;
    # with the constant target from t = 0 (before) the same run peaked at 35.6 mm / 20.5 deg / 189 N*m
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.sim_logic import SimWorldLogic

    ref = ReferenceLogic({"robot": "iiwa14", "orientation": "tool_down", "mode": "goals", "goal_seed": 3, "q0": q0})
    ctrl = ControllerLogic({"robot": "iiwa14", "reference_sync": True})
    world = SimWorldLogic({"robot": "iiwa14", "q0": q0})
    pe, oe, tau = [], [], []
    for k in range(60):
        t = world.t_ns
        ctrl.on_reference(ref.window(t), t)
        out = ctrl.on_joint_state(world.joint_state(), t)
        pe.append(ctrl.status.ee_position_error)
        oe.append(ctrl.status.ee_orientation_error)
        tau.append(np.max(np.abs(out.effort)))
        world.advance(world.effort_from(out.effort))
    assert max(pe) < 0.006 and np.degrees(max(oe)) < 1.0 and max(tau) < 100.0, (max(pe), max(oe), max(tau))
