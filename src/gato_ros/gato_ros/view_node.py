"""The gato live view node: a thin rclpy shell over :class:`gato_ros.view_logic.ViewLogic`
that serves the browser page (:class:`gato_ros.view_server.BrowserView`) and, with
``foxglove``, a Foxglove WebSocket server (:class:`gato_ros.view_server.FoxgloveView`).

Off the control path: its own process, at the lowest CPU priority (``scheduling``: Linux
SCHED_IDLE by default, :mod:`gato_ros.cpu_priority`: it runs on the CPU time the controller and
the simulation leave over); it only subscribes (best effort, keep-last: a slow view
never holds a publisher back) to what the graph publishes anyway, and the subscription
callbacks only store the serialized message (and hand it to the Foxglove server, which sends
it from its own thread). Deserialization, kinematics and rendering run in the view's render
thread at ``rate_hz``, on the newest message of each topic, and only while a page is open or a
Foxglove client subscribes to the scene.
The node spins rclpy's EventsExecutor (C++): the graph's topics bring about 400 small callbacks a
second, and the SingleThreadedExecutor's Python wait-set rebuild around each one kept the view's
main thread at 17-19 % of a core (5 % with the EventsExecutor; docs/benchmarks_ros.md, "Live view:
the controller with and without the view").

Subscribes (``controller_node`` = /gato_controller by default):
    /joint_states (sensor_msgs/JointState), /ee_reference (gato_msgs/EEReference),
    <controller_node>/plan (Plan), /step_result (StepResult: the batch rows), /status
    (ControllerStatus: state, solve time, deadline misses), /solver_stats, /command, and
    /gato_sim/status: forwarded to Foxglove with their schemas (ros2msg, CDR).
Serves:
    http://<host>:<port>/ the 3D page (robot, plan, batch rows, reference, plot, counters);
    ws://<host>:<foxglove_port> with ``foxglove`` (protocol foxglove.websocket.v1).
Parameters: the view schema of :mod:`gato_ros.params` (docs/parameters.md), read-only.

Run: ``ros2 run gato_ros view_node --ros-args -p robot:=iiwa14`` (or ``view:=true`` in the
bringup launch files, ``scripts/sim.sh --view``).
"""
from __future__ import annotations

import sys
import threading
import time

from rclpy.node import Node

from . import params as schema
from .cpu_priority import lower_priority
from .node_util import declare_schema
from .view_logic import REFERENCE_HISTORY

__all__ = ["ViewNode", "graph_topics", "main"]

REFERENCE_TYPE = "gato_msgs/msg/EEReference"


def graph_topics(controller_node: str = "/gato_controller") -> dict:
    """{topic: message type} the view subscribes to (and forwards to Foxglove)."""
    c = "/" + controller_node.strip("/")
    return {
        "/joint_states": "sensor_msgs/msg/JointState",
        "/ee_reference": "gato_msgs/msg/EEReference",
        f"{c}/plan": "gato_msgs/msg/Plan",
        f"{c}/step_result": "gato_msgs/msg/StepResult",
        f"{c}/status": "gato_msgs/msg/ControllerStatus",
        f"{c}/solver_stats": "gato_msgs/msg/SolverStats",
        f"{c}/command": "gato_msgs/msg/EffortCommand",
        "/gato_sim/status": "gato_msgs/msg/SimStatus",
    }


def _msg_class(type_name: str):
    from rosidl_runtime_py.utilities import get_message

    return get_message(type_name)


def _schema_text(type_name: str) -> str:
    """The ros2msg definition of a message type (the type and its dependencies), as MCAP writes it."""
    from .bag import typestore

    return typestore().generate_msgdef(type_name, ros_version=2)[0]


