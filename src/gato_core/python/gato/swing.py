"""``gato.swing``, a path the reference API and older code import: the module is
:mod:`gato.wrench.swing` (docs/architecture.md); this file only re-exports it."""
from .wrench.swing import (__all__, HypothesisBatch, OneStepWrenchIdentifier,
                           PendulumSwingEstimator, planned_knots, SwingWrenchBatch, winning_plan)  # noqa: F401
