"""Streaming replay: read, re-solve and compare a bag tick by tick in bounded memory.

A robot bag of hours does not fit in memory (decoded, 20,000 ticks of the iiwa14 took
1.7 GB), so ``gato replay`` never holds the bag: :func:`gato.bagstream.stream_bag` yields the
messages in log-time order and this module

- builds each tick from its ``/gato_controller/solve_input`` (exactly as
  :func:`gato.replay.load_recording` does) and holds it until its recorded outputs
  (command, step result: logged just after it) have been read, at most
  :data:`LOOKAHEAD_MAX_S` of log time, then re-solves it
  (:class:`gato.replay.resolve.TickReplayer`) and keeps only per-tick scalars
  (differences, step times) and the command (nu,);
- holds the joint states the same way and runs the model-vs-reality interval of each
  pair of consecutive states as soon as it is complete
  (:class:`gato.replay.prediction.Predictor`), keeping the per-interval residuals (K, nv);
- keeps the full data (inputs, replayed plan and warm start) only of the ticks that are
  candidates for the worst-ticks file: the ``worst`` largest command differences and the
  ``2 worst`` largest model residuals.

The per-tick scalars and per-interval residuals go to :class:`gato.replay.rows.Rows` (a small
buffer, the rest in an unnamed temporary file) and the report reads them back in chunks, so
memory is the look-ahead window and the kept ticks, independent of the bag's length; the result
equals the in-memory replay bit for bit (``test/test_replay_stream.py``).

A ``--start`` window seeks through the MCAP index. When its first tick carries no solver state
(the recorder keeps it on key ticks only, ``solver_state_period``), streaming starts at the
latest key tick before the window and the ticks up to the window are re-solved silently (not
reported; their joint states are not read), so the window's ticks equal the same ticks of a
full replay.

Bags without SolveInput (tick inputs reconstructed from commands, joint states and
parameter snapshots: an older recorder or a filtered ``ros2 bag record``) are replayed in
memory by :func:`gato.replay.replay_bag` as before: the reconstruction needs the whole run.
"""
from __future__ import annotations

import bisect
import heapq
import time
from dataclasses import dataclass, field

import numpy as np

from ..core import messages
from ..core.messages import Skips
from .prediction import Predictor, Residuals
from .recording import REQUIRED_FIELDS, TOPICS, stamp_ns, tick_from_solve_input
from .resolve import TickReplayer
from .rows import Rows

__all__ = ["StreamRun", "stream_replay", "LOOKAHEAD_S", "LOOKAHEAD_MAX_S", "parse_bound", "TickGaps", "gap_lines"]

#: How far [s of log time] a joint state is held before its model interval is computed (the
#: command that acted is logged around it; states logged out of stamp order within this window
#: are sorted).
LOOKAHEAD_S = 1.0
#: The longest a tick or joint state waits [s of log time] for what it needs (a tick: its
#: recorded command and step result; a state in command mode: a command at or after it): a
#: recorder starved on a loaded machine logs them late, a lost message never. Bounds the memory
#: of the look-ahead.
LOOKAHEAD_MAX_S = 10.0


class _TopK:
    """The ``k`` items with the largest keys (ties: the earlier pushed wins)."""

    def __init__(self, k: int):
        self.k, self.h = k, []

    def push(self, key, i: int, payload):
        item = (key, -i, payload)
        if self.k <= 0:
            return
        if len(self.h) < self.k:
            heapq.heappush(self.h, item)
        elif (key, -i) > self.h[0][:2]:
            heapq.heapreplace(self.h, item)

    def items(self) -> dict:
        return {-ni: p for _, ni, p in self.h}

    def ranked(self) -> list:
        """[(key, i, payload)], largest key first (ties: the earlier i first)."""
        return [(k, -ni, p) for k, ni, p in sorted(self.h, key=lambda e: (e[0], e[1]), reverse=True)]


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


