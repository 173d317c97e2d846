"""Bags for the replay tests without a DDS graph: the controller, simulation-world and
reference LOGIC classes of gato_ros run in lockstep in this process, and every message
the nodes would publish is serialized by rclpy (real CDR) and written with rosbags, the
recorder's writer, under the topic names of the controller graph. The end-to-end test
(test/test_replay_bringup.py) records the real multi-process bringup instead."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def parameter_snapshot_msg(cfg: dict, stamp_ns: int):
    """rcl_interfaces/ParameterEvent with every controller parameter (the recorder's snapshot)."""
    from rcl_interfaces.msg import Parameter, ParameterEvent, ParameterType, ParameterValue

    from gato_ros.conversions import ns_to_time

    ev = ParameterEvent()
    ev.stamp = ns_to_time(stamp_ns)
    ev.node = "/gato_controller"
    for name, v in sorted(cfg.items()):
        pv = ParameterValue()
        if isinstance(v, bool):
            pv.type, pv.bool_value = ParameterType.PARAMETER_BOOL, v
        elif isinstance(v, int):
            pv.type, pv.integer_value = ParameterType.PARAMETER_INTEGER, v
        elif isinstance(v, float):
            pv.type, pv.double_value = ParameterType.PARAMETER_DOUBLE, v
        elif isinstance(v, str):
            pv.type, pv.string_value = ParameterType.PARAMETER_STRING, v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
            pv.type, pv.string_array_value = ParameterType.PARAMETER_STRING_ARRAY, list(v)
        else:
            pv.type, pv.double_array_value = ParameterType.PARAMETER_DOUBLE_ARRAY, [float(x) for x in v]
        ev.new_parameters.append(Parameter(name=name, value=pv))
    return ev


def dds_payload(raw: bytes, store, msgtype: str) -> bytes:
    """``raw`` (rclpy's serialize_message of a ``msgtype``) cut to what a DDS subscriber receives
    and the recorder stores: the message padded to 4 bytes. serialize_message sizes its buffer
    by the type support's estimate, which also counts the alignment of an empty float64[]
    (e.g. SolveInput.wrench_hypotheses without hypotheses), and leaves that many bytes of junk
    at the end, beyond the 3 that rosbags (AnyReader, the recorder's SolverStateThinner) accept."""
    md = store.get_msgdef(msgtype)
    func = md.deserialize_cdr_le if raw[1] else md.deserialize_cdr_be
    _, pos = func(raw[4:], 0, md.cls, store)
    return raw[:4 + -(-pos // 4) * 4]


def record_lockstep_run(bag_dir, *, seconds=1.0, robot="iiwa14", storage="mcap", controller=None, sim=None,
                        changes_at=None, solve_input=True, drop=(), snapshot=None, typestore_override=None,
                        solve_input_encoder=None, estimator=None, malformed=None, reference=None, targets=None):
    """Run ``seconds`` of simulated lockstep control and write a bag; returns the bag path.

    controller / sim: extra configuration of the controller / simulation-world logic.
    changes_at: {tick index: {param: value}} run-time parameter changes (as rqt would make).
    solve_input: False leaves /gato_controller/solve_input out (an older recorder).
    drop: topics left out of the bag (a filtered ``ros2 bag record``).
    snapshot: write the parameter snapshot (default: when solve_input is False).
    typestore_override / solve_input_encoder: write SolveInput with another message
        definition (typestore) and encoder ``(SolveInput value) -> raw CDR bytes``.
    estimator: configuration of an estimator logic (gato_ros.estimator_logic) fed with the
        joint states and commands; its estimates go to the controller (``hypotheses=estimator``)
        before the tick's state, stamped, as the estimator node's WrenchStamped would.
    malformed: ``(tick index, t_ns, joint state, reference window) -> [(topic, message), ...]``
        messages a foreign node put on /joint_states or /ee_reference before the tick's own
        (rclpy messages, e.g. test/fuzz_messages.py): written into the bag and given to the
        controller's message boundary like the node would (its answers, holds, recorded too).
    reference: extra configuration of the reference logic (e.g. ``{"orientation": "sweep"}``).
    targets: ``(tick index, t_ns, controller logic, joint state) -> None`` called before each tick:
        drives the node's targets (e.g. a gato_ros.target_logic.TargetLogic as the controller's
        target_source, sent a joint trajectory), as the controller node's standard interfaces would.
    """
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer

    from gato_ros import conversions as cv
    from gato_ros.bag import typestore
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.reference_logic import ReferenceLogic
    from gato_ros.sim_logic import SimWorldLogic

    ctrl = ControllerLogic({"robot": robot, "reference_sync": True, **(controller or {})})
    world = SimWorldLogic({"robot": robot, **(sim or {})})
    ref = ReferenceLogic({"robot": robot, **(reference or {})})
    est = None
    if estimator is not None:
        from gato_ros.estimator_logic import EstimatorLogic

        est = EstimatorLogic({"robot": robot, **estimator})
    ts = typestore()
    bag_dir = Path(bag_dir)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    topics = {"/joint_states": "sensor_msgs/msg/JointState", "/ee_reference": "gato_msgs/msg/EEReference",
              "/gato_controller/command": "gato_msgs/msg/EffortCommand",
              "/gato_controller/step_result": "gato_msgs/msg/StepResult",
              "/gato_controller/plan": "gato_msgs/msg/Plan"}
    if solve_input:
        topics["/gato_controller/solve_input"] = "gato_msgs/msg/SolveInput"
    snapshot = (not solve_input) if snapshot is None else snapshot
    if snapshot:
        topics["/gato_recorder/parameter_snapshot"] = "rcl_interfaces/msg/ParameterEvent"
    topics = {t: ty for t, ty in topics.items() if t not in drop}
    with Writer(bag_dir, version=9, storage_plugin=plugin) as w:
        conns = {t: w.add_connection(t, ty, typestore=typestore_override if (
            typestore_override is not None and t.endswith("solve_input")) else ts) for t, ty in topics.items()}

        def put(topic, msg, t):
            if topic in conns:
                raw = solve_input_encoder(msg) if (solve_input_encoder and topic.endswith("solve_input")) \
                    else dds_payload(bytes(serialize_message(msg)), ts, topics[topic])
                w.write(conns[topic], t, raw)

        if snapshot:
            put("/gato_recorder/parameter_snapshot", parameter_snapshot_msg(ctrl.cfg, 0), 0)

        n_ticks = int(round(seconds * ctrl.cfg["control_rate_hz"]))
        for k in range(n_ticks):
            if changes_at and k in changes_at:
                ctrl.request_changes(changes_at[k])
                if snapshot:       # the recorder snapshots the parameters after every change
                    put("/gato_recorder/parameter_snapshot",
                        parameter_snapshot_msg({**ctrl.cfg, **changes_at[k]}, world.t_ns), world.t_ns)
            t = world.t_ns
            js = world.joint_state()
            if targets is not None:
                targets(k, t, ctrl, js)
            put("/joint_states", cv.joint_state_to_msg(js), t)
            win = ref.window(t)
            for topic, bad in (malformed(k, t, js, win) if malformed is not None else ()):
                put(topic, bad, t)
                got = ctrl.on_joint_state_msg(bad, t) if topic == "/joint_states" else ctrl.on_reference_msg(bad, t)
                if got is not None and got.effort is not None:
                    put("/gato_controller/command", cv.effort_command_to_msg(got.effort, ctrl.joint_names,
                                                                             got.stamp_ns, got.source, got.tick), t)
            put("/ee_reference", cv.reference_to_msg(win), t)
            if est is not None:
                e = est.on_joint_state(js)
                if e is not None:
                    ctrl.on_wrench_estimate(e.wrench, t, e.stamp_ns)
            ctrl.on_reference(win, t)
            out = ctrl.on_joint_state(js, t)
            assert out is not None and out.effort is not None, f"no command at tick {k}"
            if out.solve_input is not None and solve_input:
                put("/gato_controller/solve_input", out.solve_input if solve_input_encoder
                    else cv.solve_input_to_msg(out.solve_input), t)
            put("/gato_controller/command", cv.effort_command_to_msg(out.effort, ctrl.joint_names, out.stamp_ns,
                                                                     out.source, out.tick), t)
            if out.step is not None:
                put("/gato_controller/step_result", cv.step_result_to_msg(out.step, out.stamp_ns), t)
                put("/gato_controller/plan", cv.plan_to_msg(out.plan), t)
            if est is not None and est.cfg["effort_source"] == "command":
                est.on_effort(out.stamp_ns, ctrl.joint_names, out.effort)
            world.advance(world.effort_from(out.effort))
    return bag_dir


def commands_of(bag_dir):
    """{stamp_ns: effort} of a bag's EffortCommands (rosbags AnyReader: the independent reader)."""
    from rosbags.highlevel import AnyReader

    out = {}
    with AnyReader([Path(bag_dir)]) as r:
        conns = [c for c in r.connections if c.topic == "/gato_controller/command"]
        for c, _, raw in r.messages(connections=conns):
            m = r.deserialize(raw, c.msgtype)
            out[int(m.header.stamp.sec) * 10**9 + int(m.header.stamp.nanosec)] = np.asarray(m.effort)
    return out
