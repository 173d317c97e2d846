"""Recorder loss under CPU load: lockstep bringups with busy-loop processes beside them.

Each run is ``python -m gato_ros.bringup_sim --duration D`` (the real lockstep bringup: MuJoCo
world, controller, reference and the gato recorder, each its own process; iiwa14 at 100 Hz)
while ``--hogs`` processes spin ``while True: pass``; beside it (started first) ``ros2 bag
record`` of the controller graph (the gato recorder's default topics, as hardware.launch.xml's
``record:=true`` records them), where the ros2 CLI is installed. Reported per run:
the commands the gato recorder names missing ("N ticks missing on /gato_controller/command",
from the controller's tick counter), the ticks missing from the ``ros2 bag record`` bag (gaps in
EffortCommand.tick between its first and last command), the bringup's wall time and the load
average.

Variants (``--variants``, alternated within each round):

- ``gato``: the nodes' own Fast DDS profile (share/gato_bringup/config/fastdds_gato.xml, 16 MB
  shared-memory segment, 4,096-sample port queue; gato_ros.node_util.use_fastdds_profile), the
  default (``ros2 bag record`` beside keeps Fast DDS's defaults either way: it is no gato node);
- ``default``: Fast DDS's defaults (512 KB segment): ``GATO_FASTDDS_PROFILE=off``, what the
  nodes ran with before;
- a path to a Fast DDS XML profile: every process of the run (recorders included) with
  ``FASTDDS_DEFAULT_PROFILES_FILE=<path>``. (Fast DDS 3 reads only that variable; the older
  FASTRTPS_DEFAULT_PROFILES_FILE, which this bench used first, is ignored by it.)

The bringup waits for ``ros2 bag record`` (``bringup_sim --wait-recorder rosbag2_recorder``: the
lockstep world starts only once its subscriptions to the recorded topics exist; issue 32: without
it the recorder, which subscribes to a topic only once it has discovered its publisher, missed the
controller's first commands in 3 of 5 runs); ``--no-wait-recorder`` starts it at once, as before.

``--ros2bag-profile`` gives ``ros2 bag record`` alone a Fast DDS profile: ``record`` is
share/gato_bringup/config/fastdds_record.xml (every reader of the process at least 1,000 samples
deep, the gato transports; docs/replay.md), ``none`` (the default) leaves it Fast DDS's defaults
or the variant's file, a path gives that file. ``--hog-nice N`` runs the busy loops under
``nice -n N`` (the bringup and the recorders keep nice 0).

Usage (about a minute per run; not part of CI):

    python bench/bench_recorder_load.py --out /tmp/rec_load --runs 3 --hogs 2 --variants default gato
    python bench/bench_recorder_load.py --out /tmp/rl --runs 5 --hog-nice 5 --variants gato --ros2bag-profile record
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

from proc_util import stop_group
from run_info import write_result

COMMAND_TOPIC = "/gato_controller/command"


def _bag_ticks(bag: Path) -> dict:
    """Commands in a bag and the ticks missing between its first and last (EffortCommand.tick)."""
    from gato_ros.bag import read_bag

    msgs = read_bag(bag, [COMMAND_TOPIC]).get(COMMAND_TOPIC, [])
    ticks = sorted({int(m.tick) for _, m in msgs})
    if not ticks:
        return {"commands": 0, "missing": None}
    return {"commands": len(ticks), "first_tick": ticks[0], "last_tick": ticks[-1],
            "missing": ticks[-1] - ticks[0] + 1 - len(ticks)}


def record_profile_path(choice: str) -> str | None:
    """The file ``--ros2bag-profile`` names: None for ``none``."""
    if choice == "none":
        return None
    if choice == "record":
        from ament_index_python.packages import get_package_share_directory

        return os.path.join(get_package_share_directory("gato_bringup"), "config", "fastdds_record.xml")
    return str(Path(choice).resolve())


def one_run(out: Path, duration: float, hogs: int, variant: str, ros2bag_profile: str | None = None,
            hog_nice: int = 0, wait_recorder: bool = True) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    if variant == "default":
        env["GATO_FASTDDS_PROFILE"] = "off"
    elif variant == "gato":
        env.pop("GATO_FASTDDS_PROFILE", None)
    else:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(Path(variant).resolve())
    rec = None
    if shutil.which("ros2"):
        from gato_ros.recorder_node import controller_graph_topics

        topics = [t for t in controller_graph_topics() if t != "/robot_description"]
        rec_env = dict(env)
        if ros2bag_profile:
            rec_env["FASTDDS_DEFAULT_PROFILES_FILE"] = ros2bag_profile
        rec = subprocess.Popen(["ros2", "bag", "record", "-s", "mcap", "-o", str(out / "ros2bag"), "--topics",
                                *topics], env=rec_env, stdout=open(out / "ros2bag.log", "w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(3.0)
    nice = ["nice", "-n", str(hog_nice)] if hog_nice else []
    spin = [subprocess.Popen([*nice, sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        wait = ["--wait-recorder", "rosbag2_recorder"] if rec is not None and wait_recorder else []
        p = subprocess.run([sys.executable, "-m", "gato_ros.bringup_sim", "--duration", str(duration), "--out",
                            str(out / "run"), *wait], env=env, capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t0
        load1 = os.getloadavg()[0]
    finally:
        for h in spin:
            h.kill()
            h.wait()
        if rec is not None:
            time.sleep(1.0)
            stop_group(rec, timeout=60)
    text = p.stdout + p.stderr
    (out / "bringup.log").write_text(text)
    miss = re.findall(r"(\d+) ticks missing on /gato_controller/command", text)
    res = {"variant": variant, "ros2bag_profile": ros2bag_profile, "hog_nice": hog_nice, "rc": p.returncode,
           "wait_recorder": bool(rec is not None and wait_recorder),
           "gato_recorder_missing": int(miss[-1]) if miss else None,
           "wall_s": round(wall, 1), "load_1min": [round(load0, 2), round(load1, 2)]}
    try:
        res["gato_recorder"] = _bag_ticks(out / "run" / "bag")
    except Exception as e:  # noqa: BLE001 - said so in the result
        res["gato_recorder"] = {"error": str(e)}
    if rec is not None:
        try:
            res["ros2_bag_record"] = _bag_ticks(out / "ros2bag")
        except Exception as e:  # noqa: BLE001 - a bag that could not be read: said so in the result
            res["ros2_bag_record"] = {"error": str(e)}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2, help="rounds (each runs every variant once)")
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run (100 ticks per s)")
    ap.add_argument("--hogs", type=int, default=2, help="busy-loop processes beside each run")
    ap.add_argument("--variants", nargs="+", default=["default", "gato"], metavar="V",
                    help="default | gato | path to a Fast DDS XML profile (see above)")
    ap.add_argument("--ros2bag-profile", default="none", metavar="P",
                    help="none | record | path: a Fast DDS profile for ros2 bag record alone (see above)")
    ap.add_argument("--hog-nice", type=int, default=0, help="nice -n for the busy loops (0: none)")
    ap.add_argument("--no-wait-recorder", action="store_true",
                    help="start the bringup at once, without waiting for ros2 bag record's subscriptions")
    a = ap.parse_args(argv)
    for v in a.variants:
        if v not in ("default", "gato") and not Path(v).is_file():
            ap.error(f"--variants: {v!r} is neither default, gato nor a file")
    res = []
    for i in range(a.runs):
        for k, v in enumerate(a.variants):
            r = one_run(a.out / f"run{i}_{k}", a.duration, a.hogs, v, record_profile_path(a.ros2bag_profile),
                        a.hog_nice, not a.no_wait_recorder)
            print(json.dumps(r), flush=True)
            res.append(r)
    write_result(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
