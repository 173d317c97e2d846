"""Per-task linear-system policy: fit, decide, persist and resolve.

Which path solves the Schur system ``S·λ = γ`` fastest depends on the
WORKLOAD, not on the robot alone: warm-started PCG is cheap when the measured
state lands close to the shifted prediction and expensive when it does not,
while a direct block factorization (``bdsv``) costs the same every time. The
signal is the controller's ``pred_err`` (‖x_measured − knot 0 of the shifted
warm start‖).

Pipeline (the probe legs are timings: run them on a quiet machine):

1. ``python -m gato.tools.autotune_linsys`` runs a closed-loop task once with
   the path pinned to pure ``pcg`` (per-solve ``pred_err`` and solve time) and
   once with pure ``bdsv`` (its flat per-solve cost).
2. :func:`fit_tau` finds the ``pred_err`` at which the predicted PCG cost
   crosses the bdsv cost; :func:`decide_policy` turns it and the probe's
   ``pred_err`` distribution into pure ``pcg``, pure ``bdsv`` or ``auto`` at τ.
3. :func:`save_tuning` stores the entry under ``plant|N|task_tag`` in
   ``linsys_tuning.json`` in the ``gato`` package folder;
   ``$GATO_LINSYS_TUNING`` names another file.
4. :class:`gato.controller.MPCController` resolves its policy at construction
   with :func:`resolve_linsys` / :func:`resolve_admm_linsys`: explicit argument
   > tuned entry > wired default.

Host-only numpy: nothing here imports the solver.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["fit_tau", "decide_policy", "load_tuning", "save_tuning", "lookup", "resolve_linsys",
           "resolve_admm_linsys", "tuning_path", "DEFAULT_TAU", "ADMM_FACTOR_MIN_N", "POLICIES",
           "ADMM_POLICIES"]

#: pred_err threshold of ``linsys="auto"`` when neither the caller nor a tuned entry gives one
#: (same units as the state: a mixed rad / rad/s norm).
DEFAULT_TAU = 0.1

#: Wired ADMM inner-loop default by horizon: below this many knots the inner loop runs warm PCG
#: ("pcg"), from it on it factors the Schur system once per SQP iteration and back-solves per
#: inner iteration ("bdsv_factor"). The factor costs O(N·nx³) once and each back-solve O(N·nx²),
#: while a PCG inner iteration costs O(N·nx²) per CG step with the CG count growing with N; 48
#: knots is a chosen crossover (no CPU measurement backs it yet: the row-group layer that runs
#: ADMM is not built). Re-fit per task with the autotune tool once it is.
ADMM_FACTOR_MIN_N = 48

#: Policies an SQP tuning entry may carry.
POLICIES = ("pcg", "bdsv", "auto")
#: Policies an ADMM tuning entry (``admm_policy``) may carry.
ADMM_POLICIES = ("pcg", "bdsv_factor", "auto")
_LINSYS_ARGS = ("pcg", "bdsv", "bdsv_first", "auto")
_ENV = "GATO_LINSYS_TUNING"


# ------------------------------------------------------------------------ fit / decide
def _trace(a, name: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64).ravel()
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected a sequence of numbers ({e})") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return arr


def fit_tau(pred_err, solve_ms, bdsv_ms, n_bins: int = 12):
    """Fit the pred_err at which the predicted PCG solve cost reaches the bdsv cost.

    Args:
        pred_err: (S,) per-solve pred_err of a PURE-PCG probe run (state norm units).
        solve_ms: (S,) per-solve wall time of the same run [ms].
        bdsv_ms: the flat per-solve cost of the pure-bdsv probe run (its median) [ms].
        n_bins: quantile bins over pred_err for the cost fit (>= 2).

    The PCG cost is fit as binned medians over quantile bins of pred_err, made
    monotone non-decreasing by a running max (CG work grows with how cold the
    warm start is; the running max irons out small-sample inversions without
    assuming a functional form). A bin's center is the median pred_err of its
    samples.

    Returns:
        ``(tau, diag)``. ``tau`` is the crossing, linearly interpolated between
        the two bracketing bin centers; ``None`` if the fitted PCG cost stays
        below ``bdsv_ms`` in every bin (pcg wins everywhere probed); ``0.0`` if
        it is already at or above ``bdsv_ms`` in the first bin (bdsv wins
        everywhere probed). ``diag`` = {"bin_center" (n,), "bin_cost" (n,)
        monotone fit [ms], "bin_cost_raw" (n,) medians [ms], "n" (n,) samples
        per bin, "bdsv_ms"} for reporting.
    """
    pe = _trace(pred_err, "pred_err")
    ms = _trace(solve_ms, "solve_ms")
    if pe.shape != ms.shape:
        raise ValueError(f"solve_ms: expected the shape of pred_err {pe.shape}, got {ms.shape}")
    if pe.size == 0:
        raise ValueError("pred_err: empty trace (run the probe for at least one solve)")
    if not isinstance(bdsv_ms, (int, float, np.floating, np.integer)) or not math.isfinite(bdsv_ms) \
            or bdsv_ms <= 0:
        raise ValueError(f"bdsv_ms: expected a finite cost > 0 ms, got {bdsv_ms!r}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 2:
        raise ValueError(f"n_bins: expected an integer >= 2, got {n_bins!r}")
    edges = np.unique(np.quantile(pe, np.linspace(0.0, 1.0, int(n_bins) + 1)))
    if edges.size < 2:  # every sample has the same pred_err: one bin
        idx = np.zeros(pe.size, dtype=int)
    else:
        idx = np.clip(np.searchsorted(edges, pe, side="right") - 1, 0, edges.size - 2)
    centers, raw, counts = [], [], []
    for b in range(int(idx.max()) + 1):
        sel = idx == b
        if np.any(sel):
            centers.append(float(np.median(pe[sel])))
            raw.append(float(np.median(ms[sel])))
            counts.append(int(sel.sum()))
    centers, raw, counts = np.array(centers), np.array(raw), np.array(counts)
    cost = np.maximum.accumulate(raw)
    diag = {"bin_center": centers, "bin_cost": cost, "bin_cost_raw": raw, "n": counts,
            "bdsv_ms": float(bdsv_ms)}
    above = np.nonzero(cost >= bdsv_ms)[0]
    if above.size == 0:
        return None, diag
    i = int(above[0])
    if i == 0:
        return 0.0, diag
    c0, c1, y0, y1 = centers[i - 1], centers[i], cost[i - 1], cost[i]
    tau = float(c0 + (bdsv_ms - y0) * (c1 - c0) / (y1 - y0))  # y1 >= bdsv_ms > y0
    return tau, diag


def decide_policy(pred_err, tau, lo: float = 0.02, hi: float = 0.98) -> dict:
    """Turn a fitted ``tau`` and the probe's pred_err distribution into a policy.

    ``cold_frac`` = fraction of probe solves with pred_err > tau. ``cold_frac <= lo``
    -> pure "pcg" (cold solves too rare to be worth a switch), ``>= hi`` -> pure
    "bdsv" (warm solves too rare), else "auto" at tau. ``tau is None`` (PCG never
    reached the bdsv cost) -> "pcg" with cold_frac 0; ``tau == 0.0`` (bdsv cheaper
    even warm) -> "bdsv".

    Returns ``{"policy": "pcg" | "bdsv" | "auto", "tau": float | None, "cold_frac": float}``.
    """
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}: expected a fraction in [0, 1], got {v!r}")
    if not lo < hi:
        raise ValueError(f"lo / hi: expected lo < hi (cold fractions), got lo={lo!r}, hi={hi!r}")
    pe = _trace(pred_err, "pred_err")
    if pe.size == 0:
        raise ValueError("pred_err: empty trace")
    for name, v in (("lo", lo), ("hi", hi)):
        if not isinstance(v, (int, float, np.floating)) or not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}: expected a fraction in [0, 1], got {v!r}")
    if lo >= hi:
        raise ValueError(f"lo: expected lo < hi, got lo={lo!r}, hi={hi!r}")
    if tau is None:
        return {"policy": "pcg", "tau": None, "cold_frac": 0.0}
    if not isinstance(tau, (int, float, np.floating)) or not math.isfinite(tau) or tau < 0:
        raise ValueError(f"tau: expected None or a finite threshold >= 0, got {tau!r}")
    tau = float(tau)
    cold = float(np.mean(pe > tau))
    if tau == 0.0:
        return {"policy": "bdsv", "tau": 0.0, "cold_frac": cold}
    if cold <= lo:
        policy = "pcg"
    elif cold >= hi:
        policy = "bdsv"
    else:
        policy = "auto"
    return {"policy": policy, "tau": tau, "cold_frac": cold}


# ------------------------------------------------------------------------ persistence
def tuning_path(path=None) -> Path:
    """The tuning table's location: ``path``, else ``$GATO_LINSYS_TUNING``, else
    ``linsys_tuning.json`` in the ``gato`` package folder."""
    if path is not None:
        return Path(os.fspath(path))
    env = os.environ.get(_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "linsys_tuning.json"


def _key(plant, N, task_tag) -> str:
    if not isinstance(plant, str) or not plant:
        raise ValueError(f"plant: expected a robot name, got {plant!r}")
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 2:
        raise ValueError(f"N: expected an integer horizon >= 2, got {N!r}")
    if not isinstance(task_tag, str) or not task_tag or "|" in task_tag:
        raise ValueError(f"task_tag: expected a non-empty string without '|', got {task_tag!r}")
    return f"{plant}|{int(N)}|{task_tag}"


def load_tuning(path=None) -> dict:
    """The whole tuning table ``{"plant|N|task_tag": entry}`` ({} when the file is absent)."""
    p = tuning_path(path)
    if not p.is_file():
        return {}
    try:
        with open(p) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"linsys tuning file {p} is unreadable ({e}); delete or fix it") from None
    if not isinstance(data, dict):
        raise ValueError(f"linsys tuning file {p}: expected a JSON object, got {type(data).__name__}")
    return data


def _check_entry(entry) -> dict:
    if not isinstance(entry, dict):
        raise ValueError(f"entry: expected a dict with 'policy' and 'tau', got {type(entry).__name__}")
    if entry.get("policy") not in POLICIES:
        raise ValueError(f"entry: 'policy' must be one of {POLICIES}, got {entry.get('policy')!r}")
    if "tau" not in entry:
        raise ValueError("entry: missing 'tau' (None when the policy has no threshold)")
    for name in ("tau", "admm_tau"):
        t = entry.get(name)
        if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t)
                              or t < 0):
            raise ValueError(f"entry: {name!r} must be None or a finite number >= 0, got {t!r}")
    if entry.get("policy") == "auto" and entry.get("tau") is None:
        raise ValueError("entry: policy 'auto' needs a 'tau'")
    if "admm_policy" in entry and entry["admm_policy"] not in ADMM_POLICIES:
        raise ValueError(f"entry: 'admm_policy' must be one of {ADMM_POLICIES}, got {entry['admm_policy']!r}")
    return entry


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v


def save_tuning(plant, N, task_tag, entry, path=None) -> Path:
    """Insert or replace the (plant, N, task_tag) entry; returns the file written.

    ``entry`` carries at least {"policy": "pcg" | "bdsv" | "auto", "tau": float | None}
    and optionally {"admm_policy", "admm_tau"}; the autotune tool adds provenance
    (date, git SHA, probe statistics). The file is replaced atomically.
    """
    key = _key(plant, N, task_tag)
    entry = _jsonable(_check_entry(dict(entry)))
    p = tuning_path(path)
    table = load_tuning(p)
    table[key] = entry
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    os.replace(tmp, p)
    return p


def lookup(plant, N, task_tag, path=None):
    """The tuned entry (dict) for (plant, N, task_tag), or None."""
    entry = load_tuning(path).get(_key(plant, N, task_tag))
    return dict(entry) if isinstance(entry, dict) else None


# ------------------------------------------------------------------------ resolution
def check_threshold(v, name: str):
    """None, or v as a float when it is a finite pred_err threshold >= 0; ValueError naming ``name``."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) \
            or v < 0:
        raise ValueError(f"{name}: expected None or a finite pred_err threshold >= 0, got {v!r}")
    return float(v)


