"""Ray casting in every world of an :class:`MjSim` (RoboKit's ``MjWarpSim.compute_rays``, on the CPU).

``compute_rays(render_context, **rays)`` takes ``mujoco_warp.rays``' arguments (pnt, vec,
geomgroup, flg_static, bodyexclude, dist, geomid, normal) and fills dist / geomid / normal for
each world and ray with MuJoCo's ``mj_ray`` at the world's current poses (its own model rows). A
Warp render context carries the BVH that the GPU casts through; MuJoCo's C ray test needs none,
so ``render_context`` (a ``mujoco_warp`` RenderContext or None) is accepted and not read: the
"refit to the current poses" is implicit, mj_ray reading the world's geom_xpos / geom_xmat.
"""
from __future__ import annotations

import numpy as np

__all__ = ["compute_rays"]

_NAMES = ("pnt", "vec", "geomgroup", "flg_static", "bodyexclude", "dist", "geomid", "normal")


def _host(x, name: str) -> np.ndarray:
    a = x.numpy() if hasattr(x, "numpy") and hasattr(x, "device") else x
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an array, got {type(x).__name__}") from None


def _write(out, values: np.ndarray, name: str) -> None:
    if hasattr(out, "assign") and hasattr(out, "device"):  # a Warp array (any device)
        out.assign(values.astype(np.float32 if "float" in str(out.dtype) or "vec" in str(out.dtype)
                                 else np.int32).reshape(out.numpy().shape))
    elif isinstance(out, np.ndarray) and out.flags.writeable:
        out[...] = values.reshape(out.shape)
    else:
        raise ValueError(f"{name}: expected a writable numpy or Warp array to fill")


def compute_rays(sim, render_context=None, **rays) -> None:
    """Cast ``rays`` (mujoco_warp.rays' arguments) in every world of ``sim``; see the module doc.

    pnt, vec: (1 or nworld, nray, 3) origins and directions (the distance is in units of |vec|);
    geomgroup: 6 values, -1 ignore the group mask (all -1: every group), 0 exclude, else include;
    flg_static: include static geoms; bodyexclude (nray,) body ids (-1: none); outputs dist
    (nworld, nray) (-1: no hit), geomid (nworld, nray) (-1: no hit), normal (nworld, nray, 3)
    (the surface normal at the hit, zeros where none)."""
    import mujoco

    unknown = sorted(set(rays) - set(_NAMES))
    if unknown:
        raise ValueError(f"rays: unknown argument(s) {unknown}; expected {_NAMES}")
    missing = [k for k in _NAMES if k not in rays]
    if missing:
        raise ValueError(f"rays: missing argument(s) {missing}")
    W = sim.nworld
    pnt, vec = _host(rays["pnt"], "pnt"), _host(rays["vec"], "vec")
    if pnt.ndim != 3 or pnt.shape[-1] != 3 or pnt.shape[0] not in (1, W):
        raise ValueError(f"pnt: expected (1 or {W}, nray, 3) points, got {pnt.shape}")
    nray = pnt.shape[1]
    if vec.shape not in ((1, nray, 3), (W, nray, 3)):
        raise ValueError(f"vec: expected (1 or {W}, {nray}, 3) directions, got {vec.shape}")
    gg = _host(rays["geomgroup"], "geomgroup").reshape(-1)
    if gg.shape != (6,):
        raise ValueError(f"geomgroup: expected 6 values, got {gg.shape}")
    group = None if np.all(gg == -1) else np.array([0 if g == 0 else 1 for g in gg], dtype=np.uint8)
    excl = _host(rays["bodyexclude"], "bodyexclude").astype(int).reshape(-1)
    if excl.shape not in ((1,), (nray,)):
        raise ValueError(f"bodyexclude: expected ({nray},) body ids, got {excl.shape}")
    excl = np.broadcast_to(excl, (nray,))
    static = bool(rays["flg_static"])
    dist, gid, nrm = np.full((W, nray), -1.0), np.full((W, nray), -1, dtype=np.int32), np.zeros((W, nray, 3))
    one, n3 = np.zeros(1, dtype=np.int32), np.zeros(3)
    for w, (m, d) in enumerate(zip(sim.models, sim.data)):
        P, V = pnt[w if len(pnt) == W else 0], vec[w if len(vec) == W else 0]
        for r in range(nray):
            x = mujoco.mj_ray(m, d, P[r], V[r], group, static, int(excl[r]), one, n3)
            if x >= 0:
                dist[w, r], gid[w, r], nrm[w, r] = x, one[0], n3
    for name, val in (("dist", dist), ("geomid", gid), ("normal", nrm)):
        _write(rays[name], val, name)
