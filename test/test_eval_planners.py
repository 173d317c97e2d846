"""bench_sampling's closed loop (sampling vs bsqp in MuJoCo) as gato eval study kinds
(gato.eval.planner_studies): the runner's episodes equal the direct calls bit for bit, bad
fields are named, and the local pool and a local Ray instance give the same table."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import import_or_skip

import_or_skip("pyarrow", "pip install -r requirements/lock.txt (scripts/setup.sh)")
import_or_skip("mujoco", "pip install -r requirements/lock.txt (scripts/setup.sh)")
import pyarrow.parquet as pq  # noqa: E402

from gato import eval as geval  # noqa: E402
from gato.eval import planner_studies as ps  # noqa: E402

SPECS = Path(__file__).resolve().parents[1] / "bench" / "specs"


def _raw(kind):
    return yaml.safe_load((SPECS / f"sampling_{kind}_iiwa14.yaml").read_text())


def _tiny(kind, options, labels=None, n=1):
    raw = _raw(kind)
    raw["task"] = dict(raw["task"], n=n, options={**raw["task"].get("options", {}), **options})
    if labels is not None:
        raw["planners"] = [p for p in raw["planners"] if p["label"] in labels]
    return geval.parse_spec(raw)


def _table(out):
    return pq.read_table(Path(out) / "results.parquet").to_pylist()


def _run(spec, out, **kw):
    r = geval.run_eval(spec, out, progress=False, **kw)
    assert not r["interrupted"] and all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    return {x["label"]: x for x in _table(out)}


def test_shipped_specs_parse_to_bench_sampling_counts():
    """The three specs give bench_sampling's defaults: 3 figure-8 and 3 pick-and-place
    scenarios x (sampling, bsqp), 10 boxes x sampling."""
    for kind, n in (("fig8", 6), ("pickplace", 6), ("box_push", 10)):
        assert len(geval.load_spec(SPECS / f"sampling_{kind}_iiwa14.yaml").episodes()) == n


def test_fig8_through_the_runner_equals_direct_calls(tmp_path):
    """A twentieth of a period: both planners' RMS errors equal the episode functions called
    on the generator's own (unserialised) scenario."""
    spec = _tiny("fig8", dict(periods=0.05))
    rows = _run(spec, tmp_path, workers=1)
    (sc,) = spec.scenarios("iiwa14")
    import pinocchio as pin

    import gato
    from gato.tasks import fig8_scenarios

    raw_sc = fig8_scenarios(pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14"))), "iiwa14", 1, seed=0,
                            dt=0.03125, ratio_range=(0.5, 0.5))[0]
    assert raw_sc["id"] == sc["id"]
    assert rows["sampling"]["rms_tracking_error"] == ps.fig8_sampling(raw_sc, threads=2, periods=0.05)
    assert rows["bsqp"]["rms_tracking_error"] == ps.fig8_bsqp(raw_sc, periods=0.05)
    assert rows["bsqp"]["sim_time"] == pytest.approx(0.05 * raw_sc["params"]["period"])


def test_pickplace_and_box_push_through_the_runner_equal_direct_calls(tmp_path):
    import pinocchio as pin

    import gato
    from gato.sampling import scenes
    from gato.tasks import pickplace_scenarios

    spec = _tiny("pickplace", dict(goal_s=0.1))
    rows = _run(spec, tmp_path / "pp", workers=1)
    sc = pickplace_scenarios(pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14"))), "iiwa14", 1, seed=0,
                             ramps=(0.0,))[0]
    a, b = ps.pickplace_sampling(sc, goal_s=0.1, threads=2), ps.pickplace_bsqp(sc, goal_s=0.1)
    assert (rows["sampling"]["end_goal_error_max"], rows["bsqp"]["end_goal_error_max"]) == (a, b)
    assert (rows["sampling"]["success"], rows["bsqp"]["success"]) == (int(a < 0.02), int(b < 0.02))

    spec = _tiny("box_push", dict(steps=20))
    row = _run(spec, tmp_path / "box", workers=1)["sampling"]
    e, e0 = ps.box_push(scenes.box_push_scenarios(1, seed=0)[0], threads=2, steps=20)
    assert (row["box_error"], row["box_error_open_loop"], row["success"]) == (e, e0, int(e < 0.03))


