"""``gato tune``: Ray Tune search over a bsqp configuration's cost weights / solver settings
on a spec's scenario set, with ASHA early stopping, a held-out comparison and the best
configuration written as a controller parameter file.

The spec's ``tune`` block::

    tune:
      base: default                 # the planners entry (label) tuned; its params are the start
      objective: {mean_tracking_error: 1.0, limit_violation: 0.1}   # weighted sum, minimised
      search:                       # controller-schema params (docs/parameters.md)
        q_cost: {loguniform: [0.5, 50.0]}
        N_cost: {loguniform: [5.0, 500.0]}
        max_sqp_iters: {choice: [1, 2]}
      num_samples: 8                # trials
      max_concurrent: 2
      asha: {grace_period: 1, reduction_factor: 2}
      holdout: {seeds: [100], n: 4} # scenario seeds never seen by the search
      seed: 0                       # the search's random state

A trial runs the training episodes (the spec's scenarios x disturbance cases) one per Tune
iteration through gato.eval.episode.run_episode and reports the running mean objective;
ASHA stops trials whose running mean is poor at its rungs (``training_iteration``). An
episode that fails or diverges scores :data:`FAILED_OBJECTIVE`. Of the trials that ran
every training episode the lowest mean objective wins; it and the base configuration are
then evaluated on the held-out seeds (gato.eval.run_eval), and ``best_params.yaml`` is
written in the controller node's format (gato_controller: ros__parameters: ...).
"""
from __future__ import annotations

import math
from pathlib import Path

__all__ = ["OBJECTIVE_METRICS", "FAILED_OBJECTIVE", "parse_tune", "objective", "params_yaml", "run_tune"]

#: Metrics an objective may weigh (lower is better for all).
OBJECTIVE_METRICS = ("mean_tracking_error", "max_tracking_error", "limit_violation", "effort", "solve_time_ms")
#: The score of an episode that raised or diverged.
FAILED_OBJECTIVE = 1e3
_DISTS = ("loguniform", "uniform", "choice", "randint")


def _err(path, msg):
    return ValueError(f"tune.{path}: {msg}")


