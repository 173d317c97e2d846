"""The per-user robot manifest: where gato's cache lives and which robots are registered there.

``$GATO_CACHE_DIR`` or ``$XDG_CACHE_HOME/gato`` (``~/.cache/gato``); ``manifest.json`` maps a
robot name to its entry (URDF path and sha256, EE frame, sizes). :func:`gato.register_robot`
(:mod:`gato.core.cache`) and :func:`gato.robots.builder.codegen` write it, the registry
(:func:`gato.robots.registry.all_robots`) reads it.
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


def store_entry(name: str, entry: dict, cache: Path | None = None) -> dict:
    """Write ``entry`` under ``name`` into the cache manifest (atomically); returns it."""
    cache = Path(cache or cache_dir())
    manifest = load_manifest(cache)
    manifest[name] = entry
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / "manifest.json.tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, cache / "manifest.json")  # atomic: a crash never leaves half a manifest
    return entry
