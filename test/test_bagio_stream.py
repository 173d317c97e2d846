"""gato.bagio.stream_bag: the same messages as read_bag, one at a time, also for damaged bags,
windows through the MCAP index, and split bags (several storage files) as one run."""
import struct

import pytest

from gato.bagio import read_bag, stream_bag
from test_bagio import DT, T0, _big, _eq, _mcap, write_bag


def _collect(bs):
    got = {}
    last = None
    for topic, t, msg in bs:
        assert last is None or t >= last or not bs.complete, "log-time order"
        last = t
        got.setdefault(topic, []).append((t, msg))
    return got


def _same(a, b):
    assert sorted(k for k, v in a.items() if v) == sorted(k for k, v in b.items() if v)
    for topic, msgs in b.items():
        have = a.get(topic, [])
        assert len(have) == len(msgs), topic
        for (t1, m1), (t2, m2) in zip(have, msgs):
            assert t1 == t2 and _eq(m1, m2), topic


@pytest.mark.parametrize("storage, zstd", [("mcap", False), ("mcap", True), ("sqlite3", False)])
def test_stream_equals_read_bag_on_intact_bags(tmp_path, storage, zstd):
    write_bag(tmp_path / "bag", storage=storage, zstd=zstd)
    full = read_bag(tmp_path / "bag")
    bs = stream_bag(tmp_path / "bag")
    assert bs.total == sum(full.counts.values())
    assert bs.msgtypes == full.msgtypes and bs.fielddefs == full.fielddefs
    _same(_collect(bs), full.messages)
    assert bs.counts == full.counts and bs.complete and not bs.problems


@pytest.mark.parametrize("damage", ["cut_middle", "cut_end", "no_metadata", "garbage"])
def test_stream_keeps_the_damaged_bag_guarantees(tmp_path, damage):
    if damage == "garbage":
        write_bag(tmp_path / "bag", garbage_at=(3, 50))
    else:
        _, data = _big(tmp_path)
        f = _mcap(tmp_path / "bag")
        if damage == "cut_middle":
            f.write_bytes(data[:len(data) // 2])
        elif damage == "cut_end":
            f.write_bytes(data[:len(data) - 10])
        else:
            (tmp_path / "bag" / "metadata.yaml").unlink()
    full = read_bag(tmp_path / "bag")
    bs = stream_bag(tmp_path / "bag")
    _same(_collect(bs), full.messages)
    assert bs.counts == {k: v for k, v in full.counts.items()}
    assert bs.complete == full.complete
    # the same lines say what was lost (the stream may say in addition where rosbags stopped)
    assert set(full.problems) <= set(bs.problems) or damage == "garbage"
    if damage == "garbage":
        assert any("2 of " in p and "could not be decoded" in p for p in bs.problems)


def test_window_reads_only_the_window(tmp_path):
    write_bag(tmp_path / "bag", n=400)
    full = read_bag(tmp_path / "bag")
    lo, hi = T0 + 100 * DT, T0 + 250 * DT
    got = _collect(stream_bag(tmp_path / "bag", start_ns=lo, end_ns=hi))
    want = {k: [(t, m) for t, m in v if lo <= t < hi] for k, v in full.messages.items()}
    _same(got, want)
    with pytest.raises(ValueError, match="start_ns"):
        stream_bag(tmp_path / "bag", start_ns=hi, end_ns=lo)


@pytest.mark.parametrize("damaged", [False, True])
def test_count_only_topics_are_counted_not_yielded(tmp_path, damaged):
    write_bag(tmp_path / "bag")
    if damaged:
        (tmp_path / "bag" / "metadata.yaml").unlink()
    full = read_bag(tmp_path / "bag")
    bs = stream_bag(tmp_path / "bag", count_only=["/joint_states"])
    got = _collect(bs)
    assert "/joint_states" not in got and got["/tick"] and bs.counts == full.counts
    bs = stream_bag(tmp_path / "bag")
    bs.count_only(["/tick"])            # decided once the bag is open (its types known)
    got = _collect(bs)
    # a damaged bag's first message was read when it was opened (to know its types)
    assert len(got.get("/tick", [])) <= (1 if damaged else 0) and bs.counts == full.counts
    _same({"/joint_states": got["/joint_states"]}, {"/joint_states": full.messages["/joint_states"]})
