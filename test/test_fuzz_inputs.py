"""Fuzzing every input surface of the ROS-free logic classes (issue 38): seeded malformed
JointState, EEReference, WrenchStamped and Plan messages (test/fuzz_messages.py, real rclpy
message classes) and parameter values, thousands of cases in all.

Asserted for each reader: no exception escapes its boundary; no command it produces is
non-finite or beyond the URDF effort limits; its counters account for every bad message
exactly once (and for no good one); and, for the controller, tracking recovers after the
fuzz stops (the EE error of the last half second within 2x of an undisturbed run's).
"""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("gato_msgs.msg", _HINT)
inputs = import_or_skip("gato_ros.inputs", _HINT)
from fuzz_messages import FUZZERS, NS, Context, malformed  # noqa: E402

ROBOT = "iiwa14"


def _model():
    import pinocchio as pin

    import gato

    return pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))


def _limits_by_name():
    m = _model()
    return dict(zip(list(m.names)[1:], np.asarray(m.effortLimit, dtype=np.float64)))


def _ctx(rng=None, stamp_ns=5 * NS):
    from gato.sim.scenarios import Q_READY

    from gato_ros.types import Plan

    q = np.asarray(Q_READY[ROBOT], dtype=np.float64)
    names = [f"A{i}" for i in range(1, 8)]
    nx, nu, K = 14, 7, 8
    xu = np.zeros(K * (nx + nu) - nu)
    for k in range(K):
        xu[k * (nx + nu):k * (nx + nu) + 7] = q
    plan = Plan(stamp_ns=stamp_ns, knot_dt=0.02, nx=nx, nu=nu, n_knots=K, joint_names=names, xu=xu, seq=3,
                reset_epoch=1)
    ref = np.array([[0.5, 0.0, 0.6]]) + 0.01 * np.arange(16)[:, None]
    return Context(stamp_ns=stamp_ns, names=names, q=q, qd=np.zeros(7), ref=ref, knot_dt=0.01, plan=plan)


# ------------------------------------------------------------------ the boundary functions
BOUNDARY = {"JointState": lambda m: inputs.joint_state(m, now_ns=5 * NS),
            "EEReference": lambda m: inputs.reference_window(m, now_ns=5 * NS),
            "WrenchStamped": lambda m: inputs.wrench(m, now_ns=5 * NS),
            "Plan": lambda m: inputs.plan(m, now_ns=5 * NS)}
#: mutations a boundary function judges by itself (the others need the reader's robot or state)
JUDGED_AT_BOUNDARY = {
    "JointState": {"joint_duplicated", "positions_short", "velocities_short", "positions_long",
                   "efforts_mismatched", "stamp_future", "stamp_negative"},
    "EEReference": {mu.name for mu in FUZZERS["EEReference"].mutations if mu.bad},
    "WrenchStamped": {mu.name for mu in FUZZERS["WrenchStamped"].mutations if mu.bad},
    "Plan": {"xu_poisoned", "layout", "knot_dt_bad", "integrator_unknown", "stamp_future"},
}


@pytest.mark.parametrize("kind", sorted(BOUNDARY))
def test_the_boundary_refuses_what_it_judges_and_never_raises_anything_else(kind):
    """1,500 messages per type: only :class:`gato_ros.inputs.Rejected` leaves the boundary, never
    for a valid message, always for a single mutation it judges; what it accepts is finite and
    usable."""
    rng = np.random.default_rng(380 + len(kind))
    ctx = _ctx()
    n_refused = 0
    for i in range(1500):
        m, bad, names = malformed(kind, ctx, rng)
        try:
            v = BOUNDARY[kind](m)
        except inputs.Rejected as e:
            n_refused += 1
            assert bad, f"case {i}: a valid message ({names}) was refused: {e}"
            assert e.kind in ("shape", "nonfinite", "range", "names", "stamp", "type") and str(e), (i, names, e)
            continue
        # a single mutation the boundary judges must be refused (a later one may undo an earlier one)
        assert not (len(names) == 1 and names[0] in JUDGED_AT_BOUNDARY[kind]), f"case {i}: {names} passed"
        if kind == "EEReference":
            assert np.all(np.isfinite(v.positions)) and inputs.MIN_KNOT_DT_S <= v.knot_dt <= inputs.MAX_KNOT_DT_S
            v.sample(ctx.stamp_ns, 32, 0.01)          # the window is usable: no overflow, no division by 0
        elif kind == "Plan":
            assert np.all(np.isfinite(v.xu)) and v.knot_dt > 0
            v.states(), v.controls()
        elif kind == "WrenchStamped":
            assert np.all(np.isfinite(v[1]))
    assert n_refused >= 500, n_refused


