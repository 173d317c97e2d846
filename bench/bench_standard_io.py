"""Benchmark: what the standard interfaces' publishing costs the controller's tick (issue 31).

The real controller node (gato_ros.controller_node.ControllerNode, in this process, a private ROS
domain on loopback) is fed JointState messages through its own callback from a closed loop on a
pinocchio forward-dynamics plant of iiwa14 (100 Hz ticks, 1 kHz physics), and each callback (the
whole tick: conversion, solve, every publish) is timed. A subscriber process takes
~/plan_path, ~/reference_path, ~/markers, /tf and /diagnostics, so the publishers have a matched reader.
Configurations, interleaved tick block by tick block (so machine load hits them alike):

- ``off``: StandardInterfaces.after_tick replaced by a no-op (no health accounting, no paths, no
  markers, no TF);
- ``default``: viz_rate_hz 10 (paths + MarkerArray + TF on every 10th plan), health every tick,
  /diagnostics at 1 Hz;
- ``default_no_markers``: ``default`` without the MarkerArray (what the markers add);
- ``every``: paths + MarkerArray + TF on every plan (viz_rate_hz at the control rate).
The view (Paths, markers, TF) is published after the tick by the executor (StandardInterfaces'
guard condition): its time is measured apart ("view after the tick"), not in the tick.
Also times the view's parts once in isolation (the MarkerArray build and publish).

Prints the median / p90 tick time per configuration and the ratio to ``off``; ``--out FILE``
writes it to the file --out names (never into docs/).

    source scripts/activate.sh && python bench/bench_standard_io.py [--blocks 30] [--block 50] [--out result.md]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks_doc import write_result
from run_info import cpu_model, short_commit

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 50)

SUBSCRIBER = """
import rclpy, sys
from nav_msgs.msg import Path
from tf2_msgs.msg import TFMessage
from diagnostic_msgs.msg import DiagnosticArray
from visualization_msgs.msg import MarkerArray
from gato_ros.node_util import qos
rclpy.init()
n = rclpy.create_node("bench_standard_io_reader")
count = [0]
cb = lambda m: count.__setitem__(0, count[0] + 1)
for t, ty in (("/gato_controller/plan_path", Path), ("/gato_controller/reference_path", Path), ("/tf", TFMessage),
              ("/diagnostics", DiagnosticArray), ("/gato_controller/markers", MarkerArray)):
    n.create_subscription(ty, t, cb, qos(10))
try:
    while rclpy.ok():
        rclpy.spin_once(n, timeout_sec=0.1)
except KeyboardInterrupt:
    pass
print(count[0], flush=True)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=30, help="tick blocks per configuration")
    ap.add_argument("--block", type=int, default=50, help="ticks per block")
    ap.add_argument("--out", help="write the Markdown section to this file (not in docs/)")
    a = ap.parse_args(argv)

    load0 = os.getloadavg()[0]
    reader = subprocess.Popen([sys.executable, "-c", SUBSCRIBER], stdout=subprocess.PIPE, text=True)
    try:
        return _run(a, reader, load0)
    finally:
        if reader.poll() is None:          # the run failed before it stopped the reader
            reader.kill()
            reader.wait()


