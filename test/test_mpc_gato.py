"""gato.MPC_GATO: the closed-loop simulation driver (worlds, pacing, figure-8 windowing, goal
switching with ramps and settle dwell, stats) and gato.plotting.plot_tracking.

Acceptance runs (fixed-dt pacing, CPU backend, SolverParams() defaults: ONE SQP iteration
per tick, B = 1, dt = 0.03125 s, sim_dt = 0.001 s) are marked slow; numbers measured on the
2-core dev machine, float64 (the runs are deterministic: fixed pacing + deterministic solves).
"""
import io
import math

import numpy as np
import pytest

import gato
from gato import tasks
from gato.mpc_gato import MPC_GATO
from gato.worlds import PinocchioWorld
from gato.references import ReferenceWindow

DT = 0.03125
IIWA = gato.robot_urdf("iiwa14")
INDY = gato.robot_urdf("indy7")
PER_TICK = ("timestamps", "solve_times", "step_wall_times", "goal_distances", "goal_distances_knot0",
            "ee_actual", "references", "joint_positions", "joint_velocities", "torques", "best_trajectory_id")


def models():
    import pinocchio as pin

    return {p: pin.buildModelFromUrdf(str(gato.robot_urdf(p))) for p in ("iiwa14", "indy7")}


MODELS = models()


def start(plant, q=None):
    q = tasks.Q_READY[plant] if q is None else q
    return np.concatenate([q, np.zeros(len(q))])


def line_traj(p0, T, step=(0.0, 0.002, 0.0)):
    """(6T,) EE trajectory moving 2 mm per sample along y from p0."""
    xyz = np.asarray(p0)[None, :] + np.arange(T)[:, None] * np.asarray(step)[None, :]
    return np.concatenate([xyz, np.zeros((T, 3))], axis=1).reshape(-1)


def check_tick_arrays(st, nq, nu):
    T = st["n_ticks"]
    assert T > 0
    for k in PER_TICK:
        assert len(st[k]) == T, k
    assert st["ee_actual"].shape == (T, 3) and st["references"].shape == (T, 3)
    assert st["joint_positions"].shape == (T, nq) and st["torques"].shape == (T, nu)
    assert st["ee_positions"] is st["ee_actual"]
    assert np.all(np.diff(st["timestamps"]) > 0)
    assert np.all(st["solve_times"] > 0) and np.all(st["step_wall_times"] > 0)
    assert st["mean_tracking_error"] == pytest.approx(np.mean(st["goal_distances_knot0"]))
    assert st["max_tracking_error"] == pytest.approx(np.max(st["goal_distances_knot0"]))
    assert st["deadline_s"] == DT
    assert st["deadline_misses"] == int(np.sum(st["step_wall_times"] > 1000 * DT))


