"""Read rosbag2 bags of the controller graph message by message, in bounded memory.

:func:`stream_bag` reads the bags :func:`gato.bagio.read_bag` reads (intact or damaged, MCAP or
sqlite3, split or not) message by message in log-time order without holding them (a bag of
hours does not fit memory): intact bags through rosbags' indexed readers (MCAP: the chunk index
of every file, so a ``start``/``end`` window decompresses only the chunks that overlap it; split
bags — several storage files in one folder — as one run); damaged bags through the same
fallback parsers as :func:`gato.bagio.read_bag`, one storage file at a time (memory bounded by
the largest file, which the recorder's splitting bounds), with the same problems reported.
Messages are decoded with the bag's own definitions, as there.

``rosbags`` is imported inside the functions: ``import gato`` stays free of it.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from .bagfiles import ZSTD_MAGIC, _decompress, _layout, _Progress, _Reading, _scan_files, _short
from .bagio import _decode_problems, _deserialize, _require, _typestore

__all__ = ["BagStream", "stream_bag"]


class BagStream:
    """A bag read message by message (:func:`stream_bag`); iterate it once for
    ``(topic, log_time_ns, message)`` in log-time order (per storage file for damaged bags).

    Known before iterating: ``path``, ``storage``, ``files`` (storage files in recording order),
    ``msgtypes`` / ``fielddefs`` (as in :class:`gato.bagio.BagContents`; for a damaged bag, those of the
    files read so far), ``total`` (messages on the requested topics the index lists inside the
    window, None when unknown), ``listed`` (topic -> messages the index lists; empty when
    unknown or for a window) and ``t_start_ns`` / ``t_end_ns`` (the bag's first / last log
    time, None when unknown). Filled while iterating: ``counts`` (topic -> messages decoded, or
    counted for the ``count_only`` topics), ``problems``, ``complete`` (as in :class:`gato.bagio.BagContents`).
    """

    def __init__(self, path: Path, storage: str, files: list, want, start_ns, end_ns, count_only=frozenset()):
        self.path, self.storage, self.files = path, storage, files
        self.msgtypes: dict[str, str] = {}
        self.fielddefs: dict[str, list[str]] = {}
        self.counts: dict[str, int] = {}
        self.problems: list[str] = []
        self.complete = True
        self.total: int | None = None
        self.listed: dict[str, int] = {}     # topic -> messages the index lists (whole bag, intact bags)
        self.t_start_ns: int | None = None
        self.t_end_ns: int | None = None
        self._want, self._start, self._end = want, start_ns, end_ns
        self._count_only = frozenset(count_only)
        self._gen = None

    def count_only(self, topics):
        """Only count (not decode, not yield) the messages on ``topics`` from here on (see
        :func:`stream_bag`): for a choice that needs ``msgtypes``, known once the bag is open (a
        damaged bag's first message was already read then, to learn its types)."""
        self._count_only = self._count_only | set(topics)

    def _counted(self, topic) -> bool:
        """True (and counted) for a message on a ``count_only`` topic: not decoded, not yielded."""
        if topic in self._count_only:
            self.counts[topic] = self.counts.get(topic, 0) + 1
            return True
        return False

    def __iter__(self):
        if self._gen is None:
            raise RuntimeError("a BagStream is iterated once")
        gen, self._gen = self._gen, None
        return gen

    def require(self, topic_fields: dict[str, list[str]]) -> list[str]:
        """:meth:`gato.bagio.BagContents.require` against the bag's definitions (no decoded message needed)."""
        lines = _require(self.msgtypes, self.fielddefs, topic_fields)
        self.problems.extend(lines)
        return lines


def stream_bag(path, topics=None, *, start_ns: int | None = None, end_ns: int | None = None,
               count_only=()) -> BagStream:
    """Open a bag for reading message by message (see :class:`BagStream`).

    ``path`` / ``topics`` as in :func:`gato.bagio.read_bag`. ``start_ns`` / ``end_ns``: only messages with
    ``start_ns <= log_time < end_ns`` (absolute log times [ns]; None: unbounded). ``count_only``:
    requested topics whose messages are only counted (``counts``), neither decoded nor yielded
    (decoding is most of the reading time; a corrupt message there is not noticed). Damaged bags do
    not raise (what can be read is yielded and ``problems`` says what was lost); raises
    ``FileNotFoundError`` when ``path`` does not exist, ``ValueError`` when it is not a bag or
    ``start_ns >= end_ns``.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder")
    if start_ns is not None and end_ns is not None and start_ns >= end_ns:
        raise ValueError(f"start_ns: {start_ns} is not before end_ns {end_ns}")
    if p.is_file() and p.name == "metadata.yaml":
        p = p.parent
    want = None if topics is None else ({topics} if isinstance(topics, str) else set(topics))
    storage, files, has_metadata = _layout(p)
    bs = BagStream(p, storage, files, want, start_ns, end_ns, count_only)
    if has_metadata or p.is_file():
        try:
            reader, sel, rd, store = _open_anyreader(p, want)
        except Exception as err:  # noqa: BLE001 - damaged or unusual bag: scan it ourselves
            bs.problems.append(f"{p.name}: rosbags could not read it ({_short(err)}): "
                               "reading the storage files directly")
            bs._gen = _stream_scan(bs, files, 0)
            _first_scan(bs)
            return bs
        _stream_meta(bs, rd, store)
        if start_ns is None and end_ns is None:
            bs.total = sum(c.msgcount for c in sel)
            for c in sel:
                bs.listed[c.topic] = bs.listed.get(c.topic, 0) + c.msgcount
        bs.t_start_ns, bs.t_end_ns = reader.start_time, reader.end_time - 1
        bs._gen = _stream_anyreader(bs, reader, sel, rd, store, files)
    else:
        bs.problems.append(f"{p.name}: no metadata.yaml (a recorder writes it when it closes the bag; "
                           f"killed?): reading {', '.join(f.name for f in files)} directly")
        bs._gen = _stream_scan(bs, files, 0)
        _first_scan(bs)
    return bs


def _open_anyreader(p: Path, want):
    from rosbags.highlevel import AnyReader
    from rosbags.interfaces import MessageDefinitionFormat
    from rosbags.typesys import Stores, get_typestore

    fmt = {MessageDefinitionFormat.MSG: "ros2msg", MessageDefinitionFormat.IDL: "ros2idl"}
    reader = AnyReader([p], default_typestore=get_typestore(Stores.ROS2_KILTED))
    reader.open()
    try:
        rd = _Reading(want)
        for c in reader.connections:
            rd.add_topic(c.topic, c.msgtype, getattr(c.ext, "serialization_format", "cdr"),
                         fmt.get(c.msgdef.format, ""), c.msgdef.data)
        sel = [c for c in reader.connections if rd.wanted(c.topic)]
        store = _typestore(rd)
    except BaseException:
        reader.close()
        raise
    return reader, sel, rd, store


def _stream_meta(bs: BagStream, rd: _Reading, store):
    """Types, field names and the per-topic skip problems of ``rd`` into ``bs``; returns the
    topics that cannot be decoded."""
    bs.msgtypes.update(rd.msgtypes)
    bs.fielddefs.update({t: [f[0] for f in store.fielddefs[t][1]] for t in set(rd.msgtypes.values())
                         if t in store.fielddefs})
    skip = set()
    for topic, msgtype in sorted(rd.msgtypes.items()):
        if not rd.wanted(topic):
            continue
        if rd.formats.get(topic, "cdr") != "cdr":
            line = f"{topic}: serialization format {rd.formats[topic]!r} is not CDR: skipped"
            skip.add(topic)
        elif msgtype not in store.fielddefs:
            line = (f"{topic}: type {msgtype} has no definition in the bag and is not a standard ROS 2 type: "
                    "skipped")
            skip.add(topic)
        else:
            bs.counts.setdefault(topic, 0)
            continue
        if line not in bs.problems:
            bs.problems.append(line)
    return skip


class _Decoder:
    """Decodes raw messages of a stream and counts failures per topic (reported at the end)."""

    def __init__(self, bs: BagStream):
        self.bs = bs
        self.failed: Counter = Counter()
        self.first_err: dict = {}

    def __call__(self, store, topic, msgtype, data):
        try:
            if data[:4] == ZSTD_MAGIC:  # --compression-mode message, read without rosbags
                data = _decompress(data, "zstd", 0, False)
            msg = _deserialize(store, data, msgtype)
        except Exception as err:  # noqa: BLE001 - corrupt CDR raises several kinds
            self.failed[topic] += 1
            self.first_err.setdefault(topic, err)
            return None
        self.bs.counts[topic] = self.bs.counts.get(topic, 0) + 1
        return msg

    def finish(self):
        bs = self.bs
        bs.problems += _decode_problems(self.failed, self.first_err, bs.counts, bs._want, bs.path.name)
        if self.failed:
            bs.complete = False


def _stream_anyreader(bs: BagStream, reader, sel, rd: _Reading, store, files):
    skip = _stream_meta(bs, rd, store)
    dec = _Decoder(bs)
    n, last_t, failed_at = 0, None, None
    try:
        if sel:  # an empty selection would make rosbags yield every message
            for c, t, data in reader.messages(connections=sel, start=bs._start, stop=bs._end):
                n += 1
                last_t = t
                if c.topic in skip or bs._counted(c.topic):
                    continue
                msg = dec(store, c.topic, c.msgtype, bytes(data))
                if msg is not None:
                    yield c.topic, t, msg
    except Exception as err:  # noqa: BLE001 - damage found while reading: continue with the scanners
        failed_at = err
    finally:
        reader.close()
    listed = sum(c.msgcount for c in sel)
    if failed_at is None and (bs._start is not None or bs._end is not None or n >= listed):
        dec.finish()
        return
    why = (f"rosbags stopped after {n} messages ({_short(failed_at)})" if failed_at is not None
           else f"the index lists {listed} messages, {n} were read")
    bs.problems.append(f"{bs.path.name}: {why}: reading the rest from the storage files directly")
    dec.finish()
    yield from _stream_scan(bs, files, None if last_t is None else last_t + 1)


def _first_scan(bs: BagStream):
    """Scan the first storage file now so that the stream's types are known before iterating."""
    gen = bs._gen
    first = next(gen, None)

    def chain():
        if first is not None:
            yield first
            yield from gen

    bs._gen = chain()


def _stream_scan(bs: BagStream, files: list, after_ns):
    """The fallback parsers, one storage file at a time; messages at or after ``after_ns``."""
    start = bs._start if after_ns is None else max(after_ns, bs._start or after_ns)
    dec = _Decoder(bs)
    defs_key, store = None, None
    for f in files:
        rd = _Reading(bs._want)
        _scan_files([f], rd, _Progress(None))
        key = tuple(sorted(rd.defs.items()))
        if store is None or key != defs_key:
            store, defs_key = _typestore(rd), key
        skip = _stream_meta(bs, rd, store)
        for line in rd.problems:
            if line not in bs.problems:
                bs.problems.append(line)
        if rd.damaged:
            bs.complete = False
        raw = sorted(rd.raw, key=lambda r: r[2])  # stable: equal times keep their recorded order
        rd.raw = []
        for topic, msgtype, t, data in raw:
            if topic in skip or (start is not None and t < start) or (bs._end is not None and t >= bs._end):
                continue
            if bs._counted(topic):
                continue
            msg = dec(store, topic, msgtype, data)
            if msg is not None:
                yield topic, t, msg
    dec.finish()
