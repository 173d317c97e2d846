"""``gato.floating``: the floating-base plant and its contact-force SQP of the C++ core; the
modules are :mod:`gato.core.floating` and :mod:`gato.core.floating_mpc` (docs/architecture.md);
this file only re-exports them."""
from .core.floating import FloatingPlant, for_robot  # noqa: F401
from .core.floating_mpc import FloatingMPC, FloatingSolveResult, FloatingSQP  # noqa: F401
