"""Replay of runs solved under external-wrench hypotheses (``hypotheses=estimator``): the
(B, 6) world wrenches each tick solved under travel in SolveInput ``wrench_hypotheses`` and
``gato replay`` re-solves under them bit for bit; bags of an older controller (a SolveInput
definition without the field) still replay. Bags come from the controller, world, reference
and estimator LOGIC classes in lockstep (test/replay_fixtures.py), serialized by rclpy."""
from pathlib import Path

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (scripts/setup.sh)")

from gato.replay import replay_bag, rerun_cases  # noqa: E402
from replay_fixtures import record_lockstep_run  # noqa: E402

PUSH = [0.0, 10.0, 0.0, 0.0, 0.0, 0.0]      # N, world axes: the world pushes the EE
ESTIMATOR = {"hypotheses": "estimator", "estimate_sync": True}


def solve_inputs(bag):
    """The bag's SolveInput messages in order (rosbags AnyReader: the independent reader)."""
    from rosbags.highlevel import AnyReader

    with AnyReader([Path(bag)]) as r:
        conns = [c for c in r.connections if c.topic == "/gato_controller/solve_input"]
        return [r.deserialize(raw, c.msgtype) for c, _, raw in r.messages(connections=conns)]


def old_solve_input_encoder():
    """(typestore, encoder) of the SolveInput definition before ``wrench_hypotheses`` (an
    older controller's bags): the installed definition without its last two fields."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from gato_ros.bag import gato_msgs_dir

    text = (gato_msgs_dir() / "SolveInput.msg").read_text()
    cut = text.index("# The external-wrench hypotheses")
    assert "wrench_rows" in text[cut:] and "wrench_rows" not in text[:cut]
    ts = get_typestore(Stores.ROS2_KILTED)
    ts.register(get_types_from_msg(text[:cut], "gato_msgs/msg/SolveInput"))
    Msg = ts.types["gato_msgs/msg/SolveInput"]
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]

    def encode(si):
        st = si.solver_state
        m = Msg(header=Header(stamp=Time(sec=si.stamp_ns // 10**9, nanosec=si.stamp_ns % 10**9), frame_id=""),
                tick=si.tick, joint_names=list(si.joint_names), x_measured=si.x_measured, reference=si.reference,
                warm_rows=si.xu_warm.shape[0], xu_warm=si.xu_warm.ravel(), dt_elapsed=si.dt_elapsed,
                budget_s=si.budget_s, reset=si.reset, config_json=si.config_json,
                solver_state_rows=0 if st is None else st.shape[0],
                solver_state=np.zeros(0) if st is None else st.ravel(), capped_out=si.capped_out,
                force_reseed=si.force_reseed)
        return bytes(ts.serialize_cdr(m, "gato_msgs/msg/SolveInput"))
    return ts, encode


@pytest.mark.parametrize("batch_size", [1, 3])
def test_an_estimator_run_replays_bit_for_bit_with_the_recorded_wrenches(tmp_path, batch_size):
    """Lockstep run with a 10 N push, the estimator's estimate in the solve (B = 3: estimate,
    zero and a spread row, scored by the one-step rollout every tick), switched off and on
    between ticks: every replayed command equals the recorded one exactly."""
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.6, sim={"external_wrench": PUSH}, estimator={},
                              controller={**ESTIMATOR, "batch_size": batch_size},
                              changes_at={25: {"hypotheses": "none"}, 35: {"hypotheses": "estimator"}})
    msgs = solve_inputs(bag)
    rows = [int(m.wrench_rows) for m in msgs]
    assert len(msgs) == 60
    # ticks 25..34 (0-based) ran without hypotheses, the others under the estimate (zero before the first)
    assert rows == [batch_size] * 25 + [0] * 10 + [batch_size] * 25, rows
    w = np.asarray(msgs[-1].wrench_hypotheses).reshape(batch_size, 6)
    assert abs(w[0, 1] - 10.0) < 0.5, w[0]                     # the estimate of the push (row 0)
    if batch_size > 1:
        np.testing.assert_array_equal(w[1], np.zeros(6))      # the robot-only row

    s = replay_bag(bag, tmp_path / "out", worst=3, log=None)
    assert s["compared"] == 60 and s["matched"] and s["max_du"] == 0.0, (s["max_du"], s["problems"])
    assert s["anchored"] == 0 and s["state_anchored"] == 0 and s["wrench_ticks"] == 50
    assert "ticks solved under recorded wrench hypotheses (hypotheses=estimator) | 50" in \
        Path(s["report"]).read_text()
    assert not any("wrench" in p for p in s["problems"]), s["problems"]
    # the worst ticks as standalone cases carry their wrenches and re-run the same
    z = np.load(s["cases"])
    assert z["wrench_hypotheses"].shape == (3, batch_size, 6)
    rr = rerun_cases(s["cases"])
    assert rr["match"].all(), rr["max_du"]


def test_without_the_recorded_wrenches_the_replay_differs_and_says_why(tmp_path):
    """The same run written with the older SolveInput definition (no wrench field): the bag
    still replays, the report names the ticks that lack their wrenches, and their commands
    differ (what the field is for)."""
    ts, encode = old_solve_input_encoder()
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.4, sim={"external_wrench": PUSH}, estimator={},
                              controller=ESTIMATOR, typestore_override=ts, solve_input_encoder=encode)
    assert not hasattr(solve_inputs(bag)[0], "wrench_rows")
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["compared"] == 40 and not s["matched"] and s["max_du"] > 1e-3, s["max_du"]
    assert s["wrench_ticks"] == 0
    assert any("carry no recorded wrenches" in p for p in s["problems"]), s["problems"]


def test_an_old_bag_without_the_wrench_field_still_replays_exactly(tmp_path):
    """Back-compat: a run without hypotheses recorded with the older SolveInput definition
    replays bit for bit, with nothing said about wrenches."""
    ts, encode = old_solve_input_encoder()
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.4, typestore_override=ts, solve_input_encoder=encode)
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["compared"] == 40 and s["matched"] and s["max_du"] == 0.0, (s["max_du"], s["problems"])
    assert not any("wrench" in p for p in s["problems"]), s["problems"]
    assert s["wrench_ticks"] == 0


@pytest.mark.parametrize("sqp_iters", [1, pytest.param(2, marks=pytest.mark.xfail(
    strict=True, reason="known gap (issue 29 / replay): with B = 3 hypotheses and 2 SQP iterations per tick (the "
    "shipped default since issue 30) a window started mid-run differs from the full replay by ~6 N*m from its "
    "first tick, even at a key tick: the hypothesis selection carries state the bag does not record (the "
    "controller's previous x / u that ForceHypothesisBatch.select scores with, and the batch's own state): a window "
    "starts with none and picks the row by merit; full replays still match bit for bit"))])
def test_a_window_of_a_thinned_estimator_bag_replays_the_same_ticks(tmp_path, sqp_iters):
    """The recorder keeps the solver state on key ticks only (solver_state_period); a window
    that starts between them re-solves the ticks before it silently, under their recorded
    wrenches too, so its ticks equal the full replay's bit for bit (one SQP iteration per tick;
    two: the known gap in the xfail reason)."""
    from gato.replay import stream_replay
    from test_replay_stream import _copy_thinned

    src = record_lockstep_run(tmp_path / "bag", seconds=0.8, sim={"external_wrench": PUSH}, estimator={},
                              controller={**ESTIMATOR, "batch_size": 3, "max_sqp_iters": sqp_iters})
    bag = tmp_path / "thin"
    _copy_thinned(src, bag, 25)
    assert {int(m.wrench_rows) for m in solve_inputs(bag)} == {3}   # thinning keeps the wrenches
    full = stream_replay(bag)
    assert full.n_state < full.T and np.nanmax(full.du) == 0.0
    win = stream_replay(bag, start="37t", end="70t")
    pos = {s: i for i, s in enumerate(full.stamp_ns.tolist())}
    idx = [pos[s] for s in win.stamp_ns.tolist()]
    assert win.T == 33 and idx == list(range(idx[0], idx[0] + win.T))
    for k in ("u", "du"):
        assert np.array_equal(getattr(win, k), getattr(full, k)[idx], equal_nan=True), k
