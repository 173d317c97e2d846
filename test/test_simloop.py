"""gato.simloop: the one simulation loop. Every registered planner through it in both worlds;
the driver (MPC_GATO), the bare loop and the gym environment give the same command sequence
for the same seeded scenario; disturbances; divergence; the run record, its summary and plot."""
import math

import numpy as np
import pytest

import gato
from gato import planner as P
from gato import references as R
from gato import simloop as S
from gato import tasks
from gato.bsqp_planner import BSQPPlanner
from gato.mpc_gato import MPC_GATO
from gato.safety import GravityHold

URDF = gato.robot_urdf("iiwa14")
Q0 = tasks.Q_READY["iiwa14"]
#: Small configurations for the loop test; a planner without an entry runs its defaults.
FAST = {"bsqp": {"N": 16}}


def ee0():
    return S.EEKinematics(URDF, "EE").ee_pos(Q0)


@pytest.mark.parametrize("world", ["pinocchio", "mujoco"])
@pytest.mark.parametrize("name", P.planners())
def test_every_registered_planner_runs_the_one_loop_in_both_worlds(name, world):
    """Each planner holds the EE at its start position for 0.3 s in lockstep: one row per
    control period, finite torques within the effort limits, the EE within 3 cm."""
    planner = P.make(name, "iiwa14", FAST.get(name))
    kin = S.EEKinematics(URDF, "EE")
    w = S.make_world(world, URDF, ee_frame="EE", timestep=0.001)
    lim = np.array(kin.model.effortLimit)
    sim = S.Simulation(w, Q0, sim_dt=0.001, kinematics=kin, effort_limit=lim)
    task = S.TrackingTask(R.Hold(kin.ee_pos(Q0)), planner.N, planner.dt, 0.3)
    rec = S.run_closed_loop(sim, planner, task)
    st = rec.stats()
    assert rec.stop_reason == "sim_time" and st["n_ticks"] == math.ceil(0.3 / planner.dt - 1e-9)
    assert np.all(np.isfinite(st["torques"])) and np.all(np.abs(st["torques"]) <= lim)
    assert st["max_tracking_error"] < 0.03, (name, world, st["max_tracking_error"])
    assert len(rec.planner_stats) == st["n_ticks"] and all(isinstance(s, P.PlannerStats) for s in rec.planner_stats)
    assert np.allclose(st["timestamps"], planner.dt * np.arange(1, st["n_ticks"] + 1), atol=1e-12)


def test_driver_loop_and_env_give_identical_command_sequences():
    """One seeded figure-8 scenario (dt = 0.03 s = 30 substeps of 1 ms), three front ends:
    MPC_GATO.run_mpc_fig8, run_closed_loop with the bsqp planner, and ArmTrackEnv stepped by
    the same planner protocol (warm-up plan first, then one step per period)."""
    N, dt, dur = 16, 0.03, 0.6
    sc = tasks.fig8_scenarios(S.EEKinematics(URDF, "EE").model, "iiwa14", 1, seed=3, dt=dt,
                              ratio_range=(0.4, 0.5))[0]
    flat, _ = tasks.fig8_reference(sc, N)
    x0 = np.r_[sc["q0"], np.zeros(7)]
    drv = MPC_GATO(None, URDF, N=N, dt=dt, verbose=False)
    _, st = drv.run_mpc_fig8(x0, flat, sim_time=dur, pace_by_solve_time=False)
    assert isinstance(drv.last_record, S.RunRecord) and len(drv.last_record.planner_stats) == st["n_ticks"]
    ref = R.SampledTrajectory(flat.reshape(-1, 6)[:, :3], dt)
    planner = BSQPPlanner("iiwa14", {"N": N, "dt": dt})
    sim = S.Simulation(S.make_world("pinocchio", URDF), x0[:7], sim_dt=0.001, ee_pos=planner.solver.ee_pos,
                       effort_limit=planner.solver.limits["u"])
    rec = S.run_closed_loop(sim, planner, S.TrackingTask(ref, N, dt, dur)).stats()
    import gato.envs

    env = gato.envs.ArmTrackEnv("iiwa14", q0=sc["q0"], ctrl_dt=dt, sim_dt=0.001)
    p3 = BSQPPlanner("iiwa14", {"N": N, "dt": dt})
    obs, _ = env.reset(seed=0)
    p3.reset(obs)
    action, env_torques = p3.warmup(obs, ref.window(0.0, N, dt)).control(0), []
    while env.t < dur - 1e-9:
        obs, *_ = env.step(action)
        action = p3.step(obs, ref.window(env.t, N, dt), dt_elapsed=30 * 0.001).u
        env_torques.append(np.clip(action, -env.effort_limit, env.effort_limit))
    assert st["n_ticks"] == rec["n_ticks"] == len(env_torques) == 20
    assert np.array_equal(st["torques"], rec["torques"]) and np.array_equal(rec["torques"], env_torques)
    assert np.array_equal(st["ee_actual"], rec["ee_actual"])


