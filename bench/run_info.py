"""What the benchmark scripts' reports say about a run: the machine (cpu_model, host), the code
(short_commit), the date-commit-architecture stamp of a section heading (stamp), latency
summaries (pct), and the result file of a run (write_result). Imported from the scripts (bench/ is
on sys.path when one runs)."""
import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux); platform.processor() elsewhere, or
    "unknown CPU" where neither names it."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def pct(a) -> dict:
    """Summary of the samples ``a`` (any shape, any unit; the keys keep it): {"n", "p50", "p90",
    "p99", "max"} (numpy's linear percentiles), or {"n": 0} for no samples."""
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return {"n": 0}
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def short_commit() -> str:
    """The short hash of the checkout's HEAD (git run in this folder, so from any working
    directory); "" where git or the checkout is missing."""
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def stamp() -> str:
    """'YYYY-MM-DD, <short commit>, <architecture>': what a benchmark section's heading says of
    when, on which code and on what kind of machine its figures were measured."""
    return f"{datetime.date.today().isoformat()}, {short_commit()}, {platform.machine()}"


def host() -> str:
    """'<host name> <n> cores, Python <x.y.z>': the machine line of a result file."""
    return f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"


def write_result(out_dir: Path, res) -> Path:
    """Write ``res`` (anything JSON can hold) to ``out_dir``/result.json, indented; the path."""
    path = Path(out_dir) / "result.json"
    path.write_text(json.dumps(res, indent=1))
    return path
