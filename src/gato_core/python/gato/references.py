"""``gato.references``, a path the reference API and older code import: the module is
:mod:`gato.core.references` (docs/architecture.md); this file only re-exports it."""
from .core.references import (__all__, Figure8, GoalSequence, Hold, min_jerk, min_jerk_rate,
                              MinJerkSegment, NS_PER_S, ns_to_sec, Reference, ReferenceWindow,
                              SampledTrajectory, sec_to_ns)  # noqa: F401
