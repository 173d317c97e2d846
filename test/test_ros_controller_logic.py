"""The controller node's ROS-free logic (gato_ros.controller_logic), driven with synthetic
time and synthetic joint states: every safety rule, the parameter path and the
name mapping, without DDS."""
import json

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato import tasks  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow, sec_to_ns  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = tasks.Q_READY[ROBOT]
S = 1_000_000_000  # ns per s


def make(**cfg):
    """A logic object with a short horizon (fast) unless overridden."""
    return cl.ControllerLogic({"robot": ROBOT, "N": 16, **cfg})


def js(stamp_ns, q=Q0, qd=None, names=NAMES):
    qd = np.zeros(len(q)) if qd is None else qd
    return JointStateSample(stamp_ns, list(names), np.asarray(q, float), np.asarray(qd, float))


def ref_at(logic, stamp_ns, offset=(0.0, 0.05, 0.05)):
    p = logic.solver.ee_pos(Q0) + np.asarray(offset)
    return ReferenceWindow(stamp_ns, logic.cfg["dt"], np.tile(p, (logic.cfg["N"], 1)))



def assert_twin_reproduces(cfg, outs, effort_limit):
    """A controller built from a tick's recorded configuration (``config_json``), fed the
    recorded SolveInputs of ``outs`` (TickOutputs, in order), starts each tick from the
    recorded warm start and commands the recorded efforts bit for bit (clamped to
    ``effort_limit`` like the node)."""
    from gato import controller_setup

    twin = controller_setup.build_controller(cfg)
    for out in outs:
        si = out.solve_input
        if si.reset:
            twin.reset(si.x_measured)
            twin.warmup(si.x_measured, si.reference)
        np.testing.assert_array_equal(twin.xu_warm[:1], si.xu_warm)
        r = twin.step(si.x_measured, si.reference, si.dt_elapsed or None)
        np.testing.assert_array_equal(np.clip(r.u, -effort_limit, effort_limit), out.effort)

def test_nominal_tick_commands_finite_clamped_torques_and_a_plan():
    lg = make()
    lg.on_reference(ref_at(lg, S), now_ns=S)
    out = lg.on_joint_state(js(S), now_ns=S)
    assert out is not None and out.source == "mpc" and out.stamp_ns == S and out.tick == 1
    assert out.effort.shape == (7,) and np.all(np.isfinite(out.effort))
    assert np.all(np.abs(out.effort) <= lg.effort_limit)
    assert out.plan.n_knots == 16 and out.plan.stamp_ns == S and out.plan.joint_names == NAMES
    assert out.step is not None and lg.status.state == "running" and lg.status.ticks == 1


def test_each_mpc_tick_carries_what_it_solved_from():
    """SolveInput: the measured state, the solver's reference, the warm start and the full
    configuration; a fresh controller built from that configuration and fed those inputs
    reproduces the tick's command bit for bit."""
    lg = make()
    outs = []
    for k in range(3):
        t = S + k * 10_000_000
        lg.on_reference(ref_at(lg, t), t)
        outs.append(lg.on_joint_state(js(t, qd=np.full(7, 0.01 * k)), t))
    first, second = outs[0].solve_input, outs[1].solve_input
    assert first.reset and not second.reset and first.tick == 1 and second.tick == 2
    assert first.dt_elapsed == 0.0 and second.dt_elapsed == pytest.approx(0.01)
    np.testing.assert_array_equal(second.x_measured, np.r_[Q0, np.full(7, 0.01)])
    assert second.reference.shape == (6 * 16,) and second.xu_warm.shape == (1, lg.solver.xu_size)
    cfg = json.loads(second.config_json)
    assert cfg["N"] == 16 and cfg["robot"] == ROBOT and len(cfg["urdf_sha256"]) == 64
    assert_twin_reproduces(cfg, outs, lg.effort_limit)


def test_joint_states_are_mapped_by_name_in_any_order_with_extra_joints():
    a, b = make(), make()
    for lg in (a, b):
        lg.on_reference(ref_at(lg, S), S)
    out_a = a.on_joint_state(js(S), S)
    perm = [3, 0, 6, 2, 5, 1, 4]
    names = [NAMES[i] for i in perm] + ["gripper_finger"]
    q = np.r_[Q0[perm], 0.01]
    qd = np.r_[np.zeros(7), 0.3]
    out_b = b.on_joint_state(js(S, q, qd, names), S)
    np.testing.assert_array_equal(out_a.effort, out_b.effort)


