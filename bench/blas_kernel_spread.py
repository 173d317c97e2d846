"""How much each checked floating-point quantity of some test files moves with the CPU code path.

numpy's OpenBLAS picks its kernels per CPU at run time, and the C++ core loads its AVX2 or its
baseline build per CPU; a test threshold must sit well above what that changes (issue 28). This
runs the given test files once per variant (OPENBLAS_CORETYPE forced to each kernel this CPU can
run, plus GATO_NO_AVX2=1), records every np.testing.assert_allclose and every passing plain
assert (pytest's assertion-pass hook: the compared values), and prints, per check site, the
largest "usage" (value / allowed: 1 is the threshold) under each variant.

    python bench/blas_kernel_spread.py test/test_reference_bsqp.py test/test_solver_core.py
    python bench/blas_kernel_spread.py --variants default,Haswell,noavx2 --min-usage 0.01 test/test_osc.py

Kernels this CPU cannot run fall back to another (the table's header says which one ran). The
tests are not changed; the machine's BLAS settings are touched only in these child processes.
"""
import argparse
import collections
import ctypes
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = ("SkylakeX", "Haswell", "Sandybridge", "Nehalem", "Prescott")

PLUGIN = r'''
import inspect, json, os
import numpy as np
import pytest

_fh = open(os.environ["SPREAD_OUT"], "w")
_node = {"id": None}
_orig = np.testing.assert_allclose


def _site():
    for fr in inspect.stack()[2:8]:
        if os.sep + "test" + os.sep in fr.filename:
            return f"{os.path.basename(fr.filename)}:{fr.lineno}"
    return "?"


def _allclose(actual, desired, rtol=1e-7, atol=0, *args, **kw):
    try:
        a, b = np.broadcast_arrays(np.asarray(actual, np.float64), np.asarray(desired, np.float64))
        d = np.nan_to_num(np.abs(a - b), nan=0.0, posinf=0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(d == 0, 0.0, d / (atol + rtol * np.abs(b)))
        _fh.write(json.dumps(dict(node=_node["id"], site=_site(), value=float(d.max(initial=0.0)),
                                  usage=float(u.max(initial=0.0)),
                                  what=f"allclose rtol={rtol:.0e} atol={float(atol):.1e}")) + "\n")
    except Exception:  # noqa: BLE001  (a comparison numpy itself will report)
        pass
    return _orig(actual, desired, rtol, atol, *args, **kw)


np.testing.assert_allclose = _allclose


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _node["id"] = item.nodeid


def pytest_assertion_pass(item, lineno, orig, expl):
    _fh.write(json.dumps(dict(node=item.nodeid, site=f"{item.path.name}:{lineno}", orig=orig,
                              expl=expl.split("\n")[0][:300])) + "\n")
    _fh.flush()
'''


def corename():
    """The OpenBLAS kernel numpy's bundled OpenBLAS runs in this process."""
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libscipy_openblas*.so"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for sym in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            if hasattr(lib, sym):
                fn = getattr(lib, sym)
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "?"


def parse_assert(expl):
    """(usage, value) of a passing `a < b`, `a > b` or `a == approx(b, ...)`, else None."""
    top = re.sub(r"np\.float64\(([^)]*)\)", r"\1", expl)
    ns = {"np": np, "inf": np.inf, "nan": np.nan}
    try:
        m = re.match(r"^(.*?) == (.*?) ± (.*)$", top)
        if m:
            a, b, t = (float(eval(x, ns)) for x in m.groups())  # noqa: S307 (pytest's own repr)
            return (abs(a - b) / t if t else 0.0), abs(a - b)
        for op in (" <= ", " < ", " >= ", " > "):
            if op in top:
                lhs, rhs = (float(eval(x, ns)) for x in top.split(op, 1))  # noqa: S307
                if "<" in op:
                    return (lhs / rhs if rhs > 0 else None), lhs
                return (rhs / lhs if lhs > 0 else None), lhs
    except Exception:  # noqa: BLE001  (not a numeric comparison)
        return None
    return None


def run_variant(variant, files, tmp, extra):
    env = dict(os.environ, SPREAD_OUT=os.path.join(tmp, f"{variant}.jsonl"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=tmp + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OPENBLAS_CORETYPE", None) if variant in ("default", "noavx2") else env.update(OPENBLAS_CORETYPE=variant)
    if variant == "noavx2":
        env["GATO_NO_AVX2"] = "1"
    kernel = subprocess.run([sys.executable, __file__, "--corename"], env=env, capture_output=True,
                            text=True).stdout.strip()
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_spread_plugin",
                        "-o", "enable_assertion_pass_hook=true", "-rf", *extra, *files], env=env, cwd=ROOT,
                       capture_output=True, text=True)
    tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-300:]
    print(f"{variant:12s} kernel {kernel:12s} {tail}", flush=True)
    for line in p.stdout.splitlines():          # a failure under one variant is the finding itself
        if line.startswith("FAILED "):
            print(f"{'':12s}   {line[:160]}", flush=True)
    return kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--variants", default=",".join(("default",) + KERNELS + ("noavx2",)))
    ap.add_argument("--min-usage", type=float, default=0.05, help="print sites whose worst usage is above this")
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments, one string")
    ap.add_argument("--corename", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.corename:
        print(corename())
        return
    variants = a.variants.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "_spread_plugin.py"), "w") as f:
            f.write(PLUGIN)
        kernels = {v: run_variant(v, a.files, tmp, shlex.split(a.pytest_args)) for v in variants}
        table = collections.defaultdict(dict)  # (test, site) -> variant -> (usage, value)
        what = {}
        for v in variants:
            for line in open(os.path.join(tmp, f"{v}.jsonl")):
                r = json.loads(line)
                got = (r["usage"], r["value"]) if "usage" in r else parse_assert(r["expl"])
                if got is None or got[0] is None:
                    continue
                key = (r["node"].split("[")[0].split("::")[-1], r["site"])
                old = table[key].get(v, (-1.0, 0.0))
                table[key][v] = max(old, got)
                what[key] = r.get("what") or r["orig"][:80]
    print("\nworst usage (value / allowed) per check site; kernels: "
          + ", ".join(f"{v}={k}" for v, k in kernels.items()))
    print(f"{'site':34s} " + " ".join(f"{v[:10]:>10s}" for v in variants))
    for key in sorted(table):
        row = table[key]
        if max(u for u, _ in row.values()) < a.min_usage:
            continue
        cells = " ".join(f"{row[v][0]:10.2e}" if v in row else f"{'-':>10s}" for v in variants)
        print(f"{key[1]:34s} {cells}  {key[0]} | {what[key]}")


if __name__ == "__main__":
    main()
