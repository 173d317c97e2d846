"""Exact replay from any cut (issue 14): the controller records, with every tick's
SolveInput, the solver state the step started from (Schur duals, trust-region rho and its
factor, ADMM (z, y) and rho scale, AL multipliers, the controller's cap-out / re-seed
flags), and ``gato replay`` installs it, so a bag that starts mid-run reproduces every
command; a bag without it replays as before and says so.

- library: BSQP.get/set_solver_state and MPCController.carried_state / set_carried_state
  continue a run bit for bit (ADMM and AL limit mechanisms); bad states are refused;
- replay logic: ticks of the ROS-free controller logic, cut mid-run, re-solved with and
  without the state;
- the real tools: ``ros2 bag record -a`` started about 5 s into a free-running
  ``ros2 launch`` of sim.launch.yaml; the replay of that bag matches every command to
  1e-9 N*m.
"""
import os
import signal
import subprocess
import time
import uuid

import numpy as np
import pytest

import gato
from gato import controller_setup as setup
from conftest import import_or_skip, kill_tagged, processes_with_env, require_ros2_tools
from launch_graph import sigint_and_wait

ROBOT = "iiwa14"
Q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])


def _cfg(**over):
    schema = import_or_skip("gato_ros.params", "build the workspace (scripts/setup.sh)")
    return schema.resolve_config(schema.CONTROLLER, {"robot": ROBOT, **over}, "controller")


def _ref(ctrl, t):
    ee = ctrl.solver.ee_pos(Q0)
    k = np.arange(int(ctrl.solver.N)) * float(ctrl.solver.dt)
    r = np.zeros((k.size, 6))
    r[:, 0] = ee[0]
    r[:, 1] = ee[1] + 0.1 * np.sin(2 * np.pi * (t + k) / 4.0)
    r[:, 2] = ee[2] + 0.1 * np.sin(4 * np.pi * (t + k) / 4.0)
    return r.reshape(-1)


def _drive(ctrl, x, t0, n, dt=0.01):
    """n steps of ``ctrl`` on a crude double integrator (the plant does not matter here, the
    solver state does); returns (commands (n, nu), final x)."""
    us = []
    for i in range(n):
        r = ctrl.step(x, _ref(ctrl, t0 + i * dt), dt)
        u = np.asarray(r.u, dtype=np.float64)
        us.append(u)
        x = x + dt * np.r_[x[7:], np.clip(u, -20, 20) * 0.05]
    return np.array(us), x


@pytest.mark.parametrize("limits", ["admm", "al"])
def test_carried_state_continues_a_run_bit_for_bit(limits):
    cfg = _cfg(limits=limits)
    urdf = gato.robot_urdf(ROBOT)
    a = setup.build_controller(cfg, urdf=urdf)
    x = np.r_[Q0, np.zeros(7)]
    a.reset(x)
    a.warmup(x, _ref(a, 0.0))
    _, x = _drive(a, x, 0.0, 40)
    state, warm = a.carried_state(), a.xu_warm
    s = state["solver"]
    N, nx = int(a.solver.N), int(a.solver.nx)
    groups = a.solver.get_row_groups()
    assert s.shape == (1, N * nx + 3 + sum(2 + 4 * N * g["n_rows"] for g in groups))
    assert np.any(s[0, :N * nx] != 0), "the Schur duals are part of the state"
    assert np.any(s[0, N * nx + 3:] != 0), f"the {limits} row-group duals are part of the state"

    with_state = setup.build_controller(cfg, urdf=urdf)
    with_state.reset(x)
    with_state.set_warm_start(warm)
    with_state.set_carried_state(state)
    np.testing.assert_array_equal(with_state.carried_state()["solver"], s)
    without = setup.build_controller(cfg, urdf=urdf)
    without.reset(x)
    without.set_warm_start(warm)

    ua, _ = _drive(a, x, 0.4, 30)
    ub, _ = _drive(with_state, x, 0.4, 30)
    uc, _ = _drive(without, x, 0.4, 30)
    np.testing.assert_array_equal(ua, ub)          # exact continuation
    assert not np.array_equal(ua, uc)              # the state matters: without it the commands differ
    if limits == "admm":                           # (by far more than rounding: the ADMM (z, y))
        assert np.max(np.abs(ua - uc)) > 1e-6


