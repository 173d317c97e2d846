"""Benchmark: what the live view costs the controller (issue 36).

Runs the simulation bringup (``python -m gato_ros.bringup_sim``, what ``scripts/sim.sh`` runs)
free-running at 100 Hz (``--realtime``: the controller has a real deadline, and the view's
process competes with it for the CPU) for ``--duration`` simulated seconds, alternately without
and with ``--view``; during the view runs a headless Chromium (Debian's package) shows the page
and a Foxglove protocol client subscribes to every channel, so the view renders and sends
everything it would to a person. Each run's numbers come from its bag (summary.json): the MPC
step time (ControllerStatus.solve_us) percentiles, deadline misses, joint state -> command
latency, EE tracking error. Prints a table of every run and the median / spread per
configuration; ``--out FILE`` writes it to the file --out names (never into docs/).

``--scheduling``: the CPU priority of the view's process (its ``scheduling`` parameter), of the
browser and of the Foxglove client thread (what the view drives), one or more of idle
(SCHED_IDLE, the default), nice (nice 19), normal (unchanged): each view configuration runs once
per mode and round, all in one rotation, so the modes are compared under the same load. The
1-minute load average at the end of each run is in the table (the machine may be shared).

``--rt-shield PRIO`` (root; a machine shared with other work, where deadline misses measure that
work rather than the view): the benchmark and the bringup it starts run at SCHED_RR priority
PRIO, above every normal process, and each mode's relation to the graph is kept: ``idle`` runs
the view, the browser and the client at SCHED_OTHER nice -20 (preempted by the graph at once, as
SCHED_IDLE is on a quiet machine, and with a larger share than the other work, which SCHED_IDLE
would not have; not SCHED_RR below the graph: a browser busy at real-time priority runs into the
kernel's real-time throttling, 950 ms per second per CPU, which then stops the graph's threads
too); ``normal`` at SCHED_RR PRIO with the graph (round-robin with it and subject to that
throttling: no fair share, unlike the nice-0 processes of a quiet machine, so it overstates what
``normal`` costs there). ``nice`` has no equivalent and is refused with it.

    source scripts/activate.sh && python bench/bench_view.py [--rounds 3] [--duration 20] \
        [--scheduling idle normal] [--out result.md]
"""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks_doc import write_result
from run_info import cpu_model, short_commit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
from localhost_ports import free_port as _free_port, port_open as _port_open  # noqa: E402

from gato_ros.cpu_priority import MODES, lower_this_thread  # noqa: E402


def _cpu_s(pids) -> float:
    """User + system CPU seconds of these processes so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


def _pids(pred) -> list:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{d}/stat") as f:
                    pgid = int(f.read().rsplit(")", 1)[1].split()[2])
            except OSError:
                continue
            if pred(int(d), cmd, pgid):
                out.append(int(d))
    return out


def _marked(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"GATO_BENCH_MARKER={marker}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _cpu_sampler(stop: threading.Event, samples: list, marker: str, browser_pgid) -> None:
    """Every second: (wall time, CPU seconds so far of this run's view node, of its controller node,
    of the browser). Only this run's processes (its marker in their environment) are counted."""
    while not stop.wait(1.0):
        view = _pids(lambda pid, cmd, pgid: "view_node" in cmd and _marked(pid, marker))
        ctrl = _pids(lambda pid, cmd, pgid: "controller_node" in cmd and _marked(pid, marker))
        br = _pids(lambda pid, cmd, pgid: pgid == browser_pgid) if browser_pgid is not None else []
        if ctrl:
            samples.append((time.monotonic(), _cpu_s(view), _cpu_s(ctrl), _cpu_s(br)))


def _rates(samples: list, skip_s: float) -> tuple:
    """CPU use in % of one core (view, controller, browser) from ``skip_s`` after the first sample to
    the last: the steady state, start-up (imports, meshes) left out."""
    if len(samples) < 2:
        return (float("nan"),) * 3
    t0 = samples[0][0] + skip_s
    first = next((x for x in samples if x[0] >= t0), samples[0])
    last = samples[-1]
    dt = max(last[0] - first[0], 1e-9)
    return tuple(100.0 * (last[i] - first[i]) / dt for i in (1, 2, 3))


