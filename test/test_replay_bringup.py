"""Issue 8 acceptance on the real graph: record the multi-process simulation bringup
(MuJoCo world, controller, reference and the gato_ros recorder over DDS), replay the bag
with the ``gato replay`` command, and read it with rosbags' AnyReader, an independent
reader. With a link 20 % heavier in the world only, the report names the joints that
carry it."""
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
def test_recorded_bringup_replays_to_1e9_and_opens_in_anyreader(tmp_path, ros_env):
    system.share()
    # 1 s is enough here (was 2 s): the recorded FollowJointTrajectory bringup of
    # test_ros_targets_system.py replays its ~970 ticks to 1e-9 too, posture ticks included
    bag, _ = system.run_sim(tmp_path, ros_env, "nominal", 1.0)
    proc, s = _replay(bag, tmp_path / "replay")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "replay MATCHES the recording" in proc.stdout
    assert s["compared"] >= 95 and s["matched"] and s["max_du"] <= 1e-9 and s["anchored"] == 0
    assert s["urdf_matches"] is True and not s["reconstructed"]
    assert "replay MATCHES the recording" in (tmp_path / "replay" / "report.md").read_text()

    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as reader:
        conns = {c.topic: c for c in reader.connections}
        for topic in ("/joint_states", "/gato_controller/solve_input", "/gato_controller/step_result",
                      "/gato_controller/solver_stats", "/gato_controller/command", "/gato_controller/status",
                      "/gato_recorder/parameter_snapshot"):
            assert topic in conns, topic
            assert conns[topic].msgdef.data, f"{topic}: no message definition stored"
        c = conns["/gato_controller/solve_input"]
        _, _, raw = next(reader.messages(connections=[c]))
        m = reader.deserialize(raw, c.msgtype)
        assert len(m.x_measured) == 14 and json.loads(m.config_json)["robot"] == "iiwa14"


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
