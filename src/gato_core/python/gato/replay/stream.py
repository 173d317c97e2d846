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

This module drives a bag through the parts, one job each: :mod:`gato.replay.window` (the
``--start`` / ``--end`` window and its key tick), :mod:`gato.replay.streamer` (the tick-by-tick
state machine), :mod:`gato.replay.gaps` (lost ticks), :mod:`gato.replay.stream_run` (the
result); their public names are importable from here as before.
"""
from __future__ import annotations

import time

from .gaps import TickGaps, gap_lines
from .recording import REQUIRED_FIELDS, TOPICS
from .stream_run import StreamRun, tick_rows
from .streamer import LOOKAHEAD_MAX_S, LOOKAHEAD_S, Streamer, with_messages
from .window import key_tick_before, parse_bound, resolve_window

__all__ = ["StreamRun", "stream_replay", "LOOKAHEAD_S", "LOOKAHEAD_MAX_S", "parse_bound", "TickGaps", "gap_lines"]


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
    from_ns = key_tick_before(bag_path, start_ns) if start_ns is not None else None
    bs = stream_bag(bag_path, list(TOPICS.values()), start_ns=from_ns if from_ns is not None else start_ns,
                    end_ns=end_ns, count_only=_COUNT_ONLY)
    if TOPICS["step_result"] in with_messages(bs):   # else the recorded plan stands in for the step result
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
    st = Streamer(bs, robot=robot, urdf=urdf, torque_source=torque_source, tol=tol, worst=worst, progress=progress)
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
