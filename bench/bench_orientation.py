"""Cost of the EE orientation term per SQP iteration (issue 30): iiwa14 figure-8 windows,
B = 1, one SQP iteration per solve (warm, shifted), N = 32 and 64, the term off
(rot_cost = 0: today's cost) and on (rot_cost 5, N_rot_cost 50, a tool-down target).
Configurations interleaved in rounds; median and spread of SolveStats.solve_time_us.

    python bench/bench_orientation.py [--solves 300] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def run(N, rot, solves, seed=0):
    import gato
    urdf = str(gato.robot_urdf("iiwa14"))
    s = gato.BSQP(urdf, 1, N, 0.03125, ee_frame=gato.robot_info("iiwa14")["ee_frame"],
                  rot_cost=5.0 if rot else 0.0, N_rot_cost=50.0 if rot else 0.0)
    q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
    x = np.concatenate([q0, np.zeros(7)])
    p0 = s.ee_pos(q0)
    tool_down = np.array([np.pi, 0.0, 0.0])  # rotation vector of R = diag(1, -1, -1)
    times = []
    xu = None
    for t in range(solves):
        k = np.arange(N)
        ph = 2 * np.pi * (t + k) * 0.03125 / 4.0
        ref = np.zeros((N, 6))
        ref[:, 0] = p0[0]
        ref[:, 1] = p0[1] + 0.1 * np.sin(ph)
        ref[:, 2] = p0[2] + 0.1 * np.sin(2 * ph)
        ref[:, 3:6] = tool_down
        res = s.solve(x[None], ref.ravel()[None], xu)
        times.append(float(res.stats.solve_time_us))
        xu = res.xu
        st = s.nx + s.nu
        x = xu[0, st:st + s.nx].copy()
    return np.array(times[20:])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--solves", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    out = {}
    for r in range(a.rounds):
        for N in (32, 64):
            for rot in (False, True):
                out.setdefault((N, rot), []).append(float(np.median(run(N, rot, a.solves))))
    rows = []
    for N in (32, 64):
        off, on = np.array(out[(N, False)]), np.array(out[(N, True)])
        rows.append(dict(N=N, off_us=float(np.median(off)), off_range=[float(off.min()), float(off.max())],
                         on_us=float(np.median(on)), on_range=[float(on.min()), float(on.max())],
                         ratio=float(np.median(on / off))))
        print(f"N={N}: off {np.median(off):.1f} us [{off.min():.1f}-{off.max():.1f}], on {np.median(on):.1f} us "
              f"[{on.min():.1f}-{on.max():.1f}], ratio (median of per-round ratios) {rows[-1]['ratio']:.3f}")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
