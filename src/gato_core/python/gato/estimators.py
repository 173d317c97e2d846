"""``gato.estimators``, a path the reference API and older code import: the estimators are
:mod:`gato.wrench.estimators` (with the identifier in :mod:`gato.wrench.identifier` and
:class:`PendulumSwingEstimator` in :mod:`gato.wrench.swing`;
docs/architecture.md); this file only re-exports them."""
from .wrench.estimators import (CEMForceEstimator, fibonacci_sphere, ForceEstimator,  # noqa: F401
                                random_rotation, trilaterate)
from .wrench.identifier import IdentifiedWrenchSampler, OneStepWrenchIdentifier  # noqa: F401
from .wrench.swing import PendulumSwingEstimator  # noqa: F401
