"""scripts/setup.sh names a missing system tool and how to install it."""
import os
import subprocess
from pathlib import Path
import shutil

ROOT = Path(__file__).resolve().parents[1]


def test_missing_cmake_is_named_with_the_install_command(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("python3", "c++", "dirname", "bash"):
        os.symlink(shutil.which(tool), bindir / tool)
    env = {"PATH": str(bindir), "HOME": os.environ.get("HOME", "/root")}
    proc = subprocess.run([str(bindir / "bash"), str(ROOT / "scripts" / "setup.sh")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "'cmake' not found" in proc.stderr and "apt-get install cmake" in proc.stderr, proc.stderr


def test_missing_compiler_is_named(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("python3", "dirname", "bash"):
        os.symlink(shutil.which(tool), bindir / tool)
    env = {"PATH": str(bindir), "HOME": os.environ.get("HOME", "/root")}
    proc = subprocess.run([str(bindir / "bash"), str(ROOT / "scripts" / "setup.sh")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "'c++' not found" in proc.stderr and "build-essential" in proc.stderr
