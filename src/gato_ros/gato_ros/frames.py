"""ROS-free frame tree: the transforms of tf2's topics (/tf, /tf_static: tf2_msgs/TFMessage)
and the lookups the target interfaces need (a PoseStamped or TwistStamped in another frame
than the controller's base frame).

tf2's Python buffer (tf2_ros.Buffer) is not available to the nodes here (the ROS 2 overlay
carries tf2_ros for C++ only, the wheels have no tf2_ros_py), so the controller node keeps
this small tree from the same messages instead. What it does NOT do, by design: time
travel (every lookup uses the newest transform of each edge, as
``tf2_ros.Buffer.lookup_transform(target, source, Time())`` does) and a cache length (an edge
lives until it is replaced). A child frame has one parent (tf2's rule); a transform that
would give it another one replaces the edge and is counted (``reparented``).

Transforms map points of the child frame into the parent frame: p_parent = R p_child + t,
R from the unit quaternion (x, y, z, w) of geometry_msgs/Transform.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FrameTree", "quat_to_matrix", "urdf_root_link"]


def quat_to_matrix(q) -> np.ndarray:
    """(3, 3) rotation matrix of the quaternion ``q`` = (x, y, z, w); normalized first.
    ValueError for a non-finite or zero quaternion."""
    q = np.asarray(q, dtype=np.float64).reshape(4)
    n = float(np.linalg.norm(q))
    if not np.all(np.isfinite(q)) or n < 1e-9:
        raise ValueError(f"quaternion (x, y, z, w) = {q.tolist()} is not a rotation (non-finite or zero)")
    x, y, z, w = q / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


class FrameTree:
    """Edges child -> (parent, R (3, 3), t (3,)) from tf2 messages; lookups by chaining."""

    def __init__(self):
        self._edges: dict = {}
        self.reparented = 0
        self.rejected = 0          # transforms refused (non-finite, bad quaternion, a frame its own parent)

    def set_transform(self, parent: str, child: str, translation, rotation_xyzw) -> str | None:
        """Add / replace the edge ``parent`` -> ``child``. Returns why it was refused, or None."""
        parent, child = str(parent).lstrip("/"), str(child).lstrip("/")
        t = np.asarray(translation, dtype=np.float64).reshape(3)
        if not parent or not child or parent == child:
            self.rejected += 1
            return f"transform {parent!r} -> {child!r}: frame names must be non-empty and different"
        if not np.all(np.isfinite(t)):
            self.rejected += 1
            return f"transform {parent!r} -> {child!r}: non-finite translation {t.tolist()}"
        try:
            R = quat_to_matrix(rotation_xyzw)
        except ValueError as e:
            self.rejected += 1
            return f"transform {parent!r} -> {child!r}: {e}"
        old = self._edges.get(child)
        if old is not None and old[0] != parent:
            self.reparented += 1
        self._edges[child] = (parent, R, t)
        return None

    def frames(self) -> set:
        return set(self._edges) | {p for p, _, _ in self._edges.values()}

    def _to_root(self, frame: str):
        """(root, R, t): the transform root <- frame, or None when a cycle is found."""
        R, t = np.eye(3), np.zeros(3)
        seen = {frame}
        while frame in self._edges:
            parent, Rp, tp = self._edges[frame]
            R, t = Rp @ R, Rp @ t + tp
            frame = parent
            if frame in seen:
                return None
            seen.add(frame)
        return frame, R, t

    def lookup(self, target: str, source: str):
        """(R (3, 3), t (3,)) with p_target = R p_source + t, or None when ``source`` is not
        connected to ``target`` (unknown frame, another tree, a cycle)."""
        target, source = str(target).lstrip("/"), str(source).lstrip("/")
        if target == source:
            return np.eye(3), np.zeros(3)
        a, b = self._to_root(target), self._to_root(source)
        if a is None or b is None or a[0] != b[0]:
            return None
        (_, Ra, ta), (_, Rb, tb) = a, b
        # root <- target: p_root = Ra p_target + ta; root <- source likewise
        return Ra.T @ Rb, Ra.T @ (tb - ta)


def urdf_root_link(urdf_path) -> str:
    """The root link of a URDF file (the link that is no joint's child): the frame the
    controller's EE positions are in (pinocchio's world frame of a fixed-base model)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(str(urdf_path)).getroot()
    links = [e.get("name") for e in root.findall("link")]
    children = {c.get("link") for j in root.findall("joint") for c in j.findall("child")}
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise ValueError(f"{urdf_path}: expected one root link, found {roots}")
    return roots[0]
