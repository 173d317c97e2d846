"""Lower the CPU priority of the calling process (every thread), so that a helper process (the
live view, its browser) only gets the CPU time the control path leaves over.

Modes (the view node's ``scheduling`` parameter):
    ``idle``: Linux ``SCHED_IDLE`` for every thread (the scheduler runs them only when no
        normal-priority thread of that core wants it, and a waking normal thread preempts
        them at once), and nice 19 as well; where ``SCHED_IDLE`` is not permitted (a
        container's seccomp policy, a non-Linux system) nice 19 alone.
    ``nice``: nice 19 (``SCHED_OTHER``: a weight of 15 against a nice-0 thread's 1024: the
        helper still gets about 1.5 % of a busy core, and its wake-ups still compete).
    ``normal``: unchanged.

Linux keeps the policy and the nice value per thread (``setpriority(PRIO_PROCESS, 0)``
and ``sched_setscheduler(0)`` change the calling thread only): :func:`lower_priority`
changes every thread listed in ``/proc/self/task``, and threads started later inherit the
setting from the thread that starts them. Lowering is always permitted; raising the
priority again may need privileges (``RLIMIT_NICE``), so a process lowers once, at start-up.
"""
from __future__ import annotations

import os

__all__ = ["MODES", "NICE", "lower_priority", "lower_this_thread", "thread_priority", "child_preexec"]

MODES = ("idle", "nice", "normal")
#: the nice value of ``idle`` and ``nice`` (the lowest priority of SCHED_OTHER)
NICE = 19


def _threads() -> list[int]:
    """Thread ids of this process (``/proc/self/task``; the process id alone where there is no /proc)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [os.getpid()]


def _lower_thread(tid: int, mode: str) -> str:
    """Apply ``mode`` to one thread; the setting applied ("SCHED_IDLE" / "nice 19") or raise OSError."""
    if hasattr(os, "setpriority"):
        os.setpriority(os.PRIO_PROCESS, tid, max(NICE, os.getpriority(os.PRIO_PROCESS, tid)))
    else:                                     # pragma: no cover - not Linux
        os.nice(NICE)
    if mode == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except OSError:                       # not permitted here: nice 19 stays
            pass
    return f"nice {NICE}"


def lower_priority(mode: str) -> str:
    """Lower the CPU priority of every thread of this process (and of the threads they start
    later) to ``mode`` (:data:`MODES`). Returns what was applied, for the log: ``"SCHED_IDLE"``,
    ``"nice 19"`` (also ``idle`` where SCHED_IDLE is refused), ``"unchanged"`` (``normal``), or
    ``"not lowered (...)"`` with the reason where the system refused. Raises ValueError
    (naming ``scheduling``) for an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"scheduling: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "normal":
        return "unchanged"
    applied = set()
    try:
        for _ in range(2):                    # twice: a thread started during the first pass
            for tid in _threads():
                try:
                    applied.add(_lower_thread(tid, mode))
                except ProcessLookupError:    # a thread that ended meanwhile
                    pass
    except OSError as e:
        return f"not lowered ({e})"
    return "SCHED_IDLE" if applied == {"SCHED_IDLE"} else f"nice {NICE}"


def lower_this_thread(mode: str) -> str:
    """Lower the calling thread only (and the threads it starts later) to ``mode``: a helper thread
    in a process that must keep its priority otherwise (a benchmark's client). Returns what was
    applied (as :func:`lower_priority`); raises ValueError for an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"scheduling: must be one of {', '.join(MODES)}, got {mode!r}")
    return "unchanged" if mode == "normal" else _lower_thread(0, mode)


def thread_priority(tid: int = 0) -> tuple[str, int]:
    """(policy name, nice value) of thread ``tid`` (0: the calling thread), e.g. ("SCHED_IDLE", 19)."""
    tid = tid or (os.gettid() if hasattr(os, "gettid") else os.getpid())
    names = {getattr(os, n): n for n in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")
             if hasattr(os, n)}
    policy = names.get(os.sched_getscheduler(tid), "?") if hasattr(os, "sched_getscheduler") else "SCHED_OTHER"
    return policy, os.getpriority(os.PRIO_PROCESS, tid)


def child_preexec(mode: str):
    """A ``preexec_fn`` for :class:`subprocess.Popen` that starts the child at ``mode`` (a browser
    beside the controller: its processes and threads inherit it), or None for ``normal``.
    Raises ValueError for an unknown mode."""
    if mode not in MODES:
        raise ValueError(f"scheduling: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "normal":
        return None

    def _pre():                               # runs in the child after fork: one thread
        _lower_thread(0, mode)
    return _pre
