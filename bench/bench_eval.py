"""Throughput of gato eval: episodes per minute with 1 and 2 workers, on the local process
pool and on a local Ray instance (ray.init(num_cpus=workers)), for one fixed sweep of iiwa14
figure-8 episodes (bsqp, node defaults). Each configuration runs the same episodes into a
fresh folder (no resume); the figure is episodes / wall time of the whole run_eval call
(pool or Ray start-up included), so short sweeps understate the steady rate.

    python bench/bench_eval.py --episodes 8 --duration 4.0 --repeats 1

Prints a markdown table (and --json PATH writes the numbers) with the machine's load
average before and after: on a shared machine the rate depends on what else runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def _spec(n, duration):
    from gato.eval import parse_spec

    return parse_spec(dict(name="bench", robots=["iiwa14"], planners=[dict(label="default", planner="bsqp")],
                           task=dict(kind="fig8", seeds=[0], n=n, options=dict(ratio_range=[0.6, 0.9])),
                           episode=dict(duration=duration), metrics=["mean_tracking_error"]))


def _one(spec, workers, kind):
    from gato.eval import run_eval

    with tempfile.TemporaryDirectory() as d:
        if kind == "ray":
            import ray

            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        try:
            t0 = time.perf_counter()
            r = run_eval(spec, d, workers=workers, ray="local" if kind == "ray" else None, progress=False)
            wall = time.perf_counter() - t0
        finally:
            if kind == "ray":
                ray.shutdown()
    assert all(x["status"] == "ok" for x in r["rows"]), [x["error"] for x in r["rows"]]
    ep_wall = [x["wall_s"] for x in r["rows"]]
    return dict(wall_s=wall, per_min=60.0 * len(r["rows"]) / wall, episode_wall_median_s=statistics.median(ep_wall))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--duration", type=float, default=4.0, help="simulated seconds per episode")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    spec = _spec(args.episodes, args.duration)
    spec.episodes()  # scenario generation once, outside the timings' first run
    load0 = os.getloadavg()
    res = {}
    for kind in ("local", "ray"):
        for w in (1, 2):
            runs = [_one(spec, w, kind) for _ in range(args.repeats)]
            res[f"{kind}-{w}"] = dict(per_min=[r["per_min"] for r in runs], wall_s=[r["wall_s"] for r in runs],
                                      episode_wall_median_s=[r["episode_wall_median_s"] for r in runs])
            print(f"{kind} {w} workers: {[round(x, 1) for x in res[f'{kind}-{w}']['per_min']]} episodes/min",
                  flush=True)
    load1 = os.getloadavg()
    print(f"\n{args.episodes} episodes of {args.duration} s (iiwa14 figure-8, bsqp node defaults), "
          f"{args.repeats} repeat(s); load average before {load0[0]:.1f}, after {load1[0]:.1f} "
          f"({os.cpu_count()} CPUs)\n")
    print("| executor | workers | episodes/min (median) | spread | run wall [s] | episode wall median [s] |")
    print("|---|---|---|---|---|---|")
    for k, v in res.items():
        kind, w = k.split("-")
        pm = v["per_min"]
        print(f"| {kind} | {w} | {statistics.median(pm):.1f} | {min(pm):.1f}-{max(pm):.1f} | "
              f"{statistics.median(v['wall_s']):.1f} | {statistics.median(v['episode_wall_median_s']):.2f} |")
    for kind in ("local", "ray"):
        s = statistics.median(res[f"{kind}-2"]["per_min"]) / statistics.median(res[f"{kind}-1"]["per_min"])
        print(f"{kind}: 2 workers / 1 worker = {s:.2f}x")
    for w in (1, 2):
        o = statistics.median(res[f"local-{w}"]["per_min"]) / statistics.median(res[f"ray-{w}"]["per_min"]) - 1
        print(f"{w} workers: Ray overhead over the local pool {100 * o:+.0f} %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), load_before=load0, load_after=load1, results=res), f, indent=1)


if __name__ == "__main__":
    main()
