"""The MuJoCo world, and the simulation worlds' shared interface: one ``step``, two simulators.

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
- A floating world (``floating=True``, e.g. go2) stands on an infinite ground plane and
  places itself: :meth:`MuJoCoWorld.standing_state` / ``reset(pose=...)`` (a named joint
  pose of the registry, base lowered until the lowest geom touches the ground),
  :meth:`MuJoCoWorld.base_state` (base pose and twist, world and base frame),
  :meth:`MuJoCoWorld.body_position`, :meth:`MuJoCoWorld.normal_force` (one foot's load).
- :func:`probe_tip_drop`: the height of a reference point (e.g. the EE frame
  origin) above the robot's lowest contact point, probed with MuJoCo's
  collision checker.

The MuJoCo model of the URDF is :mod:`gato.robots.mjcf` (what it changes and why); the
shared checks :mod:`gato.sim.world_checks`; :class:`PinocchioWorld` is :mod:`gato.sim.pinocchio_world`.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..core.arrays import flag
from ..robots.mass_scale import _check_mass_scale
from ..robots.mjcf import (_INTEGRATORS, _build_spec, _normalize_ground, _normalize_plane, ROBOT_CONAFFINITY,
                           ROBOT_CONTYPE, TABLE_CONAFFINITY, TABLE_CONTYPE)
from ..robots.registry import all_robots, detect_plant
from .world_checks import _check_dt, _stamp, _state_arg

__all__ = ["MuJoCoWorld", "probe_tip_drop"]

#: Largest accepted | |quat| - 1 | of a floating state's base quaternion (the NumPy reference's bound).
QUAT_NORM_TOL = 1e-6


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
            free-flyer convention, the consumer contract's schema 2 (q = [p (3) m world,
            quat xyzw (4), joints] with a unit quaternion, v = [v_lin, omega] both in the
            base frame, then the joint rates; u (nv,) the full generalized force, base rows a
            base-frame wrench, normally zero) and are converted to MuJoCo's (quat wxyz,
            world-frame linear velocity) at the boundary; u may also be the n_actuated joint
            torques alone. A base wrench is rotated to the world at the step's start and held
            there over the step (pinocchio would hold it in the base frame). A floating
            world gets a ground plane unless ``ground=False``.
        integrator: keyword only; "euler" (MuJoCo's semi-implicit Euler, default),
            "rk4" or "implicitfast".
        ground: keyword only; None (default: a ground for a floating world, none for a fixed
            base), False, True or {"z": top height [m] (0), "friction": sliding coefficient
            (0.8)}: an infinite horizontal plane the robot stands on (robot-ground contacts
            only, like the table's).
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
    from the table and the ground, N), "ft" (magnitude of the total horizontal force, N),
    "fn_by_body" (world-z force per robot link in contact, keyed by URDF link name: go2's
    feet are "FL_foot", "FR_foot", "RL_foot", "RR_foot")} - the forces MuJoCo applied
    during that step. No pendulum or constant wrench here: those are
    :class:`PinocchioWorld` features.
    """

    def __init__(self, urdf_path, plane=None, timestep=0.001, record_contact=False, floating=False, *,
                 integrator="euler", mass_scale=None, ground=None):
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
        self.floating = flag(floating, "floating")
        self.record_contact = flag(record_contact, "record_contact")
        self._plane = _normalize_plane(plane)
        self._ground = _normalize_ground(ground, self.floating)
        if not Path(self.urdf_path).is_file():
            raise ValueError(f"urdf_path: file not found: {self.urdf_path}")
        self.mass_scale = _check_mass_scale(mass_scale, self.urdf_path)
        self._spec = _build_spec(self.urdf_path, self._plane, self.timestep, self.floating, integrator,
                                 self.mass_scale, ground=self._ground)
        self.model = self._spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.nq, self.nv = int(m.nq), int(m.nv)
        self.n_actuated = self.nv - (6 if self.floating else 0)
        self.joint_names = [m.joint(i).name for i in range(m.njnt) if m.jnt_type[i] != mujoco.mjtJoint.mjJNT_FREE]
        self._check_joint_order()
        self._table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table") if self._plane else -1
        self._ground_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "ground") if self._ground else -1
        self._env_geoms = frozenset(g for g in (self._table, self._ground_geom) if g >= 0)
        #: The robot's bodies (URDF link names), what ``body`` arguments and ``fn_by_body`` keys name.
        self.bodies = [m.body(i).name for i in range(1, m.nbody)]
        self._scratch = mujoco.MjData(m)  # kinematics queries leave self.data (the last step) alone
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
        q = self._q_arg(q)
        dq = _state_arg(dq, "dq", self.nv)
        ua = np.array(u, dtype=np.float64).reshape(-1)
        if self.floating and ua.shape == (self.n_actuated,):
            ua = np.concatenate([np.zeros(6), ua])
        u = _state_arg(ua, "u", self.nv)
        return q, dq, u

    def _q_arg(self, q) -> np.ndarray:
        q = _state_arg(q, "q", self.nq)
        if self.floating:
            norm = float(np.linalg.norm(q[3:7]))
            if abs(norm - 1.0) > QUAT_NORM_TOL:
                raise ValueError(f"q: the base quaternion q[3:7] (x, y, z, w) must be a unit quaternion, "
                                 f"got |quat| = {norm:.9g}")
        return q

    def _body_id(self, body) -> int:
        if not isinstance(body, str) or body not in self.bodies:
            raise ValueError(f"body: {body!r} is not a body of this robot; bodies: {self.bodies}")
        return self.model.body(body).id

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
        q (nq,), dq (nv,), u (nv,) -> qdd (nv,) rad/s^2. Contacts included when a table or a
        ground is present. Floating base: qdd in pinocchio's free-flyer convention (dq[:3] the base
        origin's velocity in base axes, dq[3:6] its angular velocity in base axes): MuJoCo's free
        joint gives the world-frame acceleration of the origin, p'', and the derivative of
        v = R^T p' is R^T p'' - w x v (pinocchio's ``aba`` to 1e-14 relative with the base moving)."""
        q, dq, u = self._inputs(q, dq, u)
        self._load(q, dq, u)
        self._mj.mj_forward(self.model, self.data)
        a = self.data.qacc.copy()
        if self.floating:
            R = _quat_xyzw_to_R(*q[3:7])
            a[:3] = R.T @ a[:3] - np.cross(dq[3:6], dq[:3])
        return a

    def _contacts(self) -> dict:
        d, m = self.data, self.model
        if not self._env_geoms or d.ncon == 0:
            return dict(ncon=int(d.ncon), fn=0.0, ft=0.0, fn_by_body={})
        f6 = np.zeros(6)
        total = np.zeros(3)
        by_body: dict[str, float] = {}
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom[0]), int(c.geom[1])
            if g1 not in self._env_geoms and g2 not in self._env_geoms:
                continue
            self._mj.mj_contactForce(m, d, i, f6)
            # Contact frame rows: normal (geom1 -> geom2), tangents; the force acts on geom2.
            f_world = np.asarray(c.frame).reshape(3, 3).T @ f6[:3]
            robot_geom, sign = (g2, 1.0) if g1 in self._env_geoms else (g1, -1.0)
            f_robot = sign * f_world
            total += f_robot
            name = m.body(int(m.geom_bodyid[robot_geom])).name
            by_body[name] = by_body.get(name, 0.0) + float(f_robot[2])
        return dict(ncon=int(d.ncon), fn=float(total[2]), ft=float(np.hypot(total[0], total[1])),
                    fn_by_body=by_body)

    def reset(self, pose=None, clearance=0.0):
        """Clear the world's clock and contact record (the state is the caller's).

        ``pose`` None returns None. A floating world also takes a pose (as
        :meth:`standing_state`) and returns that start state (q (nq,), dq (nv,)), for
        example ``q, dq = world.reset("crouch")``."""
        self.time = 0.0
        self.contact_history = []
        self.last_contact = dict(ncon=0, fn=0.0, ft=0.0, fn_by_body={})
        return None if pose is None else self.standing_state(pose, clearance)

    # ----------------------------------------------------------- floating base
    def named_poses(self) -> dict:
        """This robot's named joint poses from the registry ({"stand": (n_actuated,) rad, ...};
        go2: "stand" and "crouch"); {} for a URDF the registry does not know."""
        meta = all_robots().get(detect_plant(self.urdf_path) or "", {})
        return {k[2:]: np.array(v, dtype=np.float64) for k, v in meta.items()
                if k.startswith("q_") and k != "q_ready" and isinstance(v, list) and len(v) == self.n_actuated}

    def standing_state(self, pose="stand", clearance=0.0):
        """A floating world's start state at rest on the ground: (q (nq,), dq (nv,) zeros).

        The joints at ``pose`` (a name of :meth:`named_poses`, or (n_actuated,) rad), the base
        level (quaternion (0, 0, 0, 1)) above the world origin and lowered until the robot's
        lowest geom is ``clearance`` [m] (>= 0) above the ground. Raises ValueError naming
        ``pose`` for an unknown name, a misshaped or non-finite array or a fixed-base / groundless
        world, and naming ``clearance`` for a negative or non-finite one."""
        if not self.floating or self._ground is None:
            raise ValueError("pose: only a floating world with a ground places its robot "
                             f"(floating={self.floating}, ground={self._ground})")
        if isinstance(pose, str):
            poses = self.named_poses()
            if pose not in poses:
                raise ValueError(f"pose: {pose!r} is not a named pose of this robot; named: {sorted(poses)}")
            joints = poses[pose]
        else:
            joints = _state_arg(pose, "pose", self.n_actuated)
        if isinstance(clearance, bool) or not isinstance(clearance, (int, float)) \
                or not math.isfinite(clearance) or clearance < 0:
            raise ValueError(f"clearance: expected a finite height >= 0 m, got {clearance!r}")
        mj, m, d = self._mj, self.model, self._scratch
        q = np.concatenate([[0.0, 0.0, self._ground["z"] + 1.0, 0.0, 0.0, 0.0, 1.0], joints])
        mj.mj_resetData(m, d)
        d.qpos[:] = self._to_mj(q, np.zeros(self.nv), np.zeros(self.nv))[0]
        mj.mj_kinematics(m, d)
        lowest = min(mj.mj_geomDistance(m, d, self._ground_geom, g, 10.0, None)
                     for g in range(m.ngeom) if g not in self._env_geoms)
        q[2] += clearance - lowest
        return q, np.zeros(self.nv)

    def base_state(self, q, dq) -> dict:
        """The base's pose and twist at a floating state (q (nq,), dq (nv,)), as an odometry
        message carries them: {"position" (3,) m world, "quat_xyzw" (4,), "R" (3, 3)
        world-from-base rotation, "linear" (3,) m/s and "angular" (3,) rad/s in the base
        frame, "linear_world" (3,) m/s and "angular_world" (3,) rad/s in the world frame,
        "tilt" rad (angle between the base's z axis and the world's)}."""
        if not self.floating:
            raise ValueError("q: base_state needs a floating world (floating=True)")
        q = self._q_arg(q)
        dq = _state_arg(dq, "dq", self.nv)
        R = _quat_xyzw_to_R(*q[3:7])
        return dict(position=q[:3].copy(), quat_xyzw=q[3:7].copy(), R=R, linear=dq[:3].copy(),
                    angular=dq[3:6].copy(), linear_world=R @ dq[:3], angular_world=R @ dq[3:6],
                    tilt=float(math.acos(min(1.0, max(-1.0, R[2, 2])))))

    def body_position(self, q, body) -> np.ndarray:
        """World position (3,) m of a robot body's frame origin (a URDF link, e.g. "FL_foot")
        at configuration q (nq,). Raises ValueError naming ``body`` / ``q``."""
        bid = self._body_id(body)
        q = self._q_arg(q)
        mj, d = self._mj, self._scratch
        mj.mj_resetData(self.model, d)
        d.qpos[:] = self._to_mj(q, np.zeros(self.nv), np.zeros(self.nv))[0]
        mj.mj_kinematics(self.model, d)
        return d.xpos[bid].copy()

    def normal_force(self, body) -> float:
        """World-z force [N] the table / ground applied to ``body`` (a URDF link) in the last
        step, 0.0 when it was not in contact; ValueError naming ``body`` for an unknown link."""
        self._body_id(body)
        return float(self.last_contact["fn_by_body"].get(body, 0.0))

    @property
    def params(self) -> dict:
        """World parameters for the protocol stamp (do not mix runs with different stamps)."""
        return _stamp("mujoco", self.urdf_path, self.mass_scale,
                      timestep=self.timestep, integrator=self.integrator, floating=self.floating,
                      plane=None if self._plane is None else dict(self._plane),
                      **({} if self._ground is None else dict(ground=dict(self._ground))),
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
