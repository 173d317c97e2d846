"""Read rosbag2 bags of the controller graph without ROS, also when they are damaged.

``gato replay BAG`` reads bags recorded by the project's recorder (``rosbags`` Writer, MCAP
or sqlite3) or by ``ros2 bag record`` on a robot. Messages are decoded with the bag's OWN
embedded message definitions (MCAP schemas, the sqlite3 ``message_definitions`` table), so
neither a ROS install nor the package of gato's message types is needed, and a bag recorded
by another gato version decodes with the definitions it was recorded with. Types without an embedded
definition fall back to the standard ROS 2 (Kilted) types.

Bags from a robot are often damaged: a recorder killed with SIGKILL leaves no
``metadata.yaml`` and an MCAP file without summary and footer, a full disk cuts a file at an
arbitrary byte, an sqlite3 file may be cut or overwritten. :func:`read_bag` first reads a
bag through ``rosbags.highlevel.AnyReader``; when that fails it parses the storage files
itself (a streaming MCAP record parser that stops cleanly at the cut, and a row-by-row
sqlite3 reader), reads everything that can be read and says in ``problems`` what was lost.

:func:`stream_bag` / :class:`BagStream` (message by message, in bounded memory) live in
:mod:`gato.replay.bagstream`, which builds on this module's parsers.

``rosbags`` is imported inside the functions: ``import gato`` stays free of it.
"""
from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["BagContents", "read_bag"]

MCAP_MAGIC = b"\x89MCAP0\r\n"
SQLITE_MAGIC = b"SQLite format 3\x00"
# A zstd frame: how rosbag2's --compression-format zstd stores a message (--compression-mode
# message) or a whole storage file (file mode, ``*.mcap.zstd`` / ``*.db3.zstd``). CDR data
# starts with its encapsulation header (0x00 ...), so the magic cannot be a plain message.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LOST = b"<gato:lost-data>"  # 16 bytes: padding of a cut sqlite3 file, see _read_sqlite

# MCAP opcodes (https://mcap.dev/spec); every other valid opcode is skipped.
_OP_FOOTER, _OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK, _OP_DATA_END = 0x02, 0x03, 0x04, 0x05, 0x06, 0x0F
_MSG_HEADER = struct.Struct("<HIQQ")  # channel_id, sequence, log_time, publish_time: 22 bytes

# Progress: the read phase (bytes or rows) is the first half, decoding the second half.
_READ_SHARE = 0.5


@dataclass
class BagContents:
    """What :func:`read_bag` could read from a bag.

    ``messages[topic]`` is a list of ``(log_time_ns, message)`` in log-time order; messages are
    ``rosbags`` dataclasses (numeric arrays as numpy arrays, times as
    ``builtin_interfaces/msg/Time``). Every requested topic that is in the bag has an entry
    (possibly empty); requested topics that are not in the bag have none.
    """

    path: Path
    storage: str  # "mcap" | "sqlite3"
    # topic -> [(log_time_ns, message)] in log-time order (requested topics only)
    messages: dict[str, list[tuple[int, object]]] = field(default_factory=dict)
    # topic -> "pkg/msg/Type" for every topic in the bag, also ones not requested
    msgtypes: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # topic -> messages decoded
    problems: list[str] = field(default_factory=list)  # what was wrong and what was done about it
    # False when the bag is truncated or corrupted and only part of it was read (a topic skipped
    # for want of a type definition alone does not make a bag incomplete: see problems)
    complete: bool = True
    # msgtype -> top-level field names of the bag's own definition: lets require() check a
    # topic without a decoded message.
    fielddefs: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def require(self, topic_fields: dict[str, list[str]]) -> list[str]:
        """Check that the bag's messages have the fields a consumer needs.

        ``topic_fields`` maps topic -> field names (``"a.b"`` for nested fields). Returns one
        problem line per topic absent from the bag and per missing field (also appended to
        :attr:`problems`); an empty list means everything is there.
        """
        lines = _require(self.msgtypes, self.fielddefs, topic_fields,
                         lambda topic: (self.messages.get(topic) or [(None, None)])[0][1])
        self.problems.extend(lines)
        return lines


