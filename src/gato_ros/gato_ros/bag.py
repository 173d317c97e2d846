"""rosbag2 files through the pure-Python ``rosbags`` library: a typestore that knows
the gato_msgs types (what the recorder writes with), the recorder's writer
(:class:`BagWriter`: zstd chunk compression, files split by size or duration like
``ros2 bag record --max-bag-size / --max-bag-duration``), and a reader returning decoded
messages per topic.

gato_msgs definitions come from the installed ``share/gato_msgs/msg/*.msg`` (ament
index), so a bag stores the same definition text and RIHS01 type hash rclpy uses.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["typestore", "gato_msgs_dir", "read_bag", "BagWriter", "COMPRESSIONS", "ZSTD_LEVEL", "CHUNK_SIZE"]

#: Compression choices of :class:`BagWriter`: "zstd" (MCAP: zstd-compressed chunks, what
#: ``ros2 bag record --storage-preset-profile zstd_fast`` writes; sqlite3: rosbag2's per-message
#: zstd) or "none".
COMPRESSIONS = ("zstd", "none")
#: zstd level of the MCAP chunks (rosbags' default is 3): on the controller graph's data (float64
#: plans and solver states, near their entropy) level 6 writes 2 % fewer bytes for ~2x the
#: compression CPU, which is still under 1 % of a core at 100 Hz (docs/benchmarks_recording.md, issue 21).
ZSTD_LEVEL = 6
#: Uncompressed bytes per MCAP chunk (rosbags writes 1 MiB chunks; rosbag2's ``zstd_small`` storage
#: preset writes 4 MiB, the mcap library's default is 768 KiB). zstd compresses each chunk on its
#: own, so the copies between one tick's messages and the next (the plan in StepResult, Plan and
#: the next SolveInput's warm start) are found only within a chunk: a chunk boundary stores them
#: again. On the controller graph at 100 Hz (~37 ticks per 1 MiB) 4 MiB chunks write 5 % fewer
#: bytes (0.608 -> 0.579 MB/s, docs/benchmarks_recording.md, issue 21); the cost: a recorder killed with
#: SIGKILL loses the chunk in memory (up to ~1.4 s of run instead of ~0.4 s), and a ``--start``
#: window reads up to one chunk more before its first tick.
CHUNK_SIZE = 4 * 1024 * 1024


def gato_msgs_dir() -> Path:
    """share/gato_msgs/msg of the sourced workspace (AMENT_PREFIX_PATH)."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        d = Path(prefix) / "share" / "gato_msgs" / "msg"
        if prefix and d.is_dir():
            return d
    raise FileNotFoundError("gato_msgs not found on AMENT_PREFIX_PATH: source install/setup.bash")


