"""Recorder bytes per second of run at 100 Hz, with and without compression and solver-state
thinning, the recorder's CPU, and a replay of what it wrote.

1. ``python -m gato_ros.bringup_sim --duration D`` (the real lockstep bringup: MuJoCo world,
   controller, reference and the gato recorder, each its own process; iiwa14 at 100 Hz). Its
   recorder runs with its defaults (zstd MCAP chunks; solver state on every 100th tick, the
   default again since a --start window replays exactly from a thinned bag).
2. Beside it, started first, a second gato recorder (``python -m gato_ros.record_cli``, its own
   process, sim time) of the same default topic set with ``--solver-state-period 1``: every
   message as published (the reference for the variants below).
3. That full bag is written again through the recorder's writer (gato_ros.bag.BagWriter) and its
   thinning (gato_ros.recorder_node.SolverStateThinner), compression none / zstd x solver state
   on every tick / every 100th, zstd levels 3-19 with every 100th, and MCAP chunks of 1 / 2 / 8 MiB
   (the default: 4 MiB): bytes per second of run (bag log-time span), the writer's CPU and
   per-topic raw bytes.
4. CPU: utime + stime of each recorder process, of the controller node and of the world
   (sampled from /proc until they exit), per second of wall clock and per second of run.
5. ``gato replay`` of the bringup's own (thinned, compressed) bag: matched or not, max |du|;
   and a window of it (5.55-7 s, not on a key tick) against the same ticks of the full replay.

Usage (a minute or two; not part of CI):

    python bench/bench_recorder_bytes.py --out /tmp/rec_bytes [--duration 20]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from run_info import host, write_result

ROOT = Path(__file__).resolve().parents[1]


def _cpu_s(pid: int):
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return None


class CpuWatch(threading.Thread):
    """Samples the CPU time of processes whose command line matches, until stopped."""

    def __init__(self, patterns: dict, env_tag: str):
        super().__init__(daemon=True)
        self.patterns, self.tag = patterns, env_tag
        self.cpu = {k: 0.0 for k in patterns}
        self.first = {k: None for k in patterns}
        self.done = threading.Event()

    def _ours(self, pid):
        try:
            return f"GATO_BENCH_TAG={self.tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False

    def run(self):
        pids = {}
        while not self.done.is_set():
            for p in os.listdir("/proc"):
                if not p.isdigit() or int(p) in pids.values() or not self._ours(p):
                    continue
                try:
                    cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                for k, pat in self.patterns.items():
                    if k not in pids and pat(cmd):
                        pids[k] = int(p)
                        self.first[k] = time.monotonic()
            for k, pid in pids.items():
                c = _cpu_s(pid)
                if c is not None:
                    self.cpu[k] = c
            time.sleep(0.2)


def rewrite(src: Path, dst: Path, compression: str, period: int, level: int | None = None,
            chunk_size: int | None = None) -> dict:
    """The bag ``src`` written again (compression, solver state every ``period`` ticks, zstd
    ``level`` and MCAP ``chunk_size`` [bytes]: None the writer's defaults)."""
    from rosbags.rosbag2 import Reader

    from gato_ros.bag import BagWriter, typestore
    from gato_ros.recorder_node import SOLVE_INPUT_TYPE, SolverStateThinner

    ts = typestore()
    shutil.rmtree(dst, ignore_errors=True)
    thin = SolverStateThinner(period, ts)
    per_topic = {}
    t0 = time.process_time()
    with Reader(src) as r:
        w = BagWriter(dst, compression=compression, **({} if level is None else {"zstd_level": level}),
                      **({} if chunk_size is None else {"chunk_size": chunk_size}))
        w.open()
        conns = {}
        for c in r.connections:
            conns[c.id] = w.add_connection(c.topic, c.msgtype, typestore=ts)
        span = (r.end_time - r.start_time) / 1e9
        for c, t, data in r.messages():
            raw = bytes(data)
            if c.msgtype == SOLVE_INPUT_TYPE and period > 1:
                raw = thin(raw)
            w.write(conns[c.id], t, raw)
            per_topic[c.topic] = per_topic.get(c.topic, 0) + len(raw)
        w.close()
    size = sum(f.stat().st_size for f in dst.rglob("*.mcap"))
    return {"compression": compression, "zstd_level": level, "chunk_size": chunk_size or w.chunk_size,
            "solver_state_period": period, "MB_per_s": round(size / span / 1e6, 3),
            "writer_cpu_s_per_s": round((time.process_time() - t0) / span, 3), "run_s": round(span, 2),
            "raw_MB_per_s": {k: round(v / span / 1e6, 3) for k, v in sorted(per_topic.items(), key=lambda kv: -kv[1])}}


def run(out: Path, duration: float) -> dict:
    import uuid

    out.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    env = dict(os.environ, GATO_BENCH_TAG=tag, PYTHONUNBUFFERED="1")
    full = out / "full_bag"
    run_dir = out / "run"
    for p in (full, run_dir):
        shutil.rmtree(p, ignore_errors=True)
    watch = CpuWatch({
        "recorder (bringup, defaults)": lambda c: "recorder_node" in c,
        "recorder (period 1)": lambda c: "record_cli" in c,
        "controller": lambda c: "controller_node" in c,
        "world": lambda c: "sim_node" in c,
    }, tag)
    watch.start()
    rec_log = open(out / "full_recorder.log", "w")
    rec = subprocess.Popen([sys.executable, "-m", "gato_ros.record_cli", "-o", str(full), "--solver-state-period", "1",
                            "--progress", "0", "--", "--ros-args", "-p", "use_sim_time:=true"],
                           env=env, stdout=rec_log, stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(5.0)
    t0 = time.monotonic()
    bu = subprocess.run([sys.executable, "-m", "gato_ros.bringup_sim", "--duration", str(duration), "--out",
                         str(run_dir)], env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    (out / "bringup.log").write_text(bu.stdout + bu.stderr)
    time.sleep(2.0)
    os.killpg(rec.pid, signal.SIGINT)
    rec.wait(timeout=120)
    rec_log.close()
    watch.done.set()
    watch.join()
    if bu.returncode != 0:
        raise RuntimeError("bringup failed:\n" + (bu.stdout + bu.stderr)[-3000:])
    res = {"duration_s": duration, "bringup_wall_s": round(wall, 1), "load_1min_end": round(os.getloadavg()[0], 2),
           "cpu_s": {k: round(v, 2) for k, v in watch.cpu.items()},
           "cpu_s_per_s_of_run": {k: round(v / duration, 3) for k, v in watch.cpu.items()}}
    bag = run_dir / "bag"
    size = sum(f.stat().st_size for f in bag.rglob("*.mcap"))
    res["bringup_bag_MB_per_s"] = round(size / duration / 1e6, 3)
    res["variants"] = [rewrite(full, out / f"v_{c}_{p}", c, p) for c in ("none", "zstd") for p in (1, 100)]
    res["variants"] += [rewrite(full, out / f"v_zstd{lv}_100", "zstd", 100, lv) for lv in (3, 9, 15, 19)]
    # MCAP chunk size (the writer's default 4 MiB, rosbag2's zstd_small; rosbags' own 1 MiB before)
    res["variants"] += [rewrite(full, out / f"v_zstd_100_chunk{cs >> 20}M", "zstd", p, None, cs)
                        for cs in (2**20, 2**21, 2**23) for p in (1, 100)]
    rp = subprocess.run([sys.executable, "-m", "gato", "replay", str(bag), "--out", str(out / "replay")],
                        env=env, capture_output=True, text=True, timeout=1800)
    s = json.loads((out / "replay" / "summary.json").read_text()) if (out / "replay" / "summary.json").exists() else {}
    res["replay_of_bringup_bag"] = {"rc": rp.returncode, "matched": s.get("matched"), "max_du": s.get("max_du"),
                                    "compared": s.get("compared"), "solver_state": s.get("solver_state"),
                                    "anchored": s.get("anchored")}
    res["window_replay_of_bringup_bag"] = window_check(bag)
    return res


def window_check(bag: Path, start: str = "5.55", end: str = "7") -> dict:
    """A --start/--end window of ``bag`` against the same ticks of its full streamed replay."""
    import numpy as np

    from gato.replay import stream_replay

    full = stream_replay(bag)
    t0 = time.perf_counter()
    win = stream_replay(bag, start=start, end=end)
    wall = time.perf_counter() - t0
    pos = {s: i for i, s in enumerate(full.stamp_ns.tolist())}
    idx = [pos[s] for s in win.stamp_ns.tolist()]
    return {"window": [start, end], "ticks": int(win.T), "first_tick": int(win.tick[0]) if win.T else None,
            "max_abs_u_vs_full": float(np.max(np.abs(win.u - full.u[idx]))) if win.T else None,
            "beyond_1e-9": int(np.sum(win.du > 1e-9)), "max_du": float(np.nanmax(win.du)) if win.T else None,
            "wall_s": round(wall, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--duration", type=float, default=20.0)
    a = ap.parse_args(argv)
    res = run(a.out, a.duration)
    res["machine"] = host()
    print(json.dumps(res, indent=1))
    write_result(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
