"""The one validation of every message the gato tools consume, at their boundary; ROS-free.

A bag records what was on the wire, including what the controller rightly ignored, and a
foreign node can publish anything on the controller's topics. Every reader (``gato replay``,
and through :mod:`gato_ros.inputs` the controller, estimator and reference nodes, the
bringup summary, :mod:`gato_ros.analysis`) therefore checks each message here, once, and
skips a message it refuses, counted in a :class:`Skips` tally that names the reason and the
message's stamp in the reader's output; nothing downstream sees an unchecked value.

The messages are duck-typed: rclpy messages and rosbags' deserialized messages (the same
field names) both work. Each function raises :class:`Rejected` (a ValueError) with a
``kind`` (one word, the counter it goes to) and a text that names the field.

Plausibility limits (what no producer of this project sends, and what would make a
reader's arithmetic overflow): an EE reference of at most :data:`MAX_KNOTS` knots spaced
:data:`MIN_KNOT_DT_S` .. :data:`MAX_KNOT_DT_S` apart, within :data:`MAX_POSITION_M` of the
world origin; a stamp at most :data:`FUTURE_TOLERANCE_S` ahead of the reader's clock (a
reader without a clock passes ``now_ns=None``); a joint-state stamp not negative; a wrench
within :data:`MAX_WRENCH`; joint positions within the URDF limits widened by
:data:`POSITION_SLACK_RAD` and velocities within :data:`VELOCITY_FACTOR` x the URDF velocity
limits (:func:`state_bounds`: a reading beyond them is a broken sensor or a foreign publisher,
and a 1e308 rad joint would overflow every model the readers evaluate).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .references import NS_PER_S, QUAT_UNIT_TOL, ReferenceWindow

__all__ = ["Rejected", "Skips", "reference_window", "joint_state_arrays", "joint_vector", "wrench", "stamp_ns",
           "state_bounds", "MAX_KNOTS", "MIN_KNOT_DT_S", "MAX_KNOT_DT_S", "MAX_POSITION_M", "FUTURE_TOLERANCE_S",
           "MAX_WRENCH", "POSITION_SLACK_RAD", "VELOCITY_FACTOR"]

MAX_KNOTS = 10_000                 # an EE reference window [knots]: 100 s at 10 ms
MIN_KNOT_DT_S = 1e-6               # knot spacing [s]: below, the integer-ns knot grid degenerates
MAX_KNOT_DT_S = 3600.0             # knot spacing [s]: above, ns arithmetic overflows int64
MAX_POSITION_M = 100.0             # |EE target| [m] from the world origin: no arm reaches farther
FUTURE_TOLERANCE_S = 10.0          # a stamp this far ahead of the reader's clock is refused [s]
MAX_WRENCH = 1e6                   # |force| [N] / |torque| [N*m] of an external-wrench estimate
# Wide on purpose: a real arm that a failing controller lets fly still reports real states (a
# free-running run on an overloaded machine measured 17.7 rad/s on iiwa14's A3, 10x its limit),
# and refusing those would blind the controller; these bounds catch what no joint can report.
POSITION_SLACK_RAD = 2 * math.pi   # a joint position a full turn beyond its URDF limit is implausible [rad]
VELOCITY_FACTOR = 100.0            # a joint velocity 100 times its URDF limit is implausible
UNLIMITED = 1e4                    # the bound [rad, rad/s] of a joint without a (finite) URDF limit


class Rejected(ValueError):
    """A message refused at a reader's boundary. ``kind``: "shape" (array sizes / counts),
    "nonfinite" (NaN / Inf), "range" (a finite value beyond the limits above), "names"
    (joint names, arrays that do not match them), "stamp" (before the epoch, too far in the
    future), "order" (older than what the reader already took), "type" (an unreadable field)."""

    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind = kind


def stamp_ns(header) -> int:
    """Integer nanoseconds of a std_msgs/Header's stamp."""
    return int(header.stamp.sec) * NS_PER_S + int(header.stamp.nanosec)


