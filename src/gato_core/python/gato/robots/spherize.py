"""Collision spheres of a robot: the URDF's ``<collision>`` geometry covered by spheres.

The sphere set is the COLLISION row group's row set (one clearance row per sphere
and knot; docs/constraints.md, "Collision clearance rows"). Every sphere is fixed
in one link frame; the cover is conservative: every vertex of a link's meshes (and
every point of its primitive shapes) lies inside some sphere of that link.

Method: per link, the collision geometry is turned into points in the link frame
(STL mesh vertices; box / cylinder / sphere surfaces sampled at spacing
``h = res / 8``, whose spheres are then inflated by ``h`` so the whole surface is
covered); the points are cut into slabs of width ``res`` along their principal
axis, and each slab becomes one sphere centred at its bounding-box centre with the
radius of its farthest point. Links fixed to the world (no joint moves them) get no
spheres: their clearance cannot change, so a row there constrains nothing.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .manifest import cache_dir

#: Bump when the cover's method changes (part of the cache key).
SPHERIZER_VERSION = 1
#: Default sphere spacing [m] (gato.builder.codegen's collision_res).
DEFAULT_RES = 0.15


def read_stl(path: str | os.PathLike) -> np.ndarray:
    """Vertices (n, 3) of an STL file (binary or ASCII), in the file's units."""
    data = Path(path).read_bytes()
    if len(data) >= 84:
        n = int(np.frombuffer(data, dtype="<u4", count=1, offset=80)[0])
        if 84 + 50 * n == len(data):
            rec = np.dtype([("nrm", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
            tri = np.frombuffer(data, dtype=rec, count=n, offset=84)
            return tri["v"].reshape(-1, 3).astype(np.float64)
    text = data.decode("ascii", errors="replace")
    pts = [list(map(float, line.split()[1:4])) for line in text.splitlines() if line.strip().startswith("vertex")]
    if not pts:
        raise ValueError(f"urdf_path: mesh {path} has no vertices (not an STL file?)")
    return np.asarray(pts, dtype=np.float64)


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _floats(s: str | None, n: int, default: float) -> np.ndarray:
    if s is None:
        return np.full(n, default)
    v = np.array([float(t) for t in s.split()])
    return v if v.size == n else np.full(n, float(v[0]) if v.size == 1 else default)


def _mesh_file(urdf: Path, filename: str) -> Path:
    """The mesh a URDF names: relative to the URDF, file://, or package:// (searched upward)."""
    if filename.startswith("file://"):
        return Path(filename[7:])
    rel = filename[len("package://"):] if filename.startswith("package://") else filename
    cand = urdf.parent / rel
    if cand.is_file():
        return cand
    parts = Path(rel).parts
    for d in (urdf.parent, *urdf.parent.parents):
        for i in range(len(parts)):  # drop leading package / folder names one by one
            c = d.joinpath(*parts[i:])
            if c.is_file():
                return c
    raise ValueError(f"urdf_path: collision mesh {filename!r} of {urdf} not found")


def _sphere_pts(r: float, h: float) -> np.ndarray:
    n = max(8, int(math.ceil(4 * math.pi * r * r / (h * h))))
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    th = math.pi * (1 + 5 ** 0.5) * i
    return r * np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], axis=1)


def _primitive_points(geom: ET.Element, h: float) -> np.ndarray | None:
    """Surface samples (spacing <= h) of a box / cylinder / sphere / capsule, or None."""
    if (b := geom.find("box")) is not None:
        sx, sy, sz = _floats(b.get("size"), 3, 0.0) / 2
        axes = [np.linspace(-s, s, max(2, int(math.ceil(2 * s / h)) + 1)) for s in (sx, sy, sz)]
        g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
        on = np.isclose(np.abs(g), [sx, sy, sz]).any(axis=1)
        return g[on]
    if (c := geom.find("cylinder")) is not None or (c := geom.find("capsule")) is not None:
        r, L = float(c.get("radius")), float(c.get("length"))
        nt = max(8, int(math.ceil(2 * math.pi * r / h)))
        t = 2 * math.pi * np.arange(nt) / nt
        zs = np.linspace(-L / 2, L / 2, max(2, int(math.ceil(L / h)) + 1))
        rs = np.linspace(0, r, max(2, int(math.ceil(r / h)) + 1))
        side = [np.stack([r * np.cos(t), r * np.sin(t), np.full(nt, z)], 1) for z in zs]
        caps = [np.stack([q * np.cos(t), q * np.sin(t), np.full(nt, z)], 1) for z in (-L / 2, L / 2) for q in rs]
        pts = np.concatenate(side + caps)
        if c.tag == "capsule":
            s = _sphere_pts(r, h)
            pts = np.concatenate([pts, s + [0, 0, L / 2], s - [0, 0, L / 2]])
        return pts
    if (s := geom.find("sphere")) is not None:
        return _sphere_pts(float(s.get("radius")), h)
    return None


def link_points(urdf_path: str | os.PathLike, res: float) -> dict:
    """{link name: (points (n, 3) in the link frame [m], inflation [m])} of every link with
    collision geometry (meshes exact, inflation 0; primitives sampled, inflation = spacing)."""
    urdf = Path(urdf_path)
    root = ET.parse(urdf).getroot()
    h = res / 8
    out = {}
    for link in root.findall("link"):
        pts, infl = [], 0.0
        for col in link.findall("collision"):
            o = col.find("origin")
            R = _rpy(*_floats(o.get("rpy") if o is not None else None, 3, 0.0))
            t = _floats(o.get("xyz") if o is not None else None, 3, 0.0)
            geom = col.find("geometry")
            if geom is None:
                continue
            if (m := geom.find("mesh")) is not None:
                p = read_stl(_mesh_file(urdf, m.get("filename", ""))) * _floats(m.get("scale"), 3, 1.0)
            else:
                p = _primitive_points(geom, h)
                if p is None:
                    continue
                infl = h
            pts.append(p @ R.T + t)
        if pts:
            out[link.get("name")] = (np.unique(np.concatenate(pts), axis=0), infl)
    return out


def cover(points: np.ndarray, res: float, inflate: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Spheres (centres (m, 3), radii (m,)) containing every point: slabs of width ``res``
    along the principal axis, one bounding-box-centred sphere per non-empty slab."""
    c0 = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - c0, full_matrices=False)
    t = (points - c0) @ vt[0]
    n = max(1, int(math.ceil((t.max() - t.min()) / res - 1e-9)))
    edges = np.linspace(t.min(), t.max(), n + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, n - 1)
    centres, radii = [], []
    for s in range(n):
        p = points[idx == s]
        if not len(p):
            continue
        c = (p.min(axis=0) + p.max(axis=0)) / 2
        centres.append(c)
        radii.append(float(np.linalg.norm(p - c, axis=1).max()) * (1 + 1e-9) + 1e-9 + inflate)
    return np.asarray(centres), np.asarray(radii)


def moving_links(urdf_path: str | os.PathLike) -> set:
    """Links that some non-fixed joint moves (children of a movable joint, transitively)."""
    root = ET.parse(Path(urdf_path)).getroot()
    kids = {}
    for j in root.findall("joint"):
        kids.setdefault(j.find("parent").get("link"), []).append((j.find("child").get("link"), j.get("type")))
    moving, stack = set(), []
    for parent, lst in kids.items():
        for child, typ in lst:
            if typ != "fixed":
                stack.append(child)
    while stack:
        c = stack.pop()
        if c in moving:
            continue
        moving.add(c)
        stack.extend(ch for ch, _ in kids.get(c, []))
    return moving


def spherize(urdf_path: str | os.PathLike, res: float = 0.15) -> dict:
    """The collision sphere set of a URDF at spacing ``res`` [m]:
    {"links": [link name] * n, "centres": (n, 3) in the link frame [m], "radii": (n,) [m],
    "res": res}; spheres of links fixed to the world are left out (module docstring)."""
    if isinstance(res, bool) or not isinstance(res, (int, float)) or not math.isfinite(res) or res <= 0:
        raise ValueError(f"collision_res: expected a sphere spacing > 0 m, got {res!r}")
    moving = moving_links(urdf_path)
    links, centres, radii = [], [], []
    for name, (pts, infl) in link_points(urdf_path, float(res)).items():
        if name not in moving:
            continue
        c, r = cover(pts, float(res), infl)
        links += [name] * len(r)
        centres.append(c)
        radii.append(r)
    if not links:
        raise ValueError(f"urdf_path: {urdf_path} has no <collision> geometry on a moving link")
    return dict(links=links, centres=np.concatenate(centres), radii=np.concatenate(radii), res=float(res))


def cached_spheres(urdf_path: str | os.PathLike, res: float = 0.15, cache: Path | None = None) -> dict:
    """:func:`spherize`, memoized as ``<cache>/spheres/<key>.json`` (the key hashes the URDF
    bytes, its mesh files, ``res`` and SPHERIZER_VERSION)."""
    urdf = Path(urdf_path).resolve()
    h = hashlib.sha256(urdf.read_bytes())
    root = ET.parse(urdf).getroot()
    for m in root.iter("mesh"):
        try:
            h.update(_mesh_file(urdf, m.get("filename", "")).read_bytes())
        except ValueError:
            pass  # spherize reports the missing mesh
    h.update(json.dumps(dict(res=float(res), v=SPHERIZER_VERSION)).encode())
    path = (Path(cache) if cache is not None else cache_dir()) / "spheres" / f"{h.hexdigest()[:20]}.json"
    sp = load_spheres(path)
    if sp is None:
        sp = spherize(urdf, res)
        write_spheres(sp, path)
    return sp


def load_spheres(path: str | os.PathLike) -> dict | None:
    """A sphere set written by :func:`write_spheres`, or None when the file is missing or damaged."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())
        return dict(links=list(d["links"]), centres=np.asarray(d["centres"], dtype=np.float64).reshape(-1, 3),
                    radii=np.asarray(d["radii"], dtype=np.float64), res=float(d["res"]))
    except (ValueError, KeyError, TypeError):
        return None


def write_spheres(sp: dict, path: Path) -> None:
    """Write a sphere set as JSON (atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(dict(links=sp["links"], centres=sp["centres"].tolist(), radii=sp["radii"].tolist(),
                                   res=sp["res"])))
    os.replace(tmp, path)
