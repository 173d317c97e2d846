"""Benchmark: the plan's own feedback gains vs the joint PD, executed by the gato ros2_control plugin
in MuJoCo (issue 33's closed-loop and missed-plan acceptance, through ros2_control).

Each run starts ``ros2 launch gato_bringup hardware.launch.xml mujoco:=true controller:=plugin
reference:=true`` (iiwa14: mujoco_ros2_control's controller manager at 1 kHz with MuJoCo physics,
the gato plugin in follow mode at 1 kHz, the gato controller node publishing plans, the figure-8
reference node, all on sim time) with three files this script writes per run:

- the MuJoCo scene (``mujoco_model:=``): gato_ros.mjcf's scene of the robot with every link's mass
  and rotational inertia x ``--mass-scale`` (1.2: the controller's model is 20 % light) and a
  constant ``--push`` N force at the EE frame origin in a horizontal world direction drawn from the
  seed (an actuator with a constant bias force on a site, not driven by ros2_control: unmodelled);
- the controller parameters (``params_file:=``): the shipped iiwa14.yaml with ``trigger: timer``,
  ``control_rate_hz`` = the MPC rate (100 / 50 / 20 Hz, sim time), ``plan_gains: true`` in every
  mode (the node's work is the same; only the plugin's use differs), ``fallback: off`` (the OSC
  fallback would replace the plans under test), and the figure-8 drawn from the seed (half
  amplitudes 0.08-0.13 m, period 3.5-4.5 s, plane rotated +/- 0.5 rad about the y-z plane);
- the controllers file (``controllers_file:=``): the shipped one with the plugin's ``feedback``
  = pd | riccati, ``plan_timeout`` 0.3 s (a 20 Hz plan with one dropped is 100 ms + solve old when
  replaced; the shipped 0.1 s would hold instead of executing it) and ``plan_topic`` =
  /gato_bench/plan.

Plans go from /gato_controller/plan to /gato_bench/plan through a relay process (this file with
``--relay``) that drops every ``--drop``-th plan (0: none); the relay is in the path of every run,
so the runs with and without drops differ only in the drops. The plugin executes the newest plan it
has, u = u_k + sat(K_k (x_k - x)) (riccati) or u_k + kp (q_k - q) + kd (qd_k - qd) (pd), between
plans.

Measured over ``--seconds`` simulated seconds after ``--warmup``: the mean EE error of every
/joint_states message (100 Hz, pinocchio FK of the measured joints vs the reference window in force
at its stamp, as bench_ros2_control_mujoco.py does), the controller node's ticks (the MPC rate in
sim time), the plugin's counters from /diagnostics (updates executed with plan gains, saturated
gain terms, holds). Prints a row per run, then the median and range over seeds per rate / mode /
drop, and the ratios riccati / pd and drop / no drop.

Diagnostics (docs/benchmarks_ros.md, "Plan feedback gains through ros2_control"): ``--modes node``
(controller:=node: the node's torques held until its next tick, no plugin), ``--pd-scale`` (the
plugin's kp / kd x a factor), ``--knot-dt period`` (knots one MPC period apart), ``--mass-scale`` /
``--push`` (the disturbances one at a time); ``--plugin-mode embedded`` runs the plugin's own solver
thread at the MPC rate with ``embedded_gains`` instead of the node (no relay drops there).
``--json FILE`` appends every run; ``--from-json FILE...`` prints the table of stored runs.

    source scripts/activate.sh && python bench/bench_plan_feedback_ros.py --rates 20,100 --seeds 7,8,9 \
        [--drops 0,10] [--seconds 8] [--json runs.jsonl] [--out result.md]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchmarks_doc import write_result  # noqa: E402
from bench_ros2_control_mujoco import ns, tracking_errors  # noqa: E402
from proc_util import stop_group  # noqa: E402
from run_info import cpu_model, short_commit  # noqa: E402

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")   # DDS stays on this machine
RELAY_TOPIC = "/gato_bench/plan"


def scenario(seed: int) -> dict:
    """The held-out scenario of ``seed``: figure-8 shape and the push's horizontal direction."""
    rng = np.random.default_rng(seed)
    return {"fig8_amplitude_x": float(rng.uniform(0.08, 0.13)), "fig8_amplitude_z": float(rng.uniform(0.08, 0.13)),
            "fig8_period_s": float(rng.uniform(3.5, 4.5)),
            "fig8_theta": float(np.pi / 2 + rng.uniform(-0.5, 0.5)),
            "push_angle": float(rng.uniform(0.0, 2 * np.pi))}


