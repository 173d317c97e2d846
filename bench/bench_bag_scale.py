"""Bags at robot scale: streaming ``gato replay`` memory and throughput, recorder bytes per second.

1. A real lockstep run of the controller graph (test/replay_fixtures.record_lockstep_run:
   the controller, simulation-world and reference logic of gato_ros in one process, every
   message serialized by rclpy, iiwa14 at 100 Hz) of ``--source-s`` seconds is recorded.
2. Bytes per second of run: that bag written again through the recorder's writer
   (gato_ros.bag.BagWriter) with compression none and zstd (MCAP chunks).
3. Synthetic long bags of 2,000 / 20,000 / 100,000 ticks: the source run tiled in time (each
   copy's header stamps and log times shifted by the run's length; a copy starts with the
   controller's reset, so the replay resets there as the node did), written zstd-compressed
   and split at 256 MB like a robot recording.
4. ``python -m gato replay BAG`` of each in a fresh process: wall time, ticks/s, peak RSS
   (the child's ru_maxrss); and a window replay of the last minute (``--start -60``) of the
   largest: the time from the replay's start to its first re-solved tick (its own progress
   line) and the process's peak RSS.

5. ``--loss-s 60 --loss-rate 1000``: loss at a 1 kHz command rate. A stand-in controller
   process publishes, every 1 ms of its wall clock, an EffortCommand (its tick counter) and a
   SolveInput of the iiwa14's size (warm start 665 values, solver state 3,145: 31 kB, as the
   node sends with the shipped parameters) for 60 s; the recorder (``python -m
   gato_ros.record_cli``, zstd, its own process) records both. Reported: ticks published
   (the publisher's own count and rate), ticks in the bag, the recorder's "ticks missing"
   count, and the recorder's CPU time per second of run. The real controller node does not
   run at 1 kHz in Python; the plugin's embedded mode does not publish SolveInput: this
   measures the recorder at the message rate and size, not a controller.

Usage (minutes; not part of CI):

    python bench/bench_bag_scale.py --out /tmp/bag_scale [--source-s 5] [--ticks 2000 20000 100000]
    python bench/bench_bag_scale.py --out /tmp/bag_loss --ticks --no-window --loss-s 60 --loss-rate 1000
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))


def record_source(out: Path, seconds: float) -> Path:
    from replay_fixtures import record_lockstep_run

    bag = out / "source"
    if not bag.exists():
        record_lockstep_run(bag, seconds=seconds)
    return bag


def _header_first(typestore, msgtype: str) -> bool:
    fields = typestore.fielddefs.get(msgtype, (None, []))[1]
    return bool(fields) and fields[0][0] == "header"


def tile(src: Path, dst: Path, ticks: int, *, compression="zstd", max_bag_size=256_000_000) -> dict:
    """Write ``dst``: ``src`` repeated in time until it holds ``ticks`` SolveInputs. Returns
    {"ticks", "seconds", "bytes", "files"}."""
    import struct

    from rosbags.rosbag2 import Reader

    from gato_ros.bag import BagWriter, typestore

    ts = typestore()
    with Reader(src) as r:
        conns = list(r.connections)
        msgs = [(c.id, t, bytes(d)) for c, t, d in r.messages()]
        n_src = sum(1 for cid, _, _ in msgs if next(c for c in conns if c.id == cid).topic.endswith("solve_input"))
    t0, t1 = msgs[0][1], msgs[-1][1]
    period = t1 - t0 + 10_000_000
    copies = -(-ticks // n_src)
    w = BagWriter(dst, compression=compression, max_bag_size=max_bag_size)
    w.open()
    out = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest) for c in conns}
    stamped = {c.id: _header_first(ts, c.msgtype) for c in conns}
    topic = {c.id: c.topic for c in conns}
    written = 0
    for k in range(copies):
        off = k * period
        for cid, t, data in msgs:
            if not stamped[cid]:
                if k == 0:
                    w.write(out[cid], t, data)
                continue
            if topic[cid].endswith("solve_input"):
                if written == ticks:
                    continue
                written += 1
            fmt = "<iI" if data[1] == 1 else ">iI"
            sec, nsec = struct.unpack_from(fmt, data, 4)
            ns = sec * 1_000_000_000 + nsec + off
            b = bytearray(data)
            struct.pack_into(fmt, b, 4, ns // 1_000_000_000, ns % 1_000_000_000)
            w.write(out[cid], t + off, bytes(b))
    w.close()
    size = sum(f["path"].stat().st_size for f in w.files)
    return {"ticks": written, "seconds": copies * period / 1e9, "bytes": size, "files": len(w.files)}


def bytes_per_second(src: Path, out: Path) -> dict:
    """The source run written with and without compression: bytes per second of run."""
    from rosbags.rosbag2 import Reader

    with Reader(src) as r:
        dur = (r.end_time - r.start_time) / 1e9
    res = {"run_s": dur}
    for comp in ("none", "zstd"):
        dst = out / f"bps_{comp}"
        if dst.exists():
            import shutil

            shutil.rmtree(dst)
        t = time.perf_counter()
        tile(src, dst, _ticks_of(src), compression=comp)
        el = time.perf_counter() - t
        size = sum(f.stat().st_size for f in dst.glob("*.mcap"))
        res[comp] = {"bytes": size, "MB_per_s_of_run": size / dur / 1e6, "write_cpu_s_per_s_of_run": el / dur}
    return res


def _ticks_of(src: Path) -> int:
    from gato.bagio import stream_bag

    return stream_bag(src, ["/gato_controller/solve_input"]).total


def replay(bag: Path, out: Path, extra=()) -> dict:
    """``gato replay`` in a fresh process: wall, peak RSS, ticks, first-tick time."""
    args = ["replay", str(bag), "--out", str(out), "--worst", "3", *extra]
    # The child reports its own peak RSS, VmHWM of its address space: ru_maxrss survives exec and
    # so also counts the pages of this (large) parent the child was forked from.
    code = ("import re, sys\nfrom gato.__main__ import main\ntry:\n    rc = main(sys.argv[1:])\nfinally:\n"
            "    hwm = re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "    print('PEAK_RSS_KB', hwm, flush=True)\n"
            "sys.exit(rc)\n")
    cmd = [sys.executable, "-c", code, *args]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    peak = re.search(r"PEAK_RSS_KB (\d+)", text)
    summ = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    m = re.search(r"first tick re-solved ([0-9.]+) s after the start", text)
    return {"cmd": "gato " + " ".join(args), "rc": os.waitstatus_to_exitcode(status), "wall_s": wall,
            "replay_wall_s": summ.get("wall_s"), "peak_rss_MB": int(peak.group(1)) / 1024 if peak else None,
            "ticks": summ.get("ticks"),
            "matched": summ.get("matched"), "cpu_s": ru.ru_utime + ru.ru_stime,
            "first_tick_s": float(m.group(1)) if m else None, "tail": text[-600:]}


LOSS_PUBLISHER = r"""
import sys, time
import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy
from gato_msgs.msg import EffortCommand, SolveInput

