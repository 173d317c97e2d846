"""Coarse planning scenes: :class:`CoarseConfig` and :func:`build_coarse_spec` (RoboKit's
``MjWarpSim.build_coarse_spec(spec, config)``, here also ``MjSim.build_coarse_spec``).

A coarse spec is a copy of a scene with cheaper geometry and physics for planning: contact pairs
that never come near dropped, fewer colliding geoms, lower contact dimensions, a longer step with
softened contacts, fewer solver iterations. Every field of :class:`CoarseConfig` defaults to
None (leave the scene's value). The reference documents the fields only through its example; the
meanings below are our reading of it (docs/sampling_reference.md, "Differences").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["CoarseConfig", "build_coarse_spec", "INTEGRATORS"]

#: ``CoarseConfig.integrator`` names -> mjtIntegrator member names.
INTEGRATORS = {"euler": "mjINT_EULER", "rk4": "mjINT_RK4", "implicit": "mjINT_IMPLICIT",
               "implicitfast": "mjINT_IMPLICITFAST"}


@dataclass
class CoarseConfig:
    """What :func:`build_coarse_spec` changes (None: unchanged).

    - ``qpos_ref`` (R, nq): configurations the plans pass through; an explicit contact ``<pair>``
      whose geoms stay farther apart than ``pair_distance`` + the pair's margin [m] in every row
      (``mj_geomDistance`` after ``mj_kinematics``) is dropped.
    - ``pair_distance`` [0.05 m]: that distance (gato's field; the reference names no threshold).
    - ``collide``: a regular expression; a geom whose key fully matches it keeps colliding, the
      others get contype = conaffinity = 0 and the pairs naming them are dropped. A geom's key is
      its name, or its body's name for an unnamed geom.
    - ``condim`` (1, 3, 4 or 6) for the geoms whose key fully matches ``condim_geoms`` (None: all).
    - ``timestep`` [s] > 0; ``pyramidal``: True the pyramidal friction cone, False the elliptic.
    - ``min_timeconst`` [s]: contact (geoms, pairs), joint-limit and equality solref time
      constants raised to at least this (direct stiffness solrefs, negative, are left alone);
      ``min_impedance_width`` [m]: their solimp width (solimp[2]) raised to at least this.
    - ``iterations``, ``ls_iterations`` (>= 1): the constraint solver's; ``integrator``:
      "euler", "rk4", "implicit" or "implicitfast".
    """

    qpos_ref: Optional[np.ndarray] = None
    pair_distance: float = 0.05
    collide: Optional[str] = None
    condim: Optional[int] = None
    condim_geoms: Optional[str] = None
    timestep: Optional[float] = None
    pyramidal: Optional[bool] = None
    min_timeconst: Optional[float] = None
    min_impedance_width: Optional[float] = None
    iterations: Optional[int] = None
    ls_iterations: Optional[int] = None
    integrator: Optional[str] = None

    def __post_init__(self):
        def pos(name, integer=False):
            v = getattr(self, name)
            if v is None:
                return
            ok = (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) if integer else \
                (isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) and np.isfinite(v))
            if not ok or v <= 0:
                raise ValueError(f"{name}: expected {'an integer >= 1' if integer else 'a finite number > 0'} "
                                 f"or None, got {v!r}")

        for f in ("timestep", "min_timeconst", "min_impedance_width"):
            pos(f)
        for f in ("iterations", "ls_iterations"):
            pos(f, integer=True)
        if isinstance(self.pair_distance, bool) or not isinstance(self.pair_distance, (int, float)) \
                or not np.isfinite(self.pair_distance) or self.pair_distance < 0:
            raise ValueError(f"pair_distance: expected a finite number >= 0 [m], got {self.pair_distance!r}")
        if self.condim is not None and self.condim not in (1, 3, 4, 6):
            raise ValueError(f"condim: expected 1, 3, 4 or 6, got {self.condim!r}")
        for f in ("collide", "condim_geoms"):
            v = getattr(self, f)
            if v is not None:
                try:
                    re.compile(v)
                except (re.error, TypeError) as e:
                    raise ValueError(f"{f}: not a regular expression ({e}): {v!r}") from None
        if self.condim_geoms is not None and self.condim is None:
            raise ValueError("condim_geoms: given without condim")
        if self.pyramidal is not None and not isinstance(self.pyramidal, bool):
            raise ValueError(f"pyramidal: expected None or a bool, got {self.pyramidal!r}")
        if self.integrator is not None and self.integrator not in INTEGRATORS:
            raise ValueError(f"integrator: expected one of {tuple(INTEGRATORS)} or None, got {self.integrator!r}")
        if self.qpos_ref is not None:
            q = np.asarray(self.qpos_ref, dtype=np.float64)
            if q.ndim == 1:
                q = q[None]
            if q.ndim != 2 or len(q) < 1 or not np.all(np.isfinite(q)):
                raise ValueError(f"qpos_ref: expected finite (R, nq) configurations, got shape {np.shape(self.qpos_ref)}")
            self.qpos_ref = q


def _key(geom) -> str:
    return geom.name if geom.name else (geom.parent.name or "")


def build_coarse_spec(spec, config: CoarseConfig):
    """A copy of ``spec`` (``mujoco.MjSpec``) with ``config``'s cheaper geometry and physics, e.g. for
    planning; ``spec`` itself is unchanged. ValueError names ``spec`` / ``config`` / a field."""
    import mujoco

    if not isinstance(spec, mujoco.MjSpec):
        raise ValueError(f"spec: expected a mujoco.MjSpec, got {type(spec).__name__}")
    if not isinstance(config, CoarseConfig):
        raise ValueError(f"config: expected a CoarseConfig, got {type(config).__name__}")
    out = spec.copy()
    geoms = list(out.geoms)
    drop_names = set()
    if config.collide is not None:
        rx = re.compile(config.collide)
        for g in geoms:
            if not rx.fullmatch(_key(g)):
                g.contype, g.conaffinity = 0, 0
                if g.name:
                    drop_names.add(g.name)
    if config.condim is not None:
        rx = re.compile(config.condim_geoms) if config.condim_geoms is not None else None
        for g in geoms:
            if rx is None or rx.fullmatch(_key(g)):
                g.condim = int(config.condim)
    pairs = list(out.pairs)
    doomed = [p for p in pairs if p.geomname1 in drop_names or p.geomname2 in drop_names]
    if config.qpos_ref is not None and pairs:
        doomed += [p for p in _far_pairs(out, config.qpos_ref, config.pair_distance) if p not in doomed]
    for p in doomed:
        out.delete(p)
    _soften(out, config)
    opt = out.option
    if config.timestep is not None:
        opt.timestep = float(config.timestep)
    if config.pyramidal is not None:
        opt.cone = int(mujoco.mjtCone.mjCONE_PYRAMIDAL if config.pyramidal else mujoco.mjtCone.mjCONE_ELLIPTIC)
    if config.iterations is not None:
        opt.iterations = int(config.iterations)
    if config.ls_iterations is not None:
        opt.ls_iterations = int(config.ls_iterations)
    if config.integrator is not None:
        opt.integrator = int(getattr(mujoco.mjtIntegrator, INTEGRATORS[config.integrator]))
    return out


def _far_pairs(spec, qpos_ref: np.ndarray, distance: float) -> list:
    """The spec's pairs whose geoms stay beyond distance + margin in every qpos_ref row."""
    import mujoco

    model = spec.copy().compile()
    if qpos_ref.shape[1] != model.nq:
        raise ValueError(f"qpos_ref: expected (R, {model.nq}) configurations of the scene, got {qpos_ref.shape}")
    d = mujoco.MjData(model)
    near = np.zeros(model.npair, dtype=bool)
    fromto = np.zeros(6)
    for q in qpos_ref:
        d.qpos[:] = q
        mujoco.mj_kinematics(model, d)
        for i in range(model.npair):
            g1, g2 = model.pair_geom1[i], model.pair_geom2[i]
            lim = distance + float(model.pair_margin[i])
            if mujoco.mj_geomDistance(model, d, g1, g2, lim + 1.0, fromto) <= lim:
                near[i] = True
    pairs = list(spec.pairs)  # compiled in the spec's order
    return [p for p, n in zip(pairs, near) if not n]


def _soften(spec, config: CoarseConfig) -> None:
    tc, width = config.min_timeconst, config.min_impedance_width
    if tc is None and width is None:
        return
    items = [(g, "solref", "solimp") for g in spec.geoms] + [(p, "solref", "solimp") for p in spec.pairs]
    items += [(j, "solref_limit", "solimp_limit") for j in spec.joints]
    items += [(e, "solref", "solimp") for e in spec.equalities]
    for obj, ref, imp in items:
        if tc is not None:
            r = np.array(getattr(obj, ref), dtype=np.float64)
            if r[0] > 0 and r[0] < tc:
                r[0] = tc
                setattr(obj, ref, r)
        if width is not None:
            s = np.array(getattr(obj, imp), dtype=np.float64)
            if s[2] < width:
                s[2] = width
                setattr(obj, imp, s)