def write_scene(robot: str, mass_scale: float, push_n: float, push_angle: float, out: Path) -> Path:
    """gato_ros.mjcf's scene of ``robot`` with link masses and inertias x ``mass_scale`` and a
    constant ``push_n`` N force at the EE frame origin along world (cos a, sin a, 0); the path."""
    import mujoco
    import pinocchio as pin

    import gato
    from gato_ros.mjcf import mjcf_text
    from gato_ros.params import _q_ready

    spec = mujoco.MjSpec.from_string(mjcf_text(robot))
    m0 = spec.compile()
    d0 = mujoco.MjData(m0)
    q0 = np.asarray(_q_ready(robot), dtype=np.float64)
    d0.qpos[:] = q0
    mujoco.mj_forward(m0, d0)
    # the EE frame origin in the last joint's body: MuJoCo merged the URDF's fixed EE link into it
    pm = pin.buildModelFromUrdf(str(gato.robot_urdf(robot)))
    pd = pm.createData()
    fid = pm.getFrameId(gato.robot_info(robot)["ee_frame"])
    pin.forwardKinematics(pm, pd, q0)
    ee = pin.updateFramePlacement(pm, pd, fid).translation
    body = m0.jnt_bodyid[m0.nu - 1] if m0.nu else m0.nbody - 1
    bname = m0.body(body).name
    local = d0.xmat[body].reshape(3, 3).T @ (ee - d0.xpos[body])
    for b in spec.bodies:
        if b.name != "world":
            b.mass *= mass_scale
            b.inertia = [v * mass_scale for v in b.inertia]
    if push_n:
        spec.body(bname).add_site(name="gato_push_site", pos=local.tolist())
        spec.worldbody.add_site(name="gato_push_ref")
        # force = gain * ctrl + bias = push_n (ctrl unused), along gear in the world-fixed refsite's axes
        a = spec.add_actuator(name="gato_push", target="gato_push_site", trntype=mujoco.mjtTrn.mjTRN_SITE,
                              refsite="gato_push_ref")
        a.gear = [float(np.cos(push_angle)), float(np.sin(push_angle)), 0.0, 0.0, 0.0, 0.0]
        a.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        a.gainprm[0] = 0.0
        a.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        a.biasprm[0] = float(push_n)
    spec.compile()
    out.write_text(spec.to_xml())
    return out


def write_params(robot: str, rate_hz: float, sc: dict, out: Path, knot_dt: float = 0.0) -> Path:
    import yaml
    from ament_index_python.packages import get_package_share_directory

    share = Path(get_package_share_directory("gato_bringup")) / "config"
    p = yaml.safe_load((share / f"{robot}.yaml").read_text())
    c = p["gato_controller"]["ros__parameters"]
    c.update(trigger="timer", control_rate_hz=float(rate_hz), plan_gains=True, fallback="off")
    if knot_dt:   # the reference windows must have the controller's knot spacing
        c["dt"] = p["gato_reference"]["ros__parameters"]["knot_dt"] = float(knot_dt)
    p["gato_reference"]["ros__parameters"].update({k: v for k, v in sc.items() if k.startswith("fig8")})
    out.write_text(yaml.safe_dump(p))
    return out


def write_controllers(robot: str, feedback: str, plan_timeout: float, out: Path, pd_scale: float = 1.0,
                      rate_hz: float = 100.0) -> Path:
    import yaml
    from ament_index_python.packages import get_package_share_directory

    share = Path(get_package_share_directory("gato_bringup")) / "config"
    p = yaml.safe_load((share / f"{robot}_controllers.yaml").read_text())
    p["gato_plugin"]["ros__parameters"].update(feedback=feedback, plan_timeout=float(plan_timeout),
                                               plan_topic=RELAY_TOPIC)
    # embedded mode (--plugin-mode embedded): the plugin's own solver thread at the MPC rate, with its gains
    p["gato_plugin_embedded"]["ros__parameters"].update(feedback=feedback, plan_timeout=float(plan_timeout),
                                                        solve_rate_hz=float(rate_hz), embedded_gains=True)
    for name in ("gato_plugin", "gato_plugin_embedded"):   # --pd-scale: kp / kd x this factor (1: shipped)
        for k in ("kp", "kd"):
            p[name]["ros__parameters"][k] = [float(v) * pd_scale for v in p[name]["ros__parameters"][k]]
    out.write_text(yaml.safe_dump(p))
    return out


