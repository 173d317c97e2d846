"""Benchmark: the hardware bringup closed through ros2_control with MuJoCo physics, free-running.

Starts ``ros2 launch gato_bringup hardware.launch.xml mujoco:=true reference:=true`` (iiwa14
by default: mujoco_ros2_control's ros2_control_node at 1 kHz with MuJoCo physics stepping in
real time, joint_state_broadcaster at 100 Hz, the effort forward controller, the gato
controller node, the figure-8 reference node, all on sim time; the start-up node resets the
simulation to the home keyframe and activates the controllers), waits for the loop to run,
skips ``--warmup`` simulated seconds and measures ``--seconds`` simulated seconds:

- EE tracking error at every /joint_states stamp: pinocchio FK of the measured joints vs the
  reference window in force at that stamp (as gato_ros.analysis does for bags);
- deadline misses: the controller node's counters (ControllerStatus) over the window;
- state -> applied-command latency, three views:
  in-node: joint state received -> command published (ControllerStatus.latency_us);
  end to end: the broadcaster's publication of a /joint_states message -> the arrival of the
  /effort_controller/commands array computed from it at a subscriber on this machine (the
  middleware's source / received timestamps, matched through the stamped
  /gato_controller/command); the JointGroupEffortController writes the latest array to the
  hardware in its next 1 kHz update, i.e. within 1 ms more;
  applied, in simulated time: the effort state interfaces in /joint_states are what the
  MuJoCo actuators apply; for each joint state we find the command it shows and report the
  simulated time from that command's joint state (10 ms = applied by the next broadcast).
- ``--controller plugin --mode follow|embedded`` (where hardware.launch.xml has the gato
  ros2_control plugin): the same graph with the plugin in place of the forward controller;
  tracking, deadline misses and the in-node / plugin latencies its ControllerStatus reports.

Prints a summary and writes that section to the file --out names (never into docs/).

    source scripts/activate.sh && python bench/bench_ros2_control_mujoco.py [--seconds 30] [--out result.md]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from run_info import cpu_model, pct, short_commit
from benchmarks_doc import write_result
from proc_util import stop_group

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")   # DDS stays on this machine


def ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def tracking_errors(js, refs, robot, shift_ns=0, vectors=False) -> np.ndarray:
    """EE error [m] at each joint state's stamp t against the reference at t - shift_ns: norms (n,),
    or the vectors EE - reference (n, 3) with ``vectors``."""
    import pinocchio as pin

    import gato
    from gato_ros.types import ReferenceWindow

    model = pin.buildModelFromUrdf(str(gato.robot_urdf(robot)))
    data = model.createData()
    fid = model.getFrameId(gato.robot_info(robot)["ee_frame"])
    names = list(model.names)[1:]
    windows = sorted(((ns(m.header), m) for m in refs), key=lambda x: x[0])
    stamps = np.array([s for s, _ in windows], dtype=np.int64)
    errs = []
    for m in js:
        s = ns(m.header) - shift_ns
        i = int(np.searchsorted(stamps, s, side="right")) - 1
        if i < 0:
            continue
        pos = dict(zip(m.name, m.position))
        pin.forwardKinematics(model, data, np.array([pos[j] for j in names]))
        ee = pin.updateFramePlacement(model, data, fid).translation
        wm = windows[i][1]
        w = ReferenceWindow(windows[i][0], float(wm.knot_dt), np.asarray(wm.positions, dtype=np.float64).reshape(-1, 3))
        d = ee - w.sample(s, 1, w.knot_dt)[0]
        errs.append(d.copy() if vectors else float(np.linalg.norm(d)))
    return np.asarray(errs)


def run_once(a, extra_args) -> dict:
    import rclpy
    from gato_msgs.msg import ControllerStatus, EEReference, EffortCommand
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    marker = uuid.uuid4().hex
    env = dict(os.environ, GATO_BENCH_MARKER=marker)
    cmd = ["ros2", "launch", "gato_bringup", "hardware.launch.xml", f"robot:={a.robot}", "mujoco:=true",
           "reference:=true", *(extra_args or ["controller:=node"])]
    log = open(a.log, "w") if a.log else subprocess.DEVNULL
    launch = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rclpy.init()
    node = rclpy.create_node("gato_ros2_control_mujoco_bench")
    rec = {"on": False, "js": [], "refs": [], "status": [], "js_src": {}, "cmd_by_effort": {}, "arrays": []}

    # Latencies use the middleware's timestamps (rclpy MessageInfo, system clock, one machine):
    # when the broadcaster published a joint state, when the controller node published the
    # command array, when it reached this subscriber; this process's own scheduling is left out.
    def on_js(m, info):
        if rec["on"]:
            rec["js"].append(m)
            rec["js_src"][ns(m.header)] = info["source_timestamp"]
        rec["n_js"] = rec.get("n_js", 0) + 1

    def on_ref(m):
        if rec["on"]:
            rec["refs"].append(m)

    def on_status(m):
        rec["last_status"] = m
        if rec["on"]:
            rec["status"].append(m)

    def on_plugin_status(m):   # the gato ros2_control plugin (controller:=plugin): its own counters
        rec["plugin_status"] = m

    def on_cmd(m):   # stamped copy of the command: the joint state it answers
        if rec["on"]:
            rec["cmd_by_effort"][tuple(m.effort)] = ns(m.header)

    def on_arr(m, info):   # what the forward controller receives (matched to its joint state after the run)
        if rec["on"]:
            rec["arrays"].append((info["source_timestamp"], info["received_timestamp"], tuple(m.data)))

    qos = 200
    node.create_subscription(JointState, "/joint_states", on_js, qos)
    node.create_subscription(EEReference, "/ee_reference", on_ref, qos)
    node.create_subscription(ControllerStatus, "/gato_controller/status", on_status, qos)
    node.create_subscription(EffortCommand, "/gato_controller/command", on_cmd, qos)
    for name in ("gato_plugin", "gato_plugin_embedded"):
        node.create_subscription(ControllerStatus, f"/{name}/status", on_plugin_status, qos)
    node.create_subscription(Float64MultiArray, "/effort_controller/commands", on_arr, qos)
    ex = SingleThreadedExecutor()
    ex.add_node(node)

    def spin_until(pred, timeout):
        end = time.monotonic() + timeout
        while not pred() and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.02)
        return pred()

    load_before = os.getloadavg()
    try:
        if not spin_until(lambda: rec.get("n_js", 0) >= 10, 240):
            raise RuntimeError(f"no /joint_states from the bringup within 240 s (log: {a.log or 'use --log'})")
        # warm-up in simulated time: joint states arrive at 100 Hz of sim time
        n0 = rec["n_js"]
        spin_until(lambda: rec["n_js"] >= n0 + int(a.warmup * 100), 10 * a.warmup + 60)
        rec["on"] = True
        t_wall = time.monotonic()
        spin_until(lambda: len(rec["js"]) >= int(a.seconds * 100), 10 * a.seconds + 120)
        rec["on"] = False
        t_wall = time.monotonic() - t_wall
    finally:
        load_after = os.getloadavg()
        rc = stop_group(launch, timeout=60)
        node.destroy_node()
        rclpy.shutdown()

    js, refs, st = rec["js"], rec["refs"], rec["status"]
    wire, pub = [], []
    for t_src, t_recv, e in rec["arrays"]:
        s = rec["cmd_by_effort"].get(e)
        if s is not None and s in rec["js_src"]:
            pub.append((t_src - rec["js_src"][s]) / 1e6)
            wire.append((t_recv - rec["js_src"][s]) / 1e6)
    err = tracking_errors(js, refs, a.robot)
    # the time lag that best explains the error: EE at t against the reference at t - lag
    lags = np.arange(0, 401, 20)
    lag_err = [float(tracking_errors(js, refs, a.robot, int(l * 1e6)).mean()) for l in lags]
    best = int(np.argmin(lag_err))
    vec = tracking_errors(js, refs, a.robot, vectors=True)
    # applied, in sim time: which command do the effort states of each joint state show?
    cmds = sorted(((s, np.array(e)) for e, s in rec["cmd_by_effort"].items()), key=lambda c: c[0])
    cmd_stamps = np.array([s for s, _ in cmds], dtype=np.int64)
    js_index = {ns(m.header): i for i, m in enumerate(js)}
    applied, lag = [], []
    for i, m in enumerate(js):
        s = ns(m.header)
        eff = np.asarray(m.effort, dtype=np.float64)
        k0 = int(np.searchsorted(cmd_stamps, s, side="left")) - 1    # commands answering earlier states
        for k in range(k0, max(k0 - 5, -1), -1):
            if np.allclose(cmds[k][1], eff, rtol=0, atol=1e-9):
                applied.append((s - cmd_stamps[k]) / 1e6)
                if cmd_stamps[k] in js_index:
                    lag.append(i - js_index[cmd_stamps[k]])    # broadcasts until the command shows
                break
    deadline = (st[-1].deadline_misses - st[0].deadline_misses) if len(st) > 1 else 0
    ticks = (st[-1].ticks - st[0].ticks) if len(st) > 1 else 0
    holds = (st[-1].holds - st[0].holds) if len(st) > 1 else 0
    sim_s = (ns(js[-1].header) - ns(js[0].header)) / 1e9 if len(js) > 1 else 0.0
    return {
        "launch_args": extra_args, "launch_rc": rc, "n_joint_states": len(js), "sim_seconds": sim_s,
        "tracking_error_mm": {"mean": float(err.mean() * 1e3), "p99": float(np.percentile(err, 99) * 1e3),
                              "max": float(err.max() * 1e3), "n": int(err.size)} if err.size else {},
        "ticks": int(ticks), "deadline_misses": int(deadline), "holds": int(holds),
        "in_node_latency_ms": pct([m.latency_us / 1e3 for m in st if m.latency_us > 0]),
        "pub_latency_ms": pct(pub),
        "wire_latency_ms": pct(wire),
        "real_time_factor": sim_s / t_wall if t_wall > 0 else 0.0,
        "mean_offset_mm": (vec.mean(axis=0) * 1e3).round(1).tolist() if len(vec) else [],
        "best_lag_ms": int(lags[best]), "error_at_best_lag_mm": lag_err[best] * 1e3,
        "applied_after_ms_sim": pct(applied),
        "applied_by_next_state": float(np.mean(np.asarray(lag) == 1)) if lag else 0.0,
        "joint_state_rate_hz": (len(js) - 1) / sim_s if sim_s > 0 else 0.0,
        "load": [round(load_before[0], 2), round(load_after[0], 2)],
        "final_state": (st[-1].state, st[-1].reason) if st else ("", ""),
        # the plugin's update(): state read -> command written in the same control cycle (cumulative
        # since activation), and plan age when used (follow: node solve + DDS; embedded: solver thread)
        "plugin": ({k: getattr(rec["plugin_status"], k) for k in (
            "ticks", "holds", "clamped", "plans_accepted", "update_p50_us", "update_p99_us", "update_max_us",
            "plan_latency_p50_us", "plan_latency_p99_us", "solve_us", "state", "reason")}
            if "plugin_status" in rec else {}),
    }


def fmt(r) -> str:
    te, inn, wire, app = r["tracking_error_mm"], r["in_node_latency_ms"], r["wire_latency_ms"], r["applied_after_ms_sim"]
    out = [f"  tracking error: mean {te.get('mean', float('nan')):.1f} mm, p99 {te.get('p99', float('nan')):.1f} mm, "
           f"max {te.get('max', float('nan')):.1f} mm over {te.get('n', 0)} joint states "
           f"({r['sim_seconds']:.1f} s simulated at {r['real_time_factor']:.2f}x real time, "
           f"{r['joint_state_rate_hz']:.1f} joint states per simulated s)",
           f"  the reference lagged by {r['best_lag_ms']} ms explains it best: mean {r['error_at_best_lag_mm']:.1f} mm; "
           f"mean EE - reference {r['mean_offset_mm']} mm",
           f"  deadline misses {r['deadline_misses']} of {r['ticks']} ticks, holds {r['holds']}; launch exit {r['launch_rc']}"]
    for name, d in (("in-node state -> command", inn), ("state published -> command array published", r["pub_latency_ms"]),
                    ("state published -> command array received", wire)):
        if d.get("n"):
            out.append(f"  {name}: p50 {d['p50']:.2f} ms, p99 {d['p99']:.2f} ms, max {d['max']:.2f} ms (n {d['n']})")
    if r.get("plugin"):
        pl = r["plugin"]
        out.append(f"  plugin update() (state read -> command written): p50 {pl['update_p50_us']:.1f} us, p99 "
                   f"{pl['update_p99_us']:.1f} us, max {pl['update_max_us']:.1f} us; plan age p50 "
                   f"{pl['plan_latency_p50_us'] / 1e3:.2f} ms, p99 {pl['plan_latency_p99_us'] / 1e3:.2f} ms; "
                   f"holds {pl['holds']}, plans accepted {pl['plans_accepted']}, state {pl['state']} {pl['reason']}")
    if app.get("n"):
        out.append(f"  applied (effort state = command), simulated time after its joint state: p50 {app['p50']:.0f} ms, "
                   f"p99 {app['p99']:.0f} ms; by the next broadcast in {100 * r['applied_by_next_state']:.1f} %")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measured simulated seconds")
    ap.add_argument("--warmup", type=float, default=3.0, help="simulated seconds skipped after the loop starts")
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--runs", type=int, default=1, help="repeat the node-mode run this many times")
    ap.add_argument("--plugin-modes", default="", help="comma-separated plugin modes to run too (follow,embedded)")
    ap.add_argument("--log", default="", help="write the launch output here")
    ap.add_argument("--out", type=Path, help="write the result section to this file (not in docs/)")
    a = ap.parse_args(argv)
    if "ROS_DOMAIN_ID" not in os.environ:
        os.environ["ROS_DOMAIN_ID"] = str(201 + os.getpid() % 30)   # a private graph (tests use 101..200)

    variants = [("node", [])] * a.runs
    for m in filter(None, a.plugin_modes.split(",")):
        variants.append((f"plugin {m}", ["controller:=plugin", f"mode:={m}"]))
    results = []
    for label, extra in variants:
        r = run_once(a, extra)
        r["mode"] = label
        results.append(r)
        print(f"{label}:\n{fmt(r)}", flush=True)
    if a.out:
        loads = ", ".join(f"{r['load'][0]} / {r['load'][1]}" for r in results)
        commit = short_commit()
        lines = [f"\n## Closed loop through ros2_control with MuJoCo physics, free-running ({time.strftime('%Y-%m-%d')}, "
                 f"{commit})\n\n",
                 f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average "
                 f"before / after each run: {loads} "
                 "(shared machine: other jobs ran).\n",
                 f"Command: `python bench/bench_ros2_control_mujoco.py --seconds {a.seconds:g} --runs {a.runs}"
                 + (f" --plugin-modes {a.plugin_modes}" if a.plugin_modes else "") + "` "
                 f"(`ros2 launch gato_bringup hardware.launch.xml robot:={a.robot} mujoco:=true reference:=true`: "
                 "mujoco_ros2_control at 1 kHz, MuJoCo in real time, joint_state_broadcaster 100 Hz, figure-8; "
                 f"{a.warmup:g} simulated s of warm-up skipped).\n\n",
                 "| mode | sim / wall time | joint states per sim s | mean EE error | p99 / max | deadline misses / ticks "
                 "| in-node state -> command p50 / p99 | state published -> command array published p50 / p99 "
                 "| -> received by a Python subscriber p50 / p99 | applied by the next broadcast |\n",
                 "|---|---|---|---|---|---|---|---|---|---|\n"]
        for r in results:
            te, inn, wire, pub = (r["tracking_error_mm"], r["in_node_latency_ms"], r["wire_latency_ms"],
                                  r["pub_latency_ms"])
            lines.append(f"| {r['mode']} | {r['real_time_factor']:.2f} | {r['joint_state_rate_hz']:.1f} | {te.get('mean', float('nan')):.1f} mm | "
                         f"{te.get('p99', float('nan')):.1f} / "
                         f"{te.get('max', float('nan')):.1f} mm | {r['deadline_misses']} / {r['ticks']} | "
                         + (f"{inn['p50']:.2f} / {inn['p99']:.2f} ms" if inn.get("n") else "-") + " | "
                         + (f"{pub['p50']:.2f} / {pub['p99']:.2f} ms" if pub.get("n") else "-") + " | "
                         + (f"{wire['p50']:.2f} / {wire['p99']:.2f} ms" if wire.get("n") else "-") + " | "
                         + (f"{100 * r['applied_by_next_state']:.1f} % |\n" if r["applied_after_ms_sim"].get("n")
                            else "- |\n"))
        plug = [r for r in results if r.get("plugin")]
        if plug:
            lines.append("\n| mode | plugin update() p50 / p99 / max (state read -> command written) "
                         "| plan age at use p50 / p99 | holds / updates | plans accepted |\n|---|---|---|---|---|\n")
            for r in plug:
                pl = r["plugin"]
                lines.append(f"| {r['mode']} | {pl['update_p50_us']:.1f} / {pl['update_p99_us']:.1f} / "
                             f"{pl['update_max_us']:.1f} us | {pl['plan_latency_p50_us'] / 1e3:.2f} / "
                             f"{pl['plan_latency_p99_us'] / 1e3:.2f} ms | {pl['holds']} / {pl['ticks']} | "
                             f"{pl['plans_accepted']} |\n")
        lines.append("\nState published -> command array published: the joint_state_broadcaster's publication of a "
                     "joint state to the controller node's publication of the command computed from it (DDS source "
                     "timestamps, system clock); the forward controller writes the latest array to the hardware in "
                     "its next 1 kHz update (within 1 ms of its arrival). The received column adds the delivery to this "
                     "benchmark's Python subscriber, whose own scheduling on the loaded machine dominates its tail. "
                     "Applied by the next broadcast: the effort state interfaces MuJoCo reports in a joint state "
                     "equal the command that answered the previous one; the rest show it one "
                     "broadcast later or more (the controller node answered after the next broadcast's cycle).\n")
        write_result(a.out, "".join(lines))
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
