"""Per-row numbers of a replay (one row per tick, or per model interval) in bounded memory.

A replay of an hour at 100 Hz has 360,000 ticks and as many model intervals; their per-row
numbers (differences, step times, the replayed command, the residual torques: 0.1-0.2 kB a
row) are what the report is computed from. :class:`Rows` keeps the latest rows in a small
buffer and appends the rest to an unnamed temporary file (no name on disk: it is gone when
closed, also when the process dies), and gives them back in chunks, so that the report's
statistics are computed chunk by chunk (:func:`percentiles`: exact order statistics by
histogram passes; :func:`gato.replay.report.decimate_rows`: the plotted points) and memory
does not grow with the run.
"""
from __future__ import annotations

import tempfile

import numpy as np

__all__ = ["Rows", "BUFFER_ROWS", "CHUNK_ROWS", "EXACT_BELOW", "percentiles"]

#: Rows held in memory before they are appended to the file (0.5 MB at the tick row's ~0.13 kB).
BUFFER_ROWS = 4096
#: Rows read back at a time (the report's passes): 0.5-0.7 MB.
CHUNK_ROWS = 4096
#: :func:`percentiles` sorts at most this many values at once (0.5 MB).
EXACT_BELOW = 65536


class Rows:
    """An append-only table of fixed-size rows.

    ``columns``: {name: (shape, dtype)}, e.g. ``{"du": ((), np.float64), "u": ((7,), np.float64)}``.
    :meth:`add` appends one row (every column given by name); :meth:`chunks` / :meth:`read` /
    :meth:`column` read them back (values bit for bit as added). Memory: ``buffer_rows`` rows; the
    rest is in the temporary file (created at the first spill). ``buffer_rows`` None:
    :data:`BUFFER_ROWS`.
    """

    def __init__(self, columns: dict, *, buffer_rows: int | None = None):
        buffer_rows = BUFFER_ROWS if buffer_rows is None else buffer_rows
        if buffer_rows < 1:
            raise ValueError(f"buffer_rows: expected >= 1, got {buffer_rows}")
        self.dtype = np.dtype([(name, np.dtype(dt), tuple(shape)) for name, (shape, dt) in columns.items()])
        self.names = self.dtype.names
        self.buf = np.zeros(buffer_rows, self.dtype)
        self.k = 0            # rows in the buffer
        self.flushed = 0      # rows in the file
        self.file = None

    @classmethod
    def from_arrays(cls, **arrays) -> "Rows":
        """Rows holding ``arrays`` (each (n, ...), the same n) in memory (no file)."""
        n = len(next(iter(arrays.values()))) if arrays else 0
        cols = {}
        for name, a in arrays.items():
            a = np.asarray(a)
            if len(a) != n:
                raise ValueError(f"{name}: {len(a)} rows, expected {n} like the other columns")
            cols[name] = (a.shape[1:], a.dtype)
        r = cls(cols, buffer_rows=max(1, n))
        for name, a in arrays.items():
            r.buf[name][:n] = a
        r.k = n
        return r

    @property
    def n(self) -> int:
        return self.flushed + self.k

    def __len__(self) -> int:
        return self.n

    def add(self, **row):
        """Append one row: every column by name (scalars, or arrays of the column's shape)."""
        if self.k == len(self.buf):
            self._spill()
        self.buf[self.k] = tuple(row[name] for name in self.names)
        self.k += 1

    def _spill(self):
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="gato_replay_rows_")
        self.file.seek(self.flushed * self.dtype.itemsize)
        self.file.write(self.buf[:self.k].tobytes())
        self.flushed += self.k
        self.k = 0

    def read(self, a: int, b: int) -> np.ndarray:
        """Rows [a, b) as a structured array (a copy)."""
        a, b = max(0, a), min(b, self.n)
        if b <= a:
            return np.zeros(0, self.dtype)
        parts = []
        if a < self.flushed:
            self.file.flush()
            self.file.seek(a * self.dtype.itemsize)
            m = min(b, self.flushed) - a
            got = np.fromfile(self.file, self.dtype, m)
            if len(got) != m:
                raise OSError(f"the replay's temporary row file gave {len(got)} of {m} rows")
            parts.append(got)
        if b > self.flushed:
            parts.append(self.buf[max(a, self.flushed) - self.flushed:b - self.flushed].copy())
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def chunks(self, rows: int | None = None):
        """Yield (first row index, structured array of at most ``rows`` (None: :data:`CHUNK_ROWS`)
        rows) over all rows."""
        rows = CHUNK_ROWS if rows is None else rows
        for a in range(0, self.n, rows):
            yield a, self.read(a, a + rows)

    def column(self, name: str) -> np.ndarray:
        """The whole column (n, *shape) in memory: for tests and small runs, not the report."""
        if self.n == 0:
            return np.zeros((0, *self.dtype[name].shape), self.dtype[name].base)
        return np.ascontiguousarray(self.read(0, self.n)[name])

    def first(self, name: str):
        """Row 0's value of ``name`` (None when empty)."""
        return None if self.n == 0 else self.read(0, 1)[name][0]

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def _lerp(a, b, t):
    """numpy's linear interpolation of the percentile (``np.percentile``, method 'linear')."""
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t


