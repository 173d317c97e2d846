"""Views of a simulator's worlds by name: :class:`Entity` (RoboKit's ``robokit.sim.mjentity.Entity``,
from ``MjSim.build_entity(prefix)``) and :class:`ContactSensor` (``robokit.sim.mjsensor.ContactSensor``,
from ``MjSim.build_contact_sensor(name)``).

The reference documents both only through ``build_entity`` / ``build_contact_sensor`` and one
example each (``joint_names``, ``data.default_root_state``, ``primary_names``); the other members
follow the Isaac Lab articulation / contact-sensor names those examples use (our reading,
docs/sampling_reference.md). Every array has a leading world axis (nworld, ...) and is read from, or
written to, the simulator's ``MjData`` of each world. Units: m, rad, s; quaternions (w, x, y, z).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .mjstate import copy_state

__all__ = ["Entity", "EntityData", "ContactSensor"]


def _mask(sim, mask) -> np.ndarray:
    if mask is None:
        return np.arange(sim.nworld)
    m = np.asarray(mask.numpy() if hasattr(mask, "numpy") else mask).reshape(-1)
    if m.shape != (sim.nworld,):
        raise ValueError(f"mask: expected ({sim.nworld},) values, one per world, got shape {m.shape}")
    return np.flatnonzero(m)


class EntityData:
    """An :class:`Entity`'s state. Defaults (from the simulator's initial state): ``default_root_state``
    (13,) [position, quaternion wxyz, linear velocity, angular velocity] of the root body in the
    world (a fixed base: its body pose, zero velocities), ``default_joint_pos`` / ``default_joint_vel``
    (num_joints,), ``joint_pos_limits`` (num_joints, 2) (unlimited: ±inf), ``soft_joint_pos_limits``
    (the limits' middle ± soft_joint_pos_limit_factor × half their range). Live, per world:
    ``root_state_w`` (nworld, 13), ``joint_pos`` / ``joint_vel`` (nworld, num_joints),
    ``body_pos_w`` (nworld, num_bodies, 3), ``body_quat_w`` (nworld, num_bodies, 4)."""

    def __init__(self, entity: "Entity"):
        self._e = entity

    @property
    def root_state_w(self) -> np.ndarray:
        e = self._e
        out = np.zeros((e.sim.nworld, 13))
        for w, d in enumerate(e.sim.data):
            out[w] = e._root_state(d)
        return out

    @property
    def joint_pos(self) -> np.ndarray:
        return np.stack([d.qpos[self._e.qpos_ids] for d in self._e.sim.data])

    @property
    def joint_vel(self) -> np.ndarray:
        return np.stack([d.qvel[self._e.dof_ids] for d in self._e.sim.data])

    @property
    def body_pos_w(self) -> np.ndarray:
        return np.stack([d.xpos[self._e.body_ids] for d in self._e.sim.data])

    @property
    def body_quat_w(self) -> np.ndarray:
        return np.stack([d.xquat[self._e.body_ids] for d in self._e.sim.data])


class Entity:
    """The bodies and joints of ``sim`` named ``prefix*`` (names reported without the prefix).

    ``joint_names``: its hinge and slide joints (one qpos each), in model order; its free joint, if
    any, is the root (``root_joint_name``), else the base is fixed (``is_fixed_base``).
    ``body_names``, ``body_ids``, ``joint_ids``, ``qpos_ids``, ``dof_ids``, ``num_joints``,
    ``num_bodies``, ``root_body_id``, ``data`` (:class:`EntityData`);
    ``write_root_state_to_sim`` / ``write_joint_state_to_sim`` set the worlds' state.
    """

    def __init__(self, sim, prefix: str, soft_joint_pos_limit_factor: float = 1.0):
        import mujoco

        if not isinstance(prefix, str):
            raise ValueError(f"prefix: expected a string, got {prefix!r}")
        f = soft_joint_pos_limit_factor
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise ValueError(f"soft_joint_pos_limit_factor: expected a number in (0, 1], got {f!r}")
        self.sim, self.prefix, self.soft_joint_pos_limit_factor = sim, prefix, float(f)
        m = sim.mjm
        name = lambda t, i: mujoco.mj_id2name(m, t, i) or ""  # noqa: E731
        bodies = [b for b in range(1, m.nbody) if name(mujoco.mjtObj.mjOBJ_BODY, b).startswith(prefix)]
        joints = [j for j in range(m.njnt) if name(mujoco.mjtObj.mjOBJ_JOINT, j).startswith(prefix)]
        if not bodies and not joints:
            raise ValueError(f"prefix: no body or joint of the scene is named {prefix!r}*")
        free = [j for j in joints if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        scalar = [j for j in joints if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                                             int(mujoco.mjtJoint.mjJNT_SLIDE))]
        strip = lambda s: s[len(prefix):]  # noqa: E731
        self.body_ids = np.array(bodies, dtype=int)
        self.body_names = [strip(name(mujoco.mjtObj.mjOBJ_BODY, b)) for b in bodies]
        self.joint_ids = np.array(scalar, dtype=int)
        self.joint_names = [strip(name(mujoco.mjtObj.mjOBJ_JOINT, j)) for j in scalar]
        self.qpos_ids = m.jnt_qposadr[self.joint_ids].astype(int)
        self.dof_ids = m.jnt_dofadr[self.joint_ids].astype(int)
        self.num_joints, self.num_bodies = len(scalar), len(bodies)
        self.is_fixed_base = not free
        self.root_joint_name = strip(name(mujoco.mjtObj.mjOBJ_JOINT, free[0])) if free else None
        self._free = free[0] if free else None
        self.root_body_id = int(m.jnt_bodyid[free[0]]) if free else (bodies[0] if bodies else 0)
        self.data = EntityData(self)
        d0 = mujoco.MjData(m)
        if sim._init is not None:
            copy_state(m, sim._init, d0)
        mujoco.mj_kinematics(m, d0)
        self.data.default_root_state = self._root_state(d0)
        self.data.default_joint_pos = d0.qpos[self.qpos_ids].copy()
        self.data.default_joint_vel = d0.qvel[self.dof_ids].copy()
        lim = np.full((self.num_joints, 2), [-np.inf, np.inf])
        limited = m.jnt_limited[self.joint_ids].astype(bool)
        lim[limited] = m.jnt_range[self.joint_ids[limited]]
        self.data.joint_pos_limits = lim
        soft = lim.copy()
        mid, half = lim[limited].mean(axis=1), 0.5 * (lim[limited, 1] - lim[limited, 0])
        soft[limited] = np.stack([mid - self.soft_joint_pos_limit_factor * half,
                                  mid + self.soft_joint_pos_limit_factor * half], axis=1)
        self.data.soft_joint_pos_limits = soft

    def _root_state(self, d) -> np.ndarray:
        m, out = self.sim.mjm, np.zeros(13)
        if self._free is not None:
            a, v = int(m.jnt_qposadr[self._free]), int(m.jnt_dofadr[self._free])
            out[:7] = d.qpos[a:a + 7]
            # MuJoCo's free-joint qvel: world-frame linear, body-frame angular velocity
            out[7:10] = d.qvel[v:v + 3]
            R = np.asarray(d.xmat[self.root_body_id]).reshape(3, 3)
            out[10:13] = R @ d.qvel[v + 3:v + 6]
        else:
            out[:3], out[3:7] = d.xpos[self.root_body_id], d.xquat[self.root_body_id]
        return out

    def write_root_state_to_sim(self, root_state, mask=None) -> None:
        """Set the free root's pose and velocity (13,) or (nworld, 13) in the worlds of ``mask``."""
        import mujoco

        if self._free is None:
            raise ValueError(f"root_state: the entity {self.prefix!r}* has a fixed base (no free joint)")
        s = np.broadcast_to(np.asarray(root_state, dtype=np.float64), (self.sim.nworld, 13)) \
            if np.shape(root_state) in ((13,), (self.sim.nworld, 13)) else None
        if s is None or not np.all(np.isfinite(s)):
            raise ValueError(f"root_state: expected finite (13,) or ({self.sim.nworld}, 13), got {np.shape(root_state)}")
        m = self.sim.mjm
        a, v = int(m.jnt_qposadr[self._free]), int(m.jnt_dofadr[self._free])
        for w in _mask(self.sim, mask):
            d = self.sim.data[w]
            q = s[w, 3:7] / np.linalg.norm(s[w, 3:7])
            d.qpos[a:a + 3], d.qpos[a + 3:a + 7] = s[w, :3], q
            R = np.zeros(9)
            mujoco.mju_quat2Mat(R, q)
            d.qvel[v:v + 3], d.qvel[v + 3:v + 6] = s[w, 7:10], R.reshape(3, 3).T @ s[w, 10:13]
            mujoco.mj_forward(self.sim.models[w], d)

    def write_joint_state_to_sim(self, position, velocity, mask=None) -> None:
        """Set the joints' positions and velocities, (num_joints,) or (nworld, num_joints), in ``mask``'s worlds."""
        import mujoco

        shp = (self.sim.nworld, self.num_joints)
        vals = []
        for nm, x in (("position", position), ("velocity", velocity)):
            if np.shape(x) not in ((self.num_joints,), shp) or not np.all(np.isfinite(x)):
                raise ValueError(f"{nm}: expected finite ({self.num_joints},) or {shp}, got shape {np.shape(x)}")
            vals.append(np.broadcast_to(np.asarray(x, dtype=np.float64), shp))
        for w in _mask(self.sim, mask):
            d = self.sim.data[w]
            d.qpos[self.qpos_ids], d.qvel[self.dof_ids] = vals[0][w], vals[1][w]
            mujoco.mj_forward(self.sim.models[w], d)


class ContactSensor:
    """The MuJoCo contact sensors named ``{name}_{primary}_found`` / ``{name}_{primary}_force`` of a
    simulator, one column per primary (``primary_names``, in the sensors' order).

    ``found`` (nworld, P): contacts found (0 where only a force sensor exists and its force is
    zero; the first slot's force norm decides); ``force`` (nworld, P, 3) the first contact slot's
    force (its contact frame, N), None without force sensors; ``in_contact`` (nworld, P) bool.
    With ``track_air_time``, :meth:`update(dt)` (call it after each step) keeps
    ``current_air_time``, ``last_air_time``, ``current_contact_time``, ``last_contact_time``
    (nworld, P) s, and :meth:`compute_first_contact` / :meth:`compute_first_air` say which
    primaries touched down / lifted off within the last dt; :meth:`reset(mask)` zeroes them.
    """

    def __init__(self, sim, name: str, track_air_time: bool = False):
        import mujoco

        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if not isinstance(track_air_time, bool):
            raise ValueError(f"track_air_time: expected a bool, got {track_air_time!r}")
        m = sim.mjm
        self.sim, self.name, self.track_air_time = sim, name, track_air_time
        found, force, order = {}, {}, []
        for i in range(m.nsensor):
            s = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, i) or ""
            if int(m.sensor_type[i]) != int(mujoco.mjtSensor.mjSENS_CONTACT) or not s.startswith(name + "_"):
                continue
            rest = s[len(name) + 1:]
            for suffix, table, dim in (("_found", found, 1), ("_force", force, 3)):
                if rest.endswith(suffix) and len(rest) > len(suffix):
                    p = rest[:-len(suffix)]
                    if m.sensor_dim[i] < dim:
                        raise ValueError(f"name: sensor {s!r} has {m.sensor_dim[i]} values, expected >= {dim}")
                    table[p] = int(m.sensor_adr[i])
                    if p not in order:
                        order.append(p)
        if not order:
            raise ValueError(f"name: no contact sensor of the scene is named {name}_<primary>_found or _force")
        self.primary_names = order
        self.num_primaries = len(order)
        self._found = [found.get(p) for p in order]
        self._force = [force.get(p) for p in order]
        P = (sim.nworld, len(order))
        self.current_air_time, self.last_air_time = np.zeros(P), np.zeros(P)
        self.current_contact_time, self.last_contact_time = np.zeros(P), np.zeros(P)

    @property
    def force(self) -> Optional[np.ndarray]:
        if all(a is None for a in self._force):
            return None
        out = np.zeros((self.sim.nworld, self.num_primaries, 3))
        for w, d in enumerate(self.sim.data):
            for j, a in enumerate(self._force):
                if a is not None:
                    out[w, j] = d.sensordata[a:a + 3]
        return out

    @property
    def found(self) -> np.ndarray:
        out = np.zeros((self.sim.nworld, self.num_primaries))
        for w, d in enumerate(self.sim.data):
            for j, (a, fa) in enumerate(zip(self._found, self._force)):
                out[w, j] = d.sensordata[a] if a is not None else float(np.linalg.norm(d.sensordata[fa:fa + 3]) > 0)
        return out

    @property
    def in_contact(self) -> np.ndarray:
        return self.found > 0

    def _need_air_time(self, what: str) -> None:
        if not self.track_air_time:
            raise ValueError(f"track_air_time: {what} needs build_contact_sensor(name, track_air_time=True)")

    def update(self, dt: float) -> None:
        """Advance the air / contact timers by dt [s] from the worlds' current contacts."""
        self._need_air_time("update")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt: expected a finite number > 0 [s], got {dt!r}")
        touch = self.in_contact
        was_air = self.current_air_time > 0
        was_touch = self.current_contact_time > 0
        landed, lifted = touch & was_air, ~touch & was_touch
        self.last_air_time = np.where(landed, self.current_air_time + dt, self.last_air_time)
        self.last_contact_time = np.where(lifted, self.current_contact_time + dt, self.last_contact_time)
        self.current_air_time = np.where(touch, 0.0, self.current_air_time + dt)
        self.current_contact_time = np.where(touch, self.current_contact_time + dt, 0.0)

    def compute_first_contact(self, dt: float) -> np.ndarray:
        """(nworld, P) bool: in contact for at most dt [s] (touched down since the last update)."""
        self._need_air_time("compute_first_contact")
        return (self.current_contact_time > 0) & (self.current_contact_time < dt + 1e-8)

    def compute_first_air(self, dt: float) -> np.ndarray:
        """(nworld, P) bool: in the air for at most dt [s] (lifted off since the last update)."""
        self._need_air_time("compute_first_air")
        return (self.current_air_time > 0) & (self.current_air_time < dt + 1e-8)

    def reset(self, mask=None) -> None:
        """Zero the timers of the worlds in ``mask`` (None: all)."""
        for w in _mask(self.sim, mask):
            for a in (self.current_air_time, self.last_air_time, self.current_contact_time, self.last_contact_time):
                a[w] = 0.0