def test_skips_tally_names_topics_kinds_and_stamps():
    sk = inputs.Skips(keep=2)
    ctx = _ctx()
    rng = np.random.default_rng(3)
    for _ in range(5):
        m, _, _ = malformed("EEReference", ctx, rng, only_bad=True)
        try:
            inputs.reference_window(m, now_ns=ctx.stamp_ns)
        except inputs.Rejected as e:
            sk.reject("/ee_reference", m, e)
    assert sk.total() == sk.total("/ee_reference") == 5 and len(sk.stamps["/ee_reference"]) == 2
    (line,) = sk.notes()
    assert line.startswith("/ee_reference: 5 message(s) skipped (") and "the first: EEReference" in line
    d = sk.as_dict()["/ee_reference"]
    assert d["count"] == 5 and sum(d["by_kind"].values()) == 5


# ------------------------------------------------------------------ the controller logic
REJECT_COUNTERS = ("dropped_out_of_order", "rejected_nonfinite", "rejected_names", "rejected_range",
                   "rejected_stamps", "rejected_references", "rejected_wrenches")


def _rejections(st) -> int:
    return sum(int(getattr(st, k)) for k in REJECT_COUNTERS)


def _check_command(out, limits, names, what):
    if out is None or out.effort is None:
        return
    e = np.asarray(out.effort, dtype=np.float64)
    assert e.shape == (len(names),) and np.all(np.isfinite(e)), f"{what}: non-finite command {e}"
    lim = np.array([limits[n] for n in names])
    assert np.all(np.abs(e) <= lim + 1e-9), f"{what}: command {e} beyond the effort limits {lim}"


def _run_controller(fuzz_ticks, *, seed, ticks_before=60, ticks_after=140, per_tick=6, clock_offset_ns=0):
    """A lockstep loop of the controller, world and reference logic (figure-8, free-running
    semantics: no reference_sync) fed through the controller's message boundary like the node;
    during ``fuzz_ticks`` ticks ``per_tick`` malformed messages on average arrive before each good
    joint state. ``clock_offset_ns``: the node clock minus the stamps (0: the sim's clock; a wall
    clock far ahead of simulated stamps otherwise). Returns (EE errors per tick (T,), bad
    messages sent, rejections counted)."""
    from gato_ros import conversions as cv
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.reference_logic import ReferenceLogic
    from gato_ros.sim_logic import SimWorldLogic

    rng = np.random.default_rng(seed)
    lg = ControllerLogic({"robot": ROBOT, "N": 16, "reference_sync": False})
    world = SimWorldLogic({"robot": ROBOT})
    ref = ReferenceLogic({"robot": ROBOT})
    limits, names = _limits_by_name(), lg.joint_names
    errs, n_bad, last = [], 0, None
    base = _ctx()
    for k in range(ticks_before + fuzz_ticks + ticks_after):
        t = world.t_ns
        now = t + clock_offset_ns
        win = ref.window(t)
        if ticks_before <= k < ticks_before + fuzz_ticks and last is not None:
            for _ in range(int(rng.poisson(per_tick))):
                ctx = Context(stamp_ns=last + int(rng.choice([0, 0, 1000])), names=list(names), q=q_last,
                              qd=qd_last, ref=win.positions, knot_dt=win.knot_dt, plan=base.plan)
                kind = str(rng.choice(["JointState", "JointState", "EEReference", "EEReference", "WrenchStamped"]))
                m, bad, muts = malformed(kind, ctx, rng, only_bad=rng.random() < 0.8)
                before = _rejections(lg.status)
                if kind == "JointState":
                    out = lg.on_joint_state_msg(m, now)
                elif kind == "EEReference":
                    out = lg.on_reference_msg(m, now)
                else:
                    out = lg.on_wrench_msg(m, now)
                _check_command(out, limits, names, f"tick {k}, {kind} {muts}")
                got = _rejections(lg.status) - before
                assert got == int(bad), f"tick {k}: {kind} {muts} (bad={bad}) counted {got} times: {lg.status}"
                n_bad += int(bad)
                last = lg.last_good_stamp_ns()     # a harmless message 1 us later may have been taken
        lg.on_reference_msg(cv.reference_to_msg(win), now)
        js = world.joint_state()
        out = lg.on_joint_state_msg(cv.joint_state_to_msg(js), now)
        _check_command(out, limits, names, f"tick {k}, the good state")
        assert out is not None and out.effort is not None and out.stamp_ns == t, f"tick {k}: no command"
        last, q_last, qd_last = t, js.position, js.velocity
        errs.append(float(np.linalg.norm(world.ee_position() - win.positions[0])))
        world.advance(world.effort_from(out.effort))
    return np.asarray(errs), n_bad, _rejections(lg.status)


