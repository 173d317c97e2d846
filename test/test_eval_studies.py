"""gato eval's study task kinds (gato.eval.studies): the joint-limit sweeps of
bench/bench_limits.py and bench/bench_limit_sweep.py as gato eval specs (bench/specs/).

The shipped specs validate; malformed study specs name the bad field; and a tiny version of
each shipped spec (one or two short episodes) run through the runner's local process pool
gives, column for column, the numbers of a direct call of the same closed-loop function in
this process (gato.limit_scenarios.run_step_scenario / run_limits_pickplace /
run_limits_fig8): the runner adds no difference of its own."""
import copy
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import import_or_skip

import_or_skip("pyarrow", "pip install -r requirements/lock.txt (scripts/setup.sh)")
import pyarrow.parquet as pq  # noqa: E402

from gato import eval as geval  # noqa: E402
from gato import limit_scenarios as ls  # noqa: E402

SPECS = Path(__file__).resolve().parents[1] / "bench" / "specs"
STEP, PP, F8 = "limits_step_sweep_iiwa14", "limits_pickplace_iiwa14", "limits_fig8_iiwa14"


def _raw(name):
    return yaml.safe_load((SPECS / f"{name}.yaml").read_text())


def _tiny(name, n=1, options=None, labels=None):
    """The shipped spec ``name`` cut down: n scenarios, task options overridden, only the
    configurations labelled ``labels``."""
    raw = _raw(name)
    raw["task"] = dict(raw["task"], n=n, options={**raw["task"].get("options", {}), **(options or {})})
    if labels is not None:
        raw["planners"] = [p for p in raw["planners"] if p["label"] in labels]
    return geval.parse_spec(raw)


def _call_args(pl):
    cfg = pl["config"]
    limits = None if cfg.get("limits", "default") == "default" else cfg["limits"]
    return limits, cfg.get("limits_kw") or None, cfg.get("solver") or None, cfg.get("integrator")


def _same(a, b):
    return (a is None and b is None) or a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


# ----------------------------------------------------------------- the shipped specs
@pytest.mark.parametrize("name, episodes, metrics", [
    (STEP, 5 * 30, ["peak_qd_ratio", "qd_ratio", "q_excess", "u_excess", "task_time", "goals_reached"]),
    (PP, 5 * 5, ["peak_qd_ratio", "qd_ratio", "task_time", "mean_goal_error", "plan_viol_qd"]),
    (F8, 5 * 5, ["rms_tracking_error", "task_time", "path_lag", "peak_qd_ratio"]),
])
def test_shipped_limit_specs_validate(name, episodes, metrics):
    spec = geval.load_spec(SPECS / f"{name}.yaml")
    eps = spec.episodes()
    assert len(eps) == episodes and len({e["key"] for e in eps}) == episodes
    assert spec.metrics == metrics
    assert all(e["planner"]["planner"] == "bsqp" and not e["planner"]["params"] for e in eps)


def test_step_spec_draws_the_scripts_scenarios():
    """The step kind's scenarios are gato.limit_scenarios.step_scenarios of the same seed."""
    spec = _tiny(STEP, n=3)
    got = spec.scenarios("iiwa14")
    want = ls.step_scenarios("iiwa14", 3, seed=2201)
    assert [s["id"] for s in got] == [s["id"] for s in want]
    for g, w in zip(got, want):
        assert np.array_equal(np.asarray(g["goals"]), w["goals"]) and g["step"] == w["step"]


@pytest.mark.parametrize("name, patch, field", [
    (STEP, dict(planners=[dict(planner="osc")]), "planners[0].planner"),
    (STEP, dict(planners=[dict(planner="bsqp", params=dict(q_cost=2.0))]), "planners[0].params"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(limits="box"))]), "planners[0].config.limits"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(limits_kw=dict(iterz=3)))]),
     "planners[0].config.limits_kw.iterz"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(limits="off", limits_kw=dict(iters=3)))]),
     "planners[0].config.limits_kw"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(integrator="rk5"))]), "planners[0].config.integrator"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(limits_kw=dict(iters=2.5)))]),
     "planners[0].config.limits_kw.iters"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(solver=dict(q_cots=1.0)))]),
     "planners[0].config.solver.q_cots"),
    (STEP, dict(planners=[dict(planner="bsqp", config=dict(colour="red"))]), "planners[0].config.colour"),
    (STEP, dict(task=dict(kind="step", options=dict(speed=1.0))), "task.options.speed"),
    (STEP, dict(task=dict(kind="step", options=dict(step_range=[1.0, 0.5]))), "task.options.step_range"),
    (STEP, dict(task=dict(kind="step", options=dict(goal_s=0))), "task.options.goal_s"),
    (STEP, dict(disturbances=dict(p=[dict(kind="point_payload", mass=1.0)])), "disturbances"),
    (STEP, dict(episode=dict(duration=3.0)), "episode"),
    (STEP, dict(metrics=["mean_tracking_error"]), "metrics[0]"),
    (STEP, dict(tune=dict(search=dict(q_cost=dict(uniform=[1, 2])))), "tune"),
    (PP, dict(world=dict(kind="pinocchio", sim_dt=0.001)), "world.sim_dt"),
    (F8, dict(world=dict(kind="mujoco", sim_dt=0.001)), "world.kind"),
    (F8, dict(metrics=["q_excess"]), "metrics[0]"),
    (F8, dict(task=dict(kind="limits_fig8", options=dict(ratio=-0.5))), "task.options.ratio"),
])
def test_malformed_study_spec_names_the_bad_field(name, patch, field):
    raw = {**_raw(name), **copy.deepcopy(patch)}
    with pytest.raises(ValueError) as e:
        geval.parse_spec(raw)
    assert str(e.value).startswith(f"{field}:"), str(e.value)


