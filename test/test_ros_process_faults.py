"""Process faults of the gato graph (issue 23): a controller, reference node or recorder that
dies, and node shutdown by signal.

ROS-free part (fast): the simulation world's command watchdog and its safe behaviours
(hold, brake) in closed loop with the real controller logic; a restarted controller that
resumes without a torque jump; the controller's stale / lost EE reference rules.

System part (slow, real DDS, processes started through the launch runner like
test_ros_system.py): SIGKILL the controller in the sim bringup (free-running and
lockstep, respawn on); SIGKILL the reference node and the recorder; SIGINT at random
moments to running nodes (exit code 0 each time).

Crash times are drawn from seeded generators; no wall-clock time is asserted.
"""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
sl = import_or_skip("gato_ros.sim_logic", _HINT)
cl = import_or_skip("gato_ros.controller_logic", _HINT)
rl = import_or_skip("gato_ros.reference_logic", _HINT)
from gato import tasks  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
PERIOD_NS = 10_000_000
S = 1_000_000_000


# ------------------------------------------------------------------ closed loop without ROS
class Loop:
    """The lockstep bringup in one process: world, controller (reference_sync) and reference."""

    def __init__(self, sim_cfg=None, ctl_cfg=None):
        self.sim = sl.SimWorldLogic({"robot": ROBOT, **(sim_cfg or {})})
        self.ref = rl.ReferenceLogic({"robot": ROBOT})
        self.ctl_cfg = {"robot": ROBOT, "reference_sync": True, **(ctl_cfg or {})}
        self.ctl = cl.ControllerLogic(self.ctl_cfg)
        self.vel_limit = np.asarray(self.sim._model.velocityLimit)

    def restart_controller(self):
        self.ctl = cl.ControllerLogic(self.ctl_cfg)

    def command(self):
        js = self.sim.joint_state()
        out = self.ctl.on_joint_state(js, js.stamp_ns)
        if out is None:
            out = self.ctl.on_reference(self.ref.window(js.stamp_ns), js.stamp_ns)
        return out

    def run_until(self, t_s):
        while self.sim.t_ns < round(t_s * S):
            self.sim.advance(self.sim.effort_from(self.command().effort))

    def tracking_error(self):
        return float(np.linalg.norm(self.sim.ee_position() - self.ref.positions(self.sim.t_ns / S)[0]))


def crash_and_watch(loop, timeout_ticks, seconds=1.5):
    """The controller stops answering now: the world holds its last command for
    ``timeout_ticks`` periods (a free-running world's zero-order hold until the watchdog
    fires), then applies its safe behaviour. Returns (EE path (T, 3) from the crash on,
    max |qd| / velocity limit, motor torques (T, 7))."""
    sim = loop.sim
    wd = sl.CommandWatchdog(timeout_ticks * PERIOD_NS / S - 1e-6, sim.timeout_action)
    wd.command(0.0, sim.t_ns)
    ee, vel, torques = [sim.ee_position()], 0.0, []
    for k in range(1, int(round(seconds * S / PERIOD_NS)) + 1):
        ev = wd.check(k * PERIOD_NS / S, sim.t_ns)
        if ev is not None:
            assert k == timeout_ticks and "controller stopped answering" in ev
            sim.engage_safe()
        if wd.fresh:
            sim.advance(sim.u)
        else:
            sim.advance_safe()
        ee.append(sim.ee_position())
        vel = max(vel, float(np.max(np.abs(sim.dq) / loop.vel_limit)))
        torques.append(sim.u.copy())
    return np.array(ee), vel, np.array(torques)


def test_watchdog_states_events_and_recovery():
    wd = sl.CommandWatchdog(0.05, "hold")
    assert wd.state == "waiting" and not wd.fresh
    assert wd.check(10.0, 0) is None and wd.timeouts == 0          # start-up is not a timeout
    assert "first command" in wd.command(10.0, 0) and wd.fresh
    assert wd.check(10.04, PERIOD_NS) is None
    ev = wd.check(10.06, 2 * PERIOD_NS)
    assert "controller stopped answering at t=0.020 s" in ev and "holding" in ev
    assert (wd.state, wd.timeouts, wd.last_timeout_sim_ns) == ("timeout", 1, 2 * PERIOD_NS)
    assert wd.check(11.0, 3 * PERIOD_NS) is None and wd.timeouts == 1   # reported once
    assert "resumed" in wd.command(11.0, 3 * PERIOD_NS) and wd.fresh and wd.reason == ""
    assert wd.applied == 2 and abs(wd.age_s(11.5) - 0.5) < 1e-12
    with pytest.raises(ValueError, match="command_timeout_s"):
        sl.CommandWatchdog(0.0, "hold")
    with pytest.raises(ValueError, match="command_timeout_action"):
        sl.CommandWatchdog(0.1, "coast")


