"""StateTask's contact terms (cost-only: the sampler sees them, the iLQR does not).

- penetration: ``penetration_groups = (geoms_a, geoms_b)`` (names or ids): per row,
  ``penetration_scale * sum over pairs (a, b) of max(margin - dist(a, b), 0)`` [m], dist the
  signed distance MuJoCo's ``distance`` sensor reports (negative: penetration), so geoms closer
  than ``margin`` cost in proportion to how far inside it they are.
- missing contacts: ``contacts = [(geoms_a, geoms_b, wanted (T,), weight), ...]``: per row k,
  ``weight * wanted[k] * max(min over pairs dist(a, b) - margin, 0)``: a wanted contact that is
  not made costs its gap [m] (wanted indexed at the row's state step, past its end: the last row).

The distances come from ``distance`` sensors ``sampling/dist/<a>|<b>`` the term adds to the
planner's ``MjSpec`` (cutoff :data:`CUTOFF` m: gaps beyond it count as CUTOFF).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ContactTerms", "CUTOFF"]

CUTOFF = 1.0  # [m] distance sensors' cutoff
_PREFIX = "sampling/dist/"


def _geoms(g, what: str) -> list:
    arr = [g] if isinstance(g, (str, int, np.integer)) else list(np.asarray(g, dtype=object).reshape(-1))
    if not arr:
        raise ValueError(f"{what}: expected geom names or ids, got an empty group")
    for x in arr:
        if not isinstance(x, (str, int, np.integer)) or isinstance(x, bool):
            raise ValueError(f"{what}: expected geom names or ids, got {x!r}")
    return [x if isinstance(x, str) else int(x) for x in arr]


class ContactTerms:
    """The checked contact settings of one StateTask (module docstring); empty when none are set."""

    def __init__(self, penetration_groups, penetration_scale: float, margin: float, contacts):
        for n, v in (("penetration_scale", penetration_scale), ("margin", margin)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(float(v)) or float(v) < 0:
                raise ValueError(f"{n}: expected a finite number >= 0, got {v!r}")
        self.scale, self.margin = float(penetration_scale), float(margin)
        self.pen = None
        if penetration_groups is not None:
            if not isinstance(penetration_groups, (tuple, list)) or len(penetration_groups) != 2:
                raise ValueError(f"penetration_groups: expected (geoms_a, geoms_b), got {penetration_groups!r}")
            self.pen = (_geoms(penetration_groups[0], "penetration_groups[0]"),
                        _geoms(penetration_groups[1], "penetration_groups[1]"))
        if isinstance(contacts, tuple) and len(contacts) == 4 and not isinstance(contacts[0], tuple):
            contacts = [contacts]   # one (a, b, wanted, weight) given bare
        self.wanted = []
        for i, c in enumerate(contacts or ()):
            if not isinstance(c, (tuple, list)) or len(c) != 4:
                raise ValueError(f"contacts[{i}]: expected (geoms_a, geoms_b, wanted (T,), weight), got {c!r}")
            w = np.asarray(c[2], dtype=np.float64).reshape(-1)
            if w.size == 0 or not np.all(np.isfinite(w)):
                raise ValueError(f"contacts[{i}]: wanted must be a finite (T,) array, got {c[2]!r}")
            weight = float(c[3])
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"contacts[{i}]: weight must be a finite number >= 0, got {c[3]!r}")
            self.wanted.append((_geoms(c[0], f"contacts[{i}][0]"), _geoms(c[1], f"contacts[{i}][1]"), w, weight))

    def __bool__(self) -> bool:
        return (self.pen is not None and self.scale > 0) or bool(self.wanted)

    def _pairs(self):
        out = []
        if self.pen is not None and self.scale > 0:
            out += [(a, b) for a in self.pen[0] for b in self.pen[1]]
        for a_s, b_s, _, _ in self.wanted:
            out += [(a, b) for a in a_s for b in b_s]
        return out

    @staticmethod
    def _name(spec_or_model, g) -> str:
        if isinstance(g, str):
            return g
        if spec_or_model is None:
            raise ValueError(f"geoms: a geom id ({g}) needs a compiled model; pass the geom's name")
        return spec_or_model.geom(int(g)).name

    def require(self, spec) -> None:
        """Add the distance sensors of every pair to ``spec`` (geoms by name)."""
        import mujoco

        have = {s.name for s in spec.sensors}
        for a, b in self._pairs():
            a, b = self._name(None, a), self._name(None, b)
            name = f"{_PREFIX}{a}|{b}"
            if name in have:
                continue
            for g in (a, b):
                if spec.geom(g) is None:
                    raise ValueError(f"geoms: {g!r} is not a named geom of the scene")
            spec.add_sensor(name=name, type=mujoco.mjtSensor.mjSENS_GEOMDIST, objtype=mujoco.mjtObj.mjOBJ_GEOM,
                            objname=a, reftype=mujoco.mjtObj.mjOBJ_GEOM, refname=b, cutoff=CUTOFF)
            have.add(name)

    def bind(self, model, layout: dict) -> None:
        """Sensor addresses of every pair (ValueError when the compiled model lacks one)."""
        self._adr = {}
        for a, b in self._pairs():
            name = f"{_PREFIX}{self._name(model, a)}|{self._name(model, b)}"
            if name not in layout:
                raise ValueError(f"contacts: sensor {name!r} not in the planning model; pass an MjSpec scene so "
                                 "the planner can add it, or add the distance sensor to the MJCF")
            self._adr[(a, b)] = layout[name][0]

    def cost(self, sensordata: np.ndarray, clock: np.ndarray, ref_offset: int) -> np.ndarray:
        """(W, T) contact cost of rollouts' sensordata (W, T, nsensordata) at state steps clock (T,)."""
        total = np.zeros(sensordata.shape[:2])
        if self.pen is not None and self.scale > 0:
            for a in self.pen[0]:
                for b in self.pen[1]:
                    total += self.scale * np.maximum(self.margin - sensordata[..., self._adr[(a, b)]], 0.0)
        for a_s, b_s, wanted, weight in self.wanted:
            d = np.min(np.stack([sensordata[..., self._adr[(a, b)]] for a in a_s for b in b_s]), axis=0)
            w = wanted[np.clip(clock - ref_offset, 0, len(wanted) - 1)][None]
            total += weight * w * np.maximum(d - self.margin, 0.0)
        return total