def test_controller_logic_counts_every_bad_message_commands_stay_safe_and_tracking_recovers():
    """~1,200 malformed messages over 2 s of a figure-8 (joint states, EE references, wrench
    estimates), then 1.4 s undisturbed: the tracking error of its last 0.5 s within 2x of an
    undisturbed run's (+1 mm)."""
    errs, n_bad, counted = _run_controller(200, seed=38)
    assert n_bad >= 800 and counted == n_bad, (n_bad, counted)
    calm, _, counted0 = _run_controller(0, seed=38)
    assert counted0 == 0
    tail, tail0 = float(np.mean(errs[-50:])), float(np.mean(calm[-50:]))
    print(f"controller fuzz: {n_bad} bad messages counted; EE error of the last 0.5 s {tail * 1e3:.1f} mm "
          f"(undisturbed {tail0 * 1e3:.1f} mm)")
    assert tail <= 2.0 * tail0 + 1e-3, (tail, tail0)


def test_joint_states_far_ahead_of_a_live_stream_are_refused_on_any_clock():
    """Stamps on another clock than the node's (simulated stamps, a wall clock 30 years ahead):
    the stamp rule against the node clock cannot see a state an hour ahead of the stream, the
    live-stream rule does; every bad message is still counted once and the commands stay safe.
    (EE references have no stream rule: a window from the future is refused against the clock.)"""
    import fuzz_messages

    fz = fuzz_messages.FUZZERS["EEReference"]
    saved = list(fz.mutations)
    fz.mutations[:] = [mu for mu in saved if mu.name != "stamp_future"]
    try:
        _, n_bad, counted = _run_controller(40, seed=39, ticks_before=20, ticks_after=20,
                                            clock_offset_ns=30 * 365 * 86400 * NS)
    finally:
        fz.mutations[:] = saved
    assert n_bad >= 150 and counted == n_bad, (n_bad, counted)


