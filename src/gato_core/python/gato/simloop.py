"""One simulation loop: a world, a zero-order-hold stepping rule, disturbances, tasks, and
one run record.

Layers (each usable alone)::

    World         step(q, dq, u, sim_dt) -> (q, dq)   PinocchioWorld, MuJoCoWorld (gato.worlds)
    Disturbance   world options at build time, joint torques per substep
    Simulation    state + clock; advance(command, period): ZOH over sim_dt substeps
    Task          the reference window of each tick, its gates and its stop rule
    run_closed_loop(sim, planner, task) -> RunRecord   (lockstep or paced by solve time)

:class:`gato.MPC_GATO` (the reference-API driver) and :class:`gato.envs.ArmTrackEnv` (the
gym environment) are adapters over these; so is the ROS simulation node's logic.

Stepping rule: a command is held over a control period split into ``sim_dt`` substeps;
a :class:`PlanPlayback` plays, at substep i of the period, the plan's control of knot
``floor(i * sim_dt / plan.dt)`` (capped at the last control), so a period longer than a
knot plays on into the following knots as a robot executing the plan would. With
``carry_remainder`` a period that is not a whole number of substeps carries the rest to
the next period (0.03125 s at 1 ms: 31, 31, 31, 32 substeps); without, every period is
``floor(period / sim_dt)`` substeps (at least one).

Clock: ``t`` is the sum of the periods played; with fixed periods it is counted
(``periods * period``, no float drift) so tick k of a lockstep run is exactly at k * dt.

Units: q rad, dq rad/s, torques N*m, wrenches [force N; torque N*m] in world axes at the
EE frame origin, positions m, times s.
"""
from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from .references import MinJerkSegment, _positive, _vector

__all__ = ["World", "make_world", "EEKinematics", "Disturbance", "ConstantWrench", "PointPayload",
           "PendulumPayload", "Impulse", "LinkMassError", "parse_link_mass_scale",
           "HoldTorque", "PlanPlayback", "StateFeedback", "substeps_in", "check_substep", "Simulation",
           "Task", "TaskTick", "TrackingTask", "GoalTask", "RunRecord", "run_closed_loop"]

EPS = 1e-9  # absorbs float error in accumulated times and substep counts
GRAVITY = 9.81  # m/s^2


# ----------------------------------------------------------------- worlds
@runtime_checkable
class World(Protocol):
    """A simulator of the arm. The caller's state is authoritative: each step starts from the
    (q, dq) given. ``step`` raises RuntimeError (or returns non-finite values) on divergence."""

    nq: int
    nv: int

    def step(self, q, dq, u, sim_dt): ...

    def reset(self) -> None: ...

    @property
    def params(self) -> dict: ...


def make_world(kind: str, urdf, *, ee_frame="EE", timestep=None, disturbances=()) -> World:
    """A world of ``kind`` ("pinocchio": pinocchio ABA + RK4, the solver's own model;
    "mujoco": MuJoCo on the same URDF) for ``urdf``, with the build-time parts of the
    disturbances (pendulum payload, link mass errors) and their attachments (a constant
    wrench the world applies natively). ``timestep`` [s]: the only sim_dt the world accepts
    (required for MuJoCo; None lets the pinocchio world take any)."""
    from .worlds import MuJoCoWorld, PinocchioWorld

    opts = {}
    for d in disturbances:
        for k, v in d.world_options(kind).items():
            if k in opts:
                raise ValueError(f"disturbances: two of them set the world's {k!r}")
            opts[k] = v
    if kind == "pinocchio":
        world = PinocchioWorld(urdf, ee_frame=ee_frame, timestep=timestep, **opts)
    elif kind == "mujoco":
        world = MuJoCoWorld(urdf, timestep=0.001 if timestep is None else timestep, **opts)
    else:
        raise ValueError(f"world: expected 'pinocchio' or 'mujoco', got {kind!r}")
    for d in disturbances:
        d.attach(world)
    return world


