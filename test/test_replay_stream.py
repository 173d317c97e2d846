"""Streaming ``gato replay`` (gato.replay.stream): bit for bit the in-memory replay
(load_recording + replay_ticks + predict_errors, which still serve bags that need the
reconstruction) on the replay fixtures, a --start/--end window equal to the same ticks of a
full replay, bags split into several files and chunk-compressed, and the gap report."""
import json
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (scripts/setup.sh)")

from gato.bagio import read_bag  # noqa: E402
from gato.replay import (TOPICS, load_recording, predict_errors, replay_bag, replay_ticks,  # noqa: E402
                         stream_replay)
from gato.replay import _worst  # noqa: E402
from replay_fixtures import record_lockstep_run  # noqa: E402


def _in_memory(bag):
    rec = load_recording(read_bag(bag, list(TOPICS.values())))
    rp = replay_ticks(rec)
    pred = predict_errors(_urdf(rec.robot), rec.joint_names, rec.state_t_ns, rec.states, rec.commands,
                          efforts=rec.efforts)
    return rec, rp, pred


def _urdf(robot):
    from gato.interface import robot_urdf

    return robot_urdf(robot)


def _assert_same(run, rec, rp, pred):
    """Every per-tick and per-interval number equal, bit for bit (NaN where NaN)."""
    assert run.streamed and run.T == len(rec.ticks)
    assert run.tick.tolist() == [tk.tick for tk in rec.ticks]
    assert run.stamp_ns.tolist() == [tk.stamp_ns for tk in rec.ticks]
    for k in ("u", "du", "dplan", "dwarm", "dstate"):
        assert np.array_equal(getattr(run, k), getattr(rp, k), equal_nan=True), k
    assert np.array_equal(run.anchored, rp.anchored) and np.array_equal(run.state_anchored, rp.state_anchored)
    assert run.notes == rp.notes
    assert np.array_equal(run.wall_rec, np.array([tk.wall_s if tk.wall_s is not None else np.nan
                                                  for tk in rec.ticks]), equal_nan=True)
    p = run.prediction
    for k in ("t", "e_q", "e_qd", "tau_res", "rms_tau", "rms_qd", "share"):
        assert np.array_equal(getattr(p, k), getattr(pred, k)), k
    assert p.suspects == pred.suspects and p.skipped == pred.skipped and p.torque_source == pred.torque_source
    assert run.counts == {k: int(v) for k, v in rec.counts.items()}


