"""``gato.common``, a path the reference API and older code import: the module is
:mod:`gato.robots.frames` (docs/architecture.md); this file only re-exports it."""
from .robots.frames import (world_wrench_to_joint_local)  # noqa: F401
