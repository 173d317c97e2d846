"""Simulation worlds for closed-loop experiments: one ``step`` interface, two simulators.

A closed-loop harness advances the plant one sensor-rate substep at a time::

    q_next, dq_next = world.step(q, dq, u, sim_dt)

q (nq,) rad, dq (nv,) rad/s, u (nv,) N*m joint torques held over sim_dt [s].
The caller's state is authoritative: each step starts from the (q, dq) given,
so a harness may inject disturbances between steps.

- :class:`PinocchioWorld`: pinocchio ``aba`` with RK4, the solver's own model
  (the same URDF through the same library), plus an optional pendulum payload
  hanging from the end effector and an optional constant world-frame wrench.
- :class:`MuJoCoWorld`: an INDEPENDENT simulator: the same URDF loaded by
  MuJoCo (``MjSpec``), MuJoCo's integrator and contact solver, an optional
  finite table. That its rigid-body model is the solver's is a test gate:
  ``gato.fingerprint.check(world.qdd, plant)`` (test/test_worlds.py).
- Both worlds take ``mass_scale={URDF link: factor}``: a model error (that link's mass
  and rotational inertia scaled, COM unchanged) in the world's model only, for
  model-vs-reality experiments against the nominal solver model.
- :func:`probe_tip_drop`: the height of a reference point (e.g. the EE frame
  origin) above the robot's lowest contact point, probed with MuJoCo's
  collision checker.

MuJoCo details this module encodes:

- a URDF's ``<mujoco><compiler meshdir=...>`` block may point at a directory
  that does not exist; mesh files are resolved against the URDF's own folder
  (then that meshdir, then ``package://`` roots above it) and written back as
  absolute paths with ``spec.meshdir = ""``;
- MuJoCo does not filter contacts between a world-welded base and its child
  link (the parent filter skips the world body): intersecting base/link-1
  meshes give phantom self-contacts that corrupt the dynamics. Robot geoms get
  contype=1/conaffinity=2 and the table contype=2/conaffinity=1: robot-robot
  pairs never collide, robot-table pairs do;
- joint damping, armature and frictionloss are zeroed and URDF position limits
  are not enforced, so the contact-free dynamics equal pinocchio's ``aba``
  (limits are graded by the harness, not imposed by the plant);
- fixed links stay separate bodies (``fusestatic`` off), so contact reports
  name URDF links; massless links are allowed and do not change the dynamics.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .common import world_wrench_to_joint_local

__all__ = ["MuJoCoWorld", "PinocchioWorld", "probe_tip_drop"]

ROBOT_CONTYPE, ROBOT_CONAFFINITY = 1, 2
TABLE_CONTYPE, TABLE_CONAFFINITY = 2, 1
_PLANE_DEFAULTS = dict(friction=0.6, pos_xy=(0.6, 0.2), size_xy=(0.25, 0.25), thickness=0.05)
_INTEGRATORS = ("euler", "rk4", "implicitfast")


# ----------------------------------------------------------------- validation
def _state_arg(x, name: str, n: int) -> np.ndarray:
    a = np.array(x, dtype=np.float64).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {np.shape(x)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or Inf ({a})")
    return a


def _check_dt(sim_dt, timestep) -> float:
    if isinstance(sim_dt, bool) or not isinstance(sim_dt, (int, float, np.floating)) \
            or not math.isfinite(sim_dt) or sim_dt <= 0:
        raise ValueError(f"sim_dt: expected a finite step > 0 s, got {sim_dt!r}")
    if timestep is not None and abs(float(sim_dt) - timestep) > 1e-12 * timestep:
        raise ValueError(f"sim_dt: {sim_dt!r} s does not match the world's timestep {timestep!r} s "
                         "(construct the world with timestep=sim_dt)")
    return float(sim_dt)


def _sha256(path) -> str:
    from .robots import sha256_file

    return sha256_file(path)


def _stamp(kind: str, urdf_path, mass_scale: dict, **fields) -> dict:
    """A world's protocol stamp: kind, URDF name and hash, ``fields``, and the mass scale only
    when there is one (so nominal stamps are unchanged)."""
    extra = dict(mass_scale=dict(mass_scale)) if mass_scale else {}
    return dict(kind=kind, urdf=Path(urdf_path).name, urdf_sha256=_sha256(urdf_path), **fields, **extra)


# ---------------------------------------------------------------- model errors
_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _urdf_inertial_links(urdf_path) -> tuple[list, set]:
    """(every <link> name of the URDF in file order, the names that carry an <inertial> with a <mass>)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(str(urdf_path)).getroot()
    names, massive = [], set()
    for link in root.findall("link"):
        names.append(link.get("name"))
        if link.find("inertial/mass") is not None:
            massive.add(link.get("name"))
    return names, massive


