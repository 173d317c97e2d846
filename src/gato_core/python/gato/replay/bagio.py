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

The storage-file parsers are :mod:`gato.replay.bagfiles`; :func:`stream_bag` /
:class:`BagStream` (message by message, in bounded memory) live in :mod:`gato.replay.bagstream`,
which builds on both.

``rosbags`` is imported inside the functions: ``import gato`` stays free of it.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .bagfiles import _READ_SHARE, ZSTD_MAGIC, _decompress, _layout, _Progress, _Reading, _scan_files, _short

__all__ = ["BagContents", "read_bag"]


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
