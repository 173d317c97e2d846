"""The orientation term's SO(3) maps in their lane form (issue 30, speed): the line search
evaluates the log maps of its trial points with one atan2 per lane in vector registers
(so3::atan2_lanes, Cephes' atan) and the inverse right Jacobian shares the log map's sin /
cos instead of calling libm again. This bounds what that changes against the libm forms:
test/cpp/so3_lanes/so3_lanes.cpp, compiled here with the solver's flags (AVX2 + FMA where
the CPU has them), prints the largest relative errors."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "test" / "cpp" / "so3_lanes" / "so3_lanes.cpp"


def _eigen_include():
    for d in glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "cmeel.prefix",
                                    "include", "eigen3")) + ["/usr/include/eigen3"]:
        if os.path.isfile(os.path.join(d, "Eigen", "Core")):
            return d
    pytest.fail("no Eigen headers (the venv's cmeel eigen or /usr/include/eigen3): scripts/setup.sh installs them")


def _cpu_has_avx2_fma():
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


@pytest.fixture(scope="module")
def errors(tmp_path_factory):
    exe = tmp_path_factory.mktemp("so3") / "so3_lanes"
    flags = ["-mavx2", "-mfma"] if _cpu_has_avx2_fma() else []
    cmd = ["c++", "-O3", "-std=gnu++17", *flags, "-I", _eigen_include(),
           "-I", str(ROOT / "src" / "gato_core" / "cpp" / "src"), str(SRC), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, check=True).stdout
    return json.loads(out)


def test_lane_atan2_is_libm_to_an_ulp_or_two(errors):
    # 2e6 random (y >= 0, x) pairs over magnitudes 1e-300 .. 1e300, the signed zeros and axes.
    assert errors["atan2_n"] > 2_000_000
    assert errors["atan2_max_rel"] <= 4.5e-16, errors


def test_log_map_and_jr_inv_sharing_one_atan2_match_the_libm_forms(errors):
    # Angles 1e-9 .. pi - 1e-3 (the near-pi branch is unchanged): the log map with sin t
    # from the trace / skew parts, Jr^-1 with cot(t/2) from the same, and the lane form
    # (atan2 in lanes, then log_finish) against t / (2 sin t) v and the half-angle libm form.
    assert errors["log_n"] == 400_000
    assert errors["log_max_rel"] <= 1e-13, errors
    assert errors["lane_log_max_rel"] <= 1e-13, errors
    assert errors["jr_inv_max_rel"] <= 1e-13, errors


def test_the_shared_forms_are_closer_to_the_exact_maps_than_libm(errors):
    # Against a long double evaluation on the same R: the libm forms lose digits near pi
    # (sin of a rounded t: ~6e-14 / ~1e-13 measured), the shared forms stay at rounding.
    assert errors["ld_lane_log"] <= 2e-15, errors
    assert errors["ld_jr_inv"] <= 2e-15, errors
    assert errors["ld_libm_log"] >= errors["ld_lane_log"], errors
