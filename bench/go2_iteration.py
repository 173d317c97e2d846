"""One SQP iteration of gato.floating.FloatingSQP on go2 standing, CPU time (issue 34, docs/floating_solver.md).

A warm, converged standing plan (x_ref at 0.30 m, the start 3 cm lower), then `solve(max_iters=1,
tol=0)` 3 rounds of 20: rollout, linearization, Riccati, line search, and the second linearization +
Riccati for the returned plan's gains. Run with OMP_NUM_THREADS=1; the crocoddyl peer is
bench/go2_croc_iteration.py (build/croc-venv/bin/python bench/go2_croc_iteration.py URDF 32).

usage: OMP_NUM_THREADS=1 python bench/go2_iteration.py
"""
import time
import numpy as np
from gato.floating import FloatingMPC
Q = np.array([0.0, 0.9, -1.8] * 4)
for N in (20, 32):
    mpc = FloatingMPC("go2", N=N, dt=0.02, max_iters=1)
    xr = np.concatenate([[0, 0, 0.30, 0, 0, 0, 1], Q, np.zeros(18)])
    mpc.set_standing(xr, mpc.contact_positions(xr[:19]))
    x0 = xr.copy(); x0[2] -= 0.03
    r = mpc.solve(x0, max_iters=30)
    W = r.W
    ts = []
    for rep in range(3):
        t = time.process_time()
        for _ in range(20):
            d = mpc.sqp.solve(x0, W, 1, 0.0)   # tol 0: always one full iteration + the final gains
        ts.append((time.process_time() - t) / 20)
    t = time.process_time()
    for _ in range(20):
        mpc.sqp.lq(x0, W)
    tl = (time.process_time() - t) / 20
    print(f"N={N}: one SQP iteration (solve max_iters=1: rollout, linearize, Riccati, line search, final gains) "
          f"{[round(1e3*v, 2) for v in ts]} ms CPU; lq (rollout + linearize) {1e3*tl:.2f} ms")
