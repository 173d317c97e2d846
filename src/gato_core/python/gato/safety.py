"""``gato.safety``, a path the reference API and older code import: the module is
:mod:`gato.planners.safety` (docs/architecture.md); this file only re-exports it."""
from .planners.safety import (__all__, GravityHold, JointBrake, JointHold)  # noqa: F401
