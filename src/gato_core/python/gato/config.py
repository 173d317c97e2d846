"""``gato.config``, a path the reference API and older code import: the module is
:mod:`gato.core.config` (docs/architecture.md); this file only re-exports it."""
from .core.config import (DEFAULT_INTEGRATOR, DEFAULT_LINSYS, INTEGRATOR_MODES,
                          LINE_SEARCH_MODES, LINSYS_MODES, SolverParams)  # noqa: F401
