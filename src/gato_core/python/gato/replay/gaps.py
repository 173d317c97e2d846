"""Lost ticks in a bag, found by the controller's tick counter (:class:`TickGaps`), and the
report's lines naming them (:func:`gap_lines`)."""
from __future__ import annotations

from .recording import TOPICS


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
