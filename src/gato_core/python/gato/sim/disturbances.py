"""Disturbances: what the planner does not model, applied by the simulation.

A :class:`Disturbance` adds world options at build time (a payload joint, a model error:
:meth:`~Disturbance.world_options`, :meth:`~Disturbance.attach`) and/or joint torques per
substep (:meth:`~Disturbance.torque`): :class:`ConstantWrench`, :class:`PointPayload`,
:class:`PendulumPayload`, :class:`Impulse`, :class:`LinkMassError`.

Units: wrenches [force N; torque N*m] in world axes at the EE frame origin, masses kg, times s.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from ..core.references import _vector
from ..robots.frames import EEKinematics
from .clock import EPS

__all__ = ["Disturbance", "ConstantWrench", "PointPayload", "PendulumPayload", "Impulse", "LinkMassError",
           "parse_link_mass_scale", "GRAVITY"]

GRAVITY = 9.81  # m/s^2


class Disturbance(ABC):
    """Something the planner does not model. Build-time parts go through
    :meth:`world_options` / :meth:`attach`; run-time parts through :meth:`torque`."""

    def world_options(self, kind: str) -> dict:
        """Keyword arguments for the world constructor of ``kind`` (none by default)."""
        return {}

    def attach(self, world) -> None:
        """Install on a built world (nothing by default)."""

    def torque(self, t: float, q, dq, kin: EEKinematics):
        """Joint torque [N*m] (nv,) added at sim time t [s], or None (none now)."""
        return None

    @abstractmethod
    def describe(self) -> dict:
        """The disturbance for the run's protocol stamp."""


def _wrench(w, name="wrench") -> np.ndarray:
    return _vector(w, name, 6, "[force N; torque N*m]")


class ConstantWrench(Disturbance):
    """A constant world-axes wrench at the EE frame origin. On a world that applies wrenches
    itself (PinocchioWorld: re-expressed at every RK4 stage) it is installed there; on others
    (or with ``via="jacobian"``) it is J(q)^T w added at every substep."""

    def __init__(self, wrench, via="auto"):
        self.wrench = _wrench(wrench)
        if via not in ("auto", "jacobian"):
            raise ValueError(f"via: expected 'auto' or 'jacobian', got {via!r}")
        self.via, self._native = via, False

    def attach(self, world) -> None:
        setter = getattr(world, "set_constant_f_ext", None)
        self._native = self.via == "auto" and callable(setter)
        if self._native:
            setter(self.wrench if np.any(self.wrench) else None)

    def torque(self, t, q, dq, kin):
        if self._native or not np.any(self.wrench):
            return None
        return kin.wrench_torque(q, self.wrench)

    def describe(self) -> dict:
        return dict(kind="constant_wrench", wrench=self.wrench.tolist())


class PointPayload(ConstantWrench):
    """A point mass [kg] at the EE frame origin: its weight only (inertia neglected), J^T w."""

    def __init__(self, mass):
        if isinstance(mass, bool) or not isinstance(mass, (int, float, np.floating)) or not mass >= 0 \
                or not math.isfinite(mass):
            raise ValueError(f"mass: expected a finite mass >= 0 kg, got {mass!r}")
        super().__init__([0.0, 0.0, -GRAVITY * float(mass), 0.0, 0.0, 0.0], via="jacobian")
        self.mass = float(mass)

    def describe(self) -> dict:
        return dict(kind="point_payload", mass=self.mass)


class PendulumPayload(Disturbance):
    """A payload swinging from the EE (PinocchioWorld only; see gato.worlds.PinocchioWorld):
    mass [kg], length [m], damping [N*m*s/rad], radius [m]. ``name``: the front end's option
    that asked for it, named by the error a MuJoCo world raises."""

    def __init__(self, mass, length, damping=0.0, radius=0.02, *, name="pendulum"):
        self.config, self.name = dict(mass=mass, length=length, damping=damping, radius=radius), name

    @classmethod
    def from_config(cls, config, name="pendulum") -> "PendulumPayload":
        """From a {"mass", "length"[, "damping", "radius"]} dict, passed to the world as given;
        checked here too, so the error names ``name`` (the caller's argument)."""
        from .pinocchio_world import PinocchioWorld

        try:
            PinocchioWorld._pendulum_cfg(config)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}: {str(e).split(': ', 1)[-1]}") from None
        self = cls.__new__(cls)
        self.config, self.name = config, name
        return self

    def world_options(self, kind):
        if kind != "pinocchio":
            raise ValueError(f"{self.name}: the pendulum payload is a feature of the pinocchio world "
                             "(PinocchioWorld); the MuJoCo world models disturbances as geometry")
        return dict(pendulum=self.config)

    def describe(self) -> dict:
        return dict(kind="pendulum", config=self.config)


class Impulse(Disturbance):
    """A world-axes wrench at the EE origin over [t_start, t_start + duration) [s] (J^T w)."""

    def __init__(self, t_start, duration, wrench):
        self.t_start, self.duration = float(t_start), float(duration)
        if not (math.isfinite(self.t_start) and math.isfinite(self.duration) and self.duration > 0):
            raise ValueError(f"Impulse: t_start finite and duration > 0 s required, got {t_start!r}, {duration!r}")
        self.wrench = _wrench(wrench)

    def torque(self, t, q, dq, kin):
        if self.t_start - EPS <= t < self.t_start + self.duration - EPS:
            return kin.wrench_torque(q, self.wrench)
        return None

    def describe(self) -> dict:
        return dict(kind="impulse", t_start=self.t_start, duration=self.duration, wrench=self.wrench.tolist())


def parse_link_mass_scale(text: str, name: str = "link_mass_scale") -> dict:
    """{link: factor} of a :class:`LinkMassError` from its text form (the ROS simulation world's
    ``link_mass_scale`` parameter): comma-separated ``LINK:FACTOR`` entries (blanks around
    entries ignored; "" = none). ValueError (naming ``name`` and the entry) for an entry that is
    not LINK:FACTOR, a factor that is not a finite number > 0 and a link given twice; whether the
    link exists is the world's check."""
    out: dict = {}
    for entry in (e.strip() for e in str(text).split(",")):
        if not entry:
            continue
        link, sep, factor = (x.strip() for x in entry.rpartition(":"))
        if not sep or not link or not factor:
            raise ValueError(f"{name}: entry {entry!r} is not LINK:FACTOR (e.g. L4:1.2)")
        try:
            f = float(factor)
        except ValueError:
            raise ValueError(f"{name}: entry {entry!r}: factor {factor!r} is not a number") from None
        if not np.isfinite(f) or f <= 0:
            raise ValueError(f"{name}: entry {entry!r}: factor must be a finite number > 0, got {factor}")
        if link in out:
            raise ValueError(f"{name}: link {link!r} is given twice")
        out[link] = f
    return out


class LinkMassError(Disturbance):
    """Model error: {URDF link: factor} scales those links' mass and inertia in the world only."""

    def __init__(self, mass_scale):
        if not isinstance(mass_scale, dict):
            raise ValueError(f"mass_scale: expected a dict {{URDF link name: factor}}, got {mass_scale!r}")
        self.mass_scale = dict(mass_scale)

    def world_options(self, kind):
        return dict(mass_scale=dict(self.mass_scale)) if self.mass_scale else {}

    def describe(self) -> dict:
        return dict(kind="link_mass_error", mass_scale=dict(self.mass_scale))
