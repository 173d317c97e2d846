"""The binary wheel of gato_core as a pip-only user gets it (issue 35).

scripts/build_wheel.sh builds it (incrementally: it reuses scripts/setup.sh's build dir), a fresh
venv whose PATH holds no compiler and no CMake installs it with only its declared runtime
dependencies (from build/wheelhouse, filled once from the configured indexes at the versions of
the workspace venv: offline afterwards), and there `python -m gato smoke` (both core builds) and
the solver / controller API tests pass against the installed wheel, not the checkout."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gato._native import cpu_has_avx2_fma

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / "build" / "wheelhouse"
#: Existing API test files that import only gato, numpy and pytest (~390 tests, ~5 s).
API_TESTS = ("test_solver_api.py", "test_controller.py", "test_core_types.py", "test_keyword_arguments.py")
#: Left out: MuJoCoWorld needs the optional mujoco (not a runtime dependency of the wheel), and the
#: keyword checklist's completeness test counts the cases deselected here.
API_DESELECT = "not MuJoCoWorld and not test_every_keyword_argument_has_a_case"
#: What a machine without a toolchain lacks; none of it may be on the fresh venv's PATH.
BUILD_TOOLS = ("c++", "g++", "gcc", "cc", "clang", "clang++", "cmake", "ninja", "make", "nvcc")

# Run inside the fresh venv: where gato, its core and the pinocchio family were loaded from.
WHERE = """
import json, sys
import gato
from gato.core.native import core
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l and
               any(k in l for k in ("libpinocchio", "libboost", "libcoal", "liburdfdom", "libgomp"))})
print(json.dumps({"prefix": sys.prefix, "gato": gato.__file__, "core": core.__file__, "libs": libs}))
"""
# Run inside the fresh venv: the installed distributions and the closure of gato's requirements.
CLOSURE = """
import json, re
import importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement
def name(s): return re.sub(r"[-_.]+", "-", s).lower()
installed = {name(d.metadata["Name"]) for d in md.distributions()}
need, todo = set(), ["gato"]
while todo:
    n = todo.pop()
    if n in need: continue
    need.add(n)
    for r in map(Requirement, md.requires(n) or []):
        if r.marker is None or r.marker.evaluate({"extra": ""}):
            todo.append(name(r.name))
print(json.dumps({"installed": sorted(installed), "closure": sorted(need),
                  "gato_requires": md.requires("gato")}))
"""
# Run inside the fresh venv: collision rows on a shipped robot (its meshes come with the wheel).
COLLISION = """
import json
import numpy as np
import gato
s = gato.BSQP(str(gato.robot_urdf("iiwa14")), 1, 16, 0.01)
s.enable_limit_admm()
s.set_collision_environment(spheres=[(0.6, 0.0, 0.4, 0.05)])
group = s.enable_collision()
rows = len(s.collision_spheres["radii"])
x = np.r_[0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0, np.zeros(7)]
r = s.solve(x, np.tile(np.r_[0.5, 0.0, 0.5, 0, 0, 0], 16))
print(json.dumps({"urdf": str(gato.robot_urdf("iiwa14")), "rows": int(rows), "finite": bool(np.isfinite(np.asarray(r.u0(0))).all())}))
"""
# A pytest plugin for the API run: refuse to test anything but the installed wheel.
PROBE = """
import os, sys
def pytest_sessionstart(session):
    import gato
    from gato.core.native import core
    prefix = os.path.realpath(sys.prefix) + os.sep
    for f in (gato.__file__, core.__file__):
        if not os.path.realpath(f).startswith(prefix):
            raise RuntimeError(f"gato imported from {f}, not from the fresh venv {prefix}")
def pytest_report_header(config):
    import gato
    from gato.core.native import core
    return f"gato under test: {gato.__file__} ({core.__name__})"
"""


def _run(cmd, env=None, timeout=600, **kw):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} -> rc {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


def _bare_env(path, **extra):
    """Nothing of the workspace: no PYTHONPATH, LD_LIBRARY_PATH, ROS or venv variables, no pip config."""
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
            "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # A fresh clone's first build compiles for ~11 min; after scripts/setup.sh nothing recompiles.
    p = _run([str(ROOT / "scripts" / "build_wheel.sh"), "--out", str(out)], timeout=3000)
    path = Path(p.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.parent == out, p.stdout
    return path


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed (offline, from build/wheelhouse), no toolchain on PATH."""
    base = tmp_path_factory.mktemp("fresh")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    shims = base / "bin"   # python3 only, as on a machine without build tools
    shims.mkdir()
    (shims / "python3").symlink_to(venv / "bin" / "python3")
    env = _bare_env(f"{venv / 'bin'}:{shims}", TMPDIR=str(base))
    py = str(venv / "bin" / "python")

    def install(*reqs):
        cmd = [py, "-m", "pip", "install", "-q", "--no-index", "--only-binary=:all:", "--find-links", str(WHEELHOUSE)]
        if subprocess.run([*cmd, *reqs], env=env, capture_output=True, timeout=600).returncode != 0:
            # First use: download the wheels at the workspace venv's versions, once.
            import importlib.metadata as md
            pins = base / "constraints.txt"
            pins.write_text("".join(f"{d.metadata['Name']}=={d.version}\n" for d in md.distributions()
                                    if d.metadata["Name"] and d.metadata["Name"].lower() != "gato"))
            _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(WHEELHOUSE),
                  "-c", str(pins), *reqs])
            for stale in WHEELHOUSE.glob("gato-*.whl"):   # the wheel under test is given by its path
                stale.unlink()
            _run([*cmd, *reqs], env=env)

    install(str(wheel))
    closure = json.loads(_run([py, "-c", CLOSURE], env=env, cwd=base).stdout)
    install("pytest")   # for the API tests only, after the runtime set was recorded
    return {"venv": venv, "py": py, "env": env, "base": base, "closure": closure}


