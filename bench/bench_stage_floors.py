"""Benchmark (issue 37): each stage of the CPU solver against its floor, iiwa14 figure-8, one thread.

Per repeat and horizon, side by side on the same CPU: bench_solver.py's closed loop (BSQP 'best',
one SQP iteration per tick, 160 ticks) gives the median per-stage profile (``last_profile``, µs);
then each stage's floor is timed alone, on hot data, by bench/stage_floors.cpp (built here into
build/stage_floors/, linked against the installed gato._core_avx2, so the dynamics kernels are the
solver's own):

- KKT: the dynamics derivatives alone, ceil(N / W) calls of the W-lane lean kernel (W = 8 on an
  AVX-512 CPU), as ``linearize_lanes`` makes them;
- Schur complement and linear solve (``bdsv``): N Cholesky factorizations of nx x nx blocks
  (14 x 14) with the solver's own ``linsys::cholesky_lower``; also their flop count,
  N nx^3 / 3, at this core's measured peak (12 independent 4-wide FMA chains; the clock from a
  dependent-add chain), and the stage's own arithmetic as the solver writes it (factor_schur /
  matvec + factor_bdsv + backsolve_bdsv on N seeded knots, every block in cache);
- line search: the 8 step sizes' rollouts alone, one 8-lane integrator step per knot.

The ratio column is the median (min-max) of the per-repeat ratios (stage and floor seconds
apart: this shared host's speed drifts). Prints the table and, with --out, writes result.json.

    source scripts/activate.sh && python bench/bench_stage_floors.py [--repeats 5] [--horizons 32 64] [--cpu 0] [--out DIR]

Needs g++ (the floor library, ~20 s to build once per core) and gato's _core_avx2 (an AVX2 host).
"""
import argparse
import ctypes
import hashlib
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

import gato

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_solver import gato_closed_loop  # noqa: E402
from fig8_problem import DT, Q_START  # noqa: E402
from run_info import cpu_model, host, short_commit, write_result  # noqa: E402

SRC = HERE / "stage_floors.cpp"
BUILD = ROOT / "build" / "stage_floors"
CPP = ROOT / "src" / "gato_core" / "cpp"
NX = 14
REPS = 160  # floor calls per measurement (the closed loop's tick count)
_dp = ctypes.POINTER(ctypes.c_double)


def build_lib():
    """Build the floor library against the core gato imports (one library per core path, built
    again when the source or the core is newer); (core path, library path)."""
    core = Path(gato._core.__file__)
    if not core.name.startswith("_core_avx2"):
        sys.exit(f"needs gato._core_avx2 (imported: {core.name})")
    LIB = BUILD / f"libstage_floors_{hashlib.sha1(str(core).encode()).hexdigest()[:10]}.so"
    if LIB.exists() and LIB.stat().st_mtime > max(SRC.stat().st_mtime, core.stat().st_mtime):
        return core, LIB
    LIB.parent.mkdir(parents=True, exist_ok=True)
    eigen = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "include" / "eigen3"
    # _core_avx2's flags (src/gato_core/CMakeLists.txt: GATO_AVX2_OPTIONS, GATO_AVX2_DEFINITIONS).
    cmd = ["g++", "-std=c++17", "-O3", "-DNDEBUG", "-mavx2", "-mfma", "-DEIGEN_MAX_ALIGN_BYTES=16",
           "-DEIGEN_MALLOC_ALREADY_ALIGNED=1", "-fPIC", "-shared", f"-I{CPP / 'include'}", f"-I{CPP / 'src'}",
           f"-I{eigen}", str(SRC), str(core), "-o", str(LIB)]
    print("[floors] building", LIB.relative_to(ROOT), "...", flush=True)
    subprocess.run(cmd, check=True)
    return core, LIB


