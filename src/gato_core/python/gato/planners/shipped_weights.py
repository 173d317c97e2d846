"""The BSQP cost weights the bringup ships per arm (issue 30): what a fresh ``scripts/sim.sh``
runs with. ``SolverParams()`` keeps the reference's defaults (``u_ref = "zero"``, q_cost 2,
bit for bit the reference's cost); the controller configuration of each arm takes these instead.

Why not the reference's weights: its torque cost penalises the absolute torque, so holding
the arm against gravity "costs" and the optimum sags beside the reference (``scripts/sim.sh``
figure-8, measured mean EE error: iiwa14 16.1 mm, indy7 11.3, fr3 20.4, gen3 15.2, ur5e 11.9).
With ``u_ref = "gravity"`` the torque beyond gravity compensation is penalised instead
(docs/solver_method.md), which removes the sag and lets the EE weight rise.

Why q_cost 20 and 2 SQP iterations, not more: tracking improves further with the EE weight (q_cost 60,
u_cost 3e-7, 1 iteration: 0.6-1.7 mm held-out, 0.2-0.7 mm in the bringup), but then the collision
rows (collision_spheres, admm) no longer hold the arm clear: test/test_ros_controller_collision.py's
sphere on the path was entered by 31 mm (q_cost 10 / u_cost 3e-7: 5.6 mm clearance, 20 / 2e-6 with
1 iteration: 12.8 mm; these weights with 2 iterations: 18.2 mm of the 20 mm margin, the test's bound
15 mm). The second SQP iteration doubles the solve (about 1 ms on iiwa14 at N 32).

Provenance (docs/benchmarks_arms.md, "Shipped BSQP weights per arm"): chosen with sweeps on
``gato.tasks.fig8_scenarios`` seeds 100, 101 and checked on seeds 200, 201 (not used in choosing) with
``python bench/fig8_heldout.py --robot R --seeds 200 201 --n 3 --params '<these>'``
(MPC_GATO, dt 0.01 s, N 32, limits admm; mean of 6 scenarios, reference weights in brackets):
iiwa14 2.84 mm (24.3), indy7 3.98 (43.0), fr3 4.23 (51.3), gen3 1.53 (20.6), ur5e 3.24 (48.1);
and through the ROS bringup (``scripts/sim.sh --robot R``: MuJoCo, lockstep, 10 s figure-8), mean
EE error: iiwa14 2.07 mm, indy7 0.69, fr3 1.94, gen3 1.23, ur5e 1.03 (reference weights: 16.1, 11.3,
20.4, 15.2, 11.9). The controller schema's defaults for these arms are this table
(gato_ros.param_controller; test/test_shipped_config.py), so the generated parameter files carry it.
One set fits all five arms; the table is per robot so that an arm can be retuned alone.

Units: q_cost / N_cost [1/m^2] (running / terminal EE position), qd_cost [s^2/rad^2],
u_cost [1/(N*m)^2], on the knot costs of docs/solver_method.md; max_sqp_iters per tick.
"""
from __future__ import annotations

__all__ = ["SHIPPED_WEIGHTS", "shipped_weights", "ORIENTATION_WEIGHTS", "POSE_EE_WEIGHT_SCALE",
           "pose_ee_weight_scale"]

_TUNED = {"u_ref": "gravity", "q_cost": 20.0, "N_cost": 13.0, "qd_cost": 8.0e-4, "u_cost": 2.0e-6,
          "max_sqp_iters": 2}

#: {robot: {SolverParams field: value}}: the cost weights of each arm's shipped controller
#: configuration (the fields not listed keep SolverParams' defaults).
SHIPPED_WEIGHTS = {robot: dict(_TUNED) for robot in ("iiwa14", "indy7", "fr3", "gen3", "ur5e")}


def shipped_weights(robot: str) -> dict:
    """A copy of the shipped cost weights of ``robot`` ({SolverParams field: value}); ValueError
    naming the robot and the arms that have weights when it has none."""
    try:
        return dict(SHIPPED_WEIGHTS[robot])
    except KeyError:
        raise ValueError(f"robot: no shipped BSQP weights for {robot!r} "
                         f"(arms with weights: {', '.join(SHIPPED_WEIGHTS)})") from None


#: EE orientation weights [1/rad^2] (running, terminal knots) the controller applies to a reference
#: window that carries orientations without a weight of its own (gato.planners.controller; the
#: solver's SolverParams() keep 0, the reference's position-only cost). Chosen on fig8 seed 100
#: (iiwa14, fr3; bench/bench_pose_fig8.py --seeds 100 --n 2 --rot 2 8 32): 8 keeps the mean
#: orientation error under 1 deg (0.13 / 0.14 deg; also at the scenarios' unstretched speed, where
#: 2 gives 1.2 deg) and the worst tick under 2 deg (2: 4.5 deg). Held out (seeds 300-303, 2
#: scenarios each, the sweep axis clear of the joint limits): 0.115 / 0.148 deg mean, worst tick
#: 0.55 / 0.56 deg (docs/benchmarks_arms.md, "Pose figure-8").
ORIENTATION_WEIGHTS = {"rot_cost": 8.0, "N_rot_cost": 8.0}


#: {robot: factor}: the EE position weights (q_cost, N_cost) of the controller's solves whose
#: reference window carries orientations are these times the shipped ones (MPCController
#: ``pose_ee_weight_scale``; gato.planners.pose_ee_scale); position-only solves keep the shipped
#: weights, bit for bit. Why: the pose path moves the joints ~2x faster and the terms the EE
#: position trades against lag more there (fr3 pose figure-8 at 1x: 1.92x the position-only error).
#: Chosen on fig8 seed 100 (x2: fr3 1.04x; x1.5 held out: fr3 1.26x) and checked on held-out seeds
#: (docs/benchmarks_arms.md "Pose figure-8": python bench/bench_pose_fig8.py --robots iiwa14 fr3 --seeds
#: 300 301 302 303 410 411 412 413 --n 2). The other arms were not measured on the pose figure-8: 1.
POSE_EE_WEIGHT_SCALE = {"iiwa14": 2.0, "fr3": 2.0}


def pose_ee_weight_scale(robot: str) -> float:
    """The shipped pose-window EE weight factor of ``robot`` (1 for an arm without one)."""
    return float(POSE_EE_WEIGHT_SCALE.get(robot, 1.0))
