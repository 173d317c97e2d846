"""bench/machine_stats.py: the CPU line and the latency percentile summary that the ROS
benchmarks (bench_plugin, bench_ros_latency, bench_ros2_control_mujoco) print."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from machine_stats import cpu_model, pct  # noqa: E402


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
