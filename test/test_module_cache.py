"""gato._cache module identity: GPU arch detection, toolchain identity, module keys, resolve.
No compiler is run except `--version` probes."""
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pinocchio
import pytest

import gato
from gato.core import cache as _cache  # the module, so monkeypatch reaches its callers


def _fake_tool(folder, name, script):
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_detect_arch_reads_nvidia_smi_compute_cap(tmp_path, monkeypatch):
    arch = _cache.detect_arch()
    assert arch is None or arch.isdigit()           # this machine: None without a GPU
    _fake_tool(tmp_path, "nvidia-smi", 'echo "9.0"; echo "8.6"')   # two GPUs: the first one counts
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert _cache.detect_arch() == "90"
    _fake_tool(tmp_path, "nvidia-smi", 'echo "NVIDIA-SMI has failed" >&2; exit 9')
    assert _cache.detect_arch() is None
    _fake_tool(tmp_path, "nvidia-smi", 'echo "[N/A]"')
    assert _cache.detect_arch() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert _cache.detect_arch() is None


def test_toolchain_identity_names_the_toolchain_and_is_memoized():
    ident = _cache.toolchain_identity(None)
    assert set(ident) == {"arch", "cxx", "nvcc", "python_abi", "pybind11", "pinocchio"}
    assert ident["arch"] is None and ident["pinocchio"] == pinocchio.__version__
    assert ident["python_abi"].startswith(sys.implementation.cache_tag)
    assert ident["cxx"] and (ident["nvcc"] is None) == (shutil.which("nvcc") is None)
    assert _cache.toolchain_identity(None) is ident                  # memoized per process
    assert _cache.toolchain_identity("90")["arch"] == "90"


@pytest.fixture
def plant(tmp_path):
    """A registry entry whose URDF lives in its own folder (a private copy of iiwa14)."""
    folder = tmp_path / "plant"
    folder.mkdir()
    urdf = folder / "arm.urdf"
    shutil.copy(gato.robot_urdf("iiwa14"), urdf)
    entry = dict(gato.robot_info("iiwa14"), urdf="arm.urdf", urdf_path=str(urdf))
    return entry, folder


def test_module_key_changes_with_every_input_and_only_then(plant, tmp_path, monkeypatch):
    entry, folder = plant
    key, inputs = _cache.module_key(entry, 32, "default", folder, None)
    assert len(key) == 24 and int(key, 16) >= 0
    assert inputs["N"] == 32 and inputs["variant"] == "default" and inputs["toolchain"] == _cache.toolchain_identity(None)
    assert inputs["native_root"] == str(_cache.native_root())
    assert _cache.module_key(dict(entry), 32, "default", folder, None) == (key, inputs)   # stable
    keys = {key}

    def differs(*args):
        k, _ = _cache.module_key(*args)
        assert k not in keys, args[1:]
        keys.add(k)

    differs(entry, 64, "default", folder, None)                      # N
    differs(entry, 32, "fc", folder, None)                           # variant
    differs(entry, 32, "default", folder, "90")                      # toolchain (CUDA arch)
    differs(dict(entry, ee_frame="A7"), 32, "default", folder, None)  # robot options
    (folder / "notes.json").write_text('{"unrelated": 1}')          # other files beside the URDF do not count
    assert _cache.module_key(entry, 32, "default", folder, None)[0] == key
    (folder / "description.json").write_text('{"q_max": [1]}')
    differs(entry, 32, "default", folder, None)                      # the generated description (codegen)
    urdf = folder / "arm.urdf"
    urdf.write_text(urdf.read_text().replace('<mass value="5"/>', '<mass value="5.5"/>', 1))
    differs(entry, 32, "default", folder, None)                      # URDF bytes
    native = tmp_path / "native"
    (native / "cpp").mkdir(parents=True)
    (native / "CMakeLists.txt").write_text("project(x)\n")
    (native / "cpp" / "a.cpp").write_text("int a;\n")
    monkeypatch.setattr(_cache, "native_root", lambda: native)
    differs(entry, 32, "default", folder, None)                      # another native tree
    k_native = _cache.module_key(entry, 32, "default", folder, None)[0]
    (native / "cpp" / "a.cpp").write_text("int a = 1;\n")
    differs(entry, 32, "default", folder, None)                      # native source content
    k_content = _cache.module_key(entry, 32, "default", folder, None)[0]
    (native / "README.md").write_text("docs\n")                      # not a native source
    (native / "python").mkdir()
    (native / "python" / "x.cpp").write_text("python/ holds no native code\n")
    last = _cache.module_key(entry, 32, "default", folder, None)[0]
    assert last == k_content != k_native                             # docs and python/ do not count


