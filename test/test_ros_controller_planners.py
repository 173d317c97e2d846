"""The controller logic's planners (``planner`` bsqp | sampling | osc, built through the
gato.planner registry) and its OSC fallback (deadline misses, divergence, re-seeding,
hysteresis back to the planner), ROS-free with synthetic time; the message conversion of a
non-bsqp planner tick. The fallback over DDS (a stalled solver in the free-running
bringup): test/test_ros_fallback_system.py."""
import json

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato import planner as planners  # noqa: E402
from gato import tasks  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = tasks.Q_READY[ROBOT]
S = 1_000_000_000
TICK = 10_000_000  # 100 Hz


def make(**cfg):
    return cl.ControllerLogic({"robot": ROBOT, "N": 16, **cfg})


def js(stamp_ns, q=Q0, qd=None):
    qd = np.zeros(7) if qd is None else qd
    return JointStateSample(stamp_ns, list(NAMES), np.asarray(q, float), np.asarray(qd, float))


def tick(lg, k, offset=(0.0, 0.03, 0.03), q=Q0):
    """Tick k (100 Hz from 1 s): its reference window (a fixed EE target), then its joint state."""
    t = S + k * TICK
    p = lg.ee_position(Q0) + np.asarray(offset)
    lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (lg.cfg["N"], 1))), t)
    return lg.on_joint_state(js(t, q), t)


def test_bsqp_is_the_registry_planner_over_the_replayable_controller():
    lg = make()
    assert isinstance(lg.planner, planners.planner_class("bsqp")) and lg.planner.controller is lg.controller
    out = tick(lg, 0)
    assert out.source == "mpc" and out.planner == "bsqp" and out.step is out.planner_step.detail
    np.testing.assert_array_equal(out.planner_step.u, out.step.u)
    assert lg.status.active_planner == "bsqp" and lg.status.fallback_reason == ""
    p = json.loads(lg.status.params_json)
    assert p["planner"] == "bsqp" and p["fallback"] == "osc" and p["osc_stiffness"] == 400.0


@pytest.mark.parametrize("name", ["osc", "sampling"])
def test_sampling_and_osc_planners_command_through_the_same_safety_rules(name):
    lg = make(planner=name)
    assert isinstance(lg.planner, planners.planner_class(name)) and lg.controller is None
    outs = [tick(lg, k) for k in range(3)]
    for out in outs:
        assert out.source == name and out.planner == name and out.step is None and out.solve_input is None
        assert out.effort.shape == (7,) and np.all(np.isfinite(out.effort))
        assert np.all(np.abs(out.effort) <= lg.effort_limit)
    assert lg.status.state == "running" and lg.status.active_planner == name and lg.status.solve_us > 0
    assert (outs[-1].planner_step.plan is not None) == (name == "sampling")
    # the same hold rule: NaN state -> gravity compensation at the last good state
    q_nan = Q0.copy()
    q_nan[1] = np.nan
    out = lg.on_joint_state(js(S + 10 * TICK, q_nan), S + 10 * TICK)
    assert out.source == "hold" and lg.status.active_planner == ""
    np.testing.assert_allclose(out.effort, lg.gravity_hold(Q0))
    assert tick(lg, 11).source == name


def test_bsqp_settings_are_refused_for_another_planner():
    lg = make(planner="osc")
    assert "planner bsqp" in lg.validate_changes({"q_cost": 3.0})
    assert lg.validate_changes({"osc_stiffness": 400.0}) is None
    with pytest.raises(ValueError, match="publish_commands"):
        make(planner="osc", publish_commands=False)
    with pytest.raises(ValueError, match="planner"):
        make(planner="ilqr")
    with pytest.raises(ValueError, match="sampling_horizon_s"):
        make(planner="sampling", sampling_horizon_s=2.0)      # longer than the N * dt = 0.5 s window


def test_osc_gains_are_live_and_read_back():
    lg = make(planner="osc")
    a = tick(lg, 0)
    lg.request_changes({"osc_stiffness": 100.0, "osc_damping": 20.0})
    b = tick(lg, 1)
    assert json.loads(lg.status.params_json)["osc_stiffness"] == 100.0
    assert lg.planner.config["stiffness"] == 100.0
    assert not np.allclose(a.effort, b.effort)
    # the rebuilt OSC keeps the targets of its start: same command as a fresh one reset there
    twin = make(planner="osc", osc_stiffness=100.0, osc_damping=20.0)
    tick(twin, 0)
    np.testing.assert_allclose(tick(twin, 2).effort, tick(lg, 2).effort, rtol=0, atol=1e-9)


