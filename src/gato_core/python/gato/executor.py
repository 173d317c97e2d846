"""``gato.executor``, a path the reference API and older code import: the module is
:mod:`gato.core.executor` (docs/architecture.md); this file only re-exports it."""
from .core.executor import (__all__, INTEGRATORS, plan_executor, robot_info, robot_urdf)  # noqa: F401
