"""A rosbag2 bag's storage files read directly, also when they are damaged: the bag layout, the
MCAP record parser (stops cleanly at a cut), whole-file zstd, the row-by-row sqlite3 reader,
and the reading state they fill (raw messages and type information, decoded by
:mod:`gato.replay.bagio`). The fallback of :func:`gato.replay.bagio.read_bag` when
``rosbags.highlevel.AnyReader`` fails, and the storage layer of :mod:`gato.replay.bagstream`.
"""
from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections import Counter
from pathlib import Path


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
