"""The planner interface: what every controller behind the ROS layer, the closed-loop
driver and the gym policy looks like, and the registry that names them.

A planner is built from a robot and a config, reset at a state, then stepped once per
control tick::

    planner = gato.planner.make("bsqp", "iiwa14", {"N": 32, "dt": 0.03125})
    planner.reset(x0)
    res = planner.step(x_measured, window, dt_elapsed=0.01, budget_s=0.005)
    res.u      # (nu_a,) N*m actuated torque to apply now
    res.plan   # the Plan it came from (a state-control trajectory), or None
    res.stats  # PlannerStats: iterations, solve time, wall time, fallback ...

``window`` is a :class:`gato.references.ReferenceWindow` (EE targets on a time grid).
What a planner can do is declared in :class:`Capabilities` (typed flags), never probed
with getattr. Planners register by name; adding one is one line::

    register_planner("sampling", "gato.sampling_planner:SamplingPlanner")

(a class object works as well as a lazy "module:Class" path). Units: x = [q; qd] (rad,
rad/s), torques N*m, positions m, times s.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Capabilities", "Plan", "PlannerStats", "StepResult", "Planner", "register_planner", "planners",
           "planner_class", "make"]


@dataclass(frozen=True)
class Capabilities:
    """What a planner offers (the driver and the ROS layer branch on these, not on attributes).

    - ``batch``: solves a batch of problems per step (``PlannerStats.best_id`` names the winner).
    - ``hypotheses``: accepts a hypothesis batch (model hypotheses scored against measurements).
    - ``plan_output``: ``StepResult.plan`` is a state-control trajectory a plan executor can
      interpolate (False: only the torque of this tick).
    - ``warmup``: :meth:`Planner.warmup` runs a seeding solve and returns a plan.
    - ``budget``: honours ``budget_s`` (stops its iterations to fit a wall-clock budget).
    - ``warm_start_io``: the warm start can be read and installed (exact replay of a tick).
    """

    batch: bool = False
    hypotheses: bool = False
    plan_output: bool = False
    warmup: bool = False
    budget: bool = False
    warm_start_io: bool = False


@dataclass
class Plan:
    """A state-control trajectory: ``xu`` flat ``[x_0, u_0, x_1, u_1, ..., x_{N-1}]``
    ((N - 1) * (nx + nu) + nx,), knots ``dt`` [s] apart; controls are full width ``nu``,
    the first ``nu_act`` of them actuated torques (N*m). ``K``: None, or the plan's own
    time-varying feedback gains (N - 1, nu, nx), ``u = u_k + K_k (x - x_k)`` (N*m/rad on q,
    N*m*s/rad on qd; :meth:`gato.BSQP.feedback_gains`)."""

    xu: np.ndarray
    nx: int
    nu: int
    nu_act: int
    N: int
    dt: float
    K: np.ndarray | None = None

    def control(self, k: int) -> np.ndarray:
        """(nu_act,) actuated torque of knot k, k clamped to [0, N - 2] (a copy)."""
        k = min(max(int(k), 0), self.N - 2)
        i = self.nx + (self.nx + self.nu) * k
        return np.array(self.xu[i:i + self.nu_act], dtype=np.float64)

    def state(self, k: int) -> np.ndarray:
        """(nx,) state of knot k, k clamped to [0, N - 1] (a copy)."""
        k = min(max(int(k), 0), self.N - 1)
        i = (self.nx + self.nu) * k
        return np.array(self.xu[i:i + self.nx], dtype=np.float64)


@dataclass
class PlannerStats:
    """Per-step statistics every planner reports (planner-specific extras in ``extra``).

    ``solve_s`` [s]: the optimizer's own time (planners without one: the step's wall time);
    ``wall_s`` [s]: entry to return of ``step``; ``iterations``: optimizer iterations of the
    result used; ``best_id``: winning batch entry (0 without a batch); ``fallback``: "" or the
    safety fallback that produced ``u`` ("gravity", "best_finite", ...); ``budget_hit``: the
    budget stopped the iterations; ``extra``: {name: value} the planner adds.
    """

    solve_s: float = 0.0
    wall_s: float = 0.0
    iterations: int = 0
    best_id: int = 0
    fallback: str = ""
    budget_hit: bool = False
    extra: dict = field(default_factory=dict)


@dataclass
class StepResult:
    """One planner step: ``u`` (nu_act,) N*m the actuated torque to apply now (always finite),
    ``plan`` the :class:`Plan` it came from (None for planners without ``plan_output``),
    ``stats`` a :class:`PlannerStats`, ``detail`` the planner's own result object (BSQP: the
    :class:`gato.controller.StepResult` of the tick)."""

    u: np.ndarray
    plan: Plan | None
    stats: PlannerStats
    detail: object = None


class Planner(ABC):
    """Base class of the planners. Subclasses set ``capabilities`` and implement
    :meth:`reset` and :meth:`step`; they expose ``nx``, ``nu_act`` (actuated torques), ``N``
    (knots of the windows they want) and ``dt`` (their knot spacing [s])."""

    #: What this planner offers (a class attribute: known before construction).
    capabilities: Capabilities = Capabilities()
    nx: int
    nu_act: int
    N: int
    dt: float

    @abstractmethod
    def reset(self, x0) -> None:
        """Forget all carried state and start at x0 (nx,)."""

    @abstractmethod
    def step(self, x_measured, reference, dt_elapsed=None, budget_s=None) -> StepResult:
        """One control tick from the measured state (nx,) toward ``reference`` (a
        ReferenceWindow). ``dt_elapsed`` [s]: how long the previous command was actually
        applied (None: the planner's dt); ``budget_s`` [s]: wall-clock budget (None: none)."""

    def warmup(self, x, reference) -> Plan | None:
        """Seeding solve before the first tick; the plan to play until the first step.
        The base planner has none (``capabilities.warmup`` False): returns None."""
        return None


# ----------------------------------------------------------------- the registry
_REGISTRY: dict = {}


def register_planner(name: str, target) -> None:
    """Register a planner under ``name``: a :class:`Planner` subclass or a lazy
    ``"module:Class"`` path imported on first use. Re-registering a name replaces it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty planner name, got {name!r}")
    if isinstance(target, str):
        if ":" not in target:
            raise ValueError(f"target: expected 'module:Class', got {target!r}")
    elif not (isinstance(target, type) and issubclass(target, Planner)):
        raise ValueError(f"target: expected a Planner subclass or 'module:Class', got {target!r}")
    _REGISTRY[name] = target


def planners() -> list:
    """Names of the registered planners, sorted."""
    return sorted(_REGISTRY)


def planner_class(name: str) -> type:
    """The Planner subclass registered as ``name`` (imported now if registered lazily)."""
    if name not in _REGISTRY:
        raise ValueError(f"planner: unknown planner {name!r}; registered: {planners()}")
    target = _REGISTRY[name]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr)
        if not (isinstance(target, type) and issubclass(target, Planner)):
            raise ValueError(f"planner: {name!r} resolves to {target!r}, not a Planner subclass")
        _REGISTRY[name] = target
    return target


def make(name: str, robot, config=None) -> Planner:
    """Construct the planner registered as ``name`` for ``robot`` (a registered plant name or
    a URDF path) with ``config`` (a dict of that planner's settings; None: defaults)."""
    return planner_class(name)(robot, config)


register_planner("bsqp", "gato.planners.bsqp_planner:BSQPPlanner")
register_planner("sampling", "gato.sampling.planner:SamplingPlanner")
register_planner("osc", "gato.planners.osc_planner:OSCPlanner")