def _check_mass_scale(mass_scale, urdf_path) -> dict:
    """Validated {URDF link name: factor (float, finite, > 0)}; {} for None / empty.

    ValueError names a link that is not in the URDF (listing the URDF's links), a link
    without an <inertial> (scaling it would change nothing) and a factor that is not a
    finite number > 0."""
    if mass_scale is None:
        return {}
    if not isinstance(mass_scale, dict):
        raise ValueError(f"mass_scale: expected None or a dict {{URDF link name: factor}}, got {mass_scale!r}")
    if not mass_scale:
        return {}
    links, massive = _urdf_inertial_links(urdf_path)
    out = {}
    for name, f in mass_scale.items():
        if name not in links:
            raise ValueError(f"mass_scale: link {name!r} is not in {Path(urdf_path).name}; its links are "
                             f"{', '.join(links)}")
        if name not in massive:
            raise ValueError(f"mass_scale: link {name!r} has no <inertial> mass in {Path(urdf_path).name} "
                             f"(links with a mass: {', '.join(n for n in links if n in massive)})")
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) \
                or not math.isfinite(f) or f <= 0:
            raise ValueError(f"mass_scale: factor for link {name!r} must be a finite number > 0, got {f!r}")
        out[str(name)] = float(f)
    return out


def _scaled_urdf_xml(urdf_path, mass_scale: dict) -> str:
    """The URDF text with each scaled link's <mass> and <inertia> (about the COM, in the
    inertial frame) multiplied by its factor; <origin> (the COM) unchanged."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(str(urdf_path))
    for link in tree.getroot().findall("link"):
        f = mass_scale.get(link.get("name"))
        if f is None:
            continue
        mass = link.find("inertial/mass")
        mass.set("value", repr(float(mass.get("value")) * f))
        inertia = link.find("inertial/inertia")
        if inertia is not None:
            for k in _INERTIA_KEYS:
                if inertia.get(k) is not None:
                    inertia.set(k, repr(float(inertia.get(k)) * f))
    return ET.tostring(tree.getroot(), encoding="unicode")


# ---------------------------------------------------------------- MuJoCo model
def _resolve_mesh(file: str, urdf_dir: Path, meshdir: str) -> str:
    if file.startswith("package://"):
        pkg, _, rest = file[len("package://"):].partition("/")
        cands = [urdf_dir / rest] + [p / pkg / rest for p in [urdf_dir, *urdf_dir.parents]]
    elif os.path.isabs(file):
        cands = [Path(file)]
    else:
        cands = [urdf_dir / file]
        if meshdir:
            cands.append((urdf_dir / meshdir / file) if not os.path.isabs(meshdir) else Path(meshdir) / file)
    for c in cands:
        if c.is_file():
            return str(c.resolve())
    raise FileNotFoundError(f"mesh {file!r} of {urdf_dir}: not found (tried {[str(c) for c in cands]})")


def _build_spec(urdf_path, plane, timestep, floating, integrator, mass_scale=None):
    """MjSpec of the URDF with the masks/zeroing described in the module docstring, plus the table;
    ``mass_scale`` ({link: factor}, validated) scales those bodies' mass and inertia about the COM."""
    import mujoco

    path = Path(urdf_path).resolve()
    if not path.is_file():
        raise ValueError(f"urdf_path: file not found: {path}")
    spec = mujoco.MjSpec.from_file(str(path))
    spec.compiler.fusestatic = False
    meshdir = spec.meshdir
    for mesh in spec.meshes:
        mesh.file = _resolve_mesh(mesh.file, path.parent, meshdir)
    spec.meshdir = ""
    for name, f in (mass_scale or {}).items():
        body = spec.body(name)
        if body is None:
            raise ValueError(f"mass_scale: link {name!r} is not a MuJoCo body of {path.name}")
        body.mass = body.mass * f
        full = np.asarray(body.fullinertia, dtype=np.float64)
        if np.all(np.isfinite(full)):  # the URDF's full tensor (it overrides inertia / iquat when set)
            body.fullinertia = full * f
        body.inertia = np.asarray(body.inertia, dtype=np.float64) * f
    for j in spec.joints:
        j.damping = np.zeros(3)  # MuJoCo >= 4 stores damping (and stiffness) as 3-vectors
        j.stiffness = np.zeros(3)
        j.armature = 0.0
        j.frictionloss = 0.0
        j.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    for g in spec.geoms:
        g.contype, g.conaffinity = ROBOT_CONTYPE, ROBOT_CONAFFINITY
    if floating:
        root = spec.worldbody.first_body()
        if root is None:
            raise ValueError(f"urdf_path: {path.name} has no robot body to float")
        root.add_freejoint()
    spec.option.timestep = float(timestep)
    spec.option.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4,
                              "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}[integrator]
    # A diverging state raises here instead of being silently reset to qpos0.
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
    if plane is None:
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    else:
        half_t = plane["thickness"] / 2
        spec.worldbody.add_geom(
            name="table", type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[plane["size_xy"][0], plane["size_xy"][1], half_t],
            pos=[plane["pos_xy"][0], plane["pos_xy"][1], plane["z"] - half_t],
            contype=TABLE_CONTYPE, conaffinity=TABLE_CONAFFINITY,
            friction=[plane["friction"], 0.005, 0.0001])
    return spec


