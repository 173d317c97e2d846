"""The experiment spec of ``gato eval`` / ``gato tune``: a YAML file, validated into a
:class:`Spec` that expands to a list of fully resolved episodes.

Format (every key but ``planners`` and ``task`` has a default; docs/eval.md)::

    name: fig8-iiwa14                 # the run's name (output folder default: eval_out/<name>)
    robots: [iiwa14]                  # registered robots with task tables (gato.tasks)
    planners:                         # one configuration per entry, labelled
      - label: default
        planner: bsqp                 # a registered planner (gato.planner) or "module:Class"
        config: {}                    # the planner's own config keys
        params: {q_cost: 2.0}         # bsqp: controller-schema names (docs/parameters.md)
    task:                             # the scenario generator (gato.tasks)
      kind: fig8                      # fig8 | pickplace
      seeds: [0]                      # generator seeds; n scenarios per seed
      n: 4
      options: {ratio_range: [0.6, 1.0]}   # generator keywords (fig8_scenarios / pickplace_scenarios)
    disturbances:                     # named cases, each a list of disturbances (default: none)
      none: []
      payload_1kg: [{kind: point_payload, mass: 1.0}]
    world: {kind: pinocchio, sim_dt: 0.001}
    episode: {duration: 2.0}          # simulated seconds per episode (pickplace: at most timeout x goals)
    metrics: [mean_tracking_error, max_tracking_error, limit_violation, effort, solve_time_ms]

Study kinds (``task.kind: step | limits_pickplace | limits_fig8 | disturbance_fig8 |
payload_pickplace``, gato.eval.studies / gato.eval.wrench_studies) bring their own scenarios,
controller construction and metrics; their planners take ``config`` (the wrench studies:
``hypotheses: {estimator, batch_size, seed}``).

Episodes are the product robots x planners x disturbance cases x scenarios. Each episode is a
plain dict (JSON-able) holding everything a worker needs, and its ``key`` is the SHA-256 of
that dict's canonical JSON: the hash of the spec's part that decides the episode plus the
scenario. Every ValueError names the field (``planners[1].params.q_cost: ...``).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .episode import _jsonable

__all__ = ["METRICS", "DEFAULT_METRICS", "BSQP_PARAM_KEYS", "Spec", "load_spec", "parse_spec", "episode_key"]

#: Metric columns every episode reports (units in the names' docs, docs/eval.md).
METRICS = {
    "mean_tracking_error": "mean ||ee - reference knot 0|| over the episode [m] (sampling_fig8: over the "
                           "MuJoCo steps / controller steps, ee vs the path)",
    "max_tracking_error": "max ||ee - reference knot 0|| [m]",
    "final_goal_distance": "||ee - active goal|| at the last tick [m] (pickplace) / tracking error (fig8)",
    "goals_reached": "goals reached (pickplace; fig8: 0)",
    "limit_violation": "sum over ticks and joints of how far q, dq and the applied torque leave their URDF "
                       "limits, each normalised by its limit [1] (0: never outside)",
    "limit_violation_ticks": "ticks with any joint outside a URDF position, velocity or torque limit",
    "effort": "mean over ticks of ||u / u_limit||^2 [1] (applied torque normalised by the URDF effort limit)",
    "solve_time_ms": "mean planner solve time per tick [ms] (sampling_fig8 / sampling_pickplace: per plan or "
                     "controller step; wall clock: not deterministic)",
    "solve_time_p95_ms": "95th percentile of the planner solve time [ms] (wall clock: not deterministic)",
    "diverged": "1 when the world diverged, else 0",
    "n_ticks": "planner steps recorded",
    # The study kinds' columns (gato.eval.studies; null in the generic kinds' rows).
    "peak_qd_ratio": "max over joints and world substeps of |qd_j| / URDF velocity limit_j [1] (study kinds)",
    "peak_joint": "the joint of peak_qd_ratio (0-based)",
    "qd_ratio": "per joint: max over world substeps of |qd_j| / limit_j [1] (a list column; summarised per joint "
                "as qd_ratio_j1, qd_ratio_j2, ...)",
    "q_excess": "max over joints and time of the position's distance outside the URDF range / the range [1] (step)",
    "u_excess": "max over joints and ticks of the unclamped command outside the effort box / 2 effort [1] (step)",
    "task_time": "step, limits_pickplace: sum over goals of the time to reach [s]; limits_fig8: duration + path_lag",
    "mean_goal_error": "mean over ticks of ||ee - active goal|| [m] (step, limits_pickplace; sampling_pickplace: "
                       "over the MuJoCo steps / controller steps)",
    "rms_tracking_error": "RMS over ticks of ||ee - reference|| [m] (limits_fig8)",
    "path_lag": "lag of the EE behind the figure-8 path [s] (limits_fig8)",
    "plan_viol_q": "max over ticks of the winning plan's position-row violation (NaN without limit rows)",
    "plan_viol_qd": "max over ticks of the winning plan's velocity-row violation (NaN without limit rows)",
    "plan_viol_u": "max over ticks of the winning plan's torque-row violation (NaN without limit rows)",
    # The wrench-hypothesis studies' columns (gato.eval.wrench_studies).
    "mean_tracking_error_settled": "mean ||ee - reference knot 0|| over t >= task.options.settled_s [m] "
                                   "(disturbance_fig8)",
    "success": "sampling_pickplace / sampling_box_push: 1 when the error is < task.options.tol; payload_pickplace: 1 when every goal was reached with no joint outside its URDF position / velocity limit at a "
               "recorded tick, no planner fallback and no divergence, else 0 (payload_pickplace)",
    "success_after_grace": "success with the limits judged from t >= task.options.grace only (payload_pickplace)",
    "fallbacks": "ticks whose command came from the planner's fallback (payload_pickplace)",
    "tick_qd_ratio": "max over recorded ticks and joints of |dq_j| / URDF velocity limit_j [1] (payload_pickplace)",
    "tick_qd_joint": "the joint of tick_qd_ratio (0-based)",
    "pos_excess": "max over recorded ticks and joints of the position outside its URDF range [rad]",
    "median_ref_distance": "median over ticks of ||ee - reference knot 0|| [m] (payload_pickplace)",
    "time_to_all_reached": "time until the last goal was reached [s] (null: not all reached)",
    "first_violation_t": "time of the first recorded tick outside a position / velocity limit [s] (null: none)",
    "last_violation_t": "time of the last recorded tick outside a position / velocity limit [s] (null: none)",
    "step_qd_ratio": "max over physics substeps (1 ms) and joints of |dq_j| / URDF velocity limit_j [1] (payload_pickplace)",
    "step_qd_joint": "the joint of step_qd_ratio (0-based)",
    "step_pos_excess": "max over physics substeps of the position outside its URDF range [rad] (payload_pickplace)",
    "step_first_violation_t": "time of the first physics substep outside a position / velocity limit [s] (null: none)",
    "step_last_violation_t": "time of the last physics substep outside a position / velocity limit [s] (null: none)",
    # bench_sampling's closed-loop columns (gato.eval.planner_studies).
    "end_goal_error_max": "max over goals of ||ee - goal|| at the end of the goal's goal_s [m] (sampling_pickplace)",
    "box_error": "final ||box (x, y) - goal|| [m] (sampling_box_push)",
    "box_error_open_loop": "final box error of the scripted IK path played open loop [m] (sampling_box_push)",
    # go2 under the floating-base MPC (gato.eval.go2_studies).
    "height_error_max": "max |base height - stand height| after min(2, T / 2) s [m] (go2_stand)",
    "tilt_max_deg": "max base tilt after min(2, T / 2) s [deg] (go2_stand)",
    "min_foot_fn": "smallest foot normal force after min(2, T / 2) s, MuJoCo contacts [N] (go2_stand)",
    "foot_slip_max": "max horizontal travel of a foot body from the landed start [m] (go2_stand)",
    "up": "1 when the base stayed above 60 % of its start height after the push and no link but the feet "
          "touched the ground, else 0 (go2_push)",
    "hmin_rel": "lowest base height after the push / the start's [1] (go2_push)",
    "body_contact": "links other than the feet that touched the ground after the push (go2_push)",
    "trunk_contact": "links above the calves (base, head, hips, thighs) that touched the ground (go2_push)",
    "drift_m": "horizontal base travel from the start at the end [m] (go2_push)",
}
#: List-valued metric columns (one value per joint).
VECTOR_METRICS = ("qd_ratio",)
#: Metrics measured by the wall clock: excluded from the determinism guarantee.
TIMING_METRICS = ("solve_time_ms", "solve_time_p95_ms")
DEFAULT_METRICS = ("mean_tracking_error", "max_tracking_error", "limit_violation", "effort", "solve_time_ms")
#: The metrics the generic kinds (fig8, pickplace) report; study kinds: gato.eval.studies.
GENERIC_METRICS = ("mean_tracking_error", "max_tracking_error", "final_goal_distance", "goals_reached",
                   "limit_violation", "limit_violation_ticks", "effort", "solve_time_ms", "solve_time_p95_ms",
                   "diverged", "n_ticks")

#: Controller-schema parameters (gato_ros.params.CONTROLLER, docs/parameters.md) a bsqp
#: configuration takes under ``params``: the cost weights and solver settings go to
#: SolverParams, the rest to the planner (as gato.controller_setup.build_controller does).
BSQP_COST_SOLVER_KEYS = ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost",
                         "mu", "rho", "max_sqp_iters", "max_pcg_iters", "pcg_tol", "u_ref")
BSQP_STRUCT_KEYS = ("N", "dt", "batch_size", "warm_start", "linsys", "limits", "reseed_threshold")
BSQP_PARAM_KEYS = BSQP_COST_SOLVER_KEYS + BSQP_STRUCT_KEYS
_INT_PARAMS = ("N", "batch_size", "max_sqp_iters", "max_pcg_iters")
_STR_PARAMS = {"warm_start": ("shift", "hold"), "linsys": ("pcg", "bdsv", "bdsv_first", "auto"),
               "limits": ("off", "telemetry", "barrier", "al", "admm"), "u_ref": ("zero", "gravity")}

_DISTURBANCE_KINDS = {"constant_wrench": ("wrench",), "point_payload": ("mass",),
                      "impulse": ("t_start", "duration", "wrench"), "link_mass_error": ("mass_scale",),
                      "pendulum": ("mass", "length")}
_TOP = ("name", "robots", "planners", "task", "disturbances", "world", "episode", "metrics", "tune")


def _err(path: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


def _mapping(v, path, keys, required=()) -> dict:
    if not isinstance(v, dict):
        raise _err(path, f"expected a mapping, got {type(v).__name__}")
    unknown = sorted(set(v) - set(keys))
    if unknown:
        raise _err(f"{path}.{unknown[0]}" if path else unknown[0], f"unknown field; expected one of {list(keys)}")
    for k in required:
        if k not in v:
            raise _err(f"{path}.{k}" if path else k, "required field missing")
    return v


def _number(v, path, *, lo=None, hi=None, integer=False, lo_open=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise _err(path, f"expected {'an integer' if integer else 'a number'}, got {v!r}")
    if not math.isfinite(v):
        raise _err(path, f"expected a finite value, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise _err(path, f"expected {'>' if lo_open else '>='} {lo}, got {v!r}")
    if hi is not None and v > hi:
        raise _err(path, f"expected <= {hi}, got {v!r}")
    return int(v) if integer else float(v)


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def episode_key(episode: dict) -> str:
    """SHA-256 hex (first 20 digits) of an episode's canonical JSON (its ``key`` and ``index``
    left out): the same spec part and scenario give the same key in any run."""
    body = {k: v for k, v in episode.items() if k not in ("key", "index")}
    return hashlib.sha256(_canonical(body).encode()).hexdigest()[:20]


def _bsqp_params(params, path) -> dict:
    out = {}
    _mapping(params, path, BSQP_PARAM_KEYS)
    for k, v in params.items():
        p = f"{path}.{k}"
        if k in _STR_PARAMS:
            if v not in _STR_PARAMS[k]:
                raise _err(p, f"expected one of {list(_STR_PARAMS[k])}, got {v!r}")
            out[k] = v
        elif k in _INT_PARAMS:
            out[k] = _number(v, p, lo=1, integer=True)
        elif k == "dt":
            out[k] = _number(v, p, lo=0.0, lo_open=True)
        else:
            out[k] = _number(v, p, lo=0.0)
    return out


def _planner(entry, path, labels) -> dict:
    _mapping(entry, path, ("label", "planner", "config", "params", "feedback"), required=("planner",))
    name = entry["planner"]
    if not isinstance(name, str) or not name:
        raise _err(f"{path}.planner", f"expected a planner name, got {name!r}")
    from ..planners.planner import planners

    if name not in planners() and ":" not in name:
        raise _err(f"{path}.planner", f"unknown planner {name!r}; registered: {planners()} (or 'module:Class')")
    label = entry.get("label", name)
    if not isinstance(label, str) or not label:
        raise _err(f"{path}.label", f"expected a non-empty string, got {label!r}")
    if label in labels:
        raise _err(f"{path}.label", f"duplicate label {label!r} (each configuration needs its own)")
    labels.add(label)
    config = entry.get("config", {}) or {}
    if not isinstance(config, dict):
        raise _err(f"{path}.config", f"expected a mapping of the planner's config keys, got {type(config).__name__}")
    params = entry.get("params", {}) or {}
    if params and name != "bsqp":
        raise _err(f"{path}.params", "controller-schema params apply to the bsqp planner only; use config")
    out = dict(label=label, planner=name, config=_jsonable(config), params=_bsqp_params(params, f"{path}.params"))
    fb = entry.get("feedback")
    if fb is not None:  # absent: plans played open loop (and the episode keys of older specs unchanged)
        from ..sim.commands import FEEDBACK_MODES

        if fb not in FEEDBACK_MODES:
            raise _err(f"{path}.feedback", f"expected one of {list(FEEDBACK_MODES)}, got {fb!r}")
        if fb != "pd" and name != "bsqp":
            raise _err(f"{path}.feedback", f"{fb!r} executes the plan's own gains, which only the bsqp planner "
                       "computes; use 'pd'")
        out["feedback"] = fb
    return out


def _disturbance(d, path) -> dict:
    if not isinstance(d, dict) or "kind" not in d:
        raise _err(path, f"expected a mapping with a kind (one of {list(_DISTURBANCE_KINDS)}), got {d!r}")
    kind = d["kind"]
    if kind not in _DISTURBANCE_KINDS:
        raise _err(f"{path}.kind", f"unknown disturbance {kind!r}; expected one of {list(_DISTURBANCE_KINDS)}")
    opt = {"constant_wrench": ("via",), "pendulum": ("damping", "radius")}.get(kind, ())
    _mapping(d, path, ("kind",) + _DISTURBANCE_KINDS[kind] + opt, required=_DISTURBANCE_KINDS[kind])
    # Build it once now so a bad value is named here, not in a worker.
    from .episode import make_disturbance

    try:
        make_disturbance(d)
    except ValueError as e:
        raise _err(path, str(e)) from None
    return _jsonable(dict(d))


@dataclass
class Spec:
    """A validated experiment spec (module docstring). ``raw``: the parsed YAML."""

    name: str
    robots: list
    planners: list
    task: dict
    disturbances: dict
    world: dict
    episode: dict
    metrics: list
    tune: dict | None = None
    raw: dict = field(default_factory=dict, repr=False)

    def scenarios(self, robot: str, seeds=None, n=None) -> list:
        """The task generator's scenarios for ``robot`` (JSON-able dicts, in seed order):
        ``seeds`` / ``n`` override the spec's (held-out sets of ``gato tune``)."""
        from .episode import generate_scenarios

        return generate_scenarios(robot, self.task, self.task["seeds"] if seeds is None else seeds,
                                  self.task["n"] if n is None else n)

    def episodes(self, planners=None, seeds=None, n=None) -> list:
        """Every episode of the sweep, in a fixed order (index 0..E-1): robots x planners x
        disturbance cases x scenarios; ``planners`` replaces the spec's configurations."""
        out = []
        for robot in self.robots:
            scen = self.scenarios(robot, seeds, n)
            for pl in (self.planners if planners is None else planners):
                for case, dist in self.disturbances.items():
                    for sc in scen:
                        ep = dict(robot=robot, planner=pl, disturbance_case=case, disturbances=dist,
                                  world=self.world, episode=self.episode, task_kind=self.task["kind"],
                                  task_options=self.task["options"], scenario=sc)
                        ep["key"] = episode_key(ep)
                        ep["index"] = len(out)
                        out.append(ep)
        return out


