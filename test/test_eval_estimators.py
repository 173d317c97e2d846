"""gato eval's wrench-hypothesis study kinds (gato.eval.wrench_studies): issue 15's disturbance
(``disturbance_fig8``) and payload (``payload_pickplace``) experiments as gato eval specs
(bench/specs/disturbance_fig8_iiwa14.yaml, payload_pickplace_iiwa14.yaml).

The shipped specs validate; a malformed hypotheses / disturbance field is named; a tiny episode
through the runner's local pool gives, bit for bit, the numbers of the direct gato.MPC_GATO call
the benchmark scripts made before they were ported (their code, inline here); and the local pool
and a local Ray instance give the same table. Episodes are fractions of a second of simulated
time."""
import copy
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import import_or_skip

import_or_skip("pyarrow", "pip install -r requirements/lock.txt (scripts/setup.sh)")
import pyarrow.parquet as pq  # noqa: E402

import gato  # noqa: E402
from gato import eval as geval  # noqa: E402
from gato.mpc_gato import MPC_GATO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "bench" / "specs"
sys.path.insert(0, str(ROOT / "bench"))
DIST, PAY = "disturbance_fig8_iiwa14", "payload_pickplace_iiwa14"


def _raw(name):
    return yaml.safe_load((SPECS / f"{name}.yaml").read_text())


def _tiny(name, n=1, options=None, labels=None, disturbances=None):
    raw = _raw(name)
    raw["task"] = dict(raw["task"], n=n, options={**raw["task"].get("options", {}), **(options or {})})
    if labels is not None:
        raw["planners"] = [p for p in raw["planners"] if p["label"] in labels]
    if disturbances is not None:
        raw["disturbances"] = disturbances
    return geval.parse_spec(raw)


def _run(spec, out, **kw):
    r = geval.run_eval(spec, out, progress=False, **{"workers": 1, **kw})
    assert r["ran"] == len(spec.episodes()) and not r["interrupted"]
    assert all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    return r


# ----------------------------------------------------------------- the shipped specs
def test_shipped_wrench_specs_validate():
    d = geval.load_spec(SPECS / f"{DIST}.yaml")
    eps = d.episodes()
    assert len(eps) == 6 * 5 * 3 and len({e["key"] for e in eps}) == len(eps)
    assert [p["config"]["hypotheses"]["estimator"] for p in d.planners] == ["none", "fe", "fe", "wid", "wid",
                                                                              "wrench_id"]
    assert [p["config"]["hypotheses"].get("inertial_rows", False) for p in d.planners] == [False] * 3 + [True] * 2 \
        + [False]
    assert list(d.disturbances) == ["F0", "F20", "F40", "F60", "F80"]
    # The directions are bench_disturbance's: one seeded draw of n unit vectors.
    dirs = np.array([s["direction"] for s in d.scenarios("iiwa14")])
    v = np.random.default_rng(0).standard_normal((3, 3))
    assert np.array_equal(dirs, v / np.linalg.norm(v, axis=1, keepdims=True))
    p = geval.load_spec(SPECS / f"{PAY}.yaml")
    assert len(p.episodes()) == 11 * 20
    assert p.metrics[0] == "success" and p.disturbances["pendulum_15kg"][0]["mass"] == 15.0


_HYP = "planners[0].config.hypotheses"