@pytest.mark.parametrize("case", ["nominal", "heavier_link", "parameter_changes", "cut_mid_run"])
def test_streaming_replay_equals_the_in_memory_replay_bit_for_bit(tmp_path, case):
    kw = {"nominal": dict(seconds=1.0),
          "heavier_link": dict(seconds=1.0, sim={"link_mass_scale": "L4:1.2"}),
          "parameter_changes": dict(seconds=0.6, changes_at={20: {"q_cost": 6.0, "u_cost": 1e-5},
                                                              40: {"linsys": "pcg", "mu": 20.0}}),
          "cut_mid_run": dict(seconds=1.0)}[case]
    bag = record_lockstep_run(tmp_path / "bag", **kw)
    if case == "cut_mid_run":   # a bag that starts mid-run: the first 30 ticks removed
        from gato.bagio import stream_bag
        bs = stream_bag(bag)
        t_cut = bs.t_start_ns + int(0.3e9)
        src = bag
        bag = tmp_path / "cut"
        _copy_window(src, bag, t_cut)
    rec, rp, pred = _in_memory(bag)
    run = stream_replay(bag, worst=5)
    _assert_same(run, rec, rp, pred)
    # the worst-tick cases: the same ticks as the in-memory selection, with the same commands
    s = replay_bag(bag, tmp_path / "out", log=None, worst=5)
    idx, _ = _worst(SimpleNamespace(du=rp.du, stamp_ns=np.array([tk.stamp_ns for tk in rec.ticks])), pred,
                    1e-9, 5)
    z = np.load(s["cases"])
    assert z["tick"].tolist() == [rec.ticks[i].tick for i in idx]
    assert np.array_equal(z["u_replayed"], rp.u[idx])
    assert s["matched"] and s["streamed"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["ticks"] == len(rec.ticks)


def test_a_long_run_spilled_to_disk_gives_the_same_replay_and_report(tmp_path, monkeypatch):
    """Rows spilled to the temporary file after 16 ticks, read back 10 at a time, percentiles by
    the histogram selection, plots decimated in chunks: the same numbers, summary and worst ticks
    as with everything in memory."""
    import gato.replay.report as report_mod
    import gato.replay.rows as rows_mod

    bag = record_lockstep_run(tmp_path / "bag", seconds=1.0, sim={"link_mass_scale": "L4:1.2"})
    rec, rp, pred = _in_memory(bag)
    whole = replay_bag(bag, tmp_path / "whole", log=None, worst=3)
    monkeypatch.setattr(rows_mod, "BUFFER_ROWS", 16)
    monkeypatch.setattr(rows_mod, "CHUNK_ROWS", 10)
    monkeypatch.setattr(rows_mod, "EXACT_BELOW", 8)
    monkeypatch.setattr(report_mod, "MAX_POINTS", 12)
    run = stream_replay(bag, worst=3)
    assert run.rows.file is not None and run.prediction.rows.file is not None, "spilled"
    _assert_same(run, rec, rp, pred)
    spilled = replay_bag(bag, tmp_path / "spilled", log=None, worst=3)
    for k in ("ticks", "compared", "over_tolerance", "max_du", "max_dplan", "anchored", "state_anchored",
              "first_over", "matched", "prediction", "solve_time_recorded_s", "gaps"):
        assert spilled[k] == whole[k], k
    w = np.array([tk.wall_s for tk in rec.ticks if tk.wall_s is not None])
    assert spilled["solve_time_recorded_s"] == {"median": float(np.median(w)), "p90": float(np.percentile(w, 90)),
                                               "max": float(w.max()), "n": int(w.size)}
    a, b = np.load(whole["cases"]), np.load(spilled["cases"])
    assert a["tick"].tolist() == b["tick"].tolist() and np.array_equal(a["pred_err_torque"], b["pred_err_torque"],
                                                                       equal_nan=True)
    assert (tmp_path / "spilled" / "replay.png").exists() and (tmp_path / "spilled" / "model_vs_reality.png").exists()


def _copy_window(src, dst, t_from):
    """A bag of ``src``'s messages logged at or after ``t_from`` (what a recorder started late writes)."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    with Reader(src) as r, Writer(dst, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
                 for c in r.connections}
        for c, t, data in r.messages():
            if t >= t_from:
                w.write(conns[c.id], t, data)


def test_a_window_replays_the_same_ticks_as_the_full_replay(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=1.0)
    full = stream_replay(bag)
    for start, end in (("0.4", "0.8"), ("-0.3", None), ("35t", "70t")):
        win = stream_replay(bag, start=start, end=end)
        assert 0 < win.T < full.T
        pos = {s: i for i, s in enumerate(full.stamp_ns.tolist())}
        idx = [pos[s] for s in win.stamp_ns.tolist()]
        assert idx == list(range(idx[0], idx[0] + win.T)), "a contiguous run of the full replay's ticks"
        assert np.array_equal(win.u, full.u[idx]) and np.array_equal(win.du, full.du[idx], equal_nan=True)
        assert np.nanmax(win.du) <= 1e-9
        if start == "35t":
            assert win.tick[0] == 35 and win.tick[-1] == 69
    s = replay_bag(bag, tmp_path / "out", log=None, start="-0.3")
    assert s["matched"] and s["window"] == {"start": "-0.3", "end": None}
    with pytest.raises(ValueError, match="--start/--end"):
        stream_replay(bag, start="soon")
    with pytest.raises(ValueError, match="empty"):
        stream_replay(bag, start="0.8", end="0.2")


def _copy_thinned(src, dst, period):
    """A copy of ``src`` with the solver state kept only on every ``period``-th tick (and the
    first), as the recorder's ``solver_state_period`` stores it."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    from gato_ros.bag import typestore
    from gato_ros.recorder_node import SolverStateThinner

    thin = SolverStateThinner(period, typestore())
    with Reader(src) as r, Writer(dst, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
                 for c in r.connections}
        for c, t, data in r.messages():
            w.write(conns[c.id], t, thin(data) if c.topic == TOPICS["solve_input"] else data)
    assert thin.thinned > 0
    return thin


def test_a_window_of_a_thinned_bag_replays_the_same_ticks_as_the_full_replay(tmp_path):
    """Solver state kept every 25th tick: a window starting between key ticks re-solves silently
    from the key tick before it, so its ticks equal the full replay's bit for bit (without that,
    a mid-run start with a reset and warm-up differs)."""
    src = record_lockstep_run(tmp_path / "bag", seconds=1.0)
    bag = tmp_path / "thin"
    _copy_thinned(src, bag, 25)
    full = stream_replay(bag)
    assert full.n_state < full.T, "the copy is thinned"
    assert np.nanmax(full.du) <= 1e-9, "a full replay of a thinned bag matches"
    for start, end in (("37t", "80t"), ("0.43", None), ("-0.3", "-0.1"), ("50t", "60t")):
        win = stream_replay(bag, start=start, end=end)
        assert 0 < win.T < full.T
        pos = {s: i for i, s in enumerate(full.stamp_ns.tolist())}
        idx = [pos[s] for s in win.stamp_ns.tolist()]
        assert idx == list(range(idx[0], idx[0] + win.T)), "the window's ticks, none before it"
        for k in ("u", "du", "dplan"):
            assert np.array_equal(getattr(win, k), getattr(full, k)[idx], equal_nan=True), (start, k)
        # the warm start / solver state differences: equal too, but for a window starting on a key
        # tick, whose first tick installs the recorded state into a fresh controller (a mid-run start)
        first = 1 if start == "50t" else 0
        for k in ("dwarm", "dstate", "anchored", "state_anchored"):
            assert np.array_equal(getattr(win, k)[first:], getattr(full, k)[idx[first:]], equal_nan=True), (start, k)
        assert np.nanmax(win.du) <= 1e-9
        if start == "37t":
            assert win.tick[0] == 37 and win.tick[-1] == 79
    s = replay_bag(bag, tmp_path / "out", log=None, start="37t")
    assert s["matched"] and s["ticks"] == int((full.tick >= 37).sum()) and not s["gaps"]


def _copy_dropping(src, dst, drop):
    """A copy of ``src`` without the messages ``drop(topic, index on the topic)`` selects (what a
    recorder that falls behind, or a lossy link, leaves)."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    seen = {}
    with Reader(src) as r, Writer(dst, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
                 for c in r.connections}
        for c, t, data in r.messages():
            k = seen[c.topic] = seen.get(c.topic, -1) + 1
            if not drop(c.topic, k):
                w.write(conns[c.id], t, data)


def test_lost_ticks_are_reported_never_a_silent_hole(tmp_path):
    bag = record_lockstep_run(tmp_path / "bag", seconds=1.0)
    s = replay_bag(bag, tmp_path / "ok", log=None)
    assert s["gaps"] == [] and s["ticks_missing"] == {TOPICS["command"]: 0, TOPICS["solve_input"]: 0}
    # the recorder lost commands 40..44 and the SolveInput of ticks 60..61 (and their outputs)
    lossy = tmp_path / "lossy"
    _copy_dropping(bag, lossy, lambda topic, k: (topic == TOPICS["command"] and 40 <= k <= 44)
                   or (topic == TOPICS["solve_input"] and k in (60, 61)))
    s = replay_bag(lossy, tmp_path / "out", log=None)
    cmd = [g for g in s["gaps"] if g["topic"] == TOPICS["command"]]
    si = [g for g in s["gaps"] if g["topic"] == TOPICS["solve_input"]]
    assert [g["missing"] for g in cmd] == [5] and s["ticks_missing"][TOPICS["command"]] == 5
    assert [g["missing"] for g in si] == [2] and si[0]["last_tick"] == si[0]["first_tick"] + 1
    lines = [p for p in s["problems"] if "missing between" in p]
    assert any(p.startswith(f"{TOPICS['command']}: 5 ticks missing between t=") for p in lines)
    assert any(p.startswith(f"{TOPICS['solve_input']}: 2 ticks missing between t=") for p in lines)
    assert s["ticks"] == 98 and "missing between" in (tmp_path / "out" / "report.md").read_text()


def test_a_bag_without_step_results_compares_the_recorded_plans(tmp_path):
    """``ros2 bag record`` of a topic list without /step_result: the plans stand in for the
    recorded solutions, no recorded step times (an empty statistic, not an error)."""
    bag = record_lockstep_run(tmp_path / "bag", seconds=0.5)
    cut = tmp_path / "no_steps"
    _copy_dropping(bag, cut, lambda topic, k: topic == TOPICS["step_result"])
    rec, rp, pred = _in_memory(cut)
    run = stream_replay(cut)
    _assert_same(run, rec, rp, pred)
    assert np.isnan(run.wall_rec).all() and np.nanmax(run.dplan) == 0.0
    s = replay_bag(cut, tmp_path / "out", log=None)
    assert s["matched"] and s["solve_time_recorded_s"] == {} and s["solve_time_replay_s"]["n"] == run.T
    assert s["max_dplan"] == 0.0 and (tmp_path / "out" / "replay.png").exists()


def test_outputs_logged_late_by_a_starved_recorder_are_still_attached(tmp_path):
    """A recorder starved on a loaded machine logs some ticks' commands and step results seconds
    after their SolveInput: the streaming replay waits for them (up to LOOKAHEAD_MAX_S) and
    still equals the in-memory replay bit for bit."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    src = record_lockstep_run(tmp_path / "bag", seconds=0.6)
    bag = tmp_path / "late"
    late = {TOPICS["command"], TOPICS["step_result"]}
    msgs = []
    with Reader(src) as r:
        conns = list(r.connections)
        seen = {}
        for c, t, data in r.messages():
            k = seen[c.topic] = seen.get(c.topic, -1) + 1
            msgs.append((c.id, t + (int(3e9) if c.topic in late and 20 <= k <= 30 else 0), bytes(data)))
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        out = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest) for c in conns}
        for cid, t, data in sorted(msgs, key=lambda m: m[1]):
            w.write(out[cid], t, data)
    rec, rp, pred = _in_memory(bag)
    run = stream_replay(bag)
    _assert_same(run, rec, rp, pred)
    assert run.has_recorded_u.all() and np.nanmax(run.du) <= 1e-9


def test_long_runs_are_plotted_from_bins_that_keep_the_spikes():
    from gato.replay.report import decimate

    t = np.arange(100_000) * 0.01
    y = np.zeros(100_000)
    y[12_345], y[50] = 5.0, np.nan
    tt, yy = decimate(t, y, 1000)
    assert len(tt) == 1000 and yy.max() == 5.0 and t[12_345] in tt
    Y = np.zeros((100_000, 3))
    Y[777, 2] = -9.0
    tt, YY = decimate(t, Y, 1000)
    assert YY.shape == (1000, 3) and YY[:, 2].min() == -9.0
    short = np.arange(10.0)
    assert decimate(short, short, 1000)[1] is not None and len(decimate(short, short, 1000)[1]) == 10
