"""Benchmark: BSQP solve time on the CUDA backend vs the CPU backend (iiwa14 figure-8 windows).

The same problem on both backends: B figure-8 windows (N knots, start 10 samples apart,
dt 0.01 s) around the EE at a fixed pose, one solve of ``--iters`` SQP iterations from
the hold trajectory, repeated ``--repeats`` times per (backend, B, dtype) after one
warm-up solve (the first CUDA solve also pays the context and the stack-limit set-up).
Prints and writes (``--out``, JSON) the median and spread (min, max) of the wall time
of BSQP.solve per configuration, and the CUDA-vs-CPU agreement of the plans (max |dxu|).

    source scripts/activate.sh && python bench/bench_cuda.py [--B 1 16 128] [--N 32] [--iters 1]
        [--repeats 20] [--out build/bench_cuda.json]

Needs gato._cuda and a CUDA device for the "cuda" rows (bench/gpu_check.sh runs it on
the GPU machine); without them only the CPU rows are measured and the reason is printed.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import gato
from gato.tasks import figure8

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_info import cpu_model  # noqa: E402

Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])


def problem(B, N, dt, dtype):
    """(x (B, 14), ref (B, 6N), xu (B, L)): figure-8 windows, the state at rest, the hold plan."""
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, N, dt)
    p0 = s.ee_pos(Q0)
    path = figure8(dt, 0.1, 0.08, p0, 0.0, 2.0, cycles=1 + (10 * B + N) * dt / 2.0)
    ref = np.zeros((B, N, 6))
    for b in range(B):
        ref[b, :, :3] = path[10 * b:10 * b + N]
    x = np.tile(np.r_[Q0, np.zeros(7)], (B, 1))
    xu = s.hold_trajectory(x) if B == 1 else np.vstack([s.hold_trajectory(x[:1])] * B)
    return x.astype(dtype), ref.reshape(B, 6 * N).astype(dtype), np.asarray(xu, dtype=dtype)


def time_solves(backend, B, N, dt, dtype, iters, repeats):
    s = gato.BSQP(gato.robot_urdf("iiwa14"), B, N, dt, max_sqp_iters=iters, dtype=dtype, backend=backend)
    x, ref, xu = problem(B, N, dt, dtype)
    out = s.solve(x, ref, xu_warm=xu)  # warm-up
    times = []
    for _ in range(repeats):
        s.reset_dual()
        s.reset_rho()
        t0 = time.perf_counter()
        out = s.solve(x, ref, xu_warm=xu)
        times.append(time.perf_counter() - t0)
    t = np.array(times) * 1e3
    return dict(backend=backend, B=B, N=N, dtype=np.dtype(dtype).name, iters=iters, repeats=repeats,
                median_ms=float(np.median(t)), min_ms=float(t.min()), max_ms=float(t.max())), np.asarray(out.xu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, nargs="+", default=[1, 16, 128])
    ap.add_argument("--N", type=int, default=32)
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    ok, dev = gato.cuda_backend.cuda_device()
    print(f"CPU: {cpu_model()}; CUDA: {dev}")
    rows = []
    for dtype in (np.float64, np.float32):
        for B in a.B:
            r_cpu, xu_cpu = time_solves("cpu", B, a.N, a.dt, dtype, a.iters, a.repeats)
            rows.append(r_cpu)
            print(json.dumps(r_cpu))
            if ok:
                r_gpu, xu_gpu = time_solves("cuda", B, a.N, a.dt, dtype, a.iters, a.repeats)
                r_gpu["max_abs_dxu_vs_cpu"] = float(np.abs(xu_gpu - xu_cpu).max())
                r_gpu["speedup_vs_cpu"] = r_cpu["median_ms"] / r_gpu["median_ms"]
                rows.append(r_gpu)
                print(json.dumps(r_gpu))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(dict(cpu=cpu_model(), cuda=dev, host=platform.node(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
