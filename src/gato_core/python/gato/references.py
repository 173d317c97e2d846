"""``gato.references``, a path the reference API and older code import: the modules are
:mod:`gato.core.references` (position references, windows, rotations) and :mod:`gato.core.poses`
(pose references; docs/architecture.md); this file only re-exports them."""
from .core.references import (Figure8, GoalSequence, Hold, min_jerk, min_jerk_rate, MinJerkSegment, NS_PER_S,
                              ns_to_sec, orientations_of, quat_multiply, quat_to_rotvec, QUAT_UNIT_TOL, Reference,
                              ReferenceWindow, rotvec_to_quat, SampledTrajectory, sec_to_ns)  # noqa: F401
from .core.poses import PoseFigure8, PoseReference, TOOL_DOWN, tool_down  # noqa: F401