def parse_spec(raw) -> Spec:
    """Validate a parsed spec (a dict) into a :class:`Spec`; ValueError naming the bad field."""
    from ..sim.scenarios import Q_READY

    _mapping(raw, "", _TOP, required=("planners", "task"))
    name = raw.get("name", "eval")
    if not isinstance(name, str) or not name or "/" in name:
        raise _err("name", f"expected a non-empty string without '/', got {name!r}")
    robots = raw.get("robots", ["iiwa14"])
    if isinstance(robots, str):
        robots = [robots]
    if not isinstance(robots, list) or not robots:
        raise _err("robots", f"expected a non-empty list of robot names, got {robots!r}")
    from .studies import STUDIES as _STUDIES
    task_kind = raw["task"].get("kind") if isinstance(raw.get("task"), dict) else None
    study_robots = _STUDIES[task_kind].robots if task_kind in _STUDIES else ()
    for i, r in enumerate(robots):
        if study_robots and r not in study_robots:
            raise _err(f"robots[{i}]", f"the {task_kind} study runs {list(study_robots)}, got {r!r}")
        if not study_robots and r not in Q_READY:
            raise _err(f"robots[{i}]", f"no task tables for {r!r}; expected one of {sorted(Q_READY)}")
    pls = raw["planners"]
    if not isinstance(pls, list) or not pls:
        raise _err("planners", "expected a non-empty list of planner configurations")
    labels: set = set()
    planners = [_planner(p, f"planners[{i}]", labels) for i, p in enumerate(pls)]

    from .studies import STUDIES, check_study, study_metrics

    task = _mapping(raw["task"], "task", ("kind", "seeds", "n", "options"), required=("kind",))
    if task["kind"] not in ("fig8", "pickplace") and task["kind"] not in STUDIES:
        raise _err("task.kind", f"expected one of {['fig8', 'pickplace'] + list(STUDIES)}, got {task['kind']!r}")
    study = task["kind"] in STUDIES
    for i, p in enumerate(planners):
        if study and "feedback" in p:
            raise _err(f"planners[{i}].feedback", f"the {task['kind']!r} study runs its own loop; feedback applies "
                       "to the fig8 and pickplace kinds")
    seeds = task.get("seeds", [0])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = [seeds]
    if not isinstance(seeds, list) or not seeds:
        raise _err("task.seeds", f"expected a non-empty list of integer seeds, got {seeds!r}")
    seeds = [int(_number(s, f"task.seeds[{i}]", lo=0, integer=True)) for i, s in enumerate(seeds)]
    n = _number(task.get("n", 1), "task.n", lo=1, integer=True)
    options = task.get("options", {}) or {}
    if study:  # a study's options are checked with the study (check_study, below)
        _mapping(options, "task.options", tuple(options) if isinstance(options, dict) else ())
    else:
        allowed = {"fig8": ("ratio_range", "dt", "ik_err_max"),
                   "pickplace": ("n_goals", "ramps", "ik_err_max", "min_separation", "timeout", "threshold",
                                 "velocity_threshold", "settle_time", "dt")}[task["kind"]]
        _mapping(options, "task.options", allowed)
    task = dict(kind=task["kind"], seeds=seeds, n=n, options=_jsonable(options))

    dist_raw = raw.get("disturbances", {"none": []})
    if dist_raw is None:
        dist_raw = {"none": []}
    if not isinstance(dist_raw, dict) or not dist_raw:
        raise _err("disturbances", "expected a mapping {case name: [disturbance, ...]}")
    dist = {}
    own = STUDIES[task["kind"]].disturbance_check if study else None  # a study's own disturbance entries
    for case, lst in dist_raw.items():
        if not isinstance(lst, list):
            raise _err(f"disturbances.{case}", f"expected a list of disturbances, got {type(lst).__name__}")
        if own is not None:
            dist[str(case)] = _jsonable(own(lst, f"disturbances.{case}"))
        else:
            dist[str(case)] = [_disturbance(d, f"disturbances.{case}[{j}]") for j, d in enumerate(lst)]

    world = _mapping(raw.get("world", {}) or {}, "world", ("kind", "sim_dt"))
    kind = world.get("kind", "pinocchio")
    if kind not in ("pinocchio", "mujoco"):
        raise _err("world.kind", f"expected 'pinocchio' or 'mujoco', got {kind!r}")
    world = dict(kind=kind, sim_dt=_number(world.get("sim_dt", 0.001), "world.sim_dt", lo=0.0, lo_open=True))
    if kind == "mujoco":
        for case, lst in dist.items():
            if any(d["kind"] == "pendulum" for d in lst):
                raise _err(f"disturbances.{case}", "pendulum needs world.kind pinocchio")

    if study:
        task["options"] = _jsonable(check_study(task["kind"], task["options"], planners, world, raw))

    ep = _mapping(raw.get("episode", {}) or {}, "episode", ("duration",))
    episode = dict(duration=_number(ep.get("duration", 2.0), "episode.duration", lo=0.0, lo_open=True))

    reported = study_metrics(task["kind"]) if study else GENERIC_METRICS
    metrics = raw.get("metrics", list(reported if study else DEFAULT_METRICS))
    if not isinstance(metrics, list) or not metrics:
        raise _err("metrics", f"expected a non-empty list of metric names from {list(reported)}")
    for i, m in enumerate(metrics):
        if m not in METRICS:
            raise _err(f"metrics[{i}]", f"unknown metric {m!r}; expected one of {list(METRICS)}")
        if m not in reported:
            raise _err(f"metrics[{i}]", f"the {task['kind']} task does not report {m!r}; it reports {list(reported)}")
    tune = raw.get("tune")
    if tune is not None and study:
        raise _err("tune", f"gato tune searches the controller-schema params of the fig8 / pickplace kinds, "
                           f"not the {task['kind']} study")
    if tune is not None:
        from .tune import parse_tune

        tune = parse_tune(tune, planners)
    return Spec(name=name, robots=list(robots), planners=planners, task=task, disturbances=dist, world=world,
                episode=episode, metrics=list(metrics), tune=tune, raw=raw)


def load_spec(path) -> Spec:
    """Read and validate a spec YAML file; ValueError naming the file and the bad field."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"spec: no such file {str(p)!r}")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"spec {p}: not valid YAML: {e}") from None
    try:
        return parse_spec(raw)
    except ValueError as e:
        raise ValueError(f"spec {p}: {e}") from None
