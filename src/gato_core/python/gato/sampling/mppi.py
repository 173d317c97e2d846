"""The sampling planner's math, free of MuJoCo: node interpolation, node noise, the elite update.

Plans are offsets of ``num_nodes`` control nodes (K, nu) at steps 0, node_steps, 2 node_steps, ...
on top of the reference commands; a (steps, K) basis turns nodes into per-step offsets.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["basis_at", "node_basis", "noise_profile", "free_nodes", "elite_update", "refit_std"]


def basis_at(kind, steps, node_steps: int, num_nodes: int) -> np.ndarray:
    """(len(steps), K) weights of the K nodes at (possibly fractional) step positions ``steps``.

    kind "zero": the node at or before the step; "linear": between the two neighbours; "cubic":
    Catmull-Rom through the nodes (end nodes repeated). Past the last node the last node holds.
    """
    s = np.asarray(steps, dtype=np.float64).reshape(-1)
    K = int(num_nodes)
    u = np.clip(s / float(node_steps), 0.0, K - 1)
    W = np.zeros((len(s), K))
    rows = np.arange(len(s))
    if kind == "zero" or K == 1:
        W[rows, np.floor(u + 1e-9).astype(int).clip(0, K - 1)] = 1.0
        return W
    k = np.minimum(np.floor(u).astype(int), K - 2)
    t = u - k
    if kind == "linear":
        np.add.at(W, (rows, k), 1.0 - t)
        np.add.at(W, (rows, k + 1), t)
        return W
    if kind == "cubic":
        t2, t3 = t * t, t * t * t
        coef = [(-t3 + 2 * t2 - t) / 2, (3 * t3 - 5 * t2 + 2) / 2, (-3 * t3 + 4 * t2 + t) / 2, (t3 - t2) / 2]
        for off, c in zip((-1, 0, 1, 2), coef):
            np.add.at(W, (rows, np.clip(k + off, 0, K - 1)), c)
        return W
    raise ValueError(f"interpolation: expected 'linear', 'cubic' or 'zero', got {kind!r}")


def node_basis(interpolation, horizon_steps: int, node_steps: int, num_nodes: int) -> np.ndarray:
    """(horizon_steps, K) basis of steps 0 .. horizon_steps - 1 (a given array is used as is)."""
    if isinstance(interpolation, np.ndarray):
        return interpolation
    return basis_at(interpolation, np.arange(horizon_steps), node_steps, num_nodes)


def free_nodes(config) -> np.ndarray:
    """(K,) bool: the nodes a plan draws. Node 0 is the command executing now; it is drawn only
    with ``draw_first_node`` or "zero" interpolation."""
    K = config.num_nodes
    free = np.ones(K, dtype=bool)
    first = bool(config.draw_first_node) or (isinstance(config.interpolation, str)
                                             and config.interpolation == "zero")
    if not first:
        free[0] = False
    return free


def noise_profile(config, nu: int) -> np.ndarray:
    """(K, nu) configured node noise: ctrl_std at the first free node growing linearly to
    std_growth * ctrl_std at the last; 0 on fixed nodes."""
    free = free_nodes(config)
    idx = np.flatnonzero(free)
    std = np.zeros((config.num_nodes, nu))
    base = np.broadcast_to(np.asarray(config.ctrl_std, dtype=np.float64), (nu,))
    F = len(idx)
    for j, k in enumerate(idx):
        g = 1.0 + (config.std_growth - 1.0) * (j / (F - 1) if F > 1 else 0.0)
        std[k] = base * g
    return std


def elite_update(cands: np.ndarray, costs: np.ndarray, elite_ratio: float, planner: str = "mppi") -> dict:
    """The moved plan from one iteration's candidates.

    Args:
        cands: (N, K, nu) candidate nodes; costs: (N,) their costs (NaN counts as +inf).
        elite_ratio: share of the cheapest candidates kept, at least one.
        planner: "mppi": weights exp(-(c - c_min) / temperature) over the elites, the temperature
            the elites' cost spread (c_max_elite - c_min; equal weights when it is 0 or not
            finite); "cem": equal weights over the elites.

    Returns dict(mean (K, nu), weights (N,) (0 outside the elites, sum 1), elites (n_elite,)
    indices cheapest first, temperature, best (index of the cheapest)).
    """
    c = np.where(np.isfinite(costs), costs, np.inf)
    n_elite = max(1, int(math.ceil(elite_ratio * len(c) - 1e-9)))
    order = np.argsort(c, kind="stable")
    elites = order[:n_elite]
    ce = c[elites]
    finite = np.isfinite(ce)
    if not finite.any():  # every candidate diverged: keep the first (the plan when it is included)
        elites, ce, finite = elites[:1], np.zeros(1), np.ones(1, dtype=bool)
    elites, ce = elites[finite], ce[finite]
    temperature = float(ce[-1] - ce[0])
    if planner == "mppi" and temperature > 0 and math.isfinite(temperature):
        w = np.exp(-(ce - ce[0]) / temperature)
    else:
        w = np.ones_like(ce)
    w = w / w.sum()
    weights = np.zeros(len(c))
    weights[elites] = w
    mean = np.tensordot(w, cands[elites], axes=(0, 0))
    return dict(mean=mean, weights=weights, elites=elites, temperature=temperature, best=int(order[0]))


def refit_std(cands: np.ndarray, upd: dict) -> np.ndarray:
    """(K, nu) weighted spread sqrt(sum_i w_i (cand_i - mean)^2) of the elites about the moved plan."""
    d = cands - upd["mean"][None]
    return np.sqrt(np.tensordot(upd["weights"], d * d, axes=(0, 0)))
