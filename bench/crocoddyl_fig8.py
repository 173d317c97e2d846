"""crocoddyl FDDP peer of bench/bench_solver.py: one FDDP iteration per MPC tick on
the same figure-8 problem. Runs in its own venv (crocoddyl 3.2.1 needs pin 4.0.0):

    build/croc-venv/bin/python bench/crocoddyl_fig8.py URDF N REPEATS

Prints one JSON line: per-tick solve times [s] and the tracking error.
"""
import json
import sys
import time

import crocoddyl
import numpy as np
import pinocchio as pin

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fig8_problem import DT, Q_START, TICKS, WEIGHTS, figure8, ref_window  # noqa: E402


def build(model, N, center):
    state = crocoddyl.StateMultibody(model)
    act = crocoddyl.ActuationModelFull(state)
    fid = model.getFrameId("EE")
    nv = model.nv

    def knot(terminal, target):
        costs = crocoddyl.CostModelSum(state, nv)
        track = crocoddyl.ResidualModelFrameTranslation(state, fid, target, nv)
        costs.addCost("ee", crocoddyl.CostModelResidual(state, track),
                      WEIGHTS["N_cost"] if terminal else WEIGHTS["q_cost"])
        vel = crocoddyl.CostModelResidual(
            state, crocoddyl.ActivationModelWeightedQuad(np.r_[np.zeros(nv), np.ones(nv)]),
            crocoddyl.ResidualModelState(state, np.zeros(2 * nv), nv))
        costs.addCost("qd", vel, WEIGHTS["qd_cost"])
        if not terminal:
            costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, nv)),
                          WEIGHTS["u_cost"])
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else DT)

    targets = ref_window(center, 0.0, N)
    running = [knot(False, targets[k]) for k in range(N - 1)]
    terminal = knot(True, targets[N - 1])
    x0 = np.r_[Q_START, np.zeros(nv)]
    problem = crocoddyl.ShootingProblem(x0, running, terminal)
    problem.nthreads = 1  # one thread, like gato's B = 1 run
    return problem, running + [terminal]


def main():
    urdf, N, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    fid = model.getFrameId("EE")
    pin.framesForwardKinematics(model, data, Q_START)
    center = data.oMf[fid].translation.copy()
    times, errs = [], []
    for _ in range(repeats):
        problem, knots = build(model, N, center)
        solver = crocoddyl.SolverFDDP(problem)
        x = np.r_[Q_START, np.zeros(model.nv)]
        xs = [x.copy() for _ in range(N)]
        us = [np.zeros(model.nv) for _ in range(N - 1)]
        for tick in range(TICKS):
            t0 = tick * DT
            for k, p in enumerate(ref_window(center, t0, N)):
                knots[k].differential.costs.costs["ee"].cost.residual.reference = p
            problem.x0 = x
            xs[0] = x
            start = time.perf_counter()
            solver.solve(xs, us, 1, False)
            times.append(time.perf_counter() - start)
            u = solver.us[0].copy()
            # Plant: the same model, semi-implicit Euler over the control period.
            a = pin.aba(model, data, x[:7], x[7:], u)
            v = x[7:] + DT * a
            x = np.r_[x[:7] + DT * v, v]
            pin.framesForwardKinematics(model, data, x[:7])
            errs.append(np.linalg.norm(data.oMf[fid].translation - figure8(center, (tick + 1) * DT)))
            # Warm start: shift by one knot, repeat the last.
            xs = list(solver.xs[1:]) + [solver.xs[-1]]
            us = list(solver.us[1:]) + [solver.us[-1]]
    print(json.dumps({"times": times, "mean_err": float(np.mean(errs)), "crocoddyl": crocoddyl.__version__,
                      "pinocchio": pin.__version__}))


if __name__ == "__main__":
    main()
