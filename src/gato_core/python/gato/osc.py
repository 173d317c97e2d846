"""``gato.osc``, a path the reference API and older code import: the module is
:mod:`gato.planners.osc` (docs/architecture.md); this file only re-exports it."""
from .planners.osc import (__all__, ControllerOperationalSpace,
                           ControllerOperationalSpaceModelFree, FIELDS, IDENTITY_QUAT,
                           IDENTITY_TRANSFORM, OscInputs, OscOutputs)  # noqa: F401