class EEKinematics:
    """Forward kinematics of the nominal robot: EE position and the joint torque J(q)^T w of
    a world-axes wrench at the EE frame origin. Args: urdf path, ee_frame name."""

    def __init__(self, urdf, ee_frame):
        import pinocchio as pin

        self._pin = pin
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        if not self.model.existFrame(ee_frame):
            raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {urdf}")
        self.fid = self.model.getFrameId(ee_frame)

    def ee_pos(self, q) -> np.ndarray:
        """(3,) world position [m] of the EE frame origin at q (nq,)."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, q)
        return pin.updateFramePlacement(self.model, self.data, self.fid).translation.copy()

    def wrench_torque(self, q, wrench) -> np.ndarray:
        """(nv,) N*m joint torque J(q)^T w of w = [force; torque] (world axes, EE origin)."""
        pin = self._pin
        J = pin.computeFrameJacobian(self.model, self.data, q, self.fid, pin.LOCAL_WORLD_ALIGNED)
        return J.T @ wrench


# ----------------------------------------------------------------- disturbances
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
        """From a {"mass", "length"[, "damping", "radius"]} dict, passed to the world as given
        (the world validates it and names what is wrong)."""
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


# ----------------------------------------------------------------- commands
# A command answers torque(i, sim_dt, q, dq): the (nu,) N*m it plays at substep i of a period,
# from the state (q, dq) at the start of that substep.
class HoldTorque:
    """A torque (nu,) N*m held over the whole period."""

    def __init__(self, u):
        self.u = np.asarray(u, dtype=np.float64)

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        return self.u


class PlanPlayback:
    """A :class:`gato.planner.Plan` played knot by knot: substep i of a period plays the control
    of knot floor(i * sim_dt / plan.dt) (capped at the last control)."""

    def __init__(self, plan):
        self.plan = plan

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        return self.plan.control(int(math.floor(i / (self.plan.dt / sim_dt) + EPS)))


class StateFeedback:
    """A torque law re-evaluated at every substep from the state, ``law(q, dq) -> (nu,)`` N*m (a
    drive's servo-rate fallback: gato.safety.JointHold / JointBrake). ``last``: the torque of
    the latest substep (None before one)."""

    def __init__(self, law):
        self.law, self.last = law, None

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        self.last = np.asarray(self.law(q, dq), dtype=np.float64)
        return self.last


def command_of(result):
    """The command a planner's answer asks the world to play: a Plan (a warm-up) or a
    gato.planner.StepResult is played knot by knot when it carries a plan, else its torque
    is held."""
    from .planner import Plan

    plan = result if isinstance(result, Plan) else result.plan
    return PlanPlayback(plan) if plan is not None else HoldTorque(result.u)


# ----------------------------------------------------------------- the simulation
def substeps_in(period: float, sim_dt: float) -> int:
    """Whole substeps of ``sim_dt`` in ``period`` (floor, at least one; float error absorbed:
    0.03 / 0.001 is 30)."""
    return max(int(math.floor(period / sim_dt + EPS)), 1)


def check_substep(sim_dt, period: float, period_name: str, *, name="sim_dt", whole=False) -> int:
    """Validate a front end's substep ``sim_dt`` [s] against the control period [s] it splits
    (named ``period_name``): finite, > 0, not longer than the period and, with ``whole``, a
    whole number of substeps per period. Returns :func:`substeps_in` of them. ValueError naming
    ``name``."""
    h = _positive(sim_dt, name, "s")
    if h > period * (1 + EPS):
        raise ValueError(f"{name}: {sim_dt!r} s is longer than the control period {period_name} = {period!r} s")
    if whole and abs(period / h - round(period / h)) > EPS:
        raise ValueError(f"{name}: {h:g} s does not divide the control period {period_name} = {period:g} s")
    return substeps_in(period, h)


class Simulation:
    """A world, the robot state and the clock.

    Args:
        world: a :class:`World`; q0 (nq,) rad, dq0 (nv,) rad/s (default zeros).
        sim_dt: substep [s]. kinematics: an :class:`EEKinematics` (needed for J^T w
        disturbances and the default ``ee_pos``). ee_pos: callable q -> (3,) m used for
        observations (default ``kinematics.ee_pos``). disturbances: run-time Disturbances
        (their build-time parts go to :func:`make_world`). effort_limit: None or (nu,) N*m:
        commands are clamped to +-effort_limit (actuator saturation). carry_remainder: see
        the module docstring. observers: callables ``f(q, dq, u, q_next, dq_next, sim_dt)``
        called after every substep with the state before and after it and the commanded
        (clamped) torque u, disturbance torques excluded: a sensor-rate feed, e.g. for
        :meth:`gato.estimators.OneStepWrenchIdentifier.identify`.
    """

    def __init__(self, world, q0, dq0=None, *, sim_dt, kinematics=None, ee_pos=None, disturbances=(),
                 effort_limit=None, carry_remainder=True, observers=()):
        self.world = world
        self.observers = list(observers)
        for ob in self.observers:
            if not callable(ob):
                raise ValueError(f"observers: expected callables f(q, dq, u, q_next, dq_next, sim_dt), "
                                 f"got {type(ob).__name__}")
        if isinstance(sim_dt, bool) or not isinstance(sim_dt, (int, float, np.floating)) \
                or not math.isfinite(sim_dt) or sim_dt <= 0:
            raise ValueError(f"sim_dt: expected a finite substep > 0 s, got {sim_dt!r}")
        self.sim_dt = float(sim_dt)
        self.kin = kinematics
        self._ee = ee_pos if ee_pos is not None else (kinematics.ee_pos if kinematics is not None else None)
        self.disturbances = [d for d in disturbances if type(d).torque is not Disturbance.torque]
        if self.disturbances and kinematics is None:
            raise ValueError("kinematics: run-time disturbances (wrenches, impulses) need an EEKinematics")
        self.effort_limit = None if effort_limit is None else np.asarray(effort_limit, dtype=np.float64)
        self.carry_remainder = bool(carry_remainder)
        self.reset(q0, dq0)

    def reset(self, q0, dq0=None) -> None:
        """Start over at (q0, dq0) at t = 0; resets the world (pendulum, contact record).
        ValueError naming q0 / dq0 when they are not finite vectors of the world's sizes."""
        nq, nv = getattr(self.world, "nq", None), getattr(self.world, "nv", None)
        self.q = _vector(q0, "q0", nq)
        self.dq = np.zeros(nv if nv is not None else self.q.size) if dq0 is None else _vector(dq0, "dq0", nv)
        self.t, self.periods, self.period_sum, self.owed, self.substeps = 0.0, 0, 0.0, 0.0, 0
        self.diverged = False
        reset = getattr(self.world, "reset", None)
        if callable(reset):
            reset()

    @property
    def x(self) -> np.ndarray:
        """The state [q; dq] (a copy)."""
        return np.concatenate([self.q, self.dq])

    def ee_pos(self, q=None) -> np.ndarray:
        """(3,) EE position [m] at q (default: the current state)."""
        if self._ee is None:
            raise RuntimeError("Simulation.ee_pos: built without kinematics or ee_pos")
        return np.asarray(self._ee(self.q if q is None else q), dtype=np.float64)

    def clamp(self, u) -> np.ndarray:
        return u if self.effort_limit is None else np.clip(u, -self.effort_limit, self.effort_limit)

    def applied(self, command, i: int = 0, q=None, dq=None) -> np.ndarray:
        """The (clamped) torque ``command`` plays at substep i of a period from (q, dq)
        (default: the current state)."""
        return self.clamp(command.torque(i, self.sim_dt, self.q if q is None else q, self.dq if dq is None else dq))

    def advance(self, command, period: float, fixed=True) -> int:
        """Play ``command`` for ``period`` [s]; returns the substeps taken. ``fixed``: periods
        are all the same length (the clock is counted, not summed). A world that raises
        RuntimeError or returns a non-finite state sets ``diverged`` (state NaN) and stops."""
        if not (isinstance(period, (int, float, np.floating)) and math.isfinite(period) and period > 0):
            raise ValueError(f"period: expected a finite duration > 0 s, got {period!r}")
        self.periods += 1
        self.period_sum += period
        if self.carry_remainder:
            self.owed += period
            n = int(math.floor(self.owed / self.sim_dt + EPS))
            self.owed = max(self.owed - n * self.sim_dt, 0.0)
        else:
            n = substeps_in(period, self.sim_dt)
        q, dq = self.q, self.dq
        for i in range(n):
            u = u_cmd = self.applied(command, i, q, dq)
            for d in self.disturbances:
                tau = d.torque(self.substeps * self.sim_dt, q, dq, self.kin)
                if tau is not None:
                    u = u + tau
            q_prev, dq_prev = q, dq
            try:
                q, dq = self.world.step(q, dq, u, self.sim_dt)
            except RuntimeError:
                q = None
            if q is None or not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq))):
                self.diverged = True
                q, dq = np.full_like(self.q, np.nan), np.full_like(self.dq, np.nan)
                break
            for ob in self.observers:
                ob(q_prev, dq_prev, u_cmd, q, dq, self.sim_dt)
            self.substeps += 1
        self.q, self.dq = q, dq
        self.t = self.periods * period if fixed else self.period_sum
        return n


