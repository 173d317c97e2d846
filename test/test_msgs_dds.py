"""gato_msgs over the wire: a fully populated StepResult survives CDR
serialization in-process, and a DDS hop to another OS process, bit for bit."""
import array
import inspect
import json
import queue
import threading
import time

import numpy as np

from conftest import import_or_skip, start_python, stop_process

_BUILD_HINT = (
    "build the workspace and `source install/setup.bash` "
    "(see scripts/setup.sh, or the colcon command in src/gato_msgs/README.md)"
)
gato_msgs_msg = import_or_skip("gato_msgs.msg", _BUILD_HINT)
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402

StepResult = gato_msgs_msg.StepResult
SolveResult = gato_msgs_msg.SolveResult
SolverStats = gato_msgs_msg.SolverStats

TOPIC = "/gato_test/step_result"
TIMEOUT_S = 30.0  # whole DDS exchange, subprocess start included


def to_plain(value):
    """A ROS message as nested JSON-safe dicts/lists.

    Floats become float.hex(), so equality of two results is bit equality
    (-0.0, infinities and subnormals included).
    """
    if hasattr(value, "get_fields_and_field_types"):
        return {name: to_plain(getattr(value, name))
                for name in value.get_fields_and_field_types()}
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, (list, tuple, array.array)) or hasattr(value, "tolist"):
        return [to_plain(v) for v in value]
    return value


def make_step_result(seed=20240611):
    """A StepResult with every field set to a non-default, shape-consistent value.

    B=4 problems, N=8 knots, nx=14, nu=13 (7 torques + 6 fc slots),
    I=3 SQP iterations, G=3 row groups.
    """
    rng = np.random.default_rng(seed)
    B, N, nx, n_act, n_fc, I, G = 4, 8, 14, 7, 6, 3, 3
    nu = n_act + n_fc
    S = N * (nx + nu) - nu

    stats = SolverStats()
    stats.header.stamp.sec = 1_760_000_000
    stats.header.stamp.nanosec = 999_999_999
    stats.header.frame_id = "solver"
    stats.batch_size, stats.n_iters, stats.n_row_groups = B, I, G
    stats.solve_time_us = 2**40 + 12_345  # does not fit in 32 bits
    stats.sqp_iters = rng.integers(1, I + 1, size=B, dtype=np.int32)
    stats.kkt_converged = [True, False, True, False]
    stats.final_merit = rng.uniform(0.0, 1.0, size=B)
    stats.initial_merit = rng.uniform(1.0, 10.0, size=B)
    stats.ls_num_iters = 8
    pcg = rng.integers(1, 200, size=B * I, dtype=np.int32)
    pcg[-1] = np.iinfo(np.int32).max
    stats.pcg_iters = pcg
    stats.pcg_times_us = rng.uniform(10.0, 500.0, size=I)
    stats.min_merit = rng.uniform(0.0, 5.0, size=B * I)
    stats.step_size = rng.choice([1.0, 0.5, 0.25, 0.125], size=B * I)
    stats.linsys = "bdsv_first"
    stats.budget_hit = True
    stats.has_row_stats = True
    stats.row_max_violation = rng.exponential(1e-3, size=B * G)
    stats.row_sum_violation = rng.exponential(1e-2, size=B * G)
    stats.admm_r_prim = rng.exponential(1e-4, size=B)
    stats.admm_r_dual = rng.exponential(1e-5, size=B)
    stats.admm_iters = rng.integers(1, 11, size=B, dtype=np.int32)
    stats.admm_linsys_iters = rng.integers(10, 1000, size=B, dtype=np.int32)

    xu = rng.standard_normal((B, S))
    # Values a lossy path would change: signed zero, infinities, extremes.
    xu[0, :6] = [np.inf, -np.inf, -0.0, 5e-324, np.finfo(np.float64).max,
                 -np.finfo(np.float64).tiny]
    best_id = 2

    solve = SolveResult()
    solve.xu = xu.ravel()
    solve.batch_size, solve.xu_size = B, S
    solve.solve_time_us = 2**33 + 7
    solve.stats = stats
    solve.nx, solve.nu, solve.n_knots, solve.n_actuated = nx, nu, N, n_act

    msg = StepResult()
    msg.header.stamp.sec = 1_760_000_001
    msg.header.stamp.nanosec = 123_456_789
    msg.header.frame_id = "iiwa_link_0"
    msg.u = xu[best_id, nx:nx + n_act].copy()
    msg.best_id = best_id
    msg.xu_best = xu[best_id].copy()
    msg.solve = solve
    msg.hypo_stats_json = json.dumps(
        {"n": B, "weights": rng.uniform(size=B).tolist(), "label": "mass ±10 %"},
        ensure_ascii=False)
    msg.pred_err = float(rng.uniform(0.01, 0.2))
    msg.reseeded = True
    msg.fc = xu[best_id, nx + n_act:nx + nu].copy()
    msg.iterations = 3
    msg.budget_hit = True
    msg.wall_s = float(rng.uniform(1e-3, 1e-2))
    msg.admm_linsys = "bdsv_factor"
    msg.limits = "admm"
    msg.row_viol = rng.exponential(1e-3, size=G)
    return msg


