"""The MuJoCo scene (MJCF) of a registered robot for mujoco_ros2_control.

``hardware.launch.xml mujoco:=true`` loads ``mujoco_ros2_control/MujocoSystemInterface``
as the ros2_control hardware; that plugin needs an MJCF file with one actuator per
controlled joint. :func:`mjcf_text` builds it from the robot's URDF exactly the way
:class:`gato.worlds.MuJoCoWorld` builds its model (same MjSpec: contacts off, joint
damping / armature / friction zeroed, position limits not enforced, 1 ms semi-implicit
Euler, auto-reset off so a divergence is reported), and adds

- one ``motor`` actuator per joint, named like the joint (gear 1: ctrl is the joint
  torque in N*m; ctrl range = the URDF effort limit, as a real drive saturates);
- a ``home`` keyframe at the robot's ready pose (gato.tasks.Q_READY, the pose the
  reference node's figure-8 is centred on and the controller's parameter files use),
  zero velocity and zero ctrl.

The file is MuJoCo's own XML of that MjSpec (``MjSpec.to_xml``); its text keeps 6
significant digits of frame orientations, so its accelerations match MuJoCoWorld's to
about 1e-6 relative (test/test_mujoco_mjcf.py).

Why generated at launch time instead of shipped: the MJCF names its meshes by absolute
path (MuJoCo resolves them from the file, and the URDF's meshes live in the installed
gato_description share folder, which moves with the install), and it must equal the
model the rest of the project simulates; generating it from the installed URDF with the
installed MuJoCo cannot drift from either. It takes about a second. The file is written
once per content (``<cache>/<robot>-<sha256[:12]>.xml``, atomically), so parallel
launches share it safely.

CLI (what the launch file runs; prints the path, no newline)::

    python3 -m gato_ros.mjcf --robot iiwa14 [--model=PATH] [--out-dir DIR]

``--model`` non-empty: that file is used as is (checked to exist) and its path printed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["KEYFRAME", "mjcf_text", "default_cache_dir", "write_mjcf", "main"]

KEYFRAME = "home"


def _ready_pose(robot: str) -> list:
    from .params import _q_ready

    return _q_ready(robot)


def mjcf_text(robot: str, keyframe: str = KEYFRAME) -> str:
    """The MJCF (XML text) of registered ``robot`` for mujoco_ros2_control: MuJoCoWorld's model of
    its URDF plus a motor per joint (named like the joint, ctrl in N*m) and a keyframe
    ``keyframe`` at the ready pose (qpos (nq,) rad, qvel 0, ctrl 0).

    ValueError for an unknown robot, a floating-base robot (mujoco_ros2_control drives joints
    of a fixed-base arm here) or an empty keyframe name."""
    from gato.core.bsqp import robot_info
    import numpy as np
    from gato.robots.registry import all_robots
    from gato.sim.mujoco_world import MuJoCoWorld

    info = robot_info(robot)
    if not info:
        raise ValueError(f"robot: unknown robot {robot!r}; registered: {', '.join(sorted(all_robots()))}")
    if info.get("floating_base"):
        raise ValueError(f"robot: {robot!r} has a floating base; the MuJoCo ros2_control bringup supports "
                         "fixed-base arms")
    if not isinstance(keyframe, str) or not keyframe.strip():
        raise ValueError(f"keyframe: expected a non-empty name, got {keyframe!r}")
    import mujoco

    world = MuJoCoWorld(info["urdf"], timestep=0.001)
    # MuJoCoWorld keeps the MjSpec it compiled; a copy is extended so the world's model is untouched.
    spec = world._spec.copy()
    q0 = np.asarray(_ready_pose(robot), dtype=np.float64)
    if q0.shape != (world.nq,):
        raise ValueError(f"robot: ready pose of {robot!r} has {q0.size} entries, the model nq={world.nq}")
    for name in world.joint_names:
        lo, hi = (float(v) for v in world.model.jnt_actfrcrange[world.model.joint(name).id])
        act = spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_motor()
        act.gear[0] = 1.0
        if hi > lo:
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.ctrlrange = [lo, hi]
    spec.add_key(name=keyframe, qpos=q0.tolist(), qvel=[0.0] * world.nv, ctrl=[0.0] * world.nv)
    spec.compile()  # raises on an inconsistent model before anyone loads the file
    return spec.to_xml()


def default_cache_dir() -> Path:
    """Where generated scenes go: $ROS_HOME/gato/mjcf (ROS_HOME defaults to ~/.ros)."""
    home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    return Path(home) / "gato" / "mjcf"


def write_mjcf(robot: str, out_dir=None) -> Path:
    """Write :func:`mjcf_text` for ``robot`` to ``out_dir`` (default :func:`default_cache_dir`) as
    ``<robot>-<sha256[:12]>.xml`` unless that file exists; return its absolute path. The write is
    atomic (temporary file + rename), so concurrent launches never read half a file."""
    text = mjcf_text(robot)
    out = Path(out_dir) if out_dir is not None else default_cache_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = (out / f"{robot}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.xml").resolve()
    if not path.is_file() or path.read_text() != text:
        fd, tmp = tempfile.mkstemp(prefix=f".{robot}-", suffix=".xml", dir=out)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m gato_ros.mjcf", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", required=True, help="registered robot (gato.robots.all_robots())")
    ap.add_argument("--model", default="", help="use this MJCF instead of generating one (empty: generate)")
    ap.add_argument("--out-dir", default=None, help="cache folder (default $ROS_HOME/gato/mjcf)")
    a = ap.parse_args(argv)
    if a.model:
        p = Path(a.model).expanduser().resolve()
        if not p.is_file():
            print(f"mujoco_model: file not found: {a.model}", file=sys.stderr)
            return 2
        sys.stdout.write(str(p))
        return 0
    try:
        path = write_mjcf(a.robot, a.out_dir)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    sys.stdout.write(str(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