def test_controller_parameters_fuzzed_through_the_on_set_check():
    """600 random values (wrong types, NaN, Inf, huge, negative, strings, lists) for every
    tunable through validate_changes (the node's on-set callback): a reason or None, never an
    exception; every accepted change applies between ticks and the commands stay finite."""
    from gato_ros import conversions as cv
    from gato_ros import params as schema
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.sim_logic import SimWorldLogic

    rng = np.random.default_rng(3838)
    lg = ControllerLogic({"robot": ROBOT, "N": 16})
    world = SimWorldLogic({"robot": ROBOT})
    limits = _limits_by_name()
    tunables = [p for p in schema.CONTROLLER if not p.read_only]
    junk = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, -1.0, 0.0, 1e-300, 3, -7, 2**62, True,
            "", "nan", "\x00", "a" * 300, [], [float("nan")] * 7, [1e308] * 7, [1.0] * 3, ["x"], None]
    n_ok = 0
    for i in range(600):
        p = tunables[int(rng.integers(len(tunables)))]
        v = junk[int(rng.integers(len(junk)))]
        reason = lg.validate_changes({p.name: v})
        assert reason is None or (isinstance(reason, str) and reason), (p.name, v, reason)
        if reason is None:
            n_ok += 1
            lg.request_changes({p.name: v})
        if i % 20 == 0:
            js = world.joint_state()
            out = lg.on_joint_state_msg(cv.joint_state_to_msg(js), world.t_ns)
            _check_command(out, limits, lg.joint_names, f"after {p.name}={v!r}")
            world.advance(world.effort_from(out.effort))
    assert 0 < n_ok < 600, n_ok


# ------------------------------------------------------------------ the estimator logic
def test_estimator_logic_counts_every_bad_joint_state_and_its_estimates_stay_finite():
    """~2,000 malformed joint states between good ones (zero commands as the applied torque):
    every one is counted once (``rejected``, or ``ignored_stamps`` for an old stamp), every
    estimate is finite and within max_wrench."""
    from gato_ros import conversions as cv
    from gato_ros.estimator_logic import EstimatorLogic
    from gato_ros.sim_logic import SimWorldLogic

    rng = np.random.default_rng(383)
    est = EstimatorLogic({"robot": ROBOT})
    world = SimWorldLogic({"robot": ROBOT})
    names = list(world.joint_names)
    n_bad = 0
    for k in range(400):
        js = world.joint_state()
        if k > 2:
            for _ in range(5):
                ctx = Context(stamp_ns=js.stamp_ns - world.period_ns, names=names, q=js.position, qd=js.velocity)
                m, bad, muts = malformed("JointState", ctx, rng, only_bad=True)
                before = est.rejected + est.ignored_stamps
                w = est.on_joint_state_msg(m, now_ns=js.stamp_ns)
                assert bad and est.rejected + est.ignored_stamps - before == 1, (k, muts)
                n_bad += 1
                if w is not None:
                    assert np.all(np.isfinite(w.wrench)) and np.all(np.abs(w.wrench) <= est.cfg["max_wrench"] + 1e-9)
        w = est.on_joint_state_msg(cv.joint_state_to_msg(js), now_ns=js.stamp_ns)
        if w is not None:
            assert np.all(np.isfinite(w.wrench)) and np.all(np.abs(w.wrench) <= est.cfg["max_wrench"] + 1e-9)
        u = np.zeros(len(names))
        est.on_effort(js.stamp_ns, names, u)
        world.advance(world.effort_from(u))
    assert n_bad >= 1400, n_bad