class TickGaps:
    """Lost messages found by the controller's tick counter (EffortCommand.tick: one per command
    published, hold ticks included; SolveInput.tick: the same counter, MPC ticks only).

    ``see(tick, stamp_ns, source)`` per command in log order: a jump of the counter by more than
    one is a gap on the command topic. ``solved(tick)`` per SolveInput: a command of source
    "mpc" whose tick has no SolveInput is a tick lost on the SolveInput topic (checked for
    the ticks between the first and the last SolveInput). :meth:`finish` returns the gaps as
    dicts: topic, missing (count), first/last missing tick, t0_ns / t1_ns (the stamps of the
    messages around the gap). ``commands`` False: the bag has no command topic (the SolveInput
    ticks are then not matched: nothing to match them with, and nothing is held per tick).
    """

    def __init__(self, commands: bool = True):
        self.commands = commands
        self.last = None                # (tick, stamp) of the latest command
        self.cmd_gaps: list = []
        self.mpc: dict = {}             # tick -> stamp of mpc commands whose SolveInput was not seen yet
        self.solved_early: set = set()  # ticks solved before their command was seen (rare)
        self.lo = self.hi = None

    def see(self, tick: int, stamp: int, source: str):
        if self.last is not None and tick > self.last[0] + 1:
            self.cmd_gaps.append({"topic": TOPICS["command"], "missing": tick - self.last[0] - 1,
                                  "first_tick": self.last[0] + 1, "last_tick": tick - 1,
                                  "t0_ns": self.last[1], "t1_ns": stamp})
        if self.last is None or tick > self.last[0]:
            self.last = (tick, stamp)
        if source == "mpc":
            if tick in self.solved_early:
                self.solved_early.discard(tick)
            else:
                self.mpc[tick] = stamp

    def solved(self, tick: int):
        if self.commands and self.mpc.pop(tick, None) is None:
            self.solved_early.add(tick)
        self.lo = tick if self.lo is None else min(self.lo, tick)
        self.hi = tick if self.hi is None else max(self.hi, tick)

    def finish(self) -> list:
        out = list(self.cmd_gaps)
        if self.lo is not None:
            lost = sorted(t for t in self.mpc if self.lo < t < self.hi)
            run: list = []
            for t in lost + [None]:
                if run and (t is None or t != run[-1] + 1):
                    out.append({"topic": TOPICS["solve_input"], "missing": len(run), "first_tick": run[0],
                                "last_tick": run[-1], "t0_ns": self.mpc[run[0]], "t1_ns": self.mpc[run[-1]]})
                    run = []
                if t is not None:
                    run.append(t)
        return out


def gap_lines(gaps: list, t_ref_ns: int, limit: int = 20) -> list:
    """One problem line per gap ("N ticks missing between t1 and t2"), times [s] from ``t_ref_ns``."""
    lines = []
    for g in gaps[:limit]:
        lines.append(f"{g['topic']}: {g['missing']} tick{'s' if g['missing'] > 1 else ''} missing between "
                     f"t={(g['t0_ns'] - t_ref_ns) / 1e9:.3f} s and t={(g['t1_ns'] - t_ref_ns) / 1e9:.3f} s "
                     f"(ticks {g['first_tick']}..{g['last_tick']}): lost by the recorder or the transport")
    if len(gaps) > limit:
        rest = gaps[limit:]
        lines.append(f"... and {len(rest)} more gaps, {sum(g['missing'] for g in rest)} ticks (summary.json: gaps)")
    return lines


def parse_bound(text):
    """A ``--start`` / ``--end`` value: ``"12.5"`` / ``"12.5s"`` seconds from the bag's start
    (negative: from its end), ``"1500t"`` the controller's tick 1500. Returns ("s", float) or
    ("tick", int); ValueError naming the value otherwise."""
    s = str(text).strip()
    try:
        if s.endswith("t"):
            return "tick", int(s[:-1])
        return "s", float(s.removesuffix("s"))
    except ValueError:
        raise ValueError(f"--start/--end: {text!r} is neither seconds ('12.5', '12.5s', '-60' from the end) nor "
                         "a tick ('1500t')") from None


def _first_tick_at(path, t_ns: int, span_ns: int):
    """(tick, log_ns) of the first SolveInput logged in [t_ns, t_ns + span_ns), or None."""
    from .bagstream import stream_bag

    for _, t, m in stream_bag(path, [TOPICS["solve_input"]], start_ns=t_ns, end_ns=t_ns + span_ns):
        return int(m.tick), t
    return None