def _hold_run(world_kind, disturbances, seconds=0.2, q0=Q0):
    """The arm under gravity compensation at q0 for `seconds`: (EE positions per period, sim)."""
    kin = S.EEKinematics(URDF, "EE")
    world = S.make_world(world_kind, URDF, ee_frame="EE", timestep=0.001, disturbances=disturbances)
    sim = S.Simulation(world, q0, sim_dt=0.001, kinematics=kin, disturbances=disturbances)
    u = S.HoldTorque(GravityHold(kin.model)(q0))
    out = []
    for _ in range(int(round(seconds / 0.01))):
        sim.advance(u, 0.01)
        out.append(sim.ee_pos())
    return np.array(out), sim


def test_disturbances_wrench_payload_impulse_mass_error_pendulum():
    free, _ = _hold_run("pinocchio", [])
    native, _ = _hold_run("pinocchio", [S.ConstantWrench([0, 0, -30.0, 0, 0, 0])])
    jac, _ = _hold_run("pinocchio", [S.ConstantWrench([0, 0, -30.0, 0, 0, 0], via="jacobian")])
    assert native[-1, 2] < free[-1, 2] - 0.005                       # the wrench sags the held EE
    assert np.max(np.abs(native - jac)) < 2e-4                         # RK4-stage vs per-substep J^T w
    payload, _ = _hold_run("pinocchio", [S.PointPayload(30.0 / S.GRAVITY)])
    assert np.array_equal(payload, jac)                                # a point mass is its weight, J^T w
    mj_free, _ = _hold_run("mujoco", [])
    mj, _ = _hold_run("mujoco", [S.ConstantWrench([0, 0, -30.0, 0, 0, 0])])   # no native support: J^T w
    assert mj[-1, 2] < mj_free[-1, 2] - 0.005
    kick, _ = _hold_run("pinocchio", [S.Impulse(0.1, 0.02, [0, 40.0, 0, 0, 0, 0])])
    assert np.array_equal(kick[:10], free[:10]) and kick[-1, 1] > free[-1, 1] + 1e-3   # nothing before t_start
    heavy, sim = _hold_run("pinocchio", [S.LinkMassError({"L4": 1.5})])
    assert sim.world.params["mass_scale"] == {"L4": 1.5} and heavy[-1, 2] < free[-1, 2] - 1e-3
    pend, sim = _hold_run("pinocchio", [S.PendulumPayload(2.0, 0.3)])
    assert sim.world.pendulum_state is not None and pend[-1, 2] < free[-1, 2] - 1e-3
    with pytest.raises(ValueError, match="pendulum"):
        S.make_world("mujoco", URDF, disturbances=[S.PendulumPayload(2.0, 0.3)])
    with pytest.raises(ValueError, match="world"):
        S.make_world("bullet", URDF)
    with pytest.raises(ValueError, match="wrench"):
        S.ConstantWrench([1.0, 2.0])
    with pytest.raises(ValueError, match="kinematics"):
        S.Simulation(S.make_world("pinocchio", URDF), Q0, sim_dt=0.001, disturbances=[S.Impulse(0, 1, np.ones(6))])


def test_zero_order_hold_plays_plan_knots_and_carries_the_remainder():
    """A period spanning several knots plays knot after knot; 4 periods of 0.03125 s at 1 ms
    are 31, 31, 31, 32 substeps with the remainder carried, 31 each without."""
    calls = []

    class Rec:
        nq, nv = 7, 7

        def step(self, q, dq, u, sim_dt):
            calls.append(float(u[0]))
            return q, dq

        def reset(self):
            pass

    nx, nu = 14, 7
    xu = np.zeros(4 * nx + 3 * nu)
    for k in range(3):
        xu[nx + k * (nx + nu)] = k + 1.0
    plan = P.Plan(xu, nx, nu, nu, 4, 0.03125)
    sim = S.Simulation(Rec(), Q0, sim_dt=0.001)
    assert sim.advance(S.PlanPlayback(plan), 4.2 * 0.03125, fixed=False) == 131
    assert calls[:32] == [1.0] * 32 and calls[32:63] == [2.0] * 31 and calls[63:] == [3.0] * 68
    sim.reset(Q0)
    assert [sim.advance(S.HoldTorque(np.zeros(7)), 0.03125) for _ in range(4)] == [31, 31, 31, 32]
    assert sim.t == 4 * 0.03125
    flat = S.Simulation(Rec(), Q0, sim_dt=0.001, carry_remainder=False)
    assert [flat.advance(S.HoldTorque(np.zeros(7)), 0.03125) for _ in range(4)] == [31] * 4


