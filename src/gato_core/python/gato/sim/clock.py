"""The simulation clock's arithmetic: substeps of a control period and the front ends' check of
their substep against it. Times in s."""
from __future__ import annotations

import math

from ..core.references import _positive

__all__ = ["EPS", "substeps_in", "check_substep"]

EPS = 1e-9  # absorbs float error in accumulated times and substep counts


def substeps_in(period: float, sim_dt: float) -> int:
    """Whole substeps of ``sim_dt`` in ``period`` (floor, at least one; float error absorbed:
    0.03 / 0.001 is 30)."""
    return max(int(math.floor(period / sim_dt + EPS)), 1)


def check_substep(sim_dt, period: float, period_name: str, *, name="sim_dt", whole=False) -> int:
    """Validate a front end's substep ``sim_dt`` [s] against the control period [s] it splits
    (named ``period_name``): finite, > 0, not longer than the period and, with ``whole``, a
    whole number of substeps per period. Returns :func:`substeps_in` of them. ValueError naming
    ``name``."""
    h = _positive(sim_dt, name, "s")
    if h > period * (1 + EPS):
        raise ValueError(f"{name}: {sim_dt!r} s is longer than the control period {period_name} = {period!r} s")
    if whole and abs(period / h - round(period / h)) > EPS:
        raise ValueError(f"{name}: {h:g} s does not divide the control period {period_name} = {period:g} s")
    return substeps_in(period, h)
