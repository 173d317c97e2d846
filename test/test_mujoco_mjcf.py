"""The MJCF that hardware.launch.xml mujoco:=true generates for mujoco_ros2_control
(gato_ros.mjcf), and the xacro arguments that put it into the ros2_control hardware block.

- a motor per joint, named like the joint (gear 1, ctrl range = the URDF effort limit);
- a ``home`` keyframe at the ready pose the controller's parameter files and the reference
  node use (gato.tasks.Q_READY), zero velocity and ctrl;
- the same dynamics as gato.worlds.MuJoCoWorld (the project's MuJoCo model of the URDF):
  MuJoCo's forward dynamics of the generated file with ctrl = u equals MuJoCoWorld.qdd(q, dq, u)
  (to the 6 significant digits MJCF text keeps of frame orientations);
- generation is content-addressed and idempotent; bad input gives a clear error.
"""
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import import_or_skip

mujoco = import_or_skip("mujoco", "install the lock (scripts/setup.sh)")
gato = import_or_skip("gato", "build gato_core (scripts/setup.sh)")
mjcf = import_or_skip("gato_ros.mjcf", "build the workspace (scripts/setup.sh; source scripts/activate.sh)")

from gato_ros import params  # noqa: E402

ARMS = ["iiwa14", "indy7", "fr3", "gen3", "ur5e"]


@pytest.mark.parametrize("robot", ARMS)
def test_motors_named_like_the_joints_and_home_keyframe(robot, tmp_path):
    path = mjcf.write_mjcf(robot, tmp_path)
    m = mujoco.MjModel.from_xml_path(str(path))
    joints = [m.joint(i).name for i in range(m.njnt)]
    assert joints == list(gato.robot_info(robot)["joints"])
    assert [m.actuator(i).name for i in range(m.nu)] == joints
    for i, j in enumerate(joints):
        assert m.actuator_trnid[i, 0] == m.joint(j).id
        assert m.actuator_gear[i, 0] == 1.0 and m.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_NONE
        lo, hi = m.jnt_actfrcrange[m.joint(j).id]
        assert hi > 0 and tuple(m.actuator_ctrlrange[i]) == (lo, hi)
    k = m.key("home").id
    np.testing.assert_array_equal(m.key_qpos[k], np.asarray(params._q_ready(robot)))
    assert not m.key_qvel[k].any() and not m.key_ctrl[k].any()
    assert m.opt.timestep == 0.001


@pytest.mark.parametrize("robot", ["iiwa14", "ur5e"])
def test_same_dynamics_as_mujoco_world(robot, tmp_path):
    from gato.worlds import MuJoCoWorld

    world = MuJoCoWorld(gato.robot_info(robot)["urdf"], timestep=0.001)
    m = mujoco.MjModel.from_xml_path(str(mjcf.write_mjcf(robot, tmp_path)))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(7)
    lim = m.actuator_ctrlrange[:, 1]
    for _ in range(5):
        q = rng.uniform(-2.0, 2.0, m.nq)
        dq = rng.uniform(-1.0, 1.0, m.nv)
        u = rng.uniform(-0.5, 0.5, m.nu) * lim
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, dq, u
        mujoco.mj_forward(m, d)
        # MJCF text keeps 6 significant digits of the frame quaternions (0.707107): the
        # accelerations agree to ~1e-6 relative, far below any effect on the closed loop.
        np.testing.assert_allclose(d.qacc, world.qdd(q, dq, u), rtol=1e-5, atol=1e-6)


def test_write_is_idempotent_and_content_addressed(tmp_path):
    a = mjcf.write_mjcf("iiwa14", tmp_path)
    mtime = a.stat().st_mtime_ns
    b = mjcf.write_mjcf("iiwa14", tmp_path)
    assert a == b and b.stat().st_mtime_ns == mtime
    assert a.name.startswith("iiwa14-") and a.read_text() == mjcf.mjcf_text("iiwa14")
    assert [p.name for p in tmp_path.iterdir()] == [a.name]     # no temporary file left


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="robot: unknown robot 'nope'"):
        mjcf.mjcf_text("nope")
    with pytest.raises(ValueError, match="floating base"):
        mjcf.mjcf_text("go2")
    with pytest.raises(ValueError, match="keyframe"):
        mjcf.mjcf_text("iiwa14", keyframe="")


def test_cli_prints_the_path(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gato_ros.mjcf", "--robot", "iiwa14", "--out-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout == str(mjcf.write_mjcf("iiwa14", tmp_path))       # no newline: used inside a command line
    given = subprocess.run([sys.executable, "-m", "gato_ros.mjcf", "--robot", "iiwa14", f"--model={out.stdout}"],
                           capture_output=True, text=True, timeout=120)
    assert given.returncode == 0 and given.stdout == out.stdout
    missing = subprocess.run([sys.executable, "-m", "gato_ros.mjcf", "--robot", "iiwa14",
                              f"--model={tmp_path}/none.xml"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "mujoco_model: file not found" in missing.stderr


def test_xacro_puts_the_mujoco_params_in_the_hardware_block(tmp_path):
    """The generated <robot>.urdf.xacro: mujoco_model (non-empty) adds mujoco_model, headless and
    initial_keyframe to <hardware>; without it the block has the plugin only (mock / driver)."""
    xacro = shutil.which("xacro")
    if xacro is None:
        pytest.skip("xacro is not installed (pip: xacro, in the lock)")
    src = tmp_path / "iiwa14.urdf.xacro"
    # the committed file is generated from the schema (test_ros_params checks that)
    src.write_text(params.ros2_control_xacro("iiwa14"))   # includes $(find gato_description)/...

    def hardware(*args):
        out = subprocess.run([xacro, str(src), *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        hw = ET.fromstring(out.stdout).find("ros2_control/hardware")
        return hw.findtext("plugin"), {p.get("name"): p.text for p in hw.findall("param")}

    plugin, ps = hardware()
    assert plugin == "mock_components/GenericSystem" and ps == {}
    plugin, ps = hardware("hardware_plugin:=mujoco_ros2_control/MujocoSystemInterface", "mujoco_model:=/x/s.xml",
                          "initial_keyframe:=ready")
    assert plugin == "mujoco_ros2_control/MujocoSystemInterface"
    assert ps == {"mujoco_model": "/x/s.xml", "headless": "true", "initial_keyframe": "ready"}
