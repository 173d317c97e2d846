"""The outputs of a sweep, rebuilt from its episode rows (gato.eval.runner.EpisodeStore):

- ``results.parquet`` / ``results.csv``: one row per episode (sorted by episode index);
- ``summary.csv``: per configuration (robot, label, disturbance case) and metric: n, mean,
  std, the 95 % confidence interval of the mean (Student t), median;
- ``plots/<metric>.png``: the mean with its 95 % interval per configuration, episodes dotted;
- ``report.html``: one page with the summary, the plots and the failed episodes' tracebacks.
"""
from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np

from .spec import METRICS, VECTOR_METRICS

__all__ = ["ID_COLUMNS", "table", "summarize", "write_outputs"]

ID_COLUMNS = ("index", "key", "robot", "label", "planner", "disturbance_case", "scenario_id", "seed", "status",
              "stop_reason", "sim_time")
_TAIL = ("error", "wall_s")
_INT = ("index", "seed", "goals_reached", "limit_violation_ticks", "diverged", "n_ticks", "peak_joint", "success",
        "success_after_grace", "fallbacks", "tick_qd_joint")


def table(rows):
    """A pyarrow Table of episode rows, columns ID_COLUMNS, the metrics, error, wall_s (an
    errored episode's metrics are null; a VECTOR_METRICS column is a list of float64)."""
    import pyarrow as pa

    cols = {}
    for c in ID_COLUMNS + tuple(METRICS) + _TAIL:
        vals = [r.get(c) for r in rows]
        if c in ("key", "robot", "label", "planner", "disturbance_case", "scenario_id", "status", "stop_reason",
                 "error"):
            cols[c] = pa.array([v if v is not None else "" for v in vals], pa.string())
        elif c in VECTOR_METRICS:
            cols[c] = pa.array([None if v is None else [None if x is None or (isinstance(x, float) and math.isnan(x))
                                                        else float(x) for x in v] for v in vals],
                               pa.list_(pa.float64()))
        elif c in _INT:
            cols[c] = pa.array([None if v is None else int(v) for v in vals], pa.int64())
        else:
            cols[c] = pa.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
                                for v in vals], pa.float64())
    return pa.table(cols)


def _ci95(x: np.ndarray) -> tuple:
    n = x.size
    if n == 0:
        return (math.nan, math.nan)
    m = float(np.mean(x))
    if n == 1:
        return (m, m)
    from scipy.stats import t

    h = float(t.ppf(0.975, n - 1) * np.std(x, ddof=1) / math.sqrt(n))
    return (m - h, m + h)


def _scalar_metrics(rows, metrics) -> list:
    """(name, getter) per summarised metric: a VECTOR_METRICS one expands per element
    (``qd_ratio_j1``, ``qd_ratio_j2``, ...; as many as its longest value)."""
    out = []
    for m in metrics:
        if m in VECTOR_METRICS:
            n = max((len(r[m]) for r in rows if isinstance(r.get(m), list)), default=0)
            out += [(f"{m}_j{j + 1}", lambda r, m=m, j=j: r[m][j] if isinstance(r.get(m), list) and j < len(r[m])
                     else None) for j in range(n)]
        else:
            out.append((m, lambda r, m=m: r.get(m)))
    return out


