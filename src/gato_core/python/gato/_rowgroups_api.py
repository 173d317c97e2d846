"""``gato._rowgroups_api``, a path the reference API and older code import: the module is
:mod:`gato.core.rowgroups` (docs/architecture.md); this file only re-exports it."""
from .core.rowgroups import (ADMM_LINSYS_MODES, batch_array, COLLISION_DEFAULT_WEIGHT,
                             MAX_ROW_GROUPS, MAX_ROWS_PER_GROUP, MECH_DEFAULT_WEIGHT, rk,
                             RowGroupAPI, to_numpy, vector)  # noqa: F401
