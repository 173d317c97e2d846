"""One loop, three front ends: the same seeded scenario through the closed-loop driver
(MPC_GATO), the gym environment (ArmTrackEnv) and the ROS simulation node's logic
(gato_ros.sim_logic.SimWorldLogic, stepped the way the lockstep node steps it) gives the
same command sequence, bit for bit, and the same states.

The scenario: a seeded iiwa14 figure-8 (gato.tasks.fig8_scenarios, seed 3) tracked by the
``bsqp`` planner (N = 16, dt = 0.02 s = the control period: 50 Hz, 20 physics steps of 1 ms,
pinocchio world), 0.6 s in lockstep. Every front end plays the planner's warm-up plan over
the first period, then one planner step per period against the same reference windows.
"""
import numpy as np
import pytest

import gato
from gato import references as R
from gato import simloop as S
from gato import tasks
from gato.bsqp_planner import BSQPPlanner
from gato.mpc_gato import MPC_GATO

URDF = gato.robot_urdf("iiwa14")
N, DT, DUR, SIM_DT = 16, 0.02, 0.6, 0.001
TICKS = round(DUR / DT)


@pytest.fixture(scope="module")
def scenario():
    sc = tasks.fig8_scenarios(S.EEKinematics(URDF, "EE").model, "iiwa14", 1, seed=3, dt=DT,
                              ratio_range=(0.4, 0.5))[0]
    flat, _ = tasks.fig8_reference(sc, N)
    return sc, flat, R.SampledTrajectory(flat.reshape(-1, 6)[:, :3], DT)


def _driver(sc, flat):
    drv = MPC_GATO(None, URDF, N=N, dt=DT, verbose=False)
    _, st = drv.run_mpc_fig8(np.r_[sc["q0"], np.zeros(7)], flat, sim_dt=SIM_DT, sim_time=DUR,
                             pace_by_solve_time=False)
    return st["torques"], st["joint_positions"], st["joint_velocities"]


def _env(sc, ref):
    import gato.envs

    env = gato.envs.ArmTrackEnv("iiwa14", q0=sc["q0"], ctrl_dt=DT, sim_dt=SIM_DT)
    planner = BSQPPlanner("iiwa14", {"N": N, "dt": DT})
    obs, _ = env.reset(seed=0)
    planner.reset(obs)
    action = planner.warmup(obs, ref.window(0.0, N, DT)).control(0)
    u, q, dq = [], [], []
    while env.t < DUR - 1e-9:
        obs, *_ = env.step(action)
        q.append(obs[:7]), dq.append(obs[7:])
        action = planner.step(obs, ref.window(env.t, N, DT), dt_elapsed=DT).u
        u.append(np.clip(action, -env.effort_limit, env.effort_limit))
    return np.array(u), np.array(q), np.array(dq)


def _sim_node_logic(sc, ref):
    """The lockstep node's cycle: publish the joint state of tick k (joint_names order), the
    controller answers a command stamped t_k (here: the bsqp planner, clamped to the effort
    limits as the controller publishes it, sent in reversed joint order to exercise the name
    mapping), the world advances one period with it held."""
    from conftest import import_or_skip

    sl = import_or_skip("gato_ros.sim_logic", "build the workspace and source install/setup.bash")
    world = sl.SimWorldLogic({"robot": "iiwa14", "world": "pinocchio", "control_rate_hz": 1.0 / DT,
                              "physics_dt": SIM_DT, "q0": list(sc["q0"])})
    assert world.substeps == round(DT / SIM_DT)
    planner = BSQPPlanner("iiwa14", {"N": N, "dt": DT})
    lim = world.effort_limit
    x0 = np.r_[world.q, world.dq]
    planner.reset(x0)
    effort = planner.warmup(x0, ref.window(0.0, N, DT)).control(0)
    u, q, dq = [], [], []
    for _ in range(TICKS):
        stamp = world.joint_state().stamp_ns
        assert world.lockstep_accepts(stamp)
        names = world.joint_names[::-1]
        world.advance(world.effort_from(_in_order(effort, world, names), names))
        js = world.joint_state()
        x = np.r_[_urdf_order(js.position, world), _urdf_order(js.velocity, world)]
        q.append(x[:7]), dq.append(x[7:])
        effort = np.clip(planner.step(x, ref.window(js.stamp_ns * 1e-9, N, DT), dt_elapsed=DT).u, -lim, lim)
        u.append(effort)
    return np.array(u), np.array(q), np.array(dq)


def _in_order(u_urdf, world, names):
    """URDF-order torques as a command in ``names`` order."""
    return np.array([u_urdf[world.urdf_joints.index(n)] for n in names])


def _urdf_order(v, world):
    """A joint-state vector in joint_names order, in URDF order."""
    return np.array([v[world.joint_names.index(j)] for j in world.urdf_joints])


def test_driver_env_and_sim_node_logic_give_identical_command_sequences(scenario):
    sc, flat, ref = scenario
    runs = {"driver": _driver(sc, flat), "env": _env(sc, ref), "sim_node_logic": _sim_node_logic(sc, ref)}
    u0, q0, dq0 = runs["driver"]
    assert len(u0) == TICKS and np.all(np.isfinite(u0)) and np.max(np.abs(u0)) > 1.0   # a real, moving run
    for name, (u, q, dq) in runs.items():
        assert u.shape == u0.shape, name
        assert np.array_equal(u, u0), (name, np.max(np.abs(u - u0)))
        assert np.array_equal(q, q0) and np.array_equal(dq, dq0), name
