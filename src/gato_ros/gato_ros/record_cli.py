"""``record``: record the gato controller graph into a rosbag2 bag (MCAP or sqlite3).

    ros2 run gato_ros record -o BAG                       # on a full ROS 2 install
    python -m gato_ros.record_cli -o BAG                  # here (pip-only ROS)
    python -m gato_ros.record_cli -o BAG --duration 30 --storage sqlite3
    python -m gato_ros.record_cli -o BAG --max-bag-size 1000000000 --compression none
    python -m gato_ros.record_cli -o BAG --topics /joint_states /tf:tf2_msgs/msg/TFMessage
    python -m gato_ros.record_cli -o BAG --controller /arm/gato_controller -- --ros-args -p use_sim_time:=true

Runs :class:`gato_ros.recorder_node.RecorderNode` in this process until Ctrl-C (SIGINT),
SIGTERM or ``--duration`` seconds (wall clock), then closes the bag and prints the
per-topic message counts. Exit code 0, 1 on a configuration error (existing output
folder, bad storage).
"""
from __future__ import annotations

import argparse
import sys
import time

__all__ = ["main", "build_parser"]

_EPILOG = """\
default topic set (--all-controller-topics; CONTROLLER = --controller, NAME = --controller-name):
  /joint_states                sensor_msgs/msg/JointState
  /ee_reference                gato_msgs/msg/EEReference
  /NAME/commands               std_msgs/msg/Float64MultiArray
  /NAME/ticks                  gato_msgs/msg/ControlTicks (the gato plugin's per-tick record)
  CONTROLLER/command           gato_msgs/msg/EffortCommand
  CONTROLLER/solve_input       gato_msgs/msg/SolveInput
  CONTROLLER/step_result       gato_msgs/msg/StepResult
  CONTROLLER/solver_stats      gato_msgs/msg/SolverStats
  CONTROLLER/plan              gato_msgs/msg/Plan
  CONTROLLER/status            gato_msgs/msg/ControllerStatus
  /gato_sim/status             gato_msgs/msg/SimStatus (simulation world's command watchdog)
  /parameter_events            rcl_interfaces/msg/ParameterEvent
  /robot_description           std_msgs/msg/String (transient local)
and /gato_recorder/parameter_snapshot (rcl_interfaces/msg/ParameterEvent): every parameter of
CONTROLLER, written at start (once the node is discovered) and after each parameter change.
Lost ticks are reported (log and closing summary): jumps of CONTROLLER/command's tick counter
and of the sequence numbers of every gato_msgs/msg/ControlTicks topic.

QoS matches the publishers (reliable; best effort if a publisher is; transient local when all
publishers are). Messages are stamped with the recorder's clock at receipt (simulated time with
--ros-args -p use_sim_time:=true). Arguments after --ros-args go to rclpy.
"""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="record", description="Record the gato controller graph (or given topics) into a rosbag2 bag "
        "(MCAP or sqlite3) with message definitions and a snapshot of the controller's parameters.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, metavar="BAG",
                    help="output bag folder; must not exist (never overwritten)")
    ap.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap",
                    help="storage plugin (default mcap); rosbag2 format version 9 either way")
    ap.add_argument("--compression", choices=("zstd", "none"), default="zstd",
                    help="zstd (default): MCAP chunks compressed with zstd (sqlite3: each message), as rosbag2's "
                         "zstd storage presets write; none: uncompressed")
    ap.add_argument("--max-bag-size", type=int, default=0, metavar="BYTES",
                    help="split into a new file (BAG/BAG_<k>.mcap) once the current one holds BYTES (like ros2 bag "
                         "record --max-bag-size; 0 = never; mcap only)")
    ap.add_argument("--max-bag-duration", type=float, default=0.0, metavar="S",
                    help="split once a file spans S seconds (like ros2 bag record --max-bag-duration; 0 = never; "
                         "mcap only)")
    ap.add_argument("--chunk-size", type=int, default=4 * 1024 * 1024, metavar="BYTES",
                    help="uncompressed bytes per MCAP chunk (default 4194304 = 4 MiB, rosbag2's zstd_small preset; "
                         "zstd finds the copies between ticks only within a chunk: 1 MiB writes 5 %% more bytes; a "
                         "recorder killed with SIGKILL loses the chunk in memory)")
    ap.add_argument("--solver-state-period", type=int, default=100, metavar="N",
                    help="keep SolveInput's solver state (25 kB of 33 kB per tick on the iiwa14) only on every N-th "
                         "controller tick, resets, after gaps and at the start of each file (default 100; 1: every "
                         "tick, every message stored as received). A whole run and a --start window (re-solved "
                         "from the key tick before it) replay exactly either way. 100 on the iiwa14 at 100 Hz: "
                         "0.58 instead of 0.97 MB/s compressed")
    ap.add_argument("--topics", nargs="+", default=[], metavar="T",
                    help="topics to record, 'TOPIC' (type from discovery) or 'TOPIC:pkg/msg/Type'; "
                         "replaces the default set unless --all-controller-topics is given too")
    ap.add_argument("--all-controller-topics", action="store_true",
                    help="record the controller graph (the default when no --topics is given)")
    ap.add_argument("--controller", default="/gato_controller", metavar="NODE",
                    help="fully qualified controller node: its topics (NODE/...) and the node whose parameters "
                         "are snapshotted (default /gato_controller; '' = no snapshot)")
    ap.add_argument("--controller-name", default="effort_controller", metavar="NAME",
                    help="ros2_control command controller: /NAME/commands is recorded (default effort_controller)")
    ap.add_argument("--duration", type=float, default=0.0, metavar="S",
                    help="stop after S seconds of wall-clock time (default 0: until Ctrl-C / SIGTERM)")
    ap.add_argument("--progress", type=float, default=5.0, metavar="S",
                    help="period of the one-line progress log [s] (0 = off; default 5)")
    return ap


