"""A small runner for ROS 2 XML / YAML launch files, for machines without ``ros2 launch``.

The pip-only ROS 2 install (rclpy from PyPI wheels) has no ``launch`` / ``launch_ros``.
This runner brings the same graph up as plain OS processes, so the launch files of
gato_bringup are tested here and used unchanged with ``ros2 launch`` on a full
ROS 2 install. It supports a stated SUBSET of the launch frontends:

Entities (XML tag / YAML key):
    launch                  root (XML element / YAML top-level key)
    arg name default        command-line arguments ``name:=value`` override defaults;
                            an arg without default must be given
    let name value          set a launch configuration
    node pkg exec name namespace args ros_args on_exit output respawn respawn_delay
        param name value    a parameter (value typed like launch_ros: YAML rules)
        param from          a parameter file
        remap from to       a topic / service remapping
        env name value      an environment variable for this process
    executable cmd name on_exit output respawn respawn_delay (with env)
    include file            another XML / YAML launch file (with ``arg name value``)
    group                   children (scoped: configurations set inside stay inside)
    if / unless             on every entity: "true"/"1" or "false"/"0"
Substitutions: $(var name), $(find-pkg-share pkg), $(find-pkg-prefix pkg),
$(env NAME [default]), $(dirname), $(command 'shell command') (its stdout), $(equals A B)
("true" when the two strings are equal), nested.
``on_exit="shutdown"``: when that process exits, the whole launch shuts down.
``respawn="true"`` (``respawn_delay`` seconds, default 0): when that process exits while
the launch is not shutting down, it is started again after the delay, as ros2 launch
does; every exit is reported, and the runner's exit code counts each process's last run.

Anything else raises a LaunchError naming the unsupported entity or substitution.

Processes: each node runs ``<prefix>/lib/<pkg>/<exec>`` (found through the ament
index: AMENT_PREFIX_PATH) with ``--ros-args -r __node:=<name> -r __ns:=<ns>`` and one
``--params-file`` per param item, in order (inline params go through a temporary
YAML file, so types survive). Each child gets its own process group and
PR_SET_PDEATHSIG=SIGTERM (it dies with the runner even if the runner is killed).
Output lines are prefixed with ``[name]``.

Shutdown: on SIGINT / SIGTERM to the runner, or when an ``on_exit="shutdown"`` process
exits, every live child gets SIGINT; after ``--sigint-timeout`` s the rest get SIGTERM,
after ``--sigterm-timeout`` s SIGKILL (the same escalation as ros2 launch). The runner
exits 0 when every process exited 0, else 1 (2 on a launch-file error).

Usage::

    python -m gato_ros.launch_runner gato_bringup sim.launch.yaml robot:=iiwa14 duration:=5
    python -m gato_ros.launch_runner path/to/file.launch.xml --print      # resolve, don't run
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .launch_files import _package_prefix, LaunchError, load, Process, resolve_executable

__all__ = ["LaunchError", "Process", "load", "Runner", "main"]


# ------------------------------------------------------------------ running
def _pdeathsig():
    """In the child before exec: die with the runner (SIGTERM when the parent exits)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Runner:
    """Start processes, forward their output, shut them down on request."""

    def __init__(self, processes, *, sigint_timeout=10.0, sigterm_timeout=5.0, out=None):
        self.specs = processes
        self.sigint_timeout, self.sigterm_timeout = sigint_timeout, sigterm_timeout
        self.out = out or sys.stdout
        self.procs: list = []           # [label, spec, Popen of its current run]
        self.returncodes: dict = {}
        self.respawns: dict = {}        # label -> exit codes of the runs that were respawned
        self.shutdown_reason = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def say(self, text: str):
        with self._lock:
            self.out.write(f"[launch_runner] {text}\n")
            self.out.flush()

    def _pump(self, name, stream):
        for line in iter(stream.readline, ""):
            with self._lock:
                self.out.write(f"[{name}] {line}" if line.endswith("\n") else f"[{name}] {line}\n")
                self.out.flush()
        stream.close()

    def _spawn(self, label, spec):
        cmd = [resolve_executable(spec.cmd[0])] + spec.cmd[1:]
        env = {**os.environ, **spec.env}
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, preexec_fn=_pdeathsig, bufsize=1)
        threading.Thread(target=self._pump, args=(label, p.stdout), daemon=True).start()
        self.say(f"started {label} (pid {p.pid}): {shlex.join(cmd)}")
        return p

    def start(self):
        names = {}
        for spec in self.specs:
            n = names[spec.name] = names.get(spec.name, 0) + 1
            label = spec.name if n == 1 else f"{spec.name}-{n}"
            self.procs.append([label, spec, self._spawn(label, spec)])

    def request_shutdown(self, reason: str):
        if not self.shutdown_reason:
            self.shutdown_reason = reason
        self._stop.set()

    def _signal_all(self, sig) -> list:
        live = []
        for label, _, p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    continue
                live.append(label)
        return live

    def _wait_all(self, timeout) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(p.poll() is not None for _, _, p in self.procs):
                return True
            time.sleep(0.05)
        return all(p.poll() is not None for _, _, p in self.procs)

    def shutdown(self):
        live = self._signal_all(signal.SIGINT)
        if live:
            self.say(f"shutting down ({self.shutdown_reason}): SIGINT to {', '.join(live)}")
        if not self._wait_all(self.sigint_timeout):
            self.say(f"SIGTERM to {', '.join(self._signal_all(signal.SIGTERM))} (no exit {self.sigint_timeout:g} s "
                     "after SIGINT)")
            if not self._wait_all(self.sigterm_timeout):
                self.say(f"SIGKILL to {', '.join(self._signal_all(signal.SIGKILL))}")
                self._wait_all(5.0)
        for _, _, p in self.procs:  # anything a child left in its process group
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def run(self) -> int:
        """Run until every process exited (none left to respawn), a shutdown was requested or
        an on_exit=shutdown process exited; then shut down. A respawn process that exits is
        started again after its respawn_delay. Returns 0 when the exit code of every
        process's last run is 0, else 1."""
        self.start()
        reported = set()          # pids whose exit was reported
        due = {}                  # index in procs -> monotonic time of its respawn
        while not self._stop.is_set():
            for i, (label, spec, p) in enumerate(self.procs):
                rc = p.poll()
                if rc is not None and p.pid not in reported:
                    reported.add(p.pid)
                    if spec.respawn:
                        self.say(f"{label} exited with code {rc}; respawning in {spec.respawn_delay:g} s")
                        due[i] = time.monotonic() + spec.respawn_delay
                    else:
                        self.say(f"{label} exited with code {rc}")
                        if spec.on_exit == "shutdown":
                            self.request_shutdown(f"{label} exited (on_exit=shutdown)")
            for i, t in list(due.items()):
                if time.monotonic() >= t and not self._stop.is_set():
                    del due[i]
                    label, spec, old = self.procs[i]
                    self.respawns.setdefault(label, []).append(old.returncode)
                    self.procs[i][2] = self._spawn(label, spec)
                    self.say(f"respawned {label} (run {len(self.respawns[label]) + 1})")
            if not due and all(p.pid in reported for _, _, p in self.procs):
                self.request_shutdown("all processes exited")
            self._stop.wait(0.05)
        self.shutdown()
        for label, _, p in self.procs:
            self.returncodes[label] = p.wait()
        bad = {k: v for k, v in self.returncodes.items() if v != 0}
        self.say("exit codes: " + ", ".join(f"{k}={v}" for k, v in self.returncodes.items()))
        return 1 if bad else 0


