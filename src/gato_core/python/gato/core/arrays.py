"""Array kinds at the API boundary: numpy, torch (CPU) and JAX in, the same kind out.

The solver works on host numpy arrays; inputs are copied in (the caller's
array is never modified) and results are handed back in the caller's kind.
"""
from __future__ import annotations

import numpy as np


def kind_of(a) -> str:
    mod = type(a).__module__
    if mod.startswith("torch"):
        return "torch"
    if mod.startswith("jax") or mod.startswith("jaxlib"):
        return "jax"
    return "numpy"


def flag(v, name: str) -> bool:
    """``v`` as a bool; ValueError naming ``name`` for anything but True / False (a string such as
    "no" would otherwise read as True)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise ValueError(f"{name}: expected True or False, got {v!r}")


def to_numpy(a, name: str, dtype) -> np.ndarray:
    """A fresh C-contiguous numpy copy of ``a`` in ``dtype``; ValueError naming ``name`` otherwise."""
    kind = kind_of(a)
    try:
        if kind == "torch":
            if getattr(a, "is_cuda", False):
                raise ValueError(f"{name}: CUDA tensors need the CUDA backend; this solver runs on the CPU "
                                 "(move the tensor with .cpu())")
            a = a.detach().cpu().numpy()
        out = np.array(a, dtype=dtype, copy=True, order="C")
    except (TypeError, ValueError) as e:
        if str(e).startswith(name + ":"):
            raise
        raise ValueError(f"{name}: expected a numeric array, got {type(a).__name__} ({e})") from None
    return out


def from_numpy(a: np.ndarray, kind: str):
    if kind == "torch":
        import torch

        return torch.from_numpy(a)
    if kind == "jax":
        import jax.numpy as jnp

        return jnp.asarray(a)
    return a


def batch_array(a, name: str, B: int, width: int, dtype, *, broadcast: bool = True) -> np.ndarray:
    """(B, width) copy of ``a``; a (width,) vector broadcasts to every batch entry.

    Raises ValueError naming the argument and the expected shape on a wrong
    shape or a non-finite entry.
    """
    arr = to_numpy(a, name, dtype)
    if arr.ndim == 1 and broadcast and arr.shape[0] == width:
        arr = np.repeat(arr[None, :], B, axis=0)
    if arr.shape != (B, width):
        raise ValueError(f"{name}: expected shape ({B}, {width})" + (f" or ({width},)" if broadcast else "")
                         + f", got {tuple(arr.shape)}")
    if not np.isfinite(arr).all():  # (the method: half the cost of np.all per solve)
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name}: contains NaN or Inf (first at index {tuple(int(i) for i in bad)})")
    return arr


def vector(a, name: str, n: int, dtype=np.float64, *, allow_scalar: bool = False) -> np.ndarray:
    """(n,) finite float vector (a scalar broadcasts when allow_scalar)."""
    arr = to_numpy(a, name, dtype)
    if allow_scalar and arr.ndim == 0:
        arr = np.full(n, float(arr), dtype=dtype)
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},)" + (" or a scalar" if allow_scalar else "")
                         + f", got {tuple(arr.shape)}")
    if not np.isfinite(arr).all():  # (the method: half the cost of np.all per solve)
        raise ValueError(f"{name}: contains NaN or Inf")
    return arr
