"""``gato.floating``: the floating-base plant of the C++ core; the module is
:mod:`gato.core.floating` (docs/architecture.md); this file only re-exports it."""
from .core.floating import FloatingPlant, __all__, for_robot  # noqa: F401
