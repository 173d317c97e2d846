"""gato replay on bags of lockstep runs recorded in this process (test/replay_fixtures.py:
the controller / world / reference logic of gato_ros, rclpy CDR, rosbags writer): exact
reproduction, discrepancy detection, model-versus-reality attribution, damaged and partial
bags, other message versions, and the replayable worst-tick cases."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (scripts/setup.sh)")

import gato  # noqa: E402
from gato.__main__ import main as gato_main  # noqa: E402
from gato.planners.shipped_weights import shipped_weights  # noqa: E402
from gato.replay import replay_bag, rerun_cases  # noqa: E402
from replay_fixtures import record_lockstep_run  # noqa: E402

JOINTS = [f"A{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def nominal(tmp_path_factory):
    """One second of nominal lockstep control (100 MPC ticks), MCAP."""
    return record_lockstep_run(tmp_path_factory.mktemp("nominal") / "bag", seconds=1.0)


def _mcap(bag: Path) -> Path:
    return next(bag.glob("*.mcap"))


def test_replay_reproduces_the_recorded_commands_exactly(nominal, tmp_path):
    s = replay_bag(nominal, tmp_path / "out", log=None)
    assert s["ticks"] == 100 and s["compared"] == 100 and s["matched"]
    assert s["max_du"] <= 1e-9 and s["max_dplan"] <= 1e-9 and s["first_over"] is None and s["anchored"] == 0
    assert s["problems"] == [] and s["complete"] and not s["reconstructed"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "replay MATCHES the recording: all 100 commands agree to 1e-09 N*m" in report
    for png in ("replay.png", "model_vs_reality.png"):
        assert (tmp_path / "out" / png).stat().st_size > 10_000 and f"]({png})" in report
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["matched"] is True
    # the nominal MuJoCo world is what the model predicts, to within the floor
    assert s["prediction"]["suspects"] == [] and max(s["prediction"]["rms_tau_Nm"].values()) < 0.05


def test_replay_with_a_different_model_differs_from_the_first_tick(nominal, tmp_path):
    urdf = Path(gato.robot_urdf("iiwa14"))
    text = urdf.read_text()
    # the URDF of another robot build: link 4 a bit heavier (the solver's model, not the world)
    i = text.index('<link name="L4"')
    j = text.index("<mass value=", i)
    k = text.index('"', j + len("<mass value=") + 1)
    mass = float(text[j + len('<mass value="'):k])
    other = tmp_path / "iiwa14_heavier.urdf"
    other.write_text(text[:j] + f'<mass value="{mass * 1.1!r}' + text[k:])
    s = replay_bag(nominal, tmp_path / "out", urdf=other, log=None)
    assert not s["matched"] and s["over_tolerance"] > 90
    assert s["first_over"]["tick"] == 1 and s["first_over"]["du"] > 1e-6
    assert s["urdf_matches"] is False
    assert any("the URDF differs from the recorded one" in p for p in s["problems"])
    assert "replay DIFFERS" in (tmp_path / "out" / "report.md").read_text()
    assert gato_main(["replay", str(nominal), "--out", str(tmp_path / "cli"), "--urdf", str(other), "--quiet"]) == 1


@pytest.mark.parametrize("link, expect_zero", [("L4", ["A5", "A6", "A7"]), ("L2", ["A3", "A4", "A5", "A6", "A7"])])
def test_model_error_in_the_world_names_the_joints_that_carry_the_link(tmp_path, link, expect_zero):
    """A link 20 % heavier in the simulated world only: the report's largest contributors are
    the joints whose gravity load the extra mass changes most (pinocchio, link inertia scaled,
    at the recorded states), and the joints beyond the link show nothing."""
    import pinocchio as pin

    bag = record_lockstep_run(tmp_path / "bag", seconds=1.0, sim={"link_mass_scale": f"{link}:1.2"})
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["matched"], "a model error in the world must not change the replay of the controller"
    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    heavy = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    jid = heavy.frames[heavy.getFrameId(link)].parentJoint
    heavy.inertias[jid] = pin.Inertia(heavy.inertias[jid].mass * 1.2, heavy.inertias[jid].lever,
                                      heavy.inertias[jid].inertia * 1.2)
    d0, d1 = model.createData(), heavy.createData()
    from gato.bagio import read_bag

    qs = [np.asarray(m.position) for _, m in read_bag(bag, ["/joint_states"]).messages["/joint_states"]]
    z = np.zeros(7)
    dg = np.array([pin.rnea(heavy, d1, q, z, z) - pin.rnea(model, d0, q, z, z) for q in qs])
    expected = [JOINTS[i] for i in np.argsort(-np.sqrt(np.mean(dg ** 2, axis=0)))]
    pred = s["prediction"]
    ranked = sorted(pred["rms_tau_Nm"], key=lambda j: -pred["rms_tau_Nm"][j])
    assert pred["suspects"] and pred["suspects"][0] == expected[0]
    assert ranked[0] == expected[0]
    for j in expect_zero:
        assert pred["rms_tau_Nm"][j] < 0.05, f"{j} lies beyond {link}: its model is not off"
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"predicts worst are **{', '.join(pred['suspects'])}**" in report


def test_parameter_changes_during_the_run_are_replayed(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.6,
                              changes_at={20: {"q_cost": 6.0, "u_cost": 1e-5}, 40: {"linsys": "pcg", "mu": 20.0}})
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["matched"] and s["compared"] == 60 and s["max_du"] <= 1e-9


def test_a_bag_without_solve_input_is_reconstructed_from_the_parameter_snapshots(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.6, solve_input=False,
                              changes_at={30: {"q_cost": 6.0}})
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["reconstructed"] and s["compared"] == 60
    assert s["matched"], "lockstep with reference_sync: the reconstruction is exact"
    assert any("tick inputs are reconstructed" in p for p in s["problems"])
    assert "inputs reconstructed" in (tmp_path / "out" / "report.md").read_text()


def test_sqlite3_storage_as_ros2_bag_record_writes_it(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, storage="sqlite3")
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["storage"] == "sqlite3" and s["matched"] and s["compared"] == 30


@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_a_truncated_bag_reports_what_it_can(nominal, tmp_path, fraction):
    """A recorder killed mid-run: the file ends early, no footer, no metadata.yaml."""
    bag = tmp_path / "bag"
    bag.mkdir()
    data = _mcap(nominal).read_bytes()
    (bag / _mcap(nominal).name).write_bytes(data[:int(len(data) * fraction)])
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert not s["complete"]
    assert any("truncated" in p for p in s["problems"])
    assert 0 < s["ticks"] < 100 and s["matched"], "the ticks before the damage replay exactly"
    report = (tmp_path / "out" / "report.md").read_text()
    assert "INCOMPLETE" in report and "truncated" in report


def test_corrupted_bytes_are_reported_and_the_rest_replayed(nominal, tmp_path):
    bag = tmp_path / "bag"
    shutil.copytree(nominal, bag)
    f = _mcap(bag)
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 64] = bytes(range(64))
    f.write_bytes(bytes(data))
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["problems"], "the damage is reported"
    assert s["ticks"] > 0 and (tmp_path / "out" / "report.md").is_file()


def test_missing_topics_are_named_and_the_rest_is_reported(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, drop=("/gato_controller/command",))
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert "/gato_controller/command: not in the bag" in s["problems"]
    assert s["ticks"] == 30 and s["compared"] == 0, "re-solved, nothing recorded to compare with"
    assert "no recorded commands to compare" in (tmp_path / "out" / "report.md").read_text()
    bag2 = record_lockstep_run(tmp_path / "bag2", seconds=0.3, drop=("/joint_states",))
    s2 = replay_bag(bag2, tmp_path / "out2", log=None)
    assert "/joint_states: not in the bag" in s2["problems"] and s2["matched"] and "prediction" not in s2


def test_another_solve_input_version_is_named_and_the_rest_reported(tmp_path):
    """A SolveInput definition from another gato (a renamed field): clear message; the
    model-versus-reality part (joint states + commands) is still reported."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    from gato_ros.bag import gato_msgs_dir

    text = (gato_msgs_dir() / "SolveInput.msg").read_text().replace("float64[] xu_warm", "float64[] warm_start")
    ts = get_typestore(Stores.ROS2_KILTED)
    ts.register(get_types_from_msg(text, "gato_msgs/msg/SolveInput"))
    Msg = ts.types["gato_msgs/msg/SolveInput"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]

    def encode(si):
        m = Msg(header=Header(stamp=Time(sec=si.stamp_ns // 10**9, nanosec=si.stamp_ns % 10**9), frame_id=""),
                tick=si.tick, joint_names=list(si.joint_names), x_measured=si.x_measured, reference=si.reference,
                warm_rows=si.xu_warm.shape[0], warm_start=si.xu_warm.ravel(), dt_elapsed=si.dt_elapsed,
                budget_s=si.budget_s, reset=si.reset, config_json=si.config_json, solver_state_rows=0,
                solver_state=np.zeros(0), capped_out=False, force_reseed=False, wrench_rows=0,
                wrench_hypotheses=np.zeros(0), orientation_weight=si.orientation_weight, posture_rows=0,
                posture_q=np.zeros(0), posture_weight=np.zeros(0))
        return bytes(ts.serialize_cdr(m, "gato_msgs/msg/SolveInput"))

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, typestore_override=ts, solve_input_encoder=encode)
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert any("no field 'xu_warm'" in p for p in s["problems"]), s["problems"]
    assert s["prediction"]["intervals"] == 29
    assert (tmp_path / "out" / "report.md").is_file()


def test_worst_ticks_are_replayable_cases(nominal, tmp_path, capsys):
    s = replay_bag(nominal, tmp_path / "out", worst=4, log=None)
    path = Path(s["cases"])
    z = np.load(path)
    assert z["x"].shape == (4, 14) and z["goals"].shape == (4, 6 * 32) and z["xu_warm"].shape[0] == 4
    from gato.planners import controller_setup
    assert str(z["urdf_sha256"]) == controller_setup.urdf_sha256(gato.robot_urdf("iiwa14"))
    assert str(z["module_name"]) == gato.module_name("iiwa14", 32)
    # the recorded solver's weights: the controller's default for iiwa14 (its shipped weights)
    assert json.loads(str(z["solver_params_json"]))["q_cost"] == shipped_weights("iiwa14")["q_cost"]
    np.testing.assert_array_equal(z["u_replayed"], z["u_recorded"])
    r = rerun_cases(path)
    assert r["n"] == 4 and r["match"].all() and r["urdf_matches"]
    assert gato_main(["replay", str(path)]) == 0
    assert "all cases reproduce" in capsys.readouterr().out
    # a case file whose expected numbers disagree with this solver: exit 1, the case named
    bad = dict(z)
    bad["u_standalone"] = z["u_standalone"] + np.r_[1e-3, np.zeros(6)]
    np.savez(tmp_path / "bad.npz", **bad)
    assert gato_main(["replay", str(tmp_path / "bad.npz")]) == 1
    assert "DIFFERS" in capsys.readouterr().out


def test_bad_input_gives_a_clear_message(tmp_path, capsys):
    assert gato_main(["replay", str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    assert gato_main(["replay", str(tmp_path / "x.npz")]) == 2
    assert "not a readable .npz case file" in capsys.readouterr().err
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    assert gato_main(["replay", str(tmp_path / "other.npz")]) == 2
    assert "not a gato replay case file (missing arrays" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert gato_main(["replay", str(tmp_path / "empty")]) == 2
    assert "not a rosbag2 bag" in capsys.readouterr().err


def test_html_report_is_one_self_contained_page(nominal, tmp_path):
    assert gato_main(["replay", str(nominal), "--out", str(tmp_path / "out"), "--html", "--quiet"]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "replay MATCHES" in page and "<table>" in page


def test_torque_sources_agree_in_lockstep_and_effort_is_required_when_asked(nominal, tmp_path):
    """Lockstep: the world reports the command it applied as the joint states' effort, so
    both torque sources give the same model residual; a bag without efforts refuses 'effort'."""
    a = replay_bag(nominal, tmp_path / "a", torque_source="effort", worst=0, log=None)["prediction"]
    b = replay_bag(nominal, tmp_path / "b", torque_source="command", worst=0, log=None)["prediction"]
    assert (a["torque_source"], b["torque_source"]) == ("effort", "command")
    for j in JOINTS:
        assert a["rms_tau_Nm"][j] == pytest.approx(b["rms_tau_Nm"][j], rel=1e-9, abs=1e-12)
    from gato.replay import predict_errors

    with pytest.raises(ValueError, match="do not all carry efforts"):
        predict_errors(gato.robot_urdf("iiwa14"), JOINTS, np.array([0, 10_000_000]), np.zeros((2, 14)), {},
                       efforts=np.full((2, 7), np.nan), torque_source="effort")
    with pytest.raises(ValueError, match="torque_source: expected"):
        predict_errors(gato.robot_urdf("iiwa14"), JOINTS, np.array([0, 10_000_000]), np.zeros((2, 14)), {},
                       torque_source="measured")