@pytest.mark.parametrize("edit, field", [
    (lambda r: r["planners"][0].update(config={"thread": 2}), "planners[0].config.thread"),
    (lambda r: r["planners"][0].update(config={"threads": 0}), "planners[0].config.threads"),
    (lambda r: r["planners"][0].update(config={"method": "lqr"}), "planners[0].config.method"),
    (lambda r: r["planners"][0].update(config={"iterations": 0}), "planners[0].config.iterations"),
    (lambda r: r["planners"][0].update(config={"node_steps": 0}), "planners[0].config.node_steps"),
    (lambda r: r["planners"][0].update(config={"node_steps": 101}), "planners[0].config.node_steps"),
    (lambda r: r["planners"][1].update(planner="osc"), "planners[1].planner"),
    (lambda r: r["planners"][1].update(params={"q_cost": 2.0}), "planners[1].params"),
    (lambda r: r["task"]["options"].update(periods=-1), "task.options.periods"),
    (lambda r: r["task"]["options"].update(speed=1), "task.options.speed"),
    (lambda r: r.update(world={"kind": "pinocchio", "sim_dt": 0.001}), "world.kind"),
    (lambda r: r.update(metrics=["box_error"]), "metrics[0]"),
    (lambda r: r.update(episode={"duration": 1.0}), "episode"),
])
def test_bad_fields_are_named(edit, field):
    raw = _raw("fig8")
    edit(raw)
    with pytest.raises(ValueError, match="^" + re.escape(field) + ":"):
        geval.parse_spec(raw)


def test_fig8_ilqr_through_the_runner_equals_the_direct_call(tmp_path):
    """config.method ilqr (issue 39): the runner's figure-8 row equals fig8_sampling(method='ilqr')."""
    raw = _raw("fig8")
    raw["task"] = dict(raw["task"], n=1, options={**raw["task"].get("options", {}), "periods": 0.05})
    raw["planners"] = [dict(p, config={"threads": 2, "method": "ilqr", "iterations": 1})
                       for p in raw["planners"] if p["label"] == "sampling"]
    spec = geval.parse_spec(raw)
    rows = _run(spec, tmp_path, workers=1)
    (sc,) = spec.scenarios("iiwa14")
    direct = ps.fig8_sampling(ps._arrays(sc), threads=2, periods=0.05, method="ilqr", iterations=1)
    assert rows["sampling"]["rms_tracking_error"] == pytest.approx(direct, rel=1e-9)
    assert direct < 0.01


def test_ilqr_specs_parse_with_their_node_steps():
    """The iLQR comparison specs (issue 39): the pick-and-place iLQR (and the figure-8's ilqr_hold4)
    holds its offsets 4 steps (config.node_steps, passed to the episode), MPPI keeps the scenes' nodes."""
    for kind, n, want in (("fig8", 27, {"mppi": None, "ilqr": None, "ilqr_hold4": 4}),
                          ("pickplace", 12, {"mppi": None, "ilqr": 4})):
        eps = geval.load_spec(SPECS / f"sampling_ilqr_{kind}_iiwa14.yaml").episodes()
        assert len(eps) == n
        assert {e["planner"]["label"]: e["planner"]["config"].get("node_steps") for e in eps} == want


def _offsets(n):
    """(n, 3) offsets whose norms alternate 1 mm, 3 mm in turning directions: mean 2 mm,
    RMS sqrt(5) mm (n even)."""
    dirs = np.eye(3)[np.arange(n) % 3]
    return dirs * np.where(np.arange(n) % 2 == 0, 1e-3, 3e-3)[:, None]