def test_command_order_follows_the_joint_names_parameter():
    rev = list(reversed(NAMES))
    a, b = make(), make(joint_names=rev)
    for lg in (a, b):
        lg.on_reference(ref_at(lg, S), S)
    ea = a.on_joint_state(js(S), S).effort
    eb = b.on_joint_state(js(S), S).effort
    np.testing.assert_array_equal(eb, ea[::-1])
    with pytest.raises(ValueError, match="joint_names"):
        make(joint_names=NAMES[:6] + ["bogus"])


def test_joint_name_mismatch_is_refused_and_holds_at_the_last_good_state():
    lg = make()
    # before any good state: refused, nothing to hold at -> no command
    out = lg.on_joint_state(js(S, Q0[:6], names=NAMES[:6]), S)
    assert out is not None and out.effort is None
    assert lg.status.state == "refused" and "A7" in lg.status.reason and lg.status.rejected_names == 1
    good = lg.on_joint_state(js(2 * S), 2 * S)
    assert good.source == "mpc" and lg.status.state == "running"
    out = lg.on_joint_state(js(3 * S, Q0[:6], names=NAMES[:6]), 3 * S)
    assert out.source == "hold" and lg.status.state == "refused" and lg.status.rejected_names == 2
    np.testing.assert_allclose(out.effort, lg.gravity_hold(Q0))
    # arrays that do not match the names are refused too
    bad = JointStateSample(4 * S, NAMES, Q0, np.zeros(6))
    assert lg.on_joint_state(bad, 4 * S).source == "hold" and lg.status.rejected_names == 3
    assert "velocities" in lg.status.reason


def test_nan_joint_state_holds_gravity_compensation_then_recovers():
    lg = make()
    lg.on_reference(ref_at(lg, S), S)
    assert lg.on_joint_state(js(S), S).source == "mpc"
    q_nan = Q0.copy()
    q_nan[2] = np.nan
    out = lg.on_joint_state(js(2 * S, q_nan), 2 * S)
    assert out.source == "hold" and out.stamp_ns == 2 * S
    assert lg.status.state == "hold" and "A3" in lg.status.reason and lg.status.rejected_nonfinite == 1
    np.testing.assert_allclose(out.effort, lg.gravity_hold(Q0))     # at the last GOOD state
    qd_inf = np.zeros(7)
    qd_inf[6] = np.inf
    assert lg.on_joint_state(js(3 * S, Q0, qd_inf), 3 * S).source == "hold"
    assert lg.status.rejected_nonfinite == 2 and "velocity of A7" in lg.status.reason
    out = lg.on_joint_state(js(4 * S), 4 * S)
    assert out.source == "mpc" and lg.status.state == "running" and lg.status.holds == 2


def test_out_of_order_stamps_are_dropped_and_repeated_stamps_resend_the_same_command():
    lg = make()
    lg.on_reference(ref_at(lg, S), S)
    first = lg.on_joint_state(js(2 * S), 2 * S)
    assert lg.on_joint_state(js(S, Q0 + 0.1), 2 * S + 1) is None
    assert lg.status.dropped_out_of_order == 1 and lg.status.ticks == 1
    dup = lg.on_joint_state(js(2 * S, Q0 + 0.1), 2 * S + 2)     # same stamp: no new solve
    assert dup.duplicate and dup.tick == first.tick and lg.status.ticks == 1
    np.testing.assert_array_equal(dup.effort, first.effort)
    nxt = lg.on_joint_state(js(3 * S), 3 * S)
    assert nxt.tick == 2 and not nxt.duplicate


def test_stale_joint_states_hold_on_the_watchdog_and_recover():
    lg = make(joint_state_timeout_s=0.1)
    lg.on_reference(ref_at(lg, S), S)
    assert lg.on_timer(0) is None                            # nothing received: nothing to hold at
    assert lg.on_joint_state(js(S), now_ns=10 * S).source == "mpc"
    assert lg.on_timer(10 * S + sec_to_ns(0.05)) is None     # fresh
    out = lg.on_timer(10 * S + sec_to_ns(0.2))
    assert out.source == "hold" and out.stamp_ns == S
    assert lg.status.state == "hold" and "stale" in lg.status.reason and lg.status.stale_events == 1
    np.testing.assert_allclose(out.effort, lg.gravity_hold(Q0))
    assert lg.on_timer(10 * S + sec_to_ns(0.3)).source == "hold"
    assert lg.status.stale_events == 1 and lg.status.holds == 2   # one event, a hold every watchdog tick
    out = lg.on_joint_state(js(2 * S), now_ns=10 * S + sec_to_ns(0.35))
    assert out.source == "mpc" and lg.status.state == "running" and not lg.stale


