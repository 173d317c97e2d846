"""The live view's logic, without ROS and without a renderer: what the browser view and the
Foxglove channel draw, computed from the controller graph's messages.

:class:`RobotGeometry` holds the robot's URDF visuals (meshes and primitives, loaded once)
and its kinematics (pinocchio): link placements at a joint configuration, the EE position.
:class:`ViewLogic` takes the latest joint state, plan, step result (the batch's rows),
reference window and controller status as they arrive (cheap: it only stores them) and
computes a :class:`ViewFrame` when the renderer asks for one (at the view's own rate, in the
view's own process: nothing here runs on the control path). The scrolling plot's samples
(EE tracking error, solve time) are taken once per new joint state seen by :meth:`frame`.

Units: positions in metres (world frame of the URDF), joint positions in rad, times in
seconds (stamps in integer ns on the graph's clock: simulated time in the sim bringup).
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:                      # annotations only: the value types come with the messages
    from .types import JointStateSample, Plan, ReferenceWindow

__all__ = ["Visual", "RobotGeometry", "decimate", "ViewFrame", "ViewLogic", "PLOT_WINDOW_S"]

#: seconds of history in the scrolling plot
PLOT_WINDOW_S = 10.0
#: triangles per visual sent to the page (more are merged away: :func:`decimate`)
MAX_FACES_PER_VISUAL = 6000
#: reference windows kept to find the one of the state drawn (a lockstep world runs ahead of the view)
REFERENCE_HISTORY = 500
#: at most this many batch rows are drawn besides the winning plan (FK cost per frame)
MAX_BATCH_PATHS = 16


@dataclass
class Visual:
    """One visual element of the URDF: a triangle mesh in its own frame.

    ``vertices`` (V, 3) float32 [m] (mesh scale applied), ``faces`` (F, 3) uint32,
    ``rgba`` (4,) in [0, 1]; ``mesh_path``: the mesh file ("" for a primitive);
    ``name``: the geometry's name (unique). Meshes above :data:`MAX_FACES_PER_VISUAL` triangles
    are decimated (:func:`decimate`); ``mesh_path`` still names the full-resolution file."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    rgba: np.ndarray
    mesh_path: str = ""


def _primitive_mesh(geometry):
    """(vertices, faces) of a coal / hpp-fcl primitive (sphere, box, cylinder, capsule), or None."""
    import trimesh

    kind = type(geometry).__name__
    if kind == "Sphere":
        m = trimesh.creation.icosphere(subdivisions=2, radius=float(geometry.radius))
    elif kind == "Box":
        m = trimesh.creation.box(extents=2.0 * np.asarray(geometry.halfSide, dtype=float))
    elif kind == "Cylinder":
        m = trimesh.creation.cylinder(radius=float(geometry.radius), height=2.0 * float(geometry.halfLength))
    elif kind == "Capsule":
        m = trimesh.creation.capsule(radius=float(geometry.radius), height=2.0 * float(geometry.halfLength))
    else:
        return None
    return m.vertices, m.faces