def parse_tune(raw, planners) -> dict:
    """Validate a spec's tune block against its planners; ValueError naming the field."""
    from .spec import BSQP_PARAM_KEYS, _bsqp_params

    if not isinstance(raw, dict):
        raise ValueError(f"tune: expected a mapping, got {type(raw).__name__}")
    allowed = ("base", "objective", "search", "num_samples", "max_concurrent", "asha", "holdout", "seed")
    bad = sorted(set(raw) - set(allowed))
    if bad:
        raise _err(bad[0], f"unknown field; expected one of {list(allowed)}")
    labels = {p["label"]: p for p in planners}
    base = raw.get("base", planners[0]["label"])
    if base not in labels:
        raise _err("base", f"no planners entry labelled {base!r}; have {sorted(labels)}")
    if labels[base]["planner"] != "bsqp":
        raise _err("base", f"tuning needs a bsqp entry (controller-schema params), {base!r} is "
                           f"{labels[base]['planner']!r}")
    obj = raw.get("objective", {"mean_tracking_error": 1.0})
    if isinstance(obj, str):
        obj = {obj: 1.0}
    if not isinstance(obj, dict) or not obj:
        raise _err("objective", f"expected a metric name or {{metric: weight}} from {list(OBJECTIVE_METRICS)}")
    for m, w in obj.items():
        if m not in OBJECTIVE_METRICS:
            raise _err(f"objective.{m}", f"unknown metric; expected one of {list(OBJECTIVE_METRICS)}")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise _err(f"objective.{m}", f"expected a weight > 0, got {w!r}")
    search = raw.get("search")
    if not isinstance(search, dict) or not search:
        raise _err("search", "expected a mapping {controller parameter: {loguniform|uniform|choice|randint: ...}}")
    for k, d in search.items():
        if k not in BSQP_PARAM_KEYS or k in ("N", "dt", "batch_size"):
            raise _err(f"search.{k}", "not a tunable controller parameter of the search; expected one of "
                                      f"{[x for x in BSQP_PARAM_KEYS if x not in ('N', 'dt', 'batch_size')]}")
        if not isinstance(d, dict) or len(d) != 1 or next(iter(d)) not in _DISTS:
            raise _err(f"search.{k}", f"expected one of {{{'|'.join(_DISTS)}: ...}}, got {d!r}")
        (kind, arg), = d.items()
        if kind == "choice":
            if not isinstance(arg, list) or not arg:
                raise _err(f"search.{k}.choice", f"expected a non-empty list, got {arg!r}")
            for i, v in enumerate(arg):
                _bsqp_params({k: v}, f"tune.search.{k}.choice[{i}]")
        else:
            if not (isinstance(arg, list) and len(arg) == 2):
                raise _err(f"search.{k}.{kind}", f"expected [low, high], got {arg!r}")
            for v in arg:
                _bsqp_params({k: v}, f"tune.search.{k}.{kind}")
            if not arg[0] < arg[1] or (kind == "loguniform" and not arg[0] > 0):
                raise _err(f"search.{k}.{kind}", f"expected 0 {'<' if kind == 'loguniform' else '<='} low < high, "
                                                 f"got {arg!r}")

    def _int(name, default, lo):
        v = raw.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise _err(name, f"expected an integer >= {lo}, got {v!r}")
        return v

    asha = raw.get("asha", {}) or {}
    if not isinstance(asha, dict) or set(asha) - {"grace_period", "reduction_factor"}:
        raise _err("asha", f"expected {{grace_period, reduction_factor}}, got {asha!r}")
    hold = raw.get("holdout", {"seeds": [1000], "n": 4})
    if not isinstance(hold, dict) or set(hold) - {"seeds", "n"} or not isinstance(hold.get("seeds"), list) \
            or not hold["seeds"] or not all(isinstance(s, int) and s >= 0 for s in hold["seeds"]):
        raise _err("holdout", f"expected {{seeds: [int, ...], n: int}}, got {hold!r}")
    return dict(base=base, objective={m: float(w) for m, w in obj.items()}, search=search,
                num_samples=_int("num_samples", 8, 1), max_concurrent=_int("max_concurrent", 2, 1),
                asha=dict(grace_period=int(asha.get("grace_period", 1)),
                          reduction_factor=float(asha.get("reduction_factor", 2))),
                holdout=dict(seeds=list(hold["seeds"]), n=int(hold.get("n", 4))), seed=_int("seed", 0, 0))


def objective(row: dict, weights: dict) -> float:
    """The weighted objective of one episode row (FAILED_OBJECTIVE when it failed)."""
    if row.get("status") != "ok" or row.get("diverged"):
        return FAILED_OBJECTIVE
    v = sum(w * float(row[m]) for m, w in weights.items())
    return v if math.isfinite(v) else FAILED_OBJECTIVE


def _space(search):
    from ray import tune

    out = {}
    for k, d in search.items():
        (kind, arg), = d.items()
        out[k] = {"loguniform": lambda a: tune.loguniform(*a), "uniform": lambda a: tune.uniform(*a),
                  "choice": tune.choice, "randint": lambda a: tune.randint(a[0], a[1] + 1)}[kind](arg)
    return out


def _trial(config, episodes=None, base=None, weights=None):
    """One Tune trial: the training episodes with ``config`` over the base params, one per
    iteration, reporting the running mean objective."""
    from ray import tune

    from .episode import run_episode

    entry = dict(base, label="trial", params={**base["params"], **config})
    total = 0.0
    for i, ep in enumerate(episodes):
        row = run_episode(dict(ep, planner=entry))
        total += objective(row, weights)
        tune.report({"objective": total / (i + 1), "episodes": i + 1})


def params_yaml(robot: str, params: dict) -> str:
    """The controller parameter file of a bsqp configuration: ``gato_controller:
    ros__parameters:`` with the robot and every given param (what the controller node loads)."""
    import yaml

    body = {"robot": robot, **{k: (float(v) if isinstance(v, float) else v) for k, v in sorted(params.items())}}
    return yaml.safe_dump({"gato_controller": {"ros__parameters": body}}, sort_keys=False)


def _markdown(spec, rows_by_label, metrics) -> str:
    from .results import summarize

    lines = ["| configuration | metric | mean | 95 % CI | n |", "|---|---|---|---|---|"]
    for label, rows in rows_by_label.items():
        for s in summarize(rows, metrics):
            lines.append(f"| {label} | {s['metric']} | {s['mean']:.4g} | [{s['ci95_lo']:.4g}, {s['ci95_hi']:.4g}] "
                         f"| {s['n']} |")
    return "\n".join(lines)


