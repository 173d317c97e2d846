"""Seeded generation of malformed messages of every type the gato tools consume (issue 38).

Each message type has a :class:`Fuzzer`: a valid message built from the test's current good
value, and a list of mutations. :func:`malformed` applies one to three random mutations to a
valid message and says whether the result must be refused: every mutation is declared
``bad`` (the reader must skip it and count it exactly once) or harmless (a valid message the
reader may take: reordered names, an old stamp, an extra joint). The generator is seeded
(``numpy.random.default_rng(seed)``), so a failing case reproduces from its seed and index.

The values are what the wire can carry: the messages are the real rclpy classes, whose
setters refuse what their CDR types cannot hold (a negative uint32, a string in a float64[]).

Adding a message type (the standard interfaces of the ROS interfaces issue:
FollowJointTrajectory goals, PoseStamped, TwistStamped): write a ``valid(ctx)`` that builds
a good message from ``ctx`` (a :class:`Context`) and its mutations (functions
``(msg, ctx, rng) -> None`` that change ``msg`` in place) as ``Mutation(name, fn, bad)``, and
register ``FUZZERS["TypeName"] = Fuzzer(valid, [...])``; the logic-class tests iterate over
``FUZZERS`` for the types their reader consumes (``READERS`` in test/test_fuzz_inputs.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NS = 1_000_000_000
HOUR_NS = 3600 * NS
#: Values a float64 field is poisoned with.
POISON = (float("nan"), float("inf"), -float("inf"), 1e308, -1e308)


@dataclass
class Context:
    """The current good values the valid messages are built from.

    ``stamp_ns``: the stream's latest stamp; ``names`` (n,) the robot's joints; ``q``, ``qd``
    (n,) the latest good joint state; ``ref`` (K, 3) [m] the latest good EE reference window,
    ``knot_dt`` [s] its spacing; ``plan`` a valid gato_ros.types.Plan (for Plan messages)."""

    stamp_ns: int
    names: list
    q: np.ndarray
    qd: np.ndarray
    ref: np.ndarray = field(default_factory=lambda: np.zeros((1, 3)))
    knot_dt: float = 0.01
    plan: object = None
    ee: np.ndarray = field(default_factory=lambda: np.array([0.5, 0.0, 0.6]))
    lower: np.ndarray | None = None     # (n,) rad URDF position limits (JointTrajectory)
    upper: np.ndarray | None = None
    vel_limit: np.ndarray | None = None  # (n,) rad/s URDF velocity limits
    frames: tuple = ("world",)          # frames a target may name (the first is the base frame)


@dataclass
class Mutation:
    name: str
    fn: object
    bad: bool
    group: str = ""        # mutations of one group (the same field) are never combined


@dataclass
class Fuzzer:
    valid: object
    mutations: list


def _stamp(m, t_ns: int) -> None:
    """Set a header stamp; Time.sec is int32 on the wire (negative seconds are legal)."""
    sec, nsec = divmod(int(t_ns), NS)
    m.header.stamp.sec, m.header.stamp.nanosec = int(np.clip(sec, -2**31, 2**31 - 1)), int(nsec)


def _arr(a) -> list:
    return [float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1)]


# ------------------------------------------------------------------ sensor_msgs/JointState
def js_valid(ctx: Context):
    from sensor_msgs.msg import JointState

    m = JointState()
    _stamp(m, ctx.stamp_ns)
    m.name = list(ctx.names)
    m.position, m.velocity, m.effort = _arr(ctx.q), _arr(ctx.qd), []
    return m


def _poison(field_name, pool=POISON):
    def f(m, ctx, rng):
        v = list(getattr(m, field_name))
        if not v:
            v = [0.0]
        for i in rng.choice(len(v), size=int(rng.integers(1, len(v) + 1)), replace=False):
            v[int(i)] = float(rng.choice(pool))
        setattr(m, field_name, v)
    return f


def _js_drop_name(m, ctx, rng):
    if not m.name:
        return
    i = int(rng.integers(len(m.name)))
    m.name = [n for k, n in enumerate(m.name) if k != i]
    m.position = [v for k, v in enumerate(m.position) if k != i]
    m.velocity = [v for k, v in enumerate(m.velocity) if k != i]


def _js_wrong_name(m, ctx, rng):
    names = list(m.name) or ["A1"]
    names[int(rng.integers(len(names)))] = str(rng.choice(["", "A8", "joint_1", "a1", "A1 ", "\u00e9"]))
    m.name = names if len(set(names)) == len(names) else names[:-1] + ["zz"]


def _js_duplicate_name(m, ctx, rng):
    names = list(m.name)
    if len(names) < 2:
        m.name = names + names[:1] if names else ["A1", "A1"]
        return
    i, j = rng.choice(len(names), size=2, replace=False)
    names[int(i)] = names[int(j)]
    m.name = names


def _js_short(field_name):
    """Fewer values than names (a message without names gets two: more than names)."""
    def f(m, ctx, rng):
        v, n = list(getattr(m, field_name)), len(m.name)
        setattr(m, field_name, v[:int(rng.integers(0, n))] if n else [0.0, 0.0])
    return f


def _js_long(m, ctx, rng):
    """More positions than names, whatever was done before."""
    n = len(m.name)
    m.position = (list(m.position) + [0.0] * (n + 3))[:n + int(rng.integers(1, 4))]


def _js_empty(m, ctx, rng):
    m.name, m.position, m.velocity = [], [], []


def _js_effort_mismatch(m, ctx, rng):
    m.effort = [1.0] * int(rng.choice([1, len(m.name) + 1]))


def _js_out_of_range(m, ctx, rng):
    v = list(m.position if rng.random() < 0.5 else m.velocity) or [0.0]
    v[int(rng.integers(len(v)))] = float(rng.choice([1e3, -1e3, 1e6, 1e100]))
    if len(v) == len(m.position) and rng.random() < 0.5:
        m.position = v
    else:
        m.velocity = v


def _js_future(m, ctx, rng):
    _stamp(m, ctx.stamp_ns + int(rng.choice([HOUR_NS, 100 * HOUR_NS, 20 * NS])))


def _js_negative(m, ctx, rng):
    _stamp(m, -int(rng.choice([1, NS, HOUR_NS])))


def _js_old(m, ctx, rng):
    """Older than ``ctx.stamp_ns`` by 2 us or more (a caller may stamp the valid message up to
    1 us after the reader's newest state)."""
    _stamp(m, ctx.stamp_ns - int(rng.choice([2000, NS // 100, HOUR_NS])))


def _js_reorder(m, ctx, rng):
    if not len(m.name) == len(m.position) == len(m.velocity):
        return
    p = rng.permutation(len(m.name))
    m.name = [m.name[int(i)] for i in p]
    m.position = [m.position[int(i)] for i in p]
    m.velocity = [m.velocity[int(i)] for i in p]


def _js_extra_joint(m, ctx, rng):
    m.name = list(m.name) + ["gripper_finger"]
    m.position = list(m.position) + [0.5]      # not a controlled joint
    m.velocity = list(m.velocity) + [0.0]


JOINT_STATE = Fuzzer(js_valid, [
    Mutation("position_poisoned", _poison("position"), True),
    Mutation("velocity_poisoned", _poison("velocity"), True),
    Mutation("joint_dropped", _js_drop_name, True),
    Mutation("joint_renamed", _js_wrong_name, True),
    Mutation("joint_duplicated", _js_duplicate_name, True),
    Mutation("positions_short", _js_short("position"), True),
    Mutation("velocities_short", _js_short("velocity"), True),
    Mutation("positions_long", _js_long, True),
    Mutation("all_empty", _js_empty, True),
    Mutation("efforts_mismatched", _js_effort_mismatch, True),
    Mutation("out_of_range", _js_out_of_range, True),
    Mutation("stamp_future", _js_future, True, "stamp"),
    Mutation("stamp_negative", _js_negative, True, "stamp"),
    Mutation("stamp_old", _js_old, True, "stamp"),          # refused as out of order (dropped_out_of_order)
    Mutation("names_reordered", _js_reorder, False),
    Mutation("extra_joint", _js_extra_joint, False),
])


# ------------------------------------------------------------------ gato_msgs/EEReference
def ref_valid(ctx: Context):
    from gato_msgs.msg import EEReference

    m = EEReference()
    _stamp(m, ctx.stamp_ns)
    m.n_knots = int(ctx.ref.shape[0])
    m.knot_dt = float(ctx.knot_dt)
    m.positions = _arr(ctx.ref)
    return m


def _ref_n_knots(m, ctx, rng):
    n = int(m.n_knots)
    m.n_knots = int(rng.choice([0, -1, n + 1, 100000, 2**31 - 1] + ([n - 1] if n > 2 else [])))


def _ref_positions_size(m, ctx, rng):
    p = list(m.positions)
    m.positions = [[], p[:-1], p + [0.0], p[:3]][int(rng.integers(4))] if len(p) > 3 else []


def _ref_empty(m, ctx, rng):
    m.n_knots, m.positions = 0, []


def _ref_knot_dt(m, ctx, rng):
    m.knot_dt = float(rng.choice([0.0, -0.01, float("nan"), float("inf"), -float("inf"), 1e300, 1e-12, 1e9]))


def _ref_far(m, ctx, rng):
    p = list(m.positions) or [0.0, 0.0, 0.0]
    p[int(rng.integers(len(p)))] = float(rng.choice([1e3, -1e6, 1e300]))
    m.positions = p


def _ref_future(m, ctx, rng):
    _stamp(m, ctx.stamp_ns + int(rng.choice([HOUR_NS, 100 * HOUR_NS, 20 * NS])))


def _ref_old(m, ctx, rng):
    _stamp(m, ctx.stamp_ns - int(rng.choice([HOUR_NS, 100 * HOUR_NS])))


def _ref_frame(m, ctx, rng):
    m.header.frame_id = str(rng.choice(["", "world", "\u00e9\u00e9"]))


EE_REFERENCE = Fuzzer(ref_valid, [
    Mutation("positions_poisoned", _poison("positions"), True),
    Mutation("n_knots_inconsistent", _ref_n_knots, True),
    Mutation("positions_size", _ref_positions_size, True),
    Mutation("empty", _ref_empty, True),
    Mutation("knot_dt_bad", _ref_knot_dt, True),
    Mutation("target_out_of_range", _ref_far, True),
    Mutation("stamp_future", _ref_future, True, "stamp"),
    Mutation("stamp_old", _ref_old, False, "stamp"),        # a valid window of the past: stored, never the latest
    Mutation("frame_id", _ref_frame, False),
])


# ------------------------------------------------------------------ geometry_msgs/WrenchStamped
def wrench_valid(ctx: Context):
    from geometry_msgs.msg import WrenchStamped

    m = WrenchStamped()
    _stamp(m, ctx.stamp_ns)
    return m


def _wrench_poison(m, ctx, rng):
    comp = [m.wrench.force, m.wrench.torque][int(rng.integers(2))]
    setattr(comp, str(rng.choice(["x", "y", "z"])), float(rng.choice(POISON)))


def _wrench_huge(m, ctx, rng):
    setattr(m.wrench.force, "z", float(rng.choice([1e7, -1e12])))


def _wrench_small(m, ctx, rng):
    m.wrench.force.x = float(rng.uniform(-5, 5))


WRENCH = Fuzzer(wrench_valid, [
    Mutation("poisoned", _wrench_poison, True),
    Mutation("huge", _wrench_huge, True),
    Mutation("plausible", _wrench_small, False),
])


# ------------------------------------------------------------------ gato_msgs/Plan
def plan_valid(ctx: Context):
    from gato_msgs.msg import Plan

    p = ctx.plan
    m = Plan()
    _stamp(m, ctx.stamp_ns)
    m.knot_dt, m.nx, m.nu, m.n_knots = float(p.knot_dt), int(p.nx), int(p.nu), int(p.n_knots)
    m.joint_names = list(p.joint_names)
    m.xu = _arr(p.xu)
    m.seq, m.reset_epoch, m.integrator = int(p.seq), int(p.reset_epoch), str(p.integrator)
    return m


def _plan_layout(m, ctx, rng):
    c = int(rng.integers(4))
    if c == 0:
        m.n_knots = int(rng.choice([0, int(m.n_knots) + 1, 100000]))
    elif c == 1:
        m.nx = int(rng.choice([0, int(m.nx) + 1, 2**31 - 1]))
    elif c == 2:
        m.xu = list(m.xu)[:-int(rng.integers(1, 5))]
    else:
        m.nu = int(m.nu) + 1


def _plan_knot_dt(m, ctx, rng):
    m.knot_dt = float(rng.choice([0.0, -0.1, float("nan"), float("inf")]))


def _plan_integrator(m, ctx, rng):
    m.integrator = str(rng.choice(["leapfrog", "x" * 100]))


def _plan_names(m, ctx, rng):
    names = list(m.joint_names)
    names[int(rng.integers(len(names)))] = "joint_x"
    m.joint_names = names


PLAN = Fuzzer(plan_valid, [
    Mutation("xu_poisoned", _poison("xu", POISON[:3]), True),
    # finite but absurd knots: a valid plan by its layout; the executor clamps every torque and
    # cuts at the position limits, so what it commands stays within the limits
    Mutation("xu_huge", _poison("xu", (1e308, -1e308, 1e6)), False),
    Mutation("layout", _plan_layout, True),
    Mutation("knot_dt_bad", _plan_knot_dt, True),
    Mutation("integrator_unknown", _plan_integrator, True),
    Mutation("joint_renamed", _plan_names, True),
    Mutation("stamp_future", lambda m, ctx, rng: _stamp(m, ctx.stamp_ns + 3600 * NS), True),
])


# ------------------------------------------------------------------ geometry_msgs/PoseStamped (~/goal_pose)
def pose_valid(ctx: Context):
    from geometry_msgs.msg import PoseStamped

    m = PoseStamped()
    _stamp(m, ctx.stamp_ns)
    m.header.frame_id = ctx.frames[0]
    m.pose.position.x, m.pose.position.y, m.pose.position.z = _arr(ctx.ee + [0.05, -0.03, 0.02])
    m.pose.orientation.w = 1.0
    return m


def _pose_poison(m, ctx, rng):
    setattr(m.pose.position, str(rng.choice(["x", "y", "z"])), float(rng.choice(POISON[:3])))


def _pose_far(m, ctx, rng):
    setattr(m.pose.position, str(rng.choice(["x", "y", "z"])), float(rng.choice([5.0, -40.0, 1e308, -1e308])))


def _quat_poison(m, ctx, rng):
    setattr(m.pose.orientation, str(rng.choice(["x", "y", "z", "w"])), float(rng.choice(POISON[:3])))


def _quat_zero(m, ctx, rng):
    o = m.pose.orientation
    o.x = o.y = o.z = o.w = 0.0


def _quat_unnormalised(m, ctx, rng):
    """A rotation with a non-unit quaternion: normalised on receipt (tf2's rule), so harmless."""
    o, k = m.pose.orientation, float(rng.choice([1e-3, 2.0, 1e3]))
    q = rng.normal(size=4)
    o.x, o.y, o.z, o.w = _arr(k * q / np.linalg.norm(q))


def _unknown_frame(m, ctx, rng):
    m.header.frame_id = str(rng.choice(["map", "odom", "\u00e9\u00e9", "world/", "tool0_typo"]))


def _known_frame(m, ctx, rng):
    """Another frame the tree knows, or the base frame with tf2's tolerated leading slash."""
    f = str(rng.choice(list(ctx.frames)))
    m.header.frame_id = f if rng.random() < 0.5 else "/" + f


def _pose_stamp_any(m, ctx, rng):
    """Goals act at the controller's tick time: the stamp is informational (like MoveIt's)."""
    _stamp(m, ctx.stamp_ns + int(rng.choice([-HOUR_NS, 20 * NS, -NS])))


POSE_STAMPED = Fuzzer(pose_valid, [
    Mutation("position_poisoned", _pose_poison, True),
    Mutation("position_far", _pose_far, True),
    Mutation("orientation_poisoned", _quat_poison, True, "orientation"),
    Mutation("orientation_zero", _quat_zero, True, "orientation"),
    Mutation("orientation_unnormalised", _quat_unnormalised, False, "orientation"),
    Mutation("frame_unknown", _unknown_frame, True, "frame"),
    Mutation("frame_known", _known_frame, False, "frame"),
    Mutation("stamp_any", _pose_stamp_any, False),
])


# ------------------------------------------------------------------ geometry_msgs/TwistStamped (~/delta_twist_cmds)
def twist_valid(ctx: Context):
    from geometry_msgs.msg import TwistStamped

    m = TwistStamped()
    _stamp(m, ctx.stamp_ns)
    m.header.frame_id = ctx.frames[0]
    m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = 0.02, -0.01, 0.0
    return m


def _twist_poison(m, ctx, rng):
    comp = [m.twist.linear, m.twist.angular][int(rng.integers(2))]
    setattr(comp, str(rng.choice(["x", "y", "z"])), float(rng.choice(POISON[:3])))


def _twist_fast(m, ctx, rng):
    """A finite but too fast linear twist: clamped to servo_max_speed_mps (counted), not refused."""
    v = float(rng.choice([1.0, -50.0, 1e154, 1e308, -1e308]))
    for a in rng.choice(["x", "y", "z"], size=int(rng.integers(1, 4)), replace=False):
        setattr(m.twist.linear, str(a), v)


def _twist_angular(m, ctx, rng):
    setattr(m.twist.angular, str(rng.choice(["x", "y", "z"])), float(rng.choice([0.3, -2.0, 1e308])))


TWIST_STAMPED = Fuzzer(twist_valid, [
    Mutation("poisoned", _twist_poison, True, "values"),      # one value mutation each: a later one could undo it
    Mutation("frame_unknown", _unknown_frame, True, "frame"),
    Mutation("frame_known", _known_frame, False, "frame"),
    Mutation("too_fast", _twist_fast, False, "values"),
    Mutation("angular", _twist_angular, False, "values"),
])


# ------------------------------------------------------------------ trajectory_msgs/JointTrajectory
# (~/joint_trajectory, and the trajectory of a FollowJointTrajectory goal)
def jt_valid(ctx: Context):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    m = JointTrajectory()
    _stamp(m, ctx.stamp_ns)
    m.joint_names = list(ctx.names)
    pts = []
    for k in range(3):
        p = JointTrajectoryPoint()
        p.positions = _arr(ctx.q + 0.05 * (k + 1))
        p.time_from_start = Duration(sec=k + 1, nanosec=0)
        pts.append(p)
    m.points = pts
    return m


def _jt_points(m):
    return list(m.points)


def _jt_poison(field_name):
    def f(m, ctx, rng):
        pts = _jt_points(m)
        if not pts:
            return
        p = pts[int(rng.integers(len(pts)))]
        v = list(getattr(p, field_name)) or [0.0] * len(m.joint_names)
        if not v:
            return
        v[int(rng.integers(len(v)))] = float(rng.choice(POISON[:3]))
        setattr(p, field_name, v)
        if field_name == "velocities":     # velocities for every point (else another rule refuses it)
            for o in pts:
                if len(o.velocities) != len(v):
                    o.velocities = [0.0] * len(v)
    return f


def _jt_names(m, ctx, rng):
    names = list(m.joint_names)
    c = int(rng.integers(3))
    if c == 0 and len(names) > 1:
        names[1] = names[0]                          # repeated
    elif c == 1:
        names[int(rng.integers(len(names)))] = "NOPE"  # unknown
    else:
        names = names[:-1]                           # one missing (positions keep their length: also refused)
    m.joint_names = names


def _jt_empty(m, ctx, rng):
    m.points = []


def _jt_positions_size(m, ctx, rng):
    pts = _jt_points(m)
    if pts:
        p = pts[int(rng.integers(len(pts)))]
        p.positions = list(p.positions)[:-1] if rng.random() < 0.5 else list(p.positions) + [0.0]


def _jt_time_order(m, ctx, rng):
    from builtin_interfaces.msg import Duration

    pts = _jt_points(m)
    if len(pts) < 2:
        return
    c = int(rng.integers(3))
    if c == 0:
        pts[1].time_from_start = Duration(sec=pts[0].time_from_start.sec, nanosec=pts[0].time_from_start.nanosec)
    elif c == 1:
        pts[0].time_from_start = Duration(sec=-int(rng.integers(1, 2**31 - 1)), nanosec=0)
    else:
        pts[-1].time_from_start = Duration(sec=0, nanosec=1)


def _jt_beyond_limits(m, ctx, rng):
    pts = _jt_points(m)
    if not pts or ctx.upper is None:
        return
    p = pts[int(rng.integers(len(pts)))]
    v = list(p.positions)
    j = int(rng.integers(min(len(v), len(m.joint_names))))
    # the limits of the joint at this slot (names may be reordered, or one renamed: then any joint's)
    k = list(ctx.names).index(m.joint_names[j]) if m.joint_names[j] in ctx.names else j % len(ctx.names)
    v[j] = float(ctx.upper[k] + rng.choice([0.01, 1.0, 1e6])) if rng.random() < 0.5 else float(ctx.lower[k] - 0.5)
    p.positions = v


def _jt_too_fast(m, ctx, rng):
    """Velocities beyond the URDF velocity limits (finite, up to 1e308): a Hermite segment through
    them would leave the joint limits or overflow."""
    pts = _jt_points(m)
    if not pts or ctx.vel_limit is None:
        return
    n = len(m.joint_names)
    for o in pts:
        if len(o.velocities) != n:
            o.velocities = [0.0] * n
    p = pts[int(rng.integers(len(pts)))]
    v = list(p.velocities)
    j = int(rng.integers(n))
    k = list(ctx.names).index(m.joint_names[j]) if m.joint_names[j] in ctx.names else 0
    v[j] = float(rng.choice([2.0, -10.0, 1e6, 1e308])) * float(ctx.vel_limit[k])
    p.velocities = v


def _jt_some_velocities(m, ctx, rng):
    pts = _jt_points(m)
    if len(pts) >= 2:
        pts[int(rng.integers(len(pts)))].velocities = [0.0] * len(m.joint_names)
        if all(len(o.velocities) for o in pts):
            pts[0].velocities = []


def _jt_reorder(m, ctx, rng):
    """Another joint order, every point permuted the same way: a valid trajectory."""
    n = len(m.joint_names)
    if not all(len(p.positions) == n and len(p.velocities) in (0, n) for p in m.points):
        return
    perm = rng.permutation(n)
    m.joint_names = [m.joint_names[int(i)] for i in perm]
    for p in m.points:
        p.positions = [p.positions[int(i)] for i in perm]
        if len(p.velocities):
            p.velocities = [p.velocities[int(i)] for i in perm]


def _jt_slow_velocities(m, ctx, rng):
    """Every point with velocities within the limits: valid."""
    for p in m.points:
        if len(p.velocities) not in (0, len(p.positions)):
            return
    for p in m.points:
        p.velocities = _arr(rng.uniform(-0.1, 0.1, size=len(p.positions)))


JOINT_TRAJECTORY = Fuzzer(jt_valid, [
    Mutation("positions_poisoned", _jt_poison("positions"), True),
    Mutation("velocities_poisoned", _jt_poison("velocities"), True, "velocities"),
    Mutation("names_bad", _jt_names, True, "names"),
    Mutation("points_empty", _jt_empty, True),
    Mutation("positions_size", _jt_positions_size, True),
    Mutation("time_order", _jt_time_order, True),
    Mutation("beyond_limits", _jt_beyond_limits, True),
    Mutation("too_fast", _jt_too_fast, True, "velocities"),
    Mutation("velocities_for_some_points", _jt_some_velocities, True, "velocities"),
    Mutation("names_reordered", _jt_reorder, False, "names"),
    Mutation("velocities_given", _jt_slow_velocities, False, "velocities"),
])


# ------------------------------------------------------------------ commands into the simulation world
# gato_msgs/EffortCommand (lockstep: names and the answered stamp) and std_msgs/Float64MultiArray
# (realtime: the forward-command controller's convention, the configured joint order). ``ctx.q``
# carries the good torques here [N*m]; ``ctx.vel_limit`` is unused; ``ctx.upper`` the effort limits.
def effort_valid(ctx: Context):
    from gato_msgs.msg import EffortCommand

    m = EffortCommand()
    _stamp(m, ctx.stamp_ns)
    m.joint_names = list(ctx.names)
    m.effort = _arr(ctx.q)
    m.source, m.tick = "mpc", 1
    return m


def _effort_names(m, ctx, rng):
    names = list(m.joint_names)
    c = int(rng.integers(3))
    if c == 0 and len(names) > 1:
        names[1] = names[0]                                # repeated
    elif c == 1:
        slots = [i for i, n in enumerate(names) if n in ctx.names] or [0]
        names[int(rng.choice(slots))] = "NOPE"            # a model joint missing
    else:                                                  # one model joint short, consistently
        slots = [i for i, n in enumerate(names) if n in ctx.names] or [0]
        k = int(rng.choice(slots))
        names = names[:k] + names[k + 1:]
        m.effort = [v for i, v in enumerate(m.effort) if i != k]
    m.joint_names = names


def _effort_size(m, ctx, rng):
    e = list(m.effort)
    m.effort = e[:-1] if rng.random() < 0.5 else e + [0.0]


def _effort_huge(m, ctx, rng):
    """Finite torques up to 1e308 N*m: saturate at the effort limits when applied (the motors)."""
    e = list(m.effort)
    e[int(rng.integers(len(e)))] = float(rng.choice([2.0, -10.0, 1e308 / max(float(np.max(ctx.upper)), 1.0)])
                                        * float(np.max(ctx.upper)))
    m.effort = e


def _effort_reorder(m, ctx, rng):
    if len(m.joint_names) != len(m.effort) or len(set(m.joint_names)) != len(m.joint_names):
        return
    p = rng.permutation(len(m.effort))
    m.joint_names = [m.joint_names[int(i)] for i in p]
    m.effort = [m.effort[int(i)] for i in p]


def _effort_extra(m, ctx, rng):
    m.joint_names = list(m.joint_names) + ["gripper_finger"]   # not a model joint: ignored
    m.effort = list(m.effort) + [1.0]


EFFORT_COMMAND = Fuzzer(effort_valid, [
    Mutation("effort_poisoned", _poison("effort", POISON[:3]), True, "values"),
    Mutation("names_bad", _effort_names, True, "names"),
    Mutation("size", _effort_size, True, "size"),
    Mutation("huge", _effort_huge, False, "values"),
    Mutation("names_reordered", _effort_reorder, False, "names"),
    Mutation("extra_joint", _effort_extra, False, "size"),
])


def multiarray_valid(ctx: Context):
    from std_msgs.msg import Float64MultiArray

    m = Float64MultiArray()
    m.data = _arr(ctx.q)
    return m


def _ma_size(m, ctx, rng):
    d = list(m.data)
    m.data = [[], d[:-1], d + [0.0], d * 2][int(rng.integers(4))]


def _ma_huge(m, ctx, rng):
    d = list(m.data) or [0.0]
    d[int(rng.integers(len(d)))] = float(rng.choice([-3.0, 1e6, 1e300])) * float(np.max(ctx.upper))
    m.data = d


FLOAT64_MULTIARRAY = Fuzzer(multiarray_valid, [
    Mutation("data_poisoned", _poison("data", POISON[:3]), True, "values"),
    Mutation("size", _ma_size, True, "size"),
    Mutation("huge", _ma_huge, False, "values"),
])

FUZZERS = {"JointState": JOINT_STATE, "EEReference": EE_REFERENCE, "WrenchStamped": WRENCH, "Plan": PLAN,
           "PoseStamped": POSE_STAMPED, "TwistStamped": TWIST_STAMPED, "JointTrajectory": JOINT_TRAJECTORY,
           "EffortCommand": EFFORT_COMMAND, "Float64MultiArray": FLOAT64_MULTIARRAY}


def malformed(kind: str, ctx: Context, rng, *, only_bad: bool = False):
    """(message, bad, mutation names): a valid ``kind`` message from ``ctx`` with 1-3 random
    mutations; ``bad`` when at least one is declared bad. ``only_bad``: draw from the bad ones."""
    fz = FUZZERS[kind]
    pool = [mu for mu in fz.mutations if mu.bad] if only_bad else fz.mutations
    m = fz.valid(ctx)
    picked, groups = [], set()
    for i in rng.choice(len(pool), size=int(rng.integers(1, min(3, len(pool)) + 1)), replace=False):
        mu = pool[int(i)]
        if not (mu.group and mu.group in groups):
            picked.append(mu)
            groups.add(mu.group)
    for mu in picked:
        mu.fn(m, ctx, rng)
    return m, any(mu.bad for mu in picked), [mu.name for mu in picked]
