"""Backend selection of :class:`gato.BSQP` (``backend=``) and CUDA device discovery.

- ``"cpu"`` (the default everywhere): the C++ CPU core, ``gato._core``.
- ``"cuda"``: the GPU batch, ``gato._cuda`` (built by scripts/setup.sh only where nvcc is
  found; docs/cuda.md). Raises RuntimeError with the reason where the module is not built
  or no CUDA device is usable.
- ``"cuda_host"``: the CUDA backend's numeric core (the very code the kernels run) run on
  the host, ``gato._cuda_host``: built with every core build (GATO_CORE_VARIANTS=ALL: the test
  set, the wheel; not in scripts/sim.sh's runtime-only build, where it raises RuntimeError); for tests and for checking the GPU path on a
  machine without a GPU. Slower than "cpu" (no vectorization); not for control loops.

The CUDA backend's first version solves without constraint row groups (set_row_groups
raises) and takes arms of at most ``max_bodies`` (8) joints.
"""
from __future__ import annotations

import importlib

import numpy as np

from .native import core as _core

BACKENDS = ("cpu", "cuda", "cuda_host")

__all__ = ["BACKENDS", "solver_class", "cuda_device", "check_backend"]


def check_backend(backend) -> str:
    """``backend`` if it names a backend; ValueError naming the choices otherwise."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    return backend


def cuda_device() -> tuple[bool, str]:
    """(True, device name) where gato._cuda is built and a CUDA device is usable, else
    (False, the reason: module not built / the CUDA error text)."""
    try:
        from .. import _cuda
    except ImportError as e:
        return False, f"gato._cuda is not built (no nvcc when gato_core was built: {e})"
    n, why = _cuda.device_count()
    if n < 1:
        return False, f"no CUDA device ({why})"
    return True, _cuda.device_name()


def solver_class(backend: str, dtype):
    """The solver class of ``backend`` for ``dtype`` (np.float64 or np.float32)."""
    check_backend(backend)
    wide = np.dtype(dtype) == np.float64
    if backend == "cpu":
        return _core.Solver64 if wide else _core.Solver32
    if backend == "cuda_host":
        try:
            _cuda_host = importlib.import_module("gato._cuda_host")
        except ModuleNotFoundError as e:
            if e.name != "gato._cuda_host":
                raise
            # A runtime-only install (GATO_CORE_VARIANTS=AVX2 / BASELINE: scripts/sim.sh's first
            # build) leaves out this tests' copy of the CUDA core.
            raise RuntimeError(
                "backend='cuda_host': gato._cuda_host is not built in this install (a runtime-only "
                "build, GATO_CORE_VARIANTS=AVX2 or BASELINE, has only the CPU core this machine runs); "
                "use backend='cpu', or build every variant: GATO_CORE_VARIANTS=ALL scripts/setup.sh "
                "(scripts/test.sh does)") from None
        return _cuda_host.HostSolver64 if wide else _cuda_host.HostSolver32
    ok, why = cuda_device()
    if not ok:
        raise RuntimeError(f"backend='cuda': {why}; use backend='cpu' (docs/cuda.md)")
    from .. import _cuda
    return _cuda.Solver64 if wide else _cuda.Solver32
