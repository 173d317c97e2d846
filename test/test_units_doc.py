"""docs/units.md's rule holds for the public names that carry a duration: message fields
(their [unit] comments), the ROS parameter schema (its unit column) and the solver
statistics; the deviations are exactly the ones the page lists."""
import dataclasses
import re
from pathlib import Path

import pytest

import gato

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = {"s": "_s", "seconds": "_s", "ms": "_ms", "milliseconds": "_ms", "us": "_us", "microseconds": "_us",
          "ns": "_ns", "nanoseconds": "_ns"}


def documented_deviations() -> set[str]:
    """Every backticked name in the two deviation tables of docs/units.md (last dotted part)."""
    text = (ROOT / "docs" / "units.md").read_text()
    tables = text[text.index("## Names the reference API fixes"):]
    names = set()
    for row in re.findall(r"^\| (.+?) \|", tables, re.M):
        for name in re.findall(r"`([^`]+)`", row):
            names |= {part.split("=")[0] for part in re.findall(r"[\w.]+=?", name)}
    return {n.rsplit(".", 1)[-1] for n in names if n}


def spacing_name(name: str) -> bool:
    return name in ("dt", "timestep") or name.endswith("_dt") or name.startswith("dt_")


def follows_rule(name: str, unit: str) -> bool:
    if unit in ("s", "seconds"):
        return name.endswith("_s") or spacing_name(name)
    return name.endswith(SUFFIX[unit])


def msg_time_fields():
    """(file, field, unit) for every message field whose comment gives a time unit."""
    out = []
    for f in sorted((ROOT / "src" / "gato_msgs" / "msg").glob("*.msg")):
        lines = f.read_text().splitlines()
        for prev, line in zip(lines, lines[1:]):
            m = re.match(r"\s*(?:float|int|uint)\d*(?:\[\])?\s+(\w+)", line)
            u = re.search(r"\[(\w+)\]\s*$", prev)
            if m and u and u.group(1) in SUFFIX:
                out.append((f.name, m.group(1), u.group(1)))
    return out


def test_message_time_fields_carry_their_unit():
    fields = msg_time_fields()
    assert len(fields) >= 10                                    # the scan found the known ones
    deviations = documented_deviations()
    bad = [(f, n, u) for f, n, u in fields if not follows_rule(n, u) and n not in deviations]
    assert not bad, f"time fields breaking docs/units.md's rule: {bad}"
    # and a suffix never lies about the unit its comment states
    for f, n, u in fields:
        for unit, suffix in SUFFIX.items():
            if n.endswith(suffix) and suffix != "_s":
                assert SUFFIX[u] == suffix, (f, n, u)


def test_ros_parameters_in_time_units_carry_their_unit():
    params = pytest.importorskip("gato_ros.params", reason="build the workspace (scripts/setup.sh)")
    schemas = list(params.SCHEMAS.values()) + [getattr(params, "PLUGIN", ())]
    deviations = documented_deviations()
    seen, bad = 0, []
    for schema in schemas:
        for p in schema:
            if p.unit not in SUFFIX:
                continue
            seen += 1
            if not follows_rule(p.name, p.unit) and p.name not in deviations:
                bad.append(p.name)
    assert seen >= 8 and not bad, f"ROS parameters breaking docs/units.md's rule: {bad}"


def test_solver_statistics_units_are_the_documented_ones():
    fields = {f.name for f in dataclasses.fields(gato.SolverStats)}
    timed = {n for n in fields if re.search(r"time|_us$|_ms$|_ns$|_s$", n)}
    assert {"solve_time_us", "pcg_times_us"} <= timed
    for n in timed:
        assert n.endswith(("_us", "_ms", "_ns", "_s")), n
    assert "microseconds" in gato.SolverStats.__doc__
    assert {"solve_time_us", "pcg_times_us"} <= documented_deviations()


def test_every_listed_deviation_exists():
    """A deviation the page lists is a real name somewhere in the code (no stale rows)."""
    code = "\n".join(p.read_text() for p in [*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.msg")]
                     if "build" not in p.parts)
    missing = [n for n in documented_deviations() if not re.search(rf"\b{re.escape(n)}\b", code)]
    assert not missing, f"docs/units.md lists names that do not exist: {missing}"
