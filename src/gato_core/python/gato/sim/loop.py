"""One simulation loop: a world, a zero-order-hold stepping rule, disturbances, tasks, and
one run record.

Layers (each usable alone)::

    World         step(q, dq, u, sim_dt) -> (q, dq)   PinocchioWorld, MuJoCoWorld (gato.sim.*_world)
    Disturbance   world options at build time, joint torques per substep (gato.sim.disturbances)
    command       what a world plays over a period (gato.sim.commands)
    Simulation    state + clock; advance(command, period): ZOH over sim_dt substeps (gato.sim.clock)
    Task          the reference window of each tick, its gates and its stop rule (gato.sim.tasks)
    run_closed_loop(sim, planner, task) -> RunRecord   (lockstep or paced; gato.sim.record)

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
from typing import Protocol, runtime_checkable

import numpy as np

from ..core.references import _vector
from .clock import EPS, substeps_in
from .commands import command_of
from .disturbances import Disturbance
from .record import RunRecord
from .tasks import Task

__all__ = ["World", "make_world", "Simulation", "run_closed_loop"]



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
    from .mujoco_world import MuJoCoWorld
    from .pinocchio_world import PinocchioWorld

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




# ----------------------------------------------------------------- the simulation
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

# ----------------------------------------------------------------- the run record
# ----------------------------------------------------------------- the loop
def run_closed_loop(sim: Simulation, planner, task: Task, *, paced=False, budget_s=None, on_tick=None,
                    on_event=None, first_command=None, feedback=None, guard=None) -> RunRecord:
    """Close the loop between ``sim``, a :class:`gato.planner.Planner` and ``task``::

        planner.reset(x0); play planner.warmup(x0, task.begin(ee0)) (or a first step)
        while t < task.t_end:
            advance the world one period (lockstep: planner.dt; paced: the previous step's
              measured wall time; paced="solve": its solve time, PlannerStats.solve_s),
              observe, ask the task for the window (or stop),
            step the planner (dt_elapsed = the substeps actually played), record

    ``on_tick(record)`` after each recorded row; ``on_event(t, kind, data)`` for task and
    simulation events. ``first_command``: a command (``torque(i, sim_dt, q, dq)``) the world
    plays for the first period instead of the planner's first answer (which still warms the
    planner up), e.g. a :class:`StateFeedback` start-pose hold while an identifier observes.
    ``feedback``: None (each plan played open loop, knot by knot) or a
    :class:`gato.sim.commands.FeedbackLaw` (each plan played with PD and / or its own gains).
    ``guard``: None or a :class:`gato.sim.guard.RunawayGuard`, checked after every period: a
    trip ends the run (``stop_reason = "runaway"``, a ``"runaway"`` event with the reason,
    ``results["runaway"]``) after the guard's fallback held the arm for its ``settle_s``.
    Returns the :class:`RunRecord` (finished).
    """
    rec = RunRecord(sim.q.size, sim.dq.size, planner.nu_act, planner.dt)
    for k in task.columns:
        rec.columns.setdefault(k, [])
    x = sim.x
    planner.reset(x)
    if guard is not None:
        guard.reset()
    first = task.begin(sim.ee_pos())
    if planner.capabilities.warmup:
        command = command_of(planner.warmup(x, first), feedback)
    else:
        command = command_of(planner.step(x, first, budget_s=budget_s), feedback)
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
        tripped = guard.check(sim.q, sim.dq) if guard is not None else None
        if tripped is not None:
            _runaway(sim, guard, tripped, rec, on_event)
            stop = "runaway"
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
        # paced: the world moves on while the step ran (its wall time), or, paced == "solve" (the
        # reference's "advance the sim by the solve time"), while the optimizer alone ran
        period = res.stats.solve_s if paced == "solve" else wall
        command = command_of(res, feedback)
        rec.planner_stats.append(res.stats)
        rec.add(timestamps=t, solve_times=res.stats.solve_s * 1000.0, step_wall_times=wall * 1000.0,
                ee_actual=ee, joint_positions=sim.q.copy(), joint_velocities=sim.dq.copy(),
                torques=sim.applied(command, 0), best_trajectory_id=int(res.stats.best_id), **tick.columns)
        if on_tick is not None:
            on_tick(rec)
    results = task.results()
    if stop == "runaway":
        results["runaway"] = rec.events[-1][2]["reason"]
    rec.finish(stop, sim.t, results)
    return rec


def _runaway(sim: Simulation, guard, tripped, rec: RunRecord, on_event) -> None:
    """A guard trip at ``sim.t``: record it, then hold the arm with the guard's fallback for its
    ``settle_s`` (the world goes on under a safe command; it is not left to diverge)."""
    reason, joint = tripped
    guard.trips += 1
    t = sim.t
    data = {"reason": reason, "joint": joint}
    if guard.settle_s > 0:
        sim.advance(guard.fallback(sim.q), guard.settle_s, fixed=False)
        data.update(settled_t=sim.t, settled_max_qd=float(np.max(np.abs(sim.dq))) if not sim.diverged else float("nan"))
    rec.events.append((t, "runaway", data))
    if on_event is not None:
        on_event(t, "runaway", data)
