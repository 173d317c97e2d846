"""Pose figure-8 in MuJoCo (issue 30): the BSQP planner tracks the position figure-8 of
``gato.tasks.fig8_scenarios`` while the EE orientation sweeps +/- 30 deg about a horizontal axis
(gato.references.PoseFigure8, base orientation = the EE orientation at the scenario's start
posture), against the same curve run position-only.

    python bench/bench_pose_fig8.py --robots iiwa14 fr3 --seeds 300 301 --n 2          # held out
    python bench/bench_pose_fig8.py --robots iiwa14 fr3 --seeds 100 --n 2 --rot 2 8 32  # weight sweep
    python bench/bench_pose_fig8.py --seeds 300 301 --pose-params '{"q_cost": 60, "N_cost": 39}'
    python bench/bench_pose_fig8.py --seeds 300 301 --pose-scale 1                    # pose windows unscaled
    python bench/bench_pose_fig8.py --seeds 300 301 --n 1 --params '{"q_lim_cost": 0}'  # both runs
    python bench/bench_pose_fig8.py --seeds 300 301 --protocol plane                   # the first protocol
    python bench/bench_pose_fig8.py --robots fr3 --seeds 100 --limits off --params '{"q_lim_cost": 0}'  # diagnostics
    python bench/bench_pose_fig8.py --robots iiwa14 --seeds 601 602 --skip-infeasible  # infeasible paths not run

Per scenario (:func:`references`): the period is stretched so the pose path asks the joints for
the scenario's drawn fraction of their velocity limits, and the sweep axis is a horizontal axis
whose pose path keeps 0.1 rad inside the solver's joint box (of 8, the one asking the least speed; protocol
"clear", the default) or the figure plane's horizontal axis or its horizontal normal, whichever
asks less (protocol "plane", the first one); both runs take that curve. MuJoCo
world (1 ms substeps, lockstep: the world advances one control period per tick), BSQPPlanner with
the arm's shipped weights (gato.planners.shipped_weights), its pose-window EE weight factor
(POSE_EE_WEIGHT_SCALE: the controller's pose_ee_weight_scale, on the pose run's windows; --pose-scale)
and the orientation weight under test (default ORIENTATION_WEIGHTS), N 32, dt 0.01 s, limits admm, one period. Errors are taken at
every tick against knot 0 of that tick's window: position ||p_ee - p_ref|| [mm], orientation
angle of R_ref^T R_ee [deg] (pinocchio FK of the measured joints, the EE frame). Prints a table
(means over every scenario run, then over the feasible ones: :func:`feasible`, a pose path inside
the joint box) and, last, one JSON line (docs/benchmarks_arms.md, "Pose figure-8").
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

# The axis rule and its exact-IK helpers live in the core, shared with the reference node's
# orientation:=sweep (gato.core.sweep_axis).
from gato.core.sweep_axis import SWEEP_AXES_DEG as CLEAR_AXES_DEG
from gato.core.sweep_axis import SWEEP_CLEARANCE as CLEARANCE
from gato.core.sweep_axis import (choose_sweep_axis, horizontal_axis, limit_clearance,  # noqa: F401
                                  pose_ik_path, sweep_candidates)

SWEEP_DEG = 30.0
#: Diagnostics (main's --limits / --world / --integrator / --rot-axis / --rot-ramp, both runs; the
#: orientation ones on the pose run): the limit mechanism, the world, the solver's integrator
#: (None: BSQPPlanner's), the orientation term's tool-axis factors, a per-knot orientation ramp.
DIAG = dict(limits="admm", world="mujoco", integrator=None, rot_axis=None, rot_ramp=None)


def _rotation_angles(model, fid, qs, ref_rotvecs) -> np.ndarray:
    """(T,) angle [rad] between the EE rotation at each q and the target rotation vector."""
    import pinocchio as pin

    data = model.createData()
    out = np.empty(len(qs))
    for i, (q, r) in enumerate(zip(qs, ref_rotvecs)):
        pin.forwardKinematics(model, data, q)
        R = pin.updateFramePlacement(model, data, fid).rotation
        out[i] = np.linalg.norm(pin.log3(pin.exp3(np.asarray(r)).T @ R))
    return out


def references(robot: str, scenario: dict, protocol: str = "clear", info: dict | None = None):
    """(position-only Figure8, PoseFigure8, stretch, axis) of a fig8 scenario: the same curve; the
    pose one with its orientation sweeping +/- SWEEP_DEG about a horizontal axis around the EE
    orientation at the scenario's q0. The scenario's period is drawn for the position path (its
    joint speed ratio, 0.6-0.9 of the velocity limits); the sweep asks the wrist for more, beyond
    the limits on most scenarios, so both curves take the period stretched by
    ``stretch = max(1, pose path ratio / drawn ratio)``: the pose path then runs at the scenario's
    drawn fraction of the joint velocity limits (and the position-only run on the same curve).

    The sweep axis (``axis``, a name):
    - ``protocol="plane"`` (the first protocol): the figure plane's horizontal axis ("in-plane")
      or its horizontal normal ("across"), whichever asks the joints for less speed (some sweeps
      pass a wrist singularity: 18x and 67x the limits on iiwa14 seeds 100 and 301).
    - ``protocol="clear"``: the horizontal axes at CLEAR_AXES_DEG from the plane's ("h0", "h22.5",
      ...); among those whose pose path (exact 6-D IK, :func:`pose_ik_path`) keeps CLEARANCE inside
      the solver's joint box (:func:`limit_clearance`), the one asking the least speed; none: the
      one with the most clearance. Why: on the plane protocol the sweep took iiwa14's joint 6 to
      0.005 rad of its URDF limit (seed 300), beyond the 0.1 rad box the controller keeps, where no
      controller that keeps its limits can follow the pose (docs/benchmarks_arms.md, "Pose figure-8").

    ``info`` (a dict, optional) receives ``clearance`` [rad] of the chosen axis's IK path and
    ``candidates`` [(name, speed ratio, clearance)]."""
    import pinocchio as pin

    import gato
    from gato.references import Figure8, PoseFigure8

    model = pin.buildModelFromUrdf(str(gato.robot_urdf(robot)))
    data = model.createData()
    fid = model.getFrameId(scenario["ee_frame"])
    q0 = scenario["q0"]
    pin.forwardKinematics(model, data, q0)
    R0 = pin.updateFramePlacement(model, data, fid).rotation
    p = scenario["params"]

    def pair(period, axis):
        return (Figure8(p["offset"], p["A_x"], p["A_z"], p["theta"], period),
                PoseFigure8(p["offset"], p["A_x"], p["A_z"], p["theta"], period, base=pin.log3(R0),
                            sweep_deg=SWEEP_DEG, axis=axis))

    def make_pose(axis):
        return pair(p["period"], axis)[1]

    if protocol == "plane":
        rows = sweep_candidates(model, fid, q0, make_pose, p["period"],
                                [("in-plane", horizontal_axis(p["theta"], 0.0)),
                                 ("across", horizontal_axis(p["theta"], 90.0))])
        ratio, _, name, axis = min(rows, key=lambda r: r[0])
        cands = [(r[2], r[0], r[1]) for r in rows]
    elif protocol == "clear":
        ch = choose_sweep_axis(model, fid, q0, make_pose, p["period"], p["theta"])
        ratio, name, axis, cands = ch.speed_ratio, ch.name, ch.axis, ch.candidates
    else:
        raise ValueError(f"protocol: expected 'plane' or 'clear', got {protocol!r}")
    if info is not None:
        info["clearance"] = next(c[2] for c in cands if c[0] == name)
        info["candidates"] = cands
    stretch = max(1.0, ratio / float(scenario["ratio"]))
    pos, pose = pair(p["period"] * stretch, axis)
    return pos, pose, stretch, name


def run(robot: str, scenario: dict, reference, *, rot=None, N=32, dt=0.01, periods=1.0, weights=None,
        pose_scale=None) -> dict:
    """One closed-loop run of ``reference`` from the scenario's q0 in MuJoCo; returns
    {pos_mm, pos_max_mm, rot_deg, rot_max_deg (None for a position-only reference), wall_s, stop}.
    ``rot``: (rot_cost, N_rot_cost) for the controller (None: its default); ``weights``: the solver
    weights (default: the arm's shipped ones); ``pose_scale``: the controller's pose_ee_weight_scale (None:
    the arm's shipped POSE_EE_WEIGHT_SCALE; it acts on the windows that carry orientations only)."""
    import pinocchio as pin

    import gato
    from gato import simloop as S
    from gato.planners.bsqp_planner import BSQPPlanner
    from gato.planners.shipped_weights import pose_ee_weight_scale, shipped_weights

    urdf = str(gato.robot_urdf(robot))
    ee = scenario["ee_frame"]
    cfg = dict(N=N, dt=dt, params=dict(shipped_weights(robot) if weights is None else weights),
               limits=DIAG["limits"],
               pose_ee_weight_scale=pose_ee_weight_scale(robot) if pose_scale is None else float(pose_scale))
    if rot is not None:
        cfg["orientation_weights"] = tuple(rot)
    if DIAG["integrator"] is None:
        planner = BSQPPlanner(robot, cfg)
    else:
        from gato.core.bsqp import BSQP
        from gato.planners.bsqp_planner import solver_params
        from gato.planners.controller import MPCController

        solver = BSQP(urdf, 1, N, dt, solver_params(cfg.pop("params")), integrator=DIAG["integrator"])
        planner = BSQPPlanner.from_controller(MPCController(solver, **{k: v for k, v in cfg.items()
                                                                      if k not in ("N", "dt")}))
    if rot is not None and DIAG["rot_axis"] is not None:
        planner.solver.set_rot_axis_weights(DIAG["rot_axis"])
    if rot is not None and DIAG["rot_ramp"] is not None:   # orientation weight per knot: f0 at knot 0 -> 1 at k1
        f0, k1 = DIAG["rot_ramp"]
        p = planner.solver.params
        tab = np.zeros((N, 4))
        tab[:, 0], tab[-1, 0], tab[:, 1], tab[:, 2] = p.q_cost, p.N_cost, p.qd_cost, p.u_cost
        tab[:, 3] = [rot[0] * min(1.0, f0 + (1.0 - f0) * k / max(k1, 1)) for k in range(N)]
        tab[-1, 3] = rot[1]
        planner.solver.set_cost_weights_per_knot(tab)
    kin = S.EEKinematics(urdf, ee)
    world = S.make_world(DIAG["world"], urdf, ee_frame=ee, timestep=0.001)
    sim = S.Simulation(world, np.asarray(scenario["q0"], dtype=np.float64), sim_dt=0.001, kinematics=kin,
                       effort_limit=np.array(kin.model.effortLimit))
    duration = float(periods) * float(reference.position.period if hasattr(reference, "position")
                                      else reference.period)
    t0 = time.perf_counter()
    rec = S.run_closed_loop(sim, planner, S.TrackingTask(reference, N, dt, duration))
    wall = time.perf_counter() - t0
    st = rec.stats()
    d = np.asarray(rec.columns["goal_distances_knot0"], dtype=np.float64)
    out = dict(pos_mm=1000 * float(d.mean()), pos_max_mm=1000 * float(d.max()), rot_deg=None, rot_max_deg=None,
               wall_s=wall, stop=rec.stop_reason, ticks=int(st["n_ticks"]))
    r = reference.orientations(np.asarray(st["timestamps"], dtype=np.float64))
    if r is not None:
        model = pin.buildModelFromUrdf(urdf)
        ang = np.degrees(_rotation_angles(model, model.getFrameId(ee), np.asarray(st["joint_positions"]), r))
        out.update(rot_deg=float(ang.mean()), rot_max_deg=float(ang.max()))
    return out


def scenarios(robot: str, seeds, n: int, dt=0.01):
    """gato.tasks.fig8_scenarios (speed ratio 0.6-0.9) of ``robot`` for each seed."""
    import pinocchio as pin

    import gato
    from gato.sim.scenarios import fig8_scenarios

    model = pin.buildModelFromUrdf(str(gato.robot_urdf(robot)))
    return [sc for s in seeds for sc in fig8_scenarios(model, robot, n, seed=int(s), dt=dt, ratio_range=(0.6, 0.9))]


def feasible(clearance_rad: float) -> bool:
    """Whether a scenario's pose path can be followed by a controller that keeps its joint limits:
    the chosen sweep axis's exact-IK path stays inside the solver's joint box (clearance >= 0; the
    box is the URDF limits shrunk by 0.1 rad). A property of the reference alone, known before
    any run (iiwa14 411/1 and 602/1: -0.46 / -0.54 rad on every axis, the period stretched ~100x)."""
    return bool(clearance_rad >= 0.0)


def summarize(rows: list, robot: str, rot) -> dict:
    """Means over ``robot``'s rows at orientation weights ``rot``: every scenario run, and over the
    feasible ones (:func:`feasible`) alone (``*_feasible``; ratio_feasible = the ratio of the means)."""
    rr = [r for r in rows if r["robot"] == robot and r["rot"] == list(rot) and r.get("pose_pos_mm") is not None]
    ff = [r for r in rr if r["feasible"]]

    def mean(key, of):
        return float(np.mean([r[key] for r in of])) if of else float("nan")

    return dict(robot=robot, rot=list(rot), n=len(rr), pos_only_mm=mean("pos_only_mm", rr),
                pose_pos_mm=mean("pose_pos_mm", rr),
                ratio_max=float(np.max([r["pos_ratio"] for r in rr])) if rr else float("nan"),
                rot_deg=mean("rot_deg", rr),
                rot_worst_deg=float(np.max([r["rot_deg"] for r in rr])) if rr else float("nan"),
                rot_max_deg=float(np.max([r["rot_max_deg"] for r in rr])) if rr else float("nan"),
                n_feasible=len(ff), n_infeasible=sum(1 for r in rows if r["robot"] == robot
                                                     and r["rot"] == list(rot) and not r["feasible"]),
                pos_only_mm_feasible=mean("pos_only_mm", ff), pose_pos_mm_feasible=mean("pose_pos_mm", ff),
                ratio_feasible=mean("pose_pos_mm", ff) / mean("pos_only_mm", ff) if ff else float("nan"),
                rot_deg_feasible=mean("rot_deg", ff))


def study(robots, seeds, n, rots, periods=1.0, pose_params=None, params=None, protocol="clear",
          pose_scale=None, skip_infeasible=False) -> list:
    """The closed-loop runs; ``skip_infeasible``: a scenario whose pose path is not
    :func:`feasible` is listed (``feasible`` False, no errors) but not run."""
    from gato.planners.shipped_weights import shipped_weights

    rows = []
    for robot in robots:
        for sc in scenarios(robot, seeds, n):
            info: dict = {}
            pos, pose, stretch, axis = references(robot, sc, protocol, info)
            ok = feasible(info["clearance"])
            if skip_infeasible and not ok:
                for rot in rots:
                    rows.append(dict(robot=robot, id=sc["id"], period_s=float(pos.period), stretch=stretch, axis=axis,
                                     clearance_rad=info["clearance"], feasible=False, rot=list(rot),
                                     pos_only_mm=None, pose_pos_mm=None))
                print(f"{robot:7s} {sc['id']:22s} x{stretch:.2f} {axis:8s} clear {info['clearance']:+.3f} "
                      "infeasible (the pose path leaves the joint box on every axis): not run", file=sys.stderr,
                      flush=True)
                continue
            both = {**shipped_weights(robot), **(params or {})}
            base = run(robot, sc, pos, periods=periods, weights=both)
            for rot in rots:
                w = {**both, **(pose_params or {})}
                r = run(robot, sc, pose, rot=rot, periods=periods, weights=w, pose_scale=pose_scale)
                rows.append(dict(robot=robot, id=sc["id"], period_s=float(pos.period), stretch=stretch, axis=axis,
                                 clearance_rad=info["clearance"], feasible=ok,
                                 rot=list(rot),
                                 pos_only_mm=base["pos_mm"], pose_pos_mm=r["pos_mm"],
                                 pos_ratio=r["pos_mm"] / base["pos_mm"], rot_deg=r["rot_deg"],
                                 rot_max_deg=r["rot_max_deg"], stop=r["stop"], wall_s=base["wall_s"] + r["wall_s"]))
                x = rows[-1]
                print(f"{robot:7s} {sc['id']:22s} x{stretch:.2f} {axis:8s} clear {info['clearance']:+.3f} "
                      f"rot {rot[0]:g}/{rot[1]:g}: pos-only {x['pos_only_mm']:6.2f} mm | "
                      f"pose {x['pose_pos_mm']:6.2f} mm (x{x['pos_ratio']:.2f}), orientation mean "
                      f"{x['rot_deg']:.3f} deg max {x['rot_max_deg']:.3f} ({x['stop']}, {x['wall_s']:.1f} s)",
                      file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--robots", nargs="+", default=["iiwa14", "fr3"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[300, 301])
    ap.add_argument("--n", type=int, default=2, help="scenarios per seed")
    ap.add_argument("--rot", nargs="+", type=float, default=None,
                    help="orientation weights to try (rot_cost = N_rot_cost); default: the shipped ORIENTATION_WEIGHTS")
    ap.add_argument("--periods", type=float, default=1.0)
    ap.add_argument("--protocol", choices=("clear", "plane"), default="clear",
                    help="sweep axis choice (references()): clear = a horizontal axis whose pose path keeps 0.1 rad "
                         "inside the solver's joint box (default); plane = the figure plane's axis or its normal, "
                         "whichever is slower (the first protocol)")
    ap.add_argument("--params", type=json.loads, default=None,
                    help='JSON: solver weights over the shipped ones for both runs, e.g. \'{"q_lim_cost": 0}\'')
    ap.add_argument("--pose-params", type=json.loads, default=None,
                    help='JSON: solver weights over the shipped ones for the pose runs only, e.g. \'{"q_cost": 60}\'')
    ap.add_argument("--pose-scale", type=float, default=None,
                    help="the controller's pose_ee_weight_scale (EE weight factor on pose windows; default: the "
                         "arm's shipped POSE_EE_WEIGHT_SCALE; 1 = the shipped weights on pose windows too)")
    ap.add_argument("--skip-infeasible", action="store_true",
                    help="list, but do not run, the scenarios whose pose path leaves the solver's joint box on "
                         "every sweep axis (feasible(): exact-IK clearance < 0); the summary gives the means over "
                         "every scenario run and over the feasible ones either way")
    ap.add_argument("--limits", default="admm", help="diagnostic: the controller's limits (admm; off)")
    ap.add_argument("--world", default="mujoco", choices=("mujoco", "pinocchio"), help="diagnostic: the world")
    ap.add_argument("--integrator", default=None, choices=("euler", "semi_implicit", "rk4"),
                    help="diagnostic: the solver's integrator (default: the planner's)")
    ap.add_argument("--rot-axis", nargs=3, type=float, default=None,
                    help="diagnostic: the orientation term's tool-axis factors (BSQP.set_rot_axis_weights)")
    ap.add_argument("--rot-ramp", nargs=2, type=float, default=None, metavar=("F0", "K1"),
                    help="diagnostic: orientation weight per knot, F0 x the weight at knot 0 rising to it at knot K1")
    a = ap.parse_args(argv)
    DIAG.update(limits=a.limits, world=a.world, integrator=a.integrator, rot_axis=a.rot_axis,
                rot_ramp=None if a.rot_ramp is None else (a.rot_ramp[0], int(a.rot_ramp[1])))
    from gato.planners.shipped_weights import ORIENTATION_WEIGHTS

    rots = [(w, w) for w in a.rot] if a.rot else [(ORIENTATION_WEIGHTS["rot_cost"], ORIENTATION_WEIGHTS["N_rot_cost"])]
    rows = study(a.robots, a.seeds, a.n, rots, a.periods, a.pose_params, a.params, a.protocol, a.pose_scale,
                 a.skip_infeasible)
    print(f"\n{'robot':8s} {'rot':>9s} {'n':>3s} {'pos-only mm':>12s} {'pose pos mm':>12s} {'ratio max':>10s} "
          f"{'orient. mean deg':>17s} {'worst mean deg':>15s} {'max deg':>8s}")
    summary = []
    for robot in a.robots:
        for rot in rots:
            s = summarize(rows, robot, rot)
            summary.append(s)
            print(f"{robot:8s} {rot[0]:4g}/{rot[1]:<4g} {s['n']:3d} {s['pos_only_mm']:12.2f} {s['pose_pos_mm']:12.2f} "
                  f"{s['ratio_max']:10.2f} {s['rot_deg']:17.3f} {s['rot_worst_deg']:15.3f} {s['rot_max_deg']:8.2f}")
            print(f"  feasible scenarios {s['n_feasible']} (infeasible {s['n_infeasible']}): pos-only "
                  f"{s['pos_only_mm_feasible']:.2f} mm, pose {s['pose_pos_mm_feasible']:.2f} mm, ratio of the means "
                  f"{s['ratio_feasible']:.2f}, orientation mean {s['rot_deg_feasible']:.3f} deg")
    print(json.dumps(dict(seeds=a.seeds, n=a.n, periods=a.periods, sweep_deg=SWEEP_DEG, protocol=a.protocol,
                          params=a.params,
                          pose_params=a.pose_params, pose_scale=a.pose_scale,
                          summary=summary, rows=rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
