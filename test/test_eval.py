"""gato eval / gato tune (gato.eval): spec validation, the local process pool and a local Ray
instance give the same result tables, resume, faults (an episode that raises, a worker
killed mid-episode), Ctrl-C, and the tuned parameter file the controller node accepts.

Episodes are tiny (0.3 s of simulated time on iiwa14 figure-8 scenarios) so the file runs
in a minute or two; the figures of docs/benchmarks.md come from bench/bench_eval.py."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import import_or_skip

import_or_skip("pyarrow", "pip install -r requirements/lock.txt (scripts/setup.sh)")
import pyarrow.parquet as pq  # noqa: E402

from gato import eval as geval  # noqa: E402
from gato.eval.runner import LocalExecutor  # noqa: E402

# Wall-clock columns: the only ones allowed to differ between executors.
TIMING = ("wall_s", "solve_time_ms", "solve_time_p95_ms")

BASE = dict(
    name="t",
    robots=["iiwa14"],
    planners=[dict(label="default", planner="bsqp"),
              dict(label="q8", planner="bsqp", params=dict(q_cost=8.0, max_sqp_iters=2))],
    task=dict(kind="fig8", seeds=[0], n=2, options=dict(ratio_range=[0.6, 0.9])),
    disturbances={"none": [], "payload": [dict(kind="point_payload", mass=1.0)]},
    episode=dict(duration=0.3),
    metrics=["mean_tracking_error", "max_tracking_error", "limit_violation", "effort"],
)

FAULTY = textwrap.dedent('''
    """Planners with injected faults for test_eval (loaded by the workers through PYTHONPATH)."""
    import os
    import signal
    from pathlib import Path

    from gato.bsqp_planner import BSQPPlanner


    class Faulty(BSQPPlanner):
        def __init__(self, robot, config=None):
            cfg = dict(config or {})
            self.mode, self.marker = cfg.pop("mode"), cfg.pop("marker", None)
            super().__init__(robot, cfg)

        def step(self, x, reference, dt_elapsed=None, budget_s=None):
            if self.mode == "raise":
                raise RuntimeError("injected planner fault")
            if self.mode == "always_kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.mode == "kill" and not os.path.exists(self.marker):
                Path(self.marker).touch()  # the first episode to get here dies once
                os.kill(os.getpid(), signal.SIGKILL)
            return super().step(x, reference, dt_elapsed, budget_s)
''')


@pytest.fixture(scope="module")
def faulty_path(tmp_path_factory):
    """A folder on PYTHONPATH (this process and every worker it starts) holding faulty_planners.py."""
    d = tmp_path_factory.mktemp("faulty")
    (d / "faulty_planners.py").write_text(FAULTY)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(d) + (os.pathsep + old if old else "")
    sys.path.insert(0, str(d))
    yield d
    sys.path.remove(str(d))
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def ray_local(faulty_path):
    ray = import_or_skip("ray", "pip install -r requirements/lock.txt (scripts/setup.sh)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    yield ray
    ray.shutdown()


def _spec(**over):
    return geval.parse_spec({**BASE, **over})


def _table(out):
    t = pq.read_table(Path(out) / "results.parquet").to_pylist()
    return [{k: v for k, v in r.items() if k not in TIMING} for r in t]


# ----------------------------------------------------------------- the spec
@pytest.mark.parametrize("patch, field", [
    (dict(robots=["kuka"]), "robots[0]"),
    (dict(planners=[dict(planner="bsqp", params=dict(q_cost=-1.0))]), "planners[0].params.q_cost"),
    (dict(planners=[dict(planner="bsqp", params=dict(q_cots=1.0))]), "planners[0].params.q_cots"),
    (dict(planners=[dict(planner="nope")]), "planners[0].planner"),
    (dict(planners=[dict(planner="bsqp"), dict(planner="bsqp")]), "planners[1].label"),
    (dict(task=dict(kind="fig9")), "task.kind"),
    (dict(task=dict(kind="fig8", n=0)), "task.n"),
    (dict(task=dict(kind="fig8", seeds=[-1])), "task.seeds[0]"),
    (dict(disturbances={"x": [dict(kind="point_payload", mass=-2)]}), "disturbances.x[0]"),
    (dict(disturbances={"x": [dict(kind="gust")]}), "disturbances.x[0].kind"),
    (dict(world=dict(kind="bullet")), "world.kind"),
    (dict(episode=dict(duration=0)), "episode.duration"),
    (dict(metrics=["speed"]), "metrics[0]"),
    (dict(colour="red"), "colour"),
    (dict(tune=dict(search=dict(q_cost=dict(loguniform=[0, 1])))), "tune.search.q_cost.loguniform"),
    (dict(tune=dict(search=dict(N=dict(choice=[16, 32])))), "tune.search.N"),
    (dict(tune=dict(objective="speed", search=dict(q_cost=dict(uniform=[1, 2])))), "tune.objective.speed"),
])
def test_malformed_spec_names_the_bad_field(patch, field):
    with pytest.raises(ValueError) as e:
        _spec(**patch)
    assert str(e.value).startswith(f"{field}:"), str(e.value)


def test_spec_file_errors_name_the_file_and_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({**BASE, "episode": {"duration": "long"}}))
    with pytest.raises(ValueError, match=r"bad.yaml: episode.duration: expected a number"):
        geval.load_spec(p)
    r = subprocess.run([sys.executable, "-m", "gato", "eval", str(p)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "episode.duration" in r.stderr


def test_episode_keys_hash_spec_part_and_scenario():
    a, b = _spec().episodes(), _spec(name="other", metrics=["effort"]).episodes()
    assert len(a) == 2 * 2 * 2 and len({e["key"] for e in a}) == len(a)
    assert [e["key"] for e in a] == [e["key"] for e in b]  # name and metrics do not change an episode
    c = _spec(episode=dict(duration=0.4)).episodes()
    assert not {e["key"] for e in a} & {e["key"] for e in c}


def test_node_defaults_are_the_controller_schema_defaults():
    params = import_or_skip("gato_ros.params", "the ROS packages (scripts/setup.sh)")
    from gato.eval.episode import NODE_DEFAULTS, node_defaults

    for robot in params.ROBOTS:
        d = params.defaults(params.CONTROLLER, robot)
        assert {k: d[k] for k in NODE_DEFAULTS} == node_defaults(robot), robot
    # a robot without shipped weights (a URDF path, the 9-DoF chain) gets the robot-independent ones
    assert node_defaults("not-an-arm") == NODE_DEFAULTS


def test_ray_is_imported_only_by_the_ray_executor():
    code = ("import sys, gato.eval\n"
            "from gato.eval.runner import make_executor\n"
            "from gato.eval.results import write_outputs\n"
            "make_executor(None, 1)\n"
            "sys.exit(1 if 'ray' in sys.modules else 0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# ----------------------------------------------------------------- executors
def test_local_pool_and_ray_give_identical_tables(tmp_path, ray_local):
    spec = _spec()
    r1 = geval.run_eval(spec, tmp_path / "w1", workers=1, progress=False)
    r2 = geval.run_eval(spec, tmp_path / "w2", workers=2, progress=False)
    r3 = geval.run_eval(spec, tmp_path / "ray", ray="local", progress=False)
    assert r1["ran"] == r2["ran"] == r3["ran"] == 8
    t1, t2, t3 = _table(tmp_path / "w1"), _table(tmp_path / "w2"), _table(tmp_path / "ray")
    assert all(r["status"] == "ok" for r in t1), [r["error"] for r in t1]
    assert t1 == t2 == t3
    # The outputs: CSV like the Parquet, summary with its interval around the mean, plots, report.
    assert (tmp_path / "w1" / "results.csv").read_text().count("\n") == 9
    s = [x for x in r1["summary"] if x["metric"] == "mean_tracking_error"]
    assert len(s) == 4 and all(x["n"] == 2 and x["ci95_lo"] <= x["mean"] <= x["ci95_hi"] for x in s)
    assert all(p.stat().st_size > 1000 for p in r1["plots"]) and len(r1["plots"]) == 4
    assert "mean_tracking_error" in r1["report"].read_text()
    # Heavier tracking weight changes the numbers: the configurations really differ.
    by = {(r["label"], r["disturbance_case"], r["scenario_id"]): r["mean_tracking_error"] for r in t1}
    assert by[("q8", "none", "iiwa14/fig8/0/0")] != by[("default", "none", "iiwa14/fig8/0/0")]


class _StopAfter:
    """A LocalExecutor whose run is interrupted (KeyboardInterrupt) after ``n`` rows."""

    def __init__(self, n):
        self.inner, self.n, self.name, self.workers = LocalExecutor(1), n, "local", 1

    def run(self, episodes, on_row):
        seen = 0

        def cb(row):
            nonlocal seen
            on_row(row)
            seen += 1
            if seen >= self.n:
                raise KeyboardInterrupt

        self.inner.run(episodes, cb)


def test_resume_after_interruption_runs_only_the_missing_episodes(tmp_path):
    spec = _spec(disturbances={"none": []})
    r = geval.run_eval(spec, tmp_path, executor=_StopAfter(1), progress=False)
    assert r["interrupted"] and r["ran"] == 1 and len(pq.read_table(tmp_path / "results.parquet")) == 1
    assert "interrupted" in r["report"].read_text()
    r = geval.run_eval(spec, tmp_path, workers=1, progress=False)
    assert (r["ran"], r["skipped"], r["interrupted"]) == (3, 1, False)
    r = geval.run_eval(spec, tmp_path, workers=1, progress=False)
    assert (r["ran"], r["skipped"]) == (0, 4)
    assert sorted(x["index"] for x in _table(tmp_path)) == [0, 1, 2, 3]


def test_ctrl_c_leaves_a_consistent_partial_result(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({**BASE, "episode": {"duration": 1.0}, "task": {**BASE["task"], "n": 3}}))
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "gato", "eval", str(spec), "--out", str(out), "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list((out / "episodes").glob("*.json"))) < 1:
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stderr
    done = list((out / "episodes").glob("*.json"))
    assert 1 <= len(done) < 12 and not list((out / "episodes").glob(".*.tmp"))
    assert len(pq.read_table(out / "results.parquet")) == len(done)
    assert all(json.loads(f.read_text())["status"] == "ok" for f in done)
    assert "INTERRUPTED" in stdout


# ----------------------------------------------------------------- faults
def test_an_episode_that_raises_is_reported_and_the_others_kept(tmp_path, faulty_path):
    spec = _spec(planners=[dict(label="ok", planner="bsqp"),
                           dict(label="bad", planner="faulty_planners:Faulty", config=dict(mode="raise"))],
                 disturbances={"none": []})
    r = geval.run_eval(spec, tmp_path, workers=2, progress=False)
    rows = {(x["label"], x["scenario_id"]): x for x in r["rows"]}
    assert len(rows) == 4
    assert all(rows[("ok", s)]["status"] == "ok" for s in ("iiwa14/fig8/0/0", "iiwa14/fig8/0/1"))
    bad = [x for x in r["rows"] if x["label"] == "bad"]
    assert all(x["status"] == "error" and "injected planner fault" in x["error"] for x in bad)
    assert "injected planner fault" in r["report"].read_text()
    assert [x["errors"] for x in r["summary"] if x["metric"] == "effort"] == [0, 2]


def test_strict_run_names_the_failed_episodes_after_writing_the_outputs(tmp_path, faulty_path):
    spec = _spec(planners=[dict(label="ok", planner="bsqp"),
                           dict(label="bad", planner="faulty_planners:Faulty", config=dict(mode="raise"))],
                 disturbances={"none": []})
    with pytest.raises(geval.EpisodesFailed) as e:
        geval.run_eval_strict(spec, tmp_path, workers=2, progress=False)
    assert isinstance(e.value, RuntimeError)  # callers that caught run_eval's RuntimeError still do
    assert [(x["label"], x["scenario_id"], x["index"]) for x in e.value.failed] == [
        ("bad", "iiwa14/fig8/0/0", 2), ("bad", "iiwa14/fig8/0/1", 3)]
    msg = str(e.value)
    assert msg.startswith(f"2 episodes failed (report: {e.value.report}): "
                          "bad on iiwa14/fig8/0/0 (episode 2), bad on iiwa14/fig8/0/1 (episode 3)\n")
    assert "injected planner fault" in msg and "ok on" not in msg
    assert len(pq.read_table(tmp_path / "results.parquet")) == 4  # the outputs are there to inspect


def test_strict_run_raises_on_interruption_and_returns_the_finished_run(tmp_path):
    spec = _spec(disturbances={"none": []})
    with pytest.raises(KeyboardInterrupt):
        geval.run_eval_strict(spec, tmp_path, executor=_StopAfter(1), progress=False)
    assert len(pq.read_table(tmp_path / "results.parquet")) == 1
    r = geval.run_eval_strict(spec, tmp_path, workers=1, progress=False)
    assert (r["ran"], r["skipped"], r["interrupted"]) == (3, 1, False)
    assert [x["index"] for x in r["rows"]] == [0, 1, 2, 3] and all(x["status"] == "ok" for x in r["rows"])


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_worker_killed_mid_episode_is_retried(tmp_path, faulty_path, executor, request):
    if executor == "ray":
        request.getfixturevalue("ray_local")
    marker = tmp_path / "killed"
    spec = _spec(planners=[dict(label="k", planner="faulty_planners:Faulty",
                                config=dict(mode="kill", marker=str(marker)))], disturbances={"none": []},
                 task=dict(kind="fig8", seeds=[0], n=3, options=dict(ratio_range=[0.6, 0.9])))
    r = geval.run_eval(spec, tmp_path / "out", workers=2, ray="local" if executor == "ray" else None,
                       progress=False)
    assert marker.exists()  # a worker did die
    assert len(r["rows"]) == 3 and all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    assert len(pq.read_table(tmp_path / "out" / "results.parquet")) == 3


def test_a_worker_that_always_dies_is_recorded_after_its_retries(tmp_path, faulty_path):
    spec = _spec(planners=[dict(label="ok", planner="bsqp"),
                           dict(label="k", planner="faulty_planners:Faulty", config=dict(mode="always_kill"))],
                 disturbances={"none": []}, task=dict(kind="fig8", seeds=[0], n=1))
    r = geval.run_eval(spec, tmp_path / "out", workers=1, retries=1, progress=False)
    ok, dead = r["rows"]
    assert ok["status"] == "ok"
    assert dead["status"] == "error" and "worker died 2 times" in dead["error"]


# ----------------------------------------------------------------- tune
def test_tune_writes_a_parameter_file_the_controller_accepts(tmp_path, ray_local):
    params = import_or_skip("gato_ros.params", "the ROS packages (scripts/setup.sh)")
    from gato.eval.tune import run_tune

    spec = _spec(planners=[dict(label="default", planner="bsqp")], disturbances={"none": []},
                 tune=dict(search=dict(q_cost=dict(loguniform=[0.5, 20.0]), N_cost=dict(choice=[20.0, 80.0])),
                           num_samples=3, max_concurrent=2, asha=dict(grace_period=1, reduction_factor=2),
                           holdout=dict(seeds=[7], n=1), objective=dict(mean_tracking_error=1.0)))
    r = run_tune(spec, tmp_path)
    assert len(r["trials"]) == 3 and set(r["best"]) == {"q_cost", "N_cost"}
    assert 0.5 <= r["best"]["q_cost"] <= 20.0 and r["best"]["N_cost"] in (20.0, 80.0)
    cfg = yaml.safe_load(r["yaml"].read_text())["gato_controller"]["ros__parameters"]
    resolved = params.resolve_config(params.CONTROLLER, cfg, "controller")
    assert resolved["q_cost"] == pytest.approx(r["best"]["q_cost"]) and resolved["robot"] == "iiwa14"
    assert {x["label"] for x in r["holdout_rows"]} == {"default", "tuned"}
    assert "| tuned | mean_tracking_error |" in r["table"]
    assert (tmp_path / "trials.csv").read_text().count("\n") == 4


def test_local_workers_run_one_numeric_thread_each(tmp_path, faulty_path):
    # The planner reports its worker's environment through an injected fault message.
    (faulty_path / "env_planner.py").write_text(textwrap.dedent('''
        import os
        from gato.bsqp_planner import BSQPPlanner


        class EnvReport(BSQPPlanner):
            def step(self, *a, **k):
                raise RuntimeError("env " + ",".join(os.environ.get(n, "-") for n in
                                   ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")))
    '''))
    before = {n: os.environ.get(n) for n in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    spec = _spec(planners=[dict(label="e", planner="env_planner:EnvReport")], disturbances={"none": []},
                 task=dict(kind="fig8", seeds=[0], n=1))
    (row,) = geval.run_eval(spec, tmp_path, workers=1, progress=False)["rows"]
    expect = ",".join(v or "1" for v in before.values())
    assert f"env {expect}" in row["error"]
    assert {n: os.environ.get(n) for n in before} == before  # the driver's environment is restored


@pytest.mark.parametrize("patch", [
    dict(task=dict(kind="pickplace", seeds=[3], n=1, options=dict(n_goals=2, timeout=0.3, threshold=0.05)),
         episode=dict(duration=0.6)),
    dict(world=dict(kind="mujoco", sim_dt=0.001)),
])
def test_pickplace_task_and_mujoco_world_episodes_run(patch):
    from gato.eval.episode import run_episode

    spec = _spec(planners=[dict(label="default", planner="bsqp")], disturbances={"none": []},
                 **{"task": dict(kind="fig8", seeds=[0], n=1), **patch})
    (ep,) = spec.episodes()
    row = run_episode(ep)
    assert row["status"] == "ok", row["error"]
    assert row["n_ticks"] > 5 and 0 < row["mean_tracking_error"] < 0.2 and row["diverged"] == 0
    if spec.task["kind"] == "pickplace":
        assert row["stop_reason"] in ("goals_done", "time_limit") and 0 <= row["goals_reached"] <= 2
        assert row["final_goal_distance"] > 0
