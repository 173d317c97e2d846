"""The discrepancy report of a replay: Markdown with PNG plots, or one self-contained
HTML page (plots embedded). Built as a list of blocks rendered either way, so the two
formats always say the same thing."""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np

__all__ = ["Report", "plot_replay", "plot_prediction", "decimate", "decimate_rows"]


class Report:
    """An ordered list of blocks: ("h", level, text), ("p", text), ("list", [text]),
    ("table", header, rows), ("img", path, caption), ("code", text)."""

    def __init__(self, title: str):
        self.title = title
        self.blocks: list = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def items(self, lines):
        if lines:
            self.blocks.append(("list", list(lines)))

    def table(self, header, rows):
        self.blocks.append(("table", list(header), [list(r) for r in rows]))

    def img(self, path, caption: str):
        if path is not None:
            self.blocks.append(("img", Path(path), caption))

    def code(self, text: str):
        self.blocks.append(("code", text))

    # ------------------------------------------------------------------ renderers
    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out += ["#" * (b[1] + 1) + " " + b[2], ""]
            elif kind == "p":
                out += [b[1], ""]
            elif kind == "list":
                out += [f"- {x}" for x in b[1]] + [""]
            elif kind == "table":
                out.append("| " + " | ".join(b[1]) + " |")
                out.append("|" + "---|" * len(b[1]))
                out += ["| " + " | ".join(str(c) for c in r) + " |" for r in b[2]]
                out.append("")
            elif kind == "img":
                rel = b[1].relative_to(base) if b[1].is_relative_to(base) else b[1]
                out += [f"![{b[2]}]({rel.as_posix()})", "", f"*{b[2]}*", ""]
            elif kind == "code":
                out += ["```", b[1], "```", ""]
        return "\n".join(out)

    def html(self) -> str:
        e = html.escape
        out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{e(self.title)}</title>",
               "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;line-height:1.4}"
               "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}"
               "th{background:#eee}img{max-width:100%}code,pre{background:#f4f4f4}</style></head><body>",
               f"<h1>{e(self.title)}</h1>"]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append(f"<h{b[1] + 1}>{e(b[2])}</h{b[1] + 1}>")
            elif kind == "p":
                out.append(f"<p>{_inline(e(b[1]))}</p>")
            elif kind == "list":
                out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in b[1]) + "</ul>")
            elif kind == "table":
                head = "".join(f"<th>{e(str(c))}</th>" for c in b[1])
                rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in b[2])
                out.append(f"<table><tr>{head}</tr>{rows}</table>")
            elif kind == "img":
                data = base64.b64encode(b[1].read_bytes()).decode()
                out.append(f"<figure><img alt='{e(b[2])}' src='data:image/png;base64,{data}'>"
                           f"<figcaption>{e(b[2])}</figcaption></figure>")
            elif kind == "code":
                out.append(f"<pre>{e(b[1])}</pre>")
        out.append("</body></html>")
        return "\n".join(out)


