"""Plots of closed-loop runs: :func:`plot_tracking` for a :class:`gato.simloop.RunRecord` or its
stats dict (what :class:`gato.MPC_GATO` returns). The one tracking plot of the project.

matplotlib is imported inside the function and renders through its Agg canvas
without touching pyplot or the global backend (``import gato`` never imports
matplotlib; no display is needed).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["plot_tracking"]

_PROJECTIONS = (("x", "y", 0, 1, "top view"), ("x", "z", 0, 2, "side view (x-z)"), ("y", "z", 1, 2,
                                                                                      "side view (y-z)"))


def _arr(stats, key, cols=None):
    if key not in stats:
        raise ValueError(f"stats: missing {key!r} (expected the stats dict of MPC_GATO.run_mpc_fig8 / "
                         "run_mpc_goals)")
    a = np.asarray(stats[key], dtype=np.float64)
    if cols is not None and (a.ndim != 2 or a.shape[1] != cols):
        raise ValueError(f"stats[{key!r}]: expected shape (T, {cols}), got {a.shape}")
    return a


def plot_tracking(stats, path, title=None, dpi=110):
    """Write a PNG of a closed-loop run: EE path vs reference and tracking error over time.

    Panels: the EE path (solid) and the reference knot 0 (dashed) in three projections
    (x-y top view, x-z and y-z side views; goals, when ``stats`` has them, as crosses),
    and the tracking error ||ee - reference knot 0|| [mm] over sim time with its mean (and the
    orientation error [deg] when ``stats`` has it), plus
    ``goal_distances`` when present (figure-8: the knot-1 distance; goals: the distance to
    the active goal).

    Args:
        stats: a :class:`gato.sim.loop.RunRecord`, or the stats dict of
            ``MPC_GATO.run_mpc_fig8`` / ``run_mpc_goals`` / ``RunRecord.stats()`` (needs
            ``timestamps`` (T,), ``ee_actual`` (T, 3), ``references`` (T, 3) and
            ``goal_distances_knot0`` (T,)); at least one tick. Optional
            ``orientation_errors_knot0`` (T,) [rad] (NaN where no orientation is tracked): the
            EE orientation error, drawn on a second axis in degrees.
        path: output file (PNG); parent directories are created.
        title: figure title (default: from ``stats["config"]`` when present).
        dpi: resolution.

    Returns the path written (a pathlib.Path).
    """
    if not isinstance(stats, dict) and callable(getattr(stats, "stats", None)):
        stats = stats.stats()  # a RunRecord (gato.sim.loop; this module stays below it)
    if not isinstance(stats, dict):
        raise ValueError(f"stats: expected the stats dict of an MPC_GATO run, got {type(stats).__name__}")
    t = _arr(stats, "timestamps")
    ee = _arr(stats, "ee_actual", 3)
    ref = _arr(stats, "references", 3)
    err0 = _arr(stats, "goal_distances_knot0")
    if t.size == 0:
        raise ValueError("stats: the run has no ticks to plot")
    if not (len(ee) == len(ref) == len(err0) == len(t)):
        raise ValueError(f"stats: per-tick arrays differ in length (timestamps {len(t)}, ee_actual {len(ee)}, "
                         f"references {len(ref)}, goal_distances_knot0 {len(err0)})")
    err1 = np.asarray(stats["goal_distances"], dtype=np.float64) if "goal_distances" in stats else None
    goals = np.asarray(stats["goals"], dtype=np.float64).reshape(-1, 3) if "goals" in stats else None

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8.5), dpi=dpi)
    FigureCanvasAgg(fig)  # render with Agg; pyplot and the global backend are left alone
    gs = fig.add_gridspec(2, 3, height_ratios=[1.15, 1.0])
    for col, (a, b, i, j, name) in enumerate(_PROJECTIONS):
        ax = fig.add_subplot(gs[0, col])
        ax.plot(ref[:, i], ref[:, j], "--", color="tab:gray", lw=1.6, label="reference")
        ax.plot(ee[:, i], ee[:, j], "-", color="tab:blue", lw=1.3, label="end effector")
        ax.plot(ee[0, i], ee[0, j], "o", color="tab:green", ms=6, label="start")
        if goals is not None:
            ax.plot(goals[:, i], goals[:, j], "x", color="tab:red", ms=10, mew=2, label="goals")
        ax.set_xlabel(f"{a} [m]")
        ax.set_ylabel(f"{b} [m]")
        ax.set_title(name)
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(True, alpha=0.3)
        if col == 0:
            ax.legend(loc="best", fontsize=8)
    ax = fig.add_subplot(gs[1, :])
    ax.plot(t, 1000 * err0, color="tab:blue", lw=1.3, label="||ee - reference knot 0||")
    if err1 is not None and len(err1) == len(t):
        what = "active goal" if goals is not None else "reference knot 1"
        ax.plot(t, 1000 * err1, color="tab:orange", lw=1.0, alpha=0.8, label=f"||ee - {what}|| (goal_distances)")
    ax.axhline(1000 * float(np.mean(err0)), color="tab:blue", ls=":", lw=1.0,
               label=f"mean {1000 * float(np.mean(err0)):.1f} mm")
    ax.set_xlabel("sim time [s]")
    ax.set_ylabel("tracking error [mm]")
    ax.set_xlim(float(t[0]), float(t[-1]) if t[-1] > t[0] else float(t[0]) + 1e-3)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    rot = np.asarray(stats["orientation_errors_knot0"], dtype=np.float64) \
        if "orientation_errors_knot0" in stats else None
    if rot is not None and len(rot) == len(t) and np.any(np.isfinite(rot)):
        ax2 = ax.twinx()       # the orientation error [deg] beside the position error (issue 30)
        deg = np.degrees(rot)
        mean = float(np.nanmean(deg))
        ax2.plot(t, deg, color="tab:purple", lw=1.0, alpha=0.85, label="orientation error vs knot 0 [deg]")
        ax2.axhline(mean, color="tab:purple", ls=":", lw=1.0, label=f"mean {mean:.2f} deg")
        ax2.set_ylabel("orientation error [deg]")
        ax2.set_ylim(bottom=0)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    else:
        ax.legend(loc="upper right", fontsize=8)
    if title is None:
        cfg = stats.get("config") or {}
        title = " ".join(str(p) for p in (cfg.get("plant"), cfg.get("task"), f"N={cfg['N']}" if "N" in cfg else None,
                                           (cfg.get("world") or {}).get("kind")) if p)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(os.fspath(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
