"""``gato.policy``, a path the reference API and older code import: the module is
:mod:`gato.frontends.policy` (docs/architecture.md); this file only re-exports it."""
from .frontends.policy import (__all__, GoalReference, Hold, MPCPolicy, Reference,
                               SampledTrajectory, to_numpy, TrajectoryReference)  # noqa: F401
