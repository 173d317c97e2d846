"""Benchmark: the gato ros2_control plugin's update() time inside a controller_manager at 1 kHz.

Brings up (ros2 launch, the ROS 2 overlay or a system ROS 2) robot_state_publisher with the
iiwa14 description of gato_bringup (mock_components/GenericSystem), ros2_control_node at
``--rate`` Hz with the generated controllers file and joint_state_broadcaster; loads,
configures and activates gato_plugin (follow mode) and feeds it a fresh 32-knot plan every
``--plan-period`` s (what the controller node does at its tick rate), for ``--seconds`` after
a 3 s warm-up. The plugin measures its own update() (reading the interfaces, the executor,
writing the commands) into a 0.5 us histogram and reports median / p99 / max since
activation on ~/status (gato_msgs/ControllerStatus); this script prints the last status of
each run and writes that section to the file --out names (never into docs/).

    source scripts/activate.sh && python bench/bench_plugin.py [--seconds 60] [--runs 3] [--out result.md]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from run_info import cpu_model, stamp
from benchmarks_doc import write_result
from proc_util import stop_group

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")   # DDS stays on this machine
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "gato_ros"))

LAUNCH = """
import os
from launch import LaunchDescription
from launch_ros.actions import Node
HERE = os.path.dirname(os.path.abspath(__file__))


def generate_launch_description():
    desc = open(os.path.join(HERE, 'robot.urdf')).read()
    return LaunchDescription([
        Node(package='robot_state_publisher', executable='robot_state_publisher', parameters=[{'robot_description': desc}]),
        Node(package='controller_manager', executable='ros2_control_node', output='screen',
             parameters=[os.path.join(HERE, 'controllers.yaml')]),
        Node(package='controller_manager', executable='spawner',
             arguments=['joint_state_broadcaster', '--controller-manager', '/controller_manager']),
    ])
