"""Stopping the process groups the benchmark scripts start (a ``ros2 launch``, a recorder, a
bringup): every process of the launch, not only its leader, must go before the next run starts,
or the leftovers load the machine and answer on the next run's topics."""
import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, timeout: float = 60.0) -> int:
    """SIGINT to the process group of ``proc`` (started with ``start_new_session=True``, so the
    group is its own), SIGKILL to the group if ``proc`` has not exited ``timeout`` seconds later;
    returns ``proc``'s exit code (negative: the signal that ended it). A group whose processes
    have all exited is only reaped; a ``proc`` already reaped is not signalled again (its pid may
    belong to another process by then)."""
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    if proc.returncode is not None:
        return proc.returncode
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:          # no process of the group is left
            break
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()
