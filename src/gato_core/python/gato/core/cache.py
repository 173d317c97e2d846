"""The per-host module cache: :func:`register_robot`, :func:`build` and the checked solver
configurations (``<cache>/modules/<name>/<module_key>/meta.json``).

The cache folder and its robot manifest are :mod:`gato.robots.manifest`. The CPU backend
needs no compiled per-robot module: a registered robot is usable by
``gato.BSQP(urdf, ..., plant_type=name)`` at once.

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

import numpy as np

from .arrays import flag
from ..robots.builder import codegen, repo_root
from ..robots.manifest import cache_dir, load_manifest, store_entry
from ..robots.registry import find_urdf, sha256_file, shipped_registry



def _cache_and_digest(name, urdf: Path, cache_dir_override, force: bool):
    """The cache folder and ``urdf``'s sha256; ValueError when ``name`` is registered with another
    URDF and not ``force`` (the fixed-base and floating-base registrations share the rule)."""
    cache = Path(cache_dir_override or cache_dir())
    digest = sha256_file(urdf)
    old = load_manifest(cache).get(name)
    if old and old.get("urdf_sha256") != digest and not force:
        raise ValueError(f"name: robot {name!r} is already registered with another URDF "
                         f"({old.get('urdf_path')}); pass force=True to replace it")
    return cache, digest

def register_robot(name: str, urdf_path: str | os.PathLike, *, N=(32,), ee_frame: str = "EE",
                   floating_base: bool = False, collision_res=0.15, contact_frames=None,
                   variant: str = "default", build: bool = False, cache_dir_override: Path | None = None,
                   arch=None, jobs=None, force: bool = False) -> dict:
    """Record a robot (URDF + EE frame) in the cache manifest; returns its entry.

    The URDF is loaded once to check it (fixed base, the EE frame and every contact frame
    exist). Re-registering a name with a different URDF needs ``force=True``.
    ``build=True`` also makes the cache entry of each horizon in ``N``
    (:func:`ensure_module`: a check solve, no compile); otherwise the first
    :func:`load_module` / :func:`ensure_module` makes it.

    ``collision_res`` [m] (None: no collision spheres) is recorded in the entry and sets the
    spacing of the robot's collision sphere cover (``BSQP.collision_spheres``, the COLLISION
    rows). ``contact_frames`` (None: ``[ee_frame]``) is checked against the URDF and recorded
    (``robot_info``). ``variant``: "default" or "eh" (the exact-Hessian entry: the same core,
    checked with ``BSQP(variant="eh")``). No argument is ignored: ``variant`` "fc" (whether or not
    ``build``), ``arch`` other than None (a CUDA architecture) and ``jobs`` other than None
    (compile jobs: the CPU backend compiles nothing per robot) raise ValueError naming the
    argument (docs/reference_differences.md).
    """
    import pinocchio as pin

    from ..robots.builder import _check_frames, check_collision_res

    if floating_base is True or variant == "fc" and floating_base is not False:
        return register_floating(name, urdf_path, N=N, ee_frame=ee_frame, floating_base=floating_base,
                                 collision_res=collision_res, contact_frames=contact_frames, variant=variant,
                                 build=build, cache_dir_override=cache_dir_override, arch=arch, jobs=jobs,
                                 force=force)
    _check_cpu_variant(variant, "(refused whether or not build=True)")
    _check_no_compile(arch, jobs)
    check_collision_res(collision_res)
    horizons = _horizons(N)
    build, force = flag(build, "build"), flag(force, "force")
    if cache_dir_override is not None and not isinstance(cache_dir_override, (str, os.PathLike)):
        raise ValueError(f"cache_dir_override: expected a folder path or None, got "
                         f"{type(cache_dir_override).__name__}")
    urdf = Path(urdf_path).resolve()
    if not urdf.is_file():
        raise ValueError(f"urdf_path: file not found: {urdf}")
    if floating_base is not False:
        raise ValueError(f"floating_base: expected True or False, got {floating_base!r}")
    model = pin.buildModelFromUrdf(str(urdf))
    frames = _check_frames(model, urdf, ee_frame, contact_frames)
    cache, digest = _cache_and_digest(name, urdf, cache_dir_override, force)
    entry = dict(nq=model.nq, nv=model.nv, ee_frame=ee_frame, urdf=urdf.name, urdf_path=str(urdf),
                 description="", floating_base=False, urdf_sha256=digest,
                 joints=list(model.names)[1:], contact_frames=frames, collision_res=collision_res)
    store_entry(name, entry, cache)
    if build:
        for n in horizons:
            ensure_module(name, n, variant, cache=cache, quiet=True)
    return entry


def register_floating(name, urdf_path, *, N=(32,), ee_frame="EE", floating_base=True, collision_res=0.15,
                      contact_frames=None, variant="fc", build=False, cache_dir_override=None, arch=None,
                      jobs=None, force=False) -> dict:
    """register_robot's floating-base path (issue 34): a quaternion free-flyer root with contact
    frames, solved by the contact-force SQP (gato.core.floating_bsqp; ``variant`` "fc", the only
    floating variant of the CPU backend). The URDF is loaded with the free flyer and every contact
    frame checked (FloatingPlant); ``ee_frame`` (the base-pose target frame) must exist;
    ``collision_res`` is recorded. ``build=True`` constructs the solver once per horizon."""
    if floating_base is not True:
        raise ValueError("variant: 'fc' modules are CUDA builds for fixed-base arms; on the CPU backend 'fc' is "
                         "the floating-base contact-force solver (floating_base=True)")
    if variant != "fc":
        raise ValueError(f"floating_base: the CPU backend's floating-base solver is the contact-force one; pass "
                         f"variant='fc' (got variant={variant!r})")
    from ..robots.builder import check_collision_res
    from .native import core

    _check_no_compile(arch, jobs)
    check_collision_res(collision_res)
    horizons = _horizons(N)
    build, force = flag(build, "build"), flag(force, "force")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected an identifier, got {name!r}")
    if cache_dir_override is not None and not isinstance(cache_dir_override, (str, os.PathLike)):
        raise ValueError(f"cache_dir_override: expected a folder path or None, got "
                         f"{type(cache_dir_override).__name__}")
    urdf = Path(os.fspath(urdf_path)).resolve()
    if not urdf.is_file():
        raise ValueError(f"urdf_path: file not found: {urdf}")
    if contact_frames is None:
        raise ValueError("floating_base: a floating-base robot needs contact_frames=[...] (its feet)")
    if not isinstance(contact_frames, (list, tuple)) or not contact_frames \
            or not all(isinstance(f, str) for f in contact_frames):
        raise ValueError(f"contact_frames: a floating-base robot needs a non-empty list of contact frame names, "
                         f"got {contact_frames!r}")
    plant = core.FloatingPlant(str(urdf), list(contact_frames))  # ValueError naming contact_frames
    import pinocchio as pin
    model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
    if ee_frame != "EE" and not model.existFrame(ee_frame):
        raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {urdf.name}")
    cache, digest = _cache_and_digest(name, urdf, cache_dir_override, force)
    entry = dict(nq=plant.nq, nv=plant.nv, ee_frame=ee_frame, urdf=urdf.name, urdf_path=str(urdf),
                 description="", floating_base=True, urdf_sha256=digest, joints=list(plant.joint_names),
                 contact_frames=list(contact_frames), collision_res=collision_res, variants=["fc"])
    store_entry(name, entry, cache)
    if build:
        for n in horizons:
            core.FloatingSQP(str(urdf), list(contact_frames), n, 0.02)
    return entry


def _check_cpu_variant(variant, note: str = "") -> None:
    """ValueError naming ``variant`` unless the CPU backend runs it ("default" | "eh")."""
    if variant == "fc":
        raise ValueError(f"variant: 'fc' modules are CUDA builds; the CPU backend runs 'default' and 'eh' {note}".rstrip())
    if variant not in ("default", "eh"):
        raise ValueError(f"variant: expected 'default' or 'eh' ('fc' is a CUDA build), got {variant!r}")


def _horizons(N) -> list:
    """``N`` (an integer >= 2 or a non-empty list of them) as a list; ValueError naming N."""
    horizons = [N] if isinstance(N, (int, np.integer)) and not isinstance(N, bool) else N
    try:
        horizons = list(horizons)
    except TypeError:
        horizons = []
    if not horizons or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2 for n in horizons):
        raise ValueError(f"N: expected an integer >= 2 or a non-empty list of them, got {N!r}")
    return [int(n) for n in horizons]


def _check_no_compile(arch, jobs) -> None:
    """The reference's compile settings: refused with a ValueError naming them unless unset."""
    if arch is not None:
        raise ValueError(f"arch: {arch!r} is a CUDA architecture; the CPU backend compiles no GPU code "
                         "(leave arch=None)")
    if jobs is not None:
        raise ValueError(f"jobs: {jobs!r} parallel compile jobs, but the CPU backend compiles nothing per robot "
                         "(leave jobs=None)")


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
    try:
        return repo_root() / "src" / "gato_core"
    except FileNotFoundError:
        return Path(__file__).resolve().parents[1]  # gato/, where the compiled cores are


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


