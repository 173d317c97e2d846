"""``gato.estimators``, a path the reference API and older code import: the estimators are
:mod:`gato.wrench.estimators` (with :class:`PendulumSwingEstimator` in :mod:`gato.wrench.swing`;
docs/architecture.md); this file only re-exports them."""
from .wrench.estimators import (CEMForceEstimator, fibonacci_sphere, ForceEstimator,  # noqa: F401
                                IdentifiedWrenchSampler, OneStepWrenchIdentifier, random_rotation,
                                trilaterate)
from .wrench.swing import PendulumSwingEstimator  # noqa: F401
