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
