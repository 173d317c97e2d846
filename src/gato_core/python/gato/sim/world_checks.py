"""What both simulation worlds check and stamp: state and step arguments, the protocol stamp."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..robots.registry import sha256_file


# ----------------------------------------------------------------- validation
def _state_arg(x, name: str, n: int) -> np.ndarray:
    a = np.array(x, dtype=np.float64).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {np.shape(x)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or Inf ({a})")
    return a


def _check_dt(sim_dt, timestep) -> float:
    if isinstance(sim_dt, bool) or not isinstance(sim_dt, (int, float, np.floating)) \
            or not math.isfinite(sim_dt) or sim_dt <= 0:
        raise ValueError(f"sim_dt: expected a finite step > 0 s, got {sim_dt!r}")
    if timestep is not None and abs(float(sim_dt) - timestep) > 1e-12 * timestep:
        raise ValueError(f"sim_dt: {sim_dt!r} s does not match the world's timestep {timestep!r} s "
                         "(construct the world with timestep=sim_dt)")
    return float(sim_dt)


def _sha256(path) -> str:
    return sha256_file(path)


def _stamp(kind: str, urdf_path, mass_scale: dict, **fields) -> dict:
    """A world's protocol stamp: kind, URDF name and hash, ``fields``, and the mass scale only
    when there is one (so nominal stamps are unchanged)."""
    extra = dict(mass_scale=dict(mass_scale)) if mass_scale else {}
    return dict(kind=kind, urdf=Path(urdf_path).name, urdf_sha256=_sha256(urdf_path), **fields, **extra)