def test_set_solver_state_refuses_bad_states_and_keeps_its_own():
    ctrl = setup.build_controller(_cfg(), urdf=gato.robot_urdf(ROBOT))
    x = np.r_[Q0, np.zeros(7)]
    ctrl.reset(x)
    ctrl.warmup(x, _ref(ctrl, 0.0))
    s = ctrl.solver
    good = s.get_solver_state()
    L = int(s.N) * int(s.nx)
    cases = {"shape": good[:, :-1], "nan": good.copy(), "rho": good.copy(), "flag": good.copy()}
    cases["nan"][0, 5] = np.nan
    cases["rho"][0, L] = 0.0
    cases["flag"][0, L + 3] = 2.0
    for what, bad in cases.items():
        with pytest.raises(ValueError, match="solver_state|solver state"):
            s.set_solver_state(bad)
        np.testing.assert_array_equal(s.get_solver_state(), good, err_msg=what)
    with pytest.raises(ValueError, match="state"):
        ctrl.set_carried_state({"capped_out": True})


def _logic_ticks(n=60):
    """Ticks of the ROS-free controller logic on a crude plant, as a bag would hold them."""
    cl = import_or_skip("gato_ros.controller_logic", "build the workspace (scripts/setup.sh)")
    from gato.replay.recording import Tick
    from gato_ros.types import JointStateSample, ReferenceWindow

    logic = cl.ControllerLogic({"robot": ROBOT, "reference_sync": False})
    x = np.r_[Q0, np.zeros(7)]
    ticks = []
    for i in range(n):
        t_ns = (i + 1) * 10_000_000
        w = ReferenceWindow(t_ns, 0.03125, _ref(logic.controller, i * 0.01).reshape(-1, 6)[:, :3])
        logic.on_reference(w, t_ns)
        out = logic.on_joint_state(JointStateSample(t_ns, list(logic.joint_names), x[:7].copy(), x[7:].copy()), t_ns)
        si = out.solve_input
        ticks.append(Tick(stamp_ns=si.stamp_ns, tick=si.tick, x=si.x_measured, reference=si.reference,
                          xu_warm=si.xu_warm, dt_elapsed=si.dt_elapsed or None, budget_s=None, reset=si.reset,
                          config=__import__("json").loads(si.config_json), u_recorded=out.effort,
                          solver_state=si.solver_state, capped_out=si.capped_out, force_reseed=si.force_reseed))
        x = x + 0.01 * np.r_[x[7:], np.clip(out.effort, -20, 20) * 0.05]
    return ticks


def test_replay_of_a_mid_run_cut_is_exact_with_the_state_and_says_so_without():
    from types import SimpleNamespace

    from gato.replay import replay_ticks

    ticks = _logic_ticks()
    full = replay_ticks(SimpleNamespace(ticks=ticks))
    assert np.nanmax(full.du) == 0.0 and not full.anchored.any() and not full.state_anchored.any()

    cut = ticks[25:]                                       # a bag that starts mid-run
    rp = replay_ticks(SimpleNamespace(ticks=cut))
    assert np.nanmax(rp.du) <= 1e-9, rp.du
    assert rp.state_anchored[0] and not rp.state_anchored[1:].any()   # installed once, then carried itself
    assert any("exact continuation" in n for n in rp.notes), rp.notes

    old = [SimpleNamespace(**{**t.__dict__, "solver_state": None}) for t in cut]   # an older controller's bag
    rp_old = replay_ticks(SimpleNamespace(ticks=old))
    assert np.nanmax(rp_old.du) > 1e-9
    assert any("no solver state" in n for n in rp_old.notes), rp_old.notes


def test_solve_input_message_carries_the_state():
    import_or_skip("gato_msgs.msg", "build the workspace (scripts/setup.sh)")
    from gato_ros import conversions as cv
    from gato_ros.types import SolveInput

    st = np.arange(2 * 5, dtype=np.float64).reshape(2, 5) + 0.5
    si = SolveInput(stamp_ns=12_000_000, tick=3, joint_names=["a"], x_measured=[1.0, 2.0], reference=np.zeros(6),
                    xu_warm=np.ones((1, 4)), solver_state=st, capped_out=True, force_reseed=False)
    m = cv.solve_input_to_msg(si)
    assert m.solver_state_rows == 2 and len(m.solver_state) == 10
    back = cv.solve_input_from_msg(m)
    np.testing.assert_array_equal(back.solver_state, st)
    assert back.capped_out and not back.force_reseed
    si.solver_state = None
    assert cv.solve_input_from_msg(cv.solve_input_to_msg(si)).solver_state is None   # not carried
    m.solver_state_rows = 3                                                           # 10 values, 3 rows
    with pytest.raises(ValueError, match="solver_state"):
        cv.solve_input_from_msg(m)