@pytest.mark.parametrize("name, patch, field", [
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="pf", batch_size=8)))]),
     f"{_HYP}.estimator"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="fe", batch_size=1)))]),
     f"{_HYP}.batch_size"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="fe", batch_size=0)))]),
     f"{_HYP}.batch_size"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="wrench_id", batch_size=8)))]),
     f"{_HYP}.batch_size"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="cem", batch_size=8,
                                                                            seed=-1)))]), f"{_HYP}.seed"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="fe", batch_size=8,
                                                                            mode="weight")))]), f"{_HYP}.mode"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimatr="fe")))]), f"{_HYP}.estimatr"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="fe", batch_size=8,
                                                                            inertial_rows=True)))]),
     f"{_HYP}.inertial_rows"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="wid", batch_size=8,
                                                                            inertial_rows="yes")))]),
     f"{_HYP}.inertial_rows"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="wid", batch_size=8,
                                                                            inertial_gain=0.5)))]),
     f"{_HYP}.inertial_gain"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses=dict(estimator="swing", batch_size=8,
                                                                            inertial_gain=1.5)))]),
     f"{_HYP}.inertial_gain"),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(hypotheses="fe"))]), _HYP),
    (DIST, dict(planners=[dict(planner="bsqp", config=dict(solver=dict(q_cots=1.0)))]),
     "planners[0].config.solver.q_cots"),
    (DIST, dict(planners=[dict(planner="bsqp", params=dict(q_cost=1.0))]), "planners[0].params"),
    (DIST, dict(planners=[dict(planner="osc")]), "planners[0].planner"),
    (DIST, dict(disturbances=dict(F20=[dict(kind="constant_wrench", wrench=[0, 0, 20, 0, 0, 0])])),
     "disturbances.F20[0]"),
    (DIST, dict(disturbances=dict(F20=[dict(kind="ee_force", magnitude=-20.0)])), "disturbances.F20[0].magnitude"),
    (DIST, dict(disturbances=dict(F20=[dict(kind="ee_force", magnitude=20.0, direction=[0, 0, 0])])),
     "disturbances.F20[0].direction"),
    (DIST, dict(task=dict(kind="disturbance_fig8", options=dict(duration=0))), "task.options.duration"),
    (DIST, dict(task=dict(kind="disturbance_fig8", options=dict(q_start=[0.0] * 6))), "task.options.q_start"),
    (DIST, dict(world=dict(kind="mujoco", sim_dt=0.001)), "world.kind"),
    (DIST, dict(world=dict(kind="pinocchio", sim_dt=0.05)), "world.sim_dt"),
    (DIST, dict(episode=dict(duration=3.0)), "episode"),
    (PAY, dict(disturbances=dict(p=[dict(kind="pendulum", mass=-15.0, length=0.5)])), "disturbances.p[0].mass"),
    (PAY, dict(disturbances=dict(p=[dict(kind="point_payload", mass=1.0)])), "disturbances.p[0]"),
    (PAY, dict(task=dict(kind="payload_pickplace", options=dict(grace=-1))), "task.options.grace"),
    (PAY, dict(task=dict(kind="payload_pickplace", options=dict(clamp_torques="no"))), "task.options.clamp_torques"),
    (PAY, dict(metrics=["mean_tracking_error_settled"]), "metrics[0]"),
])
def test_malformed_wrench_spec_names_the_bad_field(name, patch, field):
    raw = {**_raw(name), **copy.deepcopy(patch)}
    with pytest.raises(ValueError) as e:
        geval.parse_spec(raw)
    assert str(e.value).startswith(f"{field}:"), str(e.value)


# ----------------------------------------------------------------- runner vs the direct calls
def _bench_disturbance_run(F, d, B, mode, sim_time, seed, settled_s):
    """bench/bench_disturbance.py's run() before the port to gato eval (verbatim but for the
    settle time and the wall clock)."""
    from fig8_problem import DT, Q_START, WEIGHTS, figure8

    kw = dict(wrench_id=True) if mode == "wid" else dict(estimator="fe" if B > 1 else None)
    m = MPC_GATO(None, gato.robot_urdf("iiwa14"), N=32, dt=DT, batch_size=B, params=dict(WEIGHTS), fe_seed=seed,
                 constant_f_ext=np.r_[F * d, 0.0, 0.0, 0.0], verbose=False, **kw)
    x0 = np.r_[Q_START, np.zeros(7)]
    n = int(np.ceil(sim_time / DT)) + 32 + 2
    traj = np.zeros((n, 6))
    traj[:, :3] = figure8(m.solver.ee_pos(Q_START), DT * np.arange(n))
    _, st = m.run_mpc_fig8(x0, traj.reshape(-1), sim_dt=0.001, sim_time=sim_time, pace_by_solve_time=False)
    e, t = np.asarray(st["goal_distances_knot0"]), np.asarray(st["timestamps"])
    h = m.controller.hypotheses
    est = None
    if h is not None:
        hs = h.get_stats()
        est = np.asarray(hs.get("smoothed_estimate", hs.get("estimate")))[:3].tolist()
    return dict(mean=float(np.mean(e)), mean_settled=float(np.mean(e[t >= settled_s])), max=float(np.max(e)),
                n_ticks=int(st["n_ticks"]), force_estimate=est)


