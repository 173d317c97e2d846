"""bench/run_info.py: the CPU line, the commit, the heading stamp, the host line, the result file
and the latency percentile summary that the benchmark scripts put in their reports."""
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from run_info import cpu_model, host, pct, short_commit, stamp, write_result  # noqa: E402


def test_pct_summarises_samples_with_numpy_percentiles():
    a = np.random.default_rng(3).exponential(2.0, size=(40, 5))   # any shape: the samples are flattened
    s = pct(a)
    assert s == {"n": 200, "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
                 "p99": float(np.percentile(a, 99)), "max": float(a.max())}
    assert pct([4.0, 1.0, 2.0, 3.0]) == pytest.approx({"n": 4, "p50": 2.5, "p90": 3.7, "p99": 3.97, "max": 4.0},
                                                      rel=1e-12)


def test_pct_of_no_samples_is_the_count_only():
    assert pct([]) == {"n": 0}


def test_cpu_model_names_the_processor():
    name = cpu_model()
    assert isinstance(name, str) and name.strip() == name and name
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file() and "model name" in cpuinfo.read_text():
        assert name in cpuinfo.read_text()


def test_short_commit_is_head_from_any_working_directory(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root)
    if head.returncode != 0:
        assert short_commit() == ""          # no checkout (an exported tree): no commit to name
        return
    monkeypatch.chdir(tmp_path)              # outside the checkout
    sha = short_commit()
    assert len(sha) >= 7 and head.stdout.strip().startswith(sha)


def test_stamp_names_the_date_the_commit_and_the_architecture():
    day, sha, arch = stamp().split(", ")
    assert datetime.date.fromisoformat(day) in (datetime.date.today(), datetime.date.today() - datetime.timedelta(1))
    assert sha == short_commit() and arch == platform.machine()


def test_host_names_the_machine_cores_and_python():
    assert host() == f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"


def test_write_result_writes_json_in_the_folder(tmp_path):
    res = {"machine": host(), "runs": [{"rc": 0, "wall_s": 1.5}]}
    path = write_result(tmp_path, res)
    assert path == tmp_path / "result.json" and json.loads(path.read_text()) == res
