"""The live view's two outputs, without ROS: a self-contained 3D page in the browser
(:class:`BrowserView`, viser: the page and its client are served from the wheel, nothing is
fetched from the network) and a Foxglove WebSocket server (:class:`FoxgloveView`,
foxglove-sdk 0.30: the Foxglove WebSocket protocol, subprotocol ``foxglove.sdk.v1``).

Both draw a :class:`gato_ros.view_logic.ViewFrame`: the robot from its URDF visuals at the
measured joint state, the current plan's EE path (blue), the other batch rows' paths (grey:
hypotheses), the reference window (green) and the EE tracking error (position, orientation) /
solve time. The browser page also shows a text panel with the controller's state and its own
"frames received" counter (element ``#gato-frames``: the number of frames this page received, counted in the
page as they arrive).

Ports: one TCP port each, bound to ``host`` (127.0.0.1 by default: the view is reachable
from this machine only; pass 0.0.0.0 to serve a network).
"""
from __future__ import annotations

import json
import threading

import numpy as np

from .view_logic import RobotGeometry, ViewFrame

__all__ = ["BrowserView", "FoxgloveView", "PLAN_RGB", "BATCH_RGB", "REFERENCE_RGB"]

PLAN_RGB = (20, 110, 255)
BATCH_RGB = (150, 150, 150)
REFERENCE_RGB = (20, 170, 60)
EE_RGB = (220, 30, 30)
#: the browser plot's curves after t: (ViewFrame.plot key, label, scale, colour); the EE
#: orientation error beside the position error (issue 30)
PLOT_SERIES = (("error_mm", "EE error [mm]", "mm", "#e0301e"),
               ("orientation_deg", "EE orientation error [deg]", "deg", "#9b30d0"),
               ("solve_ms", "solve [ms]", "ms", "#1e6eff"))