def main(argv=None) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.utilities import remove_ros_args

    full = list(sys.argv if argv is None else ["record", *argv])
    args = remove_ros_args(full)[1:]
    if "--" in args:                      # "record -o B -- --ros-args ...": rclpy took its part
        args = [a for a in args if a != "--"]
    a = build_parser().parse_args(args)
    if a.duration < 0:
        build_parser().error("--duration must be >= 0")
    if a.max_bag_size < 0 or a.max_bag_duration < 0:
        build_parser().error("--max-bag-size / --max-bag-duration must be >= 0")
    if a.solver_state_period < 1:
        build_parser().error("--solver-state-period must be >= 1")
    if a.chunk_size < 4096:
        build_parser().error("--chunk-size must be >= 4096")
    from .recorder_node import controller_graph_topics

    topics = list(a.topics)
    if a.all_controller_topics and topics:
        ctrl = a.controller if a.controller.strip() else "/gato_controller"
        default = [f"{t}:{ty}" for t, ty in controller_graph_topics(ctrl, a.controller_name).items()]
        topics = default + [t for t in topics if t.partition(":")[0] not in controller_graph_topics(
            ctrl, a.controller_name)]
    overrides = [Parameter("bag_path", value=str(a.output)), Parameter("storage", value=a.storage),
                 Parameter("controller_node", value=a.controller), Parameter("controller_name", value=a.controller_name),
                 Parameter("progress_period_s", value=float(a.progress)),
                 Parameter("compression", value=a.compression), Parameter("max_bag_size", value=int(a.max_bag_size)),
                 Parameter("max_bag_duration", value=float(a.max_bag_duration)),
                 Parameter("solver_state_period", value=int(a.solver_state_period)),
                 Parameter("chunk_size", value=int(a.chunk_size))]
    if topics:
        overrides.append(Parameter("topics", Parameter.Type.STRING_ARRAY, topics))
    from .node_util import use_fastdds_profile

    try:
        use_fastdds_profile()      # the gato nodes' Fast DDS profile (its port queue), before rclpy.init
    except ValueError as e:
        build_parser().error(str(e))
    rclpy.init(args=full)
    node, config_error = None, False
    try:
        from .recorder_node import RecorderNode

        try:
            node = RecorderNode(parameter_overrides=overrides)
        except ValueError as e:
            print(f"record: error: {e}", file=sys.stderr, flush=True)
            config_error = True
            return 1
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        end = time.monotonic() + a.duration if a.duration > 0 else None
        while rclpy.ok() and (end is None or time.monotonic() < end):
            ex.spin_once(timeout_sec=0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if rclpy.ok():
            raise
        # SIGINT / SIGTERM shut the context down under a running call (start-up, a service
        # call): rclpy then raises RCLError; the bag is closed below (or was, by the node)
    finally:
        if node is None and not config_error:
            print(f"record: interrupted during start-up; no bag written to {a.output}", file=sys.stderr,
                  flush=True)
        else:
            node.close()               # the bag first (metadata.yaml), with the summary
            try:
                from .node_util import detach_participant_listener

                detach_participant_listener(node)   # Fast DDS's unbounded wait can spin at the destroy (issue 32)
            except Exception as e:  # noqa: BLE001 - never in the way of the destroy
                print(f"record: note: detaching the Fast DDS participant listener: {e}", file=sys.stderr, flush=True)
            try:
                node.destroy_node()
            except Exception as e:  # noqa: BLE001 - after a signal rclpy may refuse; the bag is closed
                print(f"record: note: destroying the node: {e}", file=sys.stderr, flush=True)
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