# ------------------------------------------------------------------ construction
def test_unavailable_machinery_raises_a_clear_error():
    m = MODELS["iiwa14"]
    cases = [
        (dict(fc_config={"cost": 1.0}), "fc_config.*not available in this build"),
        (dict(wrench_id={}, batch_size=4), "wrench_id.*B = 1"),
        (dict(wrench_id="torque"), "wrench_id"),
        (dict(wrench_id={"mode": "mass"}), "mode"),
        (dict(fe_seed=-1), "fe_seed"),
        (dict(variant="fc"), "variant.*not available in this build"),
        (dict(variant="EH"), "variant.*not available in this build"),  # 'eh' runs: test_exact_hessian.py
        (dict(estimator="kalman"), "estimator"),
        (dict(world="bullet"), "world"),
        (dict(world=object()), "world"),
        (dict(world="mujoco", constant_f_ext=[0, 0, -10.0, 0, 0, 0]), "constant_f_ext"),
        (dict(world="mujoco", pendulum_config={"mass": 1.0, "length": 0.3}), "pendulum_config"),
        (dict(params=3), "params"),
        (dict(constant_f_ext=[1.0, 2.0]), "constant_f_ext"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            MPC_GATO(m, IIWA, **kw)
    with pytest.raises(ValueError, match="model"):
        MPC_GATO(MODELS["indy7"], IIWA)


def test_defaults_b1_fe_needs_no_estimator_and_best_of_batch_without_one():
    d = MPC_GATO(None, IIWA)
    assert d.N == 32 and d.dt == DT and d.batch_size == 1 and d.estimator == "fe"
    assert d.force_estimator is None and d.wrench_identifier is None
    assert d.solver.params.max_sqp_iters == 1 and d.controller.linsys == "bdsv"
    assert isinstance(d.world, PinocchioWorld) and d.plant_type == "iiwa14"
    b = MPC_GATO(MODELS["iiwa14"], IIWA, N=16, batch_size=2, estimator=None, params={"max_sqp_iters": 2})
    assert b.solver.batch_size == 2 and b.force_estimator is None and b.solver.params.max_sqp_iters == 2
    x0 = start("iiwa14")
    _, st = b.run_mpc_goals(x0, [b.solver.ee_pos(x0[:7]) + [0, 0.05, 0]], goal_timeout=0.2,
                            goal_threshold=1e-6, pace_by_solve_time=False)
    assert st["n_ticks"] == 6 and set(np.unique(st["best_trajectory_id"])) <= {0, 1}
    assert st["goal_outcomes"] == ["timeout"]


def test_bad_run_arguments_raise_naming_the_argument():
    d = MPC_GATO(None, IIWA, N=8)
    x0 = start("iiwa14")
    traj = line_traj(d.solver.ee_pos(x0[:7]), 40)
    with pytest.raises(ValueError, match="x_start"):
        d.run_mpc_fig8(x0[:7], traj)
    with pytest.raises(ValueError, match="x_start"):
        d.run_mpc_fig8(np.r_[x0[:-1], np.nan], traj)
    with pytest.raises(ValueError, match="fig8_traj"):
        d.run_mpc_fig8(x0, traj[:-1])
    with pytest.raises(ValueError, match="fig8_traj"):
        d.run_mpc_fig8(x0, traj[:6 * 8])  # shorter than N + 1 samples
    with pytest.raises(ValueError, match="sim_dt"):
        d.run_mpc_fig8(x0, traj, sim_dt=0.1)
    with pytest.raises(ValueError, match="goals"):
        d.run_mpc_goals(x0, [[0.5, 0.0]])
    with pytest.raises(ValueError, match="goals"):
        d.run_mpc_goals(x0, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="velocity_norm"):
        d.run_mpc_goals(x0, [[0.5, 0, 0.5]], velocity_norm="L1")
    with pytest.raises(ValueError, match="settle_time"):
        d.run_mpc_goals(x0, [[0.5, 0, 0.5]], settle_time=-1.0)


# ------------------------------------------------------------------ pacing and windows
class RecordingWorld:
    """A custom world: PinocchioWorld physics, recording every substep's torque and sim_dt."""

    def __init__(self):
        self.inner = PinocchioWorld(IIWA)
        self.nq = 7
        self.calls = []

    def step(self, q, dq, u, sim_dt):
        self.calls.append((np.array(u), sim_dt))
        return self.inner.step(q, dq, u, sim_dt)


def _flat(ref):
    """The (6N,) solver layout of what the controller was handed (the planner passes its window)."""
    return ref.solver_layout() if isinstance(ref, ReferenceWindow) else np.array(ref)


def test_fixed_pacing_substeps_windows_and_knot0_vs_knot1():
    """Fixed pacing: tick k is measured at t = (k + 1) dt exactly, after floor((k + 1) dt / sim_dt)
    substeps in all (31, 31, 31, 32, ...: the remainder carries), all playing the plan's u_0;
    its window starts at reference sample k + 1; goal_distances is the distance to window knot 1
    and goal_distances_knot0 to knot 0."""
    w = RecordingWorld()
    d = MPC_GATO(None, IIWA, N=8, world=w, verbose=False)
    x0 = start("iiwa14")
    traj = line_traj(d.solver.ee_pos(x0[:7]), 60)
    seen = []
    step = d.controller.step

    def spy(x, ref, **kw):
        seen.append(_flat(ref))
        return step(x, ref, **kw)

    d.controller.step = spy
    _, st = d.run_mpc_fig8(x0, traj, sim_time=0.3, pace_by_solve_time=False)
    check_tick_arrays(st, 7, 7)
    T = st["n_ticks"]
    assert T == 10 and st["stop_reason"] == "sim_time" and st["completed"]  # ticks at 1..10 dt >= 0.3 s
    assert np.allclose(st["timestamps"], DT * np.arange(1, T + 1), rtol=0, atol=1e-12)
    assert len(w.calls) == math.floor(T * DT / 0.001 + 1e-9) == 312
    assert all(dt == 0.001 for _, dt in w.calls)
    ref = traj.reshape(-1, 6)
    for k in range(T):
        assert np.array_equal(seen[k], traj[6 * (k + 1):6 * (k + 1 + 8)])
        assert np.array_equal(st["references"][k], ref[k + 1, :3])
        ee = st["ee_actual"][k]
        assert st["goal_distances_knot0"][k] == pytest.approx(np.linalg.norm(ee - ref[k + 1, :3]), abs=1e-12)
        assert st["goal_distances"][k] == pytest.approx(np.linalg.norm(ee - ref[k + 2, :3]), abs=1e-12)
    # the torque recorded for tick k is what the following substeps played (plan knot 0, clamped)
    n_before = [math.floor((k + 1) * DT / 0.001 + 1e-9) for k in range(T)]
    for k in range(T - 1):
        for i in range(n_before[k], n_before[k + 1]):
            assert np.array_equal(w.calls[i][0], st["torques"][k])
    assert np.all(np.abs(st["torques"]) <= d.u_limit)


def test_observe_first_holds_the_start_pose_for_the_first_period():
    """observe_first=True: the 31 substeps of the first period play the nominal model's
    JointHold of the start pose (gato.safety, OBSERVE_HOLD_HZ), re-evaluated every substep from
    the state, instead of the warm-up plan; from the second period on the planner's plans play
    as before. False plays the warm-up plan's knot 0 from t = 0. None (default): on exactly
    when the hypotheses take a sensor feed (wrench_id, wid, swing), off for the fe sampler and
    for no hypotheses. Anything else is refused by name."""
    from gato.safety import JointHold

    x0 = start("iiwa14")
    runs = {}
    for obs in (True, False):
        w = RecordingWorld()
        d = MPC_GATO(None, IIWA, N=8, world=w, verbose=False, observe_first=obs)
        goal = d.solver.ee_pos(x0[:7]) + np.array([0.0, 0.1, 0.0])
        _, st = d.run_mpc_goals(x0, goal[None, :], goal_timeout=0.1, pace_by_solve_time=False)
        runs[obs] = (w, d, st)
    w, d, _ = runs[True]
    hold = JointHold(d.solver.model, MPC_GATO.OBSERVE_HOLD_HZ, d.u_limit)
    hold.target = x0[:7]
    q, dq = x0[:7].copy(), x0[7:].copy()
    for i in range(31):
        u, _ = w.calls[i]
        assert np.allclose(u, hold(q, dq), rtol=0, atol=1e-9), i
        q, dq = w.inner.step(q, dq, u, 0.001)
    w_off, _, st_off = runs[False]
    assert not np.allclose(w_off.calls[0][0], w.calls[0][0])
    assert np.array_equal(w_off.calls[0][0], w_off.calls[30][0])  # the warm-up plan's knot 0, held
    assert len(w.calls) == len(w_off.calls)

    assert MPC_GATO(None, IIWA, N=8, verbose=False).observes_first() is False  # fe (B = 1: no batch)
    assert MPC_GATO(None, IIWA, N=8, batch_size=4, verbose=False).observes_first() is False  # fe sampler
    assert MPC_GATO(None, IIWA, N=8, wrench_id=True, verbose=False).observes_first() is True
    assert MPC_GATO(None, IIWA, N=8, batch_size=4, estimator="wid", verbose=False).observes_first() is True
    assert MPC_GATO(None, IIWA, N=8, wrench_id=True, verbose=False, observe_first=False).observes_first() is False
    with pytest.raises(ValueError, match="observe_first"):
        MPC_GATO(None, IIWA, N=8, observe_first="yes")


def test_reference_end_stops_the_run_and_full_stats():
    d = MPC_GATO(None, IIWA, N=8, verbose=False, track_full_stats=True)
    x0 = start("iiwa14")
    traj = line_traj(d.solver.ee_pos(x0[:7]), 20)  # windows exist for samples 0..12
    _, st = d.run_mpc_fig8(x0, traj, sim_time=5.0, pace_by_solve_time=False)
    assert st["stop_reason"] == "reference_end" and not st["completed"]
    assert st["n_ticks"] == 12  # ticks at samples 1..12; sample 13 has no full window
    assert np.array_equal(st["sqp_iters"], np.ones(12, dtype=int))  # one SQP iteration per tick
    assert st["linsys"] == ["bdsv"] * 12 and len(st["pcg_iters"]) == 12
    assert st["pred_err"].shape == (12,) and np.all(st["pred_err"] >= 0) and not np.any(st["step_reseeded"])
    assert st["config"]["params"]["max_sqp_iters"] == 1 and st["config"]["sim_dt"] == 0.001


def test_slow_solve_plays_the_following_knots():
    """When a (wall-clock) period spans several knots, each substep plays the control of the
    knot it falls in, capped at the plan's last control."""
    w = RecordingWorld()
    d = MPC_GATO(None, IIWA, N=4, world=w, verbose=False)
    nx, nu = 14, 7
    xu = np.zeros(4 * nx + 3 * nu)
    for k in range(3):
        xu[nx + k * (nx + nu):nx + k * (nx + nu) + nu] = k + 1.0
    clock = {"t": 0.0, "owed": 0.0, "n": 0, "periods": 0, "sum": 0.0, "fixed": False}
    q, dq = tasks.Q_READY["iiwa14"], np.zeros(7)
    d._play(xu, q, dq, 4.2 * DT, 0.001, clock)  # 131 substeps over 4.2 knots
    played = [float(u[0]) for u, _ in w.calls]
    assert len(played) == 131
    assert played[:32] == [1.0] * 32 and played[32:63] == [2.0] * 31 and played[63:] == [3.0] * 68
    assert clock["t"] == pytest.approx(4.2 * DT) and clock["owed"] == pytest.approx(4.2 * DT - 0.131)


def test_wall_clock_pacing_replans_at_the_solve_rate():
    """pace_by_solve_time=True: the sim advances by each step's measured wall time, so a
    millisecond-scale CPU solve re-plans many times per dt and the clock is the running sum."""
    d = MPC_GATO(None, IIWA, N=8, verbose=False)
    x0 = start("iiwa14")
    traj = line_traj(d.solver.ee_pos(x0[:7]), 80)
    _, st = d.run_mpc_fig8(x0, traj, sim_time=0.2, pace_by_solve_time=True)
    check_tick_arrays(st, 7, 7)
    assert st["n_ticks"] > 0.2 / DT  # more solves than the fixed-dt run's 7
    assert st["config"]["pace_by_solve_time"] is True
    assert st["sim_time"] >= 0.2


# ------------------------------------------------------------------ goals semantics
def test_goal_ramp_is_minimum_jerk_knot_by_knot():
    """Window knot j at tick time t targets p_s + (g - p_s) * mj((t + j dt - t_s) / ramp), the
    minimum-jerk blend from the EE position at the switch; the gate still tests the goal."""
    d = MPC_GATO(None, IIWA, N=16, verbose=False)
    x0 = start("iiwa14")
    p_s = d.solver.ee_pos(x0[:7])
    goal = p_s + np.array([0.0, 0.15, -0.05])
    seen = []
    step = d.controller.step
    d.controller.step = lambda x, ref, **kw: (seen.append(_flat(ref)), step(x, ref, **kw))[1]
    ramp = 0.5
    _, st = d.run_mpc_goals(x0, [goal], goal_timeout=0.4, goal_ramp=ramp, goal_threshold=1e-4,
                            pace_by_solve_time=False)

    def mj(s):
        s = np.clip(s, 0, 1)
        return 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5

    for t, win in zip(st["timestamps"], seen):
        tau = t + DT * np.arange(16)
        want = p_s[None, :] + mj(tau / ramp)[:, None] * (goal - p_s)[None, :]
        assert np.allclose(win.reshape(16, 6)[:, :3], want, atol=1e-12)
        assert not np.any(win.reshape(16, 6)[:, 3:])
    assert np.allclose(st["references"], [w[:3] for w in seen])
    assert np.allclose(st["goal_distances"], np.linalg.norm(st["ee_actual"] - goal, axis=1))
    assert st["goal_outcomes"] == ["timeout"] and st["time_to_all_reached"] is None  # 0.4 s < ramp + travel
    assert st["goal_durations"][0] == pytest.approx(13 * DT)  # first tick at or past 0.4 s


def test_step_reference_targets_the_goal_at_every_knot_and_switches_goals():
    # Goal-switching logic only: unconstrained, so the return from the unreachable goal
    # is not slowed by the (default) joint-velocity limit rows. Without them the reach for the
    # unreachable goal swings a joint past 3x its velocity limit, which the runaway guard would
    # (rightly) stop: off here, since this test is about the switching.
    d = MPC_GATO(None, IIWA, N=8, verbose=False, limits="off", runaway_factor=None)
    x0 = start("iiwa14")
    p0 = d.solver.ee_pos(x0[:7])
    goals = [p0 + [0, 0.05, 0], [5.0, 5.0, 5.0], p0]  # the middle one is out of reach
    seen = []
    step = d.controller.step
    d.controller.step = lambda x, ref, **kw: (seen.append(_flat(ref)), step(x, ref, **kw))[1]
    _, st = d.run_mpc_goals(x0, goals, goal_timeout=0.5, pace_by_solve_time=False, velocity_norm=np.inf,
                            velocity_threshold=0.5)
    check_tick_arrays(st, 7, 7)
    assert st["goal_outcomes"] == ["reached", "timeout", "reached"]
    assert not st["all_reached"] and st["goals_reached"] == 2 and st["time_to_all_reached"] is None
    t_r0 = st["goal_reached_times"][0]
    assert st["goal_start_times"] == [0.0, t_r0, t_r0 + 16 * DT]  # timeout 0.5 s = 16 ticks
    assert st["goal_reached_times"][1] is None and st["goal_durations"][1] == pytest.approx(16 * DT)
    assert st["stop_reason"] == "goals_done"
    switches = np.isclose(st["timestamps"][:, None], np.array(st["goal_start_times"][1:])[None, :]).any(axis=1)
    assert switches.sum() == 2
    for g, switch, win in zip(st["active_goal"], switches, seen):
        # the tick that switches goals already solves against the next goal
        assert np.allclose(win.reshape(8, 6)[:, :3], np.asarray(goals[g + int(switch)])[None, :])
    # the velocity gate uses the requested norm order
    assert np.allclose(st["velocity_norms"], np.abs(st["joint_velocities"]).max(axis=1))


def test_settle_time_dwell_delays_the_reach_to_the_end_of_the_dwell():
    """Every reach needs the distance AND velocity gates to hold at every tick of the dwell,
    and the reach time is the end of the dwell (settle = 0.2 s: 7 ticks of 0.03125 s)."""
    m = MODELS["iiwa14"]
    sc = tasks.pickplace_scenarios(m, "iiwa14", 1, seed=0)[0]
    runs = {}
    for settle in (0.0, 0.2):
        d = MPC_GATO(m, IIWA, verbose=False)
        _, runs[settle] = d.run_mpc_goals(np.r_[sc["q0"], np.zeros(7)], sc["goals"], goal_ramp=sc["ramp"],
                                          pace_by_solve_time=False, settle_time=settle)
    st = runs[0.2]
    assert st["all_reached"] and runs[0.0]["all_reached"]
    assert st["time_to_all_reached"] > runs[0.0]["time_to_all_reached"]
    t = st["timestamps"]
    gate = (st["goal_distances"] < 0.05) & (st["velocity_norms"] < 1.0)
    for i, tr in enumerate(st["goal_reached_times"][:-1]):  # the last reach tick records no row
        # 0.2 s = 6.4 ticks: the dwell spans the 8 ticks tr - 7 dt .. tr, every one passing the gates
        rows = (st["active_goal"] == i) & (t >= tr - 7 * DT - 1e-9) & (t <= tr + 1e-9)
        assert rows.sum() == 8 and np.all(gate[rows])
        before = np.flatnonzero((st["active_goal"] == i) & (t < tr - 7 * DT - 1e-9))
        assert before.size == 0 or not gate[before[-1]]  # else the dwell, and the reach, came earlier


def test_constant_wrench_and_pendulum_live_in_the_world_only():
    """The unmodelled -z wrench sags the held EE; the pendulum payload loads the arm; the solver
    is never told (its external-wrench band stays zero)."""
    m = MODELS["iiwa14"]
    x0 = start("iiwa14")
    sag = {}
    for name, kw in (("free", {}), ("wrench", dict(constant_f_ext=[0, 0, -40.0, 0, 0, 0])),
                     ("pendulum", dict(pendulum_config={"mass": 4.0, "length": 0.3}))):
        d = MPC_GATO(m, IIWA, N=16, verbose=False, **kw)
        p0 = d.solver.ee_pos(x0[:7])
        _, st = d.run_mpc_goals(x0, [p0], goal_timeout=0.6, goal_threshold=1e-6, pace_by_solve_time=False)
        sag[name] = p0[2] - st["ee_actual"][-1][2]
        assert st["config"]["world"]["kind"] == "pinocchio_rk4"
    # measured after 0.6 s: free -8.0 mm (the cold-start transient lifts the EE), 40 N: +41.3 mm,
    # 4 kg pendulum: +41.2 mm
    assert abs(sag["free"]) < 0.015
    assert sag["wrench"] > sag["free"] + 0.03 and sag["pendulum"] > sag["free"] + 0.03
    d = MPC_GATO(m, IIWA, N=16, verbose=False)
    d.setup_external_forces([0, 5.0, 0, 0, 0, 0])
    assert np.array_equal(d.world.constant_f_ext, [0, 5.0, 0, 0, 0, 0])
    d.setup_external_forces(None)
    assert d.world.constant_f_ext is None and not np.any(d.constant_f_ext_world)


def test_progress_output_verbose_flag(capsys):
    x0 = start("iiwa14")
    quiet = MPC_GATO(None, IIWA, N=8)  # verbose=None: on only for runs > 2 s of sim time
    traj = line_traj(quiet.solver.ee_pos(x0[:7]), 120, step=(0.0, 0.0005, 0.0))
    quiet.run_mpc_fig8(x0, traj, sim_time=1.0, pace_by_solve_time=False)
    assert capsys.readouterr().out == ""
    quiet.run_mpc_fig8(x0, traj, sim_time=2.5, pace_by_solve_time=False)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[MPC_GATO fig8]") and out[-1].startswith("[MPC_GATO fig8] done")
    assert sum(" t=" in line for line in out) == 2  # one line per simulated second
    loud = MPC_GATO(None, IIWA, N=8, verbose=True)
    loud.run_mpc_fig8(x0, traj, sim_time=0.5, pace_by_solve_time=False)
    assert "done" in capsys.readouterr().out
    silent = MPC_GATO(None, IIWA, N=8, verbose=False)
    silent.run_mpc_fig8(x0, traj, sim_time=2.5, pace_by_solve_time=False)
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------------ plotting
def test_plot_tracking_writes_a_png(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    d = MPC_GATO(None, IIWA, N=16, verbose=False)
    sc = tasks.fig8_scenarios(MODELS["iiwa14"], "iiwa14", 1, seed=0, dt=DT, ratio_range=(0.3, 0.5))[0]
    traj, _ = tasks.fig8_reference(sc, 16)
    _, st = d.run_mpc_fig8(np.r_[sc["q0"], np.zeros(7)], traj, sim_time=2.0, pace_by_solve_time=False)
    from gato.plotting import plot_tracking

    out = plot_tracking(st, tmp_path / "sub" / "fig8.png", title="iiwa14 figure-8")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert matplotlib.get_backend() == backend  # pyplot / the global backend untouched
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    assert img.size[0] >= 1000 and img.size[1] >= 700
    with pytest.raises(ValueError, match="stats"):
        plot_tracking({"timestamps": []}, tmp_path / "x.png")


# ------------------------------------------------------------------ acceptance (closed loop)
@pytest.mark.slow
def test_indy7_figure8_n64_tracks_within_3cm():
    """indy7, N = 64, B = 1, pinocchio RK4 world, fixed-dt pacing, one SQP iteration per tick:
    two periods of each of the first two figure-8s of fig8_scenarios(seed=0, dt=0.03125,
    ratio_range=(0.3, 0.5)) (demanded peak joint speed 30-50 % of the URDF limit).
    Measured: scenario 0 (ratio 0.45, period 2.18 s): mean 25.3 mm (knot 1: 28.5 mm), max 42.4 mm;
    scenario 1 (ratio 0.32, period 3.74 s): mean 14.4 mm (knot 1: 16.4 mm), max 26.0 mm.
    (Faster paths track worse under the default qd_cost = 0.01: ratio 0.66 gives 39 mm.)"""
    m = MODELS["indy7"]
    measured = []
    for sc in tasks.fig8_scenarios(m, "indy7", 2, seed=0, dt=DT, ratio_range=(0.3, 0.5)):
        traj, sim_time = tasks.fig8_reference(sc, 64)
        d = MPC_GATO(m, INDY, N=64, dt=DT, verbose=False)
        _, st = d.run_mpc_fig8(np.r_[sc["q0"], np.zeros(6)], traj, sim_time=sim_time, pace_by_solve_time=False)
        check_tick_arrays(st, 6, 6)
        assert st["completed"] and st["n_ticks"] == math.ceil(sim_time / DT - 1e-9)
        assert np.all(np.abs(st["torques"]) <= d.u_limit)
        measured.append((st["mean_tracking_error"], st["mean_goal_distance"], st["max_tracking_error"]))
    (m0, g0, x0), (m1, g1, x1) = measured
    assert m0 <= 0.03 and m1 <= 0.03
    assert g0 <= 0.03 and g1 <= 0.03
    assert m0 == pytest.approx(0.0253, abs=0.003) and m1 == pytest.approx(0.0144, abs=0.003)
    assert x0 < 0.05 and x1 < 0.035


@pytest.mark.slow
def test_iiwa14_figure8_in_mujoco_n32_tracks_within_3cm():
    """iiwa14, N = 32, B = 1, MuJoCoWorld (an independent simulator), fixed-dt pacing, one SQP
    iteration per tick: two periods of the first two figure-8s of fig8_scenarios(seed=0,
    dt=0.03125, ratio_range=(0.3, 0.5)).
    Measured: scenario 0 (ratio 0.45, period 4.75 s): mean 15.7 mm (knot 1: 18.0 mm), max 26.7 mm;
    scenario 1 (ratio 0.43, period 7.10 s): mean 17.6 mm (knot 1: 19.5 mm), max 38.8 mm."""
    m = MODELS["iiwa14"]
    measured = []
    for sc in tasks.fig8_scenarios(m, "iiwa14", 2, seed=0, dt=DT, ratio_range=(0.3, 0.5)):
        traj, sim_time = tasks.fig8_reference(sc, 32)
        d = MPC_GATO(m, IIWA, N=32, dt=DT, world="mujoco", verbose=False)
        _, st = d.run_mpc_fig8(np.r_[sc["q0"], np.zeros(7)], traj, sim_time=sim_time, pace_by_solve_time=False)
        check_tick_arrays(st, 7, 7)
        assert st["config"]["world"]["kind"] == "mujoco" and st["completed"]
        measured.append((st["mean_tracking_error"], st["mean_goal_distance"], st["max_tracking_error"]))
    for mean0, mean1, mx in measured:
        assert mean0 <= 0.03 and mean1 <= 0.03 and mx < 0.05
    assert measured[0][0] == pytest.approx(0.0157, abs=0.003)
    assert measured[1][0] == pytest.approx(0.0176, abs=0.003)


@pytest.mark.slow
def test_iiwa14_pickplace_reaches_every_goal():
    """iiwa14, N = 32, B = 1, pinocchio RK4 world, fixed-dt pacing, one SQP iteration per tick,
    the paper's gates (0.05 m, L1 |dq| < 1 rad/s, no dwell): the first three scenarios of
    pickplace_scenarios(seed=0) (3 goals each; ramps 0.0, 1.2, 0.6 s).
    Measured reach times [s]: [0.250, 0.906, 1.406], [0.656, 1.531, 2.344], [0.281, 0.781, 1.250]."""
    m = MODELS["iiwa14"]
    scs = tasks.pickplace_scenarios(m, "iiwa14", 3, seed=0)
    assert [sc["ramp"] for sc in scs] == [0.0, 1.2, 0.6]
    want = [[0.25, 0.90625, 1.40625], [0.65625, 1.53125, 2.34375], [0.28125, 0.78125, 1.25]]
    for sc, times in zip(scs, want):
        d = MPC_GATO(m, IIWA, verbose=False)
        _, st = d.run_mpc_goals(np.r_[sc["q0"], np.zeros(7)], sc["goals"], goal_ramp=sc["ramp"],
                                pace_by_solve_time=False)
        assert st["goal_outcomes"] == ["reached"] * 3 and st["all_reached"], sc["id"]
        assert st["time_to_all_reached"] == max(st["goal_reached_times"])
        assert np.allclose(st["goal_reached_times"], times, atol=2 * DT)
        assert np.all(np.abs(st["torques"]) <= d.u_limit)
        check_tick_arrays(st, 7, 7)
