"""SimMPC settings: :class:`SimMPCConfig` and its coarse-to-fine :class:`SimMPCStage`.

Times are in sim steps of the planning model (``model.opt.timestep`` seconds each) unless a
field says seconds. Every field is validated on construction and on :meth:`SimMPCConfig.add`;
a bad value raises ``ValueError`` naming the field.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["SimMPCConfig", "SimMPCStage", "PLANNERS", "INTERPOLATIONS", "BACKENDS", "CUDA_GRAPH_MODES"]

#: "mppi": elites weighted by exp(-(c - c_min) / temperature); "cem": elites weighted equally (cross-entropy);
#: "ilqr": iLQR over commands held for node_steps (gato.sampling.ilqr), max_iterations per plan.
PLANNERS = ("mppi", "cem", "ilqr")
INTERPOLATIONS = ("linear", "cubic", "zero")
BACKENDS = ("cpu", "warp")  # rollout engines: mujoco.rollout, mujoco_warp
#: backend "warp" on a CUDA device: "step" replays one captured CUDA graph per sim step, "none"
#: launches every kernel from Python.
CUDA_GRAPH_MODES = ("none", "step")


def _int(v, name: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < lo:
        raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    return int(v)


def _float(v, name: str, lo: float = -math.inf, *, strict: bool = False, hi: float = math.inf) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)) \
            or (float(v) <= lo if strict else float(v) < lo) or float(v) > hi:
        rel = ">" if strict else ">="
        top = "" if hi == math.inf else f" and <= {hi}"
        raise ValueError(f"{name}: expected a finite number {rel} {lo}{top}, got {v!r}")
    return float(v)


def _nonneg_array(v, name: str):
    """A float or a 1-D array of finite values >= 0 (returned as float or ndarray)."""
    a = np.asarray(v, dtype=np.float64) if not isinstance(v, (bool, str)) else None
    if a is None or a.ndim > 1 or a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected a finite number or a 1-D array of them, got {v!r}")
    if np.any(a < 0):
        raise ValueError(f"{name}: must be >= 0 (a standard deviation), got {v!r}")
    return float(a) if a.ndim == 0 else a.copy()


@dataclass(frozen=True)
class SimMPCStage:
    """One stage of a plan's iterations, coarse to fine.

    Args:
        iters: iterations this stage runs (>= 1).
        dt: the rollouts' timestep [s]. None: the planning model's own (fine) step. A float:
            one coarse step for the whole rollout; it must be an integer multiple k >= 1 of the
            model's timestep, and each coarse step applies the plan's command of its first fine
            step and counts k fine steps of running cost. A list of (end_fraction, dt or None):
            piecewise, e.g. ``[(0.25, None), (1.0, 0.04)]`` steps the first quarter of the horizon
            at the fine step and the rest at 0.04 s (end fractions increasing, the last 1.0).
    """

    iters: int
    dt: Union[None, float, Sequence[Tuple[float, Optional[float]]]] = None

    def __post_init__(self):
        _int(self.iters, "stages.iters", 1)
        self.segments()  # validates dt

    def segments(self) -> List[Tuple[float, Optional[float]]]:
        """[(end_fraction, dt or None), ...], the last end 1.0."""
        if self.dt is None:
            return [(1.0, None)]
        if isinstance(self.dt, numbers.Real) and not isinstance(self.dt, bool):
            return [(1.0, _float(self.dt, "stages.dt", 0.0, strict=True))]
        try:
            segs = [(float(f), None if d is None else float(d)) for f, d in self.dt]
        except (TypeError, ValueError):
            raise ValueError(f"stages.dt: expected None, a step [s] or [(end_fraction, dt or None), ...], "
                             f"got {self.dt!r}") from None
        ends = [f for f, _ in segs]
        if not segs or abs(ends[-1] - 1.0) > 1e-12 or any(b <= a for a, b in zip([0.0] + ends, ends)):
            raise ValueError(f"stages.dt: end fractions must increase from > 0 to 1.0, got {ends}")
        for _, d in segs:
            if d is not None:
                _float(d, "stages.dt", 0.0, strict=True)
        return segs


@dataclass
class SimMPCConfig:
    """SimMPC's settings; times in sim steps of the planning model.

    Fields (defaults in brackets):

    - ``terms`` [[]]: (term, running_scale, terminal_scale or None) triples; use :meth:`add`.
    - ``ctrl_std`` [0.1]: node noise per command at the first free node, one value or (nu,), in
      the commands' units (e.g. rad for position actuators, N*m for motors). >= 0.
    - ``ctrl_range`` [None]: (nu, 2) command bounds; None: the actuators' ctrlrange where limited.
    - ``qpos_std`` / ``qvel_std`` [0]: each replica's start noise on qpos (nq,) / qvel (nv,).
    - ``control_map`` [None]: ``control_map(sim, clock)`` (RoboKit's signature; e.g. a
      :class:`gato.sampling.CartesianControl`) turning the commands in ``sim.data.ctrl`` into
      actuator controls before every (coarse) step, in the rollouts as in ``execute``
      (:mod:`gato.sampling.control_map`); its ``num_commands`` (default nu) sizes the plans.
    - ``batch_size`` [1]: instances planned at once (same model and config).
    - ``num_samples`` [512]: candidates per iteration and instance, one reserved for the moved
      plan itself (so ``num_samples - 1`` noisy draws).
    - ``num_replicas`` [1]: rollouts per candidate from start states perturbed by qpos_std /
      qvel_std; their costs are averaged.
    - ``horizon_steps`` [300]: steps each rollout simulates and scores.
    - ``node_steps`` [50]: steps between control nodes (<= horizon_steps); for "ilqr" the steps each
      command offset is held: hold them ``ctrl_steps`` (the plan can then push for one control period
      and brake in the next; docs/sampling.md, "iLQR against MPPI in closed loop").
    - ``ctrl_steps`` [100]: steps executed per plan (<= horizon_steps); a multiple of node_steps
      keeps shifted nodes exact.
    - ``max_iterations`` [12]: iterations per plan; with ``stages`` their iters' sum.
    - ``init_iterations`` [0]: if > 0, the first plan's iterations instead (the last stage's count
      adjusted).
    - ``stages`` [None]: list of :class:`SimMPCStage`, coarse to fine. None: the first plan picks
      ``[SimMPCStage(max_iterations, [(0.25, None), (1.0, k * timestep)])]`` for the largest k of
      4 and 2 whose first draws cost and end alike at both steps (within 11 % of the fine draws'
      spreads), else one fine stage.
    - ``min_improvement`` [0.005] / ``patience`` [2]: stop once the best candidate beats the plan
      by less than this fraction of the plan's cost, ``patience`` iterations in a row.
    - ``std_growth`` [4]: node noise grows linearly from ctrl_std at the first free node to this
      multiple at the last.
    - ``noise_decay`` [1]: iteration i draws with noise_decay**i times the node noise.
    - ``interpolation`` ["linear"]: "linear" | "cubic" (Catmull-Rom) | "zero" (zero-order hold)
      or a (horizon_steps, num_nodes) basis; "zero" also draws the first node.
    - ``draw_first_node`` [False]: draw the first node for any interpolation (the command
      executed now may change: predictive sampling / CEM style).
    - ``wide_ratio`` [0] / ``wide_scale`` [6]: share of each plan's first-iteration draws taken at
      wide_scale times the noise.
    - ``std_range`` [None]: (lo, hi); if set, each plan starts from the last plan's refit noise,
      as one scale of the configured noise (RMS over the drawn nodes) clipped to [lo, hi].
    - ``min_std`` [0.001]: floor of the node noise.
    - ``std_gamma`` [0.5]: share of the elites' weighted spread each iteration moves the node
      noise toward (0: no adaptation).
    - ``elite_ratio`` [0.2]: share of the cheapest candidates whose cost spread is the MPPI
      temperature and whose weighted mean is the moved plan.
    - ``best_draw_margin`` [4]: execute the best candidate instead of the moved plan when the
      moved plan costs this many temperatures more.
    - ``settle_steps`` [0]: unscored zero-control steps from the measured state before every
      rollout (stepped once per plan; rollouts start from the settled state).
    - ``terminal_scale`` [10]: cost scale of the horizon's last step for terms without their own.
    - ``seed`` [0]: seed of the node draws and the replicas' start noise.
    - ``planner`` ["mppi"]: "mppi", "cem" (cross-entropy: equal elite weights) or "ilqr" (an
      ``ILQROptimizer`` refines command offsets held for node_steps, max_iterations times a plan;
      no control_map, warp backend or replicas).
    - ``ilqr`` [None]: "ilqr"'s ``ILQROptimizerConfig`` (its max_iter replaced by max_iterations);
      None: ``ILQROptimizerConfig.cautious()``, damped and cautious.
    - ``backend`` ["cpu"]: rollout engine: "cpu" (``mujoco.rollout``, float64, threads over the
      draws) or "warp" (``mujoco_warp``, float32, all draws as one batch of worlds on a Warp
      device; needs the optional packages mujoco-warp and warp-lang).
    - ``device`` [None]: the Warp device of backend "warp" ("cuda", "cuda:N" or "cpu"); None:
      "cuda:0" where a GPU exists, else "cpu". Only backend "warp" takes one.
    - ``nconmax`` [64] / ``njmax`` [256]: backend "warp"'s contact and constraint-row capacity per
      world (``mujoco_warp``'s buffers: contacts are one pool of nconmax x worlds, rows are per
      world). A rollout batch that overflows them is re-run once with the overflowing capacity
      grown (a logged warning); one that overflows again raises RuntimeError naming the field.
      Ignored by backend "cpu" (MuJoCo C grows its arena itself).
    - ``cuda_graph_mode`` ["step"]: backend "warp" on a CUDA device: "step" replays one captured
      CUDA graph per sim step, "none" launches every kernel from Python. Warp's CPU device always
      launches from Python.
    """

    terms: List[Tuple[Any, float, Optional[float]]] = field(default_factory=list)
    ctrl_std: Any = 0.1
    ctrl_range: Optional[np.ndarray] = None
    qpos_std: Any = 0.0
    qvel_std: Any = 0.0
    control_map: Optional[Callable] = None
    batch_size: int = 1
    num_samples: int = 512
    num_replicas: int = 1
    horizon_steps: int = 300
    node_steps: int = 50
    ctrl_steps: int = 100
    max_iterations: int = 12
    init_iterations: int = 0
    stages: Optional[List[SimMPCStage]] = None
    min_improvement: float = 0.005
    patience: int = 2
    std_growth: float = 4.0
    noise_decay: float = 1.0
    interpolation: Union[str, np.ndarray] = "linear"
    draw_first_node: bool = False
    wide_ratio: float = 0.0
    wide_scale: float = 6.0
    std_range: Optional[Tuple[float, float]] = None
    min_std: float = 0.001
    std_gamma: float = 0.5
    elite_ratio: float = 0.2
    best_draw_margin: float = 4.0
    settle_steps: int = 0
    terminal_scale: float = 10.0
    seed: int = 0
    cuda_graph_mode: str = "step"
    planner: str = "mppi"
    ilqr: Optional[Any] = None
    backend: str = "cpu"
    device: Optional[str] = None
    nconmax: int = 64
    njmax: int = 256

    def __post_init__(self):
        self.validate(relations=False)

    # ------------------------------------------------------------------ checks
    def validate(self, relations: bool = True) -> "SimMPCConfig":
        """Check every field; ValueError names the first bad one. Returns self.

        relations: also the checks between fields (node_steps and ctrl_steps at most
        horizon_steps). Construction skips them, so a config can be built in steps (the documented
        ``SimMPCConfig(horizon_steps=30)`` keeps the default node_steps 50); SimMPC runs them all.
        """
        self.batch_size = _int(self.batch_size, "batch_size", 1)
        self.num_samples = _int(self.num_samples, "num_samples", 2)
        self.num_replicas = _int(self.num_replicas, "num_replicas", 1)
        self.horizon_steps = _int(self.horizon_steps, "horizon_steps", 1)
        self.node_steps = _int(self.node_steps, "node_steps", 1)
        self.ctrl_steps = _int(self.ctrl_steps, "ctrl_steps", 1)
        if relations and self.node_steps > self.horizon_steps:
            raise ValueError(f"node_steps: {self.node_steps} exceeds horizon_steps {self.horizon_steps}")
        if relations and self.ctrl_steps > self.horizon_steps:
            raise ValueError(f"ctrl_steps: {self.ctrl_steps} exceeds horizon_steps {self.horizon_steps}")
        self.init_iterations = _int(self.init_iterations, "init_iterations", 0)
        self.patience = _int(self.patience, "patience", 1)
        self.settle_steps = _int(self.settle_steps, "settle_steps", 0)
        self.seed = _int(self.seed, "seed", 0)
        if self.stages is not None:
            if isinstance(self.stages, SimMPCStage) or not isinstance(self.stages, (list, tuple)) \
                    or not self.stages or not all(isinstance(s, SimMPCStage) for s in self.stages):
                raise ValueError(f"stages: expected None or a non-empty list of SimMPCStage, got {self.stages!r}")
            self.stages = list(self.stages)
            self.max_iterations = sum(s.iters for s in self.stages)
        self.max_iterations = _int(self.max_iterations, "max_iterations", 1)
        self.ctrl_std = _nonneg_array(self.ctrl_std, "ctrl_std")
        self.qpos_std = _nonneg_array(self.qpos_std, "qpos_std")
        self.qvel_std = _nonneg_array(self.qvel_std, "qvel_std")
        if self.ctrl_range is not None:
            r = np.asarray(self.ctrl_range, dtype=np.float64)
            if r.ndim != 2 or r.shape[1] != 2 or np.any(np.isnan(r)) or np.any(r[:, 0] > r[:, 1]):
                raise ValueError(f"ctrl_range: expected (nu, 2) bounds with low <= high, got {self.ctrl_range!r}")
            self.ctrl_range = r
        self.min_improvement = _float(self.min_improvement, "min_improvement", 0.0)
        self.std_growth = _float(self.std_growth, "std_growth", 0.0, strict=True)
        self.noise_decay = _float(self.noise_decay, "noise_decay", 0.0, strict=True)
        self.wide_ratio = _float(self.wide_ratio, "wide_ratio", 0.0, hi=1.0)
        self.wide_scale = _float(self.wide_scale, "wide_scale", 0.0, strict=True)
        self.min_std = _float(self.min_std, "min_std", 0.0)
        self.std_gamma = _float(self.std_gamma, "std_gamma", 0.0, hi=1.0)
        self.elite_ratio = _float(self.elite_ratio, "elite_ratio", 0.0, strict=True, hi=1.0)
        self.best_draw_margin = _float(self.best_draw_margin, "best_draw_margin", 0.0)
        self.terminal_scale = _float(self.terminal_scale, "terminal_scale", 0.0)
        if self.std_range is not None:
            try:
                lo, hi = (float(x) for x in self.std_range)
            except (TypeError, ValueError):
                raise ValueError(f"std_range: expected None or (low, high), got {self.std_range!r}") from None
            if not (0 < lo <= hi < math.inf):
                raise ValueError(f"std_range: expected 0 < low <= high, got {self.std_range!r}")
            self.std_range = (lo, hi)
        if isinstance(self.interpolation, str):
            if self.interpolation not in INTERPOLATIONS:
                raise ValueError(f"interpolation: expected one of {INTERPOLATIONS} or a (horizon_steps, "
                                 f"num_nodes) basis, got {self.interpolation!r}")
        else:
            b = np.asarray(self.interpolation, dtype=np.float64)
            if b.shape != (self.horizon_steps, self.num_nodes) or not np.all(np.isfinite(b)):
                raise ValueError(f"interpolation: a basis must be finite with shape (horizon_steps, num_nodes) = "
                                 f"({self.horizon_steps}, {self.num_nodes}), got {b.shape}")
            self.interpolation = b
        if not isinstance(self.draw_first_node, (bool, np.bool_)):
            raise ValueError(f"draw_first_node: expected a bool, got {self.draw_first_node!r}")
        if self.planner not in PLANNERS:
            raise ValueError(f"planner: expected one of {PLANNERS}, got {self.planner!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {self.backend!r}")
        if self.device is not None and (not isinstance(self.device, str) or self.backend != "warp"):
            raise ValueError(f"device: expected None, or a Warp device name with backend 'warp', got "
                             f"{self.device!r} (backend {self.backend!r})")
        self.nconmax = _int(self.nconmax, "nconmax", 1)
        self.njmax = _int(self.njmax, "njmax", 1)
        if self.cuda_graph_mode not in CUDA_GRAPH_MODES:
            raise ValueError(f"cuda_graph_mode: expected one of {CUDA_GRAPH_MODES}, got {self.cuda_graph_mode!r}")
        if self.ilqr is not None:
            from .ilqr import ILQROptimizerConfig

            if not isinstance(self.ilqr, ILQROptimizerConfig):
                raise ValueError(f"ilqr: expected None or an ILQROptimizerConfig, got {self.ilqr!r}")
        from .control_map import check_control_map

        check_control_map(self.control_map)
        self.terms = [self._check_term(t) for t in self.terms]
        return self

    @staticmethod
    def _check_term(entry):
        from .terms import Term

        if not isinstance(entry, tuple) or len(entry) != 3:
            raise ValueError(f"terms: expected (term, running_scale, terminal_scale or None), got {entry!r}")
        term, run, term_scale = entry
        if not isinstance(term, Term):
            raise ValueError(f"terms: unknown term {term!r}: expected a gato.sampling term (StateTask, SensorTask, "
                             "ControlTask, AlignTask, ContactTask, GraspTask)")
        run = _float(run, "terms.running_scale", 0.0)
        if term_scale is not None:
            term_scale = _float(term_scale, "terms.terminal_scale", 0.0)
        return term, run, term_scale

    # --------------------------------------------------------------- helpers
    @property
    def num_nodes(self) -> int:
        """Nodes at steps 0, node_steps, ... covering the horizon: ceil(horizon_steps / node_steps) + 1."""
        return -(-self.horizon_steps // self.node_steps) + 1

    def add(self, term, running_scale: float = 1.0, terminal_scale: Optional[float] = None) -> "SimMPCConfig":
        """A copy with ``term`` added, scaled by running_scale per step and terminal_scale (default: the
        config's) at the horizon's last step; running_scale=0 makes a terminal-only cost."""
        return replace(self, terms=[*self.terms, (term, running_scale, terminal_scale)])

    def task(self, name: str):
        """The added term labelled ``name`` (ValueError if none)."""
        for term, _, _ in self.terms:
            if term.name == name:
                return term
        raise ValueError(f"name: no term labelled {name!r}; have {[t.name for t, _, _ in self.terms]}")

    def field_names(self) -> list:
        return [f.name for f in fields(self)]
