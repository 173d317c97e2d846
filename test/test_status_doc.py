"""docs/status.md stays true: every public name of the reference API has a row,
every row that claims `works` or `partial` names test files that exist, and each
named test file of an API row exercises the name (the name itself, or for a
class or module one of its documented attributes, appears in the file)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_NAMES = ROOT.parent / "shared" / "reference" / "api_names.txt"


def rows():
    text = (ROOT / "docs" / "status.md").read_text()
    return re.findall(r"^\|\s*(.+?)\s*\|\s*(works|partial|missing)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|$", text, flags=re.M)


def test_every_api_name_has_exactly_one_row():
    import pytest
    if not API_NAMES.exists():
        pytest.skip(f"{API_NAMES} not present (the shared reference folder sits beside the checkout)")
    names = [ln.strip() for ln in API_NAMES.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    documented = [r[0].strip("`") for r in rows()]
    missing = [n for n in names if n not in documented]
    assert not missing, f"names without a status row: {missing[:10]}"
    dup = {n for n in names if documented.count(n) > 1}
    assert not dup, f"names with several rows: {sorted(dup)[:10]}"


def test_claimed_rows_name_existing_tests():
    bad = []
    for name, state, tests, _ in rows():
        if state == "missing":
            continue
        files = re.findall(r"test/[\w/]+\.py", tests)
        if not files or not all((ROOT / f).exists() for f in files):
            bad.append((name, tests))
    assert not bad, f"rows claiming works/partial without an existing test file: {bad[:10]}"


def _mentions(text: str, token: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text) is not None


def test_claimed_api_rows_name_tests_that_exercise_the_name():
    """A test file named for `gato.x.Y.z` contains `z`; for a class or module row, its name or
    the name of one of its rows' attributes. A row that names a file which never mentions the
    feature claims more than the file proves."""
    all_rows = rows()
    api = [r for r in all_rows if re.fullmatch(r"`?gato(\.\w+)+`?", r[0])]
    names = [r[0].strip("`") for r in api]
    bad = []
    for (name, state, tests, _), full in zip(api, names):
        if state == "missing":
            continue
        last = full.rsplit(".", 1)[-1]
        same = {n for n in names if n == full or n.endswith("." + last)}  # gato.X re-exports gato.m.X
        tokens = {last} | {n.rsplit(".", 1)[-1] for n in names for o in same if n.startswith(o + ".")}
        for f in re.findall(r"test/[\w/]+\.py", tests):
            path = ROOT / f
            if path.exists() and not any(_mentions(path.read_text(), t) for t in tokens):
                bad.append((full, f))
    assert not bad, f"rows naming a test file that never mentions the feature: {bad[:12]}"