def _run(a, reader, load0) -> int:
    import pinocchio as pin
    import rclpy
    from sensor_msgs.msg import JointState

    import gato
    from gato_ros.controller_node import ControllerNode
    from gato_ros.plan_view import RateLimiter

    rclpy.init()
    node = ControllerNode(parameter_overrides=[])
    time.sleep(2.0)                                   # discovery of the reader
    io = node.io
    real_after = io.after_tick
    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    data = model.createData()
    names = node.logic.solver_joint_names
    from gato_ros import params as schema

    q = np.array(schema.defaults(schema.SIM, "iiwa14")["q0"], dtype=float)
    v = np.zeros(model.nv)
    t_ns = [0]
    after = [0.0]
    last = {"u": np.zeros(model.nv)}

    def tick():
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t_ns[0], 10**9)
        msg.name, msg.position, msg.velocity = names, q.tolist(), v.tolist()
        t0 = time.perf_counter()
        node.logic.on_joint_state_msg(msg)
        dt = time.perf_counter() - t0
        # what the executor runs after the tick (the view's guard condition: Paths, markers, TF),
        # timed apart: no tick waits for it unless the next joint state arrives meanwhile
        t1 = time.perf_counter()
        if io._view_pending is not None:
            io._publish_view()
        after[0] = time.perf_counter() - t1
        t_ns[0] += 10_000_000
        return dt

    # the command: read back from the logic's last output (no subscription in this process)
    def step_plant():
        nonlocal q, v
        out = node.logic._last_out
        u = out.effort if out is not None and out.effort is not None else last["u"]
        for _ in range(10):
            acc = pin.aba(model, data, q, v, u)
            v = v + 1e-3 * acc
            q = pin.integrate(model, q, 1e-3 * v)

    vis = io._vis
    configs = {
        "off": lambda: setattr(io, "after_tick", lambda out: None),
        "default_no_markers": lambda: (setattr(io, "after_tick", real_after), setattr(io, "viz_rate", RateLimiter(10.0)),
                                       setattr(io, "_vis", None)),
        "default": lambda: (setattr(io, "after_tick", real_after), setattr(io, "viz_rate", RateLimiter(10.0)),
                            setattr(io, "_vis", vis)),
        "every": lambda: (setattr(io, "after_tick", real_after), setattr(io, "viz_rate", RateLimiter(1e6))),
    }
    times = {k: [] for k in configs}
    off_tick = {k: [] for k in configs}
    for _ in range(100):                              # warm-up: cold start, resume blend
        tick()
        step_plant()
    for b in range(a.blocks):
        for name, apply in configs.items():
            apply()
            for k in range(a.block):
                times[name].append(tick())
                off_tick[name].append(after[0])
                step_plant()
                if name != "off" and k == 0:
                    d0 = time.perf_counter()
                    io._on_diagnostics_timer()        # /diagnostics at 1 Hz: its share of the ticks
                    times[name][-1] += (time.perf_counter() - d0) * a.block * len(configs) / 100.0
    # the MarkerArray alone (build + publish) on the last plan's view, in isolation
    from gato_ros.plan_view import plan_view

    view = plan_view(node.logic._last_out, io.ee_path, node.logic.nq, len(io.pub_batch_paths or ()))
    mk = []
    for _ in range(200 if view is not None else 0):     # no plan view in a run too short for one
        m0 = time.perf_counter()
        io.pub_markers.publish(io._markers(view))
        mk.append(time.perf_counter() - m0)
    mk_ms = np.median(mk) * 1e3 if mk else float("nan")
    node.destroy_node()
    rclpy.shutdown()
    reader.send_signal(2)
    got = reader.communicate(timeout=20)[0].strip()
    load1 = os.getloadavg()[0]
    base = statistics.median(times["off"])
    rows = []
    for name, ts in times.items():
        ts = np.array(ts) * 1e3
        rows.append(f"| {name} | {len(ts)} | {np.median(ts):.3f} ms | {np.mean(ts):.3f} ms | "
                    f"{np.percentile(ts, 90):.3f} ms | {np.median(ts) / (base * 1e3):.3f} | "
                    f"{np.mean(ts) / (np.mean(times['off']) * 1e3):.3f} | {np.mean(off_tick[name]) * 1e3:.3f} ms |")
    text = (f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, load average "
            f"{load0:.1f} before / {load1:.1f} after (shared machine: other jobs ran).\n"
            f"Command: `python bench/bench_standard_io.py --blocks {a.blocks} --block {a.block}` (the controller "
            "node in-process, iiwa14, N=32, B=1, the schema defaults; pinocchio plant in closed loop; a reader "
            f"process subscribed to the paths, the markers, /tf and /diagnostics: {got} messages). One "
            f"MarkerArray of a {view.ee.shape[0]}-knot view built and published in isolation: median "
            f"{mk_ms:.3f} ms over 200.\n\n"
            "| configuration | ticks | median tick | mean | p90 | median / off | mean / off | view after the tick, mean per tick |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n")
    print(text)
    if a.out:
        write_result(a.out, f"\n## Standard interfaces: publishing cost on the controller tick (issue 31; "
                       f"{time.strftime('%Y-%m-%d')}, {short_commit()}, {platform.machine()})\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
