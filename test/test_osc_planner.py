"""The operational-space controller as a planner ("osc" in gato.planner) through the one loop
(gato.simloop.run_closed_loop) in MuJoCoWorld at 1 kHz."""
import math

import numpy as np
import pytest

import gato
from gato import planner as P
from gato import references as R
from gato import simloop as S
from gato import tasks
from gato.osc_planner import OSCPlanner


def run(robot, reference, duration, config=None):
    urdf = gato.robot_urdf(robot)
    ee = gato.robot_info(robot)["ee_frame"]
    planner = P.make("osc", robot, config)
    kin = S.EEKinematics(urdf, ee)
    world = S.make_world("mujoco", urdf, ee_frame=ee, timestep=0.001)
    sim = S.Simulation(world, tasks.Q_READY[robot], sim_dt=0.001, kinematics=kin,
                       effort_limit=np.array(kin.model.effortLimit))
    return planner, S.run_closed_loop(sim, planner, S.TrackingTask(reference(kin), planner.N, planner.dt, duration))


def test_osc_is_registered():
    assert "osc" in P.planners() and P.planner_class("osc") is OSCPlanner
    assert not OSCPlanner.capabilities.plan_output


def test_osc_planner_tracks_the_default_figure8_through_the_loop():
    """The bringup's default figure-8 (0.1 m half-amplitudes, y-z plane, 4 s) for one period: the
    EE within 5 mm of the window's knot 0 on average, one tick per millisecond, finite torques."""
    q0 = tasks.Q_READY["iiwa14"]
    planner, rec = run("iiwa14", lambda kin: R.Figure8(kin.ee_pos(q0), 0.1, 0.1, theta=math.pi / 2, period=4.0), 4.0)
    st = rec.stats()
    assert rec.stop_reason == "sim_time" and st["n_ticks"] == 4000
    assert np.all(np.isfinite(st["torques"]))
    err = np.asarray(rec.columns["goal_distances_knot0"])
    assert err.mean() <= 5e-3, f"mean error {err.mean() * 1e3:.2f} mm"
    assert all(s.fallback == "" and s.solve_s > 0 for s in rec.planner_stats)


def test_osc_planner_six_dof_holds_without_null_space():
    """ur5e (6 DOFs: no null-space task) holds its start EE position within 1 mm."""
    q0 = tasks.Q_READY["ur5e"]
    planner, rec = run("ur5e", lambda kin: R.Hold(kin.ee_pos(q0)), 0.5)
    assert not planner._null_space
    assert np.max(rec.columns["goal_distances_knot0"]) < 1e-3


@pytest.mark.parametrize("config,msg", [
    ({"Kp": 1.0}, r"config: unknown keys \['Kp'\]"),
    ({"dt": 0.0}, r"dt: expected a finite number > 0"),
    ({"stiffness": -1.0}, r"stiffness: expected a finite number >= 0"),
    ({"N": 1}, r"N: expected an int >= 2"),
    ({"gravity_compensation": 1}, r"gravity_compensation: expected a bool"),
])
def test_osc_planner_bad_config(config, msg):
    with pytest.raises(ValueError, match=msg):
        P.make("osc", "iiwa14", config)


def test_osc_planner_bad_state():
    p = P.make("osc", "iiwa14")
    with pytest.raises(ValueError, match=r"x0: expected shape \(14,\)"):
        p.reset(np.zeros(13))
    p.reset(np.zeros(14))
    x = np.zeros(14)
    x[3] = np.nan
    with pytest.raises(ValueError, match=r"x_measured: contains NaN or Inf \(first at index 3\)"):
        p.step(x, np.zeros(12))