"""


def one_run(args, env, workdir: Path) -> dict:
    import rclpy
    from controller_manager_msgs import srv
    from gato_msgs.msg import ControllerStatus, Plan

    log = open(workdir / "launch.log", "w")
    proc = subprocess.Popen(["ros2", "launch", str(workdir / "plugin.launch.py")], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    rclpy.init()
    node = rclpy.create_node(f"gato_plugin_bench_{os.getpid()}")
    status = []
    node.create_subscription(ControllerStatus, "/gato_plugin/status", status.append, 10)
    pub = node.create_publisher(Plan, "/gato_controller/plan", 10)

    def call(kind, service, **fields):
        c = node.create_client(kind, f"/controller_manager/{service}")
        if not c.wait_for_service(timeout_sec=90):
            raise RuntimeError(f"/controller_manager/{service} not available (log {workdir / 'launch.log'})")
        req = kind.Request()
        for k, v in fields.items():
            setattr(req, k, v)
        fut = c.call_async(req)
        while not fut.done():
            rclpy.spin_once(node, timeout_sec=0.05)
        return fut.result()

    try:
        time.sleep(2.0)
        assert call(srv.LoadController, "load_controller", name="gato_plugin").ok
        assert call(srv.ConfigureController, "configure_controller", name="gato_plugin").ok
        assert call(srv.SwitchController, "switch_controller", activate_controllers=["gato_plugin"], strictness=2).ok
        embedded = args.mode == "embedded"
        names, q0 = args.joints, args.q0
        nv, n = len(names), 32
        seq = 0
        # dense gains of a plausible size (a PD-like diagonal plus small couplings), solver sign
        K = -0.01 * np.random.default_rng(0).standard_normal((n - 1, nv, 2 * nv))
        K[:, :, :nv] -= 50.0 * np.eye(nv)
        K[:, :, nv:] -= 5.0 * np.eye(nv)
        gains = K.reshape(-1).tolist()

        def publish():
            nonlocal seq
            seq += 1
            m = Plan()
            now = node.get_clock().now().nanoseconds
            m.header.stamp.sec, m.header.stamp.nanosec = divmod(now, 10**9)
            m.knot_dt, m.nx, m.nu, m.n_knots, m.joint_names = 0.03125, 2 * nv, nv, n, list(names)
            xu = []
            for k in range(n):
                xu += list(q0 + 0.01 * np.sin(0.2 * k)) + [0.0] * nv
                if k < n - 1:
                    xu += [1.0 + 0.1 * j for j in range(nv)]
            m.xu, m.seq, m.reset_epoch, m.integrator = xu, seq, 1, "euler"
            if args.gains:   # issue 33: per-knot feedback gains (n - 1, nu, nx), executed under feedback riccati
                m.gains = list(gains)
            pub.publish(m)

        end = time.monotonic() + 3.0 + args.seconds
        next_plan = time.monotonic()
        while time.monotonic() < end:
            if not embedded and time.monotonic() >= next_plan:
                publish()
                next_plan += args.plan_period
            rclpy.spin_once(node, timeout_sec=0.005)
        # The histogram counts since activation; the 3 s warm-up is included (as the robot would see it).
        # Plans keep coming until the status (2 Hz) that closes the run arrived.
        n_status, t_end = len(status), time.monotonic() + 2.0
        while time.monotonic() < t_end and len(status) < n_status + 2:
            if not embedded and time.monotonic() >= next_plan:
                publish()
                next_plan += args.plan_period
            rclpy.spin_once(node, timeout_sec=0.005)
        if not status:
            raise RuntimeError("no status from the plugin")
        s = status[-1]
        return {"p50": s.update_p50_us, "p99": s.update_p99_us, "max": s.update_max_us, "updates": s.ticks,
                "lat50": s.plan_latency_p50_us, "lat99": s.plan_latency_p99_us, "latmax": s.plan_latency_max_us,
                "solve_us": s.solve_us, "failures": s.solver_failures,
                "follow_state": s.state, "plans": s.plans_accepted, "holds": s.holds,
                "overruns": sum(1 for line in open(workdir / "launch.log") if "Overrun detected" in line)}
    finally:
        node.destroy_node()
        rclpy.shutdown()
        stop_group(proc, timeout=30)
        log.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rate", type=int, default=1000, help="controller_manager update rate [Hz]")
    ap.add_argument("--plan-period", type=float, default=0.01, help="seconds between plans [s]")
    ap.add_argument("--mode", choices=("follow", "embedded"), default="follow",
                    help="follow: this script publishes the plans; embedded: the plugin solves (no reference: it "
                         "holds the EE position of activation)")
    ap.add_argument("--gains", action="store_true", help="follow mode: the plans carry feedback gains "
                    "(gato_msgs/Plan.gains; the plugin's feedback riccati applies them: issue 33)")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown section to this file (not in docs/)")
    args = ap.parse_args(argv)
    from gato_ros import params

    robot = "iiwa14"
    work = Path(tempfile.mkdtemp(prefix="gato_plugin_bench_"))
    xacro = subprocess.run(["xacro", str(ROOT / "src/gato_bringup/urdf" / f"{robot}.urdf.xacro")], capture_output=True,
                           text=True, check=True)
    (work / "robot.urdf").write_text(xacro.stdout)
    cfg = yaml.safe_load(params.controllers_yaml(robot))
    cfg["controller_manager"]["ros__parameters"]["update_rate"] = args.rate
    cfg["gato_plugin"]["ros__parameters"]["status_rate_hz"] = 2.0
    cfg["gato_plugin"]["ros__parameters"]["mode"] = args.mode
    (work / "controllers.yaml").write_text(yaml.safe_dump(cfg))
    (work / "plugin.launch.py").write_text(LAUNCH)
    args.joints = cfg["gato_plugin"]["ros__parameters"]["joints"]
    args.q0 = np.array(params.defaults(params.SIM, robot)["q0"])
    env = dict(os.environ, ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", str(200 + os.getpid() % 30)))
    os.environ.update(ROS_DOMAIN_ID=env["ROS_DOMAIN_ID"])
    load0 = os.getloadavg()[0]
    results = []
    for i in range(args.runs):
        r = one_run(args, env, work)
        results.append(r)
        print(f"run {i + 1}: update() p50 {r['p50']:.2f} us, p99 {r['p99']:.2f} us, max {r['max']:.2f} us over "
              f"{r['updates']} updates ({r['plans']} plans accepted, {r['holds']} holds, state {r['follow_state']}); "
              f"controller_manager overrun warnings: {r['overruns']}; plan latency p50 {r['lat50'] / 1e3:.2f} ms, "
              f"p99 {r['lat99'] / 1e3:.2f} ms, max {r['latmax'] / 1e3:.2f} ms; last solve {r['solve_us']:.0f} us, "
              f"{r['failures']} failed solves", flush=True)
    load1 = os.getloadavg()[0]
    rows = "\n".join(f"| {i + 1} | {r['updates']} | {r['p50']:.1f} us | {r['p99']:.1f} us | {r['max']:.1f} us | "
                     f"{r['lat50'] / 1e3:.2f} / {r['lat99'] / 1e3:.2f} / {r['latmax'] / 1e3:.2f} ms | "
                     f"{r['plans']} | {r['holds']} | {r['overruns']} |" for i, r in enumerate(results))
    feed = ("the plugin's own solver thread (BSQP, N=32, dt=0.03125 s, 100 Hz, no reference: EE hold)"
            if args.mode == "embedded" else f"a 32-knot plan from this script every {args.plan_period * 1000:g} ms"
            + (" carrying feedback gains (31 x 7 x 14, feedback riccati)" if args.gains else ""))
    section = (
        f"\n## ros2_control plugin ({args.mode} mode) at {args.rate} Hz: update() time, plan latency (issue 13; "
        f"{stamp()})\n\n"
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, load average {load0:.1f} before / {load1:.1f} after "
        "(shared machine: other jobs ran).\n"
        f"Command: `python bench/bench_plugin.py --mode {args.mode} --seconds {args.seconds:g} --runs {args.runs}"
        f"{' --gains' if args.gains else ''}` "
        f"(controller_manager at {args.rate} Hz, mock_components/GenericSystem iiwa14, gato_plugin in {args.mode} "
        f"mode, plans from {feed}; the plugin's own histograms, counted since activation: update() = interfaces "
        "read, PlanExecutor::update, commands written; plan latency = stamp of the state a plan was solved from "
        "-> the first update() that executes it).\n\n"
        "| run | updates | update() median | p99 | max | plan latency median / p99 / max | plans accepted | "
        "holds | CM overrun warnings |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + rows + "\n")
    print(section)
    if args.out:
        write_result(args.out, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
