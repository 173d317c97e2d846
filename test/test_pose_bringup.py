"""A pose reference over DDS (issue 30): the lockstep simulation bringup (MuJoCo world,
controller, reference node with ``orientation:=sweep``, recorder) as separate processes. The
reference's orientations reach the controller over gato_msgs/EEReference, the controller tracks
them, and its ControllerStatus carries the EE orientation error beside the position error; the
bag's summary (what ``scripts/sim.sh --orientation sweep`` prints) agrees.

No wall-clock time is asserted (2 shared cores)."""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
from test_ros_system import ROBOT, run_sim, share  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.mark.slow
def test_a_sweeping_pose_reference_is_tracked_and_its_orientation_error_reported_over_dds(tmp_path, ros_env):
    share()
    from gato_ros.analysis import format_summary, summarize_bag
    from gato_ros.bag import read_bag

    bag, out = run_sim(tmp_path, ros_env, "pose1s", 1.0, extra=["orientation:=sweep"])
    s = summarize_bag(bag, ROBOT)
    assert s["n_ticks"] >= 95 and set(s["command_sources"]) == {"mpc"}, out[-3000:]
    ro = s["orientation_error_deg"]
    assert ro and ro["n"] == s["n_ticks"], ro                 # every tick had a target orientation
    assert ro["mean"] <= 1.0, ro                              # measured 0.68 deg (max 2.7: the start)
    assert s["tracking_error_m"]["mean"] <= 0.02, s["tracking_error_m"]   # measured 9.5 mm (first second)
    assert "EE orientation error: mean" in format_summary(s)
    # the controller's status over DDS: both errors on every MPC tick, the orientation one the bag's
    st = [m for _, m in read_bag(bag, ["/gato_controller/status"])["/gato_controller/status"]
          if m.active_planner == "bsqp"]
    # the recorder may lose some of the ~100 status messages on a loaded machine (61 of 100 in one CI
    # run: issue 32's recorder item), so the check is per recorded tick, not over the run's mean
    assert len(st) >= 20, len(st)
    pos = np.array([m.ee_position_error for m in st])
    rot = np.array([m.ee_orientation_error for m in st])
    assert np.all(np.isfinite(pos)) and np.all(np.isfinite(rot)), (pos, rot)
    # lockstep: the tick's state is the bag's joint state of the same stamp, its window the one
    # stamped at it, so each status equals the bag analysis' error at that stamp (measured equal)
    ser = s["series"]
    t_ns = np.round(np.asarray(ser["t"]) * 1e9).astype(np.int64)
    idx = {int(v): i for i, v in enumerate(t_ns)}
    pairs = [(i, k) for k, m in enumerate(st)
             if (i := idx.get(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec)) is not None]
    assert len(pairs) >= 0.9 * len(st), (len(pairs), len(st))
    bag_i, st_i = (np.array(v) for v in zip(*pairs))
    print(f"pose bringup: {s['n_ticks']} ticks, bag: position {s['tracking_error_m']['mean'] * 1e3:.2f} mm, "
          f"orientation {ro['mean']:.3f} deg (max {ro['max']:.3f}); status: {pos.mean() * 1e3:.2f} mm, "
          f"{np.degrees(rot.mean()):.3f} deg over {len(st)} ticks, {len(pairs)} matched by stamp")
    np.testing.assert_allclose(pos[st_i], np.asarray(ser["err"])[bag_i], rtol=0.02, atol=1e-5)
    np.testing.assert_allclose(rot[st_i], np.asarray(ser["rot_err"])[bag_i], rtol=0.02, atol=1e-4)
