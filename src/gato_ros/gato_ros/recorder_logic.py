"""The recorder node's ROS-free parts (:mod:`gato_ros.recorder_node` is the rclpy shell):
the controller graph's topics, the message classes and definitions of a type name, the
tick-gap check (lost ticks reported, never a silent hole) and the solver-state thinner
(SolveInput keeps its solver state on key ticks only). Units: s, bytes.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

__all__ = ["SNAPSHOT_TOPIC", "CONTROLLER_GRAPH_TOPICS", "controller_graph_topics", "SolverStateThinner", "TickGapCheck"]


SNAPSHOT_TOPIC = "/gato_recorder/parameter_snapshot"
SIM_STATUS_TOPIC = "/gato_sim/status"    # the simulation world's command watchdog (sim bringup)
PARAMETER_EVENT_TYPE = "rcl_interfaces/msg/ParameterEvent"
COMMAND_TYPE = "gato_msgs/msg/EffortCommand"          # one tick counter per message (EffortCommand.tick)
TICKS_TYPE = "gato_msgs/msg/ControlTicks"             # a batch of sequence numbers per message (seq[])
SOLVE_INPUT_TYPE = "gato_msgs/msg/SolveInput"         # carries the solver state (thinned: solver_state_period)
_DEPTH = 1000            # history depth of the subscriptions (reliable: what a slow callback may lag)
_DISCOVERY_S = 0.2       # graph poll period (wall clock)
_SNAPSHOT_DEBOUNCE_S = 0.2
_SNAPSHOT_TIMEOUT_S = 10.0
_LATCHED_HINT = {"/robot_description"}   # known transient-local topics (subscribed TL before discovery)


def controller_graph_topics(controller_node: str = "/gato_controller",
                            controller_name: str = "effort_controller") -> dict:
    """{topic: type} of the gato controller graph for a controller node (fully qualified
    name, its topics live under it) and the ros2_control command controller's name."""
    c = "/" + controller_node.strip("/")
    return {
        "/joint_states": "sensor_msgs/msg/JointState",
        "/ee_reference": "gato_msgs/msg/EEReference",
        f"/{controller_name.strip('/')}/commands": "std_msgs/msg/Float64MultiArray",
        f"/{controller_name.strip('/')}/ticks": TICKS_TYPE,
        f"{c}/command": "gato_msgs/msg/EffortCommand",
        f"{c}/solve_input": "gato_msgs/msg/SolveInput",
        f"{c}/step_result": "gato_msgs/msg/StepResult",
        f"{c}/solver_stats": "gato_msgs/msg/SolverStats",
        f"{c}/plan": "gato_msgs/msg/Plan",
        f"{c}/status": "gato_msgs/msg/ControllerStatus",
        SIM_STATUS_TOPIC: "gato_msgs/msg/SimStatus",
        "/parameter_events": PARAMETER_EVENT_TYPE,
        "/robot_description": "std_msgs/msg/String",
    }


#: The default topic set: the controller graph of the simulation / hardware bringups.
CONTROLLER_GRAPH_TOPICS = controller_graph_topics()


def _msg_class(type_name: str):
    pkg, _, name = type_name.partition("/msg/")
    if not name:
        raise ValueError(f"message type {type_name!r}: expected pkg/msg/Type")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _ament_msg_file(type_name: str) -> Path | None:
    pkg, _, name = type_name.partition("/msg/")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        f = Path(prefix) / "share" / pkg / "msg" / f"{name}.msg"
        if prefix and f.is_file():
            return f
    return None


def _fmt_bytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