# ----------------------------------------------------------------- runner vs direct calls
def _run(spec, out):
    r = geval.run_eval(spec, out, workers=1, progress=False)
    assert r["ran"] == len(spec.episodes()) and not r["interrupted"]
    assert all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    table = pq.read_table(Path(out) / "results.parquet").to_pylist()
    assert [t["index"] for t in table] == [x["index"] for x in r["rows"]]
    return r, table


def test_step_sweep_through_the_runner_equals_direct_calls(tmp_path):
    """bench_limit_sweep's spec (step kind, MuJoCo, 1 ms), one scenario with 0.4 s goals, three
    configurations (default ADMM on euler, off, the pre-issue-22 ADMM settings on rk4)."""
    spec = _tiny(STEP, options=dict(goal_s=0.4), labels=("admm:euler", "off:euler"))
    raw = copy.deepcopy(spec.raw)
    raw["planners"].append(dict(label="admm_v0:rk4", planner="bsqp",
                                config=dict(limits="default", limits_kw=dict(iters=10, rho_qd=0.03),
                                            integrator="rk4")))
    spec = geval.parse_spec(raw)
    r, table = _run(spec, tmp_path)
    assert len(table) == 3
    for ep, row in zip(spec.episodes(), table):
        limits, kw, solver, integ = _call_args(ep["planner"])
        d = ls.run_step_scenario(ep["scenario"], limits=limits, limits_kw=kw, integrator=integ, world="mujoco",
                                 goal_s=0.4, params=solver, sim_dt=0.001)
        want = dict(peak_qd_ratio=d["peak_qd_ratio"], peak_joint=d["peak_joint"], qd_ratio=d["qd_ratio"].tolist(),
                    q_excess=float(d["q_excess"].max()), u_excess=float(d["u_excess"].max()),
                    task_time=d["task_time"], mean_goal_error=d["mean_err"], goals_reached=d["reached"])
        assert {k: row[k] for k in want} == want, ep["planner"]["label"]
        assert len(row["qd_ratio"]) == 7 and row["stop_reason"] == "goals_done"
        assert row["mean_tracking_error"] is None  # a generic column: not this kind's
    by = {x["label"]: x for x in table}
    # The configurations really differ: the unconstrained run leaves the velocity box.
    assert by["off:euler"]["peak_qd_ratio"] > by["admm:euler"]["peak_qd_ratio"]
    per_joint = [s for s in r["summary"] if s["metric"].startswith("qd_ratio_j") and s["label"] == "admm:euler"]
    assert [s["metric"] for s in per_joint] == [f"qd_ratio_j{j}" for j in range(1, 8)]
    assert [s["mean"] for s in per_joint] == by["admm:euler"]["qd_ratio"]


def test_limits_pickplace_through_the_runner_equals_direct_calls(tmp_path):
    """bench_limits' pick-and-place spec, one scenario with 0.25 s goals, off and default."""
    spec = _tiny(PP, options=dict(goal_s=0.25), labels=("off", "default"))
    _, table = _run(spec, tmp_path)
    assert [x["label"] for x in table] == ["off", "default"]
    for ep, row in zip(spec.episodes(), table):
        limits, kw, solver, integ = _call_args(ep["planner"])
        d = ls.run_limits_pickplace(ep["scenario"], limits, kw, goal_s=0.25, solver_kw=dict(solver, integrator=integ))
        pv = [math.nan] * 3 if d["plan_viol"] is None else list(d["plan_viol"])
        want = dict(peak_qd_ratio=d["peak_qd_ratio"], peak_joint=d["peak_joint"], qd_ratio=d["qd_ratio"].tolist(),
                    task_time=d["task_time"], mean_goal_error=d["mean_err"], plan_viol_q=pv[0], plan_viol_qd=pv[1],
                    plan_viol_u=pv[2])
        for k, v in want.items():
            got = row[k]
            assert _same(float("nan") if got is None and isinstance(v, float) else got, v), (k, got, v)
        assert row["sim_time"] == pytest.approx(3 * 0.25)
    # The shipped solver settings are bench_limits' (LIMITS_SOLVER): a direct call with the
    # defaults gives the same numbers.
    d = ls.run_limits_pickplace(spec.episodes()[0]["scenario"], "off", goal_s=0.25)
    assert d["peak_qd_ratio"] == table[0]["peak_qd_ratio"]
    assert table[0]["plan_viol_qd"] is None and table[1]["plan_viol_qd"] >= 0


