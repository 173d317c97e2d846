"""bench/proc_util.stop_group: the benchmark scripts' way to stop a launch, a recorder or a
bringup they started in a session of its own. The whole group goes (children included), a group
that ignores SIGINT is killed, a finished one is only reaped."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from proc_util import stop_group  # noqa: E402

# A leader that starts a child in its group and prints the child's pid; both wait forever.
LEADER = ("import subprocess, sys, time, signal\n"
          "{ignore}"
          "c = subprocess.Popen([sys.executable, '-c', 'import signal, time\\n{ignore_child}while True: time.sleep(1)'])\n"
          "print(c.pid, flush=True)\n"
          "while True: time.sleep(1)\n")


def _start(ignore_int: bool):
    ign = "signal.signal(signal.SIGINT, signal.SIG_IGN)\n" if ignore_int else ""
    code = LEADER.format(ignore=ign, ignore_child=ign.replace("\n", "\\n"))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child = int(proc.stdout.readline())
    return proc, child


def _gone(pid: int) -> bool:
    # The child is not ours to reap (its parent is the leader, then init): poll until kill(0)
    # fails or only a zombie is left.
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_sigint_stops_the_leader_and_its_child():
    proc, child = _start(ignore_int=False)
    rc = stop_group(proc, timeout=30)
    assert rc in (-signal.SIGINT, 1)   # KeyboardInterrupt in the leader's sleep: traceback, exit 1
    assert _gone(child)


def test_a_group_ignoring_sigint_is_killed():
    proc, child = _start(ignore_int=True)
    assert stop_group(proc, timeout=0.5) == -signal.SIGKILL
    assert _gone(child)


def test_a_finished_process_is_only_reaped():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    while proc.poll() is None:
        time.sleep(0.01)
    assert stop_group(proc) == 3
    assert stop_group(proc) == 3            # reaped already: not signalled again


def test_bad_timeout_is_named():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    with pytest.raises(ValueError, match="timeout"):
        stop_group(proc, timeout=0)
    proc.wait()