# ----------------------------------------------------------------- tasks
@dataclass
class TaskTick:
    """A task's answer at one tick: the ``window`` to solve against and per-tick ``columns``
    ({name: value}) for the run record."""

    window: object
    columns: dict = field(default_factory=dict)


class Task(ABC):
    """What the closed loop tracks. ``t_end`` [s]: the run lasts while t < t_end;
    ``end_reason``: the stop reason when it runs out of time; ``stop_reason``: set by
    :meth:`observe` when it stops the run early."""

    t_end: float
    end_reason: str = "time_limit"
    stop_reason: str = ""
    #: The per-tick columns :meth:`observe` returns (present in the record even without ticks).
    columns: tuple = ()

    @abstractmethod
    def begin(self, ee0) -> object:
        """The window of the seeding solve at t = 0 (ee0: EE position at the start)."""

    @abstractmethod
    def observe(self, t, q, dq, ee, events: list) -> TaskTick | None:
        """The tick at time t after the world advanced; None stops the run (set stop_reason)."""

    def results(self) -> dict:
        """Task results for the record (none by default)."""
        return {}


class TrackingTask(Task):
    """Follow ``reference`` (a gato.references.Reference) for ``duration`` [s] with N-knot
    windows of spacing dt; stops early when the next window would leave the reference's data
    ("reference_end"). Columns: goal_distances (||ee - knot 1||), goal_distances_knot0,
    references (knot 0)."""

    end_reason = "sim_time"
    columns = ("goal_distances", "goal_distances_knot0", "references")

    def __init__(self, reference, N, dt, duration):
        self.reference, self.N, self.dt, self.t_end = reference, int(N), float(dt), float(duration)

    def begin(self, ee0):
        return self.reference.window(0.0, self.N, self.dt)

    def observe(self, t, q, dq, ee, events):
        if not self.reference.covers(t, self.N, self.dt):
            self.stop_reason = "reference_end"
            return None
        win = self.reference.window(t, self.N, self.dt)
        p = win.positions
        return TaskTick(win, dict(goal_distances=float(np.linalg.norm(ee - p[min(1, len(p) - 1)])),
                                  goal_distances_knot0=float(np.linalg.norm(ee - p[0])), references=p[0].copy()))