def _require(msgtypes, fielddefs, topic_fields, first=lambda topic: None) -> list[str]:
    """The problem lines of :meth:`BagContents.require`: ``first(topic)`` gives a decoded message
    to check nested fields on (None: the bag's definition, top-level names only)."""
    lines = []
    for topic, names in topic_fields.items():
        if topic not in msgtypes:
            lines.append(f"{topic}: not in the bag")
            continue
        msgtype = msgtypes[topic]
        msg = first(topic)
        for name in names:
            if msg is not None:
                obj, ok = msg, True
                for part in name.split("."):
                    if not hasattr(obj, part):
                        ok = False
                        break
                    obj = getattr(obj, part)
            elif msgtype in fielddefs:
                ok = name.split(".")[0] in fielddefs[msgtype]
            else:
                continue  # nothing decoded and no definition: nothing to check against
            if not ok:
                lines.append(f"{topic}: {msgtype} in this bag has no field '{name}' "
                             "(a different message version; recorded by another gato?)")
    return lines


def read_bag(path, topics=None, *, progress: Callable[[float], None] | None = None) -> BagContents:
    """Read a rosbag2 bag: a folder (``metadata.yaml`` + ``.mcap``/``.db3`` files), a folder
    of ``.mcap``/``.db3`` files without ``metadata.yaml``, or one ``.mcap``/``.db3`` file.

    ``topics``: the topics to decode (``None``: all); topics not in the bag are not an error.
    ``progress``: called with the fraction read (0..1], at most 20 times.

    Damaged bags do not raise: what can be read is returned, ``complete`` is False and
    ``problems`` says what was lost. Raises ``FileNotFoundError`` when ``path`` does not
    exist and ``ValueError`` when it is not a bag at all.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder")
    if p.is_file() and p.name == "metadata.yaml":
        p = p.parent
    want = None if topics is None else ({topics} if isinstance(topics, str) else set(topics))
    storage, files, has_metadata = _layout(p)
    prog = _Progress(progress)

    rd = _Reading(want)
    if has_metadata or p.is_file():
        try:
            _read_anyreader(p, rd, prog)
        except Exception as err:  # noqa: BLE001 - any failure: damaged or unusual bag, scan it ourselves
            rd = _Reading(want)
            rd.problems.append(f"{p.name}: rosbags could not read it ({_short(err)}): "
                               "reading the storage files directly")
            _scan_files(files, rd, prog)
    else:
        rd.problems.append(f"{p.name}: no metadata.yaml (a recorder writes it when it closes the bag; "
                           f"killed?): reading {', '.join(f.name for f in files)} directly")
        _scan_files(files, rd, prog)

    res = BagContents(path=p, storage=storage)
    _decode(rd, res, prog)
    prog(1.0)
    return res


# ----------------------------------------------------------------------------------------------
# layout and shared state


def _layout(p: Path):
    """(storage, storage files, has metadata.yaml) of a bag path; ValueError if it is no bag."""
    not_a_bag = ValueError(f"{p}: not a rosbag2 bag (no metadata.yaml, *.mcap or *.db3)")
    if p.is_file():
        with p.open("rb") as fh:
            head = fh.read(16)
        inner = p.name.removesuffix(".zstd") if head.startswith(ZSTD_MAGIC) else p.name
        if inner.endswith(".mcap") or head.startswith(MCAP_MAGIC):
            return "mcap", [p], False
        if inner.endswith(".db3") or head.startswith(SQLITE_MAGIC):
            return "sqlite3", [p], False
        raise not_a_bag
    meta = p / "metadata.yaml"
    # *.zstd: files rosbag2 compressed whole (--compression-mode file)
    mcaps = sorted([*p.glob("*.mcap"), *p.glob("*.mcap.zstd")])
    db3s = sorted([*p.glob("*.db3"), *p.glob("*.db3.zstd")])
    listed: list[Path] = []
    storage = ""
    if meta.is_file():
        text = meta.read_text(errors="replace")
        if m := re.search(r"storage_identifier:\s*['\"]?(\w+)", text):
            storage = m.group(1)
        # relative_file_paths: a YAML list of names; a plain regex avoids a YAML dependency.
        block = re.search(r"relative_file_paths:\s*\n((?:\s*-\s*.+\n?)+)", text)
        if block:
            listed = [p / Path(x.strip().strip("'\"")).name
                      for x in re.findall(r"-\s*(.+)", block.group(1))]
    elif not mcaps and not db3s:
        raise not_a_bag
    if not storage:
        storage = "mcap" if mcaps or any(".mcap" in f.suffixes for f in listed) else "sqlite3"
    own = mcaps if storage == "mcap" else db3s
    # Files metadata.yaml lists first (their order is the recording order), then any it does not
    # know: a split file being written when the recorder died is not listed yet.
    files = [f for f in listed if f.exists()] + [f for f in own if f not in listed]
    return storage, files, meta.is_file()


class _Reading:
    """Raw messages and type information gathered by the readers, decoded by :func:`_decode`."""

    def __init__(self, want):
        self.want = want
        self.raw: list = []            # (topic, msgtype, log_time_ns, cdr bytes)
        self.defs: dict = {}           # msgtype -> (encoding, definition text)
        self.msgtypes: dict = {}       # topic -> msgtype
        self.formats: dict = {}        # topic -> serialization format ("cdr")
        self.problems: list = []
        self.damaged = False

    def wanted(self, topic: str) -> bool:
        return self.want is None or topic in self.want

    def add_topic(self, topic, msgtype, fmt="cdr", encoding="", text=""):
        self.msgtypes.setdefault(topic, msgtype)
        self.formats.setdefault(topic, fmt or "cdr")
        # An empty definition is "no definition": rosbag2 writes one (encoding "unknown") when it
        # could not find the type's .msg file.
        if text and text.strip() and msgtype not in self.defs:
            self.defs[msgtype] = (encoding, text)


class _Progress:
    """Forwards a fraction in [0, 1] to the callback at most 20 times (every 5 %)."""

    def __init__(self, cb):
        self.cb, self.step = cb, 0

    def __call__(self, frac: float):
        if self.cb is None:
            return
        s = int(min(max(frac, 0.0), 1.0) * 20 + 1e-9)
        if s > self.step:
            self.step = s
            self.cb(s / 20)


def _short(err: BaseException, n: int = 160) -> str:
    s = f"{type(err).__name__}: {err}".replace("\n", " ")
    return s if len(s) <= n else s[: n - 3] + "..."


def _secs(t_ns: int, t0: int | None) -> str:
    return f"{(t_ns - (t0 if t0 is not None else t_ns)) / 1e9:.2f}"


# ----------------------------------------------------------------------------------------------
# rosbags AnyReader: the normal path for intact bags


def _read_anyreader(p: Path, rd: _Reading, prog: _Progress):
    from rosbags.highlevel import AnyReader
    from rosbags.interfaces import MessageDefinitionFormat
    from rosbags.typesys import Stores, get_typestore

    fmt = {MessageDefinitionFormat.MSG: "ros2msg", MessageDefinitionFormat.IDL: "ros2idl"}
    with AnyReader([p], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        for c in reader.connections:
            rd.add_topic(c.topic, c.msgtype, getattr(c.ext, "serialization_format", "cdr"),
                         fmt.get(c.msgdef.format, ""), c.msgdef.data)
        sel = [c for c in reader.connections if rd.wanted(c.topic)]
        if not sel:  # an empty selection would make rosbags yield every message
            return
        total = max(1, sum(c.msgcount for c in sel))
        n = 0
        for c, t, data in reader.messages(connections=sel):
            rd.raw.append((c.topic, c.msgtype, t, bytes(data)))
            n += 1
            if n % 256 == 0:
                prog(_READ_SHARE * n / total)
        if n < sum(c.msgcount for c in sel):
            # Should not happen with an intact index; make the scanners look at it instead.
            raise RuntimeError(f"the index lists {sum(c.msgcount for c in sel)} messages, {n} were read")


# ----------------------------------------------------------------------------------------------
# fallbacks: the storage files read directly


def _scan_files(files: list, rd: _Reading, prog: _Progress):
    sizes = [max(1, f.stat().st_size) if f.exists() else 1 for f in files]
    done = 0
    for f, size in zip(files, sizes):
        base, share = done / sum(sizes), size / sum(sizes)

        def sub(frac, base=base, share=share):
            prog(_READ_SHARE * (base + share * frac))

        if not f.exists():
            rd.problems.append(f"{f.name}: listed in metadata.yaml but missing")
            rd.damaged = True
        elif _head_n(f, 4) == ZSTD_MAGIC:
            _scan_zstd_file(f, rd, sub)
        elif f.suffix == ".db3" or _head_n(f, 16).startswith(SQLITE_MAGIC):
            _read_sqlite(f, rd, sub)
        else:
            _scan_mcap(f, rd, sub)
        done += size


def _scan_zstd_file(f: Path, rd: _Reading, sub):
    """A storage file rosbag2 compressed whole (``--compression-mode file``): decompressed into a
    temporary file, as far as it decompresses (a cut file gives its intact start), then read
    like an uncompressed one."""
    import tempfile

    inner = f.name.removesuffix(".zstd")
    with tempfile.TemporaryDirectory(prefix="gato_bagio_") as tmp:
        out = Path(tmp) / inner
        err = _unzstd_file(f, out)
        if err:
            rd.problems.append(f"{f.name}: the zstd stream ends early or is broken ({err}): "
                               f"reading the {out.stat().st_size} bytes it gave")
            rd.damaged = True
        if out.stat().st_size == 0:
            rd.problems.append(f"{f.name}: nothing decompresses: skipped")
            rd.damaged = True
            return
        if inner.endswith(".db3") or _head_n(out, 16).startswith(SQLITE_MAGIC):
            _read_sqlite(out, rd, sub)
        else:
            _scan_mcap(out, rd, sub)


def _zstd_module():
    """The zstd module of this Python (3.14's compression.zstd or backports.zstd), or None."""
    try:
        from compression import zstd  # Python >= 3.14
    except ImportError:
        try:
            from backports import zstd
        except ImportError:
            return None
    return zstd


def _unzstd_file(src: Path, dst: Path) -> str:
    """Decompress every zstd frame of ``src`` into ``dst`` (streaming); returns "" or what went
    wrong (a cut or corrupt stream: ``dst`` holds what came out before it)."""
    zstd = _zstd_module()
    with src.open("rb") as fi, dst.open("wb") as fo:
        if zstd is None:
            import zstandard  # noqa: PLC0415 - optional, only without backports.zstd
            try:
                zstandard.ZstdDecompressor().copy_stream(fi, fo, read_size=1 << 20)
            except zstandard.ZstdError as e:
                return _short(e, 80)
            return ""
        d, fed = zstd.ZstdDecompressor(), False   # fed: bytes went into d's (unfinished) frame
        while True:
            block = fi.read(1 << 20)
            if not block:
                return "" if d.eof or not fed else "the stream is cut"
            while block:
                try:
                    fo.write(d.decompress(block))
                except zstd.ZstdError as e:
                    return _short(e, 80)
                fed = True
                if d.eof:       # one frame done; the next one (if any) needs a new decompressor
                    block = d.unused_data
                    d, fed = zstd.ZstdDecompressor(), False
                else:
                    block = b""


class _Records:
    """Iterates MCAP records (opcode, body start, body end, record start) of ``buf[pos:end]``.

    Stops at the first record that does not fit (``stop = "short"``: truncated, or a corrupt
    length), at an invalid opcode (``"badop"``: record framing lost) or exactly at ``end``
    (``"end"``); ``at`` is the offset where it stopped.
    """

    def __init__(self, buf, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end
        self.stop, self.at = "", pos

    def __iter__(self):
        buf, pos, end = self.buf, self.pos, self.end
        while True:
            self.at = pos
            if pos == end:
                self.stop = "end"
                return
            if pos + 9 > end:
                self.stop = "short"
                return
            op = buf[pos]
            # 0x01-0x0F are the spec's records, 0x80-0xFF private ones; the rest means garbage.
            if op == 0 or 0x10 <= op < 0x80:
                self.stop = "badop"
                return
            (length,) = struct.unpack_from("<Q", buf, pos + 1)
            body_end = pos + 9 + length
            if body_end > end:
                self.stop = "short"
                return
            yield op, pos + 9, body_end, pos
            pos = body_end


class _McapFile:
    """State of one MCAP file during a scan: its schemas, channels and raw messages."""

    def __init__(self, f: Path, rd: _Reading):
        self.f, self.rd = f, rd
        self.schemas: dict = {}        # id -> (name, encoding, text)
        self.channels: dict = {}       # id -> (topic, schema id, message encoding)
        self.msgs: list = []           # (channel id, log_time, bytes)
        self.t0: int | None = None     # first log time seen: problem lines give times from it
        self.t_last: int | None = None
        self.n = 0                     # complete message records seen (all topics)

    def record(self, buf, op: int, a: int, b: int):
        """Handle one record whose body is ``buf[a:b]`` (schemas, channels, messages)."""
        if op == _OP_MESSAGE:
            if b - a < _MSG_HEADER.size:
                raise ValueError("message record shorter than its header")
            cid, _, t, _ = _MSG_HEADER.unpack_from(buf, a)
            self.n += 1
            self.t0 = t if self.t0 is None else min(self.t0, t)
            self.t_last = t if self.t_last is None else max(self.t_last, t)
            ch = self.channels.get(cid)
            if ch is None or self.rd.wanted(ch[0]):  # unknown channel: maybe defined later
                self.msgs.append((cid, t, bytes(buf[a + _MSG_HEADER.size:b])))
        elif op == _OP_SCHEMA:
            (sid,) = struct.unpack_from("<H", buf, a)
            name, o = _str(buf, a + 2)
            enc, o = _str(buf, o)
            (n,) = struct.unpack_from("<I", buf, o)
            if o + 4 + n > b:
                raise ValueError("schema data runs past its record")
            self.schemas.setdefault(sid, (name, enc, bytes(buf[o + 4:o + 4 + n]).decode(errors="replace")))
        elif op == _OP_CHANNEL:
            cid, sid = struct.unpack_from("<HH", buf, a)
            topic, o = _str(buf, a + 4)
            enc, o = _str(buf, o)
            self.channels.setdefault(cid, (topic, sid, enc))

    def chunk(self, buf, a: int, b: int, rec_at: int, partial: bool):
        """Read the records of the chunk whose body is ``buf[a:b]``; ``partial``: the file ends
        inside it (read its complete records; compressed ones as far as they decompress)."""
        start_t, end_t, usize, crc = struct.unpack_from("<QQQI", buf, a)
        comp, o = _str(buf, a + 28)
        (rlen,) = struct.unpack_from("<Q", buf, o)
        data = buf[o + 8:min(o + 8 + rlen, b)]
        if not partial and o + 8 + rlen > b:
            raise ValueError("chunk records run past the chunk")
        where = f"{self.f.name}: chunk at byte {rec_at} (t={_secs(start_t, self.t0)}..{_secs(end_t, self.t0)} s)"
        try:
            data = _decompress(bytes(data), comp, usize, partial)
        except Exception as err:  # noqa: BLE001 - unknown compression or broken stream
            self.rd.problems.append(f"{where}: cannot decompress ({_short(err)}): skipped")
            self.rd.damaged = True
            return
        if not partial and crc and zlib.crc32(data) != crc:
            lost = self._count(data)
            self.rd.problems.append(f"{where}: CRC mismatch (corrupted): skipped"
                                    + (f" {lost}" if lost else ""))
            self.rd.damaged = True
            return
        n0 = self.n
        recs = _Records(data, 0, len(data))
        try:
            for op, ra, rb, _ in recs:
                self.record(data, op, ra, rb)
        except (struct.error, ValueError, UnicodeDecodeError) as err:
            recs.stop = f"corrupt record ({_short(err, 60)})"
        if recs.stop == "end" or partial and recs.stop == "short":
            return
        self.rd.problems.append(f"{where}: record framing lost at byte {recs.at} of its {len(data)} "
                                f"bytes of records after {self.n - n0} messages "
                                f"({recs.stop}): skipped the rest of the chunk")
        self.rd.damaged = True

    def _count(self, data) -> str:
        """'N messages (/a: n, /b: m)' in a chunk that will be skipped, when its framing parses."""
        per = Counter()
        try:
            for op, ra, _, _ in _Records(data, 0, len(data)):
                if op == _OP_MESSAGE:
                    (cid,) = struct.unpack_from("<H", data, ra)
                    per[self.channels.get(cid, (f"channel {cid}",))[0]] += 1
        except struct.error:
            pass
        if not per:
            return ""
        return f"{sum(per.values())} messages ({', '.join(f'{k}: {v}' for k, v in sorted(per.items()))})"


def _str(buf, o: int):
    """An MCAP string (u32 length + UTF-8) at ``o``: (text, offset after it)."""
    (n,) = struct.unpack_from("<I", buf, o)
    if o + 4 + n > len(buf):
        raise ValueError("string runs past the buffer")
    return bytes(buf[o + 4:o + 4 + n]).decode(), o + 4 + n


def _decompress(data: bytes, comp: str, usize: int, partial: bool) -> bytes:
    """Chunk records decompressed; for a ``partial`` (cut) chunk as much as decompresses."""
    if comp == "":
        return data
    if comp == "zstd":
        try:
            from compression import zstd  # Python >= 3.14
        except ImportError:
            try:
                from backports import zstd
            except ImportError:
                zstd = None
        if zstd is not None:
            d = zstd.ZstdDecompressor()
            return d.decompress(data) if partial else zstd.decompress(data)
        import zstandard  # noqa: PLC0415 - optional, only for zstd chunks
        return zstandard.ZstdDecompressor().decompressobj().decompress(data) if partial \
            else zstandard.ZstdDecompressor().decompress(data, max_output_size=usize)
    if comp == "lz4":
        import lz4.frame
        return lz4.frame.LZ4FrameDecompressor().decompress(data) if partial else lz4.frame.decompress(data)
    raise ValueError(f"unknown chunk compression {comp!r}")


def _scan_mcap(f: Path, rd: _Reading, sub):
    """Stream the records of one MCAP file; stop cleanly where it is cut or its framing is lost."""
    size = f.stat().st_size
    if size < len(MCAP_MAGIC):
        rd.problems.append(f"{f.name}: {size} bytes, no MCAP data: skipped")
        rd.damaged = True
        return
    # mmap: robot bags can be large; slicing an mmap copies only the slice.
    with f.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        _scan_mcap_buf(f, mm, size, rd, sub)


def _scan_mcap_buf(f: Path, buf, size: int, rd: _Reading, sub):
    if bytes(buf[:8]) != MCAP_MAGIC:
        rd.problems.append(f"{f.name}: does not start with the MCAP magic: skipped")
        rd.damaged = True
        return
    # A complete file ends with the magic again; without it a record running past the end
    # means the file was cut, with it the record's length field is corrupt.
    closed = size >= 16 and bytes(buf[size - 8:]) == MCAP_MAGIC
    mf = _McapFile(f, rd)
    recs = _Records(buf, 8, size)
    footer = data_end = False
    problem = ""
    last = 0
    for op, a, b, at in recs:
        try:
            if op == _OP_FOOTER:
                footer = True
                break
            if op == _OP_DATA_END:
                data_end = True
            elif op == _OP_CHUNK:
                mf.chunk(buf, a, b, at, partial=False)
            else:
                mf.record(buf, op, a, b)
        except (struct.error, ValueError, UnicodeDecodeError) as err:
            # The record's own length framed it, so the next record is still found.
            rd.problems.append(f"{f.name}: corrupt record (opcode 0x{op:02x}) at byte {at} "
                               f"({_short(err, 60)}): skipped")
            rd.damaged = True
        if b - last > size // 40:
            last = b
            sub(b / size)
    if recs.stop == "short" and not closed:
        at = recs.at
        if at + 9 <= size and buf[at] == _OP_CHUNK:
            try:  # the records that made it to disk before the cut
                mf.chunk(buf, at + 9, size, at, partial=True)
            except (struct.error, ValueError, UnicodeDecodeError):
                pass
        tail = ("all messages were before the cut (the summary is lost)" if data_end
                else "the rest is lost")
        problem = (f"{f.name}: truncated at byte {at} of {size} (no footer): read {mf.n} messages"
                   f"{_upto(mf)}; {tail}")
    elif recs.stop == "short" or recs.stop == "badop":
        problem = (f"{f.name}: record framing lost at byte {recs.at} of {size} (corrupted): "
                   f"read {mf.n} messages{_upto(mf)}; stopped there")
    elif not footer:
        problem = (f"{f.name}: ends at byte {size} without a footer (the recorder did not close "
                   f"it): read {mf.n} messages{_upto(mf)}; "
                   + ("all messages were before the end" if data_end else "the rest is lost"))
    if problem:
        rd.problems.append(problem)
        rd.damaged = True

    for cid, (topic, sid, enc) in sorted(mf.channels.items()):
        name, senc, text = mf.schemas.get(sid, ("", "", ""))
        # schema id 0: no schema; the type name is then unknown
        rd.add_topic(topic, name or "?", enc, senc, text)
    orphans = 0
    for cid, t, data in mf.msgs:
        ch = mf.channels.get(cid)
        if ch is None:
            orphans += 1
        elif rd.wanted(ch[0]):
            rd.raw.append((ch[0], rd.msgtypes[ch[0]], t, data))
    if orphans:
        rd.problems.append(f"{f.name}: {orphans} messages of channels without a channel record: skipped")
        rd.damaged = True
    sub(1.0)


def _upto(mf: _McapFile) -> str:
    return f" up to t={_secs(mf.t_last, mf.t0)} s" if mf.t_last is not None else ""


def _read_sqlite(f: Path, rd: _Reading, sub):
    """Rows of a rosbag2 sqlite3 file in rowid order until sqlite reports damage; then try to
    resume further on (a cut or overwritten file often loses only some pages)."""
    import shutil
    import tempfile

    size = f.stat().st_size
    head = _head_n(f, 100)
    declared = 0
    if head.startswith(SQLITE_MAGIC) and len(head) == 100:
        (ps,) = struct.unpack_from(">H", head, 16)
        (npages,) = struct.unpack_from(">I", head, 28)
        declared = (65536 if ps == 1 else ps) * npages
    if declared <= size:
        _read_sqlite_db(f, f, rd, sub)
        return
    # A cut file: sqlite refuses even its intact first pages ("database disk image is
    # malformed") when the file is shorter than its header says. A copy padded to that size
    # reads up to the first missing page. The padding repeats _LOST, not zeros: its bytes are
    # no valid page type and no valid page number, so sqlite stops at a missing page; and a
    # row whose last overflow page is the cut one (sqlite does not notice) holds _LOST in its
    # data and is dropped instead of decoded with made-up bytes.
    rd.problems.append(f"{f.name}: cut at byte {size} of the {declared} its header declares")
    rd.damaged = True
    with tempfile.TemporaryDirectory(prefix="gato_bagio_") as tmp:
        padded = Path(tmp) / f.name
        with f.open("rb") as src, padded.open("wb") as dst:
            shutil.copyfileobj(src, dst)
            block = _LOST * (1 << 16)
            left = declared - size
            while left > 0:
                left -= dst.write(block[:left])
        _read_sqlite_db(padded, f, rd, sub, lost=_LOST)


def _head_n(f: Path, n: int) -> bytes:
    with f.open("rb") as fh:
        return fh.read(n)


def _read_sqlite_db(db: Path, f: Path, rd: _Reading, sub, lost: bytes | None = None):
    """:func:`_read_sqlite` of the database file ``db`` (``f`` or a padded copy of it whose
    padding is ``lost``: rows holding it are dropped)."""
    import sqlite3

    con = None
    try:
        # Read-only: never touch a bag. immutable=1 when plain read-only cannot open it (a
        # WAL bag without its -shm file, a leftover journal it is not allowed to roll back).
        for uri in (f"file:{db}?mode=ro", f"file:{db}?immutable=1"):
            try:
                con = sqlite3.connect(uri, uri=True)
                tops = con.execute("SELECT id, name, type, serialization_format FROM topics").fetchall()
                break
            except sqlite3.OperationalError:
                if con is not None:
                    con.close()
                con = None
        if con is None:
            raise sqlite3.DatabaseError("cannot open the database read-only")
    except sqlite3.DatabaseError as err:
        rd.problems.append(f"{f.name}: sqlite3 cannot read the topics table ({err}): nothing read")
        rd.damaged = True
        if con is not None:
            con.close()
        return
    try:
        defs: dict = {}
        try:
            if con.execute("SELECT 1 FROM sqlite_master WHERE name='message_definitions'").fetchone():
                for typ, enc, text in con.execute(
                        "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions"):
                    defs.setdefault(typ, (enc, text))
        except sqlite3.DatabaseError as err:
            rd.problems.append(f"{f.name}: message_definitions unreadable ({err}): "
                               "using standard ROS 2 definitions")
            rd.damaged = True
        topic_of = {}
        for tid, name, typ, fmt in tops:
            enc, text = defs.get(typ, ("", ""))
            rd.add_topic(name, typ, fmt, enc, text)
            topic_of[tid] = (name, typ)
        ids = [tid for tid, (name, _) in topic_of.items() if rd.wanted(name)]
        if not ids:
            return
        try:
            (hi,) = con.execute("SELECT max(id) FROM messages").fetchone()
        except sqlite3.DatabaseError:
            hi = None
        n, last, dropped, err0 = 0, 0, 0, None
        resume, step = 0, 1
        sel = (f"SELECT id, topic_id, timestamp, data FROM messages WHERE id > ? "
               f"AND topic_id IN ({','.join('?' * len(ids))}) ORDER BY id")
        for _ in range(48):  # resume attempts after damage
            try:
                for rid, tid, t, data in con.execute(sel, (resume, *ids)):
                    last = rid
                    if lost is not None and lost in data:
                        dropped += 1
                        continue
                    name, typ = topic_of[tid]
                    rd.raw.append((name, typ, t, bytes(data)))
                    n += 1
                    if hi and n % 256 == 0:
                        sub(min(1.0, rid / hi))
                break
            except sqlite3.DatabaseError as err:
                err0 = err0 or err
                base = max(last, resume)
                if base >= (hi if hi is not None else 2**40):
                    break
                resume = base + step  # skip the unreadable rows, ever further
                step *= 2
        if dropped:
            rd.problems.append(f"{f.name}: {dropped} messages ran into the cut part of the file: dropped")
            rd.damaged = True
        if err0 is not None:
            of = f" of {hi}" if hi is not None else ""
            rd.problems.append(f"{f.name}: sqlite3 database damaged ({err0}): read {n} messages "
                               f"(rows up to id {last}{of}); the unreadable rows are lost")
            rd.damaged = True
    finally:
        con.close()
    sub(1.0)


# ----------------------------------------------------------------------------------------------
# decoding with the bag's own definitions


def _typestore(rd: _Reading):
    """A typestore of the standard ROS 2 (Kilted) types overridden by the bag's own definitions
    (they win: a bag decodes with what it was recorded with)."""
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    kilted = get_typestore(Stores.ROS2_KILTED)
    typs = dict(kilted.fielddefs)
    own: dict = {}
    for msgtype, (enc, text) in rd.defs.items():
        try:
            if enc == "ros2msg":
                # ROS 2 concatenates the dependencies after lines of '=' and 'MSG: pkg/Type'
                # headers; get_types_from_msg parses that whole format.
                own.update(get_types_from_msg(text, msgtype))
            elif enc in ("ros2idl", "omgidl"):
                sep = "=" * 80 + "\n"
                parts = text.split(sep)[1:] if text.startswith(sep + "IDL: ") else [text]
                for part in parts:
                    own.update(get_types_from_idl(part.split("\n", 1)[1] if part.startswith("IDL: ") else part))
        except Exception as err:  # noqa: BLE001 - typesys raises several kinds
            rd.problems.append(f"{msgtype}: the bag's definition does not parse ({_short(err, 100)})")
    typs.update(own)
    store = get_typestore(Stores.EMPTY)
    try:
        store.register(typs)
    except Exception:  # noqa: BLE001 - one bad definition must not cost the others
        store = get_typestore(Stores.EMPTY)
        store.register(dict(kilted.fielddefs))
        for name, fdef in own.items():
            try:
                store.register({name: fdef})
            except Exception as err:  # noqa: BLE001
                rd.problems.append(f"{name}: the bag's definition cannot be used ({_short(err, 100)})")
    return store


def _deserialize(store, data, msgtype):
    """``store.deserialize_cdr``, but accepting trailing bytes after a complete message:
    rclpy's serializer pads some messages (rcl_interfaces/ParameterEvent) beyond the
    3 alignment bytes rosbags allows, and ``ros2 bag record`` stores them as received."""
    try:
        return store.deserialize_cdr(data, msgtype)
    except Exception as err:  # noqa: BLE001
        if "size mismatch" not in str(err):
            raise
        msgdef = store.get_msgdef(msgtype)
        func = msgdef.deserialize_cdr_le if bool(data[1]) else msgdef.deserialize_cdr_be
        return func(data[4:], 0, msgdef.cls, store)[0]


def _decode(rd: _Reading, res: BagContents, prog: _Progress):
    store = _typestore(rd)
    res.msgtypes = dict(rd.msgtypes)
    res.fielddefs = {t: [f[0] for f in store.fielddefs[t][1]] for t in set(rd.msgtypes.values())
                     if t in store.fielddefs}
    skip = set()
    for topic, msgtype in sorted(rd.msgtypes.items()):
        if not rd.wanted(topic):
            continue
        if rd.formats.get(topic, "cdr") != "cdr":
            rd.problems.append(f"{topic}: serialization format {rd.formats[topic]!r} is not CDR: skipped")
            skip.add(topic)
        elif msgtype not in store.fielddefs:
            rd.problems.append(f"{topic}: type {msgtype} has no definition in the bag and is not a "
                               "standard ROS 2 type: skipped")
            skip.add(topic)
        else:
            res.messages.setdefault(topic, [])
    failed: Counter = Counter()
    first_err: dict = {}
    total = max(1, len(rd.raw))
    for i, (topic, msgtype, t, data) in enumerate(rd.raw):
        if topic in skip:
            continue
        try:
            if data[:4] == ZSTD_MAGIC:  # --compression-mode message, read without rosbags
                data = _decompress(data, "zstd", 0, False)
            msg = _deserialize(store, data, msgtype)
        except Exception as err:  # noqa: BLE001 - corrupt CDR raises several kinds
            failed[topic] += 1
            first_err.setdefault(topic, err)
            continue
        res.messages.setdefault(topic, []).append((t, msg))
        if i % 256 == 0:
            prog(_READ_SHARE + (1 - _READ_SHARE) * i / total)
    for topic, msgs in res.messages.items():
        msgs.sort(key=lambda x: x[0])  # stable: equal times keep their recorded order
        res.counts[topic] = len(msgs)
    rd.problems += _decode_problems(failed, first_err, res.counts, rd.want, res.path.name)
    rd.damaged = rd.damaged or bool(failed)
    res.problems = rd.problems
    res.complete = not rd.damaged


def _decode_problems(failed: Counter, first_err: dict, counts: dict, want, name: str) -> list[str]:
    """The problem lines of a decode: messages per topic that could not be decoded (``failed``,
    the first error of each in ``first_err``), or no readable message at all."""
    lines = [f"{topic}: {k} of {k + counts.get(topic, 0)} messages could not be decoded (corrupt data; "
             f"first: {_short(first_err[topic], 80)}): skipped" for topic, k in sorted(failed.items())]
    if not any(counts.values()):
        lines.append(f"{name}: no readable messages{'' if want is None else ' on the requested topics'}")
    return lines