def test_disturbance_episode_through_the_runner_equals_the_direct_call(tmp_path):
    """40 N, two directions, 0.4 s: B = 8 fe (sampler seeded per direction) and the B = 1
    identifier; every figure equals the pre-port script's direct MPC_GATO call."""
    spec = _tiny(DIST, n=2, options=dict(duration=0.4, settled_s=0.2), labels=("B = 8", "B = 1 + wid"),
                 disturbances=dict(F40=[dict(kind="ee_force", magnitude=40.0)]))
    r = _run(spec, tmp_path)
    assert len(r["rows"]) == 4
    for row in r["rows"]:
        h = next(p for p in spec.planners if p["label"] == row["label"])["config"]["hypotheses"]
        k = int(row["scenario_id"].rsplit("_d", 1)[1])
        mode = "wid" if h["estimator"] == "wrench_id" else "fe"
        want = _bench_disturbance_run(40.0, np.asarray(row["direction"]), h["batch_size"], mode, 0.4, k, 0.2)
        got = dict(mean=row["mean_tracking_error"], mean_settled=row["mean_tracking_error_settled"],
                   max=row["max_tracking_error"], n_ticks=row["n_ticks"], force_estimate=row["force_estimate"])
        assert got == want, row["label"]
        assert row["force"] == 40.0 and row["stop_reason"] == "sim_time"
    # The parquet table carries the study's columns; the two directions really differ.
    table = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert [t["mean_tracking_error"] for t in table] == [x["mean_tracking_error"] for x in r["rows"]]
    assert table[0]["mean_tracking_error"] != table[1]["mean_tracking_error"]


def _bench_payload_run(sc, B, estimator, pendulum, seed, goal_timeout):
    """bench/bench_payload.py's run() before the port (its success criterion and diagnosis
    columns), with a shorter goal timeout."""
    m = MPC_GATO(None, gato.robot_urdf("iiwa14"), N=32, dt=0.03125, batch_size=B, estimator=estimator, fe_seed=seed,
                 verbose=False, pendulum_config=pendulum)
    x0 = np.r_[sc["q0"], np.zeros(7)]
    lim = m.solver.limits
    try:
        _, st = m.run_mpc_goals(x0, sc["goals"], goal_timeout=goal_timeout, goal_threshold=0.05,
                                velocity_threshold=1.0, pace_by_solve_time=False, goal_ramp=sc["ramp"])
    except RuntimeError:
        return dict(success=False, goals_reached=0, diverged=True)
    q, dq = np.asarray(st["joint_positions"]), np.asarray(st["joint_velocities"])
    qlo, qhi, qdmax = (np.asarray(lim[k], dtype=float) for k in ("q_lo", "q_hi", "qd"))
    pos_excess = float(max(np.max(qlo - q), np.max(q - qhi), 0.0)) if len(q) else 0.0
    vel_ratio = np.max(np.abs(dq), axis=0) / qdmax if len(dq) else np.zeros(len(qdmax))
    viol = pos_excess > 1e-6 or np.any(vel_ratio > 1.0 + 1e-6 / qdmax.min())
    fallbacks = sum(1 for p in m.last_record.planner_stats if p.fallback)
    ok = bool(st["all_reached"]) and not viol and fallbacks == 0
    return dict(success=ok, goals_reached=int(st["goals_reached"]), diverged=False,
                median_ref_distance=float(np.median(st["goal_distances_knot0"])), vel_ratio_max=float(vel_ratio.max()),
                vel_joint=int(np.argmax(vel_ratio)) + 1, pos_excess=pos_excess, fallbacks=int(fallbacks))


def test_payload_episode_through_the_runner_equals_the_direct_call(tmp_path):
    """One scenario, 0.2 s per goal, the 15 kg pendulum: plain B = 1 and the identified-weight
    sampler at B = 1; the outcome and every diagnosis figure equal the pre-port direct call."""
    spec = _tiny(PAY, n=1, options=dict(goal_timeout=0.2), labels=("B=1", "B=1 wid"))
    r = _run(spec, tmp_path)
    sc = spec.scenarios("iiwa14")[0]
    pend = dict(mass=15.0, length=0.5, damping=0.0)
    for row, est in zip(r["rows"], (None, "wid")):
        want = _bench_payload_run(sc, 1, est, pend, 0, 0.2)
        assert bool(row["success"]) == want["success"] and row["goals_reached"] == want["goals_reached"]
        assert bool(row["diverged"]) == want["diverged"]
        if not want["diverged"]:
            assert (row["median_ref_distance"], row["tick_qd_ratio"], row["tick_qd_joint"] + 1, row["pos_excess"],
                    row["fallbacks"]) == (want["median_ref_distance"], want["vel_ratio_max"], want["vel_joint"],
                                          want["pos_excess"], want["fallbacks"])
    # The hypothesis configuration changes the run (the sampler really acts).
    assert r["rows"][0]["median_ref_distance"] != r["rows"][1]["median_ref_distance"]


