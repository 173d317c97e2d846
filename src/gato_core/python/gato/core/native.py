"""The C++ core module this CPU runs: ``_core_avx2`` (AVX2 + FMA) or ``_core``.

Both are built from the same sources (src/gato_core/CMakeLists.txt); the AVX2
build runs the solver's small dense algebra about 1.7x faster. It is chosen
only when the CPU reports both AVX2 and FMA, and only one of the two is ever
loaded in a process (``gato._core`` names the chosen one). ``GATO_NO_AVX2=1``
forces the baseline module (tests of both builds, or to rule the build out when
comparing results across machines).
"""
from __future__ import annotations

import importlib
import os
import sys


def cpu_has_avx2_fma() -> bool:
    """True when the CPU reports AVX2 and FMA (Linux /proc/cpuinfo; False where unreadable)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return False


def _load():
    off = os.environ.get("GATO_NO_AVX2", "")
    if cpu_has_avx2_fma() and off in ("", "0"):
        try:
            return importlib.import_module("gato._core_avx2")
        except ImportError:  # built without it (compiler without -mavx2, non-x86 host)
            pass
    return importlib.import_module("gato._core")


core = _load()
# Any later `import gato._core` gets the chosen module, never a second build.
sys.modules["gato._core"] = core
