"""Interleaved A/B of two gato cores on bench_solver.py's closed loop, plus a bit-identity check.

A is an older core installed into its own folder (``--site-a``, put first on PYTHONPATH of
its worker processes); B is the gato this checkout's .venv imports. Each repeat runs one
worker process per side (A then B on even repeats, B then A on odd ones, so a drift of the
host's speed hits both), each running ``bench_solver.gato_closed_loop`` (line search 'best',
160 ticks) for every horizon. Reported per horizon: the per-solve time and the per-stage
profile (``SolveResult`` profile, µs) as the median over repeats of each run's median, the
B / A ratio as the median (min-max) of the per-repeat ratios, and whether every plan of the
closed loop was bit-identical on both sides. ``--identity`` also runs a suite of solver
scenarios (every cost term and barrier, the weight tables, integrators, line searches,
linear solvers, row-group mechanisms, float32, B > 1, several SQP iterations, a 6-DoF and
an 8-DoF dynamic-size robot) on both sides and compares plans, statistics, merits and KKT
blocks byte for byte.

Building the A core (once; ~10 min on 2 cores):

    git archive <commit> src/gato_core | tar -x -C /tmp/gato_ab
    (configure /tmp/gato_ab/src/gato_core with pip -Cbuild-dir=/tmp/gato_ab_build, or cmake)
    ninja -C /tmp/gato_ab_build _core_avx2
    site=/tmp/gato_ab_site; mkdir -p $site; cp -r /tmp/gato_ab/src/gato_core/python/gato $site/
    cp /tmp/gato_ab_build/_core_avx2*.so $site/gato/; cp -r .venv/lib/python3*/site-packages/gato/robots/urdf $site/gato/robots/

    source scripts/activate.sh && python bench/bench_solver_ab.py --site-a /tmp/gato_ab_site --repeats 15 --identity
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STAGES = ("kkt_us", "schur_us", "linsys_us", "linesearch_us")


# ------------------------------------------------------------------ workers (one side each)
def worker_bench(horizons):
    sys.path.insert(0, str(HERE))
    import gato
    from bench_solver import gato_closed_loop

    urdf = str(gato.robot_urdf("iiwa14"))
    out = {"core": gato._core.__name__, "file": gato.__file__}
    for N in horizons:
        h = hashlib.sha256()
        times, err, prof = gato_closed_loop(urdf, N, 1, digest=h)
        out[str(N)] = dict(median_ms=float(np.median(times) * 1e3), err_mm=err * 1e3, prof=prof, digest=h.hexdigest())
    return out


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()


def _stats_arrays(st):
    names = ("sqp_iters", "kkt_converged", "initial_merit", "final_merit", "pcg_iters", "min_merit", "step_size",
             "ls_num_iters", "row_max_violation", "row_sum_violation", "admm_r_prim", "admm_r_dual", "admm_iters",
             "admm_linsys_iters")
    return [(n, np.asarray(getattr(st, n), dtype=np.float64)) for n in names if getattr(st, n, None) is not None]


def worker_identity():
    import gato

    sys.path.insert(0, str(ROOT / "test"))
    from test_lean_dynamics import synthetic_tree_urdf  # an 8-DoF branching tree (dynamic-size kernels)

    tree = synthetic_tree_urdf(Path(tempfile.mkdtemp()) / "tree.urdf")
    out = {}

    def scenario(name, robot, *, B=2, N=16, dtype=np.float64, solves=6, setup=None, ee_frame=None, **kw):
        urdf = tree if robot == "tree" else gato.robot_urdf(robot)
        try:
            s = gato.BSQP(urdf, B, N, 0.02, dtype=dtype, ee_frame=ee_frame, **kw)
        except Exception as exc:  # a side without this API: reported, compared as text
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            return
        if setup:
            setup(s)
        rng = np.random.default_rng(7)
        lim = s.limits
        q_mid = 0.5 * (lim["q_lo"] + lim["q_hi"])
        q0 = q_mid + 0.2 * rng.standard_normal((B, s.nq))
        x = np.hstack([q0, 0.3 * rng.standard_normal((B, s.nv))]).astype(dtype)
        ee0 = np.stack([s.ee_pos(q) for q in q0])
        goal = ee0 + 0.15 * rng.standard_normal((B, 3))
        ref = np.zeros((B, N, 6))
        ref[:, :, :3] = goal[:, None, :]
        ref = ref.reshape(B, -1).astype(dtype)
        warm = None
        plans, stats, detail = hashlib.sha256(), hashlib.sha256(), {}
        for _ in range(solves):
            r = s.solve(x, ref, warm)
            xu = np.asarray(r.xu)
            plans.update(xu.tobytes())
            for n, a in _stats_arrays(r.stats):
                stats.update(a.tobytes())
                detail.setdefault(n, []).append([float(v).hex() for v in a.ravel()])
            warm = xu
            x = xu[:, s.nx + s.nu:2 * s.nx + s.nu].copy()  # knot 1 of the plan: the next measured state
        merit = np.asarray(s.merit(warm, x, ref))
        kkt = s.debug_setup_kkt(warm, x, ref)
        out[name] = dict(plans=plans.hexdigest(), stats=stats.hexdigest(), stats_detail=detail, merit=_digest(merit),
                         merit_values=[float(m) for m in merit.ravel()],
                         kkt=_digest(*[kkt[k] for k in sorted(kkt)]),
                         kkt_blocks={k: _digest(kkt[k]) for k in sorted(kkt)})

    def weights(s):
        s.set_cost_weights(vel_lim_cost=1e-3, ctrl_lim_cost=1e-4)
        s.set_q_pos_cost(np.linspace(0.1, 0.5, s.nq))
        s.set_q_nom(0.1 * np.ones(s.nq))

    def table(s):
        w = np.column_stack([np.linspace(1, 4, s.N), np.linspace(0.01, 0.05, s.N), np.linspace(1e-5, 1e-4, s.N)])
        s.set_cost_weights_per_knot(w)

    def u_vec(s):
        table(s)
        s.set_u_cost_vec(np.linspace(1e-6, 1e-4, s.nv))

    scenario("iiwa14 defaults euler 3 iters", "iiwa14", max_sqp_iters=3)
    scenario("iiwa14 all barriers posture semi-implicit first", "iiwa14", setup=weights, integrator="semi_implicit",
             line_search="first", max_sqp_iters=2)
    scenario("iiwa14 all barriers posture semi-implicit best", "iiwa14", setup=weights, integrator="semi_implicit",
             max_sqp_iters=2)
    scenario("iiwa14 knot table rk4", "iiwa14", setup=table, integrator="rk4", max_sqp_iters=2)
    scenario("iiwa14 u vector pcg", "iiwa14", setup=u_vec, linsys="pcg", max_sqp_iters=2)
    scenario("iiwa14 float32 barriers", "iiwa14", setup=weights, dtype=np.float32, max_sqp_iters=2)
    scenario("iiwa14 zero weights", "iiwa14", qd_cost=0.0, u_cost=0.0, q_lim_cost=0.0, max_sqp_iters=2)
    scenario("indy7 barriers", "indy7", setup=weights, B=3, max_sqp_iters=2)
    scenario("tree 8-DoF barriers", "tree", setup=weights, ee_frame="ee_link", max_sqp_iters=2)
    scenario("tree 8-DoF rk4 table", "tree", setup=table, ee_frame="ee_link", integrator="rk4")
    scenario("iiwa14 limit barrier rows", "iiwa14", setup=lambda s: s.enable_limit_barrier(), max_sqp_iters=2)
    scenario("iiwa14 limit ADMM rows", "iiwa14", setup=lambda s: s.enable_limit_admm(), max_sqp_iters=2)
    scenario("iiwa14 limit AL rows", "iiwa14", setup=lambda s: s.enable_limit_al(), max_sqp_iters=2)
    scenario("iiwa14 long horizon", "iiwa14", N=64, B=1, setup=weights)
    return out


# ------------------------------------------------------------------ driver
def run_worker(side, site_a, mode, horizons):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if side == "A":
        env["PYTHONPATH"] = site_a + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, "--horizons", *map(str, horizons)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"worker {side} {mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(runs_a, runs_b, horizons):
    lines = ["| N | quantity | A (median of runs) | B (median of runs) | B / A, median (min-max) of the per-repeat ratios |",
             "| --- | --- | --- | --- | --- |"]
    identical = {}
    for N in map(str, horizons):
        for q in ("median_ms",) + STAGES:
            a = np.array([r[N][q] if q == "median_ms" else r[N]["prof"][q] for r in runs_a])
            b = np.array([r[N][q] if q == "median_ms" else r[N]["prof"][q] for r in runs_b])
            ratio = b / a
            unit = "solve [ms]" if q == "median_ms" else q.replace("_us", " [µs]")
            fmt = "{:.3f}" if q == "median_ms" else "{:.0f}"
            lines.append(f"| {N} | {unit} | {fmt.format(np.median(a))} ({fmt.format(a.min())}-{fmt.format(a.max())}) | "
                         f"{fmt.format(np.median(b))} ({fmt.format(b.min())}-{fmt.format(b.max())}) | "
                         f"{np.median(ratio):.3f} ({ratio.min():.2f}-{ratio.max():.2f}) |")
        digests = {r[N]["digest"] for r in runs_a} | {r[N]["digest"] for r in runs_b}
        identical[N] = len(digests) == 1
    return "\n".join(lines), identical


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site-a", help="folder holding the A core's gato package")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--horizons", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--identity", action="store_true", help="also compare the scenario suite byte for byte")
    ap.add_argument("--worker", choices=("bench", "identity"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "bench":
        print(json.dumps(worker_bench(args.horizons)))
        return
    if args.worker == "identity":
        print(json.dumps(worker_identity()))
        return
    if not args.site_a:
        ap.error("--site-a is required")
    print(f"[ab] load average at start: {os.getloadavg()}", flush=True)
    if args.identity:
        ida, idb = (run_worker(s, args.site_a, "identity", args.horizons) for s in ("A", "B"))
        for name in ida:
            same = {k: ida[name].get(k) == idb.get(name, {}).get(k) for k in ("error", "plans", "stats", "merit", "kkt")}
            diff = [k for k, v in same.items() if not v]
            print(f"[ab] identity {name}: {'identical' if not diff else 'DIFFERS in ' + ', '.join(diff)}")
            if diff and "kkt" in diff:
                print("      kkt blocks differing:", [k for k in ida[name]["kkt_blocks"]
                                                       if ida[name]["kkt_blocks"][k] != idb[name]["kkt_blocks"][k]])
            if diff and "stats" in diff:
                for n, va in ida[name]["stats_detail"].items():
                    vb = idb[name]["stats_detail"].get(n)
                    if va != vb:
                        pairs = [(float.fromhex(x), float.fromhex(y)) for ra, rb in zip(va, vb or [])
                                 for x, y in zip(ra, rb) if x != y]
                        print(f"      stats.{n} differs: {pairs[:4]}{' ...' if len(pairs) > 4 else ''}")
            if diff and "merit" in diff:
                print("      merits A", ida[name]["merit_values"], "B", idb[name]["merit_values"])
    runs_a, runs_b = [], []
    for rep in range(args.repeats):
        order = ("A", "B") if rep % 2 == 0 else ("B", "A")
        for side in order:
            r = run_worker(side, args.site_a, "bench", args.horizons)
            (runs_a if side == "A" else runs_b).append(r)
        print(f"[ab] repeat {rep + 1}/{args.repeats} ({'/'.join(order)}): " + ", ".join(
            f"N={N} A {runs_a[-1][str(N)]['median_ms']:.3f} B {runs_b[-1][str(N)]['median_ms']:.3f} ms"
            for N in args.horizons) + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    if not args.repeats:
        return
    table, identical = summarize(runs_a, runs_b, args.horizons)
    print(f"\nA: {runs_a[0]['file']} ({runs_a[0]['core']}); B: {runs_b[0]['file']} ({runs_b[0]['core']})")
    print(table)
    print("closed-loop plans bit-identical A vs B (every tick, every repeat): "
          + ", ".join(f"N={N}: {v}" for N, v in identical.items()))
    print(f"[ab] load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
