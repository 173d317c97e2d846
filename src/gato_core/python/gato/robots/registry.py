"""The robot registry: names, end-effector frames and URDF locations.

``_registry.json`` (next to this file) lists the shipped robots. A URDF is
looked up, in order, in ``$GATO_DESCRIPTION_DIR``, the ``gato_description``
package of a sourced ROS workspace (ament index), the source checkout around
this package (``src/gato_description/robots``, with meshes) and the copies
bundled in the wheel (``gato/robots/urdf/``, URDF only: enough for dynamics).
Robots added with :func:`gato.register_robot` live in the per-user cache.
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from .manifest import load_manifest

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def shipped_registry() -> dict:
    with open(_HERE / "_registry.json") as f:
        return json.load(f)


def _description_roots() -> list[Path]:
    roots = []
    env = os.environ.get("GATO_DESCRIPTION_DIR")
    if env:
        roots.append(Path(env))
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(Path(prefix) / "share" / "gato_description" / "robots")
    # A source checkout: walk up from this file (editable installs) and the cwd.
    for start in (_HERE, Path.cwd()):
        for parent in [start, *start.parents]:
            cand = parent / "src" / "gato_description" / "robots"
            if cand.is_dir():
                roots.append(cand)
                break
    roots.append(_HERE / "urdf")
    return roots


def find_urdf(description: str, urdf: str) -> Path | None:
    """First existing ``<root>/<description>/<urdf>`` (or ``<root>/<urdf>`` for the bundled copies)."""
    for root in _description_roots():
        for cand in (root / description / urdf, root / urdf):
            if cand.is_file():
                return cand
    return None


def sha256_file(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def all_robots() -> dict:
    """Shipped robots merged with the user-registered ones (user entries win)."""
    reg = dict(shipped_registry())
    reg.update(load_manifest())
    return reg


def detect_plant(model_path: str | os.PathLike) -> str | None:
    """Registered name of the robot whose URDF has these bytes (then: this file stem), or None."""
    digest = sha256_file(model_path)
    reg = all_robots()
    for name, meta in reg.items():
        if meta.get("urdf_sha256") == digest:
            return name
    stem = Path(model_path).stem
    for name, meta in reg.items():
        if Path(meta.get("urdf", "")).stem == stem:
            return name
    return None


def robot_info(plant_type: str) -> dict:
    """Registry metadata of a plant ({nq, nv, ee_frame, urdf, floating_base, ...}), or {} if unregistered."""
    meta = all_robots().get(plant_type)
    if not meta:
        return {}
    out = dict(meta)
    path = robot_urdf(plant_type)
    out["urdf"] = str(path) if path else meta.get("urdf")
    out.setdefault("contact_frames", [meta["ee_frame"]])
    # COLLISION rows: the shipped robots are spherized at run time at the default collision_res
    # (gato.spherize); a codegen'd robot records whether its spheres.json was written.
    out.setdefault("collision_res", 0.15)
    out.setdefault("collision", out["collision_res"] is not None)
    out.setdefault("codegen_key", meta.get("urdf_sha256", "")[:16])
    return out


def robot_urdf(plant_type: str) -> Path:
    """Absolute path of a registered robot's URDF (the checkout's copy with meshes when present)."""
    meta = all_robots().get(plant_type)
    if not meta:
        raise ValueError(f"plant_type: unknown robot {plant_type!r}; registered: {sorted(all_robots())}")
    if meta.get("urdf_path"):
        return Path(meta["urdf_path"])
    path = find_urdf(meta["description"], meta["urdf"])
    if path is None:
        raise FileNotFoundError(f"URDF {meta['urdf']} of {plant_type!r} not found; set GATO_DESCRIPTION_DIR "
                                "to the gato_description/robots folder")
    return path.resolve()


def resolve_robot(robot, ee_frame=None) -> tuple:
    """(URDF path (str), plant name or None, EE frame) of a registered plant name or a URDF path.

    ``ee_frame`` None: the plant's registered EE frame, else "EE". Raises ValueError naming
    ``robot`` when it is neither a registered plant nor an existing file."""
    if not isinstance(robot, (str, os.PathLike)):
        raise ValueError(f"robot: expected a registered plant name or a URDF path, got {type(robot).__name__}")
    name = os.fspath(robot)
    reg = all_robots()
    if name in reg:
        plant, urdf = name, str(robot_urdf(name))
    else:
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"robot: {name!r} is neither a registered plant ({sorted(reg)}) "
                             "nor an existing URDF file")
        urdf = str(path.resolve())
        plant = detect_plant(urdf)
    if ee_frame is None:
        ee_frame = reg.get(plant or "", {}).get("ee_frame", "EE")
    return urdf, plant, ee_frame
