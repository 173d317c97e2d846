"""Throughput of gato eval: episodes per minute with 1 and 2 workers, on the local process
pool and on a local Ray instance (ray.init(num_cpus=workers)), for one fixed sweep of iiwa14
figure-8 episodes (bsqp, node defaults). Each configuration runs the same episodes into a
fresh folder (no resume); the figure is episodes / wall time of the whole run_eval call: the
local pool's start-up (spawned workers importing gato) is in it, ray.init is not (on a
cluster Ray is already running; its time is printed beside), so short sweeps understate
the local pool's steady rate. The Ray-vs-pool comparison is printed both ways: without
ray.init (Ray already running, as on a cluster) and with it (a fresh start-up on each side,
the like-for-like comparison on one machine, issue 32).

    python bench/bench_eval.py --episodes 6 --duration 10.0 --repeats 3 [--out result.md]

Prints a markdown table (--out writes it to a file of its own, never into docs/, --json PATH
writes the numbers) with the machine's 1-minute load average beside every figure (the
median of the load read after each run of that configuration) and before / after the whole
benchmark: on a shared machine the rate depends on what else runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from run_info import stamp
from benchmarks_doc import write_result


def _spec(n, duration):
    from gato.eval import parse_spec

    return parse_spec(dict(name="bench", robots=["iiwa14"], planners=[dict(label="default", planner="bsqp")],
                           task=dict(kind="fig8", seeds=[0], n=n, options=dict(ratio_range=[0.6, 0.9])),
                           episode=dict(duration=duration), metrics=["mean_tracking_error"]))


def _one(spec, workers, kind):
    from gato.eval import run_eval

    with tempfile.TemporaryDirectory() as d:
        init_s = 0.0
        if kind == "ray":
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            init_s = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            r = run_eval(spec, d, workers=workers, ray="local" if kind == "ray" else None, progress=False)
            wall = time.perf_counter() - t0
        finally:
            if kind == "ray":
                ray.shutdown()
    assert all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    ep_wall = [x["wall_s"] for x in r["rows"]]
    return dict(wall_s=wall, per_min=60.0 * len(r["rows"]) / wall, episode_wall_median_s=statistics.median(ep_wall),
                init_s=init_s, wall_with_init_s=wall + init_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--duration", type=float, default=12.0, help="simulated seconds per episode")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--out", default=None, help="write the table as a Markdown section to this file (not in docs/)")
    args = ap.parse_args()
    spec = _spec(args.episodes, args.duration)
    spec.episodes()  # scenario generation once, outside the timings' first run
    load0 = os.getloadavg()
    res = {f"{k}-{w}": dict(per_min=[], wall_s=[], episode_wall_median_s=[], init_s=[], wall_with_init_s=[],
                            load=[])
           for k in ("local", "ray") for w in (1, 2)}
    # Interleaved (one run of each configuration per round): a load change on the shared machine
    # then hits every configuration alike instead of the ones that happened to run during it.
    for rep in range(args.repeats):
        for k in res:
            kind, w = k.split("-")
            r = _one(spec, int(w), kind)
            r["load"] = os.getloadavg()[0]
            for f in res[k]:
                res[k][f].append(r[f])
            print(f"round {rep + 1}: {kind} {w} workers: {r['per_min']:.1f} episodes/min "
                  f"(load {r['load']:.1f})", flush=True)
    load1 = os.getloadavg()
    lines = [f"{args.episodes} episodes of {args.duration} s (iiwa14 figure-8, bsqp node defaults), "
             f"{args.repeats} repeat(s); load average (1 min) before {load0[0]:.1f}, after {load1[0]:.1f} "
             f"({os.cpu_count()} CPUs)", "",
             "| executor | workers | episodes/min (median) | spread | load (1 min) beside it, median (range) "
             "| run wall [s] | episode wall median [s] | ray.init [s] (not in the rate) |",
             "|---|---|---|---|---|---|---|---|"]
    for k, v in res.items():
        kind, w = k.split("-")
        pm, ld = v["per_min"], v["load"]
        lines.append(f"| {kind} | {w} | {statistics.median(pm):.1f} | {min(pm):.1f}-{max(pm):.1f} | "
                     f"{statistics.median(ld):.1f} ({min(ld):.1f}-{max(ld):.1f}) | "
                     f"{statistics.median(v['wall_s']):.1f} | {statistics.median(v['episode_wall_median_s']):.2f} | "
                     f"{statistics.median(v['init_s']):.1f} |")
    lines.append("")
    for kind in ("local", "ray"):
        s = statistics.median(res[f"{kind}-2"]["per_min"]) / statistics.median(res[f"{kind}-1"]["per_min"])
        lines.append(f"- {kind}: 2 workers / 1 worker = {s:.2f}x (target >= 1.8x)")
    for w in (1, 2):
        o = statistics.median(res[f"local-{w}"]["per_min"]) / statistics.median(res[f"ray-{w}"]["per_min"]) - 1
        # both start-ups timed: the pool's is inside its run_eval call, Ray's is ray.init + its call
        oi = statistics.median(res[f"ray-{w}"]["wall_with_init_s"]) / statistics.median(res[f"local-{w}"]["wall_s"]) - 1
        lines.append(f"- {w} workers: Ray overhead over the local pool {100 * o:+.0f} % without ray.init (Ray "
                     f"already running), {100 * oi:+.0f} % with it (both start-ups timed) (target <= 10 % for "
                     "episodes of >= 2 s)")
    print("\n" + "\n".join(lines))
    if args.out:
        head = (f"\n## gato eval throughput: local process pool vs Ray, 1 and 2 workers "
                f"({stamp()})\n\n"
                f"`python bench/bench_eval.py --episodes {args.episodes} --duration {args.duration} "
                f"--repeats {args.repeats}` (the 4 configurations interleaved in each round; rate = episodes / "
                "wall time of the run_eval call, local worker start-up inside, ray.init outside). On a loaded "
                "machine the load column says how far the figures are from an idle machine's.\n\n")
        write_result(args.out, head + "\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), load_before=load0, load_after=load1, results=res), f, indent=1)


if __name__ == "__main__":
    main()