def _default_fields(msg, default, path=""):
    """Dotted names of the leaf fields of msg that still hold their default value."""
    found = []
    for name in msg.get_fields_and_field_types():
        value, dflt = getattr(msg, name), getattr(default, name)
        where = f"{path}{name}"
        if hasattr(value, "get_fields_and_field_types"):
            found += _default_fields(value, dflt, where + ".")
        elif isinstance(value, (list, tuple, array.array)) or hasattr(value, "tolist"):
            if len(value) == 0:
                found.append(where)
        elif value == dflt:
            found.append(where)
    return found


def test_fixture_populates_every_field():
    # Guards the other tests: a field added to a .msg must be filled here too.
    assert _default_fields(make_step_result(), StepResult()) == []


def test_cdr_round_trip_in_process():
    msg = make_step_result()
    data = serialize_message(msg)
    assert isinstance(data, bytes) and len(data) > 0
    back = deserialize_message(data, StepResult)
    assert back == msg
    assert to_plain(back) == to_plain(msg)


_SUBSCRIBER = """
import array, json, sys, time
import rclpy
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from gato_msgs.msg import StepResult

TOPIC, TIMEOUT_S = {topic!r}, {timeout!r}
{to_plain_src}
rclpy.init()
node = rclpy.create_node("gato_test_step_result_sub")
qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                 reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
received = []
node.create_subscription(StepResult, TOPIC, received.append, qos)
print("READY", node.context.get_domain_id(), flush=True)
deadline = time.monotonic() + TIMEOUT_S
while not received and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
if received:
    print("RESULT " + json.dumps(to_plain(received[0]), sort_keys=True), flush=True)
node.destroy_node()
rclpy.try_shutdown()
sys.exit(0 if received else 3)
"""


def _pump_lines(stream, out):
    for line in stream:
        out.put(line.rstrip("\n"))
    out.put(None)  # EOF


def test_step_result_crosses_processes_over_dds(ros_env, tmp_path):
    from rclpy.context import Context
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    msg = make_step_result()
    expected = to_plain(msg)
    domain_id = int(ros_env["ROS_DOMAIN_ID"])
    code = _SUBSCRIBER.format(topic=TOPIC, timeout=TIMEOUT_S,
                              to_plain_src=inspect.getsource(to_plain))
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)

    context = Context()
    rclpy.init(context=context, domain_id=domain_id)
    node = proc = rc = None
    stderr_path = tmp_path / "subscriber.stderr"
    try:
        node = rclpy.create_node("gato_test_step_result_pub", context=context)
        pub = node.create_publisher(StepResult, TOPIC, qos)
        # Transient-local: the subscriber gets this even though it joins later.
        pub.publish(msg)
        with open(stderr_path, "w") as stderr:
            proc = start_python(code, ros_env, stderr=stderr)
        lines = queue.Queue()
        threading.Thread(target=_pump_lines, args=(proc.stdout, lines), daemon=True).start()

        ready = result = None
        deadline = time.monotonic() + TIMEOUT_S
        while result is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                pub.publish(msg)  # belt and braces: re-publish until it reports
                continue
            if line is None:
                break  # subscriber exited
            if line.startswith("READY"):
                ready = line
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
    finally:
        if proc is not None:
            rc = stop_process(proc)
        if node is not None:
            node.destroy_node()
        context.try_shutdown()

    diag = (f"domain {domain_id}; subscriber said {ready!r}, exit code {rc}; "
            f"stderr:\n{stderr_path.read_text()[-3000:]}")
    assert ready == f"READY {domain_id}", diag
    assert result is not None, f"no StepResult received within {TIMEOUT_S} s; {diag}"
    assert result == expected
    # Dict equality treats True == 1; the canonical JSON text does not.
    assert json.dumps(result, sort_keys=True) == json.dumps(expected, sort_keys=True)