def typestore():
    """A rosbags Typestore of ROS 2 Kilted plus every gato_msgs message."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg

    ts = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for f in sorted(gato_msgs_dir().glob("*.msg")):
        types.update(get_types_from_msg(f.read_text(), f"gato_msgs/msg/{f.stem}"))
    ts.register(types)
    return ts


def read_bag(path, topics=None) -> dict:
    """{topic: [(log_time_ns, message), ...]} of a rosbag2 folder (MCAP or sqlite3), messages
    decoded with the bag's own definitions (rosbags dataclasses, numpy arrays for numeric
    sequences). The project's one bag reader, :func:`gato.bagio.read_bag`, does the work:
    a damaged bag gives what could be read (its problems are in that function's result)."""
    from gato.replay.bagio import read_bag as read

    return read(path, topics).messages


def _writer_base():
    from rosbags.rosbag2 import Writer

    return Writer


def _chunked_mcap_writer():
    from rosbags.rosbag2.storage_mcap import McapWriter

    class ChunkedMcapWriter(McapWriter):
        """rosbags' McapWriter with a chunk size of :attr:`chunk_size` uncompressed bytes
        (rosbags' own write() closes a chunk at 1 MiB, a constant: write() is its body with the
        limit as an attribute; the records and the index are the base class's)."""

        chunk_size = 2**20

        def write(self, connection, timestamp, data):
            from io import BytesIO

            from rosbags.rosbag2.storage_mcap import write_record, write_uint16, write_uint32, write_uint64

            # the body of McapWriter.write (rosbags 0.11), with the chunk limit as an attribute
            self.message_start_time = min(timestamp, self.message_start_time)
            self.message_end_time = max(timestamp, self.message_end_time)
            self.channel_stats[connection.id] += 1
            chunk = self.chunk
            chunk.message_start_time = min(timestamp, chunk.message_start_time)
            chunk.message_end_time = max(timestamp, chunk.message_end_time)
            chunk.msgs[connection.id].append((timestamp, chunk.bio.tell()))
            rec = BytesIO()
            write_uint16(rec, connection.id)
            write_uint32(rec, 0)          # sequence
            write_uint64(rec, timestamp)  # log time
            write_uint64(rec, timestamp)  # publish time
            rec.write(data)
            write_record(chunk.bio, 0x05, rec)
            if chunk.bio.tell() > self.chunk_size:
                self.close_chunk()

    return ChunkedMcapWriter


class BagWriter(_writer_base()):
    """A rosbags ``Writer`` (rosbag2 format version 9) that compresses and splits.

    Args:
        path: the bag folder (must not exist).
        storage: "mcap" or "sqlite3".
        compression: "zstd" or "none" (see :data:`COMPRESSIONS`).
        max_bag_size: start a new storage file once the current one holds this many bytes
            (0: never; MCAP only). The check runs before each write, on the bytes flushed to the
            file (chunks of ``chunk_size``), so a file ends up to one chunk above it, as with rosbag2.
        max_bag_duration_s: start a new file once the next message is this many seconds (log
            time) after the current file's first (0: never; MCAP only).
        zstd_level: zstd level of the MCAP chunks (1-22; default :data:`ZSTD_LEVEL`).
        chunk_size: uncompressed bytes per MCAP chunk (default :data:`CHUNK_SIZE`, 4 MiB; at
            least 4096). With ``max_bag_size`` a chunk is at most ``max_bag_size`` bytes, so a
            file still ends within about one chunk of its limit.

    Storage files are named ``<bag>_<k>.mcap`` (k = 0, 1, ...), like rosbag2's; each is a
    complete MCAP file (summary, chunk index) once the next one starts. ``metadata.yaml``,
    written on :meth:`close`, lists every file in order with its own message count and times,
    so ``ros2 bag info`` / ``ros2 bag play`` and :func:`gato.bagio.stream_bag` read the files
    as one bag; a recorder killed before closing leaves finished files plus a cut last one,
    which :mod:`gato.bagio` reads without ``metadata.yaml``. Raises ValueError naming the
    argument for a bad storage, compression or limit.
    """

    def __init__(self, path, *, storage: str = "mcap", compression: str = "zstd", max_bag_size: int = 0,
                 max_bag_duration_s: float = 0.0, zstd_level: int = ZSTD_LEVEL, chunk_size: int = CHUNK_SIZE):
        from rosbags.rosbag2 import StoragePlugin
        from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

        if storage not in ("mcap", "sqlite3"):
            raise ValueError(f"storage: expected mcap or sqlite3, got {storage!r}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression: expected one of {COMPRESSIONS}, got {compression!r}")
        if max_bag_size < 0 or max_bag_duration_s < 0:
            raise ValueError(f"max_bag_size / max_bag_duration_s: must be >= 0, got {max_bag_size} / "
                             f"{max_bag_duration_s}")
        if storage != "mcap" and (max_bag_size or max_bag_duration_s):
            raise ValueError("max_bag_size / max_bag_duration_s: splitting is supported for mcap storage only")
        if not 1 <= int(zstd_level) <= 22:
            raise ValueError(f"zstd_level: expected 1..22, got {zstd_level}")
        self.zstd_level = int(zstd_level)
        if int(chunk_size) < 4096:
            raise ValueError(f"chunk_size: expected >= 4096 bytes, got {chunk_size}")
        self.chunk_size = min(int(chunk_size), int(max_bag_size)) if max_bag_size else int(chunk_size)
        # an instance attribute, not the class's: rosbags' Writer.open() looks the plugin up here
        self.STORAGE_PLUGINS = {**self.STORAGE_PLUGINS, StoragePlugin.MCAP: _chunked_mcap_writer()}
        super().__init__(path, version=9, storage_plugin=StoragePlugin.MCAP if storage == "mcap"
                         else StoragePlugin.SQLITE3)
        if compression == "zstd":
            # MCAP: compressed chunks (readers decompress them transparently; the rosbag2 metadata
            # says no compression, as for rosbag2's zstd storage presets); sqlite3: per message.
            self.set_compression(CompressionMode.STORAGE if storage == "mcap" else CompressionMode.MESSAGE,
                                 CompressionFormat.ZSTD)
        self.storage_name, self.compression = storage, compression
        self.max_bag_size, self.max_bag_duration_ns = int(max_bag_size), int(max_bag_duration_s * 1e9)
        self.files: list[dict] = []     # per storage file: path, start, end, count
        self._qos: dict = {}            # connection id -> serialized offered QoS (to re-add per file)

    def open(self) -> None:
        super().open()
        self._set_level()
        self._new_file()

    def _set_level(self):
        """The MCAP chunks at zstd_level (rosbags compresses them with zstd.compress(data)) and
        chunk_size."""
        if self.storage_name == "mcap":
            self.storage.chunk_size = self.chunk_size
        if self.storage_name == "mcap" and self.compression == "zstd" and self.storage.compression == "zstd":
            import functools

            from rosbags.rosbag2.storage_mcap import zstd

            self.storage.compressor = functools.partial(zstd.compress, level=self.zstd_level)

    def _new_file(self):
        if self.storage_name == "mcap":
            # rosbags names the file <bag>.mcap; rosbag2 numbers them: <bag>_<k>.mcap. The open
            # handle follows the rename.
            dst = self.path / f"{self.path.name}_{len(self.files)}.mcap"
            self.storage.path.rename(dst)
            self.storage.path = dst
        self.files.append({"path": self.storage.path, "start": None, "end": None, "count": 0})

    def add_connection(self, topic, msgtype, **kw):
        conn = super().add_connection(topic, msgtype, **kw)
        self._qos[conn.id] = self.storage.channels[-1].metadata if self.storage_name == "mcap" else None
        return conn

    def bytes_written(self) -> int:
        """Bytes in the storage files so far (flushed chunks; MCAP), 0 for sqlite3."""
        done = sum(f.get("size", 0) for f in self.files[:-1])
        return done + (self.storage.bio.tell() if self.storage_name == "mcap" and self.storage else 0)

    def splits_before(self, timestamp: int) -> bool:
        """Whether a message written now at ``timestamp`` [ns] goes into a new storage file."""
        cur = self.files[-1]
        return bool(cur["count"] and self.storage_name == "mcap" and (
            (self.max_bag_size and self.storage.bio.tell() >= self.max_bag_size)
            or (self.max_bag_duration_ns and timestamp - cur["start"] >= self.max_bag_duration_ns)))

    def write(self, connection, timestamp: int, data) -> None:
        if self.splits_before(timestamp):
            self._split()
        cur = self.files[-1]
        super().write(connection, timestamp, data)
        cur["count"] += 1
        cur["start"] = timestamp if cur["start"] is None else min(cur["start"], timestamp)
        cur["end"] = timestamp if cur["end"] is None else max(cur["end"], timestamp)

    def _split(self):
        """Close the current MCAP file (summary and index written) and continue in the next."""
        from rosbags.rosbag2 import StoragePlugin

        cur = self.files[-1]
        self.storage.close(self.version, f"gato_ros BagWriter: file {len(self.files) - 1} of a split bag")
        cur["size"] = cur["path"].stat().st_size
        self.storage = self.STORAGE_PLUGINS[StoragePlugin.MCAP](self.path, self.compression_mode)
        self._set_level()
        self._new_file()
        # every file carries every schema and channel: each one reads on its own
        added = set()
        for conn in self.connections:
            if conn.msgtype not in added:
                self.storage.add_msgtype(conn)
                added.add(conn.msgtype)
            self._add_channel(conn)

    def _add_channel(self, conn):
        from rosbags.rosbag2.storage_mcap import Channel, write_channel

        st = self.storage
        st.channels.append(Channel(conn.id, conn.msgtype, conn.topic, conn.ext.serialization_format,
                                   self._qos[conn.id]))
        st.channel_stats[conn.id] = 0
        write_channel(st.chunk.bio, st.channels[-1], st.schemas)

    def close(self) -> None:
        """Close the last file and write metadata.yaml listing every file."""
        super().close()
        if len(self.files) == 1:
            return      # one file: rosbags' metadata.yaml is complete
        from ruamel.yaml import YAML

        yaml = YAML(typ="safe")
        yaml.default_flow_style = False
        meta = yaml.load(self.metapath.read_text())
        info = meta["rosbag2_bagfile_information"]
        files = self.files
        info["relative_file_paths"] = [f["path"].name for f in files]
        info["files"] = [{"path": f["path"].name,
                          "starting_time": {"nanoseconds_since_epoch": int(f["start"] or 0)},
                          "duration": {"nanoseconds": int((f["end"] or 0) - (f["start"] or 0))},
                          "message_count": int(f["count"])} for f in files]
        tmp = self.metapath.with_suffix(".yaml.tmp")
        with tmp.open("w") as fh:
            yaml.dump(meta, fh)
        tmp.replace(self.metapath)