# ------------------------------------------------------------------ the plugin's executor
def test_plan_executor_fuzzed_plans_are_counted_and_torques_stay_within_limits():
    """1,000 plans with poisoned knots, a bad knot_dt or integrator, or an old sequence number,
    submitted to the plugin's executor (gato._core.PlanExecutor) between valid ones: each bad one
    is counted in dropped_invalid or dropped_out_of_order, and every update's torque is finite and
    within the effort limits."""
    from gato.core.executor import plan_executor

    rng = np.random.default_rng(3883)
    ex = plan_executor(ROBOT, plan_timeout=1.0)
    m = _model()
    q = 0.5 * (m.lowerPositionLimit + m.upperPositionLimit)
    lim = np.asarray(m.effortLimit)
    K, nv = 8, m.nv
    x = np.zeros((K, 2 * nv))
    x[:, :nv] = q
    u = np.zeros((K - 1, nv))
    seq, t = 1, NS
    n_bad = 0
    ex.submit(seq=seq, epoch=1, stamp_ns=t, knot_dt=0.02, integrator=0, x=x, u=u)
    for i in range(1000):
        c = ex.counters
        before = c["dropped_invalid"] + c["dropped_out_of_order"]
        xb, ub, dt, integ, s = x.copy(), u.copy(), 0.02, int(rng.integers(3)), seq + 1
        bad = rng.random() < 0.7
        if bad:
            kind = int(rng.integers(4))
            if kind == 0:
                (xb if rng.random() < 0.5 else ub).flat[int(rng.integers(ub.size))] = float(
                    rng.choice([np.nan, np.inf, -np.inf]))
            elif kind == 1:
                dt = float(rng.choice([0.0, -0.02, np.nan, np.inf]))
            elif kind == 2:
                integ = int(rng.choice([-1, 3, 99]))
            else:
                s = seq - int(rng.integers(0, 3))
        try:
            ex.submit(seq=s, epoch=1, stamp_ns=t, knot_dt=dt, integrator=integ, x=xb, u=ub)
        except ValueError:
            assert bad, i                       # refused at the binding (an integrator it cannot name)
            n_bad += 1
            continue
        if not bad:
            seq = s
        t += 2 * 10**6
        tau, _ = ex.update(t, q, np.zeros(nv))        # the executor takes a submitted plan at its next update
        tau = np.asarray(tau)
        c = ex.counters
        assert c["dropped_invalid"] + c["dropped_out_of_order"] - before == int(bad), (i, c)
        n_bad += int(bad)
        assert np.all(np.isfinite(tau)) and np.all(np.abs(tau) <= lim + 1e-9), (i, tau)
    assert n_bad >= 600


# ------------------------------------------------------------------ the simulation world's command input
@pytest.mark.parametrize("kind", ["EffortCommand", "Float64MultiArray"])
def test_sim_world_commands_fuzzed_refused_or_saturated_and_the_world_stays_sane(kind):
    """1,500 commands into the simulation world the way its node takes them (lockstep
    EffortCommand with names; realtime Float64MultiArray in the configured order): a ValueError
    naming the problem iff a bad mutation (NaN / Inf, wrong size, repeated or missing names);
    finite torques up to 1e308 N*m saturate at the URDF effort limits when applied (counted);
    the world's state stays finite after every period."""
    from gato_ros.sim_logic import SimWorldLogic

    rng = np.random.default_rng(3840 + len(kind))
    world = SimWorldLogic({"robot": ROBOT})
    lim = world.effort_limit
    good = 0.2 * lim * np.sin(np.arange(len(lim)))            # URDF order == joint_names order for iiwa14
    ctx = Context(stamp_ns=0, names=list(world.joint_names), q=good, qd=np.zeros(len(lim)), upper=lim)
    n_bad = n_huge = 0
    for i in range(1500):
        ctx.stamp_ns = world.t_ns
        m, bad, names = malformed(kind, ctx, rng)
        try:
            if kind == "EffortCommand":
                u = world.effort_from(m.effort, list(m.joint_names))
            else:
                u = world.effort_from(m.data)
        except ValueError as e:
            assert bad, f"case {i}: a valid command ({names}) was refused: {e}"
            assert str(e).startswith("effort: "), e
            n_bad += 1
            world.advance_safe()
            continue
        assert not bad, f"case {i}: {names} accepted"
        sat = world.saturated_periods
        world.advance(u)
        n_huge += int("huge" in names)
        assert world.saturated_periods == sat + int(np.any(np.abs(u) > lim)), (i, names)
        assert np.all(np.abs(world.u) <= lim) and np.all(np.isfinite(world.q)) and np.all(np.isfinite(world.dq)), \
            (i, names, world.q, world.dq)
        if i % 50 == 49:                                         # let the hold settle the arm now and then
            world.engage_safe()
            for _ in range(20):
                world.advance_safe()
    assert n_bad >= 300 and n_huge >= 100, (n_bad, n_huge)


