"""Per-user cache of registered robots (``$GATO_CACHE_DIR`` or ``~/.cache/gato``).

``manifest.json`` maps a robot name to its entry (URDF path and sha256, EE
frame, sizes). The CPU backend needs no compiled per-robot module: a
registered robot is usable by ``gato.BSQP(urdf, ..., plant_type=name)`` at
once.

Module identity (:func:`module_key`): the reference stack compiles one CUDA
module per (robot, N, variant) and caches it under a content key. The CPU
backend compiles one core (``gato._core``) for every robot and N, so here the
key names what a solver configuration runs on: the robot's URDF bytes and
options, N, variant, the content of the native sources (:func:`native_root`)
and the toolchain (:func:`toolchain_identity`). Any change to one of them
gives another key; unchanged inputs give the same key.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
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


# --- toolchain and native-source identity -------------------------------------------------

def _run_first_line(cmd: list[str], last: bool = False) -> str | None:
    """First (or last) non-empty output line of ``cmd``, None when it is missing or fails."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or not lines:
        return None
    return lines[-1] if last else lines[0]


def detect_arch() -> str | None:
    """CUDA architecture of the first GPU as CMake wants it ("90" for compute capability
    9.0), from ``nvidia-smi --query-gpu=compute_cap``; None without a GPU or nvidia-smi."""
    line = _run_first_line(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    if line is None:
        return None
    major, dot, minor = line.partition(".")
    if not (major.isdigit() and (not dot or minor.isdigit())):
        return None
    return major + (minor if dot else "0")


@functools.lru_cache(maxsize=None)
def toolchain_identity(arch: str | None) -> dict:
    """Everything outside the sources that shapes a binary (memoized per process).

    ``{arch, cxx, nvcc, python_abi, pybind11, pinocchio}``: ``arch`` as given
    (CUDA architecture, None on the CPU backend); ``cxx`` the first line of
    ``$CXX --version`` (default ``c++``); ``nvcc`` the last line of
    ``nvcc --version`` or None; ``python_abi`` the interpreter tag and
    extension suffix; ``pybind11`` / ``pinocchio`` their versions (None when not
    importable).
    """
    def version(mod):
        try:
            return __import__(mod).__version__
        except ImportError:
            return None

    cxx = os.environ.get("CXX") or "c++"
    return dict(arch=arch, cxx=_run_first_line([cxx, "--version"]),
                nvcc=_run_first_line(["nvcc", "--version"], last=True),
                python_abi=f"{sys.implementation.cache_tag}{sysconfig.get_config_var('EXT_SUFFIX') or ''}",
                pybind11=version("pybind11"), pinocchio=version("pinocchio"))


_NATIVE_SUFFIXES = {".txt", ".cmake", ".in", ".hpp", ".h", ".cpp", ".cc", ".so", ".pyd"}


def native_root() -> Path:
    """Where the native code's identity is read: the C++ core's CMake source tree
    (``src/gato_core`` of the source checkout around this package or the current
    directory), else — a wheel installed away from any checkout — the installed
    package folder holding the compiled core (``_core*.so``)."""
    from .builder import repo_root

    try:
        return repo_root() / "src" / "gato_core"
    except FileNotFoundError:
        return Path(__file__).resolve().parent


def _tree_digest(root: Path, suffixes, skip=()) -> str:
    """sha256 over the (relative path, bytes) of every file under ``root`` with one of
    ``suffixes``, in sorted order; folders named in ``skip`` (and hidden ones) are left out."""
    h = hashlib.sha256()
    root = Path(root)
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
            for fn in sorted(filenames):
                p = Path(dirpath) / fn
                if p.suffix in suffixes and p.is_file():
                    h.update(str(p.relative_to(root)).encode() + b"\0")
                    h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _native_digest(root: Path) -> str:
    # python/ holds no native code; build trees are outputs, not inputs.
    return _tree_digest(root, _NATIVE_SUFFIXES, skip=("python", "build", "__pycache__"))


def _robot_urdf_path(robot: dict, plant_root: Path) -> Path | None:
    for cand in (robot.get("urdf_path"), Path(plant_root) / robot.get("urdf", "")):
        if cand and Path(cand).is_file():
            return Path(cand)
    return None


def module_key(robot: dict, N: int, variant: str, plant_root: Path, arch: str | None) -> tuple[str, dict]:
    """Content key of one solver configuration + the readable inputs it was derived from.

    Args:
        robot: registry / manifest entry (``urdf`` or ``urdf_path``, ``ee_frame``, ...).
        N: horizon length (int >= 2).
        variant: "default" | "fc" | "eh".
        plant_root: folder holding the robot's description (:func:`resolve`); its
            ``.urdf`` / ``.json`` / ``.xacro`` files are hashed (meshes do not shape
            the dynamics).
        arch: CUDA architecture or None (CPU).

    Returns ``(key, inputs)``: ``key`` 24 hex digits of sha256 over ``inputs``, which
    holds the URDF sha256, the robot options, N, variant, the plant-folder and
    native-source digests, :func:`native_root` and :func:`toolchain_identity`.
    """
    if not isinstance(robot, dict):
        raise ValueError(f"robot: expected a registry entry (dict), got {type(robot).__name__}")
    if isinstance(N, bool) or not isinstance(N, int) or N < 2:
        raise ValueError(f"N: expected an integer >= 2, got {N!r}")
    if variant not in ("default", "fc", "eh"):
        raise ValueError(f"variant: expected 'default', 'fc' or 'eh', got {variant!r}")
    from .robots import sha256_file

    urdf = _robot_urdf_path(robot, plant_root)
    if urdf is None and not robot.get("urdf_sha256"):
        raise ValueError(f"robot: no URDF found ({robot.get('urdf_path') or robot.get('urdf')!r} "
                         f"under {plant_root}) and no urdf_sha256 recorded")
    options = {k: robot.get(k) for k in ("ee_frame", "floating_base", "contact_frames", "collision_res",
                                         "nq", "nv", "joints")}
    root = native_root()
    inputs = dict(urdf_sha256=sha256_file(urdf) if urdf else robot["urdf_sha256"], options=options,
                  N=N, variant=variant, plant_digest=_tree_digest(Path(plant_root), {".urdf", ".json", ".xacro"}),
                  native_root=str(root), native_digest=_native_digest(root),
                  toolchain=toolchain_identity(arch))
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return key, inputs


def resolve(name: str, cache: Path | None = None) -> tuple[dict, Path] | None:
    """(manifest or shipped registry entry, folder holding the robot's description) or None.

    A cache entry wins over a shipped robot of the same name. The folder is the
    entry's ``plant_dir`` when recorded, else the one holding its URDF. None when
    the name is unknown or its URDF is not found.
    """
    from .robots import find_urdf, shipped_registry

    entry = load_manifest(cache).get(name) or shipped_registry().get(name)
    if entry is None:
        return None
    if entry.get("plant_dir") and Path(entry["plant_dir"]).is_dir():
        return dict(entry), Path(entry["plant_dir"])
    urdf = Path(entry["urdf_path"]) if entry.get("urdf_path") else find_urdf(entry.get("description", ""),
                                                                               entry.get("urdf", ""))
    if urdf is None or not urdf.is_file():
        return None
    return dict(entry), urdf.resolve().parent
