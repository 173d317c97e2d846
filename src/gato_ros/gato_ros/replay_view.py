"""The replay view (``gato replay BAG --view``): the worst ticks of a replay in the browser, drawn
like the live view (:mod:`gato_ros.view_server`), with the recorded and the replayed plan of each
tick side by side. ROS-free: it reads the replay's case file (``worst_ticks.npz``,
:mod:`gato.replay.cases`).

For the tick picked in the panel (a drop-down of the worst ticks with why each was picked):
the robot at the tick's measured state, the recorded plan's EE path (blue), the replayed plan's
(magenta; the in-sequence replay's plan when the file carries it, else the standalone re-solve's),
the tick's reference window (green), and the command difference per joint. The in-sequence plan is
the one the replay's discrepancy report compares (``xu_replayed``: the replay's controller after all
the ticks before, with their solver state); the standalone re-solve (``xu_standalone``: a fresh
solver from the recorded warm start) can differ from it, and the panel says by how much.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["ReplayCases", "ReplayView", "serve", "main"]

RECORDED_RGB = (20, 110, 255)
REPLAYED_RGB = (220, 30, 200)


class ReplayCases:
    """The ticks of a case file, as EE paths. ``path``: a ``worst_ticks.npz`` (gato.replay.cases)."""

    def __init__(self, path, geometry=None):
        from .view_logic import RobotGeometry

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"case file {path} does not exist (gato replay writes worst_ticks.npz when the "
                             "replay re-solved ticks)")
        z = np.load(path, allow_pickle=False)
        need = ("x", "goals", "xu_recorded", "xu_standalone", "tick", "reason", "robot", "u_recorded", "u_standalone")
        missing = [k for k in need if k not in z.files]
        if missing:
            raise ValueError(f"{path}: not a gato replay case file (missing {missing})")
        self.path = path
        self.robot = str(z["robot"])
        self.geometry = geometry or RobotGeometry(self.robot)
        self.x = np.asarray(z["x"], dtype=float)
        self.goals = np.asarray(z["goals"], dtype=float)
        self.tick = np.asarray(z["tick"]).astype(int)
        self.reason = [str(r) for r in z["reason"]]
        self.u_recorded = np.asarray(z["u_recorded"], dtype=float)
        self.xu_recorded = np.asarray(z["xu_recorded"], dtype=float)
        self.xu_standalone = np.asarray(z["xu_standalone"], dtype=float)
        self.u_standalone = np.asarray(z["u_standalone"], dtype=float)
        # The in-sequence plan per tick where the file carries it (gato replay writes it); a tick
        # without one (NaN row, or a file of an older gato) falls back to the standalone re-solve.
        xu_seq = np.asarray(z["xu_replayed"], dtype=float) if "xu_replayed" in z.files else None
        u_seq = np.asarray(z["u_replayed"], dtype=float) if "u_replayed" in z.files else None
        self.in_sequence = np.zeros(len(self.xu_standalone), dtype=bool)
        if xu_seq is not None and u_seq is not None:
            self.in_sequence = np.isfinite(xu_seq).all(axis=1)
        seq = self.in_sequence[:, None]
        self.xu_replayed = np.where(seq, xu_seq, self.xu_standalone) if seq.any() else self.xu_standalone.copy()
        self.u_replayed = np.where(seq, u_seq, self.u_standalone) if seq.any() else self.u_standalone.copy()
        self.replayed_label = ("replayed in sequence" if self.in_sequence.all() else
                               "standalone re-solve" if not self.in_sequence.any() else "replayed (per tick)")
        self.K = self.x.shape[0]
        nq = self.geometry.model.nq
        self.nq, self.nx = nq, self.x.shape[1]
        self.N = self.goals.shape[1] // 6
        S = self.xu_recorded.shape[1]
        self.nu = (S - self.N * self.nx) // max(self.N - 1, 1)
        if self.N * (self.nx + self.nu) - self.nu != S:
            raise ValueError(f"{path}: plan rows of {S} values do not fit N = {self.N} knots of nx = {self.nx}")

    def label_of(self, k: int) -> str:
        """What case ``k``'s replayed plan is: "replayed in sequence" or "standalone re-solve"."""
        return "replayed in sequence" if self.in_sequence[k] else "standalone re-solve"

    def path_of(self, xu: np.ndarray) -> np.ndarray:
        """(N, 3) EE positions along one plan row."""
        s = self.nx + self.nu
        qs = np.stack([xu[k * s:k * s + self.nq] for k in range(self.N)])
        return self.geometry.ee_positions(qs)

    def frame(self, k: int):
        """The live view's frame of case ``k`` with the recorded plan as the plan and the replayed one
        as the only batch path."""
        from .view_logic import ViewFrame

        g = self.geometry
        q = self.x[k, :self.nq]
        poses = g.link_poses(q)
        skel = g.skeleton()
        info = {"state": f"tick {self.tick[k]}", "reason": self.reason[k], "plans": 1, "rejected": 0,
                "last_rejected": ""}
        return ViewFrame(seq=k + 1, t=0.0, q=q, link_poses=poses, skeleton=skel, ee=skel[-1].copy(),
                         plan_path=self.path_of(self.xu_recorded[k]), batch_paths=[],
                         reference=self.goals[k].reshape(self.N, 6)[:, :3], plot={}, info=info)