class TickGapCheck:
    """Sequence-number bookkeeping of one topic: the gaps seen so far.

    ``gaps``: (missing, first missing seq, last missing seq, t0 ns, t1 ns), where t0/t1 are
    the times around the hole (receipt times for EffortCommand, the ticks' own stamps for
    ControlTicks, see ``time_kind``)."""

    #: a jump of the counter the controller cannot make in the time between two entries: ahead by
    #: more than MAX_RATE_HZ x elapsed + JUMP_SLACK, or back by more than JUMP_SLACK (a foreign
    #: publisher on the topic, a restarted controller whose ticks start again at 0)
    MAX_RATE_HZ = 10_000.0
    JUMP_SLACK = 100

    def __init__(self, topic: str, time_kind: str, max_rate_hz: float | None = None):
        self.topic, self.time_kind = topic, time_kind
        self.max_rate_hz = max_rate_hz    # None: no plausibility check (the entries' own stamps)
        self.last = None          # (seq, t ns) of the newest entry seen
        self.gaps: list = []
        self.missing = 0
        self.seen = 0             # entries (ticks) checked
        self.unchecked = 0        # messages stored whose numbers could not be read (another version)
        self.ring_dropped = 0     # ControlTicks: what the publisher's ring itself dropped
        self.rebased: list = []   # (from seq, to seq, t ns) of the implausible jumps (not counted as gaps)

    def feed(self, seq: int, t_ns: int):
        """One entry; returns the new gap (tuple) or None. Older / repeated numbers are ignored;
        an implausible jump (see :attr:`MAX_RATE_HZ`) re-bases the count there (noted in
        ``rebased``, never reported as missing ticks)."""
        self.seen += 1
        last, gap = self.last, None
        if last is not None and self.max_rate_hz is not None:
            ahead = seq - last[0]
            allowed = self.max_rate_hz * max(t_ns - last[1], 0) * 1e-9 + self.JUMP_SLACK
            if ahead > allowed or ahead < -self.JUMP_SLACK:
                self.rebased.append((last[0], seq, t_ns))
                self.last = (seq, t_ns)
                return None
        if last is not None and seq > last[0] + 1:
            n = seq - last[0] - 1
            gap = (n, last[0] + 1, seq - 1, last[1], t_ns)
            self.gaps.append(gap)
            self.missing += n
        if last is None or seq > last[0]:
            self.last = (seq, t_ns)
        return gap

    def line(self, g) -> str:
        n, a, b, t0, t1 = g
        return (f"{self.topic}: {n} tick{'s' if n > 1 else ''} missing between t={t0 / 1e9:.3f} s and "
                f"t={t1 / 1e9:.3f} s (ticks {a}..{b}; {self.time_kind}): not received by the recorder")

    def rebase_line(self, r) -> str:
        a, b, t = r
        return (f"{self.topic}: the tick counter jumped from {a} to {b} at t={t / 1e9:.3f} s ({self.time_kind}), "
                "more than the controller can tick in that time: another publisher or a restarted controller; "
                "counted from there, not as missing ticks")


class SolverStateThinner:
    """Which SolveInputs keep their solver state (see the module docstring, solver_state_period).

    Call it with each SolveInput's serialized CDR bytes, in recording order, and the index of
    the storage file the message goes into; it returns the bytes to store: the same object on a
    key tick, else the message re-serialized (with ``typestore``, the bag's definitions) with
    ``solver_state_rows`` 0 and an empty ``solver_state``. Counters: ``seen``, ``thinned``."""

    def __init__(self, period: int, typestore):
        if int(period) < 1:
            raise ValueError(f"period: must be >= 1, got {period}")
        self.period, self._ts = int(period), typestore
        self._last = None          # (tick, file index) of the previous SolveInput
        self.seen = self.thinned = 0

    def __call__(self, raw, file_index: int = 0):
        try:
            m = self._ts.deserialize_cdr(bytes(raw), SOLVE_INPUT_TYPE)
            tick = int(m.tick)
        except Exception:  # noqa: BLE001 - another message version: stored untouched
            return raw
        self.seen += 1
        last, self._last = self._last, (tick, file_index)
        key = (last is None or tick != last[0] + 1 or file_index != last[1] or bool(m.reset)
               or tick % self.period == 0 or int(m.solver_state_rows) == 0)
        if key:
            return raw
        import numpy as np

        m.solver_state_rows = 0
        m.solver_state = np.zeros(0, dtype=np.float64)
        self.thinned += 1
        return bytes(self._ts.serialize_cdr(m, SOLVE_INPUT_TYPE))


class _Topic:
    """One recorded topic: its type, bag connection, subscription and counters."""

    def __init__(self, name: str, type_name: str | None):
        self.name, self.type = name, type_name
        self.conn = None
        self.sub = None
        self.qos = None           # (reliable, transient_local) of the current subscription
        self.count = 0
        self.bytes = 0
        self.dropped = False      # type unusable: not recorded