def test_wrench_study_gives_the_same_table_on_the_local_pool_and_on_ray(tmp_path):
    """A tiny hypothesis spec (B = 8 fe and cem, 20 N, 0.2 s) on two local workers and on a
    local Ray instance (ray.init(num_cpus=2)) gives the same table, wall clock aside."""
    ray = import_or_skip("ray", "pip install -r requirements/lock.txt (scripts/setup.sh)")
    raw = _raw(DIST)
    solver = raw["planners"][0]["config"]["solver"]
    raw["planners"] = [dict(label=f"B=8 {e}", planner="bsqp",
                            config=dict(hypotheses=dict(estimator=e, batch_size=8, seed=3), solver=solver))
                       for e in ("fe", "cem")]
    raw["task"] = dict(raw["task"], n=1, options=dict(duration=0.2, settled_s=0.1))
    raw["disturbances"] = dict(F20=[dict(kind="ee_force", magnitude=20.0)])
    spec = geval.parse_spec(raw)
    _run(spec, tmp_path / "pool", workers=2)
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        _run(spec, tmp_path / "ray", ray="local")
    finally:
        if started:
            ray.shutdown()

    def table(d):
        return [{k: v for k, v in x.items() if k != "wall_s"} for x in pq.read_table(d / "results.parquet").to_pylist()]

    t = table(tmp_path / "pool")
    assert len(t) == 2 and all(x["status"] == "ok" for x in t)
    assert t == table(tmp_path / "ray")
    assert t[0]["mean_tracking_error"] != t[1]["mean_tracking_error"]  # fe and cem differ
    assert all(math.isfinite(x["mean_tracking_error_settled"]) for x in t)


def test_inertial_rows_install_the_identified_wrench_sampler_fed_per_substep():
    """hypotheses {estimator: wid, inertial_rows: true}: MPC_GATO's controller gets the
    IdentifiedWrenchSampler(inertial_rows=True) batch, seeded seed + k, its identifier fed every
    1 ms substep; under a constant 40 N push it identifies the force and tracks better than the
    weight-only wid sampler (which cannot represent a lateral force)."""
    from gato.estimators import IdentifiedWrenchSampler
    from gato.eval import wrench_studies as ws

    cfg = {"hypotheses": {"estimator": "wid", "batch_size": 4, "seed": 2, "inertial_rows": True}}
    m = ws.make_mpc_gato(cfg, 1)
    est = m.force_estimator
    assert isinstance(est, IdentifiedWrenchSampler) and est.inertial_rows and est.seed == 3
    assert m.wrench_identifier is est and m.batch_size == 4
    d = [1.0, 0.0, 0.0]
    r = ws.run_disturbance(40.0, d, cfg, 1, duration=0.25, settled_s=0.1)
    assert np.allclose(r["force_estimate"], [40.0, 0.0, 0.0], atol=1.0), r["force_estimate"]
    plain = ws.run_disturbance(40.0, d, {"hypotheses": {"estimator": "wid", "batch_size": 4, "seed": 2}}, 1,
                               duration=0.25, settled_s=0.1)
    assert r["mean_tracking_error"] < plain["mean_tracking_error"]


def _pay_scenario(seed, idx):
    """Scenario ``idx`` of the payload study's seed ``seed`` (gato.tasks.pickplace_scenarios)."""
    raw = _raw(PAY)
    raw["task"] = dict(raw["task"], seeds=[int(seed)], n=int(idx) + 1)
    return geval.parse_spec(raw).scenarios("iiwa14")[idx]


_PEND = dict(pendulum_config=dict(mass=15.0, length=0.5, damping=0.0))


def _swing_cfg(B):
    return {"hypotheses": {"estimator": "swing", "batch_size": B}, "solver": {"vel_lim_cost": 0.1}}