def _array(v, what: str) -> np.ndarray:
    try:
        return np.array(v, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise Rejected("type", f"{what}: not a numeric array ({e})") from None


def _check_stamp(t_ns: int, now_ns, what: str) -> None:
    if now_ns is not None and t_ns - int(now_ns) > FUTURE_TOLERANCE_S * NS_PER_S:
        raise Rejected("stamp", f"{what}: stamp {t_ns / NS_PER_S:.3f} s is more than {FUTURE_TOLERANCE_S:g} s "
                       f"ahead of the clock ({int(now_ns) / NS_PER_S:.3f} s)")


def reference_window(m, now_ns: int | None = None) -> ReferenceWindow:
    """gato_msgs/EEReference -> ReferenceWindow, or :class:`Rejected`: ``n_knots`` in
    1..MAX_KNOTS with ``positions`` holding ``n_knots * 3`` finite values within MAX_POSITION_M,
    ``knot_dt`` finite in MIN_KNOT_DT_S..MAX_KNOT_DT_S, stamp not too far ahead of ``now_ns``;
    ``orientations`` (issue 30; absent in older messages, empty = position only) ``n_knots * 4``
    finite values, each knot a unit quaternion (x, y, z, w) within QUAT_UNIT_TOL."""
    n = int(m.n_knots)
    p = _array(m.positions, "EEReference.positions")
    if n < 1 or n > MAX_KNOTS or p.size != 3 * n:
        raise Rejected("shape", f"EEReference: positions holds {p.size} values, expected n_knots*3 = {3 * n} "
                       f"(1 <= n_knots <= {MAX_KNOTS})")
    if not np.all(np.isfinite(p)):
        raise Rejected("nonfinite", "EEReference.positions: contains NaN or Inf")
    if np.max(np.abs(p)) > MAX_POSITION_M:
        raise Rejected("range", f"EEReference.positions: a target {np.max(np.abs(p)):.3g} m from the world origin "
                       f"(limit {MAX_POSITION_M:g} m)")
    dt = float(m.knot_dt)
    if not math.isfinite(dt):
        raise Rejected("nonfinite", f"EEReference.knot_dt: {dt}")
    if not MIN_KNOT_DT_S <= dt <= MAX_KNOT_DT_S:
        raise Rejected("range", f"EEReference.knot_dt: {dt:g} s is outside [{MIN_KNOT_DT_S:g}, {MAX_KNOT_DT_S:g}] s")
    t = stamp_ns(m.header)
    _check_stamp(t, now_ns, "EEReference")
    o = _array(getattr(m, "orientations", []), "EEReference.orientations")
    if o.size and o.size != 4 * n:
        raise Rejected("shape", f"EEReference.orientations: holds {o.size} values, expected n_knots*4 = {4 * n} "
                       f"(unit quaternions x, y, z, w) or none")
    if not np.all(np.isfinite(o)):
        raise Rejected("nonfinite", "EEReference.orientations: contains NaN or Inf")
    if o.size:
        norm = np.linalg.norm(o.reshape(n, 4), axis=1)
        if np.any(np.abs(norm - 1.0) > QUAT_UNIT_TOL):
            k = int(np.argmax(np.abs(norm - 1.0)))
            raise Rejected("range", f"EEReference.orientations: quaternion {k} has norm {norm[k]:.6g}; expected unit "
                           f"quaternions (x, y, z, w), |norm - 1| <= {QUAT_UNIT_TOL:g}")
    return ReferenceWindow(stamp_ns=t, knot_dt=dt, positions=p.reshape(n, 3), frame_id=str(m.header.frame_id),
                           orientations=o.reshape(n, 4) if o.size else None)


def joint_state_arrays(m, now_ns: int | None = None):
    """sensor_msgs/JointState -> (stamp ns, names (n,), position (n,), velocity (n,), effort (n,)
    or (0,)), or :class:`Rejected`: distinct names, ``position`` and ``velocity`` one value per
    name, ``effort`` empty or one per name, a stamp not before the epoch nor too far ahead of
    ``now_ns``. Values are not judged here: which joints matter is the reader's
    (:func:`joint_vector`)."""
    names = [str(n) for n in m.name]
    pos, vel = _array(m.position, "JointState.position"), _array(m.velocity, "JointState.velocity")
    eff = _array(m.effort, "JointState.effort")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise Rejected("names", f"JointState.name: {dup} appear more than once")
    n = len(names)
    if pos.size != n or vel.size != n or eff.size not in (0, n):
        raise Rejected("names", f"JointState arrays do not match the names: {n} names, {pos.size} positions, "
                       f"{vel.size} velocities, {eff.size} efforts")
    t = stamp_ns(m.header)
    if t < 0:
        raise Rejected("stamp", f"JointState: stamp {t / NS_PER_S:.3f} s is before the clock's epoch")
    _check_stamp(t, now_ns, "JointState")
    return t, names, pos, vel, eff


def joint_vector(names, pos, vel, joints, bounds=None) -> np.ndarray:
    """(2 n,) [q; qd] of ``joints`` (n,) from a joint state's ``names`` / ``pos`` / ``vel``, or
    :class:`Rejected`: every joint present, finite, within ``bounds`` ((lo, hi) (2 n,), e.g.
    :func:`state_bounds` in the order of ``joints``; None: not checked)."""
    idx = {n: i for i, n in enumerate(names)}
    missing = [j for j in joints if j not in idx]
    if missing:
        raise Rejected("names", f"JointState: lacks the joints {missing}")
    sel = [idx[j] for j in joints]
    x = np.r_[np.asarray(pos, dtype=np.float64)[sel], np.asarray(vel, dtype=np.float64)[sel]]
    if not np.all(np.isfinite(x)):
        raise Rejected("nonfinite", "JointState: a position or velocity of a controlled joint is NaN or Inf")
    if bounds is not None:
        out = (x < bounds[0]) | (x > bounds[1])
        if np.any(out):
            k = int(np.argwhere(out)[0][0])
            raise Rejected("range", f"JointState: {'position' if k < len(joints) else 'velocity'} of "
                           f"{joints[k % len(joints)]} = {x[k]:.6g} is beyond the plausible "
                           f"[{bounds[0][k]:.4g}, {bounds[1][k]:.4g}]")
    return x


def wrench(m, now_ns: int | None = None) -> tuple[int, np.ndarray]:
    """geometry_msgs/WrenchStamped -> (stamp ns, (6,) [fx, fy, fz, tx, ty, tz] N, N*m), or
    :class:`Rejected`: finite, each component within MAX_WRENCH, stamp not too far ahead of
    ``now_ns``."""
    f, t = m.wrench.force, m.wrench.torque
    w = np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=np.float64)
    if not np.all(np.isfinite(w)):
        raise Rejected("nonfinite", f"WrenchStamped.wrench: contains NaN or Inf ({w.tolist()})")
    if np.max(np.abs(w)) > MAX_WRENCH:
        raise Rejected("range", f"WrenchStamped.wrench: a component of {np.max(np.abs(w)):.3g} (limit {MAX_WRENCH:g})")
    t = stamp_ns(m.header)
    _check_stamp(t, now_ns, "WrenchStamped")
    return t, w