def _find_file(a: list) -> tuple:
    """(launch file path, launch args) from [file | pkg file] + name:=value ..."""
    pos = [x for x in a if ":=" not in x]
    largs = dict(x.split(":=", 1) for x in a if ":=" in x)
    if len(pos) == 1:
        return Path(pos[0]), largs
    if len(pos) == 2:
        share = Path(_package_prefix(pos[0])) / "share" / pos[0]
        hits = sorted(share.rglob(pos[1]))
        if not hits:
            raise LaunchError(f"no launch file {pos[1]!r} in {share}")
        return hits[0], largs
    raise LaunchError("expected <launch file> or <package> <launch file>, then name:=value arguments")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="launch_runner", description="Run a ROS 2 XML/YAML launch file (a subset) "
                                 "as OS processes; see the module docstring for what is supported.")
    ap.add_argument("target", nargs="+", help="<file> | <package> <file>, then name:=value launch arguments")
    ap.add_argument("--print", action="store_true", help="print the resolved processes and exit")
    ap.add_argument("--report", type=Path, help="write {name: exit code, ...} and the pids as JSON here")
    ap.add_argument("--sigint-timeout", type=float, default=10.0)
    ap.add_argument("--sigterm-timeout", type=float, default=5.0)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gato_launch_") as tmp:
        try:
            path, largs = _find_file(a.target)
            procs = load(path, largs, tmp)
        except LaunchError as e:
            print(f"[launch_runner] error: {e}", file=sys.stderr)
            return 2
        if a.print:
            for p in procs:
                print(json.dumps({"name": p.name, "cmd": p.cmd, "env": p.env, "on_exit": p.on_exit,
                                  "respawn": p.respawn, "respawn_delay": p.respawn_delay,
                                  # what the temporary inline parameter files (gone after this) hold
                                  "inline_params": p.inline_params}))
            return 0
        if os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") is None:
            print("[launch_runner] note: ROS_AUTOMATIC_DISCOVERY_RANGE is not set (DDS discovery may leave this "
                  "machine); scripts/env.sh sets LOCALHOST", file=sys.stderr)
        runner = Runner(procs, sigint_timeout=a.sigint_timeout, sigterm_timeout=a.sigterm_timeout)

        def on_signal(signum, _frame):
            runner.request_shutdown(signal.Signals(signum).name)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        try:
            code = runner.run()
        except LaunchError as e:
            print(f"[launch_runner] error: {e}", file=sys.stderr)
            runner.request_shutdown("launch error")
            runner.shutdown()
            code = 2
        if a.report:
            a.report.write_text(json.dumps({"returncodes": runner.returncodes,
                                            "pids": {label: p.pid for label, _, p in runner.procs},
                                            "respawns": runner.respawns,
                                            "shutdown_reason": runner.shutdown_reason}, indent=1))
        return code


if __name__ == "__main__":
    sys.exit(main())
