"""The estimator node's ROS-free logic (gato_ros.estimator_logic) and the controller's
``hypotheses:=estimator`` path (gato_ros.wrench_hypotheses, ControllerLogic), in one
process without DDS: the simulation world's logic, the controller's logic, the reference's
logic and the estimator's logic wired by hand in lockstep."""
import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("pinocchio", "install the project (scripts/setup.sh)")
from gato_ros import params  # noqa: E402
from gato_ros.controller_logic import ControllerLogic  # noqa: E402
from gato_ros.estimator_logic import EstimatorLogic  # noqa: E402
from gato_ros.reference_logic import ReferenceLogic  # noqa: E402
from gato_ros.sim_logic import SimWorldLogic  # noqa: E402
from gato_ros.types import JointStateSample  # noqa: E402
from gato_ros.wrench_hypotheses import EstimateFeed, EstimateSampler  # noqa: E402

ROBOT = "iiwa14"
PUSH = np.array([0.0, 10.0, 0.0, 0.0, 0.0, 0.0])   # the system test's 10 N constant push


def closed_loop(hypotheses, ticks, world="pinocchio", effort_source="command", wrench=PUSH, switch_at=None):
    """Lockstep figure-8 with ``wrench`` on the EE; returns (EE errors (ticks,) m, estimates list,
    controller logic)."""
    sim = SimWorldLogic({"robot": ROBOT, "world": world, "external_wrench": list(wrench)})
    est = EstimatorLogic({"robot": ROBOT, "effort_source": effort_source})
    ctl = ControllerLogic({"robot": ROBOT, "reference_sync": True, "hypotheses": hypotheses})
    ref = ReferenceLogic({"robot": ROBOT})
    errs, ests = [], []
    for k in range(ticks):
        if switch_at is not None and k == switch_at[0]:
            ctl.request_changes({"hypotheses": switch_at[1]})
        js = sim.joint_state()
        out = est.on_joint_state(js)
        if out is not None:
            ests.append(out)
            ctl.on_wrench_estimate(out.wrench, js.stamp_ns)
        assert ctl.on_joint_state(js, js.stamp_ns) is None          # waits for its reference window
        cmd = ctl.on_reference(ref.window(js.stamp_ns), js.stamp_ns)
        assert cmd is not None and cmd.source == "mpc"
        est.on_effort(js.stamp_ns, ctl.joint_names, cmd.effort)
        errs.append(float(np.linalg.norm(sim.ee_position() - ref.positions(js.stamp_ns * 1e-9)[0])))
        sim.advance(sim.effort_from(cmd.effort, ctl.joint_names))
    return np.array(errs), ests, ctl


@pytest.mark.parametrize("world,effort_source", [("pinocchio", "command"), ("mujoco", "joint_states")])
def test_estimate_recovers_the_push_and_the_controller_tracks_better_with_it(world, effort_source):
    e_none, ests, _ = closed_loop("none", 200, world, effort_source)
    e_est, ests_on, ctl = closed_loop("estimator", 200, world, effort_source)
    # one estimate per interval once the second state and the first command are in
    assert len(ests) == 199 and len(ests_on) == 199
    for out in ests_on[10:]:
        assert np.all(np.isfinite(out.wrench)) and not out.clamped
        assert np.linalg.norm(out.wrench[:3] - PUSH[:3]) <= 0.01 * 10.0, out.wrench   # 1 % of 10 N
        assert np.linalg.norm(out.wrench[3:]) <= 0.05
    assert ests_on[-1].stats["n_updates"] == 199 and ests_on[-1].stats["n_clamped"] == 0
    # the estimate in the solve: the mean tracking error after the start-up drops clearly
    assert np.mean(e_est[50:]) < 0.75 * np.mean(e_none[50:]), (np.mean(e_est[50:]), np.mean(e_none[50:]))
    assert ctl.controller.hypotheses is ctl._feed.batch
    np.testing.assert_array_equal(ctl._feed.sampler.estimate, ests_on[-1].wrench)


def test_hypotheses_switch_live_between_ticks():
    e_none, _, _ = closed_loop("none", 150)
    e_sw, _, ctl = closed_loop("none", 150, switch_at=(60, "estimator"))
    np.testing.assert_array_equal(e_sw[:61], e_none[:61])     # identical until the switch takes effect
    assert np.mean(e_sw[100:]) < 0.75 * np.mean(e_none[100:])
    assert ctl.controller.hypotheses is ctl._feed.batch
    # switching back removes the batch and zeroes the solver's external wrench
    _, _, ctl2 = closed_loop("estimator", 80, switch_at=(40, "none"))
    assert ctl2.controller.hypotheses is None
    assert ctl2.cfg["hypotheses"] == "none"


