"""``gato.hypotheses``, a path the reference API and older code import: the batches are
:mod:`gato.wrench.hypotheses` (with :class:`SwingWrenchBatch` in :mod:`gato.wrench.swing_batch` and the
reference API's options in :mod:`gato.wrench.options`; docs/architecture.md); this file only
re-exports them."""
from .wrench.hypotheses import (ForceHypothesisBatch, HypothesisBatch, IdentifiedWrenchBatch,  # noqa: F401
                                planned_knots, winning_plan, world_wrench_to_gato_slot,
                                world_wrench_to_joint_local)
from .wrench.options import (ESTIMATORS, FE_CENTRE_RADIUS, FE_CENTRES, fe_centre, from_options,  # noqa: F401
                             substep_observers, wrench_id_options)
from .wrench.swing_batch import SwingWrenchBatch  # noqa: F401