class GoalTask(Task):
    """Visit ``goals`` (G, 3) [m] in order. A goal is reached when ||ee - goal|| < threshold [m]
    and ||dq||_velocity_norm < velocity_threshold [rad/s] have held at every tick for
    ``settle_time`` [s]; after ``timeout`` [s] it is abandoned ("timeout"). On a reach or a
    timeout the next goal switches in at that tick; the reference travels from the EE
    position at the switch to the goal along a ``ramp`` [s] minimum-jerk segment
    (gato.references.MinJerkSegment; 0 = a step). Columns: goal_distances (to the goal active
    before any switch), velocity_norms, active_goal, goal_distances_knot0, references.
    Events: ("goal", {index, outcome, t, dist, vel})."""

    columns = ("goal_distances", "goal_distances_knot0", "references", "velocity_norms", "active_goal")

    def __init__(self, goals, N, dt, *, timeout, threshold, velocity_threshold, velocity_norm, settle_time, ramp):
        try:
            np.linalg.norm(np.ones(2), ord=velocity_norm)
        except (ValueError, TypeError):
            raise ValueError(f"velocity_norm: expected a vector norm order (1, 2, np.inf, ...), "
                             f"got {velocity_norm!r}") from None
        self.goals = np.asarray(goals, dtype=np.float64)
        self.N, self.dt = int(N), float(dt)
        self.timeout, self.threshold, self.vel_threshold = timeout, threshold, velocity_threshold
        self.vel_norm, self.settle, self.ramp = velocity_norm, settle_time, ramp
        self.t_end = timeout * len(self.goals)
        G = len(self.goals)
        self.outcomes, self.reached_t = ["not_reached"] * G, [None] * G
        self.start_t, self.durations = [None] * G, [None] * G

    def _segment(self, t, ee):
        self.ref = MinJerkSegment(ee, self.goals[self.gi], t, self.ramp)

    def begin(self, ee0):
        self.gi, self.goal_start, self.dwell_from = 0, 0.0, None
        self.start_t[0] = 0.0
        self._segment(0.0, ee0)
        return self.ref.window(0.0, self.N, self.dt)

    def observe(self, t, q, dq, ee, events):
        gi = self.gi
        dist = float(np.linalg.norm(ee - self.goals[gi]))
        vel = float(np.linalg.norm(dq, ord=self.vel_norm))
        if dist < self.threshold and vel < self.vel_threshold:
            if self.dwell_from is None:
                self.dwell_from = t
        else:
            self.dwell_from = None
        reached = self.dwell_from is not None and t - self.dwell_from >= self.settle - EPS
        if reached or t - self.goal_start >= self.timeout - EPS:
            self.outcomes[gi] = "reached" if reached else "timeout"
            if reached:
                self.reached_t[gi] = t
            self.durations[gi] = t - self.goal_start
            events.append(("goal", dict(index=gi, outcome=self.outcomes[gi], t=t, dist=dist, vel=vel)))
            self.gi, self.dwell_from = gi + 1, None
            if self.gi >= len(self.goals):
                self.stop_reason = "goals_done"  # the finishing tick solves nothing and records no row
                return None
            self.goal_start = self.start_t[self.gi] = t
            self._segment(t, ee)
        win = self.ref.window(t, self.N, self.dt)
        return TaskTick(win, dict(goal_distances=dist, velocity_norms=vel, active_goal=gi,
                                  goal_distances_knot0=float(np.linalg.norm(ee - win.positions[0])),
                                  references=win.positions[0].copy()))

    def results(self) -> dict:
        G = len(self.goals)
        n = sum(o == "reached" for o in self.outcomes)
        return dict(goals=self.goals, goal_outcomes=list(self.outcomes), goal_reached_times=list(self.reached_t),
                    goal_start_times=list(self.start_t), goal_durations=list(self.durations),
                    goal_timeout=self.timeout, goals_reached=n, all_reached=n == G,
                    time_to_all_reached=float(max(self.reached_t)) if n == G else None)


