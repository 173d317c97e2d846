"""Recorder loss at a 1 kHz control rate: the gato ros2_control plugin in embedded mode, recorded.

A real controller_manager (ros2_control_node, update_rate 1000 Hz) runs the iiwa14 on
mock_components/GenericSystem with joint_state_broadcaster (100 Hz) and the gato plugin in
embedded mode (``gato_plugin_embedded``: BSQP in its solver thread at the shipped 100 Hz, holding
the EE where it was at activation), all started with ``ros2 launch``. Every update() is one tick on
``/gato_plugin_embedded/ticks`` (gato_msgs/ControlTicks, batches every 10 ms, sequence numbers).
Two recorders run at once, each in its own process, for ``--seconds`` of wall clock:

- the gato recorder (``python -m gato_ros.record_cli``, zstd MCAP) of its default controller graph
  for the plugin (``--controller /gato_plugin_embedded --controller-name gato_plugin_embedded``:
  /joint_states, the plugin's ticks, status, step_result, solver_stats, /parameter_events,
  /robot_description, a parameter snapshot);
- ``ros2 bag record -s mcap`` of the same topics (where the overlay / ROS 2 has it).

Reported per recorder: ticks in its bag, sequence numbers missing between the first and the last
one it holds (from the bag, not from the recorder's own claim), and for the gato recorder its
closing summary's count; its CPU time per second of run (utime + stime of the process, /proc);
the ticks the plugin's ring dropped; the controller_manager's CPU; the plugin's update() time
(median / p99 / max since activation, from its last ~/status in the gato bag).

Usage (about 2 minutes; not part of CI):

    python bench/bench_recorder_1khz.py --out /tmp/rec1k [--seconds 60]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from proc_util import stop_group
from run_info import host, write_result

ROOT = Path(__file__).resolve().parents[1]
ROBOT = "iiwa14"
CTRL = "gato_plugin_embedded"

LAUNCH = """
import os
from launch import LaunchDescription
from launch_ros.actions import Node

HERE = os.path.dirname(os.path.abspath(__file__))


def generate_launch_description():
    desc = open(os.path.join(HERE, 'robot.urdf')).read()
    return LaunchDescription([
        Node(package='robot_state_publisher', executable='robot_state_publisher', output='screen',
             parameters=[{'robot_description': desc}]),
        Node(package='controller_manager', executable='ros2_control_node', output='screen',
             parameters=[os.path.join(HERE, 'controllers.yaml')]),
        Node(package='controller_manager', executable='spawner', output='screen',
             arguments=['joint_state_broadcaster', '%s', '--controller-manager', '/controller_manager']),
    ])