def test_swing_hypotheses_keep_the_swinging_payload_the_weight_alone_loses():
    """hypotheses {estimator: swing}: the PendulumSwingEstimator under a SwingWrenchBatch, fed
    every 1 ms substep. Scenario 7 of seed 0, the unmodelled undamped 15 kg / 0.5 m pendulum,
    the full protocol (5 s per goal), both with the velocity barrier (vel_lim_cost 0.1): at B = 1
    the swing-aware prediction reaches all 3 goals with every joint inside its limits; the
    weight alone (wid, B = 1) drives J6 past its limit (1.13x). B = 4 programs a per-knot
    (4, N, 6) band and scores its rows."""
    from gato.estimators import PendulumSwingEstimator
    from gato.hypotheses import SwingWrenchBatch
    from gato.eval import wrench_studies as ws

    sc = _pay_scenario(0, 7)
    pend = dict(pendulum_config=dict(mass=15.0, length=0.5, damping=0.0))
    swing = ws.run_payload(sc, _swing_cfg(1), pend, sc["k"])
    assert swing["success"] == 1 and swing["goals_reached"] == 3 and swing["tick_qd_ratio"] < 1.0, swing
    wid = ws.run_payload(sc, {"hypotheses": {"estimator": "wid", "batch_size": 1}, "solver": {"vel_lim_cost": 0.1}},
                         pend, sc["k"])
    # J6 past its limit: 1.13x behind MPC_GATO's former 4 Hz start-pose hold, 1.01x behind the 12 Hz one
    assert wid["success"] == 0 and wid["tick_qd_ratio"] > 1.0, wid

    cfg = {"hypotheses": {"estimator": "swing", "batch_size": 4, "seed": 2}}
    m = ws.make_mpc_gato(cfg, 1, **pend)
    h = m.controller.hypotheses
    assert isinstance(h, SwingWrenchBatch) and isinstance(h.estimator, PendulumSwingEstimator)
    assert m.wrench_identifier is h.estimator and m.batch_size == 4
    _, st = m.run_mpc_goals(np.r_[sc["q0"], np.zeros(7)], np.asarray(sc["goals"]), goal_timeout=0.2,
                            pace_by_solve_time=False, goal_ramp=float(sc["ramp"]))
    hs = h.get_stats()
    assert hs["band"].shape == (4, 32, 6) and np.all(np.isfinite(hs["scores"])) and np.any(hs["scores"] > 0)
    assert hs["mass"] == pytest.approx(15.0, rel=0.15) and hs["n_feedback"] > 0


def test_swing_mass_from_the_tension_covers_the_attachment_transient():
    """Seed 0, scenario 7 (ramp 0.6 s), B = 1 swing with the velocity barrier: the payload hangs
    from t = 0 and the arm sags under it before the first re-plan. With the mass read from the
    rod tension corrected by the EE acceleration (PendulumSwingEstimator.mass) the second plan
    already carries the 15 kg: every goal is reached with every joint inside its velocity limit
    (with the identifier's low-passed weight, 0.7 kg at that plan, J6 reached 1.21x its limit at
    t = 0.06 s, docs/benchmarks_hypotheses.md)."""
    from gato.eval import wrench_studies as ws

    sc = _pay_scenario(0, 7)
    r = ws.run_payload(sc, _swing_cfg(1), _PEND, sc["k"])
    assert r["success"] == 1 and r["goals_reached"] == 3 and r["tick_qd_ratio"] < 0.95, r


def test_swing_batch_of_8_equals_or_beats_one_row_on_a_step_reference():
    """Seed 1, scenario 3 (a step reference), swing with the velocity barrier: B = 8 does at least
    as well as B = 1 (success, and the worst joint-velocity ratio within 5 % of B = 1's or
    below), and reproduces itself exactly. Without SwingWrenchBatch.switch_margin a near-tie of
    the row scores while the arm waited at a goal handed the next step move to the
    constant-wrench row and J6 reached 1.23x its limit at t = 2.72 s (B = 1: no violation)."""
    from gato.eval import wrench_studies as ws

    sc = _pay_scenario(1, 3)
    one = ws.run_payload(sc, _swing_cfg(1), _PEND, sc["k"])
    eight = ws.run_payload(sc, _swing_cfg(8), _PEND, sc["k"])
    assert eight["success"] >= one["success"] and eight["success"] == 1, (one, eight)
    assert eight["tick_qd_ratio"] < 1.0 and eight["tick_qd_ratio"] <= 1.05 * one["tick_qd_ratio"], (one, eight)
    again = ws.run_payload(sc, _swing_cfg(8), _PEND, sc["k"])
    assert again == eight


def test_swing_default_gain_keeps_the_wrist_inside_its_limit_on_a_step_move():
    """Seed 4, scenario 15 (a step to the next goal at t = 2.66 s), B = 1 swing with the velocity
    barrier. The solver sees the payload's inertial reaction as an exogenous wrench, scaled by
    inertial_gain: at the old 0.3 the step move's unmodelled reaction spins J6 to 1.07x its
    limit within one control period (the plan predicted 0.21x); at the B = 1 default
    (PendulumSwingEstimator.SINGLE_INERTIAL_GAIN, 0.7) every goal is reached inside the limits."""
    from gato.estimators import PendulumSwingEstimator
    from gato.eval import wrench_studies as ws

    sc = _pay_scenario(4, 15)
    assert ws.make_mpc_gato(_swing_cfg(1), sc["k"], **_PEND).controller.hypotheses.estimator.inertial_gain == \
        PendulumSwingEstimator.SINGLE_INERTIAL_GAIN
    default = ws.run_payload(sc, _swing_cfg(1), _PEND, sc["k"])
    assert default["success"] == 1 and default["tick_qd_ratio"] < 1.0, default
    low = _swing_cfg(1)
    low["hypotheses"]["inertial_gain"] = 0.3
    old = ws.run_payload(sc, low, _PEND, sc["k"])
    assert old["success"] == 0 and old["tick_qd_ratio"] > 1.03 and old["tick_qd_joint"] == 5, old


