"""Robot preparation for the CPU backend: registry, URDF inertial normalization.

The reference (CUDA) stack generates per-robot CUDA headers and compiles a
solver module per (robot, N). The CPU backend reads the URDF at run time with
pinocchio, so preparing a robot here means checking and normalizing its URDF
and recording it; nothing is compiled per robot (docs/architecture.md,
"Robots: registry and per-host cache").
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .manifest import cache_dir, store_entry
from .registry import all_robots, sha256_file

__all__ = ["repo_root", "load_registry", "rotated_inertial_origins", "canonicalize_inertials", "codegen"]

#: Version of what :func:`codegen` writes; part of every codegen key.
GENERATOR_VERSION = 1

_HERE = Path(__file__).resolve().parent
_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def repo_root() -> Path:
    """The gato source checkout root (the folder holding ``src/gato_core/CMakeLists.txt``).

    Searched upwards from this package (editable installs) and from the current
    directory. Raises FileNotFoundError when neither lies inside a checkout (a
    wheel install used elsewhere): the CPU backend needs the checkout only to
    rebuild its C++ core, never to prepare a robot.
    """
    for start in (_HERE, Path.cwd().resolve()):
        for parent in (start, *start.parents):
            if (parent / "src" / "gato_core" / "CMakeLists.txt").is_file():
                return parent
    raise FileNotFoundError(f"no gato source checkout around {_HERE} or {Path.cwd()} "
                            "(looked for src/gato_core/CMakeLists.txt)")


def load_registry() -> dict:
    """Robot metadata registry: ``{name: {nq, nv, ee_frame, urdf, ...}}``.

    The shipped robots (``gato/robots/_registry.json``) merged with the ones registered
    in the per-host cache (:func:`gato.register_robot`; those win on a name
    clash). A fresh copy: editing it changes nothing on disk.
    """
    return {name: dict(meta) for name, meta in all_robots().items()}


def _parse_urdf(urdf_path) -> tuple[Path, ET.ElementTree]:
    path = Path(os.fspath(urdf_path))
    if not path.is_file():
        raise FileNotFoundError(f"urdf_path: file not found: {path}")
    try:
        tree = ET.parse(path, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    except ET.ParseError as e:
        raise ValueError(f"urdf_path: {path} is not well-formed XML ({e})") from e
    if tree.getroot().tag != "robot":
        raise ValueError(f"urdf_path: {path} is not a URDF (root element <{tree.getroot().tag}>, expected <robot>)")
    return path, tree


def _floats(text: str | None, n: int, what: str, path: Path) -> list[float]:
    vals = (text or " ".join(["0"] * n)).split()
    try:
        out = [float(v) for v in vals]
    except ValueError:
        out = []
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise ValueError(f"urdf_path: {path}: {what}={text!r} is not {n} finite numbers")
    return out


def rpy_matrix(rpy) -> np.ndarray:
    """URDF rotation of roll-pitch-yaw (rad): R = Rz(yaw) Ry(pitch) Rx(roll), (3, 3)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _rotated_inertials(path: Path, tree: ET.ElementTree):
    """(link name, <inertial>, <origin>, rpy) of every inertial whose origin rpy is non-zero."""
    out = []
    for link in tree.getroot().iter("link"):
        inertial = link.find("inertial")
        origin = inertial.find("origin") if inertial is not None else None
        if origin is None:
            continue
        rpy = _floats(origin.get("rpy"), 3, f"link {link.get('name')!r} inertial origin rpy", path)
        if any(v != 0.0 for v in rpy):
            out.append((link.get("name"), inertial, origin, rpy))
    return out


def rotated_inertial_origins(urdf_path) -> list[str]:
    """Names of the links whose ``<inertial><origin rpy>`` is non-zero, in file order.

    Such inertia tensors are expressed in a frame rotated from the link frame.
    pinocchio (and so the CPU backend) reads them directly; the list says which
    links :func:`canonicalize_inertials` would rewrite. Raises FileNotFoundError
    / ValueError naming the path for a missing file or a file that is not a URDF.
    """
    path, tree = _parse_urdf(urdf_path)
    return [name for name, *_ in _rotated_inertials(path, tree)]


