"""The recorder's writer (gato_ros.bag.BagWriter): zstd chunk compression by default, files
split by size or duration like ``ros2 bag record --max-bag-size / --max-bag-duration``; split
and compressed bags replay as one run (streamed, equal to the unsplit bag's replay), read with
gato.bagio also without their metadata.yaml (recorder killed), and open with the real
``ros2 bag info`` (the overlay's rosbag2; skipped only without the overlay and a system ROS)."""
import subprocess

import numpy as np
import pytest

from conftest import import_or_skip, require_ros2_tools

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace and source install/setup.bash (scripts/setup.sh)")

from gato.bagio import read_bag, stream_bag  # noqa: E402
from gato.replay import replay_bag, stream_replay  # noqa: E402
from gato_ros.bag import BagWriter  # noqa: E402
from replay_fixtures import record_lockstep_run  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One second of lockstep control (100 ticks), written uncompressed in one file."""
    return record_lockstep_run(tmp_path_factory.mktemp("src") / "bag", seconds=1.0)


def rewrite(src, dst, **kw):
    """``src``'s messages written again through a BagWriter(**kw); returns the writer."""
    from rosbags.rosbag2 import Reader

    w = BagWriter(dst, **kw)
    with Reader(src) as r:
        w.open()
        conns = {c.id: w.add_connection(c.topic, c.msgtype, msgdef=c.msgdef.data, rihs01=c.digest)
                 for c in r.connections}
        for c, t, data in r.messages():
            w.write(conns[c.id], t, data)
        w.close()
    return w


def _size(bag):
    return sum(f.stat().st_size for f in bag.glob("*.mcap"))


@pytest.mark.parametrize("split", ["size", "duration"])
def test_split_compressed_bag_replays_as_one_run(source, tmp_path, split):
    kw = {"max_bag_size": 200_000} if split == "size" else {"max_bag_duration_s": 0.25}
    bag = tmp_path / "split"
    w = rewrite(source, bag, **kw)
    files = sorted(bag.glob("*.mcap"))
    assert len(files) >= 3 and [f.name for f in files] == [f"split_{k}.mcap" for k in range(len(files))]
    meta = (bag / "metadata.yaml").read_text()
    assert all(f.name in meta for f in files)
    assert sum(f["count"] for f in w.files) == sum(w.counts.values())
    # every file is a complete MCAP on its own (schemas, channels, summary): readable alone
    for f in files:
        assert sum(read_bag(f).counts.values()) > 0
    # the whole bag: the same messages, the same replay, bit for bit
    a, b = read_bag(source), read_bag(bag)
    assert a.counts == b.counts and b.complete and not b.problems
    ra, rb = stream_replay(source), stream_replay(bag)
    assert rb.T == ra.T == 100 and np.array_equal(ra.u, rb.u) and np.nanmax(rb.du) <= 1e-9
    s = replay_bag(bag, tmp_path / "out", log=None)
    assert s["matched"] and s["ticks"] == 100 and s["gaps"] == []
    # a recorder killed before closing: no metadata.yaml; the files are read directly
    (bag / "metadata.yaml").unlink()
    c = read_bag(bag)
    assert c.counts == a.counts
    assert sum(1 for _ in stream_bag(bag)) == sum(a.counts.values())


def test_compression_is_on_by_default_and_can_be_off(source, tmp_path):
    rewrite(source, tmp_path / "z")
    rewrite(source, tmp_path / "raw", compression="none")
    z, raw = _size(tmp_path / "z"), _size(tmp_path / "raw")
    assert z < 0.7 * raw, (z, raw)
    assert read_bag(tmp_path / "z").counts == read_bag(tmp_path / "raw").counts
    rewrite(source, tmp_path / "sq", storage="sqlite3")       # sqlite3: rosbag2's per-message zstd
    assert read_bag(tmp_path / "sq").counts == read_bag(source).counts


def test_bad_arguments_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="compression"):
        BagWriter(tmp_path / "a", compression="lz5")
    with pytest.raises(ValueError, match="max_bag_size"):
        BagWriter(tmp_path / "b", max_bag_size=-1)
    with pytest.raises(ValueError, match="mcap storage only"):
        BagWriter(tmp_path / "c", storage="sqlite3", max_bag_duration_s=1.0)
    with pytest.raises(ValueError, match="zstd_level"):
        BagWriter(tmp_path / "d", zstd_level=0)
    with pytest.raises(ValueError, match="chunk_size"):
        BagWriter(tmp_path / "e", chunk_size=100)


