"""Closed-loop pose figure-8 in MuJoCo (issue 30), CI-sized: one held-out scenario per arm
(gato.tasks.fig8_scenarios seed 301, not used to choose the orientation weight) through
bench/bench_pose_fig8.py's run: the BSQP planner with the arm's shipped weights and the shipped
ORIENTATION_WEIGHTS tracks the figure-8 while the orientation sweeps +/- 30 deg.

Measured (this scenario, docs/benchmarks.md "Pose figure-8"): orientation mean 0.17 deg (iiwa14) /
0.19 deg (fr3); position 6.6 / 6.9 mm against 3.6 / 3.3 mm position-only (x1.8 / x2.1). The bounds
below keep a margin; they do NOT prove issue 30's position criterion (within 1.2x of the
position-only run), which the study misses (x1.8-3.6; docs/status.md)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_pose_fig8 as B  # noqa: E402


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_pose_figure8_tracks_the_orientation_in_mujoco(robot):
    sc = B.scenarios(robot, [301], 1)[0]
    pos, pose = B.references(robot, sc)
    base = B.run(robot, sc, pos)
    r = B.run(robot, sc, pose)
    assert base["stop"] == r["stop"] == "sim_time" and r["ticks"] == base["ticks"] > 100
    assert base["rot_deg"] is None and r["rot_deg"] is not None
    assert r["rot_deg"] <= 0.6, r                    # measured 0.17 / 0.19 deg
    assert r["rot_max_deg"] <= 2.0, r                # measured 0.75 / 0.57 deg
    assert r["pos_mm"] <= 3.0 * base["pos_mm"], (r, base)   # measured x1.8 / x2.1
    assert base["pos_mm"] <= 6.0, base
