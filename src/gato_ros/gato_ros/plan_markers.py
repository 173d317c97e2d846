"""ROS-free markers of a :class:`gato_ros.plan_view.PlanView` for RViz (the node turns them into
one visualization_msgs/MarkerArray on ``~/markers``): what the MPC intends in one display.

Markers (namespace, id; positions in metres in the controller's base frame, one point per plan
knot; every marker replaces the one of the previous view with the same namespace and id):

- ``plan`` 0: the published plan's EE path (LINE_STRIP, green, 8 mm wide);
- ``plan_knots`` 0: its knots (SPHERE_LIST, green, 12 mm);
- ``reference`` 0: the reference window the tick solved toward (LINE_STRIP, blue, 5 mm), or a
  DELETE of it when the tick had none;
- ``batch`` b, b < R: with batch rows (one per hypothesis), row b's EE path (LINE_STRIP): the
  winning row orange and 8 mm wide, the others grey, translucent, 3 mm;
- ``target`` 0: the EE target, the reference's knot 0 (SPHERE, red, 30 mm), or a DELETE.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MarkerSpec", "plan_markers", "LINE_STRIP", "SPHERE", "SPHERE_LIST", "ADD", "DELETE"]

# visualization_msgs/Marker type and action constants (the message's values)
LINE_STRIP, SPHERE, SPHERE_LIST = 4, 2, 7
ADD, DELETE = 0, 2

GREEN = (0.1, 0.8, 0.2, 1.0)
BLUE = (0.2, 0.4, 1.0, 0.9)
ORANGE = (1.0, 0.5, 0.0, 1.0)
GREY = (0.6, 0.6, 0.6, 0.5)
RED = (1.0, 0.1, 0.1, 1.0)


@dataclass
class MarkerSpec:
    """One marker: ``points`` (K, 3) [m] (the centre for SPHERE), ``color`` RGBA in [0, 1],
    ``scale`` (3,) [m] (LINE_STRIP: x is the line width)."""

    ns: str
    id: int
    type: int
    action: int = ADD
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    color: tuple = (1.0, 1.0, 1.0, 1.0)
    scale: tuple = (1.0, 1.0, 1.0)


def plan_markers(view) -> list:
    """The markers of ``view`` (:class:`gato_ros.plan_view.PlanView`), in the order above."""
    ee = np.asarray(view.ee, dtype=np.float64)
    out = [MarkerSpec("plan", 0, LINE_STRIP, points=ee, color=GREEN, scale=(0.008, 0.0, 0.0)),
           MarkerSpec("plan_knots", 0, SPHERE_LIST, points=ee, color=GREEN, scale=(0.012, 0.012, 0.012))]
    ref = np.asarray(view.reference, dtype=np.float64).reshape(-1, 3)
    if len(ref):
        out.append(MarkerSpec("reference", 0, LINE_STRIP, points=ref, color=BLUE, scale=(0.005, 0.0, 0.0)))
    else:
        out.append(MarkerSpec("reference", 0, LINE_STRIP, action=DELETE))
    rows = np.asarray(view.rows, dtype=np.float64)
    if rows.shape[0] > 1:
        for b, row in enumerate(rows):
            win = b == int(view.best)
            out.append(MarkerSpec("batch", b, LINE_STRIP, points=row, color=ORANGE if win else GREY,
                                  scale=(0.008 if win else 0.003, 0.0, 0.0)))
    if len(ref):
        out.append(MarkerSpec("target", 0, SPHERE, points=ref[:1], color=RED, scale=(0.03, 0.03, 0.03)))
    else:
        out.append(MarkerSpec("target", 0, SPHERE, action=DELETE))
    return out
