"""The pinocchio world: ``aba`` with RK4 on the solver's own model (the same URDF through the
same library), an optional pendulum payload hanging from the end effector and an optional
constant world-frame wrench. Units: rad, rad/s, N*m, s."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..robots.frames import world_wrench_to_joint_local
from ..robots.mass_scale import _check_mass_scale, _scaled_urdf_xml
from .world_checks import _check_dt, _stamp, _state_arg

__all__ = ["PinocchioWorld", "AttachedAt"]


# ---------------------------------------------------------------- pinocchio RK4
_PENDULUM_KEYS = {"mass", "length", "damping", "radius"}


def _is_driver(obj) -> bool:
    """An MPC_GATO-like driver (model_path, solver, pendulum_config): the reference's
    ``PinocchioWorld(mpc)`` argument."""
    return all(hasattr(obj, a) for a in ("model_path", "solver", "pendulum_config"))


class PinocchioWorld:
    """pinocchio ``aba`` + RK4: the solver's own rigid-body model, with optional disturbances.

    Args:
        urdf_path: robot URDF (fixed base), or a :class:`gato.MPC_GATO` driver (the reference's
            ``PinocchioWorld(mpc)``: its URDF, the solver's EE frame, its pendulum and constant
            wrench; ee_frame / pendulum / constant_f_ext must then be left unset).
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
        rigid_payload: None, or {"mass" [kg], "offset" [x, y, z] m (EE frame axes, default the
            frame origin), "radius" [m, default 0.05]}: a grasped object that does not swing, a
            solid sphere of that mass and radius fixed to the EE frame with its centre at
            ``offset``, added to the pinocchio model's last body (weight, inertia and the
            offset's lever arm; the arm's nq / nv unchanged). ValueError naming rigid_payload for
            an unknown key, a mass or radius not finite and > 0, or an offset not 3 finite numbers.
    """

    def __init__(self, urdf_path, *, ee_frame="EE", substeps=1, pendulum=None, constant_f_ext=None,
                 timestep=None, mass_scale=None, rigid_payload=None):
        import pinocchio as pin

        self._pin = pin
        if _is_driver(urdf_path):
            # The reference's form PinocchioWorld(mpc): the world of an MPC_GATO driver (its URDF,
            # the solver's EE frame, its pendulum payload and constant wrench).
            mpc = urdf_path
            if ee_frame != "EE" or pendulum is not None or constant_f_ext is not None:
                raise ValueError("ee_frame / pendulum / constant_f_ext: PinocchioWorld(mpc) takes them from the "
                                 "MPC_GATO driver; pass a URDF path to set them")
            urdf_path, ee_frame = mpc.model_path, mpc.solver.ee_frame
            pendulum = None if mpc.pendulum_config is None else dict(mpc.pendulum_config)
            f = getattr(mpc, "constant_f_ext_world", None)
            constant_f_ext = None if f is None or not np.any(f) else np.asarray(f, dtype=np.float64)
        if not isinstance(urdf_path, (str, os.PathLike)):
            raise ValueError(f"urdf_path: expected a URDF path or a gato.MPC_GATO driver, got "
                             f"{type(urdf_path).__name__}")
        path = Path(urdf_path).resolve()
        if not path.is_file():
            raise ValueError(f"urdf_path: file not found: {path}")
        if not isinstance(ee_frame, str):
            raise ValueError(f"ee_frame: expected a URDF frame name, got {ee_frame!r}")
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
        needs_ee = pendulum is not None or constant_f_ext is not None or rigid_payload is not None
        if needs_ee and self._fid is None:
            raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {path.name} (needed by the "
                             "pendulum / constant wrench / rigid payload)")
        self.pendulum = self._pendulum_cfg(pendulum)
        self.rigid_payload = self._rigid_cfg(rigid_payload)
        if self.rigid_payload:
            robot = self._with_rigid(robot)
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

    @staticmethod
    def _rigid_cfg(cfg):
        if cfg is None:
            return None
        if not isinstance(cfg, dict) or "mass" not in cfg or set(cfg) - {"mass", "offset", "radius"}:
            raise ValueError(f"rigid_payload: expected a dict with mass [, offset, radius], got {cfg!r}")
        try:
            m, r = float(cfg["mass"]), float(cfg.get("radius", 0.05))
            c = np.array(cfg.get("offset", (0.0, 0.0, 0.0)), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"rigid_payload: mass and radius numbers, offset [x, y, z] m, got {cfg!r}") from None
        if not (m > 0 and r > 0 and math.isfinite(m) and math.isfinite(r)):
            raise ValueError(f"rigid_payload: mass and radius must be finite and > 0, got {cfg!r}")
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise ValueError(f"rigid_payload: offset must be 3 finite numbers [m] (EE frame axes), got {cfg!r}")
        return {"mass": m, "offset": c.tolist(), "radius": r}

    def _with_rigid(self, robot):
        """The robot with a solid sphere (mass, radius) fixed to the EE frame at ``offset`` (EE
        axes): its weight and inertia at the offset are part of the arm's last body, no new joint."""
        pin = self._pin
        model = pin.Model(robot)
        frame = model.frames[self._fid]
        m, r, c = self.rigid_payload["mass"], self.rigid_payload["radius"], np.array(self.rigid_payload["offset"])
        model.appendBodyToJoint(frame.parentJoint, pin.Inertia(m, c, np.eye(3) * (0.4 * m * r * r)), frame.placement)
        return model

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
                      rigid_payload=None if self.rigid_payload is None else dict(self.rigid_payload),
                      constant_f_ext=None if self.constant_f_ext is None else self.constant_f_ext.tolist(),
                      pinocchio=self._pin.__version__)


