"""What a streamed replay produces (:class:`StreamRun`) and its per-tick table (:func:`tick_rows`).

Filled by :class:`gato.replay.streamer.Streamer`, read by the report (:mod:`gato.replay.report`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .rows import Rows


@dataclass
class StreamRun:
    """What a streamed replay produced (T re-solved ticks, K model intervals, solver order).

    ``rows``: the per-tick numbers (a :class:`gato.replay.rows.Rows`, spilled to a temporary
    file: memory does not grow with the run), one row per re-solved tick in order: ``tick``
    controller tick number, ``stamp_ns``, ``wall_rec`` recorded step time [s] (NaN unknown),
    ``has_u`` a recorded command matched, and where ``resolved`` (the controller could be
    built): ``u`` (nu,) replayed command [N*m], ``du`` / ``dplan`` / ``dwarm`` / ``dstate`` /
    ``wall_s``, ``anchored`` / ``state_anchored`` (bool). The properties of the same names
    (``has_recorded_u`` for has_u) read a column whole, (T,) or (T, nu), None for the replay
    columns when not resolved: for tests and small runs (the report reads the rows in chunks).
    ``kept``: {tick index: (Tick, TickResult)} of the worst-tick candidates; ``picks``: [(tick
    index, reason)] the worst ticks (None: pick from the whole columns). ``prediction``: a
    :class:`gato.replay.Prediction` or None. ``streamed`` False: the bag needs the in-memory
    reconstruction (no SolveInput).
    """

    streamed: bool = True
    storage: str = ""
    complete: bool = True
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    config: dict | None = None
    robot: str | None = None
    joint_names: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    n_state: int = 0
    n_wrench: int = 0                # ticks that carry their wrench hypotheses (SolveInput wrench_hypotheses)
    n_posture: int = 0               # ticks solved with joint posture tables (SolveInput posture_q, issue 31)
    n_posture_unknown: int = 0       # ticks whose SolveInput has no posture fields (an older gato)
    ee: dict | None = None           # EE tracking of the ticks (gato.replay.tracking.EETracking.summary)
    rows: Rows | None = None
    resolved: bool = False
    kept: dict = field(default_factory=dict)
    picks: list | None = None
    prediction: object = None
    prediction_error: str | None = None
    n_states: int = 0
    resolve_error: str | None = None
    window: tuple | None = None          # (start_ns, end_ns, bag first log ns, bag last log ns)
    urdf: object = None
    urdf_matches: bool | None = None
    effort_limit: np.ndarray | None = None
    skipped: dict = field(default_factory=dict)   # invalid messages skipped (gato.core.messages.Skips.as_dict)
    bag_problems: list = field(default_factory=list)
    reconstructed: bool = False
    gaps: list = field(default_factory=list)   # TickGaps.finish(): lost ticks, per topic

    @property
    def T(self) -> int:
        return 0 if self.rows is None else self.rows.n

    @property
    def t_first_ns(self) -> int:
        """The first re-solved tick's stamp [ns] (0 when none)."""
        return 0 if not self.T else int(self.rows.first("stamp_ns"))

    def _col(self, name, replay=False):
        if self.rows is None or (replay and not self.resolved):
            return None
        return self.rows.column(name)

    tick = property(lambda self: self._col("tick"))
    stamp_ns = property(lambda self: self._col("stamp_ns"))
    wall_rec = property(lambda self: self._col("wall_rec"))
    has_recorded_u = property(lambda self: self._col("has_u"))
    u = property(lambda self: self._col("u", True))
    du = property(lambda self: self._col("du", True))
    dplan = property(lambda self: self._col("dplan", True))
    dwarm = property(lambda self: self._col("dwarm", True))
    dstate = property(lambda self: self._col("dstate", True))
    wall_s = property(lambda self: self._col("wall_s", True))
    anchored = property(lambda self: self._col("anchored", True))
    state_anchored = property(lambda self: self._col("state_anchored", True))


def tick_rows(nu: int) -> Rows:
    """An empty per-tick table (see :class:`StreamRun`) for commands of ``nu`` joints."""
    f, b = np.float64, np.bool_
    return Rows({"tick": ((), np.int64), "stamp_ns": ((), np.int64), "wall_rec": ((), f), "has_u": ((), b),
                 "u": ((nu,), f), "du": ((), f), "dplan": ((), f), "dwarm": ((), f), "dstate": ((), f),
                 "wall_s": ((), f), "anchored": ((), b), "state_anchored": ((), b)})
