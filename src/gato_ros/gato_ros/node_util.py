"""Small rclpy helpers shared by the gato nodes: schema-driven parameter declaration,
QoS profiles and a main() wrapper with a clean SIGINT / SIGTERM exit."""
from __future__ import annotations

import sys

from . import params as schema

__all__ = ["declare_schema", "run", "qos"]


def qos(depth: int = 10):
    """Reliable, volatile, keep-last(depth): what joint_state_broadcaster and the forward
    command controllers use (SystemDefaultsQoS), so the nodes interoperate with them."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def declare_schema(node, params_schema) -> dict:
    """Declare every parameter of ``params_schema`` on ``node`` with its descriptor.

    The ``robot`` parameter is declared first (default iiwa14); robot-specific defaults
    (joint names, start pose) follow from its value. Values given by a parameter file or
    ``-p`` override the defaults. Returns {name: value}. Raises ValueError when a given
    value violates the schema (range, choices, type), naming the parameter.
    """
    from rclpy.parameter import Parameter

    specs = schema.by_name(params_schema)
    # An integer given for a double parameter (duration:=5 on a launch command line) is
    # accepted as that number; rclpy would refuse the type.
    overrides = getattr(node, "_parameter_overrides", None)
    if isinstance(overrides, dict):
        for p in params_schema:
            ov = overrides.get(p.name)
            if ov is not None and p.type == "double" and ov.type_ == Parameter.Type.INTEGER:
                overrides[p.name] = Parameter(p.name, Parameter.Type.DOUBLE, float(ov.value))
            elif ov is not None and p.type == "double_array" and ov.type_ == Parameter.Type.INTEGER_ARRAY:
                overrides[p.name] = Parameter(p.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in ov.value])
    robot = node.declare_parameter("robot", "iiwa14", schema.descriptor(specs["robot"])).value
    values = {"robot": robot}
    for p in params_schema:
        if p.name == "robot":
            continue
        default = p.default_for(robot)
        if p.type in ("double_array", "string_array") and len(default) == 0:
            default = Parameter.Type.DOUBLE_ARRAY if p.type == "double_array" else Parameter.Type.STRING_ARRAY
        values[p.name] = node.declare_parameter(p.name, default, schema.descriptor(p)).value
    for name, value in values.items():
        if isinstance(value, tuple) or type(value).__name__ == "array":
            values[name] = list(value)  # rclpy returns arrays as array.array / tuples
        reason = schema.validate(params_schema, name, values[name], allow_read_only=True)
        if reason:
            raise ValueError(f"parameter {reason}")
    return values


def run(make_node, argv=None) -> int:
    """rclpy.init, build the node with ``make_node()``, spin until SIGINT / SIGTERM or until
    the node sets ``node.done = True``; then destroy it and shut down. Returns the exit code
    (``node.exit_code``, default 0; 1 if the node could not be built)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    rclpy.init(args=argv if argv is not None else sys.argv)
    node = None
    code = 0
    try:
        try:
            node = make_node()
        except ValueError as e:  # configuration errors: one clear line, no traceback
            print(f"[gato_ros] error: {e}", file=sys.stderr, flush=True)
            return 1
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        while rclpy.ok() and not getattr(node, "done", False):
            ex.spin_once(timeout_sec=0.1)
        code = int(getattr(node, "exit_code", 0))
    except (KeyboardInterrupt, ExternalShutdownException):
        code = int(getattr(node, "exit_code", 0)) if node is not None else 0
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if callable(close):
                close()
            node.destroy_node()
        rclpy.try_shutdown()
    return code
