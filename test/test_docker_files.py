"""Checks of the Docker images that need no Docker engine.

The images themselves (docker/ros.Dockerfile, docker/cuda.Dockerfile) cannot be
built on the development machines; these tests cover what can go wrong without
building them: the lock filtering that keeps the images' Python dependencies
identical to the local setup's, every file the Dockerfiles COPY, the shared
install script, and the shell syntax of the scripts.
"""

from __future__ import annotations

import glob
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
LOCK = ROOT / "requirements" / "runtime.txt"   # the runtime lock: what the images install
DOCKERFILES = [DOCKER / "ros.Dockerfile", DOCKER / "cuda.Dockerfile"]
SCRIPTS = [DOCKER / "install_workspace.sh", DOCKER / "entrypoint.sh"]


def _load_filter():
    spec = importlib.util.spec_from_file_location(
        "lock_for_ros_image", DOCKER / "lock_for_ros_image.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve the module by name
    spec.loader.exec_module(mod)
    return mod


lfri = _load_filter()


def _names(text: str) -> list[str]:
    return [lfri.normalize(re.match(r"[A-Za-z0-9._-]+", ln).group(0))
            for ln in text.splitlines() if ln and not ln.startswith("-")]


# --------------------------------------------------------------------------
# (a) docker/lock_for_ros_image.py
# --------------------------------------------------------------------------

SAMPLE = """\
# A lock file header comment
#   with an indented comment line

numpy==2.4.6
Foo_Bar.baz==1.0   # inline comment
ros-rclpy==9.1.2
rclpy==9.1.2
ros-std-msgs==5.5.1
std_msgs==5.5.1
rosbags==0.11.9
rosidl-parser-extras==1.0
colcon-core==0.21.3
colcon_cmake==0.2.30
catkin-pkg==1.1.1
catkin_pkg==1.1.1
ros-wheels-bootstrapper==0.1.2
empy==4.2.1
lark-parser==0.12.0
backports.zstd==1.8.0 ; python_version < "3.14"
pin[build]==4.1.0
localpkg @ file:///wheels/localpkg-1.0-py3-none-any.whl
hashed==1.0 \\
    --hash=sha256:0123456789abcdef
--extra-index-url https://example.invalid/simple
"""


def test_sample_lock_is_filtered():
    out = lfri.filter_lock(SAMPLE)
    assert out.splitlines() == [
        "numpy==2.4.6",
        "Foo_Bar.baz==1.0",
        "rosbags==0.11.9",
        "rosidl-parser-extras==1.0",
        'backports.zstd==1.8.0 ; python_version < "3.14"',
        "pin[build]==4.1.0",
        "localpkg @ file:///wheels/localpkg-1.0-py3-none-any.whl",
        "hashed==1.0 --hash=sha256:0123456789abcdef",
        "--extra-index-url https://example.invalid/simple",
    ]
    assert "#" not in out


def test_sample_dropped_lines_have_reasons():
    _, dropped = lfri.classify(SAMPLE)
    reasons = {ln.text: why for ln, why in dropped}
    assert set(reasons) == {
        "ros-rclpy==9.1.2", "rclpy==9.1.2", "ros-std-msgs==5.5.1", "std_msgs==5.5.1",
        "colcon-core==0.21.3", "colcon_cmake==0.2.30", "catkin-pkg==1.1.1",
        "catkin_pkg==1.1.1", "ros-wheels-bootstrapper==0.1.2", "empy==4.2.1",
        "lark-parser==0.12.0"}
    assert "inside the ros-rclpy wheel" in reasons["rclpy==9.1.2"]
    assert "apt provides" in reasons["colcon-core==0.21.3"]


@pytest.mark.parametrize("bad, message", [
    ("numpy>=2\n", "not pinned"),
    ("numpy\n", "not pinned"),
    ("numpy==2.*\n", "not pinned"),
    ("numpy==2,<3\n", "not pinned"),
    ("-r other.txt\n", "includes another file"),
    ("--constraint=c.txt\n", "includes another file"),
    ("numpy==2.4.6 \\\n", "continuation"),
    ("!!!\n", "project name"),
])
def test_sample_lock_errors_are_clear(bad, message):
    with pytest.raises(lfri.LockError, match=message):
        lfri.classify(bad)


def test_unpinned_ros_lines_are_dropped_not_rejected():
    # What apt provides is dropped before the pin check: no version to keep.
    assert lfri.filter_lock("ros-rclpy\ncolcon-core>=0.1\nnumpy==1\n") == "numpy==1\n"


def _real_lock_lines():
    lines = [ln.strip() for ln in LOCK.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def test_real_lock_keeps_every_non_ros_pin_and_drops_every_ros_and_colcon_wheel():
    lines = _real_lock_lines()
    assert all("==" in ln for ln in lines), "requirements/runtime.txt should be fully pinned"
    by_name = {lfri.normalize(ln.split("==")[0]): ln for ln in lines}
    out = lfri.filter_lock(LOCK.read_text())
    kept = out.splitlines()
    kept_names = set(_names(out))

    ros_or_colcon = {n for n in by_name if n.startswith(("ros-", "colcon-"))}
    assert ros_or_colcon, "the lock should hold the ROS wheels of the local setup"
    assert not ros_or_colcon & kept_names
    # The ROS wheels embed egg-info of their own packages (rclpy, std_msgs, ...):
    # not installable names, so scripts/relock.sh must keep them out of the lock.
    inside_wheels = {n for n in by_name if "ros-" + n in by_name}
    assert not inside_wheels, f"uninstallable names in the lock: {sorted(inside_wheels)}"
    assert "ros-rclpy" in by_name and "ros-std-msgs" in by_name
    apt_tools = {"catkin-pkg", "empy", "lark-parser"} & set(by_name)
    assert not apt_tools & kept_names

    # The test set (torch, JAX, warp, Ray, ...) is not in the runtime lock at all
    # (test/test_install_locks.py): nothing of it to drop here.
    assert not {"torch", "jax", "warp-lang", "ray"} & set(by_name)
    non_ros = [ln for n, ln in by_name.items()
               if n not in ros_or_colcon | inside_wheels | apt_tools]
    assert kept == non_ros, "every other pinned line is kept, verbatim and in order"
    # What the workspace needs directly is among them, pins unchanged.
    for must in ("numpy", "scipy", "pin", "cmeel", "cmeel-eigen", "cmeel-urdfdom-headers",
                 "pybind11", "scikit-build-core", "mujoco", "gymnasium", "matplotlib",
                 "xacro", "pyyaml", "rosbags", "viser", "trimesh"):
        assert by_name[must] in kept, must


def test_real_lock_kept_packages_do_not_need_dropped_ones():
    """No kept package depends on a dropped one (else pip pulls it back in).

    Uses the metadata of the packages installed in the running interpreter
    (the .venv that scripts/setup.sh built from the same lock).
    """
    metadata = pytest.importorskip("importlib.metadata")
    markers = pytest.importorskip("packaging.requirements")
    kept_names = set(_names(lfri.filter_lock(LOCK.read_text())))
    _, dropped = lfri.classify(LOCK.read_text())
    dropped_names = {ln.name for ln, _ in dropped}
    env = {"python_version": "3.12", "python_full_version": "3.12.3",
           "sys_platform": "linux", "platform_system": "Linux",
           "implementation_name": "cpython", "extra": ""}
    checked = 0
    for name in sorted(kept_names):
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        checked += 1
        for r in reqs:
            req = markers.Requirement(r)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = lfri.normalize(req.name)
            assert dep not in dropped_names, f"{name} needs {dep}, which the image drops"
    if checked == 0:
        pytest.skip("the lock's packages are not installed in this interpreter")


def test_cli_writes_the_filtered_list(tmp_path):
    out = tmp_path / "lock-ros.txt"
    proc = subprocess.run(
        [sys.executable, str(DOCKER / "lock_for_ros_image.py"), str(LOCK), "-o", str(out),
         "--explain"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == lfri.filter_lock(LOCK.read_text())
    assert "drop ros-rclpy==" in proc.stderr and "kept" in proc.stderr


def test_cli_fails_clearly_on_a_bad_lock(tmp_path):
    bad = tmp_path / "lock.txt"
    bad.write_text("numpy>=2\n")
    proc = subprocess.run([sys.executable, str(DOCKER / "lock_for_ros_image.py"), str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "not pinned" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------
# (b) every file the Dockerfiles COPY exists; nothing COPY'd is dockerignored
# --------------------------------------------------------------------------

def _instructions(dockerfile: Path):
    """(instruction, argument text) of a Dockerfile, continuations joined."""
    out, buf = [], ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def _copy_sources(dockerfile: Path):
    for instr, args in _instructions(dockerfile):
        if instr not in ("COPY", "ADD"):
            continue
        words = shlex.split(args)
        if any(w.startswith("--from") for w in words):
            continue
        paths = [w for w in words if not w.startswith("--")]
        assert len(paths) >= 2, f"{dockerfile.name}: {instr} {args}"
        yield from paths[:-1]


def _dockerignore(dockerfile: Path):
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    return ignore, [ln.strip() for ln in ignore.read_text().splitlines()
                    if ln.strip() and not ln.startswith("#")]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copied_file_exists(dockerfile):
    sources = list(_copy_sources(dockerfile))
    assert sources
    for src in sources:
        assert not src.startswith(("/", "..")), f"{src}: COPY from outside the build context"
        assert glob.glob(str(ROOT / src)), f"{dockerfile.name} copies {src}, which does not exist"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerignore_excludes_local_builds_but_no_copied_path(dockerfile):
    ignore, patterns = _dockerignore(dockerfile)
    assert ignore.is_file()
    assert {".venv", "build", "install", "log", ".git"} <= set(patterns)
    for src in _copy_sources(dockerfile):
        first = src.split("/")[0]
        assert first not in patterns and src not in patterns, f"{src} is dockerignored"


# --------------------------------------------------------------------------
# (c) one shared install script, one lock
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfiles_share_the_install_script_and_the_lock(dockerfile):
    text = dockerfile.read_text()
    instrs = _instructions(dockerfile)
    runs = [a for i, a in instrs if i == "RUN"]
    for step in ("apt", "python", "build"):
        assert any(re.search(rf"docker/install_workspace\.sh {step}\b", r) for r in runs), step
    # No package installs outside the shared script.
    for r in runs:
        assert "install_workspace.sh" in r, f"{dockerfile.name}: RUN outside the script: {r}"
    assert "requirements/runtime.txt" in text
    assert "docker/lock_for_ros_image.py" in text
    sources = list(_copy_sources(dockerfile))
    assert "requirements/runtime.txt" in sources and "src" in sources
    assert ("ENTRYPOINT", '["/usr/local/bin/gato-entrypoint"]') in instrs
    assert ("CMD", '["bash"]') in instrs


def test_ros_dockerfile_base_and_distro():
    instrs = _instructions(DOCKER / "ros.Dockerfile")
    assert instrs[0] == ("ARG", "ROS_DISTRO=kilted")
    assert ("FROM", "ros:${ROS_DISTRO}-ros-base") in instrs
    text = (DOCKER / "ros.Dockerfile").read_text()
    assert "GATO_BUILD_CUDA" not in text


def test_cuda_dockerfile_builds_the_cuda_backend_on_the_cuda_toolkit():
    """The CUDA image builds gato_core with its CUDA backend required (GATO_CUDA=ON, which
    src/gato_core/CMakeLists.txt reads; an image without it must fail to build, not fall back)
    for the architectures of its build argument, on a CUDA devel base, and its texts say what
    of it has run on a GPU (docs/cuda.md)."""
    instrs = _instructions(DOCKER / "cuda.Dockerfile")
    assert instrs[0] == ("ARG", "CUDA_IMAGE=nvidia/cuda:12.8.0-devel-ubuntu24.04")
    assert ("FROM", "${CUDA_IMAGE}") in instrs
    assert ("ARG", "ROS_DISTRO=jazzy") in instrs
    assert ("ARG", 'GATO_CUDA_ARCHS="80-real;90"') in instrs
    runs = [a for i, a in instrs if i == "RUN"]
    assert any("install_workspace.sh ros-base" in r for r in runs)
    build = [r for r in runs if "install_workspace.sh build" in r]
    assert build == ['bash docker/install_workspace.sh build -DGATO_CUDA=ON "-DGATO_CUDA_ARCHS=${GATO_CUDA_ARCHS}"']
    cmake = (ROOT / "src" / "gato_core" / "CMakeLists.txt").read_text()
    assert re.search(r'set\(GATO_CUDA "AUTO" CACHE STRING', cmake) and 'GATO_CUDA_ARCHS' in cmake
    assert "GATO_BUILD_CUDA" not in cmake          # the one switch is GATO_CUDA
    readme = (DOCKER / "README.md").read_text()
    assert "GATO_CUDA=ON" in readme and "docs/cuda.md" in readme and "no CUDA backend" not in readme
    assert (ROOT / "docs" / "cuda.md").is_file()


def test_install_script_defines_the_packages_and_the_build():
    text = (DOCKER / "install_workspace.sh").read_text()
    for pkg in ("ros2-control", "ros2-controllers", "controller-manager",
                "joint-state-broadcaster", "effort-controllers", "xacro",
                "robot-state-publisher", "rosbag2", "rosbag2-storage-mcap", "rqt",
                "rqt-reconfigure", "rqt-plot"):
        assert re.search(rf"^\s+{re.escape(pkg)}\b", text, re.M), pkg
    assert 'pkgs+=("ros-${ROS_DISTRO}-${p}")' in text
    for sys_pkg in ("python3-venv", "build-essential", "cmake"):
        assert re.search(rf"^\s+{sys_pkg}$", text, re.M), sys_pkg
    assert 'python3 -m venv --system-site-packages "$GATO_VENV"' in text
    assert "docker/lock_for_ros_image.py requirements/runtime.txt" in text
    assert "--symlink-install" in text and "-DCMAKE_BUILD_TYPE=Release" in text
    assert '"-DPython_EXECUTABLE=$py"' in text and 'GATO_VENV="${GATO_VENV:-/opt/gato-venv}"' in text
    assert '-m cmeel cmake' in text and 'CMAKE_PREFIX_PATH="${cmeel_prefix}' in text


def test_entrypoint_sources_ros_venv_workspace_then_execs():
    text = (DOCKER / "entrypoint.sh").read_text()
    order = [text.index(s) for s in (
        'source "/opt/ros/${ROS_DISTRO',
        'source "${GATO_VENV:-/opt/gato-venv}/bin/activate"',
        'source "${GATO_WS:-/opt/gato_ws}/install/setup.bash"',
        'exec "$@"')]
    assert order == sorted(order)
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE=" not in text and "ROS_DOMAIN_ID=" not in text


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_parse(script):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert script.read_text().startswith("#!/usr/bin/env bash\n")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_pass_shellcheck(script):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run([shellcheck, "-S", "warning", str(script)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_install_script_rejects_unknown_steps():
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    proc = subprocess.run([bash, str(DOCKER / "install_workspace.sh"), "frobnicate"],
                          capture_output=True, text=True, check=False,
                          env={"ROS_DISTRO": "kilted", "PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "unknown step 'frobnicate'" in proc.stderr


def test_readme_documents_build_run_and_inputs():
    text = (DOCKER / "README.md").read_text()
    for needle in ("docker build -f docker/ros.Dockerfile -t gato:kilted .",
                   "--net=host", "--ipc=host", "--cap-add=SYS_NICE",
                   "--ulimit rtprio=99", "--ulimit memlock=-1", "--gpus all",
                   "ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "PREEMPT_RT",
                   "uname -v", "/sys/kernel/realtime", "isolcpus", "limits.conf",
                   "cpu_affinity", "thread_priority", "requirements/runtime.txt",
                   "docker/lock_for_ros_image.py",
                   "ros2 launch gato_bringup hardware.launch.xml"):
        assert needle in text, needle
    # Every launch file the README names exists.
    for name in re.findall(r"gato_bringup (\w+\.launch\.\w+)", text):
        assert (ROOT / "src" / "gato_bringup" / "launch" / name).is_file(), name
    assert "does not exist" not in text