def test_divergence_stops_the_run_with_an_event():
    planner = BSQPPlanner("iiwa14", {"N": 8})
    kin = S.EEKinematics(URDF, "EE")
    blow = [S.ConstantWrench([1e300, 0, 0, 0, 0, 0])]
    sim = S.Simulation(S.make_world("pinocchio", URDF, ee_frame="EE", disturbances=blow), Q0, sim_dt=0.001,
                       kinematics=kin)
    with np.errstate(all="ignore"):
        rec = S.run_closed_loop(sim, planner, S.TrackingTask(R.Hold(kin.ee_pos(Q0)), 8, planner.dt, 1.0))
    assert rec.stop_reason == "diverged" and rec.events[-1][1] == "diverged"
    assert sim.diverged and np.all(np.isnan(sim.q)) and rec.stats()["n_ticks"] == 0


def test_first_command_plays_the_first_period_and_is_checked():
    """run_closed_loop(first_command=...): the world plays it for the first period (here a held
    gravity torque: every one of the first 31 substeps gets exactly it) and the planner's plans
    from the second on; anything without torque() is refused by name."""
    planner = BSQPPlanner("iiwa14", {"N": 8})
    kin = S.EEKinematics(URDF, "EE")
    played = []

    class Recording:
        def __init__(self, inner):
            self.inner, self.nq, self.nv = inner, inner.nq, getattr(inner, "nv", inner.nq)

        def step(self, q, dq, u, h):
            played.append(np.array(u))
            return self.inner.step(q, dq, u, h)

    sim = S.Simulation(Recording(S.make_world("pinocchio", URDF)), Q0, sim_dt=0.001, kinematics=kin)
    import pinocchio as pin

    u0 = GravityHold(pin.buildModelFromUrdf(str(URDF)))(Q0)
    rec = S.run_closed_loop(sim, planner, S.TrackingTask(R.Hold(kin.ee_pos(Q0)), 8, planner.dt, 0.1),
                            first_command=S.HoldTorque(u0))
    assert rec.stats()["n_ticks"] >= 2
    assert all(np.array_equal(u, sim.clamp(u0)) for u in played[:31])
    assert not np.array_equal(played[31], sim.clamp(u0))  # the planner's plan from the second period
    sim2 = S.Simulation(S.make_world("pinocchio", URDF), Q0, sim_dt=0.001, kinematics=kin)
    with pytest.raises(ValueError, match="first_command"):
        S.run_closed_loop(sim2, planner, S.TrackingTask(R.Hold(kin.ee_pos(Q0)), 8, planner.dt, 0.1),
                          first_command=np.zeros(7))