def test_limits_fig8_through_the_runner_equals_direct_calls(tmp_path):
    """bench_limits' figure-8 spec, one scenario, a tenth of a period, default limits."""
    spec = _tiny(F8, options=dict(periods=0.1), labels=("default",))
    _, (row,) = _run(spec, tmp_path)
    (ep,) = spec.episodes()
    d = ls.run_limits_fig8(ep["scenario"], None, periods=0.1)
    assert (row["rms_tracking_error"], row["task_time"], row["path_lag"], row["peak_qd_ratio"], row["qd_ratio"]) \
        == (d["rms_err"], d["task_time"], d["lag"], d["peak_qd_ratio"], d["qd_ratio"].tolist())
    assert [row["plan_viol_q"], row["plan_viol_qd"], row["plan_viol_u"]] == list(d["plan_viol"])
    assert row["peak_joint"] == int(np.argmax(d["qd_ratio"])) and d["limits"] == "admm"


def test_study_episodes_give_the_same_table_on_two_local_workers_and_on_ray(tmp_path):
    """The determinism guarantee holds for study kinds: the tiny step spec on two local
    workers and on a local Ray instance gives the one-worker table (wall clock aside)."""
    ray = import_or_skip("ray", "pip install -r requirements/lock.txt (scripts/setup.sh)")
    import os

    spec = _tiny(STEP, options=dict(goal_s=0.2), labels=("admm:euler", "off:euler"))
    _run(spec, tmp_path / "w1")
    geval.run_eval(spec, tmp_path / "w2", workers=2, progress=False)
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    started = not ray.is_initialized()  # another module's instance is used as it is
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        geval.run_eval(spec, tmp_path / "ray", ray="local", progress=False)
    finally:
        if started:
            ray.shutdown()

    def table(d):
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in pq.read_table(d / "results.parquet").to_pylist()]

    t1 = table(tmp_path / "w1")
    assert len(t1) == 2 and all(r["status"] == "ok" for r in t1)
    assert table(tmp_path / "w2") == t1 and table(tmp_path / "ray") == t1


def test_limits_substeps_follow_the_world_step():
    """world.sim_dt = period / k runs k RK4 substeps per period (k = 4 is bench_limits')."""
    sc = ls.limits_fig8_set("iiwa14", 1, 0)[0]
    a = ls.run_limits_fig8(sc, "off", periods=0.05, substeps=4)
    b = ls.run_limits_fig8(sc, "off", periods=0.05, substeps=2)
    assert a["rms_err"] != b["rms_err"] and abs(a["rms_err"] / b["rms_err"] - 1) < 0.2
    with pytest.raises(ValueError, match="substeps"):
        ls.run_limits_fig8(sc, "off", periods=0.05, substeps=0)


# ----------------------------------------------------------------- the bench scripts
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def test_bench_limit_sweep_builds_its_table_from_the_runner(tmp_path, capsys):
    """bench_limit_sweep.py --n 1 through gato eval: its JSON rows are the runner's, its
    table the one --load rebuilds from that JSON."""
    import bench_limit_sweep as bs

    spec = bs.sweep_spec(1, 2201, ["admm:euler"])
    raw = copy.deepcopy(spec.raw)
    raw["task"]["options"] = dict(raw["task"]["options"], goal_s=0.3)
    spec = geval.parse_spec(raw)
    res = bs.run_sweep(spec, tmp_path / "e")
    (row,) = res["admm:euler"]
    sc = spec.scenarios("iiwa14")[0]
    d = ls.run_step_scenario(sc, integrator="euler", goal_s=0.3)
    assert row["qd_ratio"] == d["qd_ratio"].tolist() and row["step"] == sc["step"] and row["reached"] == d["reached"]
    lines = bs.table(res)
    assert lines[2].startswith("| admm:euler | 1 | ") and f"{max(row['qd_ratio']):.3f}" in lines[2]
    with pytest.raises(ValueError, match="--configs"):
        bs.config_entry("admm:rk5")


def test_bench_limits_prints_the_direct_calls_table_from_the_runner(tmp_path):
    """bench_limits.py's table rows, built from the runner's rows, are the rows the pre-port
    script formatted from direct calls (its format strings, here inline)."""
    import bench_limits as bl

    raw = copy.deepcopy(bl.study_spec("limits_pickplace_iiwa14", 1, 0, ["off", "default"]).raw)
    raw["task"]["options"] = dict(goal_s=0.25)
    spec = geval.parse_spec(raw)
    rows, order = bl.run_spec(spec, tmp_path)
    got = bl.pickplace_lines(rows, order, ["off", "default"])
    want = []
    for sc in bl.pickplace_set(1, seed=0):
        for m in ("off", "default"):
            r = bl.run_pickplace(sc, None if m == "default" else m, goal_s=0.25)
            pv = "—" if r["plan_viol"] is None else " / ".join(f"{v:.3g}" for v in r["plan_viol"])
            want.append(f"| {sc['id']} | {m} | {r['peak_qd_ratio']:.3f} (j{r['peak_joint'] + 1}) | "
                        f"{r['task_time']:.3f} | {r['mean_err']:.4f} | {pv} |")
    assert got == want