def summarize(rows, metrics) -> list:
    """Summary rows: per (robot, label, disturbance_case) in first-appearance order and metric
    in ``metrics`` (a VECTOR_METRICS one per element, :func:`_scalar_metrics`): n (ok episodes
    with a finite value), errors, mean, std, ci95_lo, ci95_hi, median."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["robot"], r["label"], r["disturbance_case"]), []).append(r)
    out = []
    for (robot, label, case), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        for m, get in _scalar_metrics(rows, metrics):
            x = np.array([v for v in map(get, ok) if v is not None and math.isfinite(v)], dtype=np.float64)
            lo, hi = _ci95(x)
            out.append(dict(robot=robot, label=label, disturbance_case=case, metric=m, n=int(x.size),
                            errors=len(rs) - len(ok), mean=float(x.mean()) if x.size else math.nan,
                            std=float(x.std(ddof=1)) if x.size > 1 else math.nan, ci95_lo=lo, ci95_hi=hi,
                            median=float(np.median(x)) if x.size else math.nan))
    return out


def _write_csv(path: Path, rows: list, columns) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in columns})


def _plots(out: Path, rows, summary, metrics) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (out / "plots").mkdir(exist_ok=True)
    files = []
    for m in metrics:
        srows = [s for s in summary if s["metric"] == m]
        if not srows:
            continue
        names = [f"{s['label']}\n{s['disturbance_case']}" + (f"\n{s['robot']}" if len({x['robot'] for x in srows}) > 1
                                                             else "") for s in srows]
        fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(srows) + 1.5), 3.6))
        for i, s in enumerate(srows):
            pts = [r[m] for r in rows if r["status"] == "ok" and (r["robot"], r["label"], r["disturbance_case"])
                   == (s["robot"], s["label"], s["disturbance_case"]) and r.get(m) is not None]
            ax.scatter(np.full(len(pts), i) + np.linspace(-0.15, 0.15, len(pts)) if pts else [], pts, s=10,
                       alpha=0.5, color="0.4")
            if s["n"]:
                ax.errorbar([i], [s["mean"]], yerr=[[s["mean"] - s["ci95_lo"]], [s["ci95_hi"] - s["mean"]]],
                            fmt="o", color="C0", capsize=5)
        ax.set_xticks(range(len(srows)), names, fontsize=8)
        ax.set_ylabel(m)
        ax.set_title(f"{m}: mean and 95 % CI per configuration", fontsize=9)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        p = out / "plots" / f"{m}.png"
        fig.savefig(p, dpi=90)
        plt.close(fig)
        files.append(p)
    return files


def _html(out: Path, spec, rows, summary, plots, state: dict) -> Path:
    esc = html.escape
    n_err = sum(r["status"] != "ok" for r in rows)
    parts = [f"<!doctype html><meta charset=utf-8><title>gato eval: {esc(spec.name)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}pre{font-size:11px;"
             "background:#f4f4f4;overflow:auto}</style>",
             f"<h1>gato eval: {esc(spec.name)}</h1>",
             f"<p>{len(rows)} episodes stored ({n_err} errors); this run: {state.get('ran', 0)} ran, "
             f"{state.get('skipped', 0)} done before"
             + (", <b>interrupted</b> (partial result: rerun the same command to finish)" if state.get("interrupted")
                else "") + f". Executor: {esc(str(state.get('executor', '')))}. Tables: results.parquet, "
             "results.csv, summary.csv.</p>",
             "<h2>Summary (mean and 95 % confidence interval of the mean)</h2><table><tr>"
             + "".join(f"<th>{c}</th>" for c in ("robot", "label", "disturbance", "metric", "n", "errors", "mean",
                                                 "95 % CI", "median")) + "</tr>"]
    for s in summary:
        parts.append("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in (
            s["robot"], s["label"], s["disturbance_case"], s["metric"], s["n"], s["errors"], f"{s['mean']:.4g}",
            f"[{s['ci95_lo']:.4g}, {s['ci95_hi']:.4g}]", f"{s['median']:.4g}")) + "</tr>")
    parts.append("</table><h2>Plots</h2>")
    for p in plots:
        parts.append(f'<img src="plots/{esc(p.name)}" alt="{esc(p.stem)}">')
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        parts.append("<h2>Failed episodes</h2>")
        for r in failed:
            parts.append(f"<h3>#{r['index']} {esc(r['label'])} / {esc(r['disturbance_case'])} / "
                         f"{esc(r['scenario_id'])}</h3><pre>{esc(r.get('error', ''))}</pre>")
    p = out / "report.html"
    p.write_text("\n".join(parts))
    return p


def write_outputs(out, spec, rows, state=None) -> dict:
    """Write the tables, summary, plots and report of ``rows`` under ``out``; returns their
    paths {"parquet", "csv", "summary", "plots", "report"} and the summary rows."""
    import pyarrow.parquet as pq

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tab = table(rows)
    pq.write_table(tab, out / "results.parquet")
    _write_csv(out / "results.csv", rows, tab.column_names)
    summary = summarize(rows, spec.metrics)
    _write_csv(out / "summary.csv", summary, ("robot", "label", "disturbance_case", "metric", "n", "errors", "mean",
                                              "std", "ci95_lo", "ci95_hi", "median"))
    plots = _plots(out, rows, summary, spec.metrics)
    report = _html(out, spec, rows, summary, plots, state or {})
    return dict(parquet=out / "results.parquet", csv=out / "results.csv", summary_csv=out / "summary.csv",
                plots=plots, report=report, summary=summary)
