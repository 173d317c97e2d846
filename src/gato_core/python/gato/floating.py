"""``gato.floating``: the floating-base plant and its contact-force SQP of the C++ core; the
modules are :mod:`gato.core.floating`, :mod:`gato.core.floating_mpc`, :mod:`gato.core.floating_bsqp`
(the reference's fc surface) and :mod:`gato.planners.floating_controller` (docs/architecture.md);
this file only re-exports them."""
from .core.floating import FloatingPlant, for_robot  # noqa: F401
from .core.floating_mpc import FloatingMPC, FloatingSolveResult, FloatingSQP  # noqa: F401
from .core.floating_bsqp import FloatingBSQP, FloatingBSQPResult  # noqa: F401
from .planners.floating_controller import FloatingController  # noqa: F401