def test_deadline_misses_in_a_row_switch_to_the_osc_and_back_after_the_hysteresis():
    lg = make(fallback_after_misses=2, fallback_recover_ticks=3)
    assert tick(lg, 0).source == "mpc"
    lg.record_publish(0.05)                  # a miss
    assert tick(lg, 1).source == "mpc"
    lg.record_publish(0.001)                 # met: the run of misses starts over
    tick(lg, 2)
    lg.record_publish(0.05)
    tick(lg, 3)
    lg.record_publish(0.05)                  # two in a row
    out = tick(lg, 4)
    assert out.source == "osc_fallback" and out.planner == "osc" and out.solve_input is None
    st = lg.status
    assert (st.state, st.active_planner, st.fallback_reason, st.fallback_switches) == ("fallback", "osc", "deadline", 1)
    assert "2 deadline misses" in st.reason and st.fallbacks == 1
    assert np.all(np.isfinite(out.effort)) and np.all(np.abs(out.effort) <= lg.effort_limit)
    lg.record_publish(0.05)                  # a late OSC tick does not count against the planner
    assert [tick(lg, k).source for k in (5, 6)] == ["osc_fallback"] * 2
    back = tick(lg, 7)                       # after fallback_recover_ticks = 3 OSC ticks
    assert back.source == "mpc" and back.solve_input.reset          # a cold start at the measured state
    assert (lg.status.state, lg.status.active_planner, lg.status.fallback_reason) == ("running", "bsqp", "")
    assert lg.status.fallbacks == 3 and lg.status.fallback_switches == 1


def test_a_cold_start_forgives_moderately_late_ticks_but_not_a_stall():
    """In the fallback_grace_ticks planner ticks after a cold start, only ticks later than two
    periods (10 ms here) count toward fallback_after_misses."""
    lg = make(fallback_after_misses=2, fallback_grace_ticks=4)
    for k in range(4):                       # the cold start's ticks: 15 ms late each, forgiven
        assert tick(lg, k).source == "mpc"
        lg.record_publish(0.015)
    assert lg.status.deadline_misses == 4 and lg.status.fallback_switches == 0
    for k in (4, 5):                         # after the grace the same lateness counts: two in a row
        assert tick(lg, k).source == "mpc"
        lg.record_publish(0.015)
    assert tick(lg, 6).source == "osc_fallback" and lg.status.fallback_reason == "deadline"
    stalled = make(fallback_after_misses=2, fallback_grace_ticks=4)
    for k in (0, 1):                         # a stall (50 ms) counts inside the grace too
        assert tick(stalled, k).source == "mpc"
        stalled.record_publish(0.05)
    assert tick(stalled, 2).source == "osc_fallback"
    assert json.loads(stalled.status.params_json)["fallback_grace_ticks"] == 4


def test_deadline_misses_do_not_switch_in_lockstep_or_when_disabled():
    for cfg in ({"reference_sync": False, "fallback_after_misses": 0}, {"reference_sync": False, "fallback": "off"}):
        lg = make(**cfg)
        for k in range(6):
            assert tick(lg, k).source == "mpc"
            lg.record_publish(0.05)
        assert lg.status.deadline_misses == 6 and lg.status.fallback_switches == 0
    lg = make(reference_sync=True)             # lockstep: the world waits for the command
    for k in range(6):
        t = S + k * TICK
        p = lg.ee_position(Q0)
        lg.on_joint_state(js(t), t)
        out = lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (16, 1))), t)
        assert out.source == "mpc"
        lg.record_publish(0.05)
    assert lg.status.fallback_switches == 0


def test_divergence_solver_errors_and_reseeds_switch_to_the_osc(monkeypatch):
    lg = make(fallback_recover_ticks=2)
    tick(lg, 0)
    real_step = lg.controller.step

    def diverged_step(*a, **k):
        res = real_step(*a, **k)
        res.diverged, res.fallback = True, "gravity"
        return res

    monkeypatch.setattr(lg.controller, "step", diverged_step)
    out = tick(lg, 1)
    assert out.source == "osc_fallback" and lg.status.fallback_reason == "diverged"
    assert "diverged" in lg.status.reason and lg.status.fallback_switches == 1
    monkeypatch.setattr(lg.controller, "step", real_step)
    assert tick(lg, 2).source == "osc_fallback"
    assert tick(lg, 3).source == "mpc" and lg.status.state == "running"

    def failing_step(*a, **k):
        raise RuntimeError("factorization failed")

    monkeypatch.setattr(lg.controller, "step", failing_step)
    out = tick(lg, 4)
    assert out.source == "osc_fallback" and "solver error" in lg.status.reason and lg.status.fallback_switches == 2
    # fallback switched off at run time: the planner is back at once, divergence is the controller's own again
    lg.request_changes({"fallback": "off"})
    monkeypatch.setattr(lg.controller, "step", diverged_step)
    out = tick(lg, 5)
    assert out.source == "fallback" and lg.status.fallback_switches == 2 and lg.status.state == "running"
    monkeypatch.setattr(lg.controller, "step", real_step)

    rs = make(reseed_threshold=1e-3)          # a measured state far from the prediction re-seeds
    tick(rs, 0)
    tick(rs, 1)
    out = tick(rs, 2, q=Q0 + 0.05)
    assert out.source == "osc_fallback" and rs.status.fallback_reason == "reseeded"


