"""Side-by-side view of payload experiment runs (bench_payload.py's ``<out>/payload.json``): for
each labelled run and configuration, the successes, the failed scenarios by name, and the
distribution of each scenario's closest approach to a joint-velocity limit (worst |dq| / limit of
the run); one figure with a box per (run, configuration).

    python bench/compare_payload.py --out cmp.png LABEL=path/payload.json [LABEL=...]
        [--seeds 30 31 ...]   (only these scenario seeds)
        [--configs "B=8 fe-swing" ...]   (only these configurations, bench_payload's labels)

Runs with the same label are pooled (e.g. seeds 0-19 and 20-29 run separately)."""
import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np


def load(entries, seeds=None, configs=None) -> "OrderedDict[str, list]":
    """{label: rows} from LABEL=path entries (the rows of each payload.json; same label pooled),
    only the scenario ``seeds`` and configuration labels ``configs`` given (None: all)."""
    runs: OrderedDict = OrderedDict()
    for e in entries:
        label, sep, path = e.partition("=")
        if not sep or not label or not path:
            raise SystemExit(f"compare_payload: expected LABEL=path/payload.json, got {e!r}")
        p = Path(path)
        if not p.is_file():
            raise SystemExit(f"compare_payload: {p}: no such file (bench_payload.py --out DIR writes DIR/payload.json)")
        rows = json.loads(p.read_text())["rows"]
        if seeds is not None:
            rows = [r for r in rows if int(r["seed"]) in seeds]
        if configs is not None:
            rows = [r for r in rows if r["label"] in configs]
        runs.setdefault(label, []).extend(rows)
    return runs


def table(runs) -> list:
    """Markdown lines: run, configuration, successes, failed scenarios, worst |dq| / limit (max / median)."""
    lines = ["| run | configuration | success | failed scenarios (seed/scenario: why) | worst \\|dq\\| / limit (max / median) |",
             "|---|---|---|---|---|"]
    for label, rows in runs.items():
        for cfg in sorted({r["label"] for r in rows}, key=lambda c: (int(c.split()[0][2:]), c)):
            rs = [r for r in rows if r["label"] == cfg]
            ok = sum(int(r["success"]) for r in rs)
            fails = [f"{r['scenario_id'].split('/', 2)[2]}: {r['reason']}" for r in rs if not r["success"]]
            qd = np.array([r["tick_qd_ratio"] for r in rs if r["tick_qd_ratio"] is not None], dtype=float)
            lines.append(f"| {label} | {cfg} | {ok}/{len(rs)} | {'; '.join(fails) or '-'} | "
                         f"{qd.max():.2f} / {np.median(qd):.2f} |")
    return lines


def plot(runs, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    boxes, names = [], []
    for label, rows in runs.items():
        for cfg in sorted({r["label"] for r in rows}, key=lambda c: (int(c.split()[0][2:]), c)):
            rs = [r for r in rows if r["label"] == cfg]
            boxes.append([r["tick_qd_ratio"] for r in rs if r["tick_qd_ratio"] is not None])
            ok = sum(int(r["success"]) for r in rs)
            names.append(f"{cfg}\n{label}\n{ok}/{len(rs)} ok")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(boxes)), 4.2))
    ax.boxplot(boxes, whis=(0, 100))
    for i, b in enumerate(boxes, start=1):
        over = [v for v in b if v > 1.0]
        ax.plot([i] * len(over), over, "rx", ms=7)
    ax.axhline(1.0, color="tab:red", ls="--", lw=1, label="velocity limit (x: a scenario over it)")
    ax.set_xticks(range(1, len(names) + 1), names, fontsize=8)
    ax.set_ylabel("worst |dq| / limit of a scenario")
    ax.set_title("payload pick-and-place, 15 kg pendulum: closest approach to a velocity limit\n"
                 "(box: quartiles, whiskers: min-max)", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="LABEL=path/payload.json")
    ap.add_argument("--out", required=True, help="figure path (.png)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--configs", nargs="+", default=None)
    a = ap.parse_args(argv)
    runs = load(a.runs, None if a.seeds is None else set(a.seeds), None if a.configs is None else set(a.configs))
    if not any(runs.values()):
        raise SystemExit("compare_payload: no rows (check --seeds / --configs)")
    print("\n".join(table(runs)))
    plot(runs, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
