"""The measured state [q; qd], checked once: :class:`MeasuredState`.

A state that enters at a boundary is checked once, by this class's constructor (the one
validator): shape (nx,), finite, and, when bounds are given, within a plausible range. The
core's entry points that take a measured state (:meth:`gato.MPCController.step` / ``reset`` /
``warmup``, :meth:`gato.BSQP.solve`, the OSC and sampling planners) take a MeasuredState as
it is, without a second check; any other array goes through the constructor there (a
ValueError naming the argument). The ROS controller builds one per joint state
(``gato_ros.controller_logic``), so a tick checks its state once (test/test_tick_path.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import to_numpy

__all__ = ["MeasuredState", "StateError", "state_vector"]


class StateError(ValueError):
    """A state refused by :class:`MeasuredState`. ``reason``: "shape", "nonfinite" (NaN / Inf)
    or "range" (beyond the bounds); ``index``: the first bad entry (None for "shape")."""

    def __init__(self, reason: str, index, text: str):
        super().__init__(text)
        self.reason, self.index = reason, index


@dataclass(frozen=True, init=False, eq=False)
class MeasuredState:
    """A checked state ``x`` (nx,) float64 [q; qd] [rad, rad/s], read-only.

    Args:
        x: (nx,) array (numpy, CPU torch, JAX); copied.
        nx: the expected size.
        name: the argument's name in the error messages.
        bounds: None, or (lo, hi), each (nx,): the plausible range, inclusive.

    Raises :class:`StateError` (a ValueError naming ``name``) on a wrong shape, a NaN / Inf, or
    an entry beyond ``bounds``. Every instance passed these checks when it was built (the array
    cannot be written), so the core's entry points do not check it again.
    """

    x: np.ndarray

    def __init__(self, x, nx: int, *, name: str = "x", bounds=None):
        arr = to_numpy(x, name, np.float64)
        if arr.shape != (nx,):
            raise StateError("shape", None, f"{name}: expected shape ({nx},) = [q; qd], got {tuple(arr.shape)}")
        finite = np.isfinite(arr)
        if not finite.all():
            bad = int(np.argwhere(~finite)[0][0])
            raise StateError("nonfinite", bad, f"{name}: contains NaN or Inf (first at index {bad})")
        if bounds is not None:
            lo, hi = bounds
            out = (arr < lo) | (arr > hi)
            if out.any():
                bad = int(np.argwhere(out)[0][0])
                raise StateError("range", bad, f"{name}: index {bad} = {arr[bad]:.6g} is beyond the plausible "
                                 f"[{lo[bad]:.4g}, {hi[bad]:.4g}]")
        arr.setflags(write=False)  # the check holds for the instance's life
        object.__setattr__(self, "x", arr)

    @property
    def nx(self) -> int:
        return int(self.x.shape[0])

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(state)``: the (read-only) array; a writable copy with ``copy=True`` or a dtype."""
        if dtype is None and not copy:
            return self.x
        return np.array(self.x, dtype=dtype, copy=True)


def state_vector(x, nx: int, name: str) -> np.ndarray:
    """(nx,) float64 read-only: ``x.x`` of a :class:`MeasuredState` of ``nx`` entries (checked when
    it was built), else ``MeasuredState(x, nx, name=name).x`` (a StateError naming ``name``)."""
    if type(x) is MeasuredState and x.x.shape == (nx,):
        return x.x
    return MeasuredState(x, nx, name=name).x
