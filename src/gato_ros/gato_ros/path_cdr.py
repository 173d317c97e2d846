"""nav_msgs/Path messages serialized directly (CDR, little endian) from an (N, 3) array of
positions, for the controller's plan paths: rclpy's conversion of a Python Path with 32 nested
PoseStamped objects cost about 0.3 ms to fill and 0.45 ms to publish on the 2-core machine here,
the controller tick's own time; writing the positions and stamps into a byte template costs tens
of microseconds (bench/bench_standard_io.py, docs/benchmarks_ros.md). The bytes go to
``Publisher.publish(bytes)`` (rclpy's raw publish); test_ros_outputs_logic deserializes them
with rclpy and compares every field.

Layout (XCDR1: a 4-byte encapsulation header, then the fields, each aligned to its size from the
payload start): Path = Header (int32 sec, uint32 nanosec, string frame_id) + uint32 count +
count x PoseStamped (Header, Point 3 x float64, Quaternion 4 x float64)."""
from __future__ import annotations

import struct

import numpy as np

__all__ = ["PathCDR"]


def _align(o: int, n: int) -> int:
    return (o + n - 1) // n * n


class PathCDR:
    """Bytes of a nav_msgs/Path of ``n`` poses in ``frame`` (every pose's frame too, orientation
    identity), the positions and stamps filled per call."""

    def __init__(self, frame: str, n: int):
        f = frame.encode() + b"\0"
        out = bytearray(b"\x00\x01\x00\x00")          # CDR little endian, no options
        self._stamps = []                              # payload offsets of each (sec, nanosec)
        self._pos = []                                 # payload offsets of each position (3 x f8)

        def put(fmt, align, *vals):
            o = _align(len(out) - 4, align)
            out.extend(b"\0" * (o - (len(out) - 4)))
            out.extend(struct.pack("<" + fmt, *vals))
            return o

        def header():
            self._stamps.append(put("iI", 4, 0, 0))
            put("I", 4, len(f))
            out.extend(f)

        header()
        put("I", 4, n)
        for _ in range(n):
            header()
            self._pos.append(put("ddd", 8, 0.0, 0.0, 0.0))
            put("dddd", 8, 0.0, 0.0, 0.0, 1.0)
        self._template = bytes(out)
        self.n = n

    def __call__(self, stamp_ns: int, knot_ns: int, pts) -> bytes:
        """The message: header stamp ``stamp_ns``, pose k at ``pts[k]`` [m] stamped
        ``stamp_ns + k * knot_ns``."""
        pts = np.asarray(pts, dtype=np.float64).reshape(self.n, 3)
        buf = bytearray(self._template)
        sec, ns = divmod(int(stamp_ns), 1_000_000_000)
        struct.pack_into("<iI", buf, 4 + self._stamps[0], sec, ns)
        for k, (so, po, p) in enumerate(zip(self._stamps[1:], self._pos, pts.tolist())):
            sec, ns = divmod(int(stamp_ns) + k * int(knot_ns), 1_000_000_000)
            struct.pack_into("<iI", buf, 4 + so, sec, ns)
            struct.pack_into("<ddd", buf, 4 + po, *p)
        return bytes(buf)