# ------------------------------------------------------------------ the recorder's tick-gap check
def test_recorder_tick_check_counts_real_gaps_and_rebases_foreign_or_restarted_counters():
    """The recorder's lost-command check (gato_ros.recorder_logic.TickGapCheck, receipt times):
    a controller at 100 Hz that loses 3 ticks is reported as 3 missing; foreign EffortCommands on
    the same topic with absurd ticks (2^64 - 1, 0, random) and a controller restarted at tick 0
    are re-based and noted, never reported as billions of missing ticks."""
    from gato_ros.recorder_logic import TickGapCheck

    rng = np.random.default_rng(3841)
    c = TickGapCheck("/gato_controller/command", "receipt times", max_rate_hz=TickGapCheck.MAX_RATE_HZ)
    t = 0
    for tick in range(1, 200):
        t += 10_000_000
        if tick in (50, 51, 52):
            continue                                   # three lost commands
        c.feed(tick, t)
    assert c.missing == 3 and len(c.gaps) == 1 and c.gaps[0][1:3] == (50, 52), c.gaps
    foreign = [2**64 - 1, 0, int(rng.integers(2**62)), 10**12]
    for k, bogus in enumerate(foreign):
        t += 1_000_000
        c.feed(bogus, t)                               # a foreign publisher
        t += 9_000_000
        c.feed(200 + k, t)                             # the controller goes on
    assert c.missing == 3, (c.missing, c.gaps)
    assert len(c.rebased) == 2 * len(foreign), c.rebased
    assert "jumped from 199 to 18446744073709551615" in c.rebase_line(c.rebased[0])
    # a restart: the counter starts again at 1, then continues; a later real gap is still found
    for tick in range(1, 30):
        t += 10_000_000
        if tick != 20:
            c.feed(tick, t)
    assert c.missing == 4 and c.gaps[-1][1:3] == (20, 20), c.gaps
    # long silences are not jumps: 1,000 ticks missing over 10 s at 100 Hz are 1,000 missing ticks
    t += 10 * 10**9
    c.feed(29 + 1001, t)
    assert c.missing == 4 + 1000


def test_estimator_logic_effort_commands_fuzzed_bad_ones_counted_estimates_finite():
    """effort_source=command: ~1,500 malformed EffortCommands (NaN / Inf, wrong sizes, repeated or
    missing names; and harmless ones: reordered names, an extra joint, finite torques up to
    1e308 N*m) beside the good command of each tick: a bad one is counted once in ``rejected``
    and never stored, a harmless one is taken; every estimate is finite and within max_wrench."""
    from gato_ros import conversions as cv
    from gato_ros.estimator_logic import EstimatorLogic
    from gato_ros.sim_logic import SimWorldLogic

    rng = np.random.default_rng(3842)
    est = EstimatorLogic({"robot": ROBOT, "effort_source": "command"})
    world = SimWorldLogic({"robot": ROBOT})
    names = list(world.joint_names)
    lim = world.effort_limit
    n_bad = n_ok = n_est = 0

    def check(w):
        nonlocal n_est
        if w is not None:
            n_est += 1
            assert np.all(np.isfinite(w.wrench)) and np.all(np.abs(w.wrench) <= est.cfg["max_wrench"] + 1e-9)

    for k in range(300):
        js = world.joint_state()
        check(est.on_joint_state_msg(cv.joint_state_to_msg(js), now_ns=js.stamp_ns))
        ctx = Context(stamp_ns=js.stamp_ns, names=names, q=np.zeros(len(names)), qd=np.zeros(len(names)), upper=lim)
        for _ in range(5):
            m, bad, muts = malformed("EffortCommand", ctx, rng)
            before = est.rejected
            check(est.on_effort_msg(m))
            assert est.rejected - before == int(bad), (k, muts, est.last_rejection)
            n_bad += int(bad)
            n_ok += int(not bad)
        u = np.zeros(len(names))                       # the command applied: the last word for this stamp
        check(est.on_effort_msg(cv.effort_command_to_msg(u, names, js.stamp_ns, "mpc", k)))
        world.advance(world.effort_from(u))
    assert n_bad >= 500 and n_ok >= 300 and n_est >= 70, (n_bad, n_ok, n_est)   # 77 estimates undisturbed