def _wxyz(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a 3x3 rotation matrix."""
    import pinocchio as pin

    c = pin.Quaternion(np.asarray(rot, dtype=float)).coeffs()     # x, y, z, w
    return np.array([c[3], c[0], c[1], c[2]])


def _segments(path: np.ndarray) -> np.ndarray:
    """(K-1, 2, 3) consecutive point pairs of a (K, 3) polyline (K >= 2; a single point: a dot)."""
    p = np.asarray(path, dtype=np.float32).reshape(-1, 3)
    if p.shape[0] == 1:
        p = np.vstack([p, p])
    return np.stack([p[:-1], p[1:]], axis=1)


# The page's own counter: a script in the panel counts the frames as they arrive (each frame
# rewrites the panel with a new sequence number; a MutationObserver sees the text change).
_COUNTER_JS = (
    "<img src='data:,' style='display:none' onerror=\"if(!window.gatoFrames){window.gatoFrames={n:0,last:''};"
    "new MutationObserver(function(){var s=document.getElementById('gato-seq');"
    "if(s&&s.textContent!==window.gatoFrames.last){window.gatoFrames.last=s.textContent;window.gatoFrames.n++;"
    "var c=document.getElementById('gato-frames');if(c)c.textContent=String(window.gatoFrames.n);}})"
    ".observe(document.body,{subtree:true,childList:true,characterData:true});}\">")


class BrowserView:
    """The 3D page (viser) of a robot: ``url`` once started; :meth:`draw` sends a frame; :meth:`close`.

    ``title``: shown in the panel (the node's name, the run). Raises OSError when ``port`` is
    taken (0: a free port)."""

    def __init__(self, geometry: RobotGeometry, host: str = "127.0.0.1", port: int = 8080, title: str = "gato"):
        import viser

        self.geometry = geometry
        self.server = viser.ViserServer(host=host, port=int(port), label=title, verbose=False)
        self.port = self.server.get_port()
        self.url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.port}/"
        s = self.server
        s.scene.set_up_direction("+z")
        s.scene.add_grid("/ground", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
        # a camera that frames an arm of about 1.3 m reach from the front-right, slightly above
        s.initial_camera.position = (1.25, -0.95, 0.85)
        s.initial_camera.look_at = (0.3, 0.0, 0.42)
        self._links = [s.scene.add_mesh_simple(f"/robot/{v.name}", v.vertices, v.faces,
                                                color=tuple(int(255 * c) for c in v.rgba[:3]),
                                                opacity=float(v.rgba[3]) if v.rgba[3] < 1 else None)
                       for v in geometry.visuals]
        self._skeleton = None
        self._draw_skeleton = bool(geometry.missing) or not geometry.visuals
        self._plan = self._batch = self._ref = self._ee = None
        self._panel = s.gui.add_html(self._panel_html(None))
        import viser.uplot as up

        self._plot = s.gui.add_uplot(
            data=(np.zeros(2), *(np.full(2, np.nan) for _ in PLOT_SERIES)),
            series=(up.Series(label="t [s]"),
                    *(up.Series(label=label, stroke=stroke, width=2, scale=unit) for _, label, unit, stroke in PLOT_SERIES)),
            scales={"x": up.Scale(time=False), "mm": up.Scale(auto=True), "deg": up.Scale(auto=True),
                    "ms": up.Scale(auto=True)},
            axes=(up.Axis(), up.Axis(scale="mm", label="mm"), up.Axis(scale="deg", side=1, label="deg"),
                  up.Axis(scale="ms", side=1, label="ms")),
            title="tracking error and solve time", aspect=1.6)
        self._counter = s.gui.add_html(
            "<div style='font-family:monospace'>frames received: <span id='gato-frames'>0</span>"
            "<span id='gato-seq' style='display:none'>0</span></div>" + _COUNTER_JS)
        self._lock = threading.Lock()

    @staticmethod
    def plot_data(fr: ViewFrame) -> tuple | None:
        """The plot curve's arrays (t, then one per :data:`PLOT_SERIES`; NaN drawn as 0: the
        orientation error on position-only windows), None before two samples."""
        t = fr.plot.get("t")
        if t is None or len(t) < 2:
            return None
        return (t, *(np.nan_to_num(fr.plot.get(key, np.full(len(t), np.nan)), nan=0.0) for key, *_ in PLOT_SERIES))

    @staticmethod
    def _panel_html(fr: ViewFrame | None) -> str:
        if fr is None or fr.t is None:
            return "<div style='font-family:monospace'>waiting for joint states ...</div>"
        i = fr.info
        err = fr.plot["error_mm"][-1] if fr.plot.get("error_mm") is not None and len(fr.plot["error_mm"]) else np.nan
        ro = fr.plot.get("orientation_deg")
        rot = ro[-1] if ro is not None and len(ro) else np.nan
        lines = [f"t = {fr.t:.2f} s",
                 f"controller: {i.get('state', '?')} {i.get('reason', '')}".rstrip(),
                 f"EE error: {err:.1f} mm" if np.isfinite(err) else "EE error: (no reference)",
                 *([f"EE orientation error: {rot:.2f} deg"] if np.isfinite(rot) else []),
                 f"solve: {i['solve_us'] / 1e3:.2f} ms, deadline misses {i['deadline_misses']}"
                 if "solve_us" in i else "solve: (no controller status)",
                 f"plans {i['plans']}, batch rows drawn {len(fr.batch_paths) + (fr.plan_path is not None)}"]
        if i.get("rejected"):
            lines.append(f"rejected inputs {i['rejected']}: {i['last_rejected']}")
        return "<div style='font-family:monospace;font-size:12px'>" + "<br>".join(lines) + "</div>"

    def _line(self, handle, name, path, rgb, thickness):
        """Create or update a polyline; hide it when ``path`` is None."""
        s = self.server
        if path is None or len(path) == 0:
            if handle is not None:
                handle.visible = False
            return handle
        seg = _segments(path)
        if handle is None or handle.points.shape != seg.shape:
            if handle is not None:
                handle.remove()
            return s.scene.add_line_segments(name, seg, colors=rgb, thickness=thickness,
                                             thickness_units="screen")
        handle.points = seg
        handle.visible = True
        return handle

    def watched(self) -> bool:
        """Whether a page is connected (no page: nothing to draw)."""
        return bool(self.server.get_clients())

    def draw(self, fr: ViewFrame) -> None:
        """Send one frame to every connected page (in one atomic update)."""
        s = self.server
        with self._lock, s.atomic():
            if fr.link_poses is not None:
                for h, T in zip(self._links, fr.link_poses):
                    h.position = T[:3, 3]
                    h.wxyz = _wxyz(T[:3, :3])
            if self._draw_skeleton:          # the joint origins, where a visual has no mesh to draw
                self._skeleton = self._line(self._skeleton, "/robot_skeleton", fr.skeleton, (60, 60, 60), 2.0)
            batch = np.concatenate([_segments(p) for p in fr.batch_paths]) if fr.batch_paths else None
            if batch is not None:
                if self._batch is None or self._batch.points.shape != batch.shape:
                    if self._batch is not None:
                        self._batch.remove()
                    self._batch = s.scene.add_line_segments("/batch", batch, colors=BATCH_RGB, thickness=2.0,
                                                            thickness_units="screen")
                else:
                    self._batch.points, self._batch.visible = batch, True
            elif self._batch is not None:
                self._batch.visible = False
            self._ref = self._line(self._ref, "/reference", fr.reference, REFERENCE_RGB, 4.0)
            self._plan = self._line(self._plan, "/plan", fr.plan_path, PLAN_RGB, 5.0)
            if fr.ee is not None:
                if self._ee is None:
                    self._ee = s.scene.add_icosphere("/ee", radius=0.015, color=EE_RGB)
                self._ee.position = fr.ee
            data = self.plot_data(fr)
            if data is not None:
                self._plot.data = data
            self._panel.content = self._panel_html(fr)
            self._counter.content = (
                "<div style='font-family:monospace'>frames received: <span id='gato-frames'>"
                "</span><span id='gato-seq' style='display:none'>" + str(fr.seq) + "</span></div>" + _COUNTER_JS)

    def close(self) -> None:
        self.server.stop()


class FoxgloveView:
    """A Foxglove WebSocket server carrying the view's scene and the
    graph's topics with their schemas (subprotocol ``foxglove.sdk.v1``).

    Scene channels: ``/gato_view/robot`` (foxglove.SceneUpdate: one entity per URDF visual, its
    mesh embedded (STL) or its triangles, frame-locked to ``gato_view/<visual>``; sent again
    whenever a client subscribes), ``/gato_view/tf`` (foxglove.FrameTransforms: each visual's
    placement in ``world`` per frame), ``/gato_view/scene`` (foxglove.SceneUpdate: plan, batch
    rows, reference, skeleton per frame), ``/gato_view/plot`` (JSON: t [s], error_mm, orientation_deg, solve_ms
    per new joint state). Graph topics: :meth:`publish_raw` advertises a topic (ros2msg schema,
    CDR) at its first message and forwards its serialized messages unchanged."""

    def __init__(self, geometry: RobotGeometry, host: str = "127.0.0.1", port: int = 8765, name: str = "gato"):
        import foxglove
        from foxglove import channels, schemas

        self._fg, self._sc = foxglove, schemas
        self.geometry = geometry
        self.context = foxglove.Context()
        self._robot_ch = channels.SceneUpdateChannel("/gato_view/robot", context=self.context)
        self._tf_ch = channels.FrameTransformsChannel("/gato_view/tf", context=self.context)
        self._scene_ch = channels.SceneUpdateChannel("/gato_view/scene", context=self.context)
        plot_schema = {"type": "object", "properties": {
            "t": {"type": "number", "description": "stamp of the joint state [s]"},
            "error_mm": {"type": ["number", "null"], "description": "|EE - reference| at that time [mm]"},
            "solve_ms": {"type": ["number", "null"], "description": "the controller's last MPC step [ms]"},
            "orientation_deg": {"type": ["number", "null"], "description": "angle of R_ref^T R_ee at that time "
                                "[deg] (null on position-only references)"}}}
        self._plot_ch = foxglove.Channel("/gato_view/plot", context=self.context, message_encoding="json",
                                         schema=foxglove.Schema(name="gato_view.TrackingSample", encoding="jsonschema",
                                                                data=json.dumps(plot_schema).encode()))
        self._raw: dict = {}
        self._raw_lock = threading.Lock()
        self._robot_msg = self._robot_update()
        view = self

        from foxglove.websocket import ServerListener

        class _Listener(ServerListener):
            def on_subscribe(self, client, channel):      # a new viewer: give it the meshes
                if channel.topic == "/gato_view/robot":
                    view._robot_ch.log(view._robot_msg)

        self._listener = _Listener()
        self.server = foxglove.start_server(name=name, host=host, port=int(port), context=self.context,
                                            server_listener=self._listener)
        self.port = self.server.port
        self.url = f"ws://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.port}"
        self._last_plot_t = None

    def _tr(self, T=None):
        """(Vector3, Quaternion) of a 4x4 placement (identity when None)."""
        sc = self._sc
        if T is None:
            return sc.Vector3(x=0.0, y=0.0, z=0.0), sc.Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)
        w, x, y, z = _wxyz(T[:3, :3])
        p = T[:3, 3]
        return (sc.Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                sc.Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)))

    def _pose(self, T=None):
        t, r = self._tr(T)
        return self._sc.Pose(position=t, orientation=r)

    def _robot_update(self):
        sc = self._sc
        ents = []
        for v in self.geometry.visuals:
            color = sc.Color(r=float(v.rgba[0]), g=float(v.rgba[1]), b=float(v.rgba[2]), a=float(v.rgba[3]))
            kw = {}
            if v.mesh_path.lower().endswith(".stl"):
                kw["models"] = [sc.ModelPrimitive(pose=self._pose(), color=color, override_color=True,
                                                  media_type="model/stl", data=open(v.mesh_path, "rb").read(),
                                                  scale=sc.Vector3(x=1.0, y=1.0, z=1.0))]
            else:
                pts = v.vertices[v.faces.reshape(-1)]
                kw["triangles"] = [sc.TriangleListPrimitive(pose=self._pose(), color=color, points=[
                    sc.Point3(x=float(a), y=float(b), z=float(c)) for a, b, c in pts])]
            ents.append(sc.SceneEntity(frame_id=f"gato_view/{v.name}", id=f"robot/{v.name}", frame_locked=True, **kw))
        return sc.SceneUpdate(entities=ents)

    @staticmethod
    def _points(sc, path):
        return [sc.Point3(x=float(a), y=float(b), z=float(c)) for a, b, c in np.asarray(path).reshape(-1, 3)]

    def watched(self) -> bool:
        """Whether a client subscribes to one of the scene channels (none: no scene to build)."""
        return any(ch.has_sinks() for ch in (self._tf_ch, self._scene_ch, self._plot_ch))

    def draw(self, fr: ViewFrame) -> None:
        sc = self._sc
        stamp = None
        if fr.t is not None:
            sec = int(fr.t)
            stamp = sc.Timestamp(sec=sec, nsec=int(round((fr.t - sec) * 1e9)) % 1_000_000_000)
        if fr.link_poses is not None:
            tfs = []
            for v, T in zip(self.geometry.visuals, fr.link_poses):
                tr, rot = self._tr(T)
                tfs.append(sc.FrameTransform(timestamp=stamp, parent_frame_id="world",
                                             child_frame_id=f"gato_view/{v.name}", translation=tr, rotation=rot))
            self._tf_ch.log(sc.FrameTransforms(transforms=tfs))
        ents = []

        def strip(ident, path, rgb, thickness, kind=None):
            if path is None or len(path) == 0:
                return
            color = sc.Color(r=rgb[0] / 255, g=rgb[1] / 255, b=rgb[2] / 255, a=1.0)
            line = sc.LinePrimitive(type=kind or sc.LinePrimitiveLineType.LineStrip, pose=self._pose(),
                                    thickness=thickness, scale_invariant=True, points=self._points(sc, path),
                                    color=color)
            ents.append(sc.SceneEntity(timestamp=stamp, frame_id="world", id=ident, lines=[line]))

        strip("plan", fr.plan_path, PLAN_RGB, 5.0)
        strip("reference", fr.reference, REFERENCE_RGB, 4.0)
        strip("skeleton", fr.skeleton, (60, 60, 60), 2.0)
        if fr.batch_paths:
            strip("batch", np.concatenate([_segments(p) for p in fr.batch_paths]).reshape(-1, 3), BATCH_RGB, 2.0,
                  sc.LinePrimitiveLineType.LineList)
        self._scene_ch.log(sc.SceneUpdate(entities=ents))
        t = fr.plot.get("t")
        if t is not None and len(t) and t[-1] != self._last_plot_t:
            self._last_plot_t = t[-1]
            e, s = fr.plot["error_mm"][-1], fr.plot["solve_ms"][-1]
            o = fr.plot["orientation_deg"][-1] if "orientation_deg" in fr.plot else np.nan
            self._plot_ch.log({"t": float(t[-1]), "error_mm": float(e) if np.isfinite(e) else None,
                               "solve_ms": float(s) if np.isfinite(s) else None,
                               "orientation_deg": float(o) if np.isfinite(o) else None})

    def publish_raw(self, topic: str, type_name: str, schema_text: str, data: bytes, log_time_ns: int) -> None:
        """Forward one serialized (CDR) ROS message of ``type_name`` (e.g. ``sensor_msgs/msg/JointState``,
        ``schema_text`` its ros2msg definition); the topic is advertised at its first message."""
        ch = self._raw.get(topic)
        if ch is None:
            with self._raw_lock:
                ch = self._raw.get(topic)
                if ch is None:
                    schema = self._fg.Schema(name=type_name, encoding="ros2msg", data=schema_text.encode())
                    ch = self._fg.Channel(topic, schema=schema, message_encoding="cdr", context=self.context)
                    self._raw[topic] = ch
        ch.log(bytes(data), log_time=int(log_time_ns))

    def close(self) -> None:
        self.server.stop()