def _set_rr(pids, prio: int) -> None:
    """Every thread of these processes to SCHED_RR ``prio``, or for ``prio`` -1 to SCHED_OTHER at
    nice -20 (threads they start later inherit it)."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
            try:
                _set_rr_thread(int(tid), prio)
            except ProcessLookupError:
                pass


def _set_rr_thread(tid: int, prio: int) -> None:
    if prio > 0:
        os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(prio))
    else:
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, tid, -20)


def _foxglove_client(port: int, stop: threading.Event, counts: dict, scheduling: str = "normal",
                     rr_prio: int = 0) -> None:
    """Subscribe to every advertised channel and count the messages until ``stop``; this thread
    runs at ``scheduling`` (a viewer of the view, as the browser), or at SCHED_RR ``rr_prio``."""
    import struct

    from websockets.sync.client import connect

    if rr_prio:
        _set_rr_thread(0, rr_prio)
    else:
        lower_this_thread(scheduling)

    subs = {}
    try:
        with connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"], max_size=None) as ws:
            while not stop.is_set():
                try:
                    m = ws.recv(timeout=0.5)
                except TimeoutError:
                    continue
                if isinstance(m, str):
                    j = json.loads(m)
                    for c in j.get("channels", []) if j.get("op") == "advertise" else []:
                        sid = len(subs) + 1
                        subs[sid] = c["topic"]
                        ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sid, "channelId": c["id"]}]}))
                elif m[0] == 1:
                    sid = struct.unpack_from("<I", m, 1)[0]
                    counts[subs[sid]] = counts.get(subs[sid], 0) + 1
    except Exception as e:  # noqa: BLE001 - reported, the run goes on
        from websockets.exceptions import ConnectionClosed

        if not isinstance(e, ConnectionClosed):        # the server closing at the end of the run is normal
            counts["error"] = str(e)


def _load1() -> float:
    """The 1-minute load average (other work on a shared machine shows here)."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_once(config: str, duration: float, robot: str, work: Path, scheduling: str = "idle",
             rt_shield: int = 0) -> dict:
    """One bringup run; ``config``: "none" (no view), "view" (the view with a Foxglove client
    subscribed to everything, no browser), "view+browser" (and a headless Chromium showing the page);
    ``scheduling``: the CPU priority of the view, the browser and the Foxglove client thread;
    ``rt_shield``: the SCHED_RR priority of the bringup (0: none), ``idle`` emulated below it."""
    view, with_browser = config != "none", config == "view+browser"
    out = work / f"{config.replace('+', '_')}-{scheduling}-{time.strftime('%H%M%S')}"
    cmd = [sys.executable, "-m", "gato_ros.bringup_sim", "--robot", robot, "--realtime", "--duration", str(duration),
           "--out", str(out)]
    vp = fp = None
    if view:
        vp, fp = _free_port(), _free_port()
        cmd += ["--view", "--view-port", str(vp), "--foxglove-port", str(fp), "--view-scheduling",
                "normal" if rt_shield else scheduling]
    rr_view = (-1 if scheduling == "idle" else rt_shield) if rt_shield else 0
    log = open(work / f"{out.name}.log", "w")
    marker = f"{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "GATO_BENCH_MARKER": marker})
    browser, stop, counts, th = None, threading.Event(), {}, None
    try:
        if view:
            from chromium_cdp import Chromium

            deadline = time.monotonic() + 240
            while not (_port_open(vp) and _port_open(fp)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the view did not come up: see {log.name}")
                time.sleep(0.2)
            if rr_view:
                _set_rr(_pids(lambda pid, c, g: "view_node" in c and _marked(pid, marker)), rr_view)
            if with_browser:
                browser = Chromium(1280, 800, scheduling="normal" if rt_shield else scheduling)
                if rr_view:              # before the page: the renderer processes inherit it
                    _set_rr(_pids(lambda pid, c, g: g == browser.proc.pid), rr_view)
                browser.navigate(f"http://127.0.0.1:{vp}/")
            th = threading.Thread(target=_foxglove_client, args=(fp, stop, counts, scheduling, rr_view), daemon=True)
            th.start()
        samples: list = []
        sampler = threading.Thread(target=_cpu_sampler, args=(stop, samples, marker,
                                                               browser.proc.pid if browser else None), daemon=True)
        sampler.start()
        code = proc.wait(timeout=duration * 20 + 300)
        frames = None
    finally:
        if browser is not None:
            try:
                frames = browser.evaluate("Number((document.getElementById('gato-frames')||{}).textContent)")
            except Exception:  # noqa: BLE001 - the page may be gone with the server
                frames = None
            browser.close()
        stop.set()
        if th is not None:
            th.join(timeout=5)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        log.close()
    load1 = _load1()
    view_pct, ctrl_pct, br_pct = _rates(samples, 5.0)
    s = json.loads((out / "summary.json").read_text())
    st, lat = s["solve_time_us"], s["latency_us"]
    label = f"{config} ({scheduling})" if view else config
    return {"config": label, "scheduling": scheduling if view else "", "load1": load1, "view": view, "exit": code, "ticks": s["counters"].get("ticks", 0), "misses": s["deadline_misses"],
            "solve_p50_ms": st["p50"] / 1e3, "solve_p99_ms": st["p99"] / 1e3, "lat_p50_ms": lat["p50"] / 1e3,
            "lat_p99_ms": lat["p99"] / 1e3, "err_mean_mm": s["tracking_error_m"]["mean"] * 1e3,
            "page_frames": frames, "foxglove_msgs": sum(v for k, v in counts.items() if k != "error"),
            "foxglove_error": counts.get("error"), "view_cpu_pct": view_pct, "controller_cpu_pct": ctrl_pct,
            "browser_cpu_pct": br_pct}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the configurations (order rotated)")
    ap.add_argument("--duration", type=float, default=20.0, help="simulated (= wall-clock, free-running) seconds")
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--scheduling", nargs="+", default=["idle"], choices=MODES,
                    help="CPU priority of the view, the browser and the Foxglove client: each view configuration "
                         "runs once per mode (default idle)")
    ap.add_argument("--rt-shield", type=int, default=0, metavar="PRIO",
                    help="run the bringup at SCHED_RR PRIO (root) above other work on a shared machine, idle "
                         "emulated at SCHED_OTHER nice -20 (see the module docstring)")
    ap.add_argument("--out", type=Path, help="write the result section to this file (not in docs/)")
    a = ap.parse_args(argv)
    if a.rt_shield:
        if not 1 <= a.rt_shield <= 99 or "nice" in a.scheduling:
            ap.error("--rt-shield: PRIO in [1, 99], and with --scheduling idle / normal only")
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(a.rt_shield))
    work = Path(tempfile.mkdtemp(prefix="gato-bench-view-"))
    rows = []
    runs = [("none", "")] + [(c, m) for m in a.scheduling for c in ("view", "view+browser")]
    for r in range(a.rounds):
        k = r % len(runs)
        for config, mode in runs[k:] + runs[:k]:
            row = run_once(config, a.duration, a.robot, work, mode or "normal", a.rt_shield)
            rows.append(row)
            print(json.dumps(row), flush=True)
    configs = [c if not m else f"{c} ({m})" for c, m in runs]
    hdr = ("| run | configuration | ticks | deadline misses | MPC step p50 [ms] | p99 [ms] | state->command p50 [ms] | "
           "p99 [ms] | EE error mean [mm] | page frames | Foxglove messages | CPU % of a core: controller / view / browser "
           "| load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {i + 1} | {r['config']} | {r['ticks']} | {r['misses']} | {r['solve_p50_ms']:.2f} | "
                   f"{r['solve_p99_ms']:.2f} | {r['lat_p50_ms']:.2f} | {r['lat_p99_ms']:.2f} | {r['err_mean_mm']:.1f} | "
                   f"{r['page_frames'] if r['page_frames'] is not None else ''} | {r['foxglove_msgs'] if r['view'] else ''} | "
                   f"{r['controller_cpu_pct']:.0f} / {r['view_cpu_pct']:.0f} / {r['browser_cpu_pct']:.0f} | {r['load1']:.1f} |\n"
                   for i, r in enumerate(rows))
    summ = ("| configuration | MPC step p50 [ms]: median (min-max) over runs | p99 [ms] | deadline misses per run | "
            "EE error mean [mm] | view process CPU [% of a core] |\n|---|---|---|---|---|---|\n")
    for config in configs:
        rs = [r for r in rows if r["config"] == config]

        def mm(key, fmt="{:.2f}"):
            v = [r[key] for r in rs]
            return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"
        summ += (f"| {config} | {mm('solve_p50_ms')} | {mm('solve_p99_ms')} | "
                 f"{mm('misses', '{:g}')} | {mm('err_mean_mm', '{:.1f}')} | {mm('view_cpu_pct', '{:.0f}')} |\n")
    print(hdr + body + "\n" + summ)
    if a.out:
        text = ("\n## Live view: the controller with and without the view\n\n"
                f"Measured {time.strftime('%Y-%m-%d')} at {short_commit()}. "
                f"Machine: {cpu_model()}, {os.cpu_count()} cores (shared with other work), Python "
                f"{platform.python_version()}. Command: `python bench/bench_view.py --rounds {a.rounds} --duration "
                f"{a.duration:g} --scheduling {' '.join(a.scheduling)}"
                + (f" --rt-shield {a.rt_shield}" if a.rt_shield else "") + f"` (the simulation bringup free-running at 100 Hz, {a.robot} figure-8, {a.duration:g} s "
                "per run, in rotation: no view; `--view` with a Foxglove client subscribed to every channel; `--view` with "
                "that client and a headless Chromium showing the page, on the same machine). Figures from each run's "
                "bag; CPU use from /proc, steady state (from 5 s after the controller started to the end of the run).\n\n"
                + summ + "\n" + hdr + body)
        write_result(a.out, text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
