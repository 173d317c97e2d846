"""crocoddyl FDDP on go2 standing, one iteration's CPU time: the peer of bench/go2_iteration.py.

Not the same formulation: crocoddyl's contact forward dynamics (4 ContactModel3D, LOCAL_WORLD_ALIGNED,
Baumgarte gains (0, 50), controls = the 12 torques) against gato's contact wrenches as controls
(36 per knot) with penalties; the same robot, N, dt = 0.02, symplectic Euler, state weights (terminal
x5) and torque weight 1e-3, x_ref at 0.30 m, start 3 cm lower. Converged first (30 iterations), then
solve(maxiter=1) warm, 3 rounds of 20, problem.nthreads = 1. Runs in build/croc-venv (bench/bench_solver.py
creates it).

usage: OMP_NUM_THREADS=1 build/croc-venv/bin/python bench/go2_croc_iteration.py GO2_URDF 32
"""
import sys, time
import numpy as np
import pinocchio as pin
import crocoddyl
urdf, N = sys.argv[1], int(sys.argv[2])
dt = 0.02
model = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
data = model.createData()
q0 = np.concatenate([[0, 0, 0.30, 0, 0, 0, 1], [0.0, 0.9, -1.8] * 4])
x0 = np.concatenate([q0, np.zeros(model.nv)])
pin.framesForwardKinematics(model, data, q0)
state = crocoddyl.StateMultibody(model)
act = crocoddyl.ActuationModelFloatingBase(state)
feet = ["FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint"]
def running(terminal=False):
    contacts = crocoddyl.ContactModelMultiple(state, act.nu)
    for f in feet:
        fid = model.getFrameId(f)
        c = crocoddyl.ContactModel3D(state, fid, data.oMf[fid].translation.copy(), pin.LOCAL_WORLD_ALIGNED, act.nu, np.array([0.0, 50.0]))
        contacts.addContact(f, c)
    costs = crocoddyl.CostModelSum(state, act.nu)
    w = np.concatenate([[1e3, 1e3, 3e3, 3e3, 3e3, 3e3], [10.0] * 12, [30.0] * 6, [0.1] * 12])
    xr = crocoddyl.ResidualModelState(state, x0, act.nu)
    costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(w * (5 if terminal else 1)), xr), 1.0)
    if not terminal:
        costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, act.nu)), 1e-3)
    d = crocoddyl.DifferentialActionModelContactFwdDynamics(state, act, contacts, costs, 0.0, True)
    return crocoddyl.IntegratedActionModelEuler(d, 0.0 if terminal else dt)
problem = crocoddyl.ShootingProblem(x0, [running() for _ in range(N - 1)], running(True))
problem.nthreads = 1
xs0 = x0.copy(); xs0[2] -= 0.03
problem.x0 = xs0
solver = crocoddyl.SolverFDDP(problem)
solver.solve([xs0] * N, problem.quasiStatic([xs0] * (N - 1)), 30)
xs, us = list(solver.xs), list(solver.us)
ts = []
for rep in range(3):
    t = time.process_time()
    for _ in range(20):
        solver.solve(xs, us, 1, False)
    ts.append((time.process_time() - t) / 20)
print(f"crocoddyl FDDP N={N}: one iteration (solve maxiter=1, warm) {[round(1e3 * v, 2) for v in ts]} ms CPU; converged-run iters {solver.iter}")