def test_a_hold_ends_the_fallback_and_the_planner_restarts_cold():
    lg = make(fallback_after_misses=1)
    tick(lg, 0)
    lg.record_publish(0.05)
    assert tick(lg, 1).source == "osc_fallback"
    q_nan = Q0.copy()
    q_nan[0] = np.nan
    assert lg.on_joint_state(js(S + 2 * TICK, q_nan), S + 2 * TICK).source == "hold"
    out = tick(lg, 3)
    assert out.source == "mpc" and out.solve_input.reset and lg.status.fallback_reason == ""


def test_a_non_bsqp_tick_converts_to_the_step_result_and_solver_stats_messages():
    import_or_skip("gato_msgs.msg", "build the workspace (scripts/setup.sh)")
    from gato_ros import conversions as cv

    lg = make(planner="sampling")
    out = tick(lg, 0)
    step, stats = cv.planner_step_to_msgs(out.planner_step, out.planner, out.stamp_ns)
    np.testing.assert_array_equal(np.asarray(step.u), out.planner_step.u)
    plan = out.planner_step.plan
    assert step.solve.batch_size == 1 and step.solve.n_knots == plan.N and len(step.xu_best) == plan.xu.size
    assert step.iterations == out.planner_step.stats.iterations >= 1 and step.wall_s > 0
    assert stats.linsys == "sampling" and list(stats.sqp_iters) == [step.iterations] and stats.n_iters == 0
    assert "plan_cost" in json.loads(step.hypo_stats_json)
    osc = make(planner="osc")
    step, stats = cv.planner_step_to_msgs(tick(osc, 0).planner_step, "osc", S)
    assert len(step.xu_best) == 0 and step.solve.batch_size == 0 and stats.linsys == "osc"


# ------------------------------------------------------------------ closed loop: the fallback tracks
def _fallback_loop(scenario, stall=(100, 300)):
    """The logic closing the loop on MuJoCoWorld (1 ms physics, commands held for the 10 ms tick)
    on a seeded figure-8; ticks in ``stall`` report a 50 ms receipt-to-publish time (a stalled
    solver as the node measures it). Returns (EE errors [m] per tick, command sources, logic)."""
    import gato
    from gato.references import Figure8
    from gato.reference_window import sec_to_ns
    from gato.worlds import MuJoCoWorld

    p = scenario["params"]
    fig8 = Figure8(p["offset"], p["A_x"], p["A_z"], p["theta"], p["period"])
    lg = cl.ControllerLogic({"robot": ROBOT, "fallback_after_misses": 3, "fallback_recover_ticks": 50})
    world = MuJoCoWorld(gato.robot_urdf(ROBOT), timestep=0.001)
    q, dq = np.array(scenario["q0"], dtype=float), np.zeros(7)
    errs, sources = [], []
    for k in range(int(round(p["period"] / 0.01))):
        t = 0.01 * k
        t_ns = S + sec_to_ns(t)
        w = fig8.window(t, 32, 0.03125)
        lg.on_reference(ReferenceWindow(t_ns, w.knot_dt, w.positions), t_ns)
        out = lg.on_joint_state(js(t_ns, q, dq), t_ns)
        errs.append(np.linalg.norm(lg.ee_position(q) - fig8.positions([t])[0]))
        sources.append(out.source)
        lg.record_publish(0.05 if stall[0] <= k < stall[1] else 0.001)
        for _ in range(10):
            q, dq = world.step(q, dq, out.effort, 0.001)
    return np.array(errs), np.array(sources), lg


# Measured on fig8_scenarios seed 0 (ratio 0.3-0.6, 3 scenarios; the node's default OSC gains
# 400 / 40): EE error over the fallback ticks mean 0.72-5.13 mm, max 5.0-30.0 mm (the maximum: the
# error the planner left at a switch, 4-16 mm, or, in scenario 0/0, a 30 mm excursion after a cold
# BSQP probe). Bounds about 2x those: mean 10 mm, max 60 mm; checked on seeds 1 and 2, which the
# bounds were not set on (there: mean 0.5-1.0 mm, max 3.9-6.8 mm).
FALLBACK_MEAN_BOUND_M, FALLBACK_MAX_BOUND_M = 10e-3, 60e-3


@pytest.mark.parametrize("seed", [1, 2])
def test_the_osc_fallback_tracks_seeded_figure8s_while_the_solver_stalls(seed):
    import pinocchio as pin

    import gato

    model = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    for sc in tasks.fig8_scenarios(model, ROBOT, 2, seed=seed, ratio_range=(0.3, 0.6)):
        err, src, lg = _fallback_loop(sc)
        fb = src == "osc_fallback"
        assert fb.sum() >= 150 and lg.status.fallback_switches >= 3, (sc["id"], fb.sum())
        assert set(src[:100]) == {"mpc"} and src[-1] == "mpc"         # before the stall, and back after it
        assert err[fb].mean() <= FALLBACK_MEAN_BOUND_M, (sc["id"], err[fb].mean())
        assert err[fb].max() <= FALLBACK_MAX_BOUND_M, (sc["id"], err[fb].max())
