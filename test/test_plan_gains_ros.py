"""Issue 33, the ROS side of the plan feedback gains: the controller logic attaches the winning
row's BSQP.feedback_gains() to its plan under plan_gains (a live parameter), gato_msgs/Plan
carries them in ``gains`` (row-major (n_knots - 1, nu, nx), empty = none) and back, and the
readers drop misshapen or non-finite gains without dropping the plan. The plugin's execution
of them: test_ros_plugin (follow mode through ros2_control) and test_plan_executor."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (gato_msgs)")
from gato import tasks  # noqa: E402
from gato_ros import conversions as cv, inputs  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = tasks.Q_READY[ROBOT]
S = 1_000_000_000


def _ticks(lg, n, start=0):
    outs = []
    for k in range(start, start + n):
        t = S + k * int(lg.period_s * S)
        p = lg.solver.ee_pos(Q0) + np.array([0.0, 0.05, 0.05])
        lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (lg.cfg["N"], 1))), now_ns=t)
        outs.append(lg.on_joint_state(JointStateSample(t, list(NAMES), np.asarray(Q0, float),
                                                       np.full(7, 0.01 * k)), now_ns=t))
    return outs


def test_the_logic_publishes_the_solvers_gains_only_under_plan_gains():
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 12})
    assert lg.cfg["plan_gains"] is False
    out = _ticks(lg, 2)[-1]
    assert out.plan is not None and out.plan.K is None
    assert len(cv.plan_to_msg(out.plan).gains) == 0          # absent: today's message

    lg.request_changes({"plan_gains": True})                  # live, like rqt / ros2 param set
    for k in range(2, 5):
        out = _ticks(lg, 1, start=k)[0]
        assert out.source == "mpc"
        K = out.plan.K
        assert K.shape == (12 - 1, out.plan.nu, out.plan.nx) == (11, 7, 14)
        # the winning row's gains of this very solve (the solver still holds it)
        np.testing.assert_array_equal(K, lg.solver.feedback_gains(int(out.step.best_id)))
        assert np.all(np.isfinite(K)) and np.abs(K).max() > 0

    lg.request_changes({"plan_gains": False})
    assert _ticks(lg, 1, start=5)[0].plan.K is None
    with pytest.raises(ValueError, match="plan_gains"):
        lg.request_changes({"plan_gains": "yes please"})


def test_plan_gains_round_trip_through_the_message_and_bad_ones_are_dropped():
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 8, "plan_gains": True})
    plan = _ticks(lg, 1)[0].plan
    m = cv.plan_to_msg(plan)
    assert len(m.gains) == 7 * 7 * 14
    back = cv.plan_from_msg(m)
    np.testing.assert_array_equal(back.K, plan.K)             # row-major (n_knots - 1, nu, nx)
    np.testing.assert_array_equal(back.xu, plan.xu)
    got = inputs.plan(m, now_ns=plan.stamp_ns)
    np.testing.assert_array_equal(got.K, plan.K)
    # a message without the field (an old bag's) and an empty one: no gains, the plan intact
    m.gains = []
    assert cv.plan_from_msg(m).K is None and inputs.plan(m, now_ns=plan.stamp_ns).K is None
    old = type("OldPlan", (), {k: getattr(m, k) for k in ("header", "knot_dt", "nx", "nu", "n_knots",
                                                          "joint_names", "xu", "seq", "reset_epoch",
                                                          "integrator")})()
    assert inputs.plan(old, now_ns=plan.stamp_ns).K is None
    # misshapen or non-finite gains are dropped, not the plan
    m.gains = list(plan.K.reshape(-1)[:-1])
    p = inputs.plan(m, now_ns=plan.stamp_ns)
    assert p.K is None and p.n_knots == 8
    bad = plan.K.copy()
    bad[2, 3, 4] = np.nan
    m.gains = list(bad.reshape(-1))
    assert inputs.plan(m, now_ns=plan.stamp_ns).K is None


def test_a_bag_recorded_before_the_gains_field_still_reads(tmp_path):
    """A Plan recorded with the definition before issue 33 (no ``gains``) decodes with the
    bag's own definition: the replay's required fields are there and the reader's Plan has no
    gains; one recorded with them carries them."""
    from pathlib import Path

    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from gato.replay.bagio import read_bag
    from gato.replay.recording import REQUIRED_FIELDS

    root = Path(__file__).resolve().parents[1]
    new_def = (root / "src/gato_msgs/msg/Plan.msg").read_text()
    old_def = new_def[:new_def.index("# optional: the plan's own time-varying feedback gains")]
    assert "float64[] gains" not in old_def and "float64[] gains" in new_def
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 8, "plan_gains": True})
    plan = _ticks(lg, 1)[0].plan
    for name, msgdef, with_gains in (("old", old_def, False), ("new", new_def, True)):
        ts = get_typestore(Stores.ROS2_KILTED)
        ts.register(get_types_from_msg(msgdef, "gato_msgs/msg/Plan"))
        T = ts.types
        sec, ns = divmod(plan.stamp_ns, 10**9)
        fields = dict(header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=ns),
                                                       frame_id=""),
                      knot_dt=plan.knot_dt, nx=plan.nx, nu=plan.nu, n_knots=plan.n_knots,
                      joint_names=list(plan.joint_names), xu=plan.xu, seq=1, reset_epoch=1,
                      integrator=plan.integrator)
        if with_gains:
            fields["gains"] = plan.K.reshape(-1)
        msg = T["gato_msgs/msg/Plan"](**fields)
        with Writer(tmp_path / name, version=9) as w:
            c = w.add_connection("/gato_controller/plan", "gato_msgs/msg/Plan", typestore=ts)
            w.write(c, plan.stamp_ns, ts.serialize_cdr(msg, "gato_msgs/msg/Plan"))
        got = read_bag(tmp_path / name)
        assert got.complete and got.problems == [], got.problems
        topic = "/gato_controller/plan"
        assert got.require({topic: REQUIRED_FIELDS[topic]}) == []
        m = got.messages[topic][0][1]
        p = inputs.plan(m, now_ns=plan.stamp_ns)
        np.testing.assert_array_equal(p.xu, plan.xu)
        if with_gains:
            np.testing.assert_array_equal(p.K, plan.K)
        else:
            assert not hasattr(m, "gains") and p.K is None
