"""docs/status.md stays true: every public name of the reference API has a row,
and every row that claims `works` or `partial` names test files that exist."""
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