def test_module_key_rejects_bad_input(plant):
    entry, folder = plant
    with pytest.raises(ValueError, match="N: expected an integer >= 2"):
        _cache.module_key(entry, 1, "default", folder, None)
    with pytest.raises(ValueError, match="variant: expected"):
        _cache.module_key(entry, 8, "fast", folder, None)
    with pytest.raises(ValueError, match="robot: expected a registry entry"):
        _cache.module_key("iiwa14", 8, "default", folder, None)
    with pytest.raises(ValueError, match="robot: no URDF found"):
        _cache.module_key({"urdf": "none.urdf"}, 8, "default", folder, None)


def test_resolve_finds_shipped_and_registered_robots(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    entry, folder = _cache.resolve("iiwa14")
    assert entry["nq"] == 7 and (folder / entry["urdf"]).is_file()
    assert folder / entry["urdf"] == gato.robot_urdf("iiwa14")
    assert _cache.resolve("no_such_robot") is None
    arm = tmp_path / "arms" / "arm.urdf"
    arm.parent.mkdir()
    shutil.copy(gato.robot_urdf("indy7"), arm)
    gato.register_robot("iiwa14", arm, ee_frame="EE", force=True)    # a cache entry wins over a shipped one
    entry, folder = _cache.resolve("iiwa14")
    assert entry["nq"] == 6 and folder == arm.parent.resolve()
    assert _cache.resolve("iiwa14", cache=tmp_path / "other")[0]["nq"] == 7
    arm.unlink()                                                      # its URDF is gone
    assert _cache.resolve("iiwa14") is None


def test_ensure_find_load_and_available_cached(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GATO_CACHE_DIR", str(cache))
    urdf = tmp_path / "arm.urdf"
    shutil.copy(gato.robot_urdf("iiwa14"), urdf)
    gato.register_robot("arm", urdf, ee_frame="EE")
    assert _cache.find_module("arm", 8) is None and _cache.available_cached() == {}
    assert _cache.load_module("arm", 8, build_if_missing=False) is None
    meta_path = _cache.ensure_module("arm", 8, quiet=True)
    meta = json.loads(meta_path.read_text())
    key, inputs = _cache.module_key(_cache.resolve("arm")[0], 8, "default", urdf.parent, None)
    assert meta_path == cache / "modules" / "arm" / key / "meta.json"
    assert meta["module"] == gato.module_name("arm", 8) and meta["inputs"] == inputs
    assert meta["core"] == gato._core.__file__ and meta["check"]["xu_size"] == 8 * 21 - 7
    mtime = meta_path.stat().st_mtime_ns
    assert _cache.ensure_module("arm", 8, quiet=True) == meta_path                # made once
    assert meta_path.stat().st_mtime_ns == mtime
    assert _cache.find_module("arm", 8) == meta_path and _cache.find_module("arm", 16) is None
    assert _cache.load_module("arm", 8) is gato._core
    assert _cache.load_module("no_such_robot", 8) is None
    assert _cache.load_module("arm", 16) is gato._core                             # made on demand
    assert _cache.available_cached() == {("arm", 8, "default"): Path(gato._core.__file__).name,
                                         ("arm", 16, "default"): Path(gato._core.__file__).name}
    # a changed URDF makes every entry stale: not found, not listed, made again under a new key
    urdf.write_text(urdf.read_text().replace('<mass value="5"/>', '<mass value="5.5"/>', 1))
    assert _cache.find_module("arm", 8) is None and _cache.available_cached() == {}
    assert _cache.ensure_module("arm", 8, quiet=True) != meta_path
    # a different core binary makes the entry stale too
    monkeypatch.setattr(_cache, "_core_sha256", lambda: "0" * 64)
    assert _cache.find_module("arm", 8) is None
    with pytest.raises(ValueError, match="name: robot 'nope' is not registered"):
        _cache.ensure_module("nope", 8)
    with pytest.raises(ValueError, match="variant: 'fc' modules are CUDA builds"):
        _cache.ensure_module("arm", 8, "fc")
    with pytest.raises(ValueError, match="arch: '90'"):
        _cache.ensure_module("arm", 8, arch="90")


def test_register_robot_build_makes_the_cache_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    gato.register_robot("arm6", gato.robot_urdf("indy7"), ee_frame="EE", N=[8, 12], build=True)
    assert set(_cache.available_cached()) == {("arm6", 8, "default"), ("arm6", 12, "default")}
    gato.register_robot("arm7", gato.robot_urdf("iiwa14"), ee_frame="EE", N=[8])   # build=False: none yet
    assert _cache.find_module("arm7", 8) is None