def test_timer_trigger_solves_on_the_timer_and_holds_when_stale():
    lg = make(trigger="timer", joint_state_timeout_s=0.05)
    lg.on_reference(ref_at(lg, S), 0)
    assert lg.on_joint_state(js(S), now_ns=0) is None
    assert lg.on_timer(sec_to_ns(0.01)).source == "mpc"
    assert lg.on_timer(sec_to_ns(0.1)).source == "hold" and lg.status.stale_events == 1


def test_reference_sync_waits_for_the_window_stamped_at_the_state_time():
    lg = make(reference_sync=True)
    assert lg.on_joint_state(js(S), S) is None and lg.status.state == "waiting"
    lg.on_reference(ref_at(lg, 2 * S), S)                    # another tick's window: not used
    out = lg.on_reference(ref_at(lg, S), S)
    assert out is not None and out.source == "mpc" and out.stamp_ns == S


def test_without_a_reference_the_controller_holds_the_first_ee_position():
    lg = make()
    out = lg.on_joint_state(js(S), S)
    assert out.source == "mpc" and "no EE reference" in lg.status.reason
    assert np.max(np.abs(out.effort - lg.gravity_hold(Q0))) < 5.0   # near gravity compensation at rest


def test_reference_window_resampling():
    w = ReferenceWindow(S, 0.1, np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]], float))
    np.testing.assert_array_equal(w.sample(S, 3, 0.1), w.positions)                   # on the knots: exact
    np.testing.assert_allclose(w.sample(S + sec_to_ns(0.05), 3, 0.1)[:, 0], [0.5, 1.5, 2.0])  # clamped end
    np.testing.assert_allclose(w.sample(S - sec_to_ns(0.5), 2, 0.5)[:, 0], [0.0, 0.0])         # before: first
    with pytest.raises(ValueError, match="knot_dt"):
        ReferenceWindow(0, 0.0, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        ReferenceWindow(0, 0.1, np.full((1, 3), np.nan))


def test_parameter_validation_reasons():
    lg = make()
    r = lg.validate_changes({"q_cost": -1.0})
    assert "out of range" in r and "[0, 10000]" in r
    assert "read-only" in lg.validate_changes({"N": 64})
    assert "read-only" in lg.validate_changes({"robot": "fr3"})
    assert "one of" in lg.validate_changes({"linsys": "cholesky"})
    assert "expected an integer" in lg.validate_changes({"max_sqp_iters": 2.5})
    assert lg.validate_changes({"q_cost": 3.0, "linsys": "auto", "budget_s": 0.005}) is None
    assert lg.validate_changes({"limits": "off"}) is None
    for mech in ("telemetry", "barrier", "al", "admm"):
        assert lg.validate_changes({"limits": mech}) is None
    with pytest.raises(ValueError, match="out of range"):
        lg.request_changes({"rho": 0.0})


def test_limit_mechanism_refused_for_a_solver_without_it(monkeypatch):
    """The capability check: a solver class without enable_limit_<mech> (a foreign or future
    backend) gets the change refused with the reason, not an AttributeError at the next tick."""
    from gato._rowgroups_api import RowGroupAPI

    lg = make()
    monkeypatch.delattr(RowGroupAPI, "enable_limit_al")
    r = lg.validate_changes({"limits": "al"})
    assert "row-group" in r and "enable_limit_al" in r and "only 'off' is available" in r
    assert lg.validate_changes({"limits": "barrier"}) is None


def test_q_cost_change_applies_at_the_next_tick_and_reaches_the_kkt_system():
    # only the EE cost in the position block (u_ref zero: no gravity coupling G' s G there)
    lg = make(q_lim_cost=0.0, limits="off", u_ref="zero")
    q0 = lg.cfg["q_cost"]                      # the shipped default (gato.planners.shipped_weights)
    ref = ref_at(lg, S)
    lg.on_reference(ref, S)
    lg.on_joint_state(js(S), S)
    s = lg.solver
    x = np.r_[Q0, np.zeros(7)]
    xu = s.hold_trajectory(x[None])
    r6 = ref.solver_reference(S, 16, lg.cfg["dt"])
    q_before = s.debug_setup_kkt(xu, x[None], r6[None])["Q"][0, 1:-1, :7, :7]
    lg.request_changes({"q_cost": 7.5})
    assert s.params.q_cost == q0 and json.loads(lg.status.params_json)["q_cost"] == q0     # not inside a tick
    lg.on_joint_state(js(2 * S), 2 * S)
    assert s.params.q_cost == 7.5 and json.loads(lg.status.params_json)["q_cost"] == 7.5
    q_after = s.debug_setup_kkt(xu, x[None], r6[None])["Q"][0, 1:-1, :7, :7]
    # Gauss-Newton position block of the running EE cost: q_cost * J^T J
    np.testing.assert_allclose(q_after, q_before * (7.5 / q0), rtol=1e-9, atol=1e-12)


def test_solver_settings_linsys_budget_and_reseed_apply():
    lg = make()
    lg.on_reference(ref_at(lg, S), S)
    lg.request_changes({"max_sqp_iters": 3, "pcg_tol": 1e-6, "linsys": "pcg", "budget_s": 0.5,
                        "reseed_threshold": 0.2, "mu": 5.0})
    out = lg.on_joint_state(js(S), S)
    p = json.loads(lg.status.params_json)
    assert (p["max_sqp_iters"], p["pcg_tol"], p["linsys"], p["budget_s"], p["reseed_threshold"], p["mu"]) == \
        (3, 1e-6, "pcg", 0.5, 0.2, 5.0)
    assert lg.solver.linsys == "pcg" and out.step.solve.stats.linsys == "pcg"
    lg.request_changes({"linsys": "auto"})
    lg.on_joint_state(js(2 * S), 2 * S)
    assert lg.controller.linsys == "auto"


def test_torques_are_clamped_to_the_effort_limits_and_counted():
    lg = make()
    lg.on_reference(ref_at(lg, S, offset=(0.3, 0.3, 0.3)), S)
    lg.effort_limit = np.full(7, 0.5)          # stand-in for a weak robot's URDF limits
    out = lg.on_joint_state(js(S), S)
    assert np.all(np.abs(out.effort) <= 0.5) and lg.status.clamped == 1


def test_nonfinite_solve_uses_the_controller_fallback_and_solver_errors_hold(monkeypatch):
    """fallback=off: the controller's own gravity fallback, a hold on solver errors (the OSC
    fallback, the default, is tested in test_ros_controller_planners.py)."""
    lg = make(fallback="off")
    lg.on_reference(ref_at(lg, S), S)
    lg.on_joint_state(js(S), S)
    real_step = lg.controller.step

    def diverged_step(*a, **k):
        res = real_step(*a, **k)
        res.diverged, res.fallback = True, "gravity"
        return res

    monkeypatch.setattr(lg.controller, "step", diverged_step)
    out = lg.on_joint_state(js(2 * S), 2 * S)
    assert out.source == "fallback" and lg.status.fallbacks == 1 and "diverged" in lg.status.reason

    def failing_step(*a, **k):
        raise ValueError("x_measured: contains NaN or Inf")

    monkeypatch.setattr(lg.controller, "step", failing_step)
    out = lg.on_joint_state(js(3 * S), 3 * S)
    assert out.source == "hold" and "solver error" in lg.status.reason


def test_deadline_misses_count_against_the_control_period():
    lg = make(control_rate_hz=100.0)
    lg.record_publish(0.002)
    lg.record_publish(0.015)
    assert lg.status.deadline_misses == 1 and lg.status.latency_us == pytest.approx(15000.0)


def test_invalid_configuration_is_refused_at_start():
    with pytest.raises(ValueError, match="out of range"):
        make(q_cost=-2.0)
    with pytest.raises(ValueError, match="unknown"):
        make(qcost=1.0)
    if not callable(getattr(__import__("gato").BSQP, "enable_limit_admm", None)):
        with pytest.raises(ValueError, match="row-group"):
            make(limits="admm")


def test_a_new_timeout_applies_on_the_watchdog_between_ticks():
    lg = make(joint_state_timeout_s=10.0)
    lg.on_joint_state(js(S), now_ns=0)
    assert lg.on_timer(sec_to_ns(0.5)) is None
    lg.request_changes({"joint_state_timeout_s": 0.2})
    out = lg.on_timer(sec_to_ns(0.5))
    assert out.source == "hold" and lg.status.stale_events == 1
    assert json.loads(lg.status.params_json)["joint_state_timeout_s"] == 0.2


def test_limit_mechanism_changes_apply_at_the_next_tick():
    lg = make()
    lg.on_reference(ref_at(lg, S), S)
    out = lg.on_joint_state(js(S), S)
    assert out.step.limits == "admm" and lg.controller.limits == "admm"        # the schema default
    lg.request_changes({"limits": "barrier"})
    out = lg.on_joint_state(js(2 * S), 2 * S)
    assert out.step.limits == "barrier" and json.loads(lg.status.params_json)["limits"] == "barrier"
    lg.request_changes({"limits": "off"})
    out = lg.on_joint_state(js(3 * S), 3 * S)
    assert out.step.limits == "" and lg.controller.limits is None and out.step.row_viol is None
    assert json.loads(lg.status.params_json)["limits"] == "off"
