"""``gato.cuda_backend``, a path the reference API and older code import: the module is
:mod:`gato.core.cuda_backend` (docs/architecture.md); this file only re-exports it."""
from .core.cuda_backend import (__all__, BACKENDS, check_backend, cuda_device, solver_class)  # noqa: F401