def percentiles(values, qs, *, exact_below: int | None = None) -> tuple[int, list, float]:
    """(n, [q-th percentiles], max) of the finite values of a column given in chunks.

    ``values``: a callable returning a fresh iterator of 1-D float arrays (the column chunk by
    chunk); ``qs``: percentiles in [0, 100] (linear interpolation, as ``np.percentile``). Exact:
    the order statistics are found by histogram passes over the chunks, each narrowing to the
    bin that holds the rank, until at most ``exact_below`` (None: :data:`EXACT_BELOW`) values
    remain; memory is one chunk plus those values. n == 0: (0, [], nan).
    """
    exact_below = EXACT_BELOW if exact_below is None else exact_below
    n, lo, hi = 0, np.inf, -np.inf
    for c in values():
        c = c[np.isfinite(c)]
        if c.size:
            n += c.size
            lo, hi = min(lo, float(c.min())), max(hi, float(c.max()))
    if n == 0:
        return 0, [], float("nan")
    if n <= exact_below:
        allv = np.concatenate([c[np.isfinite(c)] for c in values()])
        return n, [float(v) for v in np.percentile(allv, qs)], hi
    out = []
    for q in qs:
        pos = q / 100.0 * (n - 1)
        k = int(np.floor(pos))
        a = _kth(values, k, lo, hi, exact_below)
        b = _kth(values, min(k + 1, n - 1), lo, hi, exact_below)
        out.append(float(_lerp(a, b, pos - k)))
    return n, out, hi


def _kth(values, k: int, lo: float, hi: float, limit: int, bins: int = 1024) -> float:
    """The k-th smallest (0-based) finite value, lo <= all finite values <= hi."""
    below = 0   # finite values < lo
    while lo < hi:
        edges = np.linspace(lo, hi, bins + 1)
        counts = np.zeros(bins, dtype=np.int64)
        for c in values():
            c = c[(c >= lo) & (c <= hi)]
            counts += np.bincount(np.minimum(np.searchsorted(edges, c, side="right") - 1, bins - 1), minlength=bins)
        cum = below + np.cumsum(counts)
        j = int(np.searchsorted(cum, k, side="right"))     # the bin holding rank k
        start = int(cum[j - 1]) if j else below                # values before the bin
        b_lo = edges[j]
        b_hi = hi if j == bins - 1 else max(b_lo, np.nextafter(edges[j + 1], -np.inf))  # bins are [e_j, e_j+1)
        if counts[j] <= limit or b_hi <= b_lo:
            sel = [c[(c >= b_lo) & (c <= b_hi)] for c in values()]
            v = np.sort(np.concatenate(sel)) if sel else np.zeros(0)
            return float(v[k - start])
        below, lo, hi = start, b_lo, b_hi
    return float(lo)