class AttachedAt:
    """A payload that appears mid-run: the world ``before`` (the bare arm) until its own clock
    reaches ``t_attach`` [s], then ``after`` (the same arm carrying the payload: a PinocchioWorld
    with rigid_payload, pendulum or constant_f_ext), from the arm's state at that instant (a
    pendulum starts hanging at rest; the grasp is not an impulse). The clock is the sum of the
    ``sim_dt`` stepped since construction or :meth:`reset`. Units: s, rad, rad/s, N*m.
    ValueError naming the argument for worlds of different nq / nv or a t_attach not finite >= 0.
    """

    def __init__(self, before, after, t_attach):
        for name, w in (("before", before), ("after", after)):
            if not callable(getattr(w, "step", None)):
                raise ValueError(f"{name}: expected a world with step(q, dq, u, sim_dt), got {type(w).__name__}")
        if (getattr(before, "nq", None), getattr(before, "nv", None)) != (getattr(after, "nq", None),
                                                                          getattr(after, "nv", None)):
            raise ValueError(f"after: its nq / nv {getattr(after, 'nq', None)} / {getattr(after, 'nv', None)} "
                             f"differ from before's {getattr(before, 'nq', None)} / {getattr(before, 'nv', None)}")
        if isinstance(t_attach, bool) or not isinstance(t_attach, (int, float, np.floating, np.integer)) \
                or not math.isfinite(t_attach) or t_attach < 0:
            raise ValueError(f"t_attach: expected a finite time >= 0 s, got {t_attach!r}")
        self.before, self.after, self.t_attach = before, after, float(t_attach)
        self.nq, self.nv = before.nq, before.nv
        self.t = 0.0

    @property
    def attached(self) -> bool:
        """Whether the payload is on (the world's clock has reached t_attach)."""
        return self.t >= self.t_attach - 1e-9

    def step(self, q, dq, u, sim_dt):
        """One step of the world in force (``before``, or ``after`` once attached); the clock
        advances by sim_dt."""
        out = (self.after if self.attached else self.before).step(q, dq, u, sim_dt)
        self.t += float(sim_dt)
        return out

    def reset(self) -> None:
        """The clock back to 0 (the payload off again) and both worlds reset."""
        self.t = 0.0
        for w in (self.before, self.after):
            if callable(getattr(w, "reset", None)):
                w.reset()

    @property
    def params(self) -> dict:
        """The protocol stamp: both worlds' and the attach time."""
        stamp = lambda w: dict(getattr(w, "params", {}) or {})  # noqa: E731
        return {"kind": "attached_at", "t_attach": self.t_attach, "before": stamp(self.before),
                "after": stamp(self.after)}