def _tuned(plant, N, task_tag, path):
    if plant is None or N is None or task_tag is None:
        return None
    entry = lookup(plant, N, task_tag, path)
    return _check_entry(entry) if entry is not None else None


def resolve_linsys(floating_base, linsys=None, bdsv_threshold=None, plant=None, N=None, task_tag=None,
                   path=None, backend="cuda"):
    """Controller-side resolution of the SQP linsys policy: explicit > tuned > wired default.

    Args:
        floating_base: whether the plant has a floating base.
        linsys: "pcg" | "bdsv" | "bdsv_first" | "auto" (explicit, always wins) or None.
        bdsv_threshold: pred_err threshold for "auto" (None: a tuned entry's fitted
            tau, else :data:`DEFAULT_TAU`); ignored by the pinned modes.
        plant, N, task_tag: the tuning key; the table is consulted only when all
            three are given.
        path: tuning file (default: :func:`tuning_path`).

    With ``linsys=None`` a tuned entry's policy ("pcg" | "bdsv" | "auto"@tau) wins
    over the wired default, which is "auto" for fixed-base plants and "bdsv" for
    floating-base plants on the CUDA backend, and "bdsv" on the CPU backend
    (``backend="cpu"``): there one exact block-tridiagonal solve costs less than
    the ~20 PCG iterations of a warm MPC step (iiwa14, N=32: docs/benchmarks.md).

    Returns ``(linsys, bdsv_threshold)`` with linsys in {"pcg", "bdsv", "bdsv_first",
    "auto"} and the threshold a float iff linsys is "auto", else None.
    """
    if linsys is not None and linsys not in _LINSYS_ARGS:
        raise ValueError(f"linsys: expected one of {_LINSYS_ARGS} or None, got {linsys!r}")
    thr = check_threshold(bdsv_threshold, "bdsv_threshold")
    entry = _tuned(plant, N, task_tag, path)
    tuned_tau = entry.get("tau") if entry else None  # the fitted crossing, whatever policy it chose
    if linsys is None:
        if entry is not None:
            linsys = entry["policy"]
        else:
            linsys = "bdsv" if floating_base or backend == "cpu" else "auto"
    if linsys != "auto":
        return linsys, None
    if thr is None:
        thr = float(tuned_tau) if tuned_tau is not None else DEFAULT_TAU
    return "auto", thr