def relay(drop: int) -> int:
    """Forward /gato_controller/plan to RELAY_TOPIC, dropping every ``drop``-th plan (0: none);
    on SIGINT print {"forwarded", "dropped"} as JSON."""
    import rclpy
    from gato_msgs.msg import Plan

    rclpy.init()
    node = rclpy.create_node("gato_bench_plan_relay")
    pub = node.create_publisher(Plan, RELAY_TOPIC, 10)
    n = {"forwarded": 0, "dropped": 0}

    def on_plan(m):
        if drop and (n["forwarded"] + n["dropped"] + 1) % drop == 0:
            n["dropped"] += 1
            return
        pub.publish(m)
        n["forwarded"] += 1

    node.create_subscription(Plan, "/gato_controller/plan", on_plan, 10)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    print(json.dumps(n), flush=True)
    return 0


def run_once(a, rate_hz, feedback, drop, seed, tmp: Path) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from gato_msgs.msg import ControllerStatus, EEReference
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    sc = scenario(seed)
    tag = f"{rate_hz}-{feedback}-{drop}-{seed}-{uuid.uuid4().hex[:6]}"
    scene = write_scene(a.robot, a.mass_scale, a.push, sc["push_angle"], tmp / f"scene-{tag}.xml")
    params = write_params(a.robot, rate_hz, sc, tmp / f"params-{tag}.yaml",
                          1.0 / rate_hz if a.knot_dt == "period" else float(a.knot_dt or 0))
    ctrls = write_controllers(a.robot, "pd" if feedback == "node" else feedback, a.plan_timeout,
                              tmp / f"controllers-{tag}.yaml", a.pd_scale, rate_hz)
    log = open(a.log, "a") if a.log else subprocess.DEVNULL
    rel = subprocess.Popen([sys.executable, __file__, "--relay", str(drop)], stdout=subprocess.PIPE,
                           stderr=log, text=True, start_new_session=True)
    # feedback "node": no plugin, the controller node's torques through the effort forward controller
    # (each held until the next tick), for comparison
    ctrl = ["controller:=node"] if feedback == "node" else ["controller:=plugin", f"mode:={a.plugin_mode}"]
    launch = subprocess.Popen(["ros2", "launch", "gato_bringup", "hardware.launch.xml", f"robot:={a.robot}",
                               "mujoco:=true", *ctrl, "reference:=true",
                               f"mujoco_model:={scene}", f"params_file:={params}", f"controllers_file:={ctrls}"],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rclpy.init()
    node = rclpy.create_node("gato_plan_feedback_bench")
    rec = {"on": False, "js": [], "refs": [], "status": [], "n_js": 0, "diag": {}}

    def on_js(m):
        rec["n_js"] += 1
        if rec["on"]:
            rec["js"].append(m)

    def on_ref(m):
        if rec["on"]:
            rec["refs"].append(m)

    def on_status(m):
        if rec["on"]:
            rec["status"].append(m)

    def on_diag(m):
        for s in m.status:
            if "gato_plugin" in s.name and "plan executor" in s.name:
                rec["diag"] = {kv.key: kv.value for kv in s.values}

    node.create_subscription(JointState, "/joint_states", on_js, 200)
    node.create_subscription(EEReference, "/ee_reference", on_ref, 200)
    node.create_subscription(ControllerStatus, "/gato_controller/status", on_status, 200)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
    ex = SingleThreadedExecutor()
    ex.add_node(node)

    def spin_until(pred, timeout):
        end = time.monotonic() + timeout
        while not pred() and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.02)
        return pred()

    load = os.getloadavg()[0]
    t_wall = 0.0
    diag0 = {}
    try:
        if not spin_until(lambda: rec["n_js"] >= 10, 240):
            raise RuntimeError(f"no /joint_states within 240 s (log: {a.log or 'use --log'})")
        n0 = rec["n_js"]
        spin_until(lambda: rec["n_js"] >= n0 + int(a.warmup * 100), 10 * a.warmup + 60)
        diag0 = dict(rec["diag"])
        rec["on"] = True
        t_wall = time.monotonic()
        spin_until(lambda: len(rec["js"]) >= int(a.seconds * 100), 10 * a.seconds + 120)
        rec["on"] = False
        t_wall = time.monotonic() - t_wall
        spin_until(lambda: False, 1.5)   # one more /diagnostics report (1 s period, wall clock)
    finally:
        load = max(load, os.getloadavg()[0])
        rc = stop_group(launch, timeout=60)
        rel.send_signal(signal.SIGINT)
        try:
            relay_out, _ = rel.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            rel.kill()
            relay_out, _ = rel.communicate()
        node.destroy_node()
        rclpy.shutdown()
    err = tracking_errors(rec["js"], rec["refs"], a.robot)
    st, d = rec["status"], rec["diag"]
    sim_s = (ns(rec["js"][-1].header) - ns(rec["js"][0].header)) / 1e9 if len(rec["js"]) > 1 else 0.0

    def dd(k):   # a plugin counter over the measured window (diagnostics are cumulative)
        try:
            return int(float(d.get(k, "nan")) - float(diag0.get(k, 0)))
        except ValueError:
            return -1

    try:
        relayed = json.loads(relay_out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        relayed = {}
    return {"rate_hz": rate_hz, "plugin_mode": a.plugin_mode, "pd_scale": a.pd_scale,
            "knot_dt": a.knot_dt or "0.03125", "feedback": feedback,
            "drop": drop, "seed": seed, "launch_rc": rc,
            "mean_mm": float(err.mean() * 1e3) if err.size else float("nan"),
            "p99_mm": float(np.percentile(err, 99) * 1e3) if err.size else float("nan"), "n": int(err.size),
            "sim_s": sim_s, "rtf": sim_s / t_wall if t_wall > 0 else 0.0,
            "mpc_hz": (st[-1].ticks - st[0].ticks) / sim_s if len(st) > 1 and sim_s > 0 else 0.0,
            "err_per_s_mm": [round(float(err[i:i + 100].mean() * 1e3), 1) for i in range(0, err.size, 100)],
            "updates": dd("updates"), "follow_with_gains": dd("follow_with_gains"),
            "gains_saturated": dd("gains_saturated"), "holds": dd("holds"), "clamped": dd("clamped"),
            "plugin_feedback": d.get("feedback", ""), "relay": relayed, "load": round(load, 2)}


def summary(results):
    """{(rate, feedback, drop): (median, min, max) of mean_mm} over seeds."""
    groups = {}
    for r in results:
        groups.setdefault((r["rate_hz"], r["feedback"], r["drop"]), []).append(r["mean_mm"])
    return {k: (float(np.median(v)), float(np.min(v)), float(np.max(v)), len(v)) for k, v in sorted(groups.items())}


def paired_ratios(results, num, den):
    """Per-seed ratios mean_mm[num] / mean_mm[den], keyed by the rest of the run's key."""
    by = {(r["rate_hz"], r["feedback"], r["drop"], r["seed"]): r["mean_mm"] for r in results}
    out = {}
    for (rate, fb, drop, seed), v in by.items():
        k = num(rate, fb, drop, seed)
        if k is None:
            continue
        other = by.get(den(rate, fb, drop, seed))
        if other is not None and other > 0:
            out.setdefault(k, []).append(v / other)
    return out


def report(results, a) -> str:
    rows = ["| MPC rate | drop | feedback | mean EE error, median (min-max) over seeds | riccati / pd per seed | "
            "growth with drops per seed | plugin updates in hold per seed |", "|---|---|---|---|---|---|---|"]
    holds = {}
    for r in results:
        holds.setdefault((r["rate_hz"], r["feedback"], r["drop"]), []).append(str(r["holds"]))
    rp = paired_ratios(results, lambda r, f, d, s: (r, d) if f == "riccati" else None,
                       lambda r, f, d, s: (r, "pd", d, s))
    growth = paired_ratios(results, lambda r, f, d, s: (r, f, d) if d else None, lambda r, f, d, s: (r, f, 0, s))
    for (rate, fb, drop), (med, lo, hi, n) in summary(results).items():
        ratio = " / ".join(f"{x:.2f}" for x in rp.get((rate, drop), [])) if fb == "riccati" else ""
        gr = " / ".join(f"{x:.3f}" for x in growth.get((rate, fb, drop), []))
        rows.append(f"| {rate:g} Hz | {f'1 in {drop}' if drop else 'none'} | {fb} | {med:.1f} mm ({lo:.1f}-{hi:.1f}, "
                    f"{n} seeds) | {ratio} | {gr} | {' / '.join(holds[(rate, fb, drop)])} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--relay", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rates", default="20,100", help="MPC rates [Hz], comma-separated")
    ap.add_argument("--modes", default="pd,riccati", help="plugin feedback modes (pd, riccati, riccati+pd), or node "
                    "(controller:=node: the node's torques, no plugin)")
    ap.add_argument("--drops", default="0", help="drop every N-th plan (0 = none), comma-separated")
    ap.add_argument("--seeds", default="7,8,9", help="held-out scenario seeds")
    ap.add_argument("--seconds", type=float, default=8.0, help="measured simulated seconds")
    ap.add_argument("--warmup", type=float, default=4.0, help="simulated seconds skipped after the loop starts")
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--mass-scale", type=float, default=1.2, help="link mass / inertia factor of the simulated arm")
    ap.add_argument("--push", type=float, default=10.0, help="constant horizontal EE force [N]")
    ap.add_argument("--plugin-mode", choices=("follow", "embedded"), default="follow",
                    help="embedded: the plugin solves itself at the MPC rate with embedded_gains (no node; "
                    "--drops do not apply)")
    ap.add_argument("--pd-scale", type=float, default=1.0, help="the plugin's kp and kd x this factor")
    ap.add_argument("--plan-timeout", type=float, default=0.3, help="the plugin's plan_timeout [s]")
    ap.add_argument("--knot-dt", default="", help="the controller's knot spacing [s], or 'period' (= 1 / MPC rate, "
                    "the warm start's one-knot shift exact); empty: the shipped 0.03125 s")
    ap.add_argument("--log", default="", help="append the launch output here")
    ap.add_argument("--json", type=Path, help="append each run's result (one JSON line) to this file")
    ap.add_argument("--from-json", type=Path, nargs="+",
                    help="no runs: the table of the runs these --json files hold")
    ap.add_argument("--out", type=Path, help="write the result section to this file (not in docs/)")
    a = ap.parse_args(argv)
    if a.relay is not None:
        return relay(a.relay)
    if a.from_json:
        results = [json.loads(line) for f in a.from_json for line in f.read_text().splitlines() if line.strip()]
        print(report(results, a))
        return 0
    if "ROS_DOMAIN_ID" not in os.environ:
        os.environ["ROS_DOMAIN_ID"] = str(201 + os.getpid() % 30)   # a private graph (tests use 101..200)
    results = []
    with tempfile.TemporaryDirectory(prefix="gato_plan_feedback_") as tmp:
        for seed in (int(s) for s in a.seeds.split(",")):
            for rate in (float(r) for r in a.rates.split(",")):
                for drop in (int(d) for d in a.drops.split(",")):
                    for fb in a.modes.split(","):
                        try:
                            r = run_once(a, rate, fb, drop, seed, Path(tmp))
                        except RuntimeError as e:   # a start-up that failed on the loaded machine: once more
                            print(f"retrying {rate} Hz {fb} drop {drop} seed {seed}: {e}", flush=True)
                            r = run_once(a, rate, fb, drop, seed, Path(tmp))
                        results.append(r)
                        print(json.dumps(r), flush=True)
                        if a.json:
                            with open(a.json, "a") as f:
                                f.write(json.dumps(r) + "\n")
    table = report(results, a)
    print(table)
    if a.out:
        loads = [r["load"] for r in results]
        write_result(a.out, (
            f"Machine: {cpu_model()}, {os.cpu_count()} cores (commit {short_commit()}); load average during the "
            f"runs {min(loads):.1f}-{max(loads):.1f}.\n\n"
            f"Command: `python bench/bench_plan_feedback_ros.py --rates {a.rates} "
            f"--modes {a.modes} --drops {a.drops} --seeds {a.seeds} --seconds {a.seconds:g}`\n\n{table}\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