def test_the_world_holds_the_start_pose_before_the_first_command():
    for action in ("hold", "brake"):
        sim = sl.SimWorldLogic({"robot": ROBOT, "command_timeout_action": action})
        q0, ee0 = sim.q.copy(), sim.ee_position()
        for _ in range(100):
            sim.advance_safe()
        assert np.max(np.abs(sim.q - q0)) < 2e-3 and np.linalg.norm(sim.ee_position() - ee0) < 2e-3, action
        assert np.all(np.abs(sim.u) <= sim.effort_limit)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("action", ["hold", "brake"])
def test_a_dead_controller_leaves_the_arm_held(seed, action):
    """Free-running figure-8, the controller dies at a random moment: with the default
    timeout (5 periods) the EE moves < 5 cm, no joint reaches its velocity limit, the arm
    comes to rest; hold: the torques stay within the effort limits; brake: zero motor torque."""
    t_crash = 1.5 + np.random.default_rng(seed).uniform(0.0, 2.0)
    loop = Loop({"command_timeout_action": action})
    loop.run_until(t_crash)
    timeout_ticks = int(round(loop.sim.cfg["command_timeout_s"] * S / PERIOD_NS))
    ee, vel, torques = crash_and_watch(loop, timeout_ticks)
    moved = np.linalg.norm(ee - ee[0], axis=1)
    assert moved.max() < 0.05, (t_crash, moved.max())
    assert vel < 1.0
    assert np.max(np.abs(loop.sim.dq)) < 1e-2                       # at rest after 1.5 s
    assert np.all(np.abs(torques) <= loop.sim.effort_limit + 1e-9)
    if action == "brake":
        assert not np.any(torques[timeout_ticks:])


def test_the_old_zero_torque_timeout_let_the_arm_fall():
    """The behaviour this replaces (zero torque after the timeout): the arm falls and
    swings far beyond 5 cm, the measure the hold is compared with."""
    loop = Loop()
    loop.run_until(2.0)
    ee0 = loop.sim.ee_position()
    for _ in range(100):
        loop.sim.advance(np.zeros(7))
    assert np.linalg.norm(loop.sim.ee_position() - ee0) > 0.2


@pytest.mark.parametrize("seed", [0, 1])
def test_a_restarted_controller_resumes_without_a_torque_jump(seed):
    """The controller dies, the world holds for 2 s while the figure-8 reference moves on,
    a fresh controller starts: its first commands step the torque by less than the hold
    torque (and less than the step at the hold's engagement), and tracking is back (< 3 cm)
    within 2 s; the status says it is resuming."""
    t_crash = 1.5 + np.random.default_rng(10 + seed).uniform(0.0, 2.0)
    loop = Loop()
    loop.run_until(t_crash)
    u_last = loop.sim.u.copy()
    ee, _, torques = crash_and_watch(loop, 5, seconds=2.0)
    engage_step = np.max(np.abs(torques[5] - u_last))
    u_hold = loop.sim.u.copy()
    loop.restart_controller()
    first = loop.command()
    assert first.source == "mpc" and first.solve_input.reset
    assert loop.ctl.status.reason.startswith("resuming") or loop.tracking_error() < 0.01
    us, errs = [u_hold], []
    loop.sim.advance(loop.sim.effort_from(first.effort))
    us.append(loop.sim.u.copy())
    for _ in range(199):
        loop.sim.advance(loop.sim.effort_from(loop.command().effort))
        us.append(loop.sim.u.copy())
        errs.append(loop.tracking_error())
    steps = np.max(np.abs(np.diff(us, axis=0)), axis=1)
    assert steps[:20].max() < np.max(np.abs(u_hold)), (steps[:20].max(), np.abs(u_hold).max())
    assert steps[:20].max() <= engage_step + 1e-9, (steps[:20].max(), engage_step)
    assert np.max(errs[-50:]) < 0.03, np.max(errs[-50:])