def resolve_admm_linsys(admm_linsys=None, admm_threshold=None, *, fallback_tau=None, plant=None, N=None,
                        task_tag=None, path=None, backend="cuda"):
    """Controller-side resolution of the ADMM inner-loop linsys policy.

    Precedence: explicit ``admm_linsys`` > tuned entry (``admm_policy`` /
    ``admm_tau``) > wired default: on the CUDA backend by horizon, "pcg" for
    ``N <`` :data:`ADMM_FACTOR_MIN_N` knots, "bdsv_factor" from there ("pcg" when N
    is not given); on the CPU backend (``backend="cpu"``) "bdsv_factor" at every
    horizon (one block Cholesky per SQP iteration and a back-substitution per inner
    iteration cost less than warm PCG there, and the inner solves are exact).

    Under "auto" an unset ``admm_threshold`` takes the tuned ``admm_tau``, else
    ``fallback_tau`` (the controller passes its SQP ``bdsv_threshold``: one
    warm-startedness signal, two switches), else :data:`DEFAULT_TAU`.

    Returns ``(admm_linsys, admm_threshold)`` with admm_linsys in {"pcg",
    "bdsv_factor", "auto"} and the threshold a float iff "auto", else None.
    """
    if admm_linsys is not None and admm_linsys not in ADMM_POLICIES:
        raise ValueError(f"admm_linsys: expected one of {ADMM_POLICIES} or None, got {admm_linsys!r}")
    thr = check_threshold(admm_threshold, "admm_threshold")
    fb = check_threshold(fallback_tau, "fallback_tau")
    entry = _tuned(plant, N, task_tag, path)
    if admm_linsys is None:
        if entry is not None and entry.get("admm_policy") is not None:
            admm_linsys = entry["admm_policy"]
        elif backend == "cpu" or (N is not None and int(N) >= ADMM_FACTOR_MIN_N):
            admm_linsys = "bdsv_factor"
        else:
            admm_linsys = "pcg"
    if admm_linsys != "auto":
        return admm_linsys, None
    if thr is None:
        tuned = entry.get("admm_tau") if entry else None
        thr = float(tuned) if tuned is not None else (fb if fb is not None else DEFAULT_TAU)
    return "auto", thr