class ViewNode(Node):
    def __init__(self, **kwargs):
        super().__init__("gato_view", **kwargs)
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        from .view_logic import RobotGeometry, ViewLogic
        from .view_server import BrowserView, FoxgloveView

        values = declare_schema(self, schema.VIEW)
        self.cfg = values
        self.geometry = RobotGeometry(values["robot"])
        self.logic = ViewLogic(self.geometry, plot_window_s=values["plot_window_s"])
        try:
            self.browser = BrowserView(self.geometry, values["host"], values["port"], title="gato view")
        except OSError as e:
            raise ValueError(f"port: cannot serve the view on {values['host']}:{values['port']} ({e})") from e
        self.foxglove = None
        if values["foxglove"]:
            try:
                self.foxglove = FoxgloveView(self.geometry, values["host"], values["foxglove_port"])
            except Exception as e:       # the SDK raises its own error type for a taken port
                self.browser.close()
                raise ValueError(f"foxglove_port: cannot serve Foxglove on {values['host']}:"
                                 f"{values['foxglove_port']} ({e})") from e
        self._types = graph_topics(values["controller_node"])
        self._classes = {t: _msg_class(ty) for t, ty in self._types.items()}
        self._schemas = {ty: _schema_text(ty) for ty in set(self._types.values())} if self.foxglove else {}
        self._latest: dict = {}          # topic -> newest serialized message
        self._refs: list = []            # every /ee_reference since the last frame (bounded)
        self._latest_lock = threading.Lock()
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.VOLATILE)
        self._subs = [self.create_subscription(self._classes[t], t, self._make_cb(t), qos, raw=True)
                      for t in self._types]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._render_loop, name="gato_view_render", daemon=True)
        self._thread.start()
        # every thread now there (DDS, servers, render), once the one-off start-up (imports, meshes)
        # is done: at SCHED_IDLE on a busy machine that took longer than a 20 s run; later threads inherit
        self.priority = lower_priority(values["scheduling"])
        msg = f"gato view of {values['robot']} (CPU priority: {self.priority}): {self.browser.url}"
        if self.foxglove is not None:
            msg += f" (Foxglove: {self.foxglove.url})"
        if self.geometry.missing:
            msg += f"; visuals without a mesh file (skeleton only): {', '.join(self.geometry.missing)}"
        self.get_logger().info(msg)
        print(f"[gato_view] {self.browser.url}", flush=True)

    def _make_cb(self, topic: str):
        type_name = self._types[topic]

        def cb(data: bytes):
            with self._latest_lock:
                self._latest[topic] = data
                if type_name == REFERENCE_TYPE:
                    self._refs.append(data)
                    del self._refs[:-REFERENCE_HISTORY]
            if self.foxglove is not None:
                self.foxglove.publish_raw(topic, type_name, self._schemas[type_name], data, time.time_ns())
        return cb

    # ------------------------------------------------------------ render thread
    def _ingest(self, topic: str, data: bytes) -> None:
        """Deserialize the newest message of ``topic`` and hand it to the logic."""
        from rclpy.serialization import deserialize_message

        from . import conversions as cv

        m = deserialize_message(data, self._classes[topic])
        kind = self._types[topic].rsplit("/", 1)[-1]
        if kind == "JointState":
            self.logic.on_joint_state(cv.joint_state_from_msg(m))
        elif kind == "EEReference":
            self.logic.on_reference(cv.reference_from_msg(m))
        elif kind == "Plan":
            self.logic.on_plan(cv.plan_from_msg(m))
        elif kind == "StepResult":
            s = m.solve
            if s.batch_size > 1:
                import numpy as np

                xu = np.asarray(s.xu, dtype=float).reshape(int(s.batch_size), int(s.xu_size))
                self.logic.on_step_result(xu, s.nx, s.nu, s.n_knots, m.best_id)
        elif kind == "ControllerStatus":
            self.logic.on_status(m.state, m.solve_us, m.deadline_misses, m.ticks, m.reason)

    def _render_loop(self) -> None:
        period = 1.0 / self.cfg["rate_hz"]
        next_t = time.monotonic()
        while not self._stop.is_set():
            page, fox = self.browser.watched(), self.foxglove is not None and self.foxglove.watched()
            if not (page or fox):                # nobody looks: nothing to compute (the graph's topics
                next_t += period                 # still go to Foxglove subscribers from the callbacks)
                self._stop.wait(max(0.0, next_t - time.monotonic()))
                next_t = max(next_t, time.monotonic() - period)
                continue
            with self._latest_lock:
                batch, self._latest = self._latest, {}
                refs, self._refs = self._refs, []
            ref_topic = next(t for t, ty in self._types.items() if ty == REFERENCE_TYPE)
            for data in refs[:-1]:               # the windows in between: the tracking error needs them
                try:
                    self._ingest(ref_topic, data)
                except Exception as e:
                    self.logic.reject(f"{ref_topic}: {e}")
            for topic, data in batch.items():
                try:
                    self._ingest(topic, data)
                except Exception as e:           # a message the view cannot read: counted, shown
                    self.logic.reject(f"{topic}: {e}")
            try:
                fr = self.logic.frame()
                if page:
                    self.browser.draw(fr)
                if fox:
                    self.foxglove.draw(fr)
            except Exception as e:               # never take the view down on one bad frame
                self.get_logger().warning(f"view frame failed: {e}", throttle_duration_sec=5.0)
            next_t += period
            self._stop.wait(max(0.0, next_t - time.monotonic()))
            next_t = max(next_t, time.monotonic() - period)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self.foxglove is not None:
            self.foxglove.close()
        self.browser.close()


def main(argv=None) -> int:
    from .node_util import run

    return run(ViewNode, argv, executor="events")


if __name__ == "__main__":
    sys.exit(main())