def _normalize_plane(plane):
    if plane is None:
        return None
    if not isinstance(plane, dict) or "z" not in plane:
        raise ValueError(f"plane: expected None or a dict with 'z' (table top height, m), got {plane!r}")
    unknown = set(plane) - {"z", *_PLANE_DEFAULTS}
    if unknown:
        raise ValueError(f"plane: unknown keys {sorted(unknown)}; expected z, {', '.join(_PLANE_DEFAULTS)}")
    p = {**_PLANE_DEFAULTS, **plane}
    out = dict(z=float(p["z"]), friction=float(p["friction"]), pos_xy=tuple(float(x) for x in p["pos_xy"]),
               size_xy=tuple(float(x) for x in p["size_xy"]), thickness=float(p["thickness"]))
    if len(out["pos_xy"]) != 2 or len(out["size_xy"]) != 2 or min(out["size_xy"]) <= 0 \
            or out["thickness"] <= 0 or out["friction"] < 0 or not all(
            math.isfinite(x) for x in (out["z"], out["friction"], out["thickness"], *out["pos_xy"], *out["size_xy"])):
        raise ValueError(f"plane: invalid table {out} (size_xy, thickness > 0; friction >= 0; finite)")
    return out


def _quat_xyzw_to_R(qx, qy, qz, qw) -> np.ndarray:
    return np.array([
        [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
        [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
        [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)]])


class MuJoCoWorld:
    """MuJoCo world: our URDF, an optional table, MuJoCo's integrator and contact solver.

    Args:
        urdf_path: the SAME URDF the solver / pinocchio use.
        plane: None = no contact geometry (contacts disabled). A dict adds a horizontal
            TABLE (a finite box: an infinite plane at EE height would swallow the robot
            base below it): {"z": top surface height [m]} plus optional "friction"
            (sliding coefficient, default 0.6), "pos_xy" (centre [m], default (0.6, 0.2)),
            "size_xy" (half-extents [m], default (0.25, 0.25)), "thickness" ([m], 0.05).
        timestep: MuJoCo integrator step [s]; ``step`` requires sim_dt == timestep.
        record_contact: also append every step's contact summary to ``contact_history``.
        floating: give the URDF's root body a free joint. States then use pinocchio's
            free-flyer convention (q = [p (3), quat xyzw (4), joints], v = [v_lin, omega]
            both in the base frame, u base rows a base-frame wrench) and are converted; u may
            also be the n_actuated joint torques alone. A base wrench is rotated to the world
            at the step's start and held there over the step (pinocchio would hold it in the
            base frame).
        integrator: keyword only; "euler" (MuJoCo's semi-implicit Euler, default),
            "rk4" or "implicitfast".
        mass_scale: keyword only; None or {URDF link name: factor}: a MODEL ERROR of the
            world. Each named link's mass and rotational inertia (about its COM) are
            multiplied by the factor, its COM stays where the URDF puts it, in this world's
            MuJoCo model only (whoever else loads the URDF - the solver - keeps the nominal
            model). ValueError for a link not in the URDF (the message lists the URDF's
            links), a link without an <inertial> mass, or a factor that is not a finite
            number > 0. Recorded in :attr:`params` (when not empty).

    ``step`` resets MuJoCo's data (warm starts, contact caches) before writing the
    caller's state, so the same (q, dq, u) sequence gives the same trajectory.
    ``last_contact`` after each step: {"ncon", "fn" (total world-z force on the robot
    from the table, N), "ft" (magnitude of the total horizontal force, N), "fn_by_body"
    (world-z force per robot link in contact, keyed by URDF link name)} - the forces
    MuJoCo applied during that step. No pendulum or constant wrench here: those are
    :class:`PinocchioWorld` features.
    """

    def __init__(self, urdf_path, plane=None, timestep=0.001, record_contact=False, floating=False, *,
                 integrator="euler", mass_scale=None):
        import mujoco

        if isinstance(timestep, bool) or not (isinstance(timestep, (int, float)) and math.isfinite(timestep)
                                               and timestep > 0):
            raise ValueError(f"timestep: expected a finite step > 0 s, got {timestep!r}")
        if integrator not in _INTEGRATORS:
            raise ValueError(f"integrator: expected one of {_INTEGRATORS}, got {integrator!r}")
        self._mj = mujoco
        self.urdf_path = str(Path(urdf_path).resolve())
        self.timestep = float(timestep)
        self.integrator = integrator
        self.floating = bool(floating)
        self.record_contact = bool(record_contact)
        self._plane = _normalize_plane(plane)
        if not Path(self.urdf_path).is_file():
            raise ValueError(f"urdf_path: file not found: {self.urdf_path}")
        self.mass_scale = _check_mass_scale(mass_scale, self.urdf_path)
        self._spec = _build_spec(self.urdf_path, self._plane, self.timestep, self.floating, integrator,
                                 self.mass_scale)
        self.model = self._spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.nq, self.nv = int(m.nq), int(m.nv)
        self.n_actuated = self.nv - (6 if self.floating else 0)
        self.joint_names = [m.joint(i).name for i in range(m.njnt) if m.jnt_type[i] != mujoco.mjtJoint.mjJNT_FREE]
        self._check_joint_order()
        self._table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table") if self._plane else -1
        self.contact_history: list[dict] = []
        self.last_contact = dict(ncon=0, fn=0.0, ft=0.0, fn_by_body={})
        self.time = 0.0

    def _check_joint_order(self) -> None:
        """qpos/qvel must be pinocchio's configuration order: compare joint names and sizes."""
        import pinocchio as pin

        pm = pin.buildModelFromUrdf(self.urdf_path)
        pin_joints = list(pm.names)[1:]
        if self.joint_names != pin_joints or self.nq - (7 if self.floating else 0) != pm.nq:
            raise ValueError(f"urdf_path: MuJoCo's joint order {self.joint_names} (nq {self.nq}) differs from "
                             f"pinocchio's {pin_joints} (nq {pm.nq}); this world assumes they are equal")

    # --------------------------------------------------------------- conventions
    def _to_mj(self, q, dq, u):
        if not self.floating:
            return q, dq, u
        R = _quat_xyzw_to_R(*q[3:7])
        qm = np.concatenate([q[:3], [q[6], q[3], q[4], q[5]], q[7:]])
        vm = np.concatenate([R @ dq[:3], dq[3:]])
        um = np.concatenate([R @ u[:3], u[3:]])
        return qm, vm, um

    def _from_mj(self, qm, vm):
        if not self.floating:
            return qm.copy(), vm.copy()
        qw, qx, qy, qz = qm[3:7]
        R = _quat_xyzw_to_R(qx, qy, qz, qw)
        return (np.concatenate([qm[:3], [qx, qy, qz, qw], qm[7:]]),
                np.concatenate([R.T @ vm[:3], vm[3:]]))

    def _inputs(self, q, dq, u):
        q = _state_arg(q, "q", self.nq)
        dq = _state_arg(dq, "dq", self.nv)
        ua = np.array(u, dtype=np.float64).reshape(-1)
        if self.floating and ua.shape == (self.n_actuated,):
            ua = np.concatenate([np.zeros(6), ua])
        u = _state_arg(ua, "u", self.nv)
        return q, dq, u

    def _load(self, q, dq, u):
        qm, vm, um = self._to_mj(q, dq, u)
        d = self.data
        self._mj.mj_resetData(self.model, d)
        d.time = self.time
        d.qpos[:] = qm
        d.qvel[:] = vm
        d.qfrc_applied[:] = um

    # --------------------------------------------------------------------- API
    def step(self, q, dq, u, sim_dt):
        """Advance one MuJoCo step from (q (nq,) rad, dq (nv,) rad/s) under u (nv,) N*m.

        u is applied as a joint-space force (``qfrc_applied``). Raises ValueError on
        NaN/Inf or misshaped arguments (naming the argument) and when sim_dt [s] is not the
        world's timestep; RuntimeError if MuJoCo reports a diverged acceleration.

        Returns (q_next (nq,), dq_next (nv,)) as fresh arrays.
        """
        _check_dt(sim_dt, self.timestep)
        q, dq, u = self._inputs(q, dq, u)
        self._load(q, dq, u)
        mj, d = self._mj, self.data
        mj.mj_step(self.model, d)
        if d.warning[mj.mjtWarning.mjWARN_BADQACC].number > 0 or not (
                np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            raise RuntimeError(f"MuJoCoWorld.step: the simulation diverged at t={self.time:.6f} s "
                               f"(q={q}, dq={dq}, u={u})")
        self.time += self.timestep
        self.last_contact = self._contacts()
        if self.record_contact:
            self.contact_history.append(self.last_contact)
        return self._from_mj(d.qpos, d.qvel)

    def qdd(self, q, dq, u):
        """Forward dynamics of the MuJoCo model (``mj_forward`` with ``qfrc_applied`` = u):
        q (nq,), dq (nv,), u (nv,) -> qdd (nv,) rad/s^2. Contacts included when a table is
        present. Floating base: the base linear rows are rotated into the base frame (exact
        at zero base velocity, the fingerprint's probes)."""
        q, dq, u = self._inputs(q, dq, u)
        self._load(q, dq, u)
        self._mj.mj_forward(self.model, self.data)
        a = self.data.qacc.copy()
        if self.floating:
            R = _quat_xyzw_to_R(*q[3:7])
            a[:3] = R.T @ a[:3]
        return a

    def _contacts(self) -> dict:
        d, m = self.data, self.model
        if self._table < 0 or d.ncon == 0:
            return dict(ncon=int(d.ncon), fn=0.0, ft=0.0, fn_by_body={})
        f6 = np.zeros(6)
        total = np.zeros(3)
        by_body: dict[str, float] = {}
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom[0]), int(c.geom[1])
            if self._table not in (g1, g2):
                continue
            self._mj.mj_contactForce(m, d, i, f6)
            # Contact frame rows: normal (geom1 -> geom2), tangents; the force acts on geom2.
            f_world = np.asarray(c.frame).reshape(3, 3).T @ f6[:3]
            robot_geom, sign = (g2, 1.0) if g1 == self._table else (g1, -1.0)
            f_robot = sign * f_world
            total += f_robot
            name = m.body(int(m.geom_bodyid[robot_geom])).name
            by_body[name] = by_body.get(name, 0.0) + float(f_robot[2])
        return dict(ncon=int(d.ncon), fn=float(total[2]), ft=float(np.hypot(total[0], total[1])),
                    fn_by_body=by_body)

    def reset(self) -> None:
        """Clear the world's clock and contact record (the state is the caller's)."""
        self.time = 0.0
        self.contact_history = []
        self.last_contact = dict(ncon=0, fn=0.0, ft=0.0, fn_by_body={})

    @property
    def params(self) -> dict:
        """World parameters for the protocol stamp (do not mix runs with different stamps)."""
        return _stamp("mujoco", self.urdf_path, self.mass_scale,
                      timestep=self.timestep, integrator=self.integrator, floating=self.floating,
                      plane=None if self._plane is None else dict(self._plane),
                      contact_masks=dict(robot=(ROBOT_CONTYPE, ROBOT_CONAFFINITY),
                                         table=(TABLE_CONTYPE, TABLE_CONAFFINITY)),
                      passive="damping/armature/frictionloss zeroed, joint limits not enforced",
                      mujoco=self._mj.__version__)


def probe_tip_drop(urdf_path, q, ref_point, span=0.2, iters=24, size_xy=(0.3, 0.3)) -> float:
    """Height [m] of ``ref_point`` above the robot's lowest CONTACT point at configuration q.

    The EE frame origin is generally not the tool tip: geometry placed relative to the
    frame starts the tool in collision. This bisects the highest top z of a horizontal
    table (a box of half-extents ``size_xy`` [m] centred under ref_point's xy, thick
    enough to fill the search window) that does NOT touch the robot at q, with the same
    collision model and masks as :class:`MuJoCoWorld`, and returns ref_point[2] - z.

    Args:
        urdf_path: robot URDF; q: (nq,) rad; ref_point: (3,) world point [m];
        span: search window below ref_point [m]; iters: bisection steps (resolution
        span / 2**iters).

    Raises ValueError when the robot already touches a table at ref_point[2] - span or
    does not touch one at ref_point[2] (the answer is outside [0, span]).
    """
    import mujoco

    ref = _state_arg(ref_point, "ref_point", 3)
    if not (span > 0 and int(iters) >= 1):
        raise ValueError(f"probe_tip_drop: span > 0 and iters >= 1 required (got {span}, {iters})")
    world = MuJoCoWorld(urdf_path, plane=dict(z=ref[2], pos_xy=ref[:2], size_xy=size_xy, thickness=span + 0.1))
    q = _state_arg(q, "q", world.nq)
    m, d = world.model, world.data
    half_t = (span + 0.1) / 2

    def touches(z_top: float) -> bool:
        m.geom_pos[world._table, 2] = z_top - half_t
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        return d.ncon > 0

    lo, hi = ref[2] - span, ref[2]
    if touches(lo):
        raise ValueError(f"probe_tip_drop: the robot reaches below ref_point - span ({lo:.4f} m); increase span")
    if not touches(hi):
        raise ValueError(f"probe_tip_drop: the robot's lowest contact point lies above ref_point ({hi:.4f} m)")
    for _ in range(int(iters)):
        mid = 0.5 * (lo + hi)
        if touches(mid):
            hi = mid
        else:
            lo = mid
    return float(ref[2] - lo)


# ---------------------------------------------------------------- pinocchio RK4
_PENDULUM_KEYS = {"mass", "length", "damping", "radius"}


class PinocchioWorld:
    """pinocchio ``aba`` + RK4: the solver's own rigid-body model, with optional disturbances.

    Args:
        urdf_path: robot URDF (fixed base).
        ee_frame: frame the pendulum hangs from and the constant wrench acts at (needed only
            when one of them is used; pass ``gato.robot_info(plant)["ee_frame"]``).
        substeps: RK4 steps per ``step`` call (each sim_dt / substeps long).
        pendulum: None, or {"mass" [kg], "length" [m], "damping" [N*m*s/rad, default 0],
            "radius" [m, default 0.02]}: a payload hanging from the EE frame, modelled as two
            revolute joints appended to the pinocchio model at the EE frame (about the
            frame's x, then the rotated y axis: a spherical-ish pendulum) carrying a solid
            sphere of that mass and radius whose centre is ``length`` from the pivot (the
            radius keeps ABA regular when the rod aligns with the first axis). The arm and
            the payload are integrated as one coupled system; the pendulum's state (2 angles,
            2 rates) lives in the world, starts hanging straight down (world -z) at rest
            relative to the EE at the first step after construction or :meth:`reset`, and is
            invisible to the caller, whose (q, dq) stay the arm's.
        constant_f_ext: None, or (6,) [force (3) N; torque (3) N*m], WORLD axes, acting at
            the EE frame origin. It is re-expressed in the EE parent joint's local frame
            (gato.common.world_wrench_to_joint_local) at every RK4 stage's configuration, so
            it stays world-constant while the arm moves.
        timestep: None (any sim_dt > 0) or the only sim_dt [s] ``step`` accepts.
        mass_scale: None or {URDF link name: factor}: a MODEL ERROR of the world. Each named
            link's mass and rotational inertia (about its COM) are multiplied by the factor,
            COM unchanged, in this world's pinocchio model only (built from the edited URDF
            text; the solver, which loads the URDF itself, keeps the nominal model). So this
            world is no longer "the solver's own model". ValueError for a link not in the URDF
            (the message lists the URDF's links), a link without an <inertial> mass, or a
            factor that is not a finite number > 0. Recorded in :attr:`params` (when not empty).
    """

    def __init__(self, urdf_path, *, ee_frame="EE", substeps=1, pendulum=None, constant_f_ext=None,
                 timestep=None, mass_scale=None):
        import pinocchio as pin

        self._pin = pin
        path = Path(urdf_path).resolve()
        if not path.is_file():
            raise ValueError(f"urdf_path: file not found: {path}")
        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) or substeps < 1:
            raise ValueError(f"substeps: expected an integer >= 1, got {substeps!r}")
        if timestep is not None and not (isinstance(timestep, (int, float)) and math.isfinite(timestep)
                                         and timestep > 0):
            raise ValueError(f"timestep: expected None or a finite step > 0 s, got {timestep!r}")
        self.urdf_path = str(path)
        self.substeps = int(substeps)
        self.timestep = None if timestep is None else float(timestep)
        self.ee_frame = ee_frame
        self.mass_scale = _check_mass_scale(mass_scale, self.urdf_path)
        if self.mass_scale:
            robot = pin.buildModelFromXML(_scaled_urdf_xml(self.urdf_path, self.mass_scale))
        else:
            robot = pin.buildModelFromUrdf(self.urdf_path)
        self.nq, self.nv = robot.nq, robot.nv
        self._fid = robot.getFrameId(ee_frame) if robot.existFrame(ee_frame) else None
        needs_ee = pendulum is not None or constant_f_ext is not None
        if needs_ee and self._fid is None:
            raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {path.name} (needed by the "
                             "pendulum / constant wrench)")
        self.pendulum = self._pendulum_cfg(pendulum)
        self.model = self._with_pendulum(robot) if self.pendulum else robot
        self.data = self.model.createData()
        self._pend = None  # (angles (2,), rates (2,)) once initialized
        self.set_constant_f_ext(constant_f_ext)

    @staticmethod
    def _pendulum_cfg(cfg):
        if cfg is None:
            return None
        if not isinstance(cfg, dict) or not {"mass", "length"} <= set(cfg) or set(cfg) - _PENDULUM_KEYS:
            raise ValueError(f"pendulum: expected a dict with mass, length [, damping, radius], got {cfg!r}")
        out = {"damping": 0.0, "radius": 0.02, **cfg}  # defaults, overridden by what cfg gives
        out = {k: float(v) for k, v in out.items()}
        if not (out["mass"] > 0 and out["length"] > 0 and out["radius"] > 0 and out["damping"] >= 0
                and all(math.isfinite(v) for v in out.values())):
            raise ValueError(f"pendulum: mass, length, radius must be > 0 and damping >= 0, got {out}")
        return out

    def _with_pendulum(self, robot):
        pin = self._pin
        model = pin.Model(robot)
        frame = model.frames[self._fid]
        jx = model.addJoint(frame.parentJoint, pin.JointModelRX(), frame.placement, "pendulum_x")
        jy = model.addJoint(jx, pin.JointModelRY(), pin.SE3.Identity(), "pendulum_y")
        m, L, r = self.pendulum["mass"], self.pendulum["length"], self.pendulum["radius"]
        bob = pin.Inertia(m, np.array([0.0, 0.0, -L]), np.eye(3) * (0.4 * m * r * r))
        model.appendBodyToJoint(jy, bob, pin.SE3.Identity())
        return model

    def set_constant_f_ext(self, f_world) -> None:
        """Set (or clear with None) the constant world-frame EE wrench [force N; torque N*m] (6,)."""
        if f_world is None:
            self.constant_f_ext = None
            return
        if self._fid is None:
            raise ValueError(f"constant_f_ext: ee_frame {self.ee_frame!r} not found in the URDF")
        self.constant_f_ext = _state_arg(f_world, "constant_f_ext", 6)

    def reset(self) -> None:
        """Forget the pendulum state: it re-initializes hanging at rest at the next step."""
        self._pend = None

    @property
    def pendulum_state(self):
        """(angles (2,) rad, rates (2,) rad/s) of the pendulum joints, or None (none / not started)."""
        return None if self._pend is None else (self._pend[0].copy(), self._pend[1].copy())

    def _hanging(self, q) -> np.ndarray:
        """Pendulum angles that point the rod at world -z for arm configuration q."""
        pin = self._pin
        qa = np.concatenate([q, np.zeros(2)])
        pin.forwardKinematics(self.model, self.data, qa)
        R = pin.updateFramePlacement(self.model, self.data, self._fid).rotation
        dx, dy, dz = R.T @ np.array([0.0, 0.0, -1.0])
        # Rx(a) Ry(b) (0, 0, -1) = (-sin b, sin a cos b, -cos a cos b)
        return np.array([math.atan2(dy, -dz), math.asin(float(np.clip(-dx, -1.0, 1.0)))])

    def _full_state(self, q, dq):
        if not self.pendulum:
            return q.copy(), dq.copy()
        if self._pend is None:
            self._pend = (self._hanging(q), np.zeros(2))
        return np.concatenate([q, self._pend[0]]), np.concatenate([dq, self._pend[1]])

    def _accel(self, qa, va, u):
        pin, model, data = self._pin, self.model, self.data
        tau = u
        if self.pendulum:
            tau = np.concatenate([u, -self.pendulum["damping"] * va[self.nv:]])
        if self.constant_f_ext is None:
            return pin.aba(model, data, qa, va, tau).copy()
        body, slot = world_wrench_to_joint_local(model, data, self._fid, qa, self.constant_f_ext)
        fext = [pin.Force.Zero() for _ in range(model.njoints)]
        fext[body + 1] = pin.Force(slot[3:], slot[:3])
        return pin.aba(model, data, qa, va, tau, fext).copy()

    def _rk4(self, qa, va, u, h):
        integrate = self._pin.integrate
        a1 = self._accel(qa, va, u)
        v2 = va + 0.5 * h * a1
        q2 = integrate(self.model, qa, 0.5 * h * va)
        a2 = self._accel(q2, v2, u)
        v3 = va + 0.5 * h * a2
        q3 = integrate(self.model, qa, 0.5 * h * v2)
        a3 = self._accel(q3, v3, u)
        v4 = va + h * a3
        q4 = integrate(self.model, qa, h * v3)
        a4 = self._accel(q4, v4, u)
        q_next = integrate(self.model, qa, (h / 6.0) * (va + 2 * v2 + 2 * v3 + v4))
        v_next = va + (h / 6.0) * (a1 + 2 * a2 + 2 * a3 + a4)
        return q_next, v_next

    def step(self, q, dq, u, sim_dt):
        """Advance sim_dt [s] (``substeps`` RK4 steps) from (q (nq,) rad, dq (nv,) rad/s) under
        joint torques u (nv,) N*m held constant. Raises ValueError on NaN/Inf or misshaped
        arguments (naming the argument) and on a sim_dt that is not > 0 or not the world's
        ``timestep``; RuntimeError if the state diverges.

        Returns (q_next (nq,), dq_next (nv,)) as fresh arrays; the pendulum state advances inside.
        """
        h = _check_dt(sim_dt, self.timestep) / self.substeps
        q = _state_arg(q, "q", self.nq)
        dq = _state_arg(dq, "dq", self.nv)
        u = _state_arg(u, "u", self.nv)
        qa, va = self._full_state(q, dq)
        for _ in range(self.substeps):
            qa, va = self._rk4(qa, va, u, h)
        if not (np.all(np.isfinite(qa)) and np.all(np.isfinite(va))):
            raise RuntimeError(f"PinocchioWorld.step: the state diverged (q={q}, dq={dq}, u={u})")
        if self.pendulum:
            self._pend = (qa[self.nq:].copy(), va[self.nv:].copy())
        return qa[:self.nq].copy(), va[:self.nv].copy()

    def qdd(self, q, dq, u):
        """Arm acceleration (nv,) rad/s^2 at (q (nq,), dq (nv,), u (nv,) N*m) with the world's
        disturbances (current pendulum state, constant wrench); plain ``aba`` without them."""
        q = _state_arg(q, "q", self.nq)
        dq = _state_arg(dq, "dq", self.nv)
        u = _state_arg(u, "u", self.nv)
        if self.pendulum and self._pend is None:
            qa, va = np.concatenate([q, self._hanging(q)]), np.concatenate([dq, np.zeros(2)])
        else:
            qa, va = self._full_state(q, dq)
        return self._accel(qa, va, u)[:self.nv]

    @property
    def params(self) -> dict:
        """World parameters for the protocol stamp (do not mix runs with different stamps)."""
        return _stamp("pinocchio_rk4", self.urdf_path, self.mass_scale,
                      substeps=self.substeps, timestep=self.timestep, ee_frame=self.ee_frame,
                      pendulum=None if self.pendulum is None else dict(self.pendulum),
                      constant_f_ext=None if self.constant_f_ext is None else self.constant_f_ext.tolist(),
                      pinocchio=self._pin.__version__)
