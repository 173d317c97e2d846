"""``gato.swing``, a path the reference API and older code import: the module is
:mod:`gato.wrench.swing` with :mod:`gato.wrench.swing_batch` (docs/architecture.md); this file
only re-exports them."""
from .wrench.swing import (HypothesisBatch, OneStepWrenchIdentifier, PAYLOAD_MODELS,  # noqa: F401
                           PendulumSwingEstimator, planned_knots, winning_plan)
from .wrench.swing_batch import SwingWrenchBatch  # noqa: F401