def run_tune(spec, out, *, ray=None, log=None) -> dict:
    """Run the spec's tune block (module docstring) and write under ``out``: the Tune
    experiment (tune/), trials.csv, the held-out sweep (holdout/) and best_params.yaml.

    Returns {"best" (the tuned params), "best_train" (its mean training objective),
    "trials" (list of dicts), "holdout_rows", "table" (markdown, held-out comparison),
    "yaml" (path)}."""
    import ray as ray_mod
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import BasicVariantGenerator

    from . import run_eval

    if spec.tune is None:
        raise ValueError("tune: the spec has no tune block (docs/eval.md)")
    if len(spec.robots) != 1:
        raise ValueError(f"robots: gato tune tunes one robot at a time, got {spec.robots}")
    t = spec.tune
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = next(p for p in spec.planners if p["label"] == t["base"])
    train = spec.episodes(planners=[base])
    say = log or (lambda s: None)
    say(f"{t['num_samples']} trials x {len(train)} training episodes, ASHA {t['asha']}, objective {t['objective']}")
    if not ray_mod.is_initialized():
        ray_mod.init(address=None if ray in (None, "local") else ray, include_dashboard=False, log_to_driver=False)
    trainable = tune.with_resources(tune.with_parameters(_trial, episodes=train, base=base, weights=t["objective"]),
                                    {"cpu": 1})
    sched = ASHAScheduler(time_attr="training_iteration", max_t=len(train), grace_period=t["asha"]["grace_period"],
                          reduction_factor=t["asha"]["reduction_factor"])
    tuner = tune.Tuner(trainable, param_space=_space(t["search"]),
                       tune_config=tune.TuneConfig(metric="objective", mode="min", scheduler=sched,
                                                   num_samples=t["num_samples"],
                                                   search_alg=BasicVariantGenerator(
                                                       max_concurrent=t["max_concurrent"], random_state=t["seed"])),
                       run_config=tune.RunConfig(name="tune", storage_path=str(out), verbose=0))
    grid = tuner.fit()
    trials = []
    for r in grid:
        m = r.metrics or {}
        trials.append(dict(config=dict(r.config), objective=m.get("objective", math.nan),
                           episodes=int(m.get("episodes", 0)), error=str(r.error) if r.error else ""))
    complete = [x for x in trials if x["episodes"] == len(train) and not x["error"]]
    if not complete:
        raise RuntimeError(f"tune: no trial ran all {len(train)} training episodes ({len(trials)} trials)")
    best = min(complete, key=lambda x: x["objective"])
    import csv

    with open(out / "trials.csv", "w", newline="") as f:
        keys = sorted(t["search"])
        w = csv.writer(f)
        w.writerow(keys + ["objective", "episodes", "error"])
        for x in trials:
            w.writerow([x["config"].get(k) for k in keys] + [x["objective"], x["episodes"], x["error"][:200]])
    say(f"best of {len(complete)} complete trials: {best['config']} (training objective {best['objective']:.4g})")
    tuned = dict(base, label="tuned", params={**base["params"], **best["config"]})
    hold = spec.episodes(planners=[base, tuned], seeds=t["holdout"]["seeds"], n=t["holdout"]["n"])
    res = run_eval(spec, out / "holdout", ray="local" if ray_mod.is_initialized() else None, episodes=hold,
                   progress=False)
    by_label = {lab: [r for r in res["rows"] if r["label"] == lab] for lab in (base["label"], "tuned")}
    metrics = [m for m in dict.fromkeys(list(t["objective"]) + ["mean_tracking_error"])]
    table = _markdown(spec, by_label, metrics)
    (out / "holdout.md").write_text(table + "\n")
    from .episode import node_defaults

    final = {**node_defaults(spec.robots[0]), **tuned["params"]}
    ypath = out / "best_params.yaml"
    ypath.write_text(params_yaml(spec.robots[0], final))
    return dict(best=best["config"], best_train=best["objective"], trials=trials, holdout_rows=res["rows"],
                table=table, yaml=ypath)
