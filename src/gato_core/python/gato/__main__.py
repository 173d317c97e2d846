"""The ``gato`` command line: ``gato smoke`` (a solver smoke run) and friends.

``python -m gato --help`` lists the subcommands.
"""
from __future__ import annotations

import argparse
import sys
import time


def _smoke(args: argparse.Namespace) -> int:
    import numpy as np

    import gato

    urdf = gato.robot_urdf(args.robot)
    s = gato.BSQP(urdf, args.batch, args.N, args.dt, max_sqp_iters=args.iters)
    info = gato.robot_info(args.robot)
    # The registry's ready pose; a user-registered robot without one starts mid-range.
    q0 = np.asarray(info.get("q_ready", 0.5 * (s.limits["q_lo"] + s.limits["q_hi"])), dtype=float)
    x0 = np.r_[q0, np.zeros(s.nv)]
    goal = s.ee_pos(q0) + np.array([0.05, -0.05, 0.05])
    ref = np.tile(np.r_[goal, 0, 0, 0], s.N)
    print(f"gato {gato.__version__} smoke run: {args.robot} (nq={s.nq}, EE frame {info['ee_frame']}), "
          f"N={s.N}, dt={s.dt} s, B={s.batch_size}, {args.iters} SQP iterations")
    t = time.perf_counter()
    r = s.solve(x0, ref)
    wall = time.perf_counter() - t
    ee = s.ee_pos(r.xu[0, -s.nx:][:s.nq])
    print(f"  solve: {wall * 1e3:.2f} ms wall, {r.stats.solve_time_us} us in the solver")
    print(f"  merit {r.stats.initial_merit[0]:.4g} -> {r.stats.final_merit[0]:.4g}, "
          f"iterations {int(r.stats.sqp_iters[0])}, step sizes {np.round(r.stats.step_size[0], 3).tolist()}")
    print(f"  terminal EE error {np.linalg.norm(ee - goal) * 1e3:.1f} mm, first torque u0 = "
          f"{np.round(r.u0(0), 2).tolist()} N·m")
    ok = not r.diverged.any() and r.stats.final_merit[0] < r.stats.initial_merit[0]
    print("  OK" if ok else "  FAILED: the solve did not decrease the merit")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gato", description="gato: batched SQP MPC tools")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("smoke", help="solve one reaching problem and print the result")
    p.add_argument("--robot", default="iiwa14", help="registered robot (default iiwa14)")
    p.add_argument("--N", type=int, default=32, help="horizon knots (default 32)")
    p.add_argument("--dt", type=float, default=0.03125, help="knot spacing [s]")
    p.add_argument("--batch", type=int, default=1, help="batch size B")
    p.add_argument("--iters", type=int, default=20, help="SQP iterations")
    p.set_defaults(func=_smoke)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"gato {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