def test_observing_the_first_period_keeps_a_step_at_t0_inside_the_limits(monkeypatch):
    """Seed 13, scenario 17: a step reference from t = 0 with the payload hanging unknown. The
    warm-up plan, made before any sample, drives J6 to 1.05x its limit within the first period
    (observe_first=False); holding the start pose for that period while the swing estimator reads
    the load (MPC_GATO's default with a sensor-fed batch) reaches every goal inside the limits."""
    from gato.eval import wrench_studies as ws

    sc = _pay_scenario(13, 17)
    m = ws.make_mpc_gato(_swing_cfg(1), sc["k"], **_PEND)
    assert m.observes_first()
    on = ws.run_payload(sc, _swing_cfg(1), _PEND, sc["k"])
    assert on["success"] == 1 and on["tick_qd_ratio"] < 0.9, on
    make = ws.make_mpc_gato

    def blind(*a, **kw):
        mm = make(*a, **kw)
        mm.observe_first = False
        return mm

    monkeypatch.setattr(ws, "make_mpc_gato", blind)
    off = ws.run_payload(sc, _swing_cfg(1), _PEND, sc["k"])
    assert off["success"] == 0 and off["tick_qd_ratio"] > 1.02 and off["first_violation_t"] < 0.05, off


def test_swing_batch_holds_a_gain_at_which_one_row_pumps():
    """Seed 1, scenario 3 (a step reference) at the batch default inertial_gain
    (PendulumSwingEstimator.BATCH_INERTIAL_GAIN, 0.8): one row alone feeds its plan's
    acceleration back into the next plan's wrench and J6 overshoots its limit; the B = 8 batch's
    rollout selection hands the ticks to the rows that still predict the motion and stays inside
    the limits. This is what a batch buys over one row on the payload task."""
    from gato.estimators import PendulumSwingEstimator
    from gato.eval import wrench_studies as ws

    g = PendulumSwingEstimator.BATCH_INERTIAL_GAIN
    sc = _pay_scenario(1, 3)
    one_cfg = _swing_cfg(1)
    one_cfg["hypotheses"]["inertial_gain"] = g
    one = ws.run_payload(sc, one_cfg, _PEND, sc["k"])
    assert one["success"] == 0 and one["tick_qd_ratio"] > 1.1, one
    m = ws.make_mpc_gato(_swing_cfg(8), sc["k"], **_PEND)
    assert m.controller.hypotheses.estimator.inertial_gain == g
    eight = ws.run_payload(sc, _swing_cfg(8), _PEND, sc["k"])
    assert eight["success"] == 1 and eight["tick_qd_ratio"] < 1.0, eight


def test_fe_swing_batch_following_its_centre_knot_by_knot_settles_the_swing(monkeypatch):
    """Seed 27, scenario 9 (a seed first run after every earlier change), B = 32 fe batch centred on
    the swing estimator, hypotheses seeded like bench_payload (seed 27). With the rows constant over
    the horizon (centre_knots false) the arm and the undamped 15 kg pendulum rock around the last
    goal: J7 goes beyond its velocity limit and the goal is never settled; with
    each row the swing prediction knot by knot plus its residual (the default) every goal is
    reached inside the limits. Measured behind the former 4 Hz start-pose hold (MPC_GATO.OBSERVE_HOLD_HZ):
    behind the 12 Hz hold the attach transient is small enough that the flat rows also reach every
    goal on this scenario, so the contrast is kept where it shows. Since the swing model carries the
    rod's joint damping (PendulumSwingEstimator.rod_damping, issue 32) the flat rows reach every goal
    here too (measured: the damping read on this undamped rod is at most 0.023 N*m*s/rad, median
    0, yet its small torque moves this marginal case from J7 1.004x to 0.92x), so the flat run is
    measured with rod_damping 0, the model the contrast was found with."""
    from gato.eval import wrench_studies as ws
    from gato.frontends.mpc_gato import MPC_GATO
    from gato.wrench.swing import PendulumSwingEstimator

    monkeypatch.setattr(MPC_GATO, "OBSERVE_HOLD_HZ", 4.0)
    sc = _pay_scenario(27, 9)
    cfg = {"hypotheses": {"estimator": "fe", "batch_size": 32, "centre": "swing", "seed": 27},
           "solver": {"vel_lim_cost": 0.1}}
    knots = ws.run_payload(sc, cfg, _PEND, sc["k"])
    assert knots["success"] == 1 and knots["tick_qd_ratio"] < 0.9, knots
    monkeypatch.setattr(PendulumSwingEstimator, "rod_damping", property(lambda self: 0.0))
    flat_cfg = {**cfg, "hypotheses": {**cfg["hypotheses"], "centre_knots": False}}
    flat = ws.run_payload(sc, flat_cfg, _PEND, sc["k"])
    assert flat["success"] == 0 and flat["goals_reached"] == 2 and flat["tick_qd_joint"] == 6, flat
    # J7 beyond its limit (1.004x at one tick since the swing estimator fits the weight's and the
    # inertial mass apart, issue 32; above 1.05x for most of a second with one mass)
    assert flat["tick_qd_ratio"] > 1.0, flat