def _description_digest(urdf: Path | None) -> str | None:
    """sha256 of the ``description.json`` that :func:`gato.builder.codegen` writes beside the
    robot's URDF (limits, frames, options), None when there is none."""
    path = urdf.parent / "description.json" if urdf is not None else None
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None and path.is_file() else None


def module_key(robot: dict, N: int, variant: str, plant_root: Path, arch: str | None) -> tuple[str, dict]:
    """Content key of one solver configuration + the readable inputs it was derived from.

    Args:
        robot: registry / manifest entry (``urdf`` or ``urdf_path``, ``ee_frame``, ...).
        N: horizon length (int >= 2).
        variant: "default" | "fc" | "eh".
        plant_root: folder holding the robot's description (:func:`resolve`); the URDF
            is looked up there when the entry has no ``urdf_path``.
        arch: CUDA architecture or None (CPU).

    Returns ``(key, inputs)``: ``key`` 24 hex digits of sha256 over ``inputs``, which
    holds the URDF sha256, the robot options, N, variant, the digest of the
    ``description.json`` beside the URDF (codegen's output; None without one), the
    native-source digest, :func:`native_root` and :func:`toolchain_identity`.
    """
    if not isinstance(robot, dict):
        raise ValueError(f"robot: expected a registry entry (dict), got {type(robot).__name__}")
    if isinstance(N, bool) or not isinstance(N, int) or N < 2:
        raise ValueError(f"N: expected an integer >= 2, got {N!r}")
    if variant not in ("default", "fc", "eh"):
        raise ValueError(f"variant: expected 'default', 'fc' or 'eh', got {variant!r}")
    urdf = _robot_urdf_path(robot, plant_root)
    if urdf is None and not robot.get("urdf_sha256"):
        raise ValueError(f"robot: no URDF found ({robot.get('urdf_path') or robot.get('urdf')!r} "
                         f"under {plant_root}) and no urdf_sha256 recorded")
    options = {k: robot.get(k) for k in ("ee_frame", "floating_base", "contact_frames", "collision_res",
                                         "nq", "nv", "joints")}
    root = native_root()
    inputs = dict(urdf_sha256=sha256_file(urdf) if urdf else robot["urdf_sha256"], options=options,
                  N=N, variant=variant, description_digest=_description_digest(urdf),
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


# --- cached solver configurations (CPU: checked configurations of the shared core) ---------
#
# The reference caches one compiled CUDA module per (robot, N, variant). The CPU backend's one
# compiled core (gato._core) serves them all, so a cache entry here is the record that this
# core ran this robot at this N: modules/<name>/<module_key>/meta.json holds the key's inputs,
# the core file and its sha256, and the result of a check solve. An entry counts only while
# its key (sources, toolchain, URDF, options) AND the loaded core binary are unchanged.

def _core_file() -> Path:
    from .native import core
    return Path(core.__file__).resolve()


@functools.lru_cache(maxsize=4)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _core_sha256() -> str:
    core = _core_file()
    st = core.stat()
    return _file_sha256(str(core), st.st_mtime_ns, st.st_size)


def _resolved(name: str, cache: Path | None) -> tuple[dict, Path]:
    found = resolve(name, cache)
    if found is None:
        raise ValueError(f"name: robot {name!r} is not registered or its URDF is missing "
                         "(gato.register_robot / gato.builder.codegen add one)")
    return found


def _entry_dir(name: str, key: str, cache: Path | None) -> Path:
    return Path(cache or cache_dir()) / "modules" / name / key


def _current_meta(meta_path: Path) -> dict | None:
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return meta if meta.get("core_sha256") == _core_sha256() else None


def find_module(name: str, N: int, variant: str = "default", cache: Path | None = None) -> Path | None:
    """The cache entry (``meta.json``) for (name, N, variant) if one was made from the
    CURRENT inputs and core binary; stale entries from older sources, toolchains, URDFs
    or core builds are ignored. None when there is none or the robot is unknown."""
    found = resolve(name, cache)
    if found is None:
        return None
    key, _ = module_key(found[0], N, variant, found[1], None)
    path = _entry_dir(name, key, cache) / "meta.json"
    return path if path.is_file() and _current_meta(path) is not None else None


def ensure_module(name: str, N: int, variant: str = "default", *, cache: Path | None = None,
                  arch: str | None = None, jobs: int | None = None, quiet: bool = False) -> Path:
    """Return the cache entry (``meta.json``) for (name, N, variant), making it once if missing.

    Making it = building a one-solve :class:`gato.BSQP` of the robot at N on the
    loaded core, running one solve (hold at q = 0, reference = the EE there) and
    recording the key's inputs, the core file and the check's outcome. The CPU backend
    runs "default" and "eh" (the check solve then runs the exact Hessian); ``arch`` must be None (nothing is
    compiled for a GPU); ``jobs`` must be None (nothing is compiled per robot).
    Raises ValueError naming the argument for an unknown robot or bad N/variant/arch,
    RuntimeError when the check solve does not produce a finite trajectory.
    """
    _check_cpu_variant(variant)
    _check_no_compile(arch, jobs)
    entry, plant_root = _resolved(name, cache)
    key, inputs = module_key(entry, N, variant, plant_root, None)
    folder = _entry_dir(name, key, cache)
    meta_path = folder / "meta.json"
    if meta_path.is_file() and _current_meta(meta_path) is not None:
        return meta_path
    import numpy as np

    from .bsqp import BSQP, module_name, robot_urdf

    urdf = entry.get("urdf_path") or str(plant_root / entry["urdf"])
    if not Path(urdf).is_file():
        urdf = str(robot_urdf(name))
    solver = BSQP(urdf, 1, N, 0.01, ee_frame=entry.get("ee_frame", "EE"), max_sqp_iters=2, threads=1,
                  variant=variant)
    x = np.zeros((1, solver.nx))
    ref = np.tile(np.r_[solver.ee_pos(np.zeros(solver.nq)), 0.0, 0.0, 0.0], (1, N))
    res = solver.solve(x, ref)
    if not np.all(np.isfinite(res.xu)):
        raise RuntimeError(f"ensure_module: the check solve of {name!r} at N={N} gave a non-finite trajectory")
    core = _core_file()
    meta = dict(name=name, N=N, variant=variant, module=module_name(name, N, variant), module_key=key,
                inputs=inputs, core=str(core), core_sha256=_core_sha256(),
                check=dict(sqp_iters=int(res.stats.sqp_iters[0]), xu_size=int(solver.xu_size)))
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
    os.replace(tmp, meta_path)
    if not quiet:
        print(f"[gato] checked {meta['module']} on {core.name}: {meta_path}", file=sys.stderr)
    return meta_path


def load_module(name: str, N: int, variant: str = "default", *, cache: Path | None = None,
                build_if_missing: bool = True):
    """The native module that runs (name, N, variant): the shared core ``gato._core``, once
    its cache entry exists (made now when ``build_if_missing``). None when the robot is not
    registered, or when the entry is missing and ``build_if_missing`` is False."""
    if resolve(name, cache) is None:
        return None
    if find_module(name, N, variant, cache) is None:
        if not build_if_missing:
            return None
        ensure_module(name, N, variant, cache=cache, quiet=True)
    from .native import core
    return core


def available_cached(cache: Path | None = None) -> dict:
    """``{(plant, N, variant): core file name}`` of the cache entries made from the current
    inputs and core binary (entries whose robot, sources or core changed are left out)."""
    root = Path(cache or cache_dir()) / "modules"
    out = {}
    if not root.is_dir():
        return out
    for meta_path in sorted(root.glob("*/*/meta.json")):
        meta = _current_meta(meta_path)
        if meta is None:
            continue
        try:
            name, N, variant = meta["name"], int(meta["N"]), meta["variant"]
        except (KeyError, TypeError, ValueError):
            continue
        if find_module(name, N, variant, cache) == meta_path:
            out[(name, N, variant)] = Path(meta["core"]).name
    return out


def build(urdf_path, name=None, N=(32,), ee_frame="EE", arch=None, jobs=None, build_dir=None, collision_res=0.15,
          contact_frames=None, floating_base=False, contact_forces=False, exact_hessian=False) -> list:
    """Codegen + make the solver cache entries of a URDF for each horizon in ``N``.

    ``name`` defaults to the URDF stem. Runs :func:`codegen` (registering the
    robot in the per-host cache), then :func:`ensure_module` for
    every N: a check solve on the shared CPU core, recorded under the module
    key. Afterwards ``gato.BSQP(urdf, N=n, plant_type=name)`` just works.
    ``build_dir``: the folder the generated description goes to (``<build_dir>/<name>/``:
    the canonical URDF, description.json, spheres.json), an isolated tree instead of the
    cache's ``robots/<codegen key>``; None = the cache.
    ``exact_hessian=True`` makes the "eh" entries instead (the same core with exact-Hessian
    stage blocks; load with ``BSQP(..., variant="eh")``). ``contact_forces`` (the "fc"
    variant, a CUDA build), ``arch`` (a CUDA architecture) and ``jobs`` (compile jobs; nothing
    is compiled per robot) are refused with a ValueError naming them unless left at their defaults.
    Returns the list of (name, N) pairs made.
    """
    fb = flag(floating_base, "floating_base")
    if flag(contact_forces, "contact_forces") and not fb:
        raise ValueError("contact_forces: the 'fc' variant is a CUDA build for fixed-base arms; the CPU backend "
                         "runs 'default' and 'eh' (and 'fc' for floating-base robots: floating_base=True)")
    if fb:
        if not contact_forces:
            raise ValueError("floating_base: the CPU backend's floating-base solver is the contact-force one; "
                             "pass contact_forces=True (and contact_frames)")
        if flag(exact_hessian, "exact_hessian"):
            raise ValueError("exact_hessian: not available for floating-base robots (the 'fc' solver is "
                             "Gauss-Newton)")
        if build_dir is not None:
            raise ValueError("build_dir: a floating-base robot generates no description (leave None)")
        if name is None:
            name = Path(os.fspath(urdf_path)).stem
        horizons = _horizons(N)
        register_floating(name, urdf_path, N=horizons, ee_frame=ee_frame, collision_res=collision_res,
                          contact_frames=contact_frames, arch=arch, jobs=jobs, force=True, build=True)
        return [(name, n) for n in horizons]
    variant = "eh" if flag(exact_hessian, "exact_hessian") else "default"
    _check_no_compile(arch, jobs)
    if build_dir is not None and not isinstance(build_dir, (str, os.PathLike)):
        raise ValueError(f"build_dir: expected a folder path or None, got {type(build_dir).__name__}")
    horizons = _horizons(N)
    if name is None:
        name = Path(os.fspath(urdf_path)).stem
    codegen(urdf_path, name, ee_frame=ee_frame, collision_res=collision_res, contact_frames=contact_frames,
            floating_base=floating_base, out_dir=None if build_dir is None else Path(os.fspath(build_dir)))
    for n in horizons:
        ensure_module(name, n, variant, quiet=True)
    return [(name, n) for n in horizons]