""" % CTRL


def _cpu_s(pid: int) -> float:
    """utime + stime of a process [s] (0 when it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return 0.0


def _pid_of(tag: str, needle: str) -> int | None:
    """PID of our process (environment tag) whose command line contains needle."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if f"GATO_BENCH_TAG={tag}".encode() not in Path(f"/proc/{p}/environ").read_bytes().split(b"\0"):
                continue
            if needle in Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                return int(p)
        except OSError:
            continue
    return None


def _seqs(bag: Path, topic: str):
    import numpy as np

    from gato.bagio import read_bag

    got = read_bag(bag, [topic])
    msgs = got.messages.get(topic, [])
    seq = np.concatenate([np.asarray(m.seq, dtype=np.int64) for _, m in msgs]) if msgs else np.zeros(0, np.int64)
    dropped = int(msgs[-1][1].ring_dropped) if msgs else 0
    return seq, dropped, got.problems


def run(out: Path, seconds: float) -> dict:
    sys.path.insert(0, str(ROOT / "src" / "gato_ros"))
    import yaml

    from gato_ros import params

    out.mkdir(parents=True, exist_ok=True)
    urdf = subprocess.run(["xacro", str(ROOT / "src/gato_bringup/urdf" / f"{ROBOT}.urdf.xacro")],
                          capture_output=True, text=True, check=True).stdout
    (out / "robot.urdf").write_text(urdf)
    cfg = yaml.safe_load(params.controllers_yaml(ROBOT, update_rate=1000))
    (out / "controllers.yaml").write_text(yaml.safe_dump(cfg))
    (out / "bench.launch.py").write_text(LAUNCH)
    tag = uuid.uuid4().hex
    env = dict(os.environ, GATO_BENCH_TAG=tag, PYTHONUNBUFFERED="1")
    topic = f"/{CTRL}/ticks"
    procs, logs = {}, {}

    def start(name, cmd):
        logs[name] = open(out / f"{name}.log", "w")
        procs[name] = subprocess.Popen(cmd, env=env, stdout=logs[name], stderr=subprocess.STDOUT,
                                       start_new_session=True)

    bags = {"gato": out / "bag_gato", "ros2bag": out / "bag_ros2"}
    for b in bags.values():
        shutil.rmtree(b, ignore_errors=True)
    try:
        start("launch", ["ros2", "launch", str(out / "bench.launch.py")])
        end = time.monotonic() + 180
        while not any("activated" in ln and CTRL in ln for ln in (out / "launch.log").read_text().splitlines()):
            if time.monotonic() > end or procs["launch"].poll() is not None:
                raise RuntimeError("the plugin did not activate:\n" + (out / "launch.log").read_text()[-3000:])
            time.sleep(0.5)
        from gato_ros.recorder_node import controller_graph_topics

        graph = [t for t in controller_graph_topics(f"/{CTRL}", CTRL)]
        start("gato", [sys.executable, "-m", "gato_ros.record_cli", "-o", str(bags["gato"]), "--controller", f"/{CTRL}",
                       "--controller-name", CTRL, "--progress", "10"])
        have_ros2bag = shutil.which("ros2") is not None
        if have_ros2bag:
            start("ros2bag", ["ros2", "bag", "record", "-s", "mcap", "-o", str(bags["ros2bag"]), "--topics", *graph])
        time.sleep(8.0)  # discovery, subscriptions, the gato recorder's parameter snapshot
        pids = {"gato": procs["gato"].pid, "ros2bag": _pid_of(tag, "bag record"),
                "controller_manager": _pid_of(tag, "ros2_control_node")}
        cpu0 = {k: _cpu_s(p) for k, p in pids.items() if p}
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        cpu1 = {k: _cpu_s(p) for k, p in pids.items() if p}
        load1 = os.getloadavg()[0]
        for name in ("gato", "ros2bag"):
            if name in procs:
                stop_group(procs[name])
    finally:
        for name in ("gato", "ros2bag", "launch"):
            if name in procs:
                stop_group(procs[name])
        for f in logs.values():
            f.close()
    res = {"seconds": round(wall, 1), "update_rate_hz": 1000, "load_1min": [round(load0, 2), round(load1, 2)],
           "cpu_per_s": {k: round((cpu1[k] - cpu0[k]) / wall, 3) for k in cpu1}, "recorders": {}}
    for name, bag in bags.items():
        if not bag.exists():
            continue
        seq, dropped, problems = _seqs(bag, topic)
        missing = int((seq[-1] - seq[0] + 1) - len(seq)) if len(seq) else None
        r = {"ticks_in_bag": int(len(seq)), "first_seq": int(seq[0]) if len(seq) else None,
             "last_seq": int(seq[-1]) if len(seq) else None, "missing_by_seq": missing,
             "ring_dropped": dropped, "bag_problems": list(problems),
             "bag_bytes": sum(f.stat().st_size for f in bag.rglob("*") if f.is_file())}
        if name == "gato":
            from gato.bagio import read_bag

            st = read_bag(bag, [f"/{CTRL}/status"]).messages.get(f"/{CTRL}/status", [])
            if st:   # the plugin's own update() timing since activation (with the ring push)
                last = st[-1][1]
                r["plugin_update_us"] = {"p50": float(last.update_p50_us), "p99": float(last.update_p99_us),
                                         "max": float(last.update_max_us), "ticks": int(last.ticks)}
            m = re.search(r"(\d+) ticks missing on " + re.escape(topic), (out / "gato.log").read_text())
            r["recorder_reports_missing"] = int(m.group(1)) if m else None
        res["recorders"][name] = r
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args(argv)
    res = run(a.out, a.seconds)
    res["machine"] = host()
    print(json.dumps(res, indent=1))
    write_result(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