rate, seconds = float(sys.argv[1]), float(sys.argv[2])
rclpy.init()
n = rclpy.create_node("bench_ctrl")
q = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE)
pc = n.create_publisher(EffortCommand, "/bench_ctrl/command", q)
ps = n.create_publisher(SolveInput, "/bench_ctrl/solve_input", q)
end = time.monotonic() + 120
while (pc.get_subscription_count() == 0 or ps.get_subscription_count() == 0) and time.monotonic() < end:
    rclpy.spin_once(n, timeout_sec=0.05)
time.sleep(2.0)
rng = np.random.default_rng(0)
si = SolveInput()
si.joint_names = [f"A{i}" for i in range(1, 8)]
si.x_measured = rng.standard_normal(14).tolist()
si.reference = rng.standard_normal(192).tolist()
si.warm_rows, si.xu_warm = 1, rng.standard_normal(665).tolist()
si.solver_state_rows, si.solver_state = 1, rng.standard_normal(3145).tolist()
si.config_json = ""
cmd = EffortCommand()
cmd.joint_names, cmd.effort, cmd.source = list(si.joint_names), [0.0] * 7, "mpc"
period = 1.0 / rate
t0 = time.monotonic()
k = 0
while True:
    now = time.monotonic()
    if now - t0 >= seconds:
        break
    due = t0 + k * period
    if now < due:
        time.sleep(due - now)
    k += 1
    ns = time.time_ns()
    for m in (si, cmd):
        m.header.stamp.sec, m.header.stamp.nanosec = ns // 10**9, ns % 10**9
    si.tick = cmd.tick = k
    # fresh numbers every tick: repeated ones would compress to nothing
    si.xu_warm = rng.standard_normal(665)
    si.solver_state = rng.standard_normal(3145)
    ps.publish(si)
    pc.publish(cmd)
