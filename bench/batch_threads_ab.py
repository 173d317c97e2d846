"""B = 32 on one vs two threads, side by side, for two gato cores (issue 37; docs/benchmarks_solver.md).

A is an older core installed into its own folder (``--site-a``, first on PYTHONPATH of its worker
processes, as in bench/bench_solver_ab.py; the folder needs the venv's ``cmeel.prefix`` beside
``gato``, e.g. a symlink); B is the gato this checkout's .venv imports. Per round each side runs
one process (A then B on odd rounds, B then A on even ones) that builds B = 32, N = 32 solvers on
one and on two threads (bench_solver.py's ``batch_throughput`` problem) and times them in
alternation, two passes: per pass the median of ``--reps`` solve calls (``reset()`` untimed, as
bench_solver.py does; ``--reset-timed`` times it with the call, as bench/thread_scaling.py does),
the voluntary context switches per two-thread solve (all threads, /proc/self/task/*/status) and
the CPU time per solve. Also ``reset_dual`` / ``reset()`` of the B = 32 solver (minimum of 7 x 200
calls). Reports the two-vs-one-thread ratio per pass, its median and range per side, and the load.
On a loaded host the ratios measure the host; the context switches and the minimum times do not.

    source scripts/activate.sh && python bench/batch_threads_ab.py --site-a /tmp/gato_ab_site --rounds 4 --reps 30
"""
import argparse
import json
import os
import subprocess
import sys
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent


def switches() -> int:
    n = 0
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    n += int(line.split()[1])
    return n


def worker(reps: int, reset_timed: bool) -> None:
    import numpy as np

    import gato
    sys.path.insert(0, str(HERE))
    from fig8_problem import DT, Q_START, WEIGHTS
    urdf = str(gato.robot_urdf("iiwa14"))
    out = {"core": gato._core.__file__}
    solvers = {}
    for th in (1, 2):
        s = gato.BSQP(urdf, 32, 32, DT, threads=th, integrator="semi_implicit", q_lim_cost=0.0, **WEIGHTS)
        rng = np.random.default_rng(0)
        x = np.stack([np.r_[Q_START + 0.05 * rng.standard_normal(7), np.zeros(7)] for _ in range(32)])
        ref = np.tile(np.r_[s.ee_pos(Q_START) + [0, 0.05, 0.05], 0, 0, 0], (32, 32))
        solvers[th] = (s, x, ref, s.solve(x, ref).xu)
    s2 = solvers[2][0]
    out["reset_dual_us"] = min(timeit.repeat(s2._s.reset_dual, number=200, repeat=7)) / 200 * 1e6
    out["reset_us"] = min(timeit.repeat(s2.reset, number=200, repeat=7)) / 200 * 1e6
    for th in (1, 2, 1, 2):
        s, x, ref, warm = solvers[th]
        ts = []
        c0, cpu0 = switches(), time.process_time()
        for _ in range(reps):
            if not reset_timed:
                s.reset()
            t0 = time.perf_counter()
            if reset_timed:
                s.reset()
            r = s.solve(x, ref, warm)
            ts.append(time.perf_counter() - t0)
        out.setdefault(f"t{th}", []).append(float(np.median(ts)))
        out.setdefault(f"cs{th}", []).append((switches() - c0) / reps)
        out.setdefault(f"cpu{th}", []).append((time.process_time() - cpu0) / reps)
        out["plan_sum"] = float(np.sum(r.xu))
    print(json.dumps(out))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), sys.argv[3] == "1")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site-a", required=True, help="folder holding the A core's gato package")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=30, help="solve calls per median")
    ap.add_argument("--reset-timed", action="store_true", help="time reset() with each call (thread_scaling.py)")
    args = ap.parse_args()
    import numpy as np
    ratios = {"A": [], "B": []}
    print(f"[batch_threads_ab] start {time.strftime('%H:%M:%S')}, load {os.getloadavg()}", flush=True)
    for r in range(args.rounds):
        line = [f"round {r + 1} {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}"]
        for side in (("A", "B") if r % 2 == 0 else ("B", "A")):
            env = dict(os.environ)
            if side == "A":
                env["PYTHONPATH"] = args.site_a + os.pathsep + env.get("PYTHONPATH", "")
            p = subprocess.run([sys.executable, __file__, "--worker", str(args.reps), str(int(args.reset_timed))],
                               env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"{side} worker failed:\n{p.stderr[-3000:]}")
            d = json.loads(p.stdout.strip().splitlines()[-1])
            x = [a / b for a, b in zip(d["t1"], d["t2"])]
            ratios[side] += x
            line.append(f"{side}: x{x[0]:.2f} / x{x[1]:.2f} (one thread {d['t1'][0] * 1e3:.2f} ms, two "
                        f"{d['t2'][0] * 1e3:.2f} ms; switches per two-thread solve {d['cs2'][0]:.1f} / "
                        f"{d['cs2'][1]:.1f}; reset_dual {d['reset_dual_us']:.1f} µs, reset() {d['reset_us']:.1f} µs; "
                        f"plan sum {d['plan_sum']:.17g})")
        print(" | ".join(line), flush=True)
    for side in ("A", "B"):
        v = ratios[side]
        print(f"{side}: B = 32 two / one thread, median x{np.median(v):.2f} (min {min(v):.2f}, max {max(v):.2f}, "
              f"{len(v)} passes)")
    print(f"[batch_threads_ab] end {time.strftime('%H:%M:%S')}, load {os.getloadavg()}")


if __name__ == "__main__":
    main()
