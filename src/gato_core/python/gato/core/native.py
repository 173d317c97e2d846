"""The C++ core module this CPU runs: ``_core_avx2`` (AVX2 + FMA) or ``_core``.

Both are built from the same sources (src/gato_core/CMakeLists.txt); the AVX2
build runs the solver's small dense algebra about 1.7x faster. It is chosen
only when the CPU reports both AVX2 and FMA, and only one of the two is ever
loaded in a process (``gato._core`` names the chosen one). ``GATO_NO_AVX2=1``
forces the baseline module (tests of both builds, or to rule the build out when
comparing results across machines).

A runtime-only install (``GATO_CORE_VARIANTS=AVX2`` or ``BASELINE``: scripts/sim.sh's
first build, src/gato_core/CMakeLists.txt) holds only the build its CPU runs; asking
it for the other one raises an ImportError that names the missing module and the
rebuild that adds it.
"""
from __future__ import annotations

import importlib
import importlib.util
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


_REBUILD = ("build every variant: GATO_CORE_VARIANTS=ALL scripts/setup.sh (scripts/test.sh and "
            "scripts/build_wheel.sh always do)")


def _built(name: str) -> bool:
    """True when the extension module gato.<name> is installed (found, not imported)."""
    try:
        return importlib.util.find_spec(f"gato.{name}") is not None
    except ImportError:
        return False


def _load():
    off = os.environ.get("GATO_NO_AVX2", "")
    avx2_cpu = cpu_has_avx2_fma()
    if avx2_cpu and off in ("", "0"):
        try:
            return importlib.import_module("gato._core_avx2")
        except ImportError:  # built without it (compiler without -mavx2, non-x86 host, BASELINE)
            pass
    try:
        return importlib.import_module("gato._core")
    except ModuleNotFoundError as e:
        if e.name != "gato._core" or "_core_avx2" not in BUILDS:
            raise
        # A runtime-only AVX2 install (GATO_CORE_VARIANTS=AVX2): the baseline build was left out.
        why = (f"GATO_NO_AVX2={off} asks for it" if avx2_cpu
               else "this CPU does not report AVX2 + FMA, which gato._core_avx2 needs")
        raise ImportError(
            f"gato._core, the baseline build of the C++ core, is not built in this install "
            f"(GATO_CORE_VARIANTS=AVX2: only gato._core_avx2, the build of the CPU it was built on), "
            f"and {why}; {'unset GATO_NO_AVX2 or ' if avx2_cpu else ''}{_REBUILD}",
            name="gato._core") from None


# The builds of the core this install holds ("_core", "_core_avx2"), looked up before
# gato._core is made to name the chosen one (after that a lookup finds it either way).
BUILDS = tuple(name for name in ("_core", "_core_avx2") if _built(name))
core = _load()
# Any later `import gato._core` gets the chosen module, never a second build.
sys.modules["gato._core"] = core
