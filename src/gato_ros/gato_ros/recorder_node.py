"""The gato recorder: a rosbag2 recorder (MCAP or sqlite3) of the controller graph, on rclpy
raw subscriptions and the pure-Python ``rosbags`` writer.

What it records (parameter ``topics`` empty = :data:`CONTROLLER_GRAPH_TOPICS`):

    /joint_states                       sensor_msgs/msg/JointState
    /ee_reference                       gato_msgs/msg/EEReference
    /<controller_name>/commands         std_msgs/msg/Float64MultiArray
    /<controller_name>/ticks            gato_msgs/msg/ControlTicks (the gato ros2_control plugin's
                                        per-tick record, when controller_name is the plugin)
    <controller_node>/command           gato_msgs/msg/EffortCommand
    <controller_node>/solve_input       gato_msgs/msg/SolveInput
    <controller_node>/step_result       gato_msgs/msg/StepResult
    <controller_node>/solver_stats      gato_msgs/msg/SolverStats
    <controller_node>/plan              gato_msgs/msg/Plan
    <controller_node>/status            gato_msgs/msg/ControllerStatus
    /gato_sim/status                    gato_msgs/msg/SimStatus (the simulation world's command watchdog)
    /parameter_events                   rcl_interfaces/msg/ParameterEvent
    /robot_description                  std_msgs/msg/String (transient local)

plus, written by the recorder itself, ``/gato_recorder/parameter_snapshot``
(rcl_interfaces/msg/ParameterEvent): ALL parameters of ``controller_node`` with their
values (``new_parameters``; ``node`` = its fully qualified name; ``stamp`` = the
recorder's clock), taken through the node's parameter services (asynchronously) once the
node is discovered and again after every /parameter_events change it reports (changes
within 0.2 s are coalesced into one snapshot). A standard message type: any rosbag2 tool
reads it.

QoS follows what the publishers offer (like ``ros2 bag record``): reliable unless a
publisher is best-effort, transient local when every publisher offers it (so a latched
/robot_description published before the recorder started is recorded). Topics with a
known type are subscribed at once (reliable, volatile; transient local for
/robot_description) and re-subscribed when discovery shows an incompatible publisher
(best-effort; volatile on a transient-local topic), or, while nothing was received yet,
publishers that all offer transient local. Topics given without a type are subscribed
when discovery shows them. The offered QoS is stored in the bag's metadata.

Parameters:
    bag_path (string): output folder; must not exist (the recorder never overwrites).
    topics (string[]): "topic" or "topic:pkg/msg/Type"; empty = the controller graph.
    storage (string): "mcap" (default) or "sqlite3" (rosbag2 format version 9).
    compression (string): "zstd" (default: MCAP zstd-compressed chunks, as rosbag2's zstd storage
        presets write; sqlite3: rosbag2's per-message zstd) or "none".
    max_bag_size (int): split into a new storage file (<bag>_<k>.mcap) once the current one holds
        this many bytes, like ``ros2 bag record --max-bag-size`` (0 = never; MCAP only).
    max_bag_duration (double): split once a file spans this many seconds of log time, like
        ``ros2 bag record --max-bag-duration`` (0 = never; MCAP only).
    chunk_size (int): uncompressed bytes per MCAP chunk (default 4 MiB, rosbag2's ``zstd_small``
        preset; >= 4096). zstd finds the copies between consecutive ticks (the plan in StepResult,
        Plan and the next SolveInput's warm start) only within a chunk: 1 MiB chunks write 5 %
        more bytes on the controller graph. A recorder killed with SIGKILL loses the chunk in memory.
    controller_node (string): fully qualified name of the controller node (default
        /gato_controller): its parameters are snapshotted and its topics are in the
        default set; "" = no snapshot.
    controller_name (string): the ros2_control forward command controller
        (default effort_controller): /<controller_name>/commands is in the default set.
    progress_period_s (double): period of the one-line progress log (wall clock, 0 = off).
    solver_state_period (int): keep ``SolveInput.solver_state`` on <controller_node>/solve_input
        only every this many controller ticks, see below (default 100: once a second at 100 Hz;
        1 = on every tick, every message stored exactly as received).

The solver state (duals, rho, ADMM state: 3,145 float64 for the iiwa14, 25 kB of a 33 kB
SolveInput, about half of a compressed bag: near-random numbers do not compress) is what a
replay needs to continue exactly from a tick in the middle of a run. A replay of consecutive
ticks carries its own, equal one (the solve is deterministic), so with ``solver_state_period``
N > 1 the recorder keeps it on key ticks only: every N-th tick (tick % period == 0), a tick with ``reset``,
the first SolveInput it records, the first after a jump of the tick counter (hold ticks, lost
messages) and the first of every storage file of a split bag. On the other SolveInputs it
stores the same message with ``solver_state_rows`` 0 and an empty ``solver_state`` (re-serialized
with the bag's own definition; every other field unchanged), which ``gato replay`` reads as
"no solver state recorded for this tick". The summary says how many were thinned. A whole
run replays exactly either way (iiwa14 lockstep bringup, N = 100: 0.58 instead of 0.97 MB/s
compressed, docs/benchmarks_recording.md), and so does a ``gato replay --start`` window: it re-solves
silently from the latest key tick before the window (seeking there through the MCAP index), so
N = 100 is the default.

Lost ticks are reported, never a silent hole: the recorder reads the controller's tick counter
(``EffortCommand.tick``, one per command published) on ``<controller_node>/command`` and the
sequence numbers of every ``gato_msgs/msg/ControlTicks`` topic (the plugin's ``~/ticks``: one
per control update, in batches) and logs "N ticks missing between t1 and t2" for every jump of
more than one (the progress log and the closing summary give the totals per topic); ``gato
replay`` reports the same from the bag for the command topic.

Messages are stored as received (serialized CDR), stamped with the node clock at receipt
(simulated time under use_sim_time); message definitions and type hashes come from
:func:`gato_ros.bag.typestore` (gato_msgs from the installed .msg files; other packages'
types are looked up in the ament index). The bag is closed (metadata.yaml written) on
SIGINT / SIGTERM and when the node is destroyed; the per-topic summary is printed then.
``python -m gato_ros.record_cli`` (``ros2 run gato_ros record``) runs it from the
command line.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter

from .bag import typestore
from .node_util import run
from .recorder_logic import (_DEPTH, _DISCOVERY_S, _LATCHED_HINT, _SNAPSHOT_DEBOUNCE_S, _SNAPSHOT_TIMEOUT_S,
                             COMMAND_TYPE, CONTROLLER_GRAPH_TOPICS, PARAMETER_EVENT_TYPE, SNAPSHOT_TOPIC,
                             SOLVE_INPUT_TYPE, TICKS_TYPE, _ament_msg_file, _fmt_bytes, TickGapCheck, _msg_class,
                             _Topic, controller_graph_topics, SolverStateThinner)

__all__ = ["RecorderNode", "SolverStateThinner", "CONTROLLER_GRAPH_TOPICS", "SNAPSHOT_TOPIC", "controller_graph_topics", "main"]


class RecorderNode(Node):
    """The recorder (see the module docstring). Counters: ``count`` (messages written, all
    topics), ``counts()`` per topic, ``snapshots`` (parameter snapshots written)."""

    def __init__(self, **kwargs):
        super().__init__("gato_recorder", **kwargs)
        from .bag import COMPRESSIONS, BagWriter

        self._closed = True   # until the writer is open: close() / destroy_node() do nothing
        path = self.declare_parameter("bag_path", "gato_bag").value
        entries = list(self.declare_parameter("topics", Parameter.Type.STRING_ARRAY).value or [])
        storage = self.declare_parameter("storage", "mcap").value
        ctrl = self.declare_parameter("controller_node", "/gato_controller").value.strip()
        cname = self.declare_parameter("controller_name", "effort_controller").value.strip()
        progress = float(self.declare_parameter("progress_period_s", 5.0).value)
        compression = self.declare_parameter("compression", "zstd").value
        max_size = int(self.declare_parameter("max_bag_size", 0).value)
        max_dur = float(self.declare_parameter("max_bag_duration", 0.0).value)
        state_period = int(self.declare_parameter("solver_state_period", 100).value)
        chunk_size = int(self.declare_parameter("chunk_size", 4 * 1024 * 1024).value)
        if chunk_size < 4096:
            raise ValueError(f"chunk_size: must be >= 4096 bytes, got {chunk_size}")
        if state_period < 1:
            raise ValueError(f"solver_state_period: must be >= 1 (1 = keep the solver state on every tick), "
                             f"got {state_period}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression: expected one of {', '.join(COMPRESSIONS)}, got {compression!r}")
        if max_size < 0 or max_dur < 0:
            raise ValueError(f"max_bag_size / max_bag_duration: must be >= 0, got {max_size} / {max_dur}")
        if storage not in ("mcap", "sqlite3"):
            raise ValueError(f"storage: expected mcap or sqlite3, got {storage!r}")
        if not path:
            raise ValueError("bag_path: empty")
        if Path(path).exists():
            raise ValueError(f"bag_path: {path} exists already; the recorder writes a new bag folder only "
                             "(choose another path or remove it)")
        self.bag_path = str(path)
        self.storage = storage
        self.controller_node = ("/" + ctrl.strip("/")) if ctrl else ""
        self._ts = typestore()
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.topics: dict[str, _Topic] = {}
        if not entries:
            for t, ty in controller_graph_topics(self.controller_node or "/gato_controller", cname).items():
                self.topics[t] = _Topic(t, ty)
        for e in entries:
            topic, _, type_name = e.strip().partition(":")
            if not topic.startswith("/"):
                raise ValueError(f"topics: {topic!r} is not an absolute topic name (/name)")
            self.topics[topic] = _Topic(topic, type_name.strip() or None)
        self.count = 0
        self.bytes = 0
        self.snapshots = 0
        # parameter snapshots of the controller node
        self._snap_conn = None
        self._snap_client = None
        self._snap_due = None          # monotonic time at which to take the next snapshot
        self._snap_inflight = None     # monotonic start of the fetch in progress
        self._ctrl_present = False
        if storage != "mcap" and (max_size or max_dur):
            raise ValueError("max_bag_size / max_bag_duration: splitting is supported for mcap storage only")
        self.compression = compression
        # lost ticks: the controller's command topic (EffortCommand.tick) and every ControlTicks topic
        self._cmd_topic = f"{self.controller_node or '/gato_controller'}/command"
        self.checks: dict[str, TickGapCheck] = {
            self._cmd_topic: TickGapCheck(self._cmd_topic, "receipt times", max_rate_hz=TickGapCheck.MAX_RATE_HZ)}
        self._solve_topic = f"{self.controller_node or '/gato_controller'}/solve_input"
        self.solver_state_period = state_period
        self._thinner = SolverStateThinner(state_period, self._ts)
        self._writer = BagWriter(path, storage=storage, compression=compression, max_bag_size=max_size,
                                 max_bag_duration_s=max_dur, chunk_size=chunk_size)
        self._writer.open()
        self._closed = False
        self._t_start = time.monotonic()
        try:
            self._setup(path, storage, progress)
        except BaseException:
            self.close()          # a signal (context shut down) or an error during start-up: a valid bag anyway
            raise

    def _setup(self, path, storage, progress):
        """Snapshot client, subscriptions and timers (the writer is open)."""
        if self.controller_node:
            from rclpy.parameter_client import AsyncParameterClient
            from rclpy.serialization import deserialize_message

            from rcl_interfaces.msg import ParameterEvent

            self._ParameterEvent, self._deserialize = ParameterEvent, deserialize_message
            self._snap_conn = self._writer.add_connection(SNAPSHOT_TOPIC, PARAMETER_EVENT_TYPE, typestore=self._ts,
                                                          offered_qos_profiles=[self._rosbags_qos(True, False)])
            self._snap_client = AsyncParameterClient(self, self.controller_node)
            if "/parameter_events" not in self.topics:   # not recorded: still watched for snapshots
                from rclpy.qos import qos_profile_parameter_events

                self.create_subscription(ParameterEvent, "/parameter_events",
                                         lambda raw: self._on_parameter_event(raw), qos_profile_parameter_events,
                                         raw=True)
        for t in self.topics.values():
            if t.type is not None:
                self._subscribe(t, *self._wanted_qos(t, self._pubs_of(t.name)))
        self.create_timer(_DISCOVERY_S, self._discover, clock=self._wall)
        if progress > 0:
            self.create_timer(progress, self._progress, clock=self._wall)
        self.get_logger().info(
            f"recording {len(self.topics)} topics to {path} ({storage})"
            + (f"; parameter snapshots of {self.controller_node} on {SNAPSHOT_TOPIC}" if self.controller_node else ""))

    # ------------------------------------------------------------------ subscriptions
    def _pubs_of(self, topic: str) -> list:
        try:
            return self.get_publishers_info_by_topic(topic)
        except Exception:  # noqa: BLE001 - the context is shutting down
            return []

    @staticmethod
    def _wanted_qos(t: _Topic, pubs: list) -> tuple:
        """(reliable, transient_local) to subscribe ``t`` with, given its publishers' offers."""
        from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

        if not pubs:
            return True, t.name in _LATCHED_HINT
        reliable = all(p.qos_profile.reliability != ReliabilityPolicy.BEST_EFFORT for p in pubs)
        latched = all(p.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in pubs)
        return reliable, latched

    @staticmethod
    def _rosbags_qos(reliable: bool, latched: bool):
        from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

        never = QosTime(0x7FFFFFFF, 0xFFFFFFFF)
        return Qos(QosHistory.KEEP_LAST, 1 if latched else _DEPTH,
                   QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
                   QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
                   never, never, QosLiveliness.AUTOMATIC, never, False)

    def _ensure_type(self, type_name: str) -> None:
        """Register ``type_name`` in the typestore from the ament index when rosbags lacks it."""
        if type_name in self._ts.fielddefs:
            return
        from rosbags.typesys import get_types_from_msg

        f = _ament_msg_file(type_name)
        if f is None:
            raise ValueError(f"no message definition for {type_name} (not in rosbags' store, no "
                             "share/<pkg>/msg/<Type>.msg on AMENT_PREFIX_PATH)")
        self._ts.register(get_types_from_msg(f.read_text(), type_name))

    def _subscribe(self, t: _Topic, reliable: bool, latched: bool) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        if t.dropped:
            return
        try:
            cls = _msg_class(t.type)
            if t.conn is None:
                self._ensure_type(t.type)
                t.conn = self._writer.add_connection(t.name, t.type, typestore=self._ts,
                                                     offered_qos_profiles=[self._rosbags_qos(reliable, latched)])
        except (ImportError, AttributeError, ValueError, KeyError) as e:
            t.dropped = True
            self.get_logger().warning(f"{t.name}: type {t.type} unusable ({e}); not recorded")
            return
        if t.sub is not None:
            self.destroy_subscription(t.sub)
        profile = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=_DEPTH,
                             reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
        is_events = t.name == "/parameter_events" and self.controller_node
        is_cmd = t.name == self._cmd_topic and t.type == COMMAND_TYPE
        is_ticks = t.type == TICKS_TYPE
        thin = t.name == self._solve_topic and t.type == SOLVE_INPUT_TYPE and self.solver_state_period > 1
        if is_ticks and t.name not in self.checks:
            self.checks[t.name] = TickGapCheck(t.name, "tick stamps")

        def on_msg(raw, t=t):
            if self._closed:
                return
            now = self.get_clock().now().nanoseconds
            if thin:
                raw = self._thin_solve_input(raw, now)
            self._writer.write(t.conn, now, raw)
            t.count += 1
            t.bytes += len(raw)
            self.count += 1
            self.bytes += len(raw)
            if is_events:
                self._on_parameter_event(raw)
            if is_cmd:
                self._on_command(raw, cls, now)
            elif is_ticks:
                self._on_ticks(t.name, raw, cls)

        t.sub = self.create_subscription(cls, t.name, on_msg, profile, raw=True)
        t.qos = (reliable, latched)

    def _discover(self):
        if self._closed:
            return
        known = None
        for t in self.topics.values():
            if t.dropped:
                continue
            pubs = self._pubs_of(t.name)
            if t.type is None:
                if not pubs:
                    continue
                if known is None:
                    known = dict(self.get_topic_names_and_types())
                if t.name not in known:
                    continue
                t.type = known[t.name][0]
                self.get_logger().info(f"{t.name}: discovered ({t.type})")
            if not pubs and t.sub is not None:
                continue
            want = self._wanted_qos(t, pubs)
            if t.sub is None:
                self._subscribe(t, *want)
                continue
            (rel, tl), (want_rel, want_tl) = t.qos, want
            incompatible = (rel and not want_rel) or (tl and not want_tl)
            upgrade = want_tl and not tl and t.count == 0
            if incompatible or upgrade:
                self.get_logger().info(f"{t.name}: publishers offer {'reliable' if want_rel else 'best effort'}, "
                                       f"{'transient local' if want_tl else 'volatile'}: re-subscribing")
                self._subscribe(t, want_rel if incompatible else rel, want_tl)
        self._snapshot_poll()

    # ------------------------------------------------------------------ parameter snapshots
    def _on_parameter_event(self, raw: bytes) -> None:
        try:
            ev = self._deserialize(raw, self._ParameterEvent)
        except Exception:  # noqa: BLE001 - a malformed event is recorded, not interpreted
            return
        if ev.node == self.controller_node and (ev.new_parameters or ev.changed_parameters or ev.deleted_parameters):
            self._snap_due = time.monotonic() + _SNAPSHOT_DEBOUNCE_S

    def _snapshot_poll(self) -> None:
        if not self.controller_node:
            return
        now = time.monotonic()
        present = self.controller_node in {(ns.rstrip("/") + "/" + n) for n, ns in
                                           self.get_node_names_and_namespaces()}
        if present and not self._ctrl_present:      # discovered (or back after a restart)
            self._snap_due = now + _SNAPSHOT_DEBOUNCE_S
        self._ctrl_present = present
        if self._snap_inflight is not None:
            if now - self._snap_inflight < _SNAPSHOT_TIMEOUT_S:
                return
            self.get_logger().warning(f"parameter snapshot of {self.controller_node}: no answer in "
                                      f"{_SNAPSHOT_TIMEOUT_S:g} s; retrying")
            self._snap_inflight = None
            self._snap_due = now
        if self._snap_due is None or now < self._snap_due or not present:
            return
        if not self._snap_client.services_are_ready():
            return                                   # services not discovered yet: next poll
        self._snap_due = None
        self._snap_inflight = now
        self._snap_client.list_parameters(callback=self._on_list)

    def _snapshot_failed(self, what: str) -> None:
        self.get_logger().warning(f"parameter snapshot of {self.controller_node}: {what}; retrying in 1 s")
        self._snap_inflight = None
        self._snap_due = time.monotonic() + 1.0

    def _on_list(self, fut) -> None:
        if self._closed:
            return
        try:
            names = list(fut.result().result.names)
        except Exception as e:  # noqa: BLE001 - service failure: retry
            self._snapshot_failed(f"list_parameters failed ({e})")
            return
        self._snap_client.get_parameters(names, callback=lambda f, names=names: self._on_get(f, names))

    def _snapshot_cdr(self, stamp, names, values) -> bytes:
        """The snapshot as CDR, serialized by rosbags (exact length: rclpy's serialize_message
        pads ParameterEvent with trailing bytes that strict readers reject)."""
        import numpy as np

        ts = self._ts
        Time = ts.types["builtin_interfaces/msg/Time"]
        PValue = ts.types["rcl_interfaces/msg/ParameterValue"]
        PMsg = ts.types["rcl_interfaces/msg/Parameter"]
        Event = ts.types[PARAMETER_EVENT_TYPE]
        params = []
        for n, v in zip(names, values):
            pv = PValue(type=int(v.type), bool_value=bool(v.bool_value), integer_value=int(v.integer_value),
                        double_value=float(v.double_value), string_value=str(v.string_value),
                        byte_array_value=np.frombuffer(b"".join(bytes(b) for b in v.byte_array_value),
                                                       dtype=np.uint8),
                        bool_array_value=np.array(list(v.bool_array_value), dtype=np.bool_),
                        integer_array_value=np.array(list(v.integer_array_value), dtype=np.int64),
                        double_array_value=np.array(list(v.double_array_value), dtype=np.float64),
                        string_array_value=[str(x) for x in v.string_array_value])
            params.append(PMsg(name=n, value=pv))
        sec, nsec = divmod(stamp.nanoseconds, 10**9)
        ev = Event(stamp=Time(sec=int(sec), nanosec=int(nsec)), node=self.controller_node, new_parameters=params,
                   changed_parameters=[], deleted_parameters=[])
        return bytes(ts.serialize_cdr(ev, PARAMETER_EVENT_TYPE))

    def _on_get(self, fut, names) -> None:
        if self._closed:
            return
        try:
            values = list(fut.result().values)
        except Exception as e:  # noqa: BLE001
            self._snapshot_failed(f"get_parameters failed ({e})")
            return
        if len(values) != len(names):
            self._snapshot_failed(f"{len(values)} values for {len(names)} parameters")
            return
        stamp = self.get_clock().now()
        raw = self._snapshot_cdr(stamp, names, values)
        self._writer.write(self._snap_conn, stamp.nanoseconds, raw)
        self.snapshots += 1
        self.count += 1
        self.bytes += len(raw)
        self._snap_inflight = None
        self.get_logger().info(f"parameter snapshot {self.snapshots} of {self.controller_node}: "
                               f"{len(names)} parameters")

    @property
    def gaps(self) -> list:
        """The gaps on the controller's command topic (see :class:`TickGapCheck`)."""
        return self.checks[self._cmd_topic].gaps

    @property
    def ticks_missing(self) -> int:
        """Ticks missing on every checked topic (command topic and ControlTicks topics)."""
        return sum(c.missing for c in self.checks.values())

    def _report_gap(self, check: TickGapCheck, gap) -> None:
        if gap is not None and len(check.gaps) <= 20:
            self.get_logger().warning(check.line(gap))

    def _on_command(self, raw, cls, now_ns) -> None:
        """Check the controller's tick counter for lost commands (see the module docstring)."""
        from rclpy.serialization import deserialize_message

        try:
            tick = int(deserialize_message(raw, cls).tick)
        except Exception:  # noqa: BLE001 - a message of another version: no counter to check
            return
        check = self.checks[self._cmd_topic]
        n = len(check.rebased)
        self._report_gap(check, check.feed(tick, now_ns))
        if len(check.rebased) > n and n < 20:
            self.get_logger().warning(check.rebase_line(check.rebased[-1]))

    def _thin_solve_input(self, raw, now_ns):
        f = len(self._writer.files) + (1 if self._writer.splits_before(now_ns) else 0)   # this message's file
        return self._thinner(raw, f)

    def _on_ticks(self, topic, raw, cls) -> None:
        """Check a ControlTicks batch's sequence numbers (within it and against the previous batch)."""
        from rclpy.serialization import deserialize_message

        check = self.checks[topic]
        try:
            m = deserialize_message(raw, cls)
            seqs, stamps = list(m.seq), list(m.stamp_ns)
            if len(seqs) != len(stamps):
                raise ValueError(f"{len(seqs)} sequence numbers but {len(stamps)} stamps")
        except Exception as e:  # noqa: BLE001 - a message of another version: no numbers to check
            check.unchecked += 1     # said in the summary: its ticks are in the bag but not in `seen`
            if check.unchecked == 1:
                self.get_logger().warning(f"{topic}: a ControlTicks batch could not be checked ({e}); "
                                          "stored, its ticks not counted")
            return
        check.ring_dropped = int(m.ring_dropped)
        for seq, stamp in zip(seqs, stamps):
            self._report_gap(check, check.feed(int(seq), int(stamp)))

    # ------------------------------------------------------------------ reporting and closing
    def counts(self) -> dict:
        """{topic: messages written} (the snapshot topic included)."""
        out = {t.name: t.count for t in self.topics.values()}
        if self._snap_conn is not None:
            out[SNAPSHOT_TOPIC] = self.snapshots
        return out

    def _progress(self):
        if not self._closed:
            active = sum(1 for t in self.topics.values() if t.count > 0) + (1 if self.snapshots else 0)
            self.get_logger().info(f"recording: {self.count} msgs, {active} topics, {_fmt_bytes(self.bytes)}"
                                   + (f", on disk {_fmt_bytes(self._writer.bytes_written())}"
                                      if self.storage == "mcap" else "")
                                   + (f", {self.ticks_missing} ticks missing" if self.ticks_missing else ""))

    def summary(self) -> str:
        """Per-topic message counts, one line each, as printed at close."""
        wall = time.monotonic() - self._t_start
        files = self._writer.files
        lines = [f"[gato_recorder] bag {self.bag_path} ({self.storage}) closed: {self.count} messages, "
                 f"{_fmt_bytes(self.bytes)}, {wall:.1f} s; compression {self.compression}, {len(files)} file"
                 + ("s" if len(files) != 1 else "")]
        th = self._thinner
        if th.seen:
            lines.append(f"  solver state kept on {th.seen - th.thinned} of {th.seen} "
                         f"SolveInputs on {self._solve_topic} (key ticks: every {self.solver_state_period} ticks, "
                         "resets, after a gap, first of each file; solver_state_period)")
        for c in self.checks.values():
            if c.topic != self._cmd_topic and not c.seen:
                continue              # a ControlTicks topic nobody published
            what = ("the controller's tick counter" if c.topic == self._cmd_topic else
                    f"sequence numbers of {c.seen} ticks received"
                    + (f"; the publisher's ring dropped {c.ring_dropped}" if c.ring_dropped else ""))
            what += f"; {c.unchecked} messages stored unchecked" if c.unchecked else ""
            what += f"; {len(c.rebased)} implausible counter jumps re-based" if c.rebased else ""
            lines.append(f"  {c.missing} ticks missing on {c.topic} ({what})"
                         + ("" if not c.gaps else f" in {len(c.gaps)} gaps:"))
            lines += ["  " + c.line(g) for g in c.gaps[:20]]
            lines += ["  " + c.rebase_line(r) for r in c.rebased[:5]]
            if len(c.gaps) > 20:
                lines.append(f"  ... and {len(c.gaps) - 20} more gaps")
        width = max([len(t) for t in self.counts()] + [10])
        types = {t.name: t.type or "?" for t in self.topics.values()}
        types[SNAPSHOT_TOPIC] = PARAMETER_EVENT_TYPE
        for topic, n in self.counts().items():
            note = "  (type unusable: not recorded)" if topic in self.topics and self.topics[topic].dropped else ""
            lines.append(f"  {topic:<{width}}  {n:>8}  {types[topic]}{note}")
        return "\n".join(lines)

    def close(self):
        """Close the bag (metadata.yaml written) and print the summary; idempotent."""
        if not self._closed:
            self._closed = True
            self._writer.close()
            # print, not the ROS logger: on SIGINT the context (and /rosout) is already gone
            print(self.summary(), flush=True)

    def destroy_node(self):
        self.close()
        return super().destroy_node()


def main(argv=None) -> int:
    return run(RecorderNode, argv, exit_grace_s=None)   # closing the bag must never be cut short


if __name__ == "__main__":
    sys.exit(main())