def test_goal_task_through_the_loop_with_events_summary_and_plot(tmp_path):
    planner = BSQPPlanner("iiwa14", {"N": 16})
    kin = S.EEKinematics(URDF, "EE")
    p0 = kin.ee_pos(Q0)
    goals = np.array([p0 + [0.0, 0.05, 0.0], p0])
    task = S.GoalTask(goals, 16, planner.dt, timeout=1.0, threshold=0.02, velocity_threshold=1.0,
                      velocity_norm=2, settle_time=0.0, ramp=0.3)
    sim = S.Simulation(S.make_world("pinocchio", URDF), Q0, sim_dt=0.001, kinematics=kin,
                       effort_limit=kin.model.effortLimit)
    seen = []
    rec = S.run_closed_loop(sim, planner, task, on_event=lambda t, kind, d: seen.append((kind, d["outcome"])))
    st = rec.stats()
    assert rec.stop_reason == "goals_done" and st["all_reached"] and seen == [("goal", "reached")] * 2
    assert [e[1] for e in rec.events] == ["goal", "goal"]
    s = rec.summary()
    assert s["n_ticks"] == st["n_ticks"] > 0 and s["mean_tracking_error"] == pytest.approx(
        np.mean(st["goal_distances_knot0"]))
    assert s["deadline_s"] == planner.dt and s["stop_reason"] == "goals_done"
    out = rec.plot(tmp_path / "run.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gravity_hold_is_clamped_rnea_and_safe():
    import pinocchio as pin

    kin = S.EEKinematics(URDF, "EE")
    m = kin.model
    z = np.zeros(7)
    tau = pin.rnea(m, m.createData(), Q0, z, z)
    assert np.array_equal(GravityHold(m)(Q0), tau)
    lim = np.full(7, 5.0)
    assert np.array_equal(GravityHold(m, lim)(Q0), np.clip(tau, -5.0, 5.0))
    assert GravityHold(m, n_actuated=9)(Q0).shape == (9,)          # padded for contact-force slots
    assert GravityHold(m, np.ones(3))(Q0).tolist() == tau.tolist()  # a limit of another size is not applied


@pytest.mark.parametrize("world", ["pinocchio", "mujoco"])
def test_core_simulation_reproduces_the_ros_sim_logic_bit_for_bit(world):
    """The ROS simulation node's logic of today (payload weight + external wrench as J^T w per
    physics step, pendulum, link mass error, one held command per control period) is the core
    Simulation with those disturbances, state for state: the node can become an adapter."""
    from conftest import import_or_skip

    sl = import_or_skip("gato_ros.sim_logic", "build the workspace and source install/setup.bash")
    cfg = {"robot": "iiwa14", "world": world, "external_wrench": [0.0, 5.0, -10.0, 0.0, 0.5, 0.0],
           "payload_mass_kg": 1.5, "link_mass_scale": "L4:1.2", "pendulum_mass_kg": 1.0 if world == "pinocchio" else 0.0}
    logic = sl.SimWorldLogic(cfg)
    c = logic.cfg
    wrench = np.asarray(c["external_wrench"]) + [0.0, 0.0, -S.GRAVITY * c["payload_mass_kg"], 0.0, 0.0, 0.0]
    dist = [S.ConstantWrench(wrench, via="jacobian"), S.LinkMassError(sl.parse_link_mass_scale(c["link_mass_scale"]))]
    if c["pendulum_mass_kg"] > 0:
        dist.append(S.PendulumPayload(c["pendulum_mass_kg"], c["pendulum_length_m"]))
    w = S.make_world(world, URDF, ee_frame="EE", timestep=c["physics_dt"], disturbances=dist)
    sim = S.Simulation(w, np.asarray(c["q0"]), sim_dt=c["physics_dt"], kinematics=S.EEKinematics(URDF, "EE"),
                       disturbances=dist, carry_remainder=False)
    rng = np.random.default_rng(11)
    for _ in range(15):
        u = rng.uniform(-5.0, 5.0, 7)
        logic.advance(u)
        sim.advance(S.HoldTorque(u), 1.0 / c["control_rate_hz"])
        assert np.array_equal(sim.q, logic.q) and np.array_equal(sim.dq, logic.dq)
    assert sim.t == pytest.approx(logic.t_ns * 1e-9, abs=1e-12)


def test_simulation_rejects_bad_input_naming_it():
    w = S.make_world("pinocchio", URDF)
    with pytest.raises(ValueError, match="q0"):
        S.Simulation(w, np.zeros(6), sim_dt=0.001)
    with pytest.raises(ValueError, match="dq0"):
        S.Simulation(w, Q0, np.r_[np.nan, np.zeros(6)], sim_dt=0.001)
    with pytest.raises(ValueError, match="sim_dt"):
        S.Simulation(w, Q0, sim_dt=0.0)
    sim = S.Simulation(w, Q0, sim_dt=0.001)
    with pytest.raises(ValueError, match="period"):
        sim.advance(S.HoldTorque(np.zeros(7)), -0.01)
    with pytest.raises(RuntimeError, match="kinematics"):
        sim.ee_pos()


def test_front_end_checks_live_in_the_core():
    """The substep of every front end (driver dt, env ctrl_dt, sim node's physics_dt) is checked
    once, and the goal task checks its own norm order (driver, eval and limit scenarios)."""
    assert S.check_substep(0.001, 0.03, "ctrl_dt") == 30 and S.check_substep(0.001, 0.0105, "ctrl_dt") == 10
    assert S.check_substep(0.001, 0.032, "1 / control_rate_hz", name="physics_dt", whole=True) == 32
    with pytest.raises(ValueError, match=r"sim_dt: 0.1 s is longer than the control period dt"):
        S.check_substep(0.1, 0.03125, "dt")
    with pytest.raises(ValueError, match="sim_dt"):
        S.check_substep(-0.001, 0.03125, "dt")
    with pytest.raises(ValueError, match="physics_dt: 0.003 s does not divide"):
        S.check_substep(0.003, 0.032, "1 / control_rate_hz", name="physics_dt", whole=True)
    with pytest.raises(ValueError, match="velocity_norm"):
        S.GoalTask(np.zeros((1, 3)), 4, 0.03, timeout=1.0, threshold=0.01, velocity_threshold=1.0,
                   velocity_norm="L1", settle_time=0.0, ramp=0.0)
    with pytest.raises(ValueError, match="link_mass_scale: entry 'L4'"):
        S.parse_link_mass_scale("L4")
    assert S.parse_link_mass_scale(" L4:1.2 , L6:0.9") == {"L4": 1.2, "L6": 0.9}
