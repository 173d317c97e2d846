"""``gato._native``, a path the reference API and older code import: the module is
:mod:`gato.core.native` (docs/architecture.md); this file only re-exports it."""
from .core.native import (core, cpu_has_avx2_fma, sys)  # noqa: F401