class Floors:
    def __init__(self, urdf, lib_path):
        self.lib = lib = ctypes.CDLL(str(lib_path))
        lib.floors_plant.restype = ctypes.c_void_p
        lib.floors_clock_ghz.restype = ctypes.c_double
        lib.floors_peak_gflops.restype = ctypes.c_double
        lib.floors_eet.restype = ctypes.c_long
        self.p = ctypes.c_void_p(lib.floors_plant(str(urdf).encode(), b"EE"))
        self.W = lib.floors_lanes(self.p)
        self.x0 = np.r_[Q_START, np.zeros(7)].astype(np.float64)
        self.out = np.zeros(REPS)

    def _med(self):
        return float(np.median(self.out))

    def clock_peak(self):
        return (self.lib.floors_clock_ghz(ctypes.c_long(50_000), 200),
                self.lib.floors_peak_gflops(ctypes.c_long(20_000), 200))

    def measure(self, N):
        """Floor times [us], median of REPS calls each."""
        L, o, x = self.lib, self.out.ctypes.data_as(_dp), self.x0.ctypes.data_as(_dp)
        r = {}
        L.floors_kkt(self.p, N, REPS, x, o)
        r["kkt_derivs"] = self._med()
        L.floors_ls(self.p, N, 1, ctypes.c_double(DT), REPS, x, o)  # 1: semi-implicit Euler
        r["ls_rollouts"] = self._med()
        L.floors_chol(N, 0, REPS, o)
        r["chol"] = self._med()
        L.floors_chol(N, 1, REPS, o)
        r["chol_eigen"] = self._med()
        L.floors_stage_replica(N, 0, REPS, o)
        r["schur_replica"] = self._med()
        L.floors_stage_replica(N, 1, REPS, o)
        r["bdsv_replica"] = self._med()
        two = np.zeros(REPS)
        r["eet_mismatch"] = int(L.floors_eet(N, REPS, 2000, o, two.ctypes.data_as(_dp)))
        r["eet_eigen"], r["eet_two"] = self._med(), float(np.median(two))
        return r


# stage key of the profile -> (label, floor key, what the floor is)
STAGES = [("kkt_us", "KKT (dynamics derivatives, cost)", "kkt_derivs", "dynamics derivatives alone ({calls} {W}-lane calls)"),
          ("schur_us", "Schur complement", "chol", "{N} Cholesky of 14 x 14 (`linsys::cholesky_lower`)"),
          ("linsys_us", "linear solve (`bdsv`)", "chol", "{N} Cholesky of 14 x 14 (`linsys::cholesky_lower`)"),
          ("linesearch_us", "line search (8 step sizes)", "ls_rollouts", "8-lane rollouts alone ({N} knots)")]
REPLICA = {"schur_us": "schur_replica", "linsys_us": "bdsv_replica"}


def flops_schur(nv):
    """Flops a knot of factor_schur as written (multiply and add counted apart; no zero-weight,
    gravity or exact-Hessian branch): the position block's Cholesky, L^-T and Y Y' (column-wise
    on whole columns, as small_dense.hpp), phi = A Q^-1, B R^-1, phi A', B R^-1 B', the rhs."""
    nx = 2 * nv
    chol = nv * nv * (nv - 1) + nv * nv  # whole-column left-looking Cholesky, and its scaling
    return (2 * chol + 2 * nv ** 3 + 2 * nx * nv * nv + nx * nv + 2 * nx * nv * nv + 2 * nx ** 3
            + 2 * nx * nx * nv + 2 * nx * nx + 2 * nx * nv + 2 * nv * nv + nv)


def flops_bdsv(nv):
    """Flops a knot of matvec + factor_bdsv + backsolve_bdsv as written: the residual's three
    block products, E = -phi L^-T, E E' (the full product), the whole-column Cholesky of the
    14 x 14 block, the two block-triangular sweeps."""
    nx = 2 * nv
    tri = nx * nx * (nx - 1) + nx * nx  # whole-column L^-T / Cholesky sweep
    return 3 * 2 * nx * nx + nx + tri + 2 * nx ** 3 + nx * nx + tri + 2 * (2 * nx * nx + nx * nx)


