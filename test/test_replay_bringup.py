"""Issue 8 acceptance on the real graph: record the multi-process simulation bringup
(MuJoCo world, controller, reference and the gato_ros recorder over DDS) and replay the bag
with the ``gato replay`` command: with a link 20 % heavier in the world only, the report names
the joints that carry it. The nominal run's checks (every tick replayed to 1e-9 N*m, no warm
start re-anchored, the bag read by rosbags' AnyReader) are made on the recorded
FollowJointTrajectory bringup of test_ros_action_system.py (check_posture_ticks_replay); the
CLI's own verdict on a real bringup's bag: test_ros_estimator_system.py."""
import json
import subprocess
import sys

import pytest

from conftest import import_or_skip

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
system = import_or_skip("test_ros_system", "the ROS system-test helpers need rclpy and the workspace")

pytestmark = pytest.mark.ros


def _replay(bag, out):
    proc = subprocess.run([sys.executable, "-m", "gato", "replay", str(bag), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    return proc, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_a_heavier_link_in_the_world_is_named_by_the_report(tmp_path, ros_env):
    system.share()
    bag, _ = system.run_sim(tmp_path, ros_env, "heavy", 2.0, extra=["link_mass_scale:=L4:1.2"])
    proc, s = _replay(bag, tmp_path / "replay")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pred = s["prediction"]
    # L4 carries on A1..A4; its weight loads the pitch joints A2 (most) and A4; A5..A7 are beyond it
    assert pred["suspects"][0] == "A2", pred
    assert max(pred["rms_tau_Nm"], key=pred["rms_tau_Nm"].get) == "A2"
    assert all(pred["rms_tau_Nm"][j] < 0.05 for j in ("A5", "A6", "A7")), pred["rms_tau_Nm"]
    assert "largest prediction-error contributors: A2" in proc.stdout