def test_the_wheel_is_one_binary_wheel_with_both_core_builds_and_no_cuda(wheel):
    # manylinux where auditwheel could tag it (docs/benchmarks_install.md "Binary wheel": manylinux_2_35 here)
    assert re.fullmatch(r"gato-[\w.]+-cp3\d+-cp3\d+-(manylinux_\d+_\d+|linux)_x86_64\.whl", wheel.name), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    mods = {n.split("/")[-1].split(".")[0] for n in names if re.fullmatch(r"gato/_\w+\.cpython-.*\.so", n)}
    assert mods == {"_core", "_core_avx2", "_cuda_host"}, mods
    assert "gato/__main__.py" in names and any(n.startswith("gato/robots/urdf/") for n in names)
    # Nothing of the pinocchio family is bundled (the pin wheel provides it).
    assert not [n for n in names if re.search(r"lib(pinocchio|boost|coal|urdfdom|console_bridge)", n)]


def test_the_fresh_venv_has_no_toolchain(fresh):
    for tool in BUILD_TOOLS:
        assert shutil.which(tool, path=fresh["env"]["PATH"]) is None, tool


def test_only_the_declared_runtime_dependencies_are_installed(fresh):
    c = fresh["closure"]
    assert {r for r in c["gato_requires"] if "extra ==" not in r} == {"numpy>=1.24", "pin==4.1.0"}, c["gato_requires"]
    # Everything installed is gato's requirement closure (numpy, pin and what pin needs) or pip.
    assert set(c["installed"]) - set(c["closure"]) <= {"pip", "setuptools"}, c
    for heavy in ("scipy", "mujoco", "torch", "jax", "ray", "matplotlib", "pytest"):
        assert heavy not in c["installed"]


def test_gato_and_pinocchio_load_from_the_fresh_venv(fresh):
    where = json.loads(_run([fresh["py"], "-c", WHERE], env=fresh["env"], cwd=fresh["base"]).stdout)
    prefix = os.path.realpath(where["prefix"]) + os.sep
    assert prefix == os.path.realpath(fresh["venv"]) + os.sep
    for key in ("gato", "core"):
        assert os.path.realpath(where[key]).startswith(prefix), where
    pin_libs = [lib for lib in where["libs"] if "libpinocchio" in lib]
    assert pin_libs, where["libs"]
    # Through the $ORIGIN RPATHs into the venv's cmeel.prefix, never the workspace's .venv.
    for lib in where["libs"]:
        assert os.path.realpath(lib).startswith(prefix), lib


def test_collision_rows_work_from_the_wheel(fresh):
    """The wheel carries the description folders (URDF, meshes): BSQP.enable_collision on a shipped
    robot builds its sphere cover from the venv's copy and solves."""
    out = json.loads(_run([fresh["py"], "-c", COLLISION], env=fresh["env"], cwd=fresh["base"]).stdout)
    assert os.path.realpath(out["urdf"]).startswith(os.path.realpath(fresh["venv"]) + os.sep), out
    assert out["urdf"].endswith("iiwa_description/iiwa14.urdf") and out["rows"] > 0 and out["finite"], out


@pytest.mark.parametrize("no_avx2", ["0", "1"])
def test_python_m_gato_smoke_passes(fresh, no_avx2):
    env = dict(fresh["env"], GATO_NO_AVX2=no_avx2)
    out = _run([fresh["py"], "-m", "gato", "smoke"], env=env, cwd=fresh["base"], timeout=300).stdout
    assert out.rstrip().endswith("OK"), out
    module = "gato._core_avx2" if no_avx2 == "0" and cpu_has_avx2_fma() else "gato._core"
    assert f"core: {module} (" in out, out


def test_the_solver_and_controller_api_tests_pass_against_the_wheel(fresh):
    base = fresh["base"]
    (base / "probe").mkdir(exist_ok=True)
    (base / "probe" / "gato_wheel_probe.py").write_text(PROBE)
    (base / "pytest.ini").write_text("[pytest]\n")
    env = dict(fresh["env"], PYTHONPATH=str(base / "probe"))
    p = subprocess.run([fresh["py"], "-m", "pytest", "-p", "no:cacheprovider", "-p", "gato_wheel_probe",
                        "-c", str(base / "pytest.ini"), "--rootdir", str(base), "-k", API_DESELECT,
                        *[str(ROOT / "test" / f) for f in API_TESTS]],
                       env=env, cwd=base, capture_output=True, text=True, timeout=600)
    tail = p.stdout[-3000:] + p.stderr[-2000:]
    assert p.returncode == 0, tail
    assert f"gato under test: {fresh['venv']}" in p.stdout, tail
    passed = int(re.search(r"(\d+) passed", p.stdout).group(1))
    assert passed >= 350 and " failed" not in p.stdout and " error" not in p.stdout, tail
