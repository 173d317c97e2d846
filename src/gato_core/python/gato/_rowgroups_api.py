"""``gato._rowgroups_api``, a path the reference API and older code import: the row groups are
:mod:`gato.core.rowgroups`, the collision rows :mod:`gato.core.collision_rows`
(docs/architecture.md); this file only re-exports them."""
from .core.collision_rows import COLLISION_DEFAULT_WEIGHT, CollisionRowAPI  # noqa: F401
from .core.rowgroups import (ADMM_LINSYS_MODES, MAX_ROW_GROUPS, MAX_ROWS_PER_GROUP,  # noqa: F401
                             MECH_DEFAULT_WEIGHT, RowGroupAPI)