def state_bounds(model, joints=None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) (nq + nv,) [rad, rad/s]: the plausible joint state [q; qd] of a pinocchio model:
    the URDF position limits widened by POSITION_SLACK_RAD, +-VELOCITY_FACTOR x the velocity
    limits; +-UNLIMITED where the URDF gives no finite limit. ``joints``: in the order of these
    (one-degree-of-freedom) joint names, (2 n,); None: the model's order."""
    lo_q = np.asarray(model.lowerPositionLimit, dtype=np.float64) - POSITION_SLACK_RAD
    hi_q = np.asarray(model.upperPositionLimit, dtype=np.float64) + POSITION_SLACK_RAD
    bad = ~np.isfinite(lo_q) | ~np.isfinite(hi_q) | (lo_q >= hi_q) | (np.abs(lo_q) > UNLIMITED) | \
        (np.abs(hi_q) > UNLIMITED)
    lo_q[bad], hi_q[bad] = -UNLIMITED, UNLIMITED
    v = VELOCITY_FACTOR * np.asarray(model.velocityLimit, dtype=np.float64)
    v[~np.isfinite(v) | (v <= 0) | (v > UNLIMITED)] = UNLIMITED
    if joints is not None:
        jq = [int(model.joints[model.getJointId(j)].idx_q) for j in joints]
        jv = [int(model.joints[model.getJointId(j)].idx_v) for j in joints]
        lo_q, hi_q, v = lo_q[jq], hi_q[jq], v[jv]
    return np.r_[lo_q, -v], np.r_[hi_q, v]


@dataclass
class Skips:
    """Counted, named notes on the messages a reader skipped.

    ``add(topic, kind, stamp_ns, text)`` per skipped message; ``counts`` {topic: {kind: n}};
    ``stamps`` {topic: the first :attr:`keep` stamps [ns]}; ``first`` {topic: the first reason};
    :meth:`notes` one line per topic; :meth:`as_dict` for a JSON summary."""

    keep: int = 20
    counts: dict = field(default_factory=dict)
    stamps: dict = field(default_factory=dict)
    first: dict = field(default_factory=dict)

    def add(self, topic: str, kind: str, stamp: int | None, text: str) -> None:
        self.counts.setdefault(topic, Counter())[kind] += 1
        st = self.stamps.setdefault(topic, [])
        if stamp is not None and len(st) < self.keep:
            st.append(int(stamp))
        self.first.setdefault(topic, text)

    def reject(self, topic: str, m, e: Exception) -> None:
        """Count message ``m`` (with a header, or not) skipped for ``e`` (a Rejected, or any error)."""
        try:
            stamp = stamp_ns(m.header)
        except (AttributeError, TypeError, ValueError):
            stamp = None
        self.add(topic, getattr(e, "kind", "type"), stamp, str(e))

    def total(self, topic: str | None = None) -> int:
        if topic is not None:
            return sum(self.counts.get(topic, {}).values())
        return sum(sum(c.values()) for c in self.counts.values())

    def __bool__(self) -> bool:
        return self.total() > 0

    def notes(self) -> list:
        out = []
        for topic in sorted(self.counts):
            c = self.counts[topic]
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(c.items()))
            st = self.stamps.get(topic, [])
            at = ", ".join(f"{s / NS_PER_S:.3f}" for s in st[:5]) + (", ..." if sum(c.values()) > 5 else "")
            out.append(f"{topic}: {sum(c.values())} message(s) skipped ({kinds}; stamps {at} s); the first: "
                       f"{self.first[topic]}")
        return out

    def as_dict(self) -> dict:
        return {t: {"count": int(sum(c.values())), "by_kind": dict(sorted(c.items())),
                    "stamps_ns": list(self.stamps.get(t, [])), "first_reason": self.first[t]}
                for t, c in sorted(self.counts.items())}
