"""The simulation bringup as one command (what ``scripts/sim.sh`` runs).

Brings up gato_bringup/launch/sim.launch.yaml (simulation world, MPC controller,
EE reference, bag recorder) through :mod:`gato_ros.launch_runner` for a fixed
simulated duration (lockstep by default: reproducible on any machine load), then
reads the bag and prints a summary (EE tracking error mean / max, MPC step time
percentiles, receipt-to-command latency, deadline misses), and writes into the
output folder:

    bag/            the run as a rosbag2 (MCAP): joint states, references, commands,
                    StepResult, SolverStats, Plan, ControllerStatus
    tracking.png    EE vs reference and the tracking error
    summary.json    the summary numbers

    python -m gato_ros.bringup_sim --robot iiwa14 --duration 10
    python -m gato_ros.bringup_sim --realtime --reference goals --out /tmp/run1
    python -m gato_ros.bringup_sim --link-mass-scale L4:1.2 --payload-mass 1.5   # model errors
    python -m gato_ros.bringup_sim --planner sampling     # or osc: the other planners (gato.planner)
    python -m gato_ros.bringup_sim --view --realtime --duration 60   # watch it in a browser (URL printed)
    python -m gato_ros.bringup_sim --robot go2 --duration 10    # a floating base: gato_ros.bringup_floating

``--view`` starts the live view (gato_ros view_node, its own process): a page at
http://127.0.0.1:8080 (``--view-port``) with the robot, the plan, the reference and a plot,
and a Foxglove WebSocket server on 8765 (``--foxglove-port``; ``--no-foxglove``: none).

Model errors (``--link-mass-scale LINK:FACTOR``, repeatable: a URDF link's mass and
rotational inertia scaled; ``--payload-mass KG``: a point mass at the EE) exist in the
simulated world only; the controller keeps the nominal URDF model.

Process faults: the world's command watchdog holds the arm (``--timeout-action hold``,
default) or brakes it (``brake``) when the controller stops answering free-running;
``--respawn`` restarts a controller or reference node that died. The summary lists the
world's command timeouts (``/gato_sim/status``).

    python -m gato_ros.bringup_sim --realtime --respawn     # then kill -9 the controller

Ctrl-C stops the run early; the summary covers what was recorded.

The bag holds what was on the wire, including messages the controller refused (a foreign
node publishing on its topics): the summary skips them, counts them and names them
(``skipped`` in summary.json, lines under the printed summary; gato_ros.analysis).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _floating_robot(argv) -> bool:
    """True when ``--robot`` names a floating-base robot of the registry (go2)."""
    argv = list(argv)
    robot = next((a.split("=", 1)[1] for a in argv if a.startswith("--robot=")), None)
    if robot is None and "--robot" in argv and argv.index("--robot") + 1 < len(argv):
        robot = argv[argv.index("--robot") + 1]
    if robot is None:
        return False
    from gato.robots.registry import robot_info

    return bool((robot_info(robot) or {}).get("floating_base", False))


def _plot(summary: dict, path: Path):
    """The tracking plot (gato_ros.analysis.plot_tracking), or None when the run has no tick."""
    from .analysis import plot_tracking

    try:
        return plot_tracking(summary, path)
    except ValueError as e:
        print(f"[bringup_sim] no tracking plot: {e}", file=sys.stderr)
        return None


def _watchdog_summary(bag: Path) -> str:
    """One line on the world's command watchdog from the bag's /gato_sim/status."""
    from gato.replay.bagio import read_bag

    msgs = read_bag(bag, ["/gato_sim/status"]).messages.get("/gato_sim/status", [])
    if not msgs:
        return "  world command watchdog: no /gato_sim/status recorded"
    events, seen = [], set()
    for _, m in msgs:
        if m.state == "timeout" and m.command_timeouts not in seen:
            seen.add(m.command_timeouts)
            events.append(f"t={m.last_timeout_sim_s:.2f} s")
    last = msgs[-1][1]
    return (f"  world command watchdog: {last.command_timeouts} timeout(s)"
            + (f" ({', '.join(events[:5])}{', ...' if len(events) > 5 else ''}; {last.action or 'none'} now)"
               if last.command_timeouts else "") + f", {last.commands_applied} commands applied")


def main(argv=None) -> int:
    if _floating_robot(sys.argv[1:] if argv is None else argv):   # go2: gato_ros.bringup_floating (issue 34)
        from .bringup_floating import main as floating_main
        return floating_main(argv)
    ap = argparse.ArgumentParser(prog="python -m gato_ros.bringup_sim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="iiwa14",
                    help="registered robot (iiwa14, indy7, fr3, gen3, ur5e; go2: the floating-base bringup, "
                         "python -m gato_ros.bringup_floating --help)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--world", default="mujoco", choices=("mujoco", "pinocchio"))
    ap.add_argument("--realtime", action="store_true", help="free-running at wall-clock pace instead of lockstep")
    ap.add_argument("--reference", default="fig8", choices=("fig8", "goals", "hold"))
    ap.add_argument("--orientation", default="none", choices=("none", "tool_down", "sweep"),
                    help="EE orientation of the reference: none (position only, default), tool_down, or sweep "
                         "(the figure-8 with the orientation sweeping about a horizontal axis); the summary and "
                         "tracking.png then show the orientation error beside the position error")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default build/sim/<robot>-<time>)")
    ap.add_argument("--timeout", type=float, default=0.0, help="wall-clock limit [s] (0 = none)")
    ap.add_argument("--link-mass-scale", action="append", default=[], metavar="LINK:FACTOR",
                    help="model error in the world only: multiply URDF link LINK's mass and rotational inertia "
                         "by FACTOR (COM unchanged; iiwa14 links L1..L7); repeatable")
    ap.add_argument("--payload-mass", type=float, default=0.0, metavar="KG",
                    help="model error in the world only: a point-mass payload at the EE frame [kg] (default 0)")
    ap.add_argument("--respawn", action="store_true", help="restart the controller and reference nodes if they die")
    ap.add_argument("--planner", default="bsqp", choices=("bsqp", "sampling", "osc"),
                    help="controller planner: bsqp (batched SQP MPC, default), sampling (sampling MPC over MuJoCo "
                         "rollouts) or osc (operational-space controller)")
    ap.add_argument("--timeout-action", default="hold", choices=("hold", "brake"),
                    help="free-running world without commands (controller dead or late): hold (damped PD + gravity "
                         "compensation, default) or brake")
    ap.add_argument("--view", action="store_true",
                    help="live view in a browser (URL printed) and a Foxglove WebSocket server (gato_ros view_node)")
    ap.add_argument("--view-host", default="127.0.0.1", help="--view: address to serve on (default 127.0.0.1)")
    ap.add_argument("--view-port", type=int, default=8080, help="--view: HTTP port of the page (default 8080)")
    ap.add_argument("--foxglove-port", type=int, default=8765, help="--view: Foxglove WebSocket port (default 8765)")
    ap.add_argument("--no-foxglove", action="store_true", help="--view without the Foxglove server")
    ap.add_argument("--view-scheduling", default="auto", choices=("auto", "idle", "nice", "normal"),
                    help="--view: CPU priority of the view's process: idle (Linux SCHED_IDLE: it runs on what the "
                         "graph leaves over), nice (nice 19), normal (unchanged); auto (default): idle with "
                         "--realtime (a deadline to protect), normal in lockstep (none: a starved view would only "
                         "stall the page on a busy machine)")
    ap.add_argument("--wait-recorder", default="", metavar="NODE",
                    help="lockstep: a recorder node started beside the bringup, e.g. rosbag2_recorder (`ros2 bag "
                         "record` of the controller graph): the world starts only once it has subscribed to the "
                         "recorded topics, so that its bag holds the first command (sim node start_recorder)")
    a = ap.parse_args(argv)
    if a.duration <= 0:
        ap.error("--duration must be > 0 (the bringup ends after that much simulated time)")
    from .sim_logic import parse_link_mass_scale

    if any("," in e for e in a.link_mass_scale):
        ap.error("--link-mass-scale takes one LINK:FACTOR; repeat the option for more links")
    mass_scale = ",".join(e.strip() for e in a.link_mass_scale)
    try:
        parse_link_mass_scale(mass_scale)
    except ValueError as e:
        ap.error(f"--link-mass-scale: {e}")
    if not (0.0 <= a.payload_mass <= 100.0):
        ap.error(f"--payload-mass: {a.payload_mass:g} kg is out of range [0, 100]")
    errors = [f"{link} mass x{f:g}" for link, f in parse_link_mass_scale(mass_scale).items()]
    if a.payload_mass > 0:
        errors.append(f"payload {a.payload_mass:g} kg")
    out = a.out or Path("build") / "sim" / f"{a.robot}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    bag = out / "bag"
    if bag.exists():
        ap.error(f"{bag} exists already: choose another --out")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    cmd = [sys.executable, "-m", "gato_ros.launch_runner", "gato_bringup", "sim.launch.yaml", f"robot:={a.robot}",
           f"duration:={a.duration!r}", f"world:={a.world}", f"lockstep:={'false' if a.realtime else 'true'}",
           f"reference:={a.reference}", f"orientation:={a.orientation}", "record:=true", f"bag:={bag.resolve()}",
           f"link_mass_scale:={mass_scale}", f"payload_mass_kg:={float(a.payload_mass)!r}",
           f"respawn:={'true' if a.respawn else 'false'}", f"timeout_action:={a.timeout_action}",
           f"planner:={a.planner}", f"wait_recorder:={a.wait_recorder}"]
    view_auto = "idle" if a.realtime else "normal"
    if a.view:
        cmd += ["view:=true", f"view_host:={a.view_host}", f"view_port:={a.view_port}",
                f"foxglove:={'false' if a.no_foxglove else 'true'}", f"foxglove_port:={a.foxglove_port}",
                f"view_scheduling:={a.view_scheduling if a.view_scheduling != 'auto' else view_auto}"]
    orient = "" if a.orientation == "none" else f" (orientation {a.orientation})"
    print(f"[bringup_sim] {a.robot} in {a.world}, planner {a.planner}, "
          f"{'real time' if a.realtime else 'lockstep'}, {a.duration:g} s "
          f"of {a.reference}{orient}; model errors in the world: {', '.join(errors) if errors else 'none'}; "
          f"output in {out}", flush=True)
    if a.view:
        host = "127.0.0.1" if a.view_host in ("0.0.0.0", "") else a.view_host
        print(f"[bringup_sim] view: http://{host}:{a.view_port}/"
              + ("" if a.no_foxglove else f" (Foxglove: ws://{host}:{a.foxglove_port})"), flush=True)
    t0 = time.monotonic()
    runner = subprocess.Popen(cmd)
    try:
        code = runner.wait(timeout=a.timeout or None)
    except KeyboardInterrupt:          # Ctrl-C reached the runner too: let it shut down
        code = runner.wait()
    except subprocess.TimeoutExpired:
        print(f"[bringup_sim] wall-clock limit of {a.timeout:g} s reached: stopping", file=sys.stderr)
        runner.send_signal(signal.SIGINT)
        code = runner.wait()
    wall = time.monotonic() - t0
    if not (bag / "metadata.yaml").is_file():
        print(f"[bringup_sim] no bag was written (launch runner exit code {code})", file=sys.stderr)
        return code or 1
    from .analysis import format_summary, summarize_bag, summary_json

    try:                               # every message is validated: only a bag without joint states fails here
        summary = summarize_bag(bag, a.robot)
    except ValueError as e:
        print(f"[bringup_sim] no summary: {e}", file=sys.stderr)
        return code or 1
    summary["wall_s"] = wall
    summary["launch_exit_code"] = code
    summary["planner"] = a.planner
    summary["model_errors"] = {"link_mass_scale": parse_link_mass_scale(mass_scale),
                               "payload_mass_kg": float(a.payload_mass)}
    (out / "summary.json").write_text(summary_json(summary))
    png = _plot(summary, out / "tracking.png")
    print(format_summary(summary))
    print(_watchdog_summary(bag))
    print(f"  wall time {wall:.1f} s; launch exit code {code}")
    print(f"  bag: {bag}\n  plot: {png}\n  summary: {out / 'summary.json'}", flush=True)
    if a.planner == "bsqp":            # gato replay re-runs the BSQP solves (SolveInput)
        print(f"  replay it offline (solver and model check, docs/replay.md): gato replay {bag}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