el = time.monotonic() - t0
print(f"PUBLISHED {k} {el:.3f}", flush=True)
time.sleep(3.0)
"""


def loss(out: Path, seconds: float, rate: float) -> dict:
    """Loss of the recorder at ``rate`` Hz (see the module docstring, 5.)."""
    import signal
    import uuid

    from gato.bagio import read_bag

    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(100 + uuid.uuid4().int % 100))
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    bag = out / "loss_bag"
    rec = subprocess.Popen([sys.executable, "-m", "gato_ros.record_cli", "-o", str(bag), "--controller", "/bench_ctrl",
                            "--topics", "/bench_ctrl/command:gato_msgs/msg/EffortCommand",
                            "/bench_ctrl/solve_input:gato_msgs/msg/SolveInput", "--progress", "10"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pub = subprocess.run([sys.executable, "-c", LOSS_PUBLISHER, str(rate), str(seconds)], env=env,
                         capture_output=True, text=True, timeout=seconds + 300)
    rec.send_signal(signal.SIGINT)
    text = rec.stdout.read()
    _, _, ru = os.wait4(rec.pid, 0)
    m = re.search(r"PUBLISHED (\d+) ([0-9.]+)", pub.stdout)
    published, el = (int(m.group(1)), float(m.group(2))) if m else (None, None)
    got = read_bag(bag)
    miss = re.search(r"(\d+) ticks missing on /bench_ctrl/command", text)
    return {"rate_hz": rate, "seconds": seconds, "published": published,
            "published_rate_hz": published / el if published else None,
            "in_bag_command": got.counts.get("/bench_ctrl/command"),
            "in_bag_solve_input": got.counts.get("/bench_ctrl/solve_input"),
            "recorder_ticks_missing": int(miss.group(1)) if miss else None,
            "recorder_cpu_s_per_s": (ru.ru_utime + ru.ru_stime) / el if el else None,
            "bag_bytes": sum(f.stat().st_size for f in bag.glob("*.mcap")),
            "recorder_tail": text[-1500:], "publisher_err": pub.stderr[-800:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--source-s", type=float, default=5.0)
    ap.add_argument("--ticks", type=int, nargs="*", default=[2000, 20000, 100000])
    ap.add_argument("--no-window", action="store_true")
    ap.add_argument("--loss-s", type=float, default=0.0, help="seconds of the loss measurement (0: skip)")
    ap.add_argument("--loss-rate", type=float, default=1000.0)
    ap.add_argument("--no-bps", action="store_true", help="skip the source run and the bytes per second")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    res = {"machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "load_at_start": os.getloadavg(), "source_s": a.source_s}
    print("load at start (1/5/15 min):", res["load_at_start"], flush=True)
    if a.loss_s > 0:
        res["loss"] = loss(a.out, a.loss_s, a.loss_rate)
        print("loss", json.dumps({k: v for k, v in res["loss"].items() if "tail" not in k and "err" not in k}),
              flush=True)
    if not a.no_bps or a.ticks:
        src = record_source(a.out, a.source_s)
    if not a.no_bps:
        res["bytes_per_second"] = bytes_per_second(src, a.out)
        print(json.dumps(res["bytes_per_second"], indent=1), flush=True)
    res["replay"] = {}
    for n in a.ticks:
        bag = a.out / f"tiled_{n}"
        if not bag.exists():
            res[f"tile_{n}"] = tile(src, bag, n)
        r = replay(bag, a.out / f"replay_{n}")
        r["throughput_ticks_s"] = r["ticks"] / r["replay_wall_s"] if r["ticks"] and r["replay_wall_s"] else None
        # per CPU second of the replay process (imports and report included): what load does not change
        r["ticks_per_cpu_s"] = r["ticks"] / r["cpu_s"] if r["ticks"] and r["cpu_s"] else None
        r["load"] = os.getloadavg()
        res["replay"][n] = r
        print(n, json.dumps({k: v for k, v in r.items() if k != "tail"}), flush=True)
    if not a.no_window and a.ticks:
        n = max(a.ticks)
        r = replay(a.out / f"tiled_{n}", a.out / f"window_{n}", ("--start", "-60"))
        res["window_last_minute"] = r
        print("window", json.dumps({k: v for k, v in r.items() if k != "tail"}), flush=True)
    res["load_at_end"] = os.getloadavg()
    print("load at end (1/5/15 min):", res["load_at_end"], flush=True)
    (a.out / "bench_bag_scale.json").write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