def test_hypotheses_parameter_is_validated():
    C = params.CONTROLLER
    assert params.validate(C, "hypotheses", "estimator") is None
    assert "hypotheses" in params.validate(C, "hypotheses", "sampling")
    assert not params.by_name(C)["hypotheses"].read_only
    assert params.by_name(C)["wrench_topic"].read_only
    ctl = ControllerLogic({"robot": ROBOT})
    assert ctl.validate_changes({"hypotheses": "bogus"}).startswith("hypotheses")
    with pytest.raises(ValueError, match="wrench"):
        ctl.on_wrench_estimate([0.0, np.nan, 0, 0, 0, 0], 0)
    with pytest.raises(ValueError, match="wrench"):
        ctl.on_wrench_estimate([1.0, 2.0], 0)


def test_estimate_expires_to_zero():
    ctl = ControllerLogic({"robot": ROBOT, "hypotheses": "estimator", "estimate_timeout_s": 0.2})
    feed = ctl._estimate_feed()
    ctl.on_wrench_estimate([1.0, 2.0, 3.0, 0.0, 0.0, 0.0], 1_000_000_000)
    assert feed.refresh(1_100_000_000) and feed.sampler.estimate[2] == 3.0
    assert not feed.refresh(1_300_000_001)
    np.testing.assert_array_equal(feed.sampler.estimate, np.zeros(6))
    assert feed.expired == 1


