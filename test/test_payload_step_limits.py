"""The payload study's joint limits checked after every 1 ms physics step (issue 32: "velocity and
position limits checked at every physics step (1 ms), not only at control ticks"):
gato.eval.wrench_studies.StepLimits as a Simulation observer, run_payload's step_* columns and
its ``limit_check`` ("tick" | "step"), the spec option, and the errors."""
import numpy as np
import pytest

from gato.eval import wrench_studies as ws


def test_step_limits_track_the_peaks_and_the_violation_times():
    mon = ws.StepLimits([-1.0, -2.0], [1.0, 2.0], [2.0, 4.0])
    z = np.zeros(2)
    # robot state first; a world may append its payload's coordinates, which are not judged
    mon(z, z, z, np.array([0.5, 0.0, 9.0]), np.array([1.0, -2.0, 99.0]), 0.001)   # t = 1 ms, inside
    assert mon.first_t is None and np.allclose(mon.qd_ratio, [0.5, 0.5]) and mon.pos_excess == 0.0
    mon(z, z, z, np.array([0.5, 0.0, 9.0]), np.array([2.2, 0.0, 0.0]), 0.001)     # 2 ms: joint 1 at 1.1x
    mon(z, z, z, np.array([1.3, 0.0, 9.0]), np.array([0.0, 0.0, 0.0]), 0.001)     # 3 ms: +0.3 rad
    mon(z, z, z, np.array([0.0, 0.0, 9.0]), np.array([0.0, 1.0, 0.0]), 0.001)     # 4 ms: inside again
    assert np.allclose(mon.qd_ratio, [1.1, 0.5]) and mon.pos_excess == pytest.approx(0.3)
    assert mon.first_t == pytest.approx(0.002) and mon.last_t == pytest.approx(0.003) and mon.t == pytest.approx(0.004)


@pytest.fixture(scope="module")
def heavy_run():
    """One step-reference pick-and-place with the 15 kg weight and no hypotheses (the weight drives
    the arm past its limits), shortened to 1 s per goal, judged after every 1 ms step."""
    import pinocchio as pin

    import gato
    from gato.sim.scenarios import pickplace_scenarios

    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    sc = pickplace_scenarios(model, "iiwa14", 1, seed=3, ramps=(0.0,))[0]
    load = {"constant_f_ext": [0.0, 0.0, -9.81 * 15.0, 0.0, 0.0, 0.0]}
    cfg = {"hypotheses": {"estimator": "none", "batch_size": 1}, "solver": {"vel_lim_cost": 0.1}}
    return ws.run_payload(sc, cfg, load, 0, goal_timeout=1.0, limit_check="step")


def test_the_1ms_peaks_bound_the_tick_peaks_and_decide_success(heavy_run):
    r = heavy_run
    print({k: r[k] for k in ("success", "reason", "tick_qd_ratio", "step_qd_ratio", "pos_excess",
                             "step_pos_excess", "first_violation_t", "step_first_violation_t")})
    # the control ticks are instants among the 1 ms steps: the step peaks can only be higher
    assert r["step_qd_ratio"] >= r["tick_qd_ratio"] - 1e-12 and r["step_pos_excess"] >= r["pos_excess"] - 1e-12
    if r["first_violation_t"] is not None:
        assert r["step_first_violation_t"] <= r["first_violation_t"] + 1e-9
    over = r["step_qd_ratio"] > 1.0 + 1e-6 or r["step_pos_excess"] > 1e-6
    assert (r["step_first_violation_t"] is not None) == over
    if over:   # judged at 1 ms: the excursion fails the run and is named
        assert r["success"] == 0 and ("(1 ms steps)" in r["reason"] or "position" in r["reason"]), r["reason"]


def test_limit_check_is_refused_by_name():
    with pytest.raises(ValueError, match="limit_check: expected one of"):
        ws.run_payload({}, {}, {}, 0, limit_check="substeps")
    import yaml
    from pathlib import Path

    from gato import eval as geval

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "bench" / "specs" / "payload_pickplace_iiwa14.yaml")
                         .read_text())
    raw["task"] = dict(raw["task"], options={**raw["task"].get("options", {}), "limit_check": "step"})
    assert geval.parse_spec(raw).task["options"]["limit_check"] == "step"
    raw["task"]["options"]["limit_check"] = "every"
    with pytest.raises(ValueError, match="task.options.limit_check: expected one of tick, step, got 'every'"):
        geval.parse_spec(raw)