class ReplayView:
    """Serve the cases on a page (viser): ``url``; :meth:`show` draws case ``k``."""

    def __init__(self, cases: ReplayCases, host: str = "127.0.0.1", port: int = 8080):
        from .view_server import BrowserView

        self.cases = cases
        self.view = BrowserView(cases.geometry, host, port, title=f"gato replay: {cases.path.parent.name}")
        self.url = self.view.url
        s = self.view.server
        self.view._plot.visible = False        # no time series here: one tick at a time
        labels = [f"{i}: tick {cases.tick[i]} ({cases.reason[i]})" for i in range(cases.K)]
        self._pick = s.gui.add_dropdown("worst tick", options=labels, initial_value=labels[0])
        self._text = s.gui.add_html("")
        self._replayed = None
        self._labels = labels

        @self._pick.on_update
        def _(_event):
            self.show(self._labels.index(self._pick.value))

        self.show(0)

    def show(self, k: int) -> None:
        c = self.cases
        fr = c.frame(k)
        self.view.draw(fr)
        path = c.path_of(c.xu_replayed[k])
        from .view_server import _segments

        seg = _segments(path)
        s = self.view.server
        if self._replayed is not None:
            self._replayed.remove()
        self._replayed = s.scene.add_line_segments("/replayed", seg, colors=REPLAYED_RGB, thickness=5.0,
                                                   thickness_units="screen")
        du = c.u_replayed[k] - c.u_recorded[k]
        dpath = float(np.max(np.linalg.norm(path - fr.plan_path, axis=1))) * 1e3
        alone = ""
        if c.in_sequence[k]:      # how far a standalone re-solve (no carried solver state) lands from it
            d = float(np.max(np.linalg.norm(c.path_of(c.xu_standalone[k]) - path, axis=1))) * 1e3
            alone = f"standalone re-solve vs in sequence: {d:.2f} mm<br>"
        rows = "".join(f"<tr><td>{n}</td><td>{d:+.3g}</td></tr>" for n, d in zip(c.geometry.joint_names, du))
        self._text.content = (
            "<div style='font-family:monospace;font-size:12px'>"
            f"<span style='color:#146eff'>&#9632;</span> recorded plan, "
            f"<span style='color:#dc1ec8'>&#9632;</span> {c.label_of(k)}; "
            f"<span style='color:#14aa3c'>&#9632;</span> reference<br>"
            f"largest EE path difference {dpath:.2f} mm<br>{alone}u replayed - recorded [N*m]:"
            f"<table>{rows}</table></div>")

    def close(self) -> None:
        self.view.close()


def serve(case_file, host: str = "127.0.0.1", port: int = 8080, seconds: float = 0.0, say=print) -> int:
    """Serve the case file's ticks until Ctrl-C (or ``seconds`` > 0 have passed). Returns 0."""
    view = ReplayView(ReplayCases(case_file), host, port)
    say(f"[gato replay] view: {view.url} ({view.cases.K} worst ticks; Ctrl-C to stop)")
    sys.stdout.flush()   # the URL is what a user (or a script reading a log file) waits for
    try:
        end = time.monotonic() + seconds if seconds > 0 else None
        while end is None or time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        view.close()
    return 0


def main(argv=None) -> int:
    """``python -m gato_ros.replay_view CASES.npz [--port 8080] [--host 127.0.0.1] [--seconds S]``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m gato_ros.replay_view", description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", help="a replay's worst_ticks.npz (gato replay BAG writes it beside its report)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: at Ctrl-C)")
    a = ap.parse_args(argv)
    try:
        return serve(a.cases, a.host, a.port, a.seconds)
    except ValueError as e:
        print(f"[gato replay] error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