def test_resume_blend_starts_at_the_measured_ee_position_and_is_off_with_zero_speed():
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16})
    q = np.asarray(tasks.Q_READY[ROBOT])
    p = lg.solver.ee_pos(q)
    far = ReferenceWindow(S, lg.cfg["dt"], np.tile(p + [0.0, 0.2, 0.0], (16, 1)))
    lg.on_reference(far, S)
    out = lg.on_joint_state(JointStateSample(S, NAMES, q, np.zeros(7)), S)
    r = out.solve_input.reference.reshape(16, 6)[:, :3]
    assert np.allclose(r[0], p) and np.all(np.diff(r[:, 1]) >= -1e-12) and r[-1, 1] > p[1]
    assert "resuming" in lg.status.reason and "1.00 s" in lg.status.reason       # 0.2 m at 0.2 m/s
    off = cl.ControllerLogic({"robot": ROBOT, "N": 16, "resume_speed_mps": 0.0})
    off.on_reference(far, S)
    out = off.on_joint_state(JointStateSample(S, NAMES, q, np.zeros(7)), S)
    assert np.allclose(out.solve_input.reference.reshape(16, 6)[:, :3], far.positions)


def test_a_stale_reference_is_followed_to_its_end_then_the_current_position_held():
    """No window after t = 1 s (the reference node died): the ticks follow the last window,
    clamped to its last knot; past the window's end they hold the EE position measured at
    the first tick past it."""
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16, "resume_speed_mps": 0.0})
    ref = rl.ReferenceLogic({"robot": ROBOT})
    sim = sl.SimWorldLogic({"robot": ROBOT})
    last = None
    while sim.t_ns <= 1 * S:
        j = sim.joint_state()
        last = ref.window(j.stamp_ns)
        lg.on_reference(last, j.stamp_ns)
        sim.advance(sim.effort_from(lg.on_joint_state(j, j.stamp_ns).effort))
    held_at, inputs = None, []
    while sim.t_ns <= last.end_ns + 0.5 * S:
        j = sim.joint_state()
        out = lg.on_joint_state(j, j.stamp_ns)
        inputs.append((j.stamp_ns, out.solve_input.reference.reshape(16, 6)[:, :3], lg.status.reason))
        if held_at is None and j.stamp_ns > last.end_ns:
            held_at = sim.ee_position()
        sim.advance(sim.effort_from(out.effort))
    for t, r, reason in inputs:
        if t <= last.end_ns:
            np.testing.assert_allclose(r, last.sample(t, 16, lg.cfg["dt"]), atol=1e-12)
            assert "following the last window" in reason or t - last.stamp_ns <= 0.1 * S
        else:
            np.testing.assert_allclose(r, np.tile(held_at, (16, 1)), atol=1e-9)
            assert "holding the EE position measured at" in reason
    assert inputs[-1][0] > last.end_ns


def test_reference_sync_does_not_wait_forever_for_a_dead_reference_node():
    """Lockstep: a state whose window never comes is re-sent by the world; the re-send is
    solved with the latest window and the following ticks do not wait any more, until a
    window arrives again (then they wait for theirs)."""
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16, "reference_sync": True})
    ref = rl.ReferenceLogic({"robot": ROBOT})
    sim = sl.SimWorldLogic({"robot": ROBOT})
    for _ in range(3):
        j = sim.joint_state()
        assert lg.on_joint_state(j, j.stamp_ns) is None                 # waits for its window
        out = lg.on_reference(ref.window(j.stamp_ns), j.stamp_ns)
        sim.advance(sim.effort_from(out.effort))
    j = sim.joint_state()
    assert lg.on_joint_state(j, j.stamp_ns) is None                     # no window: waits
    out = lg.on_joint_state(j, j.stamp_ns)                              # the world re-sent it
    assert out is not None and out.source == "mpc" and out.stamp_ns == j.stamp_ns
    sim.advance(sim.effort_from(out.effort))
    j = sim.joint_state()
    out = lg.on_joint_state(j, j.stamp_ns)                              # no waiting now
    assert out is not None and out.source == "mpc"
    sim.advance(sim.effort_from(out.effort))
    j = sim.joint_state()
    lg.on_reference(ref.window(j.stamp_ns - PERIOD_NS), j.stamp_ns)     # the reference is back
    assert lg.on_joint_state(j, j.stamp_ns) is None                     # waits for its window again
    assert lg.on_reference(ref.window(j.stamp_ns), j.stamp_ns).source == "mpc"
