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

__all__ = ["Capabilities", "Plan", "PlannerStats", "StepResult", "ReplayInput", "Planner", "register_planner",
           "planners", "planner_class", "make"]


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


@dataclass(init=False)
class Plan:
    """A state-control trajectory, the one plan type of the project (a planner's output, the
    plan executor's input, gato_msgs/Plan).

    ``xu`` flat ``[x_0, u_0, x_1, u_1, ..., x_{N-1}]`` (N * (nx + nu) - nu,), x = [q; qd]
    (rad, rad/s), knots ``dt`` [s] apart; controls are full width ``nu``, the first ``nu_act``
    of them actuated torques (N*m). ``K``: None, or the plan's own time-varying feedback gains
    (N - 1, nu, nx), ``u = u_k + K_k (x - x_k)`` (N*m/rad on q, N*m*s/rad on qd;
    :meth:`gato.BSQP.feedback_gains`).

    Where it is published (the ROS layer): ``stamp_ns`` the time of knot 0 [ns],
    ``joint_names`` the joints of x and u in order, ``seq`` / ``reset_epoch`` the publisher's
    plan counter and reset epoch (consumers drop older ones), ``integrator`` the solver's
    ("euler" | "semi_implicit" | "rk4"). ``n_knots`` / ``knot_dt`` are the message's names of
    ``N`` / ``dt`` (accepted as keywords, readable as properties).

    Raises ValueError naming ``xu`` when its length is not N * (nx + nu) - nu.
    """

    xu: np.ndarray
    nx: int
    nu: int
    nu_act: int
    N: int
    dt: float
    K: np.ndarray | None
    stamp_ns: int
    joint_names: list
    seq: int
    reset_epoch: int
    integrator: str

    def __init__(self, xu, nx, nu, nu_act=None, N=None, dt=None, K=None, *, stamp_ns=0, joint_names=(),
                 seq=0, reset_epoch=0, integrator="euler", n_knots=None, knot_dt=None):
        if (N is None) == (n_knots is None):
            raise ValueError(f"N: give the knot count once (N or n_knots), got N={N!r}, n_knots={n_knots!r}")
        if (dt is None) == (knot_dt is None):
            raise ValueError(f"dt: give the knot spacing once (dt or knot_dt), got dt={dt!r}, knot_dt={knot_dt!r}")
        self.nx, self.nu = int(nx), int(nu)
        self.nu_act = self.nu if nu_act is None else int(nu_act)
        self.N = int(N if n_knots is None else n_knots)
        self.dt = float(dt if knot_dt is None else knot_dt)
        self.xu = np.array(xu, dtype=np.float64).reshape(-1)
        size = self.N * (self.nx + self.nu) - self.nu
        if self.nx < 1 or self.nu < 0 or self.N < 1 or self.xu.size != size:
            raise ValueError(f"xu: expected n_knots*(nx+nu)-nu = {size} values for nx={self.nx}, nu={self.nu}, "
                             f"n_knots={self.N}, got {self.xu.size}")
        self.K = K
        self.stamp_ns = int(stamp_ns)
        self.joint_names = [str(n) for n in joint_names]
        self.seq, self.reset_epoch, self.integrator = int(seq), int(reset_epoch), str(integrator)

    @property
    def n_knots(self) -> int:
        """``N``, the knot count (gato_msgs/Plan's name)."""
        return self.N

    @property
    def knot_dt(self) -> float:
        """``dt`` [s], the knot spacing (gato_msgs/Plan's name)."""
        return self.dt

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

    def states(self) -> np.ndarray:
        """(N, nx) states [q; qd] per knot."""
        s = self.nx + self.nu
        return np.stack([self.xu[k * s:k * s + self.nx] for k in range(self.N)])

    def controls(self) -> np.ndarray:
        """(N - 1, nu) inputs per knot interval [N*m]."""
        s = self.nx + self.nu
        if self.N < 2:
            return np.zeros((0, self.nu))
        return np.stack([self.xu[k * s + self.nx:(k + 1) * s] for k in range(self.N - 1)])


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
    """One planner step, the one step-result type of the project (every planner's, and
    :meth:`gato.MPCController.step`'s). Construct it with keywords: its field order is the
    reference API's MPCController result (``u, best_id, xu_best, solve, hypo_stats, ...,
    diverged, fallback``; test/test_controller.py) with the planner fields before the last two.

    Every planner: ``u`` (nu_act,) N*m the actuated torque to apply now (always finite; the
    MPCController's in the caller's array kind, its contact-force slots in ``fc``),
    ``plan`` the :class:`Plan` it came from (None for planners without ``plan_output``),
    ``stats`` a :class:`PlannerStats` (None from the bare MPCController), ``detail`` the
    planner's own result object (bsqp: the MPCController's StepResult of the tick; sampling:
    its rollout info), ``replay`` None, or (bsqp with ``record_replay``) what an exact re-run of
    this step needs (:class:`ReplayInput`).

    The batched SQP's fields (:class:`gato.MPCController`; defaults for the other planners;
    B = batch size):

    - ``best_id``: batch entry whose plan won.
    - ``xu_best`` (xu_size,): the winning plan ``[x_0, u_0, ..., x_{N-1}]``; after
      a divergence, the hold-at-x plan carrying the fallback torque.
    - ``solve``: the raw :class:`gato.SolveResult` of this tick.
    - ``hypo_stats``: ``hypotheses.get_stats()`` (None without a hypothesis batch).
    - ``pred_err``: ||x_measured - knot 0 of the warm start|| (rad, rad/s mixed);
      with ``warm_start="shift"`` that is knot 1 of the previous plan, the model's
      one-step prediction. 0 right after ``reset(x0)`` at x0.
    - ``reseeded``: the warm start was replaced by a hold at the measured state
      (and the duals reset) before this solve.
    - ``fc``: contact-wrench slots of the winner's first control (None on builds
      without contact-force controls).
    - ``iterations``: SQP iterations the winning entry ran.
    - ``budget_hit``: the ``budget_s`` wall-clock budget stopped the SQP loop.
    - ``wall_s``: time from entry to return of ``step`` [s].
    - ``admm_linsys``: the ADMM inner-loop solver used ("pcg" | "bdsv_factor"), ""
      when no row group runs ADMM.
    - ``limits``: the limit mechanism in force ("admm" | "barrier" | "al" |
      "telemetry"), "" when none is installed.
    - ``row_viol``: the winner's true violation per row group (None without row groups).
    - ``diverged``: no batch entry produced a finite plan (non-finite merit or
      trajectory); ``u`` is then the fallback torque.
    - ``fallback``: "" normally; "gravity" when ``u`` is gravity compensation at
      the measured state (clamped to the URDF effort limits) after a divergence;
      "best_finite" when the selected entry diverged and the lowest-merit finite
      entry was used instead.
    """

    u: np.ndarray
    best_id: int = 0
    xu_best: np.ndarray = None
    solve: object = None
    hypo_stats: dict | None = None
    pred_err: float = 0.0
    reseeded: bool = False
    fc: np.ndarray = None
    iterations: int = 0
    budget_hit: bool = False
    wall_s: float = 0.0
    admm_linsys: str = ""
    limits: str = ""
    row_viol: np.ndarray = None
    plan: Plan | None = None
    stats: PlannerStats | None = None
    detail: object = None
    replay: "ReplayInput | None" = None
    diverged: bool = False
    fallback: str = ""


@dataclass
class ReplayInput:
    """What an exact re-run of one bsqp step needs besides its measured state and reference
    (recorded as gato_msgs/SolveInput; :meth:`gato.MPCController.carried_state`):

    ``xu_warm`` (rows, S) the warm start the step started from (rows 1 when every batch entry
    shares it, else B); ``solver_state`` (B, K) the solver state it started from, or None when
    not carried; ``capped_out`` / ``force_reseed`` the controller's flags;
    ``wrench_hypotheses`` (B, 6) the world wrenches the hypothesis batch programmed [N, N*m],
    or None without wrench hypotheses.
    """

    xu_warm: np.ndarray
    solver_state: np.ndarray | None = None
    capped_out: bool = False
    force_reseed: bool = False
    wrench_hypotheses: np.ndarray | None = None


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
        applied (None: the planner's dt); ``budget_s`` [s]: wall-clock budget (None: none).
        ``x_measured`` may be a :class:`gato.core.state.MeasuredState` (the ROS controller passes
        one): already checked, take it as it is (:func:`gato.core.state.state_vector`);
        ``np.asarray`` gives its read-only (nx,) array."""

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