# ----------------------------------------------------------------- the run record
_INT_COLUMNS = ("best_trajectory_id", "active_goal")


class RunRecord:
    """What a closed-loop run produced, one row per planner step (measured after the world
    advanced, before the step's solve).

    Columns (arrays after :meth:`finish`): ``timestamps`` (T,) s; ``ee_actual`` (T, 3) m;
    ``joint_positions`` (T, nq) rad; ``joint_velocities`` (T, nv) rad/s; ``torques`` (T, nu)
    N*m (knot 0 of the step's command, as applied); ``solve_times`` / ``step_wall_times``
    (T,) ms (the planner's own solve time / the wall time of its step); ``best_trajectory_id``
    (T,); the task's columns (goal_distances, goal_distances_knot0, references, ...).
    ``planner_stats``: the PlannerStats of every step. ``events``: [(t, kind, data)].
    """

    def __init__(self, nq, nv, nu, deadline_s):
        self.shapes = {"ee_actual": (0, 3), "references": (0, 3), "joint_positions": (0, nq),
                       "joint_velocities": (0, nv), "torques": (0, nu)}
        self.deadline_s = float(deadline_s)
        self.columns = {k: [] for k in ("timestamps", "solve_times", "step_wall_times", "ee_actual",
                                        "joint_positions", "joint_velocities", "torques", "best_trajectory_id")}
        self.planner_stats, self.events = [], []
        self.stop_reason, self.sim_time, self.results = "", 0.0, {}

    def add(self, **cols) -> None:
        for k, v in cols.items():
            self.columns.setdefault(k, []).append(v)

    def finish(self, stop_reason: str, sim_time: float, results: dict) -> None:
        self.stop_reason, self.sim_time, self.results = stop_reason, float(sim_time), dict(results)

    def stats(self) -> dict:
        """The record as one dict: the columns as arrays (ints where they count), the task
        results, and :meth:`summary`."""
        out = {}
        for k, v in self.columns.items():
            a = np.array(v, dtype=int if k in _INT_COLUMNS else np.float64)
            out[k] = np.zeros(self.shapes[k]) if (not v and k in self.shapes) else a
        out["ee_positions"] = out["ee_actual"]  # alias
        out.update(self.results)
        out.update(self.summary(out))
        return out

    def summary(self, cols=None) -> dict:
        """Scalars of the run: ``mean_tracking_error`` / ``max_tracking_error`` m (over
        goal_distances_knot0), ``mean_goal_distance`` m, ``deadline_s`` s, ``deadline_misses``
        (steps whose wall time exceeded deadline_s) and ``deadline_miss_rate``, ``n_ticks``,
        ``sim_time`` s, ``stop_reason``."""
        c = cols if cols is not None else {k: np.asarray(v, dtype=float) for k, v in self.columns.items()
                                           if k in ("goal_distances_knot0", "goal_distances", "step_wall_times")}
        err = np.asarray(c.get("goal_distances_knot0", []), dtype=float)
        gd = np.asarray(c.get("goal_distances", []), dtype=float)
        wall = np.asarray(c["step_wall_times"], dtype=float)
        misses = int(np.sum(wall > self.deadline_s * 1000.0))
        nan = float("nan")
        return dict(mean_tracking_error=float(np.mean(err)) if err.size else nan,
                    max_tracking_error=float(np.max(err)) if err.size else nan,
                    mean_goal_distance=float(np.mean(gd)) if gd.size else nan, deadline_s=self.deadline_s,
                    deadline_misses=misses, deadline_miss_rate=float(misses / wall.size) if wall.size else 0.0,
                    n_ticks=int(wall.size), sim_time=self.sim_time, stop_reason=self.stop_reason)

    def plot(self, path, title=None):
        """PNG of the run (gato.plotting.plot_tracking)."""
        from .plotting import plot_tracking

        return plot_tracking(self, path, title=title)