# ----------------------------------------------------------------- the bench scripts
def test_bench_disturbance_builds_its_grid_and_table_from_the_runner(tmp_path):
    """bench_disturbance's spec for --forces 0 60 --batches 1 --dirs 1 is the shipped spec's
    controller; its table rows come from the runner's rows."""
    import bench_disturbance as bd

    spec = bd.build_spec([0, 60], bd.configs_of([1], wid=False), dirs=1, sim_time=0.2)
    assert [p["label"] for p in spec.planners] == ["B = 1"]
    assert spec.planners[0]["config"]["solver"] == _raw(DIST)["planners"][0]["config"]["solver"]
    assert spec.disturbances == {"F0": [], "F60": [dict(kind="ee_force", magnitude=60.0)]}
    rows = bd.run_grid(spec, tmp_path)
    assert [(r["F"], r["B"], r["mode"]) for r in rows] == [(0.0, 1, "none"), (60.0, 1, "none")]
    lines = bd.table(rows, [(1, "none")], [0, 60])
    assert lines[0] == "| F [N] | B = 1 |" and lines[3].startswith(f"| 60 | {1000 * rows[1]['mean']:.1f} [")
    assert rows[1]["mean"] > rows[0]["mean"]  # the unmodelled 60 N push costs the plain controller
    # --configs: the samplers by name (widi: wid with its inertial rows), bad entries named.
    assert bd.configs_of([1], entries=["none:1", "widi:8", "wrench_id:1"]) == [(1, "none"), (8, "widi"),
                                                                                (1, "wrench_id")]
    spec = bd.build_spec([80], [(8, "widi")], dirs=1)
    assert spec.planners[0]["label"] == "B = 8 widi"
    assert spec.planners[0]["config"]["hypotheses"] == dict(estimator="wid", batch_size=8, seed=0, inertial_rows=True)
    with pytest.raises(ValueError, match="--configs"):
        bd.configs_of([1], entries=["pf:8"])


def test_bench_payload_configs_name_the_option():
    import bench_payload as bp

    assert bp.parse_configs(["none:1", "wid:8", "swing:8"]) == [(1, None), (8, "wid"), (8, "swing")]
    with pytest.raises(ValueError, match="--configs"):
        bp.parse_configs(["fe8"])
    spec = bp.build_spec(2, [(1, None), (8, "fe"), (8, "widi")], rigid=True, clamp=False)
    assert spec.disturbances == {"rigid_15kg": [dict(kind="constant_wrench", wrench=[0.0, 0.0, -9.81 * 15, 0, 0, 0])]}
    assert [p["label"] for p in spec.planners] == ["B=1 none", "B=8 fe", "B=8 widi"]
    assert spec.planners[2]["config"]["hypotheses"]["inertial_rows"] is True
    assert spec.task["options"]["clamp_torques"] is False
    assert bp.parse_solver(["vel_lim_cost=0.1"]) == {"vel_lim_cost": 0.1} and bp.parse_solver(None) == {}
    with pytest.raises(ValueError, match="--solver"):
        bp.parse_solver(["vel_lim_cost"])
    spec = bp.build_spec(2, [(8, "swing")], solver={"vel_lim_cost": 0.1})
    assert spec.planners[0]["config"] == {"hypotheses": {"estimator": "swing", "batch_size": 8, "seed": 0},
                                          "solver": {"vel_lim_cost": 0.1}}


