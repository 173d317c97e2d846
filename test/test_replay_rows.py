"""gato.replay.rows: the replay's per-row numbers spilled to a temporary file and read back in
chunks (bit for bit), exact chunked percentiles, and the chunked plot decimation."""
import numpy as np
import pytest

from gato.replay import rows as R
from gato.replay.report import decimate, decimate_rows


def test_rows_spill_to_a_file_and_read_back_bit_for_bit():
    rng = np.random.default_rng(0)
    r = R.Rows({"a": ((), np.float64), "u": ((3,), np.float64), "b": ((), np.bool_), "i": ((), np.int64)},
               buffer_rows=7)
    a, u = rng.standard_normal(50), rng.standard_normal((50, 3))
    a[5], u[9, 1] = np.nan, np.inf
    for k in range(50):
        r.add(a=a[k], u=u[k], b=k % 2 == 0, i=k * 10**12)
    assert r.n == 50 and r.flushed == 49 and r.file is not None   # 7 buffer rows: 7 spills, 1 row held
    assert np.array_equal(r.column("a"), a, equal_nan=True) and np.array_equal(r.column("u"), u)
    assert r.column("i").tolist() == [k * 10**12 for k in range(50)] and r.first("i") == 0
    assert r.read(5, 9)["b"].tolist() == [False, True, False, True]
    got = [(s, c) for s, c in r.chunks(11)]
    assert [s for s, _ in got] == [0, 11, 22, 33, 44] and np.array_equal(
        np.concatenate([c["u"] for _, c in got]), u)
    m = R.Rows.from_arrays(a=a, u=u)
    assert m.file is None and np.array_equal(m.column("u"), u)
    with pytest.raises(ValueError, match="u: 4 rows"):
        R.Rows.from_arrays(a=a, u=u[:4])
    with pytest.raises(ValueError, match="buffer_rows"):
        R.Rows({"a": ((), float)}, buffer_rows=0)


@pytest.mark.parametrize("n", [1, 10, 3000, 40001])
def test_chunked_percentiles_equal_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(size=n)
    x[rng.integers(0, n, n // 20)] = np.nan
    if n > 100:
        x[: n // 3] = 1.5          # many equal values: the selection narrows to one value
        x[-1] = np.inf
    cnt, qs, mx = R.percentiles(lambda: (x[a:a + 1000] for a in range(0, n, 1000)), [0, 33.3, 50, 90, 100],
                                exact_below=64)
    f = x[np.isfinite(x)]
    assert cnt == f.size and mx == f.max()
    assert qs == [float(v) for v in np.percentile(f, [0, 33.3, 50, 90, 100])]
    assert R.percentiles(lambda: iter([np.full(4, np.nan)]), [50])[:2] == (0, [])


def test_chunked_decimation_picks_the_same_points():
    rng = np.random.default_rng(3)
    t = np.arange(10_000) * 0.01
    y = rng.standard_normal(10_000)
    y[123] = np.nan
    Y = rng.standard_normal((10_000, 4))
    for series in (y, Y):
        want = decimate(t, series, 300)
        got = decimate_rows(len(t), lambda a, b: (t[a:b], series[a:b]), 300, rows=257)
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1], equal_nan=True)