# ----------------------------------------------------------------- the loop
def run_closed_loop(sim: Simulation, planner, task: Task, *, paced=False, budget_s=None, on_tick=None,
                    on_event=None, first_command=None) -> RunRecord:
    """Close the loop between ``sim``, a :class:`gato.planner.Planner` and ``task``::

        planner.reset(x0); play planner.warmup(x0, task.begin(ee0)) (or a first step)
        while t < task.t_end:
            advance the world one period (lockstep: planner.dt; paced: the previous step's
              measured wall time), observe, ask the task for the window (or stop),
            step the planner (dt_elapsed = the substeps actually played), record

    ``on_tick(record)`` after each recorded row; ``on_event(t, kind, data)`` for task and
    simulation events. ``first_command``: a command (``torque(i, sim_dt, q, dq)``) the world
    plays for the first period instead of the planner's first answer (which still warms the
    planner up), e.g. a :class:`StateFeedback` start-pose hold while an identifier observes.
    Returns the :class:`RunRecord` (finished).
    """
    rec = RunRecord(sim.q.size, sim.dq.size, planner.nu_act, planner.dt)
    for k in task.columns:
        rec.columns.setdefault(k, [])
    x = sim.x
    planner.reset(x)
    first = task.begin(sim.ee_pos())
    if planner.capabilities.warmup:
        command = command_of(planner.warmup(x, first))
    else:
        command = command_of(planner.step(x, first, budget_s=budget_s))
    if first_command is not None:
        if not callable(getattr(first_command, "torque", None)):
            raise ValueError(f"first_command: expected a command with torque(i, sim_dt, q, dq), got "
                             f"{type(first_command).__name__}")
        command = first_command
    period, stop = planner.dt, task.end_reason
    while sim.t < task.t_end - EPS:
        n = sim.advance(command, period if paced else planner.dt, fixed=not paced)
        t = sim.t
        if sim.diverged:
            rec.events.append((t, "diverged", {}))
            stop = "diverged"
            break
        ee = sim.ee_pos()
        events = []
        tick = task.observe(t, sim.q, sim.dq, ee, events)
        for kind, data in events:
            rec.events.append((t, kind, data))
            if on_event is not None:
                on_event(t, kind, data)
        if tick is None:
            stop = task.stop_reason
            break
        t0 = time.perf_counter()
        res = planner.step(sim.x, tick.window, dt_elapsed=max(n, 1) * sim.sim_dt, budget_s=budget_s)
        wall = time.perf_counter() - t0
        period = wall
        command = command_of(res)
        rec.planner_stats.append(res.stats)
        rec.add(timestamps=t, solve_times=res.stats.solve_s * 1000.0, step_wall_times=wall * 1000.0,
                ee_actual=ee, joint_positions=sim.q.copy(), joint_velocities=sim.dq.copy(),
                torques=sim.applied(command, 0), best_trajectory_id=int(res.stats.best_id), **tick.columns)
        if on_tick is not None:
            on_tick(rec)
    rec.finish(stop, sim.t, task.results())
    return rec
