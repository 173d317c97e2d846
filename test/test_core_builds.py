"""The two builds of the C++ core (gato._native): _core_avx2 (AVX2 + FMA) where the
CPU runs it, the baseline _core everywhere else, and GATO_NO_AVX2=1 to force the
baseline. Both must solve the same problems to rounding, and the baseline must
pass the solver's acceptance tests on this machine too."""
import importlib.abc
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from gato._native import cpu_has_avx2_fma

HERE = Path(__file__).resolve().parent
# The AVX2 build exists where the compiler took -mavx2 -mfma on x86-64 (CMakeLists.txt).
AVX2_BUILT = importlib.util.find_spec("gato._core_avx2") is not None
AVX2_RUNS = AVX2_BUILT and cpu_has_avx2_fma()

SOLVE = """
import json, numpy as np, gato
out = {"module": gato._core.__name__, "isa": gato._core.ISA}
for integ in ("semi_implicit", "rk4"):
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 4, 16, 0.02, integrator=integ, max_sqp_iters=4)
    rng = np.random.default_rng(11)
    q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])
    x = np.stack([np.r_[q0 + 0.05 * rng.standard_normal(7), 0.2 * rng.standard_normal(7)] for _ in range(4)])
    ref = np.tile(np.r_[s.ee_pos(q0) + [0.1, -0.1, 0.05], 0, 0, 0], (4, 16))
    r = s.solve(x, ref, s.hold_trajectory(x))
    out[integ] = np.asarray(r.xu).tolist()
print(json.dumps(out))
"""


def run(code_or_args, no_avx2):
    env = dict(os.environ, GATO_NO_AVX2="1" if no_avx2 else "0")
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=HERE.parent)


def test_the_loaded_core_matches_the_cpu():
    name = gato._core.__name__
    if os.environ.get("GATO_NO_AVX2", "0") not in ("", "0") or not AVX2_RUNS:
        assert name == "gato._core" and gato._core.ISA == "baseline"
    else:
        assert name == "gato._core_avx2" and gato._core.ISA == "avx2+fma"
    # One module per process: importing gato._core gives the chosen one.
    import gato._core as again
    assert again is gato._core


def test_both_builds_solve_alike():
    if not AVX2_RUNS:
        pytest.skip("no AVX2 + FMA core here (CPU or compiler without them): only the baseline runs")
    res = {}
    for no_avx2 in (False, True):
        p = run(SOLVE, no_avx2)
        assert p.returncode == 0, p.stderr[-2000:]
        res[no_avx2] = json.loads(p.stdout.strip().splitlines()[-1])
    assert res[False]["isa"] == "avx2+fma" and res[True]["isa"] == "baseline"
    assert res[True]["module"] == "gato._core"
    for integ in ("semi_implicit", "rk4"):
        a, b = np.asarray(res[False][integ]), np.asarray(res[True][integ])
        assert np.isfinite(a).all()
        # FMA contractions round differently; four SQP iterations keep it at rounding level.
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8, err_msg=integ)


def test_the_baseline_core_passes_the_solver_acceptance_tests():
    if not AVX2_RUNS:
        pytest.skip("the baseline core is the one every other test runs here")
    p = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test/test_reference_bsqp.py",
             "test/test_solver_core.py", "test/test_lean_dynamics.py"], no_avx2=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert " passed" in p.stdout


BLOCK_AVX2 = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "gato._core_avx2":
            raise ImportError("blocked for the test")
        return None
sys.meta_path.insert(0, Block())
import gato, numpy as np
s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 8, 0.02, max_sqp_iters=2)
x = np.r_[np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4]), np.zeros(7)]
r = s.solve(x, np.tile(np.r_[s.ee_pos(x[:7]) + 0.05, 0, 0, 0], 8))
print(gato._core.__name__, gato._core.ISA, bool(np.isfinite(r.xu).all()))
"""


def test_a_missing_avx2_module_falls_back_to_the_baseline():
    """A platform or compiler that did not build _core_avx2: gato loads _core and solves."""
    p = run(BLOCK_AVX2, no_avx2=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["gato._core", "baseline", "True"]


# A runtime-only install (GATO_CORE_VARIANTS=AVX2 / BASELINE, scripts/sim.sh's first build) holds one
# core build and no gato._cuda_host; what it lacks is named, and bad choices are refused by name.
class _NotBuilt(importlib.abc.MetaPathFinder):
    """Makes gato.<name> look not built (as in a runtime-only install)."""

    def __init__(self, *names):
        self.names = {f"gato.{n}" for n in names}

    def find_spec(self, name, path=None, target=None):
        if name in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_an_avx2_only_install_names_the_missing_baseline_build(monkeypatch):
    from gato.core import native
    monkeypatch.setattr(native, "BUILDS", ("_core_avx2",))
    monkeypatch.setattr(native, "cpu_has_avx2_fma", lambda: True)
    monkeypatch.setenv("GATO_NO_AVX2", "1")
    monkeypatch.delitem(sys.modules, "gato._core")
    monkeypatch.setattr(sys, "meta_path", [_NotBuilt("_core"), *sys.meta_path])
    with pytest.raises(ImportError, match=r"gato\._core, the baseline build .* GATO_NO_AVX2=1 asks for it; "
                       r"unset GATO_NO_AVX2 or build every variant: GATO_CORE_VARIANTS=ALL") as e:
        native._load()
    assert e.value.name == "gato._core"
    # Without GATO_NO_AVX2 that install loads its one build (where this machine has it).
    monkeypatch.delenv("GATO_NO_AVX2")
    if AVX2_RUNS:
        assert native._load().__name__ == "gato._core_avx2"


def test_a_runtime_only_install_names_the_missing_cuda_host_module(monkeypatch):
    from gato.core import cuda_backend
    monkeypatch.delitem(sys.modules, "gato._cuda_host", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NotBuilt("_cuda_host"), *sys.meta_path])
    with pytest.raises(RuntimeError, match=r"backend='cuda_host': gato\._cuda_host is not built .* "
                       r"GATO_CORE_VARIANTS=ALL"):
        cuda_backend.solver_class("cuda_host", np.float64)


def test_setup_refuses_a_bad_core_variants_value_by_name():
    """Before any work and before setup's lock (so it cannot wait on another build)."""
    p = subprocess.run(["bash", "scripts/setup.sh"], cwd=HERE.parent, capture_output=True, text=True,
                       env=dict(os.environ, GATO_CORE_VARIANTS="avx3"), timeout=60)
    assert p.returncode != 0
    assert "GATO_CORE_VARIANTS: expected ALL, NATIVE, AVX2 or BASELINE, got 'avx3'" in p.stderr, p.stderr


def test_cmake_refuses_a_bad_core_variants_value_by_name(tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("no cmake on PATH")
    p = subprocess.run(["cmake", "-S", str(HERE.parent / "src" / "gato_core"), "-B", str(tmp_path / "b"),
                        "-DGATO_CORE_VARIANTS=avx3"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "GATO_CORE_VARIANTS: expected ALL, AVX2 or BASELINE, got 'avx3'" in p.stdout + p.stderr
