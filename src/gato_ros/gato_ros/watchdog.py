"""The command watchdog of the simulation world (and of any drive-like consumer of commands):
the freshness of a command input on the caller's clock, its states and its events. ROS-free;
the simulation node (gato_ros.sim_node) reports it on ~/status (gato_msgs/SimStatus)."""
from __future__ import annotations

__all__ = ["CommandWatchdog"]


class CommandWatchdog:
    """Freshness of the command input on the caller's clock (seconds), and its events. States: ``waiting`` (no command yet), ``running``, ``timeout``. Only a running
    input times out (start-up is not a timeout); the next command ends a timeout.

    Args:
        timeout_s: age of the last command [s] beyond which the input times out (> 0).
        action: what the world does meanwhile, for the reports: "hold", "brake" or "wait".
    """

    def __init__(self, timeout_s: float, action: str):
        if not timeout_s > 0:
            raise ValueError(f"command_timeout_s: expected > 0 s, got {timeout_s!r}")
        if action not in ("hold", "brake", "wait"):
            raise ValueError(f"command_timeout_action: expected hold, brake or wait, got {action!r}")
        self.timeout_s, self.action = float(timeout_s), action
        self.state = "waiting"
        self.reason = "no command received yet"
        self.timeouts = 0
        self.last_timeout_sim_ns = 0
        self.applied = 0
        self.rejected = 0
        self._last_s = None

    @property
    def fresh(self) -> bool:
        """True while commands are to be applied (state ``running``)."""
        return self.state == "running"

    def age_s(self, now_s: float) -> float:
        """Age of the last accepted command [s], -1 before the first."""
        return -1.0 if self._last_s is None else float(now_s) - self._last_s

    def command(self, now_s: float, sim_ns: int) -> str | None:
        """An accepted command at ``now_s``. Returns the event text when it ends a timeout
        (or is the first command), else None."""
        prev, since = self.state, self.age_s(now_s)
        self._last_s = float(now_s)
        self.applied += 1
        if prev == "running":
            return None
        self.state, self.reason = "running", ""
        if prev == "waiting":
            return f"first command at t={sim_ns / 1e9:.3f} s"
        return f"commands resumed at t={sim_ns / 1e9:.3f} s after {since:.3f} s without"

    def check(self, now_s: float, sim_ns: int) -> str | None:
        """Time out a running input whose last command is older than ``timeout_s``. Returns
        the event text on the transition, else None."""
        if self.state != "running" or self.age_s(now_s) <= self.timeout_s + 1e-9:   # 1e-9: float sums of periods
            return None
        self.state = "timeout"
        self.timeouts += 1
        self.last_timeout_sim_ns = int(sim_ns)
        what = {"hold": "holding the joint positions (damped PD + gravity compensation)",
                "brake": "motor torque zero, joint brakes on",
                "wait": "the lockstep world waits for it"}[self.action]
        self.reason = (f"controller stopped answering at t={sim_ns / 1e9:.3f} s: no command for "
                       f"{self.age_s(now_s):.3f} s (command_timeout_s = {self.timeout_s:g}); {what}")
        return self.reason
