"""Is two-thread batch scaling limited by the host or by gato? (issue 3, docs/benchmarks.md)

Per round, each figure over the same short window (all processes of a pair start
on the same wall-clock instant):
  - a throughput-bound ALU loop (8 independent multiply-add chains, C) alone and
    as two processes pinned to cpu0 and cpu1;
  - gato B=32 on one thread pinned to cpu0, then to cpu1;
  - gato B=32 on two threads in one process;
  - two gato processes, B=32 on one thread each, pinned to cpu0 and cpu1.

    python bench/thread_scaling.py [--rounds 4] [--seconds 3]

Needs a C compiler (cc) for the ALU loop and `taskset` (util-linux).
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE.parent / "build" / "thread_scaling"
ALU_C = r"""
#include <stdio.h>
#include <time.h>
int main(void) {
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
  volatile double vm = 0.9999999, vc = 1e-7, vs = 1.5;
  double m = vm, c = vc, s0 = vs, s1 = vs + 1, s2 = vs + 2, s3 = vs + 3, s4 = vs + 4, s5 = vs + 5, s6 = vs + 6, s7 = vs + 7;
  for (long i = 0; i < 200000000L; i++) {
    s0 = s0 * m + c; s1 = s1 * m + c; s2 = s2 * m + c; s3 = s3 * m + c;
    s4 = s4 * m + c; s5 = s5 * m + c; s6 = s6 * m + c; s7 = s7 * m + c;
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.3f %g\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9, s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7);
  return 0;
}
"""


def worker(B, threads, t_start, seconds):
    """Solves per second of B entries on `threads` threads over [t_start, t_start + seconds]."""
    import numpy as np

    import gato
    sys.path.insert(0, str(HERE))
    from fig8_problem import DT, Q_START, WEIGHTS
    s = gato.BSQP(str(gato.robot_urdf("iiwa14")), B, 32, DT, threads=threads, integrator="semi_implicit",
                  q_lim_cost=0.0, **WEIGHTS)
    rng = np.random.default_rng(0)
    x = np.stack([np.r_[Q_START + 0.05 * rng.standard_normal(7), np.zeros(7)] for _ in range(B)])
    ref = np.tile(np.r_[s.ee_pos(Q_START) + [0, 0.05, 0.05], 0, 0, 0], (B, 32))
    warm = s.solve(x, ref).xu
    while time.time() < t_start:
        time.sleep(0.001)
    n, w0 = 0, time.perf_counter()
    while time.perf_counter() - w0 < seconds:
        s.reset()
        s.solve(x, ref, warm)
        n += B
    print(f"{n / (time.perf_counter() - w0):.0f}", flush=True)


def gato_runs(specs, seconds):
    """Start one worker per (cpu or None, B, threads) at the same instant; their solves/s."""
    t = time.time() + 3.0
    procs = []
    for cpu, B, threads in specs:
        cmd = [sys.executable, __file__, "--worker", str(B), str(threads), repr(t), str(seconds)]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    return [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "alu.c").write_text(ALU_C)
    alu = BUILD / "alu"
    subprocess.run(["cc", "-O2", "-fno-tree-vectorize", str(BUILD / "alu.c"), "-o", str(alu)], check=True)

    def alu_times(cpus):
        ps = [subprocess.Popen(["taskset", "-c", str(c), str(alu)], stdout=subprocess.PIPE, text=True) for c in cpus]
        return [float(p.communicate()[0].split()[0]) for p in ps]

    for r in range(args.rounds):
        print(f"=== round {r + 1}: {time.strftime('%H:%M:%S')}, load average {os.getloadavg()[0]:.2f}", flush=True)
        a1, a2 = alu_times([0]), alu_times([0, 1])
        print(f"ALU loop: alone {a1[0]:.3f} s; two processes {a2[0]:.3f} / {a2[1]:.3f} s")
        s0, = gato_runs([(0, 32, 1)], args.seconds)
        s1, = gato_runs([(1, 32, 1)], args.seconds)
        t2, = gato_runs([(None, 32, 2)], args.seconds)
        p0, p1 = gato_runs([(0, 32, 1), (1, 32, 1)], args.seconds)
        mean1 = (s0 + s1) / 2
        print(f"gato B=32, solves/s: one thread cpu0 {s0:.0f}, cpu1 {s1:.0f}; two threads (one process) {t2:.0f} "
              f"(x{t2 / mean1:.2f} the mean single); two processes {p0:.0f} + {p1:.0f} = {p0 + p1:.0f} "
              f"(x{(p0 + p1) / mean1:.2f})", flush=True)


if __name__ == "__main__":
    main()
