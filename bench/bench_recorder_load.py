"""Recorder loss under CPU load: lockstep bringups with busy-loop processes beside them.

Each run is ``python -m gato_ros.bringup_sim --duration D`` (the real lockstep bringup: MuJoCo
world, controller, reference and the gato recorder, each its own process; iiwa14 at 100 Hz)
while ``--hogs`` processes spin ``while True: pass``. Reported per run: the commands the
recorder names missing ("N ticks missing on /gato_controller/command", from the controller's
tick counter), the bringup's wall time and the load average. ``--fastdds-profile FILE`` runs
every ROS process of the bringup with ``FASTRTPS_DEFAULT_PROFILES_FILE=FILE`` (a transport
experiment); runs with and without it alternate when ``--compare`` is given.

Usage (about a minute per run; not part of CI):

    python bench/bench_recorder_load.py --out /tmp/rec_load --runs 2 --hogs 2
    python bench/bench_recorder_load.py --out /tmp/rec_load --runs 2 --hogs 2 --fastdds-profile shm.xml --compare
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
from pathlib import Path


def one_run(out: Path, duration: float, hogs: int, profile: str | None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ)
    if profile:
        env["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(Path(profile).resolve())
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "gato_ros.bringup_sim", "--duration", str(duration), "--out",
                            str(out)], env=env, capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t0
    finally:
        for h in spin:
            h.kill()
            h.wait()
    text = p.stdout + p.stderr
    out.mkdir(parents=True, exist_ok=True)
    (out / "bringup.log").write_text(text)
    miss = re.findall(r"(\d+) ticks missing on /gato_controller/command", text)
    return {"profile": profile, "rc": p.returncode, "missing": int(miss[-1]) if miss else None,
            "wall_s": round(wall, 1), "load_1min": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run (100 ticks per s)")
    ap.add_argument("--hogs", type=int, default=2, help="busy-loop processes beside each run")
    ap.add_argument("--fastdds-profile", default=None, metavar="XML")
    ap.add_argument("--compare", action="store_true", help="alternate runs without and with --fastdds-profile")
    a = ap.parse_args(argv)
    if a.compare and not a.fastdds_profile:
        ap.error("--compare needs --fastdds-profile")
    variants = [None, a.fastdds_profile] if a.compare else [a.fastdds_profile]
    res = []
    for i in range(a.runs):
        for k, prof in enumerate(variants):
            r = one_run(a.out / f"run{i}_{k}", a.duration, a.hogs, prof)
            print(json.dumps(r), flush=True)
            res.append(r)
    (a.out / "result.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
