"""A ``--start`` / ``--end`` window of a bag: the bounds parsed (:func:`parse_bound`), turned into
log times through the MCAP index (:func:`resolve_window`, ticks by bisection), and the key tick a
re-solve of a thinned bag starts from (:func:`key_tick_before`: the latest tick before the window
that carries its solver state)."""
from __future__ import annotations

from .recording import TOPICS


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


def key_tick_before(path, t_ns: int, span_ns: int = int(1e9)):
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
