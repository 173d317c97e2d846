"""gato.bagio: rosbag2 bags read without ROS, also when truncated or corrupted.

Bags are written here with rosbags (the recorder's writer) holding a standard type
(sensor_msgs/msg/JointState) and a custom one (test_msgs/msg/Tick) whose definition exists only
inside the bag, then cut or overwritten at chosen bytes.
"""
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from gato.bagio import read_bag

TICK_V1 = "std_msgs/Header header\nfloat64[] values\nstring note\n"
# A later version of the message: a field renamed (note -> label) and one added.
TICK_V2 = "std_msgs/Header header\nfloat64[] values\nstring label\nfloat64[] xu_warm\n"
T0 = 1_700_000_000_000_000_000
DT = 10_000_000  # 10 ms


def _store(tick_def=TICK_V1):
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    ts = get_typestore(Stores.ROS2_KILTED)
    ts.register(get_types_from_msg(tick_def, "test_msgs/msg/Tick"))
    return ts


def write_bag(path, storage="mcap", n=120, nvals=3, tick_def=TICK_V1, seed=0, zstd=False,
              garbage_at=(), no_def=False):
    """A bag with /tick (n messages) and /joint_states (every other step); returns
    {topic: [(t, msg)]} as written. ``nvals`` sets the message size (2000: ~16 kB, several
    1 MiB chunks); ``garbage_at``: steps whose /tick payload is bytes that do not decode;
    ``no_def``: a third topic of a type whose definition is left out of the bag."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

    ts = _store(tick_def)
    T = ts.types
    rng = np.random.default_rng(seed)
    written = {"/tick": [], "/joint_states": []}
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    w = Writer(path, version=9, storage_plugin=plugin)
    if zstd:
        w.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with w:
        c_tick = w.add_connection("/tick", "test_msgs/msg/Tick", typestore=ts)
        c_js = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        if no_def:
            c_secret = w.add_connection("/secret", "test_msgs/msg/Secret", msgdef="",
                                        rihs01="RIHS01_" + "0" * 64)
            # a standard type recorded without its definition: decoded with ROS 2 Kilted's
            c_arr = w.add_connection("/array", "std_msgs/msg/Float64MultiArray", msgdef="",
                                     rihs01="RIHS01_" + "0" * 64)
            arr = T["std_msgs/msg/Float64MultiArray"](layout=T["std_msgs/msg/MultiArrayLayout"](
                dim=[], data_offset=0), data=np.arange(3.0))
            w.write(c_arr, T0, ts.serialize_cdr(arr, "std_msgs/msg/Float64MultiArray"))
        for i in range(n):
            t = T0 + i * DT
            hdr = T["std_msgs/msg/Header"](
                stamp=T["builtin_interfaces/msg/Time"](sec=t // 10**9, nanosec=t % 10**9), frame_id="base")
            kw = {"note": f"tick {i}"} if tick_def == TICK_V1 else {"label": f"tick {i}", "xu_warm": np.ones(2)}
            msg = T["test_msgs/msg/Tick"](header=hdr, values=rng.standard_normal(nvals), **kw)
            raw = ts.serialize_cdr(msg, "test_msgs/msg/Tick")
            if i in garbage_at:
                raw = b"\x00\x01\x00\x00" + b"\xff" * 7  # CDR header, then a string length past the end
            else:
                written["/tick"].append((t, msg))
            w.write(c_tick, t, raw)
            if i % 2 == 0:
                js = T["sensor_msgs/msg/JointState"](header=hdr, name=["a", "b"], position=rng.standard_normal(2),
                                                     velocity=np.zeros(2), effort=np.array([]))
                w.write(c_js, t, ts.serialize_cdr(js, "sensor_msgs/msg/JointState"))
                written["/joint_states"].append((t, js))
            if no_def and i % 10 == 0:
                w.write(c_secret, t, b"\x00\x01\x00\x00" + b"\x00" * 8)
    return written


def _eq(a, b):
    """Messages equal field by field (numpy arrays by value)."""
    if hasattr(a, "__dataclass_fields__"):
        return type(a).__name__ == type(b).__name__ and all(
            _eq(getattr(a, k), getattr(b, k)) for k in a.__dataclass_fields__)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def _assert_prefix(got, written):
    """Every topic's messages are the first ones written, equal, and together they are all the
    messages written before the last time read (a prefix of the recording)."""
    t_last = max((m[-1][0] for m in got.messages.values() if m), default=None)
    for topic, msgs in written.items():
        have = got.messages.get(topic, [])
        assert len(have) <= len(msgs)
        for (t, m), (tw, mw) in zip(have, msgs):
            assert t == tw and _eq(m, mw), topic
        if t_last is not None:
            assert len(have) == sum(1 for t, _ in msgs if t <= t_last), topic


def _mcap(bag: Path) -> Path:
    return next(bag.glob("*.mcap"))


def _chunk_offsets(data: bytes):
    """File offsets of the top-level chunk records of an MCAP file (rosbags layout)."""
    pos, out = 8, []
    while pos + 9 <= len(data):
        op, = data[pos:pos + 1]
        (n,) = struct.unpack_from("<Q", data, pos + 1)
        if op == 0x06:
            out.append(pos)
        if op == 0x02:
            break
        pos += 9 + n
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip(tmp_path, storage):
    written = write_bag(tmp_path / "bag", storage)
    got = read_bag(tmp_path / "bag")
    assert got.storage == storage and got.complete and got.problems == []
    assert got.msgtypes == {"/tick": "test_msgs/msg/Tick", "/joint_states": "sensor_msgs/msg/JointState"}
    assert got.counts == {"/tick": 120, "/joint_states": 60}
    _assert_prefix(got, written)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_topic_filter_unknown_topic_and_all_msgtypes(tmp_path, storage):
    write_bag(tmp_path / "bag", storage)
    got = read_bag(tmp_path / "bag", ["/joint_states", "/not_recorded"])
    assert set(got.messages) == {"/joint_states"} and got.counts == {"/joint_states": 60}
    # every topic's type, also of topics not requested (the AnyReader path)
    assert got.msgtypes == {"/tick": "test_msgs/msg/Tick", "/joint_states": "sensor_msgs/msg/JointState"}
    assert got.complete and got.problems == []


def test_missing_metadata_yaml_and_single_file(tmp_path):
    written = write_bag(tmp_path / "bag")
    (tmp_path / "bag" / "metadata.yaml").unlink()
    got = read_bag(tmp_path / "bag")
    assert got.storage == "mcap" and got.complete
    assert len(got.problems) == 1 and "no metadata.yaml" in got.problems[0]
    assert got.counts == {"/tick": 120, "/joint_states": 60}
    _assert_prefix(got, written)
    one = read_bag(_mcap(tmp_path / "bag"), ["/tick"])  # a path to the .mcap file itself
    assert one.counts == {"/tick": 120} and one.complete and one.problems == []


def _big(tmp_path, **kw):
    """A ~3.4 MB MCAP bag: three 1 MiB chunks and a fourth partial one."""
    written = write_bag(tmp_path / "bag", n=200, nvals=2000, **kw)
    data = _mcap(tmp_path / "bag").read_bytes()
    assert len(_chunk_offsets(data)) >= 3
    return written, data


@pytest.mark.parametrize("where", ["first_message", "middle", "end-10"])
@pytest.mark.parametrize("metadata", [True, False])
def test_truncated_mcap_reads_a_correct_prefix(tmp_path, where, metadata):
    written, data = _big(tmp_path)
    if where == "first_message":  # inside the first message of the first chunk
        cut = data.index(struct.pack("<QQ", T0, T0)) + 20
    elif where == "middle":
        cut = len(data) // 2
    else:
        cut = len(data) - 10
    f = _mcap(tmp_path / "bag")
    f.write_bytes(data[:cut])
    if not metadata:
        (tmp_path / "bag" / "metadata.yaml").unlink()
    got = read_bag(tmp_path / "bag")
    assert not got.complete
    _assert_prefix(got, written)
    line = next(p for p in got.problems if "truncated at byte" in p)
    assert f"{f.name}: truncated at byte" in line and f"of {cut} (no footer): read" in line
    n = sum(got.counts.values())
    if where == "first_message":
        assert n == 0 and any("no readable messages" in p for p in got.problems)
    elif where == "middle":
        # the complete chunks and the part of the cut chunk that is on disk
        assert 60 < n < 280 and "the rest is lost" in line
    else:
        assert got.counts == {"/tick": 200, "/joint_states": 100}
        assert "all messages were before the cut" in line


def test_truncated_zstd_mcap(tmp_path):
    written, data = _big(tmp_path, zstd=True)
    f = _mcap(tmp_path / "bag")
    f.write_bytes(data[:int(len(data) * 0.6)])
    got = read_bag(tmp_path / "bag")
    assert not got.complete and sum(got.counts.values()) > 0
    _assert_prefix(got, written)


def test_corrupted_record_inside_a_chunk_skips_the_rest_of_that_chunk(tmp_path):
    written, data = _big(tmp_path)
    chunks = _chunk_offsets(data)
    # overwrite the header of a message record in the middle of the second chunk
    t_mid = written["/tick"][75][0]
    at = data.index(struct.pack("<QQ", t_mid, t_mid), chunks[1]) - 15
    assert data[at] == 0x05
    bad = bytearray(data)
    bad[at:at + 9] = b"\x77" * 9
    _mcap(tmp_path / "bag").write_bytes(bytes(bad))
    got = read_bag(tmp_path / "bag")
    assert not got.complete
    assert any("record framing lost" in p and "skipped the rest of the chunk" in p for p in got.problems)
    for topic, msgs in got.messages.items():  # what was read is right
        ref = dict(written[topic])
        assert all(_eq(m, ref[t]) for t, m in msgs)
    ticks = [t for t, _ in got.messages["/tick"]]
    assert written["/tick"][74][0] in ticks and t_mid not in ticks
    assert written["/tick"][-1][0] in ticks  # later chunks are still read


def test_chunk_crc_mismatch_skips_the_chunk(tmp_path):
    written, data = _big(tmp_path)
    chunks = _chunk_offsets(data)
    bad = bytearray(data)
    struct.pack_into("<I", bad, chunks[1] + 9 + 24, 0xDEADBEEF)  # uncompressed_crc of chunk 2
    _mcap(tmp_path / "bag").write_bytes(bytes(bad))
    got = read_bag(tmp_path / "bag")
    assert not got.complete
    line = next(p for p in got.problems if "CRC mismatch" in p)
    assert "skipped" in line and "/tick: " in line and "/joint_states: " in line
    assert 0 < sum(got.counts.values()) < 300
    for topic, msgs in got.messages.items():
        ref = dict(written[topic])
        assert all(_eq(m, ref[t]) for t, m in msgs)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_undecodable_messages_are_counted_and_skipped(tmp_path, storage):
    written = write_bag(tmp_path / "bag", storage, garbage_at={5, 50})
    got = read_bag(tmp_path / "bag")
    assert not got.complete
    assert got.counts == {"/tick": 118, "/joint_states": 60}
    assert any(p.startswith("/tick: 2 of 120 messages could not be decoded") for p in got.problems)
    _assert_prefix(got, written)


def test_truncated_and_overwritten_sqlite3(tmp_path):
    written = write_bag(tmp_path / "bag", "sqlite3", n=400, nvals=200)
    data = next((tmp_path / "bag").glob("*.db3")).read_bytes()
    shutil.copytree(tmp_path / "bag", tmp_path / "cut")
    for frac in (0.3, 0.6, 0.99):  # 0.99: the last row's data runs into the cut part
        next((tmp_path / "cut").glob("*.db3")).write_bytes(data[:int(len(data) * frac)])
        got = read_bag(tmp_path / "cut")
        assert not got.complete and 0 < got.counts["/tick"] < 400
        assert any("sqlite3 database damaged" in p for p in got.problems)
        assert not any("could not be decoded" in p for p in got.problems)  # no made-up bytes
        for topic, msgs in got.messages.items():  # what was written, values equal
            ref = dict(written[topic])
            assert all(_eq(m, ref[t]) for t, m in msgs)
    # a database header overwritten: sqlite cannot read anything; reported, not raised
    next((tmp_path / "cut").glob("*.db3")).write_bytes(b"\x00" * 100 + data[100:])
    got = read_bag(tmp_path / "cut")
    assert not got.complete and not any(got.messages.values())
    assert any("sqlite3 cannot read the topics table" in p for p in got.problems)


def test_errors_that_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope: no such file or folder"):
        read_bag(tmp_path / "nope")
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(ValueError) as e:
        read_bag(tmp_path / "notes.txt")
    assert str(e.value) == f"{tmp_path / 'notes.txt'}: not a rosbag2 bag (no metadata.yaml, *.mcap or *.db3)"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError) as e:
        read_bag(tmp_path / "empty")
    assert str(e.value) == f"{tmp_path / 'empty'}: not a rosbag2 bag (no metadata.yaml, *.mcap or *.db3)"


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_without_messages_is_not_an_error(tmp_path, storage):
    write_bag(tmp_path / "bag", storage, n=0)
    got = read_bag(tmp_path / "bag")
    assert got.messages == {"/tick": [], "/joint_states": []} and got.complete
    assert got.problems == ["bag: no readable messages"]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_type_without_definition_is_skipped(tmp_path, storage):
    write_bag(tmp_path / "bag", storage, no_def=True)
    got = read_bag(tmp_path / "bag")
    assert ("/secret: type test_msgs/msg/Secret has no definition in the bag and is not a standard "
            "ROS 2 type: skipped") in got.problems
    assert "/secret" not in got.messages and got.msgtypes["/secret"] == "test_msgs/msg/Secret"
    assert got.counts == {"/tick": 120, "/joint_states": 60, "/array": 1}
    assert list(got.messages["/array"][0][1].data) == [0.0, 1.0, 2.0]


def test_require_names_missing_fields_and_topics(tmp_path):
    write_bag(tmp_path / "v2", tick_def=TICK_V2)
    got = read_bag(tmp_path / "v2")
    assert got.counts["/tick"] == 120 and _eq(got.messages["/tick"][0][1].xu_warm, np.ones(2))
    lines = got.require({"/tick": ["values", "note", "header.stamp", "header.seq"],
                         "/joint_states": ["position"], "/gato_controller/step": ["xu"]})
    assert lines == [
        "/tick: test_msgs/msg/Tick in this bag has no field 'note' (a different message version; "
        "recorded by another gato?)",
        "/tick: test_msgs/msg/Tick in this bag has no field 'header.seq' (a different message version; "
        "recorded by another gato?)",
        "/gato_controller/step: not in the bag",
    ]
    assert got.problems[-3:] == lines
    # a topic not decoded (not requested) is checked against the bag's definition
    only = read_bag(tmp_path / "v2", ["/joint_states"])
    assert only.require({"/tick": ["xu_warm"]}) == []
    assert len(only.require({"/tick": ["note"]})) == 1


def test_progress_is_called_at_most_20_times(tmp_path):
    write_bag(tmp_path / "bag", n=400)
    seen = []
    read_bag(tmp_path / "bag", progress=seen.append)
    assert 2 <= len(seen) <= 20 and seen == sorted(seen) and seen[-1] == 1.0
    (tmp_path / "bag" / "metadata.yaml").unlink()
    seen.clear()
    read_bag(tmp_path / "bag", progress=seen.append)  # the scanner path
    assert 2 <= len(seen) <= 20 and seen == sorted(seen) and seen[-1] == 1.0
