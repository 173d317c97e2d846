"""``gato.envs``, a path the reference API and older code import: the module is
:mod:`gato.frontends.envs` (docs/architecture.md); this file only re-exports it."""
from .frontends.envs import (__all__, all_robots, ArmTrackEnv, Reference, resolve_robot)  # noqa: F401