def test_estimate_sampler_rows():
    s = EstimateSampler(5, spread=4.0)
    s.set_estimate([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    b = s.generate_batch()
    assert b.shape == (5, 6)
    np.testing.assert_array_equal(b[0], [1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    np.testing.assert_array_equal(b[1], np.zeros(6))
    np.testing.assert_allclose(np.linalg.norm(b[2:, :3] - b[0, :3], axis=1), 4.0)
    np.testing.assert_array_equal(b[2:, 3:], np.tile(b[0, 3:], (3, 1)))
    one = EstimateSampler(1)
    one.set_estimate(np.arange(6.0))
    np.testing.assert_array_equal(one.generate_batch(), np.arange(6.0)[None, :])
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            EstimateSampler(bad)
    with pytest.raises(ValueError, match="spread"):
        EstimateSampler(2, spread=-1.0)


def _state(logic, stamp_ns, q=None, dq=None, names=None, effort=None):
    n = logic.nq
    return JointStateSample(stamp_ns, list(names or logic.cfg["joint_names"]),
                            np.zeros(n) if q is None else q, np.zeros(n) if dq is None else dq,
                            np.zeros(0) if effort is None else effort)


def test_bad_input_raises_naming_the_field():
    est = EstimatorLogic({"robot": ROBOT})
    names = est.cfg["joint_names"]
    with pytest.raises(ValueError, match="joint_states.name"):
        est.on_joint_state(_state(est, 0, names=names[:-1], q=np.zeros(6), dq=np.zeros(6)))
    with pytest.raises(ValueError, match="joint_states.velocity"):
        est.on_joint_state(_state(est, 0, dq=np.r_[np.nan, np.zeros(6)]))
    with pytest.raises(ValueError, match="joint_states.position"):
        est.on_joint_state(_state(est, 0, q=np.zeros(5)))
    with pytest.raises(ValueError, match="effort.effort"):
        est.on_effort(0, names, np.zeros(3))
    with pytest.raises(ValueError, match="effort.effort"):
        est.on_effort(0, names, np.r_[np.inf, np.zeros(6)])
    with pytest.raises(ValueError, match="effort.joint_names"):
        est.on_effort(0, ["X"] * 7, np.zeros(7))
    js_est = EstimatorLogic({"robot": ROBOT, "effort_source": "joint_states"})
    with pytest.raises(ValueError, match="joint_states.effort"):
        js_est.on_joint_state(_state(js_est, 0))
    with pytest.raises(ValueError, match="effort_source"):
        EstimatorLogic({"robot": ROBOT, "effort_source": "bogus"})
    with pytest.raises(ValueError, match="max_wrench"):
        EstimatorLogic({"robot": ROBOT, "max_wrench": -1.0})


def test_repeated_stamps_are_ignored_and_gaps_not_fitted():
    est = EstimatorLogic({"robot": ROBOT, "max_interval_s": 0.05})
    q0 = np.array(params.by_name(params.SIM)["q0"].default_for(ROBOT))
    assert est.on_joint_state(_state(est, 0, q=q0)) is None
    assert est.on_joint_state(_state(est, 0, q=q0)) is None            # lockstep re-send
    assert est.ignored_stamps == 1
    assert est.on_effort(0, est.cfg["joint_names"], np.zeros(7)) is None   # no closing state yet
    out = est.on_joint_state(_state(est, 10_000_000, q=q0))
    assert out is not None and out.stamp_ns == 10_000_000
    est.on_effort(10_000_000, est.cfg["joint_names"], np.zeros(7))
    assert est.on_joint_state(_state(est, 200_000_000, q=q0)) is None  # 0.19 s gap > max_interval_s
    assert est.skipped_gaps == 1
    # a command that arrives after the state closing its interval still completes the fit
    assert est.on_joint_state(_state(est, 210_000_000, q=q0)) is None
    assert est.on_effort(200_000_000, [], np.zeros(7)) is not None   # empty names: joint_names order


def test_diverging_fit_is_clamped_and_reported_never_nan():
    est = EstimatorLogic({"robot": ROBOT, "max_wrench": 50.0})
    q0 = np.array(params.by_name(params.SIM)["q0"].default_for(ROBOT))
    est.on_joint_state(_state(est, 0, q=q0))
    est.on_effort(0, [], np.full(7, 300.0))                      # torques no small EE wrench explains
    out = est.on_joint_state(_state(est, 10_000_000, q=q0, dq=np.full(7, -50.0)))
    assert out.clamped and out.stats["clamped"] and out.stats["n_clamped"] == 1
    assert np.all(np.isfinite(out.wrench))
    assert np.linalg.norm(out.raw[:3]) <= 50.0 + 1e-9 and np.linalg.norm(out.raw[3:]) <= 50.0 + 1e-9
    assert np.linalg.norm(out.wrench[:3]) <= 50.0 + 1e-9


def test_feed_builds_a_force_hypothesis_batch_of_the_solver_size():
    ctl = ControllerLogic({"robot": ROBOT, "batch_size": 3, "hypotheses": "estimator", "hypothesis_spread_n": 2.0})
    feed = ctl._estimate_feed()
    assert isinstance(feed, EstimateFeed) and feed.batch.batch_size == 3
    ctl.on_wrench_estimate(PUSH, 0)
    b = feed.sampler.generate_batch()
    np.testing.assert_array_equal(b[0], PUSH)
    np.testing.assert_array_equal(b[1], np.zeros(6))
    assert abs(np.linalg.norm(b[2, :3] - PUSH[:3]) - 2.0) < 1e-12


def async_loop(estimate_sync, ticks, order_seed, batch_size=1):
    """Lockstep figure-8 with the push, where each tick's joint state, reference window and
    wrench estimate reach the controller in a seeded random order (the three arrive over DDS
    from three nodes). Returns (commands (ticks, 7), estimates handed over, controller logic)."""
    rng = np.random.default_rng(order_seed)
    sim = SimWorldLogic({"robot": ROBOT, "world": "pinocchio", "external_wrench": list(PUSH)})
    est = EstimatorLogic({"robot": ROBOT})
    ctl = ControllerLogic({"robot": ROBOT, "reference_sync": True, "hypotheses": "estimator",
                           "estimate_sync": estimate_sync, "batch_size": batch_size})
    ref = ReferenceLogic({"robot": ROBOT})
    cmds, n_est = [], 0
    for k in range(ticks):
        js = sim.joint_state()
        t = js.stamp_ns
        e = est.on_joint_state(js)            # the estimate stamped t (none at the first state)
        n_est += e is not None
        deliver = {"state": lambda: ctl.on_joint_state(js, t), "ref": lambda: ctl.on_reference(ref.window(t), t),
                   "est": lambda: None if e is None else ctl.on_wrench_estimate(e.wrench, t, e.stamp_ns)}
        outs = [deliver[what]() for what in rng.permutation(list(deliver))]
        done = [o for o in outs if o is not None]
        assert len(done) == 1 and done[0].source == "mpc", (k, outs)
        cmds.append(done[0].effort)
        est.on_effort(t, ctl.joint_names, done[0].effort)
        sim.advance(sim.effort_from(done[0].effort, ctl.joint_names))
    return np.array(cmds), n_est, ctl


@pytest.mark.parametrize("batch_size", [1, 3])
def test_estimate_sync_makes_lockstep_runs_independent_of_arrival_order(batch_size):
    """estimate_sync: every tick solves under the estimate stamped at its state, whichever of
    state, window and estimate comes first, so runs with different arrival orders give the same
    commands bit for bit; without it an estimate that comes after its tick's state and window
    is used one tick late and the commands depend on the order."""
    a, n_a, ctl = async_loop(True, 40, order_seed=1, batch_size=batch_size)
    b, n_b, _ = async_loop(True, 40, order_seed=2, batch_size=batch_size)
    assert n_a == n_b == 39
    np.testing.assert_array_equal(a, b)
    assert ctl.estimates_missed == 0
    np.testing.assert_array_equal(ctl._feed.sampler.estimate, ctl._est[max(ctl._est)])
    c, _, _ = async_loop(False, 40, order_seed=1, batch_size=batch_size)
    d, _, _ = async_loop(False, 40, order_seed=2, batch_size=batch_size)
    assert np.max(np.abs(c - d)) > 1e-6


def test_estimate_sync_waits_for_the_estimate_and_gives_up_after_resends():
    """A tick waits for its estimate (not at the first state: no interval closed yet); when the
    world has re-sent the state REFERENCE_LOST_RESENDS times without it, the tick solves under
    the last estimate received, counted and named in the status; the next ticks do not wait
    until an estimate arrives again."""
    from gato_ros.controller_logic import REFERENCE_LOST_RESENDS

    sim = SimWorldLogic({"robot": ROBOT, "world": "pinocchio", "external_wrench": list(PUSH)})
    est = EstimatorLogic({"robot": ROBOT})
    ctl = ControllerLogic({"robot": ROBOT, "hypotheses": "estimator", "estimate_sync": True})
    logs = []
    ctl._log = lambda level, text: logs.append((level, text))

    def step(out):
        est.on_effort(out.stamp_ns, ctl.joint_names, out.effort)
        sim.advance(sim.effort_from(out.effort, ctl.joint_names))

    js = sim.joint_state()
    assert est.on_joint_state(js) is None
    out = ctl.on_joint_state(js, js.stamp_ns)              # first state: nothing to wait for
    assert out is not None and out.source == "mpc"
    step(out)
    for _ in range(3):                                     # the state waits, its estimate completes the tick
        js = sim.joint_state()
        e = est.on_joint_state(js)
        assert ctl.on_joint_state(js, js.stamp_ns) is None
        out = ctl.on_wrench_estimate(e.wrench, js.stamp_ns, e.stamp_ns)
        assert out is not None and out.stamp_ns == js.stamp_ns
        np.testing.assert_array_equal(out.solve_input.wrench_hypotheses, e.wrench[None, :])
        step(out)
    last = e.wrench
    js = sim.joint_state()                                 # this tick's estimate is lost
    est.on_joint_state(js)
    assert ctl.on_joint_state(js, js.stamp_ns) is None
    for _ in range(REFERENCE_LOST_RESENDS - 1):
        assert ctl.on_joint_state(js, js.stamp_ns) is None  # the world re-sends the state
    out = ctl.on_joint_state(js, js.stamp_ns)
    assert out is not None and out.source == "mpc" and ctl.estimates_missed == 1
    np.testing.assert_array_equal(out.solve_input.wrench_hypotheses, last[None, :])   # the previous estimate
    assert "wrench estimates not arriving" in ctl.status.reason
    assert any(lv == "warn" and "did not arrive" in t for lv, t in logs)
    step(out)
    js = sim.joint_state()                                 # estimates stay away: no more waiting
    e = est.on_joint_state(js)
    out = ctl.on_joint_state(js, js.stamp_ns)
    assert out is not None and ctl.estimates_missed == 1
    step(out)
    js = sim.joint_state()                                 # one arrives again: the ticks wait again
    e = est.on_joint_state(js)
    assert ctl.on_wrench_estimate(e.wrench, js.stamp_ns, e.stamp_ns) is None   # it came before its state
    out = ctl.on_joint_state(js, js.stamp_ns)
    assert out is not None and "wrench estimates not arriving" not in ctl.status.reason
    step(out)
    js = sim.joint_state()
    e = est.on_joint_state(js)
    assert ctl.on_joint_state(js, js.stamp_ns) is None
    assert ctl.on_wrench_estimate(e.wrench, js.stamp_ns, e.stamp_ns) is not None
    # switched off while a tick waits: the re-sent state is solved without the estimate
    step(ctl._last_out)
    js = sim.joint_state()
    assert ctl.on_joint_state(js, js.stamp_ns) is None
    ctl.request_changes({"hypotheses": "none"})
    out = ctl.on_joint_state(js, js.stamp_ns)
    assert out is not None and out.solve_input.wrench_hypotheses is None


def test_a_resent_state_gets_its_estimate_again():
    """The estimator node answers a lockstep re-send with the estimate of that state (a lost
    estimate is recovered the way the world recovers a lost state)."""
    est = EstimatorLogic({"robot": ROBOT})
    q0 = np.array(params.by_name(params.SIM)["q0"].default_for(ROBOT))
    est.on_joint_state(_state(est, 0, q=q0))
    assert est.estimate_at(0) is None
    est.on_effort(0, [], np.zeros(7))
    out = est.on_joint_state(_state(est, 10_000_000, q=q0))
    assert est.on_joint_state(_state(est, 10_000_000, q=q0)) is None     # the re-send itself is not refitted
    assert est.estimate_at(10_000_000) is out and est.n_published == 1
    assert est.estimate_at(0) is None
    est.reset()
    assert est.estimate_at(10_000_000) is None
