"""gato_ros.analysis over a bag of a lockstep run (the nodes' logic in one process, real CDR,
test/replay_fixtures.py): the summary's tracking series, and its plot through the project's
one tracking plot (gato.plotting.plot_tracking)."""
import numpy as np
import pytest

from conftest import import_or_skip

an = import_or_skip("gato_ros.analysis", "build the workspace and source install/setup.bash")


def test_summary_series_and_the_one_tracking_plot(tmp_path):
    from replay_fixtures import record_lockstep_run

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3)
    s = an.summarize_bag(bag, "iiwa14")
    ser = s["series"]
    assert s["n_ticks"] == len(ser["t"]) >= 25 and ser["ee"].shape == ser["ref"].shape == (s["n_ticks"], 3)
    np.testing.assert_allclose(ser["err"], np.linalg.norm(ser["ee"] - ser["ref"], axis=1))
    assert s["tracking_error_m"]["mean"] == pytest.approx(float(np.mean(ser["err"])))
    out = an.plot_tracking(s, tmp_path / "plots" / "tracking.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = {**s, "series": {"t": np.zeros(0), "ee": np.zeros((0, 3)), "ref": np.zeros((0, 3)), "err": np.zeros(0)}}
    with pytest.raises(ValueError, match="no ticks"):
        an.plot_tracking(empty, tmp_path / "empty.png")
    # a position-only run: no orientation error in the summary
    assert s["orientation_error_deg"] == {} and np.all(np.isnan(ser["rot_err"]))
    assert "orientation" not in an.format_summary(s)


def test_a_pose_run_summary_prints_the_orientation_error_beside_the_position_error(tmp_path):
    """Issue 30: a run whose reference carries orientations (the reference node's sweep): the
    summary's orientation error (the angle of R_ref^T R_ee at every tick, what the printed summary
    and tracking.png show) against an independent computation from the series."""
    import pinocchio as pin

    from gato.core.bsqp import robot_info, robot_urdf
    from replay_fixtures import record_lockstep_run

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, reference={"orientation": "sweep"})
    s = an.summarize_bag(bag, "iiwa14")
    ser, ro = s["series"], s["orientation_error_deg"]
    assert ro["n"] == s["n_ticks"] == len(ser["rot_err"]) >= 25 and np.all(np.isfinite(ser["rot_err"]))
    assert ro["mean"] == pytest.approx(float(np.degrees(ser["rot_err"]).mean()))
    assert 0.0 < ro["mean"] < 5.0 and ro["max"] >= ro["mean"]
    text = an.format_summary(s)
    assert "EE tracking error: mean" in text and f"EE orientation error: mean {ro['mean']:.2f} deg" in text
    # the first tick against the reference's window at that stamp, recomputed here
    from gato_ros.reference_logic import ReferenceLogic

    model = pin.buildModelFromUrdf(str(robot_urdf("iiwa14")))
    data = model.createData()
    fid = model.getFrameId(robot_info("iiwa14")["ee_frame"])
    t0 = int(round(ser["t"][0] * 1e9))
    w = ReferenceLogic({"robot": "iiwa14", "orientation": "sweep"}).window(t0)
    q = an.read_bag(bag, topics=["/joint_states"])["/joint_states"][0][1].position
    pin.forwardKinematics(model, data, np.asarray(q, dtype=np.float64))
    R = pin.updateFramePlacement(model, data, fid).rotation
    assert ser["rot_err"][0] == pytest.approx(np.linalg.norm(pin.log3(pin.exp3(w.orientations[0]).T @ R)), abs=1e-9)
    assert an.plot_tracking(s, tmp_path / "tracking.png").read_bytes()[:4] == b"\x89PNG"