def test_mean_errors_of_a_known_trajectory(monkeypatch):
    """The mean-error metrics (issue 39) of a known EE trajectory through the studies' episode
    code: the figure-8's EE rows = the path (shifted one step, as the episode compares them) plus
    offsets of 1 / 3 mm in turn -> their mean and RMS (51 steps: 26 x 1 mm, 25 x 3 mm -> 1.98 mm);
    the pick-and-place's (20 steps per goal) = each goal plus
    the same offsets -> mean_goal_error 2 mm, end_goal_error_max the last rows' 3 mm; the mean
    plan time of the plans' wall_s."""
    from types import SimpleNamespace

    from gato.eval.episode import run_episode
    from gato.sampling import scenes

    e = ps.path_errors(np.zeros((4, 3)) + _offsets(4), np.zeros((4, 3)))
    assert e["mean_tracking_error"] == pytest.approx(2e-3, abs=1e-15)
    assert e["rms_tracking_error"] == pytest.approx(np.sqrt(5) * 1e-3, abs=1e-15)

    spec = _tiny("ilqr_fig8", dict(periods=0.05))
    ep = [x for x in spec.episodes() if x["planner"]["label"] == "ilqr"][0]
    sc = ps._arrays(ep["scenario"])
    _, _, xyz, n = scenes.fig8_task(sc, timestep=0.005, periods=0.05)
    k = np.arange(n)
    norms = np.where(k % 2 == 0, 1e-3, 3e-3)  # the offsets' lengths: n = 51 here, 26 x 1 mm and 25 x 3 mm
    model = SimpleNamespace(sensor_adr=np.array([3]),
                            sensor=lambda name: SimpleNamespace(id=0 if name == scenes.ee_sensor() else None))

    def fake_run(config, ctrl_ref, model_spec, q0, num_steps, threads):
        assert num_steps == n and config.planner == "ilqr"
        data = np.zeros((num_steps, 6))
        data[:, 3:6] = xyz[1:n + 1] + _offsets(n)
        return dict(sensordata=data), [dict(wall_s=0.01), dict(wall_s=0.03)], model

    monkeypatch.setattr(ps, "_sampling_run", fake_run)
    row = run_episode(ep)
    assert row["status"] == "ok", row["error"]
    assert row["mean_tracking_error"] == pytest.approx((26 * 1e-3 + 25 * 3e-3) / 51 if n == 51 else norms.mean(), abs=1e-12)
    assert row["rms_tracking_error"] == pytest.approx(np.sqrt(np.mean(norms ** 2)), abs=1e-12)
    assert row["solve_time_ms"] == pytest.approx(20.0)

    spec = _tiny("ilqr_pickplace", dict(goal_s=0.1))
    ep = [x for x in spec.episodes() if x["planner"]["label"] == "ilqr"][0]
    goals = np.asarray(ep["scenario"]["goals"])
    per = 20  # 0.1 s of 5 ms steps

    def fake_pp(sc, goal_s, threads, method, iterations, node_steps):
        assert (goal_s, method, node_steps) == (0.1, "ilqr", 4)
        return [g + _offsets(per) for g in sc["goals"]], [0.01, 0.02, 0.03]

    monkeypatch.setattr(ps, "_pickplace_run", fake_pp)
    row = run_episode(ep)
    assert row["status"] == "ok", row["error"]
    assert len(goals) == 3
    assert row["mean_goal_error"] == pytest.approx(2e-3, abs=1e-12)
    assert row["end_goal_error_max"] == pytest.approx(3e-3, abs=1e-12)
    assert row["success"] == 1 and row["solve_time_ms"] == pytest.approx(20.0)


def test_box_push_takes_the_sampling_planner_only():
    raw = _raw("box_push")
    raw["planners"].append({"label": "bsqp", "planner": "bsqp"})
    with pytest.raises(ValueError, match=r"^planners\[1\]\.planner:"):
        geval.parse_spec(raw)


def test_local_pool_and_local_ray_give_the_same_table(tmp_path):
    """The bsqp figure-8 episodes (fast) on the local pool (2 workers) and
    on a local Ray instance give the one-worker table (wall clock aside: wall_s, solve_time_ms)."""
    ray = import_or_skip("ray", "pip install -r requirements/lock.txt (scripts/setup.sh)")
    specs = [_tiny("fig8", dict(periods=0.05), labels=("bsqp",), n=2)]

    from gato.eval.spec import TIMING_METRICS

    def table(d):  # the wall clock aside
        return [{k: v for k, v in r.items() if k != "wall_s" and k not in TIMING_METRICS} for r in _table(d)]

    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        for i, spec in enumerate(specs):
            _run(spec, tmp_path / f"w1_{i}", workers=1)
            _run(spec, tmp_path / f"w2_{i}", workers=2)
            _run(spec, tmp_path / f"ray_{i}", ray="local")
    finally:
        if started:
            ray.shutdown()
    for i in range(len(specs)):
        t1 = table(tmp_path / f"w1_{i}")
        assert len(t1) == 2 and all(r["status"] == "ok" for r in t1)
        assert table(tmp_path / f"w2_{i}") == t1 and table(tmp_path / f"ray_{i}") == t1
