"""Per-user cache of registered robots (``$GATO_CACHE_DIR`` or ``~/.cache/gato``).

``manifest.json`` maps a robot name to its entry (URDF path and sha256, EE
frame, sizes). The CPU backend needs no compiled per-robot module: a
registered robot is usable by ``gato.BSQP(urdf, ..., plant_type=name)`` at
once.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def cache_dir() -> Path:
    env = os.environ.get("GATO_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gato"


def load_manifest(cache: Path | None = None) -> dict:
    path = Path(cache or cache_dir()) / "manifest.json"
    if not path.is_file():
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise RuntimeError(f"gato cache manifest {path} is unreadable ({e}); delete it to start afresh") from e
    return data if isinstance(data, dict) else {}


def robot_entry(name: str, cache: Path | None = None) -> dict | None:
    return load_manifest(cache).get(name)


def register_robot(name: str, urdf_path: str | os.PathLike, *, ee_frame: str = "EE",
                   floating_base: bool = False, cache_dir_override: Path | None = None,
                   force: bool = False, **_ignored) -> dict:
    """Record a robot (URDF + EE frame) in the cache manifest; returns its entry.

    The URDF is loaded once to check it (fixed base, the EE frame exists).
    Re-registering a name with a different URDF needs ``force=True``.
    """
    import pinocchio as pin

    from .robots import sha256_file

    urdf = Path(urdf_path).resolve()
    if not urdf.is_file():
        raise ValueError(f"urdf_path: file not found: {urdf}")
    if floating_base:
        raise ValueError("floating_base: the CPU backend supports fixed-base robots only")
    model = pin.buildModelFromUrdf(str(urdf))
    if not model.existFrame(ee_frame):
        raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {urdf}")
    cache = Path(cache_dir_override or cache_dir())
    manifest = load_manifest(cache)
    digest = sha256_file(urdf)
    old = manifest.get(name)
    if old and old.get("urdf_sha256") != digest and not force:
        raise ValueError(f"name: robot {name!r} is already registered with another URDF "
                         f"({old.get('urdf_path')}); pass force=True to replace it")
    entry = dict(nq=model.nq, nv=model.nv, ee_frame=ee_frame, urdf=urdf.name, urdf_path=str(urdf),
                 description="", floating_base=False, urdf_sha256=digest,
                 joints=list(model.names)[1:])
    manifest[name] = entry
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / "manifest.json.tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, cache / "manifest.json")  # atomic: a crash never leaves half a manifest
    return entry