def _inline(text: str) -> str:
    """The Markdown inline marks the report uses (**bold**, `code`) as HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FLOOR = 1e-16  # exact zeros are drawn here on the log axes
MAX_POINTS = 4000  # per series: a long run is drawn from this many bins (memory and time of the plot)


def decimate(t, y, n: int | None = None):
    """(t, y) of at most ``n`` points: in each of ``n`` equal bins of samples the one of largest
    |y| (NaN ignored), so spikes survive. ``y`` (K,) or (K, m) (per column). Short series as they
    are. ``n`` None: :data:`MAX_POINTS`."""
    t, y = np.asarray(t), np.asarray(y)
    return decimate_rows(len(t), lambda a, b: (t[a:b], y[a:b]), n)


def decimate_rows(K: int, get, n: int | None = None, rows: int | None = None):
    """:func:`decimate` of a series of ``K`` samples read in pieces: ``get(a, b)`` returns (t, y)
    of samples [a, b); at most about ``rows`` (None: :data:`gato.replay.rows.CHUNK_ROWS`)
    samples are read at a time (memory does not grow with K). The same points as
    :func:`decimate` of the whole series."""
    from . import rows as _rows

    n = MAX_POINTS if n is None else n
    rows = _rows.CHUNK_ROWS if rows is None else rows
    if K <= 2 * n:
        return get(0, K)
    edges = np.linspace(0, K, n + 1).astype(int)
    ts, ys = [], []
    g = 0
    while g < n:
        h = g + 1
        while h < n and edges[h + 1] - edges[g] <= rows:
            h += 1
        off = int(edges[g])
        t, y = get(off, int(edges[h]))
        t, y = np.asarray(t), np.asarray(y)
        tt, yy = _bins(t, y, edges[g:h + 1] - off)
        ts.append(tt)
        ys.append(yy)
        g = h
    return np.concatenate(ts), np.concatenate(ys)


def _bins(t, y, edges):
    """Per bin [edges[k], edges[k+1]) the sample of largest |y| (per column for 2-D ``y``; the
    bin's middle time then)."""
    mag = np.abs(np.nan_to_num(y, nan=0.0))
    if y.ndim == 1:
        pick = np.array([a + int(np.argmax(mag[a:b])) for a, b in zip(edges[:-1], edges[1:])])
        return t[pick], y[pick]
    m = len(edges) - 1
    out = np.empty((m, y.shape[1]))
    tt = np.empty(m)
    for k, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        j = a + np.argmax(mag[a:b], axis=0)
        out[k] = y[j, np.arange(y.shape[1])]
        tt[k] = t[(a + b) // 2]
    return tt, out


def plot_replay(path, series: dict, tol, first_over_t=None) -> Path:
    """Replayed vs recorded: max |du| and |dplan| per tick (log), solve times. ``series``:
    {"du", "dplan", "wall_rec", "wall_rep": (t [s], y) already decimated (at most a few thousand
    points; "dplan" / "wall_rec" None when not recorded)}: |du| and |dplan| with NaN and zeros at
    :data:`FLOOR`, step times in ms."""
    plt = _plt()
    fig, ax = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    ax[0].semilogy(*series["du"], ".", ms=3, label="max |u replay - u recorded| [N·m]")
    if series.get("dplan") is not None:
        ax[0].semilogy(*series["dplan"], ".", ms=2, alpha=0.6, label="max |plan replay - plan recorded|")
    ax[0].axhline(tol, color="k", ls="--", lw=1, label=f"tolerance {tol:g}")
    if first_over_t is not None:
        ax[0].axvline(first_over_t, color="tab:red", lw=1, label="first tick over tolerance")
    ax[0].set_ylabel(f"difference (zeros at {FLOOR:g})")
    ax[0].legend(fontsize=8, loc="center left")
    ax[0].set_title("replayed vs recorded commands and plans, per MPC tick")
    if series.get("wall_rec") is not None:
        ax[1].plot(*series["wall_rec"], lw=0.8, label="recorded (on the robot / in the run)")
    ax[1].plot(*series["wall_rep"], lw=0.8, label="replay (this machine)")
    ax[1].set_ylabel("MPC step wall time [ms]")
    ax[1].set_xlabel("time since the first tick [s]")
    ax[1].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_prediction(path, pred, t, tau) -> Path:
    """Model vs reality: residual torque per joint over time, RMS per joint. ``t`` [s since
    the first state], ``tau`` (m, nv) [N*m]: the residuals, already decimated."""
    plt = _plt()
    fig, ax = plt.subplots(2, 1, figsize=(9, 6.5), gridspec_kw={"height_ratios": [3, 2]})
    for j, name in enumerate(pred.joint_names):
        bold = name in pred.suspects
        ax[0].plot(t, tau[:, j], lw=1.4 if bold else 0.7, alpha=1.0 if bold else 0.6,
                   label=name + (" (suspect)" if bold else ""))
    ax[0].set_ylabel("missing generalized force [N·m]")
    ax[0].set_xlabel("time since the first state [s]")
    ax[0].set_title("model vs reality: M(q)·(qd measured - qd predicted)/Δt per joint")
    ax[0].legend(fontsize=7, ncol=4, loc="upper right")
    colors = ["tab:red" if n in pred.suspects else "tab:gray" for n in pred.joint_names]
    ax[1].bar(pred.joint_names, pred.rms_tau, color=colors)
    ax[1].set_ylabel("RMS [N·m]")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
