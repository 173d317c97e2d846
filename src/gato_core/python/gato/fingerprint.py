"""``gato.fingerprint``, a path the reference API and older code import: the module is
:mod:`gato.robots.fingerprint` (docs/architecture.md); this file only re-exports it."""
from .robots.fingerprint import (__all__, check, check_solver, DEFAULT_PATH, KIND_PREFIX, load,
                                 report, SCHEMA, solver_qdd_fn)  # noqa: F401
