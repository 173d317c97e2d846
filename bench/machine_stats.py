"""What the ROS benchmarks (bench_plugin, bench_ros_latency, bench_ros2_control_mujoco)
print about the machine and their latency samples: the CPU model and a percentile summary.
Imported from the benchmark scripts (bench/ is on sys.path when one runs)."""
import platform

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