def decimate(vertices: np.ndarray, faces: np.ndarray, max_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """A lighter copy of a triangle mesh by vertex clustering: vertices merged on a grid (cell
    coarsened until at most ``max_faces`` faces remain), collapsed and repeated triangles dropped.
    The page renders every frame in the browser (software WebGL on a robot's computer without a
    GPU): a 240k-triangle arm drew at about one frame per second on 2 loaded cores."""
    v = np.asarray(vertices, dtype=float)
    f = np.asarray(faces, dtype=np.int64)
    if f.shape[0] <= max_faces:
        return v, f
    # a cell whose square tiles the surface with about max_faces / 2 vertices (a triangle mesh has
    # about twice as many faces as vertices), then coarser until the budget holds
    tri_v = v[f]
    area = 0.5 * float(np.linalg.norm(np.cross(tri_v[:, 1] - tri_v[:, 0], tri_v[:, 2] - tri_v[:, 0]), axis=1).sum())
    cell = max(np.sqrt(area / max(max_faces / 2, 1)), 1e-5)
    lo = v.min(0)
    while True:
        key = np.floor((v - lo) / cell).astype(np.int64)          # < 2**20 per axis for cell >= size / 1e6
        flat = (key[:, 0] << 42) | (key[:, 1] << 21) | key[:, 2]
        _, inv, counts = np.unique(flat, return_inverse=True, return_counts=True)
        nv = np.zeros((counts.size, 3))
        np.add.at(nv, inv, v)
        nv /= counts[:, None]
        tri = inv[f]
        tri = tri[(tri[:, 0] != tri[:, 1]) & (tri[:, 1] != tri[:, 2]) & (tri[:, 0] != tri[:, 2])]
        srt = np.sort(tri, axis=1)
        _, first = np.unique((srt[:, 0] << 42) | (srt[:, 1] << 21) | srt[:, 2], return_index=True)
        nf = tri[np.sort(first)]              # each triangle once, its first orientation kept
        if nf.shape[0] <= max_faces or cell > 1.0:
            return nv, nf
        cell *= 1.3


class RobotGeometry:
    """A registered robot's visuals and kinematics.

    ``robot``: a registered plant name (``gato.robot_info``) or a URDF path. Meshes are read
    from the URDF's folder (the gato_description layout: paths relative to the URDF); a
    visual whose mesh file is missing is left out (``missing`` names it) and the kinematic
    skeleton (joint origins, :meth:`skeleton`) is drawn in any case.
    """

    def __init__(self, robot: str, ee_frame: str | None = None):
        import pinocchio as pin
        from gato.robots.registry import robot_info, robot_urdf

        self._pin = pin
        try:
            info = robot_info(robot)
            urdf = str(robot_urdf(robot))
            self.joint_names = [str(j) for j in info["joints"]]
            ee = ee_frame or str(info.get("ee_frame", "EE"))
        except Exception as e:                     # not registered: a URDF path
            if not Path(robot).is_file():
                raise ValueError(f"robot: {robot!r} is neither a registered robot nor a URDF file ({e})") from e
            urdf, ee, self.joint_names = str(Path(robot).resolve()), ee_frame or "EE", None
        self.urdf = urdf
        self.model = pin.buildModelFromUrdf(urdf)
        if self.joint_names is None:
            self.joint_names = [str(n) for n in self.model.names[1:]]
        if self.model.nq != len(self.joint_names):
            raise ValueError(f"robot: {robot!r} has nq = {self.model.nq}, the view supports fixed-base arms "
                             f"with one coordinate per joint ({len(self.joint_names)} joints)")
        self.data = self.model.createData()
        if not self.model.existFrame(ee):
            raise ValueError(f"ee_frame: {ee!r} is not a frame of {urdf}")
        self.ee_frame = ee
        self._ee_id = self.model.getFrameId(ee)
        # model index of each joint name (the q vector's order is the model's)
        self._q_index = {n: self.model.idx_qs[self.model.getJointId(n)] for n in self.joint_names}
        self.visuals, self.missing = [], []
        gmodel, self.geometry_type = None, ""
        # the URDF's visuals; the shipped arms other than iiwa14 carry collision meshes only
        for kind in ("VISUAL", "COLLISION"):
            try:
                gm = pin.buildGeomFromUrdf(self.model, urdf, getattr(pin.GeometryType, kind),
                                           package_dirs=[str(Path(urdf).parent)])
            except ValueError as e:          # a mesh file that is not there
                self.missing.append(f"{kind.lower()} geometry ({e})")
                continue
            if gm.ngeoms:
                gmodel, self.geometry_type = gm, kind.lower()
                break
        if gmodel is None:
            gmodel = pin.GeometryModel()
        self._gmodel, self._gdata = gmodel, pin.GeometryData(gmodel)
        self._geom_ids = []
        for i, g in enumerate(gmodel.geometryObjects):
            verts_faces = self._load(g)
            if verts_faces is None:
                self.missing.append(f"{g.name} ({g.meshPath or type(g.geometry).__name__})")
                continue
            v, f = decimate(*verts_faces, MAX_FACES_PER_VISUAL)
            rgba = np.asarray(g.meshColor, dtype=float).reshape(-1)
            if rgba.size != 4 or not np.all(np.isfinite(rgba)) or np.allclose(rgba[:3], 0.9, atol=0.11):
                rgba = np.array([0.93, 0.45, 0.12, 1.0])      # pinocchio's default grey: use the gato orange
            self.visuals.append(Visual(g.name, np.asarray(v, np.float32), np.asarray(f, np.uint32), rgba,
                                       g.meshPath if Path(g.meshPath).is_file() else ""))
            self._geom_ids.append(i)

    @staticmethod
    def _load(g):
        """(vertices, faces) of one pinocchio GeometryObject, scaled, or None."""
        path = Path(g.meshPath) if g.meshPath else None
        if path is not None and path.is_file():
            import trimesh

            m = trimesh.load(str(path), force="mesh", process=False)
            return np.asarray(m.vertices) * np.asarray(g.meshScale, dtype=float), np.asarray(m.faces)
        return _primitive_mesh(g.geometry)

    # ------------------------------------------------------------ kinematics
    def q_from(self, names, position) -> np.ndarray:
        """Model-order q (nq,) [rad] from named positions (any order, extra names ignored).
        Raises ValueError naming a missing joint or a non-finite value."""
        idx = {str(n): i for i, n in enumerate(names)}
        position = np.asarray(position, dtype=float).reshape(-1)
        q = np.zeros(self.model.nq)
        for n, k in self._q_index.items():
            i = idx.get(n)
            if i is None or i >= position.size:
                raise ValueError(f"joint {n!r} missing from the joint state ({list(names)})")
            q[k] = position[i]
        if not np.all(np.isfinite(q)):
            raise ValueError("non-finite joint position")
        return q

    def link_poses(self, q: np.ndarray) -> np.ndarray:
        """(len(visuals), 4, 4) world placements of the visuals at ``q`` (model order)."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateGeometryPlacements(self.model, self.data, self._gmodel, self._gdata)
        return np.stack([self._gdata.oMg[i].homogeneous for i in self._geom_ids]) if self._geom_ids \
            else np.zeros((0, 4, 4))

    def skeleton(self) -> np.ndarray:
        """(njoints, 3) joint origins [m] of the last :meth:`link_poses` / :meth:`ee_positions` call's
        configuration (the universe's origin first), then the EE frame's origin."""
        pts = [self.data.oMi[j].translation.copy() for j in range(self.model.njoints)]
        self._pin.updateFramePlacement(self.model, self.data, self._ee_id)
        pts.append(self.data.oMf[self._ee_id].translation.copy())
        return np.asarray(pts)

    def ee_rotation(self) -> np.ndarray:
        """(3, 3) world rotation of the EE frame at the last :meth:`skeleton` call's configuration."""
        return np.array(self.data.oMf[self._ee_id].rotation, dtype=float)

    def ee_positions(self, qs: np.ndarray) -> np.ndarray:
        """(K, 3) EE frame origins [m] at the rows of ``qs`` (K, nq), model order."""
        pin = self._pin
        qs = np.atleast_2d(np.asarray(qs, dtype=float))
        out = np.empty((qs.shape[0], 3))
        for k, q in enumerate(qs):
            pin.forwardKinematics(self.model, self.data, q)
            out[k] = pin.updateFramePlacement(self.model, self.data, self._ee_id).translation
        return out


@dataclass
class ViewFrame:
    """What the renderers draw, at one moment.

    ``t``: stamp of the joint state drawn [s] (None before the first); ``q`` (nq,) [rad];
    ``link_poses`` (G, 4, 4) world placements of :attr:`RobotGeometry.visuals`;
    ``skeleton`` (J, 3) joint origins then the EE [m]; ``ee`` (3,) [m];
    ``plan_path`` (N, 3) the current plan's EE positions per knot (None: no plan yet);
    ``batch_paths`` list of (N, 3): the other batch rows of the latest step (hypotheses);
    ``reference`` (K, 3) the latest reference window's targets [m] (None before the first);
    ``plot``: dict of equal-length arrays ``t`` [s], ``error_mm`` (EE - reference at the
    state's time), ``orientation_deg`` (the angle of R_ref^T R_ee at that time, the window's
    slerp; NaN on position-only windows; issue 30) and ``solve_ms`` (the controller's last MPC
    step time) over the last
    :data:`PLOT_WINDOW_S`; ``info``: counters and the controller's state for the text panel;
    ``seq``: increases with every frame computed."""

    seq: int
    t: float | None = None
    q: np.ndarray | None = None
    link_poses: np.ndarray | None = None
    skeleton: np.ndarray | None = None
    ee: np.ndarray | None = None
    plan_path: np.ndarray | None = None
    batch_paths: list = field(default_factory=list)
    reference: np.ndarray | None = None
    plot: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


class ViewLogic:
    """The latest inputs and the frames drawn from them (thread-safe: the ``on_*`` methods may be
    called from a subscription thread while :meth:`frame` runs in the render thread).

    ``geometry``: the robot (:class:`RobotGeometry`). Bad input (a joint state without one of the
    robot's joints, NaN, a plan of another robot) is counted in ``info['rejected']`` and ignored:
    the view never stops on what it is shown."""

    def __init__(self, geometry: RobotGeometry, plot_window_s: float = PLOT_WINDOW_S):
        if not plot_window_s > 0:
            raise ValueError(f"plot_window_s: must be > 0, got {plot_window_s!r}")
        self.geometry = geometry
        self.plot_window_s = float(plot_window_s)
        self._lock = threading.Lock()
        self._js: JointStateSample | None = None
        self._plan: Plan | None = None
        self._batch = None                # (xu (B, S), nx, nu, N, best_id)
        self._refs: deque = deque(maxlen=REFERENCE_HISTORY)   # the latest reference windows, oldest first
        self._status: dict = {}
        self._counts = {"joint_states": 0, "plans": 0, "step_results": 0, "references": 0, "rejected": 0}
        self._last_reject = ""
        self._plot = deque()              # (t, error_mm, solve_ms, orientation_deg)
        self._last_js_stamp = None
        self._seq = 0
        self._good = (None, None)         # (the last joint state the view could read, its q)
        self._examined = None             # the last joint state frame() looked at
        self._plan_cache = (None, None)   # (plan object, path)
        self._batch_cache = (None, [])

    # ------------------------------------------------------------ inputs (cheap: stored only)
    def on_joint_state(self, js: JointStateSample) -> None:
        with self._lock:
            self._js = js
            self._counts["joint_states"] += 1

    def on_plan(self, plan: Plan) -> None:
        with self._lock:
            self._plan = plan
            self._counts["plans"] += 1

    def on_step_result(self, xu_batch: np.ndarray, nx: int, nu: int, n_knots: int, best_id: int) -> None:
        """The latest step's batched solve: ``xu_batch`` (B, S) rows laid out like a plan."""
        with self._lock:
            self._batch = (np.asarray(xu_batch, dtype=float), int(nx), int(nu), int(n_knots), int(best_id))
            self._counts["step_results"] += 1

    def on_reference(self, window: ReferenceWindow) -> None:
        with self._lock:
            self._refs.append(window)
            self._counts["references"] += 1

    @staticmethod
    def _window_at(refs, stamp_ns: int):
        """The newest window stamped at or before ``stamp_ns`` (the one the controller tracked at that
        state: a lockstep world runs ahead of the view, so the newest window may be a later tick's),
        else the oldest one kept."""
        for w in reversed(refs):
            if w.stamp_ns <= stamp_ns:
                return w
        return refs[0] if refs else None

    def on_status(self, state: str, solve_us: float, deadline_misses: int, ticks: int, reason: str = "") -> None:
        with self._lock:
            self._status = {"state": str(state), "solve_us": float(solve_us), "deadline_misses": int(deadline_misses),
                            "ticks": int(ticks), "reason": str(reason)}

    def reject(self, what: str) -> None:
        """Count an input the node could not convert (named in ``info['last_rejected']``)."""
        with self._lock:
            self._counts["rejected"] += 1
            self._last_reject = str(what)

    # ------------------------------------------------------------ the frame
    def _path(self, xu: np.ndarray, nx: int, nu: int, n_knots: int, names) -> np.ndarray:
        """(n_knots, 3) EE positions along one trajectory row (q = the first nq of each state)."""
        s = nx + nu
        states = np.stack([xu[k * s:k * s + nx] for k in range(n_knots)])
        nq = self.geometry.model.nq
        if names is not None and list(names) != list(self.geometry.joint_names):
            qs = np.stack([self.geometry.q_from(names, st[:len(names)]) for st in states])
        else:
            qs = states[:, :nq]
        return self.geometry.ee_positions(qs)

    def frame(self) -> ViewFrame:
        """The frame of the latest inputs (forward kinematics of the state, the plan and the batch rows;
        one plot sample per new joint state)."""
        with self._lock:
            js, plan, batch, status = self._js, self._plan, self._batch, dict(self._status)
            refs = list(self._refs)
        self._seq += 1
        fr = ViewFrame(seq=self._seq)
        g = self.geometry
        if js is not None and js is not self._examined:
            self._examined = js
            try:
                self._good = (js, g.q_from(js.names, js.position))
            except ValueError as e:          # drawn at the last good state
                self.reject(f"joint state: {e}")
        good_js, q = self._good
        if q is not None:
            fr.t, fr.q = good_js.stamp_ns * 1e-9, q
            fr.link_poses = g.link_poses(q)
            fr.skeleton = g.skeleton()
            fr.ee = fr.skeleton[-1].copy()
        if plan is not None:
            if self._plan_cache[0] is not plan:
                try:
                    path = self._path(plan.xu, plan.nx, plan.nu, plan.n_knots, plan.joint_names)
                except ValueError as e:
                    self.reject(f"plan: {e}")
                    path = None
                self._plan_cache = (plan, path)
            fr.plan_path = self._plan_cache[1]
        if batch is not None:
            if self._batch_cache[0] is not batch:
                xu, nx, nu, n_knots, best = batch
                names = plan.joint_names if plan is not None else None
                rows = [b for b in range(xu.shape[0]) if b != best][:MAX_BATCH_PATHS]
                try:
                    paths = [self._path(xu[b], nx, nu, n_knots, names) for b in rows]
                except ValueError as e:
                    self.reject(f"step result: {e}")
                    paths = []
                self._batch_cache = (batch, paths)
            fr.batch_paths = self._batch_cache[1]
        ref = self._window_at(refs, good_js.stamp_ns) if good_js is not None else (refs[-1] if refs else None)
        if ref is not None:
            fr.reference = np.asarray(ref.positions, dtype=float).reshape(-1, 3)
        if fr.t is not None and good_js.stamp_ns != self._last_js_stamp:
            self._last_js_stamp = good_js.stamp_ns
            err = rot = np.nan
            if ref is not None:
                target = ref.sample(good_js.stamp_ns, 1, 0.0)[0]
                err = 1e3 * float(np.linalg.norm(fr.ee - target))
                r_ref = ref.sample_orientations(good_js.stamp_ns, 1, 0.0)
                if r_ref is not None:
                    pin = g._pin
                    rot = float(np.degrees(np.linalg.norm(pin.log3(pin.exp3(r_ref[0]).T @ g.ee_rotation()))))
            solve_ms = status.get("solve_us", np.nan) * 1e-3 if status else np.nan
            if self._plot and fr.t < self._plot[-1][0]:
                self._plot.clear()          # the clock went back (a new run): start the plot again
            self._plot.append((fr.t, err, solve_ms, rot))
            while self._plot and self._plot[0][0] < fr.t - self.plot_window_s:
                self._plot.popleft()
        arr = np.asarray(self._plot, dtype=float).reshape(-1, 4)
        fr.plot = {"t": arr[:, 0], "error_mm": arr[:, 1], "solve_ms": arr[:, 2], "orientation_deg": arr[:, 3]}
        with self._lock:                     # counts again: this frame may have rejected an input
            counts, last_reject = dict(self._counts), self._last_reject
        fr.info = dict(counts, last_rejected=last_reject, **status)
        return fr