def mmm(a, f="{:.1f}"):
    a = np.asarray(a, dtype=float)
    return f"{f.format(np.median(a))} ({f.format(a.min())}-{f.format(a.max())})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--horizons", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--cpu", type=int, default=0, help="pin the process to this CPU (-1: no pinning)")
    ap.add_argument("--out", type=Path, help="folder for result.json (not docs/)")
    args = ap.parse_args()
    if args.cpu >= 0 and args.cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {args.cpu})
    os.environ["OMP_NUM_THREADS"] = "1"
    core, lib_path = build_lib()
    urdf = str(gato.robot_urdf("iiwa14"))
    fl = Floors(urdf, lib_path)
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    t_cpu0 = time.process_time()
    runs = {N: [] for N in args.horizons}
    clocks = []
    for rep in range(args.repeats):
        clocks.append(fl.clock_peak())
        for N in args.horizons:
            times, _, prof = gato_closed_loop(urdf, N, 1)
            floors = fl.measure(N)
            runs[N].append(dict(prof=prof, solve_us=float(np.median(times)) * 1e6, floors=floors))
            print(f"[floors] repeat {rep + 1}/{args.repeats} N={N}: stages "
                  + " ".join(f"{k[:-3]} {prof[k]:.1f}" for k, *_ in STAGES) + " us; floors "
                  + " ".join(f"{k} {v:.1f}" for k, v in floors.items()) + f" us; load {os.getloadavg()[0]:.2f}",
                  flush=True)
    clocks.append(fl.clock_peak())
    uptime1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    ghz = float(np.median([c[0] for c in clocks]))
    peak = float(np.median([c[1] for c in clocks]))
    lines = [f"### Stage floors, iiwa14 figure-8, one thread ({time.strftime('%Y-%m-%d')}, {short_commit()})\n",
             f"Machine: {cpu_model()}, {host()}; core {core.name} ({gato._core.ISA}), lean lanes W = {fl.W}; "
             f"measured clock {ghz:.2f} GHz, peak {peak:.1f} GFLOP/s ({peak / ghz:.1f} flops / cycle, 4-wide FMA). "
             f"Command: `python bench/bench_stage_floors.py --repeats {args.repeats}` "
             f"({'pinned to CPU %d' % args.cpu if args.cpu >= 0 else 'no pinning'}). "
             f"`uptime` at the start: {uptime0}; at the end: {uptime1}. "
             f"CPU seconds {time.process_time() - t_cpu0:.1f}.\n",
             "| N | stage | time [µs] | floor | floor [µs] | stage / floor | stage's arithmetic alone [µs] | "
             "stage / arithmetic |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    res = {"flops_per_knot": {"schur": flops_schur(7), "bdsv": flops_bdsv(7), "chol": NX ** 3 / 3},
           "machine": cpu_model(), "ghz": ghz, "peak_gflops": peak, "W": fl.W, "uptime": [uptime0, uptime1],
           "runs": {str(N): r for N, r in runs.items()}}
    for N in args.horizons:
        R = runs[N]
        calls = -(-N // fl.W)
        for key, label, fkey, what in STAGES:
            st = [r["prof"][key] for r in R]
            fv = [r["floors"][fkey] for r in R]
            ratio = [s / f for s, f in zip(st, fv)]
            rk = REPLICA.get(key)
            rep = (mmm([r["floors"][rk] for r in R]), mmm([r["prof"][key] / r["floors"][rk] for r in R], "{:.2f}")) \
                if rk else ("-", "-")
            lines.append(f"| {N} | {label} | {mmm(st)} | {what.format(N=N, W=fl.W, calls=calls)} | {mmm(fv)} | "
                         f"{mmm(ratio, '{:.2f}')}x | {rep[0]} | {rep[1]}{'x' if rk else ''} |")
        flops = N * NX ** 3 / 3
        lines.append(f"| {N} | (flop floor) | | {N} x 14^3 / 3 = {flops:.0f} flops at {peak:.1f} GFLOP/s | "
                     f"{flops / peak / 1e3:.2f} | | | |")
        for name, fk, rk in (("Schur", flops_schur(7), "schur_replica"), ("linear solve", flops_bdsv(7), "bdsv_replica")):
            ach = np.median([N * fk / r["floors"][rk] / 1e3 for r in R])
            lines.append(f"| {N} | ({name}: its flops as written) | | {N} x {fk} flops at {peak:.1f} GFLOP/s | "
                         f"{N * fk / peak / 1e3:.2f} | | {ach:.1f} GFLOP/s alone | |")
        lines.append(f"| {N} | solve (Python call) | {mmm([r['solve_us'] for r in R], '{:.0f}')} | | | | | |")
    lines.append("\nTimes: median of the repeats' medians (min-max over repeats); ratios: median (min-max) of the "
                 "per-repeat ratios. Eigen's LLT on the same blocks: "
                 + ", ".join(f"N = {N}: {mmm([r['floors']['chol_eigen'] for r in runs[N]])} µs" for N in args.horizons)
                 + ".")
    lines.append("\nfactor_bdsv's tmp -= E E', Eigen's 14 x 14 lazy product (before a4d47cc) -> the solver's "
                 "linsys::sub_aat_lower14 (two columns at a time, on and below the diagonal), N products: "
                 + ", ".join(f"N = {N}: {mmm([r['floors']['eet_eigen'] for r in runs[N]])} -> "
                             f"{mmm([r['floors']['eet_two'] for r in runs[N]])} µs, lower-triangle entries differing in "
                             f"any bit: {max(r['floors']['eet_mismatch'] for r in runs[N])} of {2000 * 105}"
                             for N in args.horizons) + ".")
    report = "\n".join(lines)
    print("\n" + report)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        res["report"] = report
        write_result(args.out, res)


if __name__ == "__main__":
    main()
