"""Closed-loop pose tracking in MuJoCo (issue 30), CI-sized.

The pose figure-8: one held-out scenario per arm (gato.tasks.fig8_scenarios seed 301, not used to
choose the orientation weight) through bench/bench_pose_fig8.py's run: the BSQP planner with the
arm's shipped weights, its shipped pose-window EE factor (POSE_EE_WEIGHT_SCALE 2: q_cost / N_cost x2
on the windows that carry orientations) and the shipped ORIENTATION_WEIGHTS tracks the figure-8 while the
orientation sweeps +/- 30 deg about a horizontal axis (period stretched so the pose path asks the
joints for the scenario's drawn fraction of their velocity limits; the axis one whose pose path
keeps 0.1 rad inside the solver's joint box where one exists: bench_pose_fig8.references).
Measured (seed 301 scenario 0, axis h157.5 on both arms; docs/benchmarks_arms.md "Pose figure-8"):
orientation mean 0.16 deg (iiwa14) / 0.11 (fr3), max 0.43 / 0.29; position 2.98 / 2.23 mm
against 3.53 / 2.85 mm position-only on the same curve (x0.84 / x0.78; without the factor x1.48 /
x1.51). The bound on the ratio is issue 30's (within 1.2x of the position-only run) on this one
scenario; the criterion over the held-out seeds is docs/benchmarks_arms.md's table.

The sampling planner reads the same pose target (its orientation term, a 6-D IK ctrl_ref)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_pose_fig8 as B  # noqa: E402


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_pose_figure8_tracks_the_orientation_in_mujoco(robot):
    sc = B.scenarios(robot, [301], 1)[0]
    pos, pose, stretch, axis = B.references(robot, sc)
    assert 1.0 <= stretch < 3.0 and axis == "h157.5"      # measured 1.73 / 1.66
    base = B.run(robot, sc, pos)
    r = B.run(robot, sc, pose)
    assert base["stop"] == r["stop"] == "sim_time" and r["ticks"] == base["ticks"] > 100
    assert base["rot_deg"] is None and r["rot_deg"] is not None
    assert r["rot_deg"] <= 0.5, r                    # measured 0.16 / 0.11 deg
    assert r["rot_max_deg"] <= 1.5, r                # measured 0.43 / 0.29 deg
    assert r["pos_mm"] <= 1.2 * base["pos_mm"], (r, base)   # measured x0.84 / x0.78
    assert base["pos_mm"] <= 6.0, base               # measured 3.53 / 2.85 mm


def test_the_sweep_axis_keeps_the_pose_path_inside_the_solvers_joint_box():
    """bench_pose_fig8.references, protocol "clear" (the default): iiwa14 seed 300 scenario 0,
    whose first-protocol sweep (the figure plane's axis) takes joint 6 beyond the 0.1 rad-shrunk
    box the limit rows and the barrier keep (exact 6-D IK: -0.095 rad), gets an axis whose pose
    path keeps 0.1 rad inside it (measured +0.222 rad, axis h157.5); exact IK only, no closed loop."""
    sc = B.scenarios("iiwa14", [300], 1)[0]
    plane, clear = {}, {}
    assert B.references("iiwa14", sc, "plane", plane)[3] == "in-plane"
    assert plane["clearance"] < 0.0, plane                           # measured -0.095 rad
    axis = B.references("iiwa14", sc, "clear", clear)[3]
    assert axis == "h157.5" and clear["clearance"] >= B.CLEARANCE, clear
    assert {n for n, _, _ in clear["candidates"]} == {f"h{d:g}" for d in B.CLEAR_AXES_DEG}
    with pytest.raises(ValueError, match="protocol"):
        B.references("iiwa14", sc, "other")


def _sampling_case(rot_weight=None):
    import math

    import numpy as np
    import pinocchio as pin

    import gato
    from gato import planner as P
    from gato import references as R
    from gato import simloop as L

    urdf = str(gato.robot_urdf("iiwa14"))
    q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
    kin = L.EEKinematics(urdf, "EE")
    fid = kin.model.getFrameId("EE")

    def rot(q):
        pin.forwardKinematics(kin.model, kin.data, q)
        return pin.updateFramePlacement(kin.model, kin.data, fid).rotation.copy()

    cfg = {"nthread": 2, "num_samples": 32}
    if rot_weight is not None:
        cfg["rot_weight"] = rot_weight
    pl = P.make("sampling", "iiwa14", cfg)
    target = pin.log3(pin.exp3(np.array([0.0, math.radians(15), 0.0])) @ rot(q0))
    return pl, kin, q0, rot, target, R, L


def test_sampling_planner_tracks_the_window_orientation():
    """The sampling planner reads the pose target (its orientation term and a 6-D IK ctrl_ref): a
    tool 15 deg from its target turns to within 4 deg in 0.8 s in MuJoCo (measured 1.9); with a
    position-only window it does not (measured 11.9 deg left)."""
    import numpy as np
    import pinocchio as pin
    from gato.worlds import MuJoCoWorld

    errs = {}
    for name in ("pose", "position"):
        pl, kin, q0, rot, target, R, L = _sampling_case()
        hold = R.Hold(kin.ee_pos(q0))
        ref = R.PoseReference(hold, target) if name == "pose" else hold
        sim = L.Simulation(MuJoCoWorld(str(kin_urdf()), timestep=0.001), q0, sim_dt=0.001, kinematics=kin,
                           effort_limit=np.array(kin.model.effortLimit))
        rec = L.run_closed_loop(sim, pl, L.TrackingTask(ref, pl.N, pl.dt, 0.8))
        q_end = np.asarray(rec.stats()["joint_positions"])[-1]
        errs[name] = np.degrees(np.linalg.norm(pin.log3(pin.exp3(target).T @ rot(q_end))))
        assert np.mean(rec.columns["goal_distances_knot0"]) < 0.006, name   # measured 2.4 / 2.1 mm
    assert errs["pose"] < 4.0 and errs["position"] > 8.0, errs


def kin_urdf():
    import gato

    return gato.robot_urdf("iiwa14")


def test_sampling_orientation_term_adds_nothing_on_position_only_windows():
    """rot_weight 20 (default) and 0 (no term) plan the same torques, bit for bit, on position-only
    windows: the term's hinge is above any error there."""
    import numpy as np

    us = []
    for w in (None, 0.0):
        pl, kin, q0, rot, target, R, L = _sampling_case(w)
        x = np.concatenate([q0, np.zeros(7)])
        pl.reset(x)
        fig = R.Figure8(kin.ee_pos(q0), 0.05, 0.03, period=2.0)
        us.append([pl.step(x, fig.window(0.01 * k, pl.N, pl.dt)).u for k in range(3)])
    assert all(np.array_equal(a, b) for a, b in zip(*us))
    with pytest.raises(ValueError, match="rot_weight"):
        _sampling_case(-1.0)


def test_a_pose_path_outside_the_joint_box_is_infeasible_and_not_run(monkeypatch):
    """iiwa14 seed 602 scenario 1 (fresh, 2026-12-07): on every horizontal sweep axis the exact
    IK leaves the solver's joint box (measured -0.544 rad), so no controller that keeps its
    joint limits can follow it; ``--skip-infeasible`` lists it without running it, and the
    summary's feasible means leave it out. Exact IK only, no closed loop."""
    sc = B.scenarios("iiwa14", [602], 2)[1]
    info: dict = {}
    B.references("iiwa14", sc, "clear", info)
    assert info["clearance"] < -0.4 and not B.feasible(info["clearance"])
    assert all(c[2] < 0 for c in info["candidates"])       # no axis keeps it inside
    assert B.feasible(0.0) and B.feasible(0.019)            # iiwa14 301's tightest axis stays in
    monkeypatch.setattr(B, "scenarios", lambda robot, seeds, n: [sc])
    monkeypatch.setattr(B, "run", lambda *a, **k: pytest.fail("an infeasible scenario was run"))
    (row,) = B.study(["iiwa14"], [602], 2, [(8.0, 8.0)], skip_infeasible=True)
    assert row["id"] == sc["id"] and row["feasible"] is False and row["pose_pos_mm"] is None
    rows = [dict(robot="iiwa14", id="a", rot=[8.0, 8.0], feasible=True, pos_only_mm=2.0, pose_pos_mm=1.0,
                 pos_ratio=0.5, rot_deg=0.1, rot_max_deg=0.3),
            dict(robot="iiwa14", id="b", rot=[8.0, 8.0], feasible=False, pos_only_mm=2.0, pose_pos_mm=10.0,
                 pos_ratio=5.0, rot_deg=0.6, rot_max_deg=3.0),
            dict(robot="iiwa14", id="c", rot=[8.0, 8.0], feasible=False, pos_only_mm=None, pose_pos_mm=None)]
    s = B.summarize(rows, "iiwa14", (8.0, 8.0))
    assert s["n"] == 2 and s["n_feasible"] == 1 and s["n_infeasible"] == 2
    assert s["pose_pos_mm"] == 5.5 and s["ratio_feasible"] == 0.5 and s["rot_deg_feasible"] == 0.1