# ------------------------------------------------------------------ the real tools
def _sim_share():
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        return get_package_share_directory("gato_bringup")
    except PackageNotFoundError:
        pytest.skip("gato_bringup is not installed (scripts/setup.sh; source scripts/activate.sh)")


def _wait_for_ticks(n, timeout):
    """Wait until the controller has published ``n`` SolveInput messages (rclpy in this
    process, on the session's private domain)."""
    import rclpy
    from gato_msgs.msg import SolveInput

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node = rclpy.create_node("gato_test_wait_ticks", context=ctx)
        got = []
        node.create_subscription(SolveInput, "/gato_controller/solve_input", lambda m: got.append(1), 10)
        ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        end = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
        ex.shutdown()
        node.destroy_node()
        return len(got) >= n
    finally:
        rclpy.shutdown(context=ctx)


@pytest.mark.slow
@pytest.mark.ros
def test_ros2_bag_record_a_cut_of_a_free_running_bringup_replays_exactly(tmp_path, ros_env):
    """Acceptance: ``ros2 bag record -a`` started ~5 s into a free-running bringup (the
    real ``ros2 launch``); ``gato replay`` matches every recorded command to 1e-9 N*m."""
    require_ros2_tools()
    _sim_share()
    import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
    import_or_skip("gato_msgs.msg", "build the workspace (scripts/setup.sh)")
    from gato.replay import replay_bag

    marker = uuid.uuid4().hex
    env = {**ros_env, "GATO_TEST_MARKER": marker}
    launch = subprocess.Popen(["ros2", "launch", "gato_bringup", "sim.launch.yaml", "lockstep:=false",
                               "duration:=0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    bag = tmp_path / "cut_bag"
    rec = None
    try:
        if not _wait_for_ticks(10, 180.0):
            _, out = sigint_and_wait(launch, 60)
            pytest.fail(f"the bringup never solved a tick: {out[-3000:]}")
        time.sleep(5.0)                                   # the cut: ~5 s into the run
        rec = subprocess.Popen(["ros2", "bag", "record", "-a", "-o", str(bag)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
        time.sleep(8.0)                                   # discovery (~1-2 s) + a few seconds of ticks
        rc_rec, out_rec = sigint_and_wait(rec, 30)
        assert rc_rec == 0, out_rec[-3000:]
        rc_launch, out_launch = sigint_and_wait(launch, 60)
        time.sleep(1.0)
        left = processes_with_env("GATO_TEST_MARKER", marker)
    finally:
        for p in (launch, rec):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)
    assert rc_launch == 0, out_launch[-3000:]
    assert left == [], f"processes left behind: {left}"
    s = replay_bag(bag, tmp_path / "replay", tol=1e-9, worst=0, log=None)
    print({k: s.get(k) for k in ("ticks", "compared", "over_tolerance", "max_du", "anchored", "state_anchored",
                                 "problems")})
    assert s["ticks"] >= 30 and s["compared"] >= 30, s    # a few seconds of ticks (the pace of a loaded machine)
    assert s["matched"] and s["max_du"] <= 1e-9 and s["over_tolerance"] == 0, s
    # the recorded solver state is installed once, at the cut, and again only after a hole the
    # replay reports (ros2 bag record, its own reader depth, can lose ticks on a loaded machine:
    # CI saw 7 commands missing; the tick after a hole cannot continue from the replayed state)
    holes = [p for p in s["problems"] if "ticks missing" in p]
    assert s["solver_state"] == "recorded" and 1 <= s["state_anchored"] <= 1 + len(holes), s
    if not holes:
        assert s["state_anchored"] == 1, s
    assert any("exact continuation" in p for p in s["problems"]), s["problems"]

    # The same bag as an older controller would have written it (no solver state): today's
    # behaviour, an approximate replay from a reset and warm-up at the cut, said so.
    from gato.bagio import read_bag
    from gato.replay import load_recording, replay_ticks
    from gato.replay.recording import TOPICS

    rec = load_recording(read_bag(bag, list(TOPICS.values())))
    for tk in rec.ticks:
        tk.solver_state = None
    old = replay_ticks(rec)
    print(f"without the solver state: {int(np.sum(old.du > 1e-9))} of {old.du.size} commands beyond 1e-9 N*m, "
          f"max {np.nanmax(old.du):.3g} N*m")
    assert np.nanmax(old.du) > 1e-9 and any("no solver state" in n for n in old.notes), old.notes
