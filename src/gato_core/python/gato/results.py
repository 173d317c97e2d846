"""``gato.results``, a path the reference API and older code import: the module is
:mod:`gato.core.results` (docs/architecture.md); this file only re-exports it."""
from .core.results import (from_numpy, kind_of, SolveResult, SolverStats, to_numpy)  # noqa: F401