def test_zstd_level_sets_the_chunk_compression_and_the_messages_stay_the_same(source, tmp_path):
    """The chunks are compressed at the writer's zstd level (a higher level, no larger files here)
    and every message reads back byte for byte."""
    from rosbags.rosbag2 import Reader

    rewrite(source, tmp_path / "l1", zstd_level=1)
    rewrite(source, tmp_path / "l9", zstd_level=9)
    rewrite(source, tmp_path / "l9s", zstd_level=9, max_bag_duration_s=0.3)   # the level holds after a split
    assert _size(tmp_path / "l9") < _size(tmp_path / "l1")
    assert len(list((tmp_path / "l9s").glob("*.mcap"))) >= 3

    def raw(bag):
        with Reader(bag) as r:
            return [(c.topic, t, bytes(d)) for c, t, d in r.messages()]

    assert raw(tmp_path / "l9") == raw(tmp_path / "l9s") == raw(tmp_path / "l1") == raw(source)


def test_ros2_bag_info_opens_the_split_compressed_bag(source, tmp_path, ros_env):
    require_ros2_tools()
    bag = tmp_path / "split"
    w = rewrite(source, bag, max_bag_size=200_000)
    r = subprocess.run(["ros2", "bag", "info", str(bag)], env=ros_env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    total = sum(w.counts.values())
    assert "mcap" in r.stdout and f"{total}" in r.stdout.replace(",", ""), r.stdout
    for f in w.files:
        assert f["path"].name in r.stdout, r.stdout


def _chunks(bag):
    """(number of MCAP chunks, largest uncompressed chunk [bytes]) over the bag's files, from
    the chunk index in each file's summary."""
    from rosbags.rosbag2.storage_mcap import McapReader

    n, largest = 0, 0
    for f in sorted(bag.glob("*.mcap")):
        r = McapReader(f)
        r.open()
        n += len(r.chunks)
        largest = max([largest] + [c.uncompressed_size for c in r.chunks])
        r.close()
    return n, largest


def test_larger_chunks_write_fewer_bytes_and_the_same_messages(source, tmp_path):
    """The default 4 MiB chunks (rosbag2's zstd_small preset) against rosbags' 1 MiB: fewer chunks,
    fewer bytes (zstd finds each tick's repeated plan within a chunk only), the same messages byte
    for byte and the same replay bit for bit; with max_bag_size a chunk is at most that large."""
    from rosbags.rosbag2 import Reader

    from gato_ros.bag import CHUNK_SIZE

    assert CHUNK_SIZE == 4 * 1024 * 1024
    rewrite(source, tmp_path / "c1", chunk_size=2**20)
    rewrite(source, tmp_path / "c4")
    n1, big1 = _chunks(tmp_path / "c1")
    n4, big4 = _chunks(tmp_path / "c4")
    assert n4 < n1 and big1 <= 2**20 + 64 * 1024 < big4 <= CHUNK_SIZE + 64 * 1024, (n1, big1, n4, big4)
    assert _size(tmp_path / "c4") < _size(tmp_path / "c1")

    def raw(bag):
        with Reader(bag) as r:
            return [(c.topic, t, bytes(d)) for c, t, d in r.messages()]

    assert raw(tmp_path / "c4") == raw(tmp_path / "c1") == raw(source)
    ra, rb = stream_replay(tmp_path / "c1"), stream_replay(tmp_path / "c4")
    assert rb.T == ra.T == 100 and np.array_equal(ra.u, rb.u)
    rewrite(source, tmp_path / "s", max_bag_size=300_000)
    assert _chunks(tmp_path / "s")[1] <= 300_000 + 64 * 1024


def test_rosbag2_reads_every_message_of_the_default_bag(source, tmp_path, ros_env):
    """rosbag2's own MCAP plugin (rosbag2_py.SequentialReader, what ros2 bag play reads with)
    reads every message of a bag in the writer's default layout (zstd, 4 MiB chunks) byte for
    byte."""
    require_ros2_tools()
    from rosbags.rosbag2 import Reader

    rosbag2_py = import_or_skip("rosbag2_py", "the ROS 2 overlay's rosbag2_py (scripts/setup.sh)")
    bag = tmp_path / "default"
    rewrite(source, bag)
    assert _chunks(bag)[1] > 2**20          # a chunk larger than rosbags' own 1 MiB limit
    with Reader(bag) as r:
        want = [(c.topic, t, bytes(d)) for c, t, d in r.messages()]
    reader = rosbag2_py.SequentialReader()
    reader.open(rosbag2_py.StorageOptions(uri=str(bag), storage_id="mcap"),
                rosbag2_py.ConverterOptions("cdr", "cdr"))
    got = []
    while reader.has_next():
        topic, data, t = reader.read_next()
        got.append((topic, t, bytes(data)))
    assert sorted(got) == sorted(want) and len(got) == len(want) >= 600