def canonicalize_inertials(urdf_path, out_path) -> list[str]:
    """Write a copy of the URDF whose inertia tensors are expressed in the link frame.

    Every ``<inertial><origin rpy>`` becomes "0 0 0" and its tensor is rotated
    exactly, I_link = R I R^T with R = rpy_matrix(rpy) (kg m^2); the centre of
    mass ``xyz`` (m) and the mass are unchanged, so the rigid-body model is the
    same (pinocchio's dynamics agree to machine precision). Everything else in
    the file, comments included, is kept. ``out_path`` may equal ``urdf_path``.
    Returns the rewritten link names (empty when none was rotated; the copy is
    written anyway).
    """
    path, tree = _parse_urdf(urdf_path)
    rewritten = []
    for name, inertial, origin, rpy in _rotated_inertials(path, tree):
        inertia = inertial.find("inertia")
        if inertia is None:
            raise ValueError(f"urdf_path: {path}: link {name!r} has a rotated inertial origin but no <inertia>")
        try:
            ixx, ixy, ixz, iyy, iyz, izz = (float(inertia.get(k, "0")) for k in _INERTIA_KEYS)
        except ValueError as e:
            raise ValueError(f"urdf_path: {path}: link {name!r} <inertia> is not numeric ({e})") from e
        inertia_local = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        rot = rpy_matrix(rpy)
        inertia_link = rot @ inertia_local @ rot.T
        inertia_link = 0.5 * (inertia_link + inertia_link.T)  # exactly symmetric in the written file
        for key, (i, j) in zip(_INERTIA_KEYS, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))):
            inertia.set(key, repr(float(inertia_link[i, j])))  # repr: shortest exact round trip
        origin.set("rpy", "0 0 0")
        rewritten.append(name)
    out = Path(os.fspath(out_path))
    if out.parent and not out.parent.is_dir():
        raise FileNotFoundError(f"out_path: folder not found: {out.parent}")
    tmp = out.with_name(out.name + ".tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, out)  # atomic: out_path is never half written (and may be urdf_path itself)
    return rewritten


def check_collision_res(collision_res) -> None:
    """ValueError naming ``collision_res`` unless it is None or a finite sphere spacing > 0 [m]."""
    if collision_res is not None and (isinstance(collision_res, bool) or not isinstance(collision_res, (int, float))
                                      or not math.isfinite(collision_res) or collision_res <= 0):
        raise ValueError(f"collision_res: expected None or a sphere spacing > 0 m, got {collision_res!r}")


def _check_frames(model, urdf: Path, ee_frame: str, contact_frames) -> list[str]:
    if not isinstance(ee_frame, str) or not model.existFrame(ee_frame):
        raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {urdf}")
    if isinstance(contact_frames, (str, bytes)):
        raise ValueError(f"contact_frames: expected a list of URDF frame names or None, got the string "
                         f"{contact_frames!r}")
    frames = [ee_frame] if contact_frames is None else list(contact_frames)
    for f in frames:
        if not isinstance(f, str) or not model.existFrame(f):
            raise ValueError(f"contact_frames: frame {f!r} not found in {urdf}")
    return frames


def codegen(urdf_path, name, ee_frame="EE", algorithm_list=None, out_dir=None, register=True,
            collision_res=0.15, contact_frames=None, floating_base=False) -> dict:
    """Generate a robot's description for the CPU backend and register it; returns its metadata.

    Writes ``<out_dir>/<name>/``: ``<name>.urdf`` (the URDF with canonical
    inertials, :func:`canonicalize_inertials`; the model the solver loads) and
    ``description.json`` (nq, nv, joint names, position limits [rad or m],
    velocity limits [rad/s or m/s], effort limits [N m or N], ee_frame,
    contact_frames, the source URDF's sha256, the codegen key). ``out_dir``
    defaults to ``<cache>/robots/<codegen_key>`` (the key hashes the URDF bytes,
    the options and GENERATOR_VERSION). ``register=True`` records the robot in
    the per-host manifest, so ``gato.BSQP(urdf, ..., plant_type=name)`` works at
    once; the entry's ``urdf_path`` is the generated URDF.

    CPU backend: dynamics are pinocchio's, evaluated at run time, so there is no
    per-algorithm code to select (``algorithm_list`` None or "all"). ``collision_res``
    (m, default 0.15) spherizes the URDF's ``<collision>`` geometry (gato.spherize:
    a conservative cover, one sphere per ``collision_res`` slab of each moving link)
    into ``spheres.json`` beside the description: the COLLISION clearance rows'
    sphere set (BSQP.enable_collision); ``collision`` in the metadata says whether it
    was written (False, with ``collision_note`` in description.json, when the URDF has
    no collision geometry on a moving link or a mesh is missing). None writes no
    spheres. Fixed base only
    (``floating_base`` False).
    Raises ValueError naming the argument for any bad input.
    """
    import pinocchio as pin

    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected an identifier (module suffix), got {name!r}")
    if floating_base:
        raise ValueError("floating_base: the CPU backend supports fixed-base robots only")
    if out_dir is not None and not isinstance(out_dir, (str, os.PathLike)):
        raise ValueError(f"out_dir: expected a folder path or None, got {type(out_dir).__name__}")
    if not isinstance(register, (bool, np.bool_)):
        raise ValueError(f"register: expected True or False, got {register!r}")
    if algorithm_list not in (None, "all"):
        raise ValueError(f"algorithm_list: the CPU backend evaluates every algorithm with pinocchio at run "
                         f"time; only None or 'all' apply, got {algorithm_list!r}")
    check_collision_res(collision_res)
    src, _ = _parse_urdf(urdf_path)
    src = src.resolve()
    try:
        model = pin.buildModelFromUrdf(str(src))
    except Exception as e:  # pinocchio raises ValueError / RuntimeError on a broken URDF
        raise ValueError(f"urdf_path: {src} could not be loaded as a robot model ({e})") from e
    frames = _check_frames(model, src, ee_frame, contact_frames)
    digest = sha256_file(src)
    options = dict(ee_frame=ee_frame, contact_frames=frames, collision_res=collision_res,
                   floating_base=False, generator=GENERATOR_VERSION)
    key = hashlib.sha256(json.dumps(dict(urdf_sha256=digest, name=name, **options),
                                    sort_keys=True).encode()).hexdigest()[:16]
    root = Path(out_dir) if out_dir is not None else cache_dir() / "robots" / key
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    urdf_out = folder / f"{name}.urdf"
    rewritten = canonicalize_inertials(src, urdf_out)
    collision, collision_note = False, None
    if collision_res is not None:
        from .spherize import cached_spheres, write_spheres

        try:
            spheres = cached_spheres(src, collision_res)
        except ValueError as e:  # no collision geometry on a moving link, or a mesh not shipped
            collision_note = str(e)
        else:
            write_spheres(spheres, folder / "spheres.json")
            collision = True
    description = dict(name=name, nq=model.nq, nv=model.nv, joints=list(model.names)[1:],
                       q_min=model.lowerPositionLimit.tolist(), q_max=model.upperPositionLimit.tolist(),
                       v_max=model.velocityLimit.tolist(), tau_max=model.effortLimit.tolist(),
                       ee_frame=ee_frame, contact_frames=frames, collision_res=collision_res,
                       collision=collision, collision_note=collision_note,
                       source_urdf=str(src), urdf_sha256=digest, codegen_key=key,
                       canonicalized_links=rewritten, generator=GENERATOR_VERSION)
    tmp = folder / "description.json.tmp"
    tmp.write_text(json.dumps(description, indent=1))
    os.replace(tmp, folder / "description.json")
    meta = dict(nq=model.nq, nv=model.nv, ee_frame=ee_frame, urdf=urdf_out.name, urdf_path=str(urdf_out),
                description="", floating_base=False, urdf_sha256=digest, joints=description["joints"],
                contact_frames=frames, collision_res=collision_res, collision=collision,
                codegen_key=key, plant_dir=str(root),
                source_urdf=str(src))
    if register:
        store_entry(name, meta)
    return meta
