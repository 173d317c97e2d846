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
from ..robots.mjcf import (_INTEGRATORS, _build_spec, _normalize_plane, ROBOT_CONAFFINITY, ROBOT_CONTYPE,
                           TABLE_CONAFFINITY, TABLE_CONTYPE)
from .world_checks import _check_dt, _stamp, _state_arg

__all__ = ["MuJoCoWorld", "probe_tip_drop"]


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
        self.floating = flag(floating, "floating")
        self.record_contact = flag(record_contact, "record_contact")
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
