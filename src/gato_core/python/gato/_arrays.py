"""``gato._arrays``, a path the reference API and older code import: the module is
:mod:`gato.core.arrays` (docs/architecture.md); this file only re-exports it."""
from .core.arrays import (batch_array, from_numpy, kind_of, to_numpy, vector)  # noqa: F401