def _log_time_of_tick(path, tick: int, lo: int, hi: int) -> int:
    """The log time of the first SolveInput whose tick is >= ``tick``, by bisection on log time
    through the index (each probe reads about one chunk)."""
    probe = max(int(1e8), (hi - lo) // 100000)  # 0.1 s or 1/100000 of the bag per probe
    while hi - lo > probe:
        mid = (lo + hi) // 2
        got = _first_tick_at(path, mid, hi - mid)
        if got is None or got[0] >= tick:
            hi = mid
        else:
            lo = got[1] + 1
    got = _first_tick_at(path, lo, hi - lo + probe)
    while got is not None and got[0] < tick:
        got = _first_tick_at(path, got[1] + 1, hi - got[1] + probe)
    return got[1] if got is not None else hi


def _key_tick_before(path, t_ns: int, span_ns: int = int(1e9)):
    """The log time of the latest tick a re-solve can start from exactly, for a window starting
    at log time ``t_ns``: the window's first SolveInput itself when it carries its solver state (or
    is a reset), else the latest SolveInput logged before ``t_ns`` that does (a recorder with
    ``solver_state_period`` > 1 keeps the state only on key ticks). Searched backwards through the
    index in spans doubling from ``span_ns``; None when the window needs no earlier start or no
    earlier key tick exists (the replay then starts mid-run at the window, as before)."""
    from .bagstream import stream_bag

    def key(m):
        return bool(m.reset) or int(getattr(m, "solver_state_rows", 0)) > 0

    bs = stream_bag(path, [TOPICS["solve_input"]], start_ns=t_ns)
    for _, _, m in bs:
        if key(m):
            return None
        break
    else:
        return None
    t0 = bs.t_start_ns
    hi = t_ns
    while t0 is not None and hi > t0:
        lo = max(t0, hi - span_ns)
        found = None
        for _, t, m in stream_bag(path, [TOPICS["solve_input"]], start_ns=lo, end_ns=hi):
            if key(m):
                found = t
        if found is not None:
            return found
        hi, span_ns = lo, span_ns * 2
    return None


def resolve_window(path, start=None, end=None):
    """(start_ns, end_ns) absolute log times of a ``--start`` / ``--end`` window (None: open)."""
    from .bagstream import stream_bag

    if start is None and end is None:
        return None, None
    bs = stream_bag(path, [TOPICS["solve_input"]])
    t0, t1 = bs.t_start_ns, bs.t_end_ns
    del bs
    if t0 is None:
        raise ValueError(f"--start/--end: {path} has no index with its time range (a damaged bag): replay it whole")
    out = []
    for b in (start, end):
        if b is None:
            out.append(None)
            continue
        kind, v = parse_bound(b) if isinstance(b, str) else b
        if kind == "s":
            out.append(int(t0 + v * 1e9) if v >= 0 else int(t1 + 1 + v * 1e9))
        else:
            out.append(_log_time_of_tick(path, int(v), t0, t1 + 1))
    if out[0] is not None and out[1] is not None and out[0] >= out[1]:
        raise ValueError(f"--start/--end: the window [{start}, {end}) is empty")
    return out[0], out[1]


class _Streamer:
    def __init__(self, bs, *, robot, urdf, torque_source, tol, worst, progress, max_gap_s=0.5):
        if torque_source not in ("auto", "effort", "command"):
            raise ValueError(f"torque_source: expected 'auto', 'effort' or 'command', got {torque_source!r}")
        self.bs, self.robot_arg, self.urdf_arg = bs, robot, urdf
        self.torque_source, self.tol, self.worst, self.progress = torque_source, tol, worst, progress
        self.max_gap_ns = int(max_gap_s * 1e9)
        self.max_gap_s = max_gap_s
        self.la = int(LOOKAHEAD_S * 1e9)
        self.la_max = int(LOOKAHEAD_MAX_S * 1e9)
        self.now = None
        self.cmd_max = None                   # the latest command stamp seen
        self.has = _with_messages(bs)         # a tick waits only for outputs the bag has
        self.run = StreamRun(storage=bs.storage)
        self.problems = self.run.problems
        self.started = False
        self.early: list = []                 # (topic, t, msg) before the first configured tick
        self.cfg_prev = None
        self.cfg_text = None                  # the config_json text cfg_prev was parsed from
        self.seen_ticks: set = set()
        self.pending_ticks: list = []         # [(stamp, seq, log_t, Tick)] sorted by stamp
        self.seen_states: set = set()
        self.pending_states: list = []        # [(stamp, seq, log_t, x, effort)]
        self.seq = 0
        self.commands: dict = {}              # stamp -> (u, source)
        self.cmd_t: list = []                 # sorted stamps of self.commands
        self.steps: dict = {}
        self.plans: dict = {}
        self.skips = Skips()                  # joint states and EE references refused (gato.core.messages)
        self.state_bounds = None              # plausible [q; qd] in the solver's joint order, once known
        self.newest_state = None              # stamp of the newest joint state taken
        self.rows = None                      # per-tick outputs (tick_rows), once the controller is known
        self.nan_u = None
        self.top_du = _TopK(worst)
        self.top_norm = _TopK(2 * worst)
        self.await_norm: dict = {}            # tick stamp -> (i, Tick, TickResult) awaiting its interval
        self.norm_at: dict = {}               # interval start stamp -> norm, awaiting its tick
        self.last_interval_start = None
        self.last_tick_stamp = None
        # model vs reality
        self.pred = None
        self.prev_state = None
        self.use_eff = None
        self.res = None                       # Residuals, once the joints are known
        self.n_prune = 0
        self.p_skipped = 0
        self.resolver = None
        self.n_state = self.n_wrench = 0
        self.t_range = (None, None)           # log-time range of the replayed part: progress fraction
        self.gaps = TickGaps(commands=TOPICS["command"] in self.has)
        # A window of a thinned bag re-solves silently from the key tick before it: messages logged
        # before ``report_from`` (log ns) only bring the controller up to the window's first tick.
        self.report_from = None

    # -------------------------------------------------------------- messages
    def feed(self, topic, t, m):
        if topic == TOPICS["reference"]:
            self._reference(m, t)
            return
        if self.report_from is not None and t < self.report_from:
            self._preroll(topic, t, m)
            return
        if not self.started:
            if topic == TOPICS["solve_input"]:
                tk = self._tick(m, t)
                if tk is not None:
                    self._start(m, tk)
                    for e in self.early:
                        self._msg(*e)
                    self.early = None
                    self._queue_tick(tk, t)
                return
            if topic in (TOPICS["step_result"], TOPICS["plan"]):
                self._msg(topic, t, m)
            else:
                self.early.append((topic, t, m))
            return
        self._msg(topic, t, m)
        self.now = t
        self._release(t)

    def _preroll(self, topic, t, m):
        """A message logged before the window, in a silent re-solve from an earlier key tick: the
        ticks, their commands (recorded u, no gap counting) and step results / plans (the
        iterations a budget-stopped solve did) are kept; joint states are not (the model-vs-reality
        intervals are the window's)."""
        if topic == TOPICS["solve_input"]:
            tk = self._tick(m, t)
            if tk is None:
                return
            tk.silent = True
            if not self.started:
                self._start(m, tk)
                for e in self.early:          # the commands logged before it (all the pre-roll keeps)
                    self._command(e[2], count=False)
                self.early = []
            self._queue_tick(tk, t)
        elif topic == TOPICS["command"]:
            if self.started:
                self._command(m, count=False)
            else:
                self.early.append((topic, t, m))
            return
        elif topic in (TOPICS["step_result"], TOPICS["plan"]):
            self._msg(topic, t, m)
        else:
            return
        if self.started:
            self.now = t
            self._release(t)

    def _msg(self, topic, t, m):
        if topic == TOPICS["solve_input"]:
            tk = self._tick(m, t)
            if tk is not None:
                self._queue_tick(tk, t)
        elif topic == TOPICS["command"]:
            self._command(m)
        elif topic == TOPICS["joint_states"]:
            self._state(m, t)
        elif topic == TOPICS["step_result"]:
            self.steps.setdefault(stamp_ns(m.header), m)
        elif topic == TOPICS["plan"]:
            self.plans.setdefault(stamp_ns(m.header), m)

    def _tick(self, m, t_log):
        """A Tick from a SolveInput (as recording._from_solve_inputs), or None (duplicate / unusable)."""
        s = stamp_ns(m.header)
        if s in self.seen_ticks:
            return None
        self.seen_ticks.add(s)
        text = str(m.config_json)
        if text and text == self.cfg_text:   # the same configuration as the previous tick: not parsed again
            tk, cfg = tick_from_solve_input(m, self.cfg_prev, self.problems, config=self.cfg_prev)
        else:
            n_problems = len(self.problems)
            tk, cfg = tick_from_solve_input(m, self.cfg_prev, self.problems)
            if tk is not None and self.cfg_prev is not None and cfg == self.cfg_prev:
                tk.config = cfg = self.cfg_prev  # one object per configuration: the replayer compares by identity
            if tk is not None and text and len(self.problems) == n_problems:   # parsed without a problem
                self.cfg_text = text
        self.cfg_prev = cfg
        return tk

    def _start(self, m, tk):
        from ..planners import controller_setup as setup
        from ..core.bsqp import robot_urdf

        self.started = True
        run = self.run
        run.config = tk.config
        robot = self.robot_arg
        if robot is not None and tk.config.get("robot") != robot:
            self.problems.append(f"--robot {robot} given, but the bag's controller ran {tk.config.get('robot')}: "
                                 "using the bag's")
        run.robot = tk.config.get("robot", robot)
        run.joint_names = list(m.joint_names)
        from pathlib import Path

        self.urdf = Path(self.urdf_arg) if self.urdf_arg else (robot_urdf(run.robot) if run.robot else None)
        run.urdf = self.urdf
        if self.urdf is not None and tk.config.get("urdf_sha256"):
            local = setup.urdf_sha256(self.urdf)
            run.urdf_matches = local == tk.config["urdf_sha256"]
        try:
            self.resolver = TickReplayer(tk.config, urdf=self.urdf)
        except ValueError as e:
            run.resolve_error = str(e)
        nu = self.resolver.nu if self.resolver is not None else 0
        self.rows = run.rows = tick_rows(nu)
        run.resolved = self.resolver is not None
        self.nan_u = np.full(nu, np.nan)
        if self.urdf is not None:
            try:
                self.pred = Predictor(self.urdf, run.joint_names)
            except ValueError as e:
                run.prediction_error = str(e)
            try:
                import pinocchio as pin

                self.state_bounds = messages.state_bounds(pin.buildModelFromUrdf(str(self.urdf)), run.joint_names)
            except Exception:  # noqa: BLE001 - joints the URDF lacks: no range check (the names are checked)
                self.state_bounds = None
        if self.torque_source == "command":
            self.use_eff = False

    def _command(self, m, count=True):
        s = stamp_ns(m.header)
        if s in self.commands:
            # a second command for a stamp (a hold answering a refused joint state that repeated the
            # last stamp) is not compared, but its tick number counts: it is no gap
            if count:
                self.gaps.see(int(m.tick), s, str(m.source))
            return
        names = list(m.joint_names)
        eff = np.asarray(m.effort, dtype=np.float64)
        jn = self.run.joint_names
        if len(names) != len(eff) or not all(j in names for j in jn):
            return
        self.commands[s] = (eff[[names.index(j) for j in jn]], str(m.source))
        bisect.insort(self.cmd_t, s)
        self.cmd_max = s if self.cmd_max is None else max(self.cmd_max, s)
        if count:
            self.gaps.see(int(m.tick), s, str(m.source))

    def _state(self, m, t_log):
        """A joint state, validated once (gato.core.messages: arrays, stamp, the controlled joints
        present, finite and plausible, not older than the newest one taken, the rules of the
        controller); a refused one is skipped and counted (summary ``skipped``)."""
        jn = self.run.joint_names
        try:
            s, names, pos, vel, eff = messages.joint_state_arrays(m, now_ns=t_log)
            x = messages.joint_vector(names, pos, vel, jn, self.state_bounds)
            if self.newest_state is not None and s < self.newest_state:
                raise messages.Rejected("order", f"JointState: stamp {s / 1e9:.3f} s is older than the newest "
                                        f"state's ({self.newest_state / 1e9:.3f} s)")
        except messages.Rejected as e:
            self.skips.reject(TOPICS["joint_states"], m, e)
            return
        if s in self.seen_states:
            return
        self.seen_states.add(s)
        self.newest_state = s
        sel = [names.index(j) for j in jn]
        e = eff[sel] if len(eff) == len(names) else np.full(len(sel), np.nan)
        self.seq += 1
        bisect.insort(self.pending_states, (s, self.seq, t_log, x, e))
        self.run.n_states += 1

    def _reference(self, m, t_log):
        """An EE reference window: not used (each tick carries its own), but validated like the
        controller does, so the report names the windows the controller refused."""
        try:
            messages.reference_window(m, now_ns=t_log)
        except messages.Rejected as e:
            self.skips.reject(TOPICS["reference"], m, e)

    def _queue_tick(self, tk, t_log):
        self.seq += 1
        bisect.insort(self.pending_ticks, (tk.stamp_ns, self.seq, t_log, tk))

    # -------------------------------------------------------------- processing
    def _release(self, now):
        """Process the held states and ticks that have what they need (or waited long enough), in
        stamp order; ``now``: the current log time (None: the end of the bag, everything)."""
        while self.pending_states and (now is None or self._state_ready(self.pending_states[0], now)):
            s, _, _, x, e = self.pending_states.pop(0)
            self._interval(s, x, e)
        while self.pending_ticks and (now is None or self._tick_ready(self.pending_ticks[0], now)):
            _, _, t_log, tk = self.pending_ticks.pop(0)
            self._solve(tk, t_log)
        self._prune()

    def _state_ready(self, item, now) -> bool:
        s, _, t_log, _, _ = item
        if now - t_log < self.la:
            return False
        if now - t_log >= self.la_max or self.use_eff or TOPICS["command"] not in self.has:
            return True
        prev = self.prev_state[0] if self.prev_state is not None else s
        return self.cmd_max is not None and self.cmd_max >= prev

    def _tick_ready(self, item, now) -> bool:
        s, _, t_log, _ = item
        if now - t_log >= self.la_max:
            return True
        if TOPICS["command"] in self.has and s not in self.commands:
            return False
        if TOPICS["step_result"] in self.has and s not in self.steps:
            return False
        return not (TOPICS["step_result"] not in self.has and TOPICS["plan"] in self.has and s not in self.plans)

    def _interval(self, s, x, e):
        prev, self.prev_state = self.prev_state, (s, x, e)
        if prev is None or self.pred is None:
            return
        s0, x0, _ = prev
        self.last_interval_start = s0
        k = int(bisect.bisect_right(self.cmd_t, s0)) - 1
        dt = (s - s0) / 1e9
        if self.use_eff is None:        # auto: efforts while every joint state carries them
            self.use_eff = bool(np.all(np.isfinite(e)))
        if self.use_eff and not np.all(np.isfinite(e)):
            if self.torque_source == "effort":
                self.p_skipped += 1
                self._no_norm(s0)
                return
            self.problems.append(f"model vs reality: the joint state at t={s / 1e9:.3f} s carries no effort: "
                                 "the controller's commands are the torque from there on")
            self.use_eff = False
        if not 0 < dt <= self.max_gap_s or (not self.use_eff and (k < 0 or (s0 - self.cmd_t[k]) / 1e9
                                                                  > self.max_gap_s)):
            self.p_skipped += 1
            self._no_norm(s0)
            return
        u = e if self.use_eff else np.asarray(self.commands[self.cmd_t[k]][0], dtype=np.float64)
        e_q, e_qd, tau = self.pred.interval(s0, x0, s, x, u)
        if self.res is None:
            self.res = Residuals(len(e_q))
        self.res.add(s0 / 1e9, e_q, e_qd, tau)
        norm = float(np.linalg.norm(tau))
        if s0 in self.await_norm:
            i, tk, r = self.await_norm.pop(s0)
            self.top_norm.push(norm, i, (tk, r))
        else:
            self.norm_at[s0] = norm

    def _no_norm(self, s0):
        self.await_norm.pop(s0, None)

    def _solve(self, tk, t_log):
        silent = getattr(tk, "silent", False)
        if not silent:
            self.gaps.solved(tk.tick)
        c = self.commands.get(tk.stamp_ns)
        if c is not None:
            tk.u_recorded, tk.source = c[0], c[1]
        st = self.steps.pop(tk.stamp_ns, None)
        plan = self.plans.pop(tk.stamp_ns, None)
        if st is not None:
            tk.xu_recorded = np.asarray(st.xu_best, dtype=np.float64)
            tk.wall_s = float(st.wall_s)
            tk.iterations = int(st.iterations)
            tk.budget_hit = bool(st.budget_hit)
        elif plan is not None:
            tk.xu_recorded = np.asarray(plan.xu, dtype=np.float64)
        if silent:   # before the window: re-solved only to reach its first tick's controller state
            if self.resolver is not None:
                self.resolver.step(tk)
            return
        i = self.rows.n
        self.last_tick_stamp = tk.stamp_ns
        if tk.solver_state is not None:
            self.n_state += 1
        self.n_wrench += tk.wrench_hypotheses is not None
        wall_rec = tk.wall_s if tk.wall_s is not None else np.nan
        has_u = tk.u_recorded is not None
        if self.resolver is None:
            self.rows.add(tick=tk.tick, stamp_ns=tk.stamp_ns, wall_rec=wall_rec, has_u=has_u, u=self.nan_u,
                          du=np.nan, dplan=np.nan, dwarm=np.nan, dstate=np.nan, wall_s=np.nan, anchored=False,
                          state_anchored=False)
            return
        r = self.resolver.step(tk)
        self.rows.add(tick=tk.tick, stamp_ns=tk.stamp_ns, wall_rec=wall_rec, has_u=has_u, u=r.u, du=r.du,
                      dplan=r.dplan, dwarm=r.dwarm, dstate=r.dstate, wall_s=r.wall_s, anchored=r.anchored,
                      state_anchored=r.state_anchored)
        if self.worst > 0:
            du = -1.0 if np.isnan(r.du) else r.du
            if du > self.tol:
                self.top_du.push(du, i, (tk, r))
            if self.pred is not None:
                if tk.stamp_ns in self.norm_at:
                    self.top_norm.push(self.norm_at.pop(tk.stamp_ns), i, (tk, r))
                elif self.last_interval_start is None or tk.stamp_ns > self.last_interval_start:
                    self.await_norm[tk.stamp_ns] = (i, tk, r)
        if self.progress is not None:
            lo, hi = self.t_range
            self.progress(i + 1, (t_log - lo) / max(1, hi - lo) if lo is not None and hi is not None else 0.0)

    def _prune(self):
        """Forget what no later message can need (every 256 messages: the scans cost): commands
        older than the held messages by more than the hold gap and the longest wait, duplicate
        outputs and the dedup stamps of that age, residuals whose tick has passed."""
        self.n_prune += 1
        if self.n_prune % 256:
            return
        heads = [p[0] for p in (self.pending_states[:1] + self.pending_ticks[:1])]
        if self.prev_state is not None:
            heads.append(self.prev_state[0])
        if not heads:
            return
        lo = min(heads)
        cut = lo - self.max_gap_ns - self.la_max
        if self.cmd_t and self.cmd_t[0] < cut:
            n = bisect.bisect_left(self.cmd_t, cut)
            for s in self.cmd_t[:n - 1]:   # keep the latest older one: it may still be held
                del self.commands[s]
            del self.cmd_t[:n - 1]
        for d in (self.steps, self.plans):
            for s in [s for s in d if s < cut]:
                del d[s]
        for st in (self.seen_ticks, self.seen_states):
            for s in [s for s in st if s < cut]:
                st.discard(s)
        if self.last_tick_stamp is not None:
            for s in [s for s in self.norm_at if s < self.last_tick_stamp - self.la_max]:
                del self.norm_at[s]
        if self.last_interval_start is not None:
            for s in [s for s in self.await_norm if s < self.last_interval_start]:
                del self.await_norm[s]

    def finish(self):
        if self.started:
            self._release(None)
        run = self.run
        run.n_state, run.n_wrench = self.n_state, self.n_wrench
        if self.resolver is not None:
            run.notes = self.resolver.finish()
            run.effort_limit = self.resolver.effort_limit
        run.gaps = self.gaps.finish()
        run.skipped = self.skips.as_dict()
        self.problems.extend(self.skips.notes())
        kept = self.top_du.items()
        kept.update(self.top_norm.items())
        run.kept = kept
        run.picks = self._picks()
        if self.pred is not None:
            res = self.res if self.res is not None else Residuals(len(run.joint_names))
            run.prediction = res.summary(run.joint_names, skipped=self.p_skipped, max_substep=self.pred.max_substep,
                                         torque_source="effort" if self.use_eff else "command")
        return run

    def _picks(self) -> list:
        """The worst ticks, as :func:`gato.replay._worst` picks them from whole columns: the largest
        command differences over the tolerance, then the largest model residuals."""
        picks, seen = [], set()
        for du, i, _ in self.top_du.ranked():
            if len(picks) == self.worst:
                return picks
            picks.append((i, f"replayed command differs by {du:.3g} N*m"))
            seen.add(i)
        for norm, i, _ in self.top_norm.ranked():
            if len(picks) == self.worst:
                break
            if i not in seen:
                picks.append((i, f"model residual {norm:.3g} N*m (largest misprediction)"))
                seen.add(i)
        return picks


def stream_replay(bag_path, *, robot=None, urdf=None, torque_source="auto", tol=1e-9, worst=5,
                  start=None, end=None, progress=None) -> StreamRun:
    """Replay a bag tick by tick (see the module docstring).

    ``start`` / ``end``: a window (:func:`parse_bound` strings or (kind, value) tuples), found
    through the MCAP index. ``progress(done_ticks, fraction)`` after every re-solved tick
    (fraction: of the window's log time, 0 when the bag has no index).
    Returns a :class:`StreamRun`; ``streamed`` False when the bag has no usable SolveInput
    (nothing was replayed: use the in-memory reconstruction). Raises FileNotFoundError /
    ValueError when the path is not a bag or the window is empty.
    """
    from .bagstream import stream_bag

    start_ns, end_ns = resolve_window(bag_path, start, end)
    from_ns = _key_tick_before(bag_path, start_ns) if start_ns is not None else None
    bs = stream_bag(bag_path, list(TOPICS.values()), start_ns=from_ns if from_ns is not None else start_ns,
                    end_ns=end_ns, count_only=_COUNT_ONLY)
    if TOPICS["step_result"] in _with_messages(bs):   # else the recorded plan stands in for the step result
        bs.count_only([TOPICS["plan"]])
    key = TOPICS["solve_input"]
    if key not in bs.msgtypes or _lacks(bs, key):
        return StreamRun(streamed=False, storage=bs.storage)
    problems = bs.require({t: f for t, f in REQUIRED_FIELDS.items() if t in bs.msgtypes})
    for k in ("joint_states", "command"):
        if TOPICS[k] not in bs.msgtypes:
            problems.append(f"{TOPICS[k]}: not in the bag")
    unusable = {t for t in REQUIRED_FIELDS if t in bs.msgtypes and _lacks(bs, t)}
    for t in sorted(unusable):
        problems.append(f"{t}: another message version (fields missing, listed above): not used")
    st = _Streamer(bs, robot=robot, urdf=urdf, torque_source=torque_source, tol=tol, worst=worst, progress=progress)
    st.problems.extend(problems)
    if from_ns is not None:
        st.report_from = start_ns
    st.run.window = (start_ns, end_ns, bs.t_start_ns, bs.t_end_ns)
    st.t_range = (start_ns if start_ns is not None else bs.t_start_ns, end_ns if end_ns is not None else bs.t_end_ns)
    for topic, t, m in bs:
        if topic not in unusable:
            st.feed(topic, t, m)
    run = st.finish()
    if not st.started:
        return StreamRun(streamed=False, storage=bs.storage)
    run.storage, run.complete = bs.storage, bool(bs.complete)
    run.bag_problems = list(bs.problems)
    run.counts = {k: int(bs.counts.get(v, 0)) for k, v in TOPICS.items()}
    if run.T and not any(c["has_u"].any() for _, c in run.rows.chunks()):
        run.problems.append(f"{TOPICS['command']}: no recorded command matches a tick: commands are not compared")
    return run


#: Topics the streamed replay only counts (summary ``counts``): the ticks carry their reference
#: window and configuration (the plan too where the bag has step results).
_COUNT_ONLY = frozenset(TOPICS[k] for k in ("status", "snapshot", "parameter_events"))


def _with_messages(bs) -> set:
    """The bag's topics that hold messages: where the index counts them, those it counts on (a
    topic recorded with no message, e.g. a filtered copy, is not waited for); else all."""
    return {t for t in bs.msgtypes if bs.listed.get(t, 1) > 0}


def _lacks(bs, topic) -> bool:
    names = bs.fielddefs.get(bs.msgtypes[topic])
    if names is None:
        return False
    return any(f not in names for f in REQUIRED_FIELDS[topic])


def eta_printer(say, every_s: float = 10.0):
    """A ``progress(done, fraction)`` that prints the ticks done, the rate and the ETA (from the
    fraction of the log time replayed) at the first tick and then every ``every_s`` s of wall clock."""
    t0 = time.perf_counter()
    last = [None]

    def prog(done, frac):
        now = time.perf_counter()
        if last[0] is not None and now - last[0] < every_s:
            return
        el = now - t0
        if last[0] is None:
            say(f"[gato replay]   first tick re-solved {el:.2f} s after the start")
            last[0] = now
            return
        last[0] = now
        frac = min(max(frac, 1e-9), 1.0)
        eta = el * (1 - frac) / frac
        say(f"[gato replay]   {done} ticks, {done / el:.0f} ticks/s, {frac * 100:.0f} % of the bag, "
            f"ETA {int(eta // 60)}:{int(eta % 60):02d}")

    return prog
