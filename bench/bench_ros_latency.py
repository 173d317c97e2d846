"""Benchmark: end-to-end latency of the gato controller node, free-running at 100 Hz.

Brings up the simulation graph in REAL TIME (gato_bringup sim.launch.yaml with
lockstep:=false: the MuJoCo world steps on a wall-clock timer at the control rate
and publishes /joint_states; the controller solves on every joint state; the
reference node publishes the figure-8) through gato_ros.launch_runner, and measures
for every tick:

- in-node latency: joint state received by the controller -> effort command
  published (ControllerStatus.latency_us, measured inside the node);
- external latency: this process's receipt of a /joint_states message -> its
  receipt of the /gato_controller/command stamped with that joint state (one DDS
  hop out of the controller more than the in-node figure, and one subscriber's view).

Prints median / p90 / p99 / max and deadline misses, and writes a section to
the file --out names (never into docs/).

    source scripts/activate.sh && python bench/bench_ros_latency.py [--seconds 20] [--out result.md]
"""
import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from run_info import cpu_model, pct
from benchmarks_doc import write_result

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")   # DDS stays on this machine


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured wall-clock seconds (after warm-up)")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds ignored after the first command")
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--out", type=Path, help="write the result section to this file (not in docs/)")
    a = ap.parse_args(argv)

    import rclpy
    from gato_msgs.msg import ControllerStatus, EffortCommand
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from gato_ros.node_util import qos

    load_before = os.getloadavg()
    runner = subprocess.Popen([sys.executable, "-m", "gato_ros.launch_runner", "gato_bringup", "sim.launch.yaml",
                               f"robot:={a.robot}", "lockstep:=false", "duration:=0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    rclpy.init()
    node = rclpy.create_node("gato_latency_bench")
    js_recv, cmd_recv, node_lat, statuses = {}, {}, [], []

    def on_js(m):
        js_recv.setdefault(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, time.perf_counter())

    def on_cmd(m):
        cmd_recv.setdefault(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, (time.perf_counter(), m.source))

    node.create_subscription(JointState, "/joint_states", on_js, qos(100))
    node.create_subscription(EffortCommand, "/gato_controller/command", on_cmd, qos(100))
    node.create_subscription(ControllerStatus, "/gato_controller/status", statuses.append, qos(100))
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    try:
        t_end = time.monotonic() + 180.0
        while not cmd_recv and time.monotonic() < t_end:          # start-up: processes, discovery
            ex.spin_once(timeout_sec=0.1)
        if not cmd_recv:
            print("no command within 180 s: is the workspace built and sourced?", file=sys.stderr)
            return 1
        t_warm = time.monotonic() + a.warmup
        while time.monotonic() < t_warm:
            ex.spin_once(timeout_sec=0.05)
        first_status = len(statuses)
        js_recv.clear()
        cmd_recv.clear()
        t_end = time.monotonic() + a.seconds
        while time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.05)
    finally:
        runner.send_signal(signal.SIGINT)
        try:
            runner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        node.destroy_node()
        rclpy.try_shutdown()
    load_after = os.getloadavg()
    ext = [(cmd_recv[s][0] - t) * 1e6 for s, t in js_recv.items() if s in cmd_recv and cmd_recv[s][1] == "mpc"]
    meas = statuses[first_status:]
    node_lat = [m.latency_us for m in meas if m.solve_us > 0]
    solve = [m.solve_us for m in meas if m.solve_us > 0]
    misses = (meas[-1].deadline_misses - meas[0].deadline_misses) if len(meas) > 1 else 0
    ticks = (meas[-1].ticks - meas[0].ticks) if len(meas) > 1 else 0
    unanswered = sum(1 for s in js_recv if s not in cmd_recv)
    if not ext or not node_lat:
        print("no latency samples collected", file=sys.stderr)
        return 1
    e, n, sv = pct(ext), pct(node_lat), pct(solve)
    limits = json.loads(meas[-1].params_json).get("limits", "?") if meas and meas[-1].params_json else "?"
    cmd = f"python bench/bench_ros_latency.py --seconds {a.seconds:g}" + (f" --robot {a.robot}" if a.robot != "iiwa14"
                                                                           else "")
    lines = [
        f"## ROS controller node latency, free-running at 100 Hz ({time.strftime('%Y-%m-%d')})",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load_before[0]:.1f} before / {load_after[0]:.1f} after (shared machine: other jobs ran).",
        f"Command: `{cmd}` (sim world in real time, MuJoCo, {a.robot}, N=32, B=1, 1 SQP iteration, joint-limit "
        f"rows: {limits}, figure-8 reference; {a.seconds:g} s measured after {a.warmup:g} s of warm-up).",
        "",
        "| measure | n | median | p90 | p99 | max |",
        "|---|---|---|---|---|---|",
        f"| joint state received -> command published (in the controller node) | {n['n']} | {n['p50'] / 1e3:.2f} ms "
        f"| {n['p90'] / 1e3:.2f} ms | {n['p99'] / 1e3:.2f} ms | {n['max'] / 1e3:.2f} ms |",
        f"| /joint_states -> /gato_controller/command, as one subscriber receives them | {e['n']} | "
        f"{e['p50'] / 1e3:.2f} ms | {e['p90'] / 1e3:.2f} ms | {e['p99'] / 1e3:.2f} ms | {e['max'] / 1e3:.2f} ms |",
        f"| MPCController.step inside the tick | {sv['n']} | {sv['p50'] / 1e3:.2f} ms | {sv['p90'] / 1e3:.2f} ms | "
        f"{sv['p99'] / 1e3:.2f} ms | {sv['max'] / 1e3:.2f} ms |",
        "",
        f"Deadline misses (receipt to publish > 10 ms): {misses} of {ticks} ticks; joint states without an answer "
        f"seen by the subscriber: {unanswered} of {len(js_recv)}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        write_result(a.out, ("\n" if a.out.exists() and a.out.stat().st_size else "") + text)
        print(f"appended to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