def test_bench_payload_runs_several_seeds_with_a_per_seed_table_and_redraws(tmp_path, capsys):
    """--seeds runs one grid per seed (each seeded as --seed would), prints the per-seed success
    table with the worst seed and the pooled rate, and --replot redraws the figure from the saved
    rows without running anything."""
    import bench_payload as bp

    rows = [dict(B=8, estimator="swing", seed=s, success=ok) for s, ok in ((0, 1), (0, 1), (1, 1), (1, 0))]
    lines = bp.seed_table(rows, [(8, "swing")], [0, 1])
    assert lines[2:] == ["| 0 | 2/2 |", "| 1 | 1/2 |", "| worst seed | 50 % |", "| pooled | 3/4 (75.0 %) |"]

    out = tmp_path / "pay"
    bp.main(["--out", str(out), "--n", "1", "--seeds", "0", "1", "--configs", "swing:1",
             "--solver", "vel_lim_cost=0.1", "--workers", "1"])
    printed = capsys.readouterr().out
    assert "[bench_payload] seed 1 done (2/2)" in printed and "| worst seed |" in printed
    saved = json.loads((out / "payload.json").read_text())
    assert sorted(r["seed"] for r in saved["rows"]) == [0, 1]
    (out / "payload.png").unlink()
    bp.main(["--out", str(out), "--replot"])
    assert (out / "payload.png").stat().st_size > 1000


def test_compare_payload_pools_runs_by_label_and_names_the_failures(tmp_path, capsys):
    """bench/compare_payload.py: runs with one label are pooled, --seeds / --configs filter, the
    table counts successes and names each failed scenario with its reason, the figure is drawn; a
    missing file or a malformed entry is a clear exit."""
    import compare_payload as cp

    def row(seed, k, label, ok, qd, reason=""):
        return dict(seed=seed, scenario_id=f"iiwa14/pickplace/{seed}/{k}", label=label, success=ok,
                    tick_qd_ratio=qd, reason=reason)

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps({"rows": [row(0, 0, "B=8 fe-swing", 1, 0.4), row(0, 1, "B=8 fe-swing", 0, 1.2, "velocity 1.20x")]}))
    b.write_text(json.dumps({"rows": [row(1, 0, "B=8 fe-swing", 1, 0.5), row(1, 0, "B=1 swing", 1, 0.3)]}))
    c.write_text(json.dumps({"rows": [row(0, 1, "B=8 fe-swing", 1, 0.6), row(1, 0, "B=8 fe-swing", 1, 0.5)]}))
    out = tmp_path / "cmp.png"
    assert cp.main([f"old={a}", f"old={b}", f"new={c}", "--out", str(out), "--configs", "B=8 fe-swing"]) == 0
    printed = capsys.readouterr().out
    assert "| old | B=8 fe-swing | 2/3 | 0/1: velocity 1.20x | 1.20 / 0.50 |" in printed
    assert "| new | B=8 fe-swing | 2/2 | - | 0.60 / 0.55 |" in printed and "B=1 swing" not in printed
    assert out.stat().st_size > 1000
    cp.main([f"old={a}", f"old={b}", "--out", str(out), "--seeds", "1"])
    printed = capsys.readouterr().out
    assert "| old | B=1 swing | 1/1 |" in printed and "| old | B=8 fe-swing | 1/1 | - |" in printed
    with pytest.raises(SystemExit, match="no such file"):
        cp.main([f"x={tmp_path / 'none.json'}", "--out", str(out)])
    with pytest.raises(SystemExit, match="expected LABEL=path/payload.json, got"):
        cp.main([str(a), "--out", str(out)])
    with pytest.raises(SystemExit, match="no rows"):
        cp.main([f"old={a}", "--out", str(out), "--seeds", "7"])


def test_the_planner_example_of_docs_eval_md_is_a_valid_payload_spec():
    """The 'Configurations name their hypothesis batch' example in docs/eval.md parses as the
    planners of the payload study: every option shown where it applies, none refused."""
    text = (ROOT / "docs" / "eval.md").read_text()
    block = text.split("Configurations name their hypothesis batch:", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    planners = yaml.safe_load(block)["planners"]
    spec = geval.parse_spec({**_raw(PAY), "planners": planners})
    assert [p["label"] for p in spec.planners] == ["B=8 fe-swing", "B=8 widi", "B=8 swing"]
    assert spec.planners[0]["config"]["hypotheses"]["centre"] == "swing"
    assert spec.planners[0]["config"]["hypotheses"]["centre_knots"] is True
    assert spec.planners[2]["config"]["hypotheses"]["inertial_gain"] == 0.8
