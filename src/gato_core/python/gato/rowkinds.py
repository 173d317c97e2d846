"""``gato.rowkinds``, a path the reference API and older code import: the module is
:mod:`gato.core.rowkinds` (docs/architecture.md); this file only re-exports it."""
from .core.rowkinds import (__all__, ADMM, AL, BARRIER, BLOCK, COLLISION, CONTACT_POS, EE_TERMINAL,
                            is_vector_kind, KIND_NAMES, LIMIT_KINDS, LIN_U, MECH_IDS, MECH_NAMES,
                            Q_BOX, QD_BOX, TELEMETRY, U_BOX)  # noqa: F401
