"""The sampling planner in closed loop on the iiwa14 (MuJoCo): small seeded versions of the
bench/bench_sampling.py workloads with numeric thresholds, and the planner behind gato.planner
driven by the one closed loop (gato.simloop.run_closed_loop)."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

import gato  # noqa: E402
from gato import planner as P, references as R, simloop as L  # noqa: E402
from gato.sampling import MjSim, SimMPC, scenes  # noqa: E402
from gato.sampling.planner import SamplingPlanner  # noqa: E402
from gato.tasks import Q_READY, fig8_scenarios  # noqa: E402

EFFORT = np.array([320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0])


def _execute(config, ctrl_ref, spec, q0, steps):
    mpc = SimMPC(config, MjSim(spec, 1, nthread=2), ctrl_ref)
    ex = MjSim(mpc.model, 1)
    d = ex.data[0]
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    mujoco.mj_forward(mpc.model, d)
    (rows,), (plans,) = mpc.execute(ex, steps)
    mpc.close()
    return rows, plans, mpc.model


def _open_loop(model, q0, ctrl_ref, steps):
    d = mujoco.MjData(model)
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    out = []
    for k in range(steps):
        d.ctrl[:] = ctrl_ref[k]
        mujoco.mj_step(model, d)
        mujoco.mj_forward(model, d)
        out.append((d.qpos.copy(), d.sensordata.copy()))
    return out


def test_fig8_tracking_beats_the_feedforward_path():
    """Half a period of a seeded figure-8 (speed ratio 0.5): the planner's RMS EE error stays under
    8 mm and under half the error of the IK joint path played open loop (the servo's lag)."""
    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    sc = fig8_scenarios(model, "iiwa14", 1, seed=0, dt=0.03125, ratio_range=(0.5, 0.5))[0]
    cfg, qs, xyz, n = scenes.fig8_task(sc, timestep=0.005, periods=0.5, num_samples=32)
    rows, plans, m = _execute(cfg, qs, scenes.robot_spec("iiwa14", timestep=0.005), sc["q0"], n)
    adr = m.sensor_adr[m.sensor(scenes.ee_sensor()).id]
    rms = float(np.sqrt(np.mean(np.sum((rows["sensordata"][:, adr:adr + 3] - xyz[1:n + 1]) ** 2, axis=1))))
    ol = _open_loop(m, sc["q0"], qs, n)
    rms_ol = float(np.sqrt(np.mean([np.sum((s[adr:adr + 3] - xyz[k + 1]) ** 2) for k, (_, s) in enumerate(ol)])))
    assert rms < 0.008 and rms < 0.5 * rms_ol, (rms, rms_ol)
    assert all(p["iterations"] >= 1 and np.isfinite(p["plan_cost"]) for p in plans)


def test_box_push_reaches_the_goal():
    """A seeded push (box_push_scenarios(10, seed=0)[1], 32 samples at a 10 ms step): the box ends
    within 3 cm of its goal, and closer than with the scripted IK path played open loop."""
    sc = scenes.box_push_scenarios(10, seed=0)[1]
    spec, cfg, qs, q0, n = scenes.box_push_task(sc, num_samples=32, timestep=0.01)
    rows, plans, m = _execute(cfg, qs, spec, q0, n)
    err = float(np.linalg.norm(rows["qpos"][-1, 7:9] - sc["goal"]))
    err_ol = float(np.linalg.norm(_open_loop(m, q0, qs, n)[-1][0][7:9] - sc["goal"]))
    assert err < 0.03 and err < err_ol, (err, err_ol)


# ------------------------------------------------------------------ behind the planner interface
def test_sampling_is_registered():
    assert "sampling" in P.planners()
    assert P.planner_class("sampling") is SamplingPlanner
    assert SamplingPlanner.capabilities.plan_output and not SamplingPlanner.capabilities.batch
    with pytest.raises(ValueError, match="config"):
        P.make("sampling", "iiwa14", {"nope": 1})
    with pytest.raises(ValueError, match="dt"):
        P.make("sampling", "iiwa14", {"dt": -0.01})


@pytest.mark.parametrize("method", ["mppi", "ilqr"])
def test_sampling_planner_in_the_closed_loop(method):
    """gato.simloop.run_closed_loop drives make("sampling") (MPPI, or the iLQR planner with one
    iteration per tick) on a MuJoCo torque world tracking a figure-8 for 1 s: no divergence, the
    EE within 2 cm of the window on average, finite torques inside the effort limits, and the plans
    it returns are state-torque trajectories."""
    urdf = str(gato.robot_urdf("iiwa14"))
    extra = {"planner": "ilqr", "iterations": 1} if method == "ilqr" else {}
    pl = P.make("sampling", "iiwa14", {"nthread": 2, "num_samples": 32, **extra})
    q0 = Q_READY["iiwa14"]
    kin = L.EEKinematics(urdf, "EE")
    fig8 = R.Figure8(kin.ee_pos(q0), 0.1, 0.05, np.pi / 2, 3.0)
    from gato.worlds import MuJoCoWorld

    sim = L.Simulation(MuJoCoWorld(urdf, timestep=0.001), q0, sim_dt=0.001, kinematics=kin, effort_limit=EFFORT)
    rec = L.run_closed_loop(sim, pl, L.TrackingTask(fig8, pl.N, pl.dt, 1.0))
    gd = np.array(rec.columns["goal_distances"])
    tau = np.array(rec.columns["torques"])
    assert not sim.diverged and len(gd) >= 95
    assert gd.mean() < 0.02 and gd.max() < 0.05, (gd.mean(), gd.max())
    assert np.all(np.isfinite(tau)) and np.all(np.abs(tau) <= EFFORT + 1e-9)
    res = pl.step(sim.x, fig8.window(sim.t, pl.N, pl.dt))
    assert res.plan is not None and res.plan.N == pl.ctrl_steps + 1
    assert np.array_equal(res.plan.control(0), res.u) and res.stats.iterations >= 1
