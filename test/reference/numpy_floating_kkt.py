"""Dense NumPy KKT solve of the floating-base SQP's LQ subproblem (issue 34 test oracle).

The subproblem (gato/floating_sqp.hpp, single shooting, linearized at a rollout, no defects):

    min  sum_k 1/2 dx_k^T Hxx_k dx_k + gx_k^T dx_k  (k = 0 .. N-1)
       + sum_k 1/2 dw_k^T Hww_k dw_k + gw_k^T dw_k  (k = 0 .. N-2)
    s.t. dx_0 = 0,  dx_{k+1} = A_k dx_k + B_k dw_k.

Assembled as one symmetric KKT matrix [[H, C^T], [C, 0]] and solved with numpy.linalg.solve:
no Riccati recursion, so it checks the C++ backward pass independently.
"""
from __future__ import annotations

import numpy as np


def dense_kkt_step(A, B, Hxx, Hww, gx, gw, reg=0.0):
    """(dX (N, ndx), dW (N-1, nw), residual) from the stacked blocks of FloatingSQP.lq.

    reg adds reg * I to every Hww (the Riccati pass's regularization)."""
    A, B, Hxx, Hww = map(np.asarray, (A, B, Hxx, Hww))
    gx, gw = np.asarray(gx), np.asarray(gw)
    N, ndx = gx.shape
    nw = gw.shape[1]
    nz = N * ndx + (N - 1) * nw
    ix = lambda k: slice(k * ndx, (k + 1) * ndx)                       # noqa: E731
    iw = lambda k: slice(N * ndx + k * nw, N * ndx + (k + 1) * nw)     # noqa: E731
    H = np.zeros((nz, nz))
    g = np.zeros(nz)
    for k in range(N):
        H[ix(k), ix(k)] = Hxx[k]
        g[ix(k)] = gx[k]
    for k in range(N - 1):
        H[iw(k), iw(k)] = Hww[k] + reg * np.eye(nw)
        g[iw(k)] = gw[k]
    nc = N * ndx
    C = np.zeros((nc, nz))
    C[0:ndx, ix(0)] = np.eye(ndx)
    for k in range(N - 1):
        r = slice((k + 1) * ndx, (k + 2) * ndx)
        C[r, ix(k + 1)] = np.eye(ndx)
        C[r, ix(k)] = -A[k]
        C[r, iw(k)] = -B[k]
    K = np.block([[H, C.T], [C, np.zeros((nc, nc))]])
    rhs = np.concatenate([-g, np.zeros(nc)])
    sol = np.linalg.solve(K, rhs)
    res = float(np.max(np.abs(K @ sol - rhs)))
    z = sol[:nz]
    dX = z[:N * ndx].reshape(N, ndx)
    dW = z[N * ndx:].reshape(N - 1, nw)
    return dX, dW, res


# ---------------------------------------------------------------- hard rows (issue 34)
def soc_project(v):
    """Projection of v = (t, z1, z2) onto the second-order cone ||z|| <= t."""
    v = np.asarray(v, dtype=float)
    t, z = v[0], v[1:]
    nz = np.linalg.norm(z)
    if nz <= t:
        return v.copy()
    if nz <= -t:
        return np.zeros(3)
    a = 0.5 * (t + nz)
    return np.concatenate([[a], a * z / nz])


def al_row_terms(g, lam, rho, lo=None, hi=None, cone=False):
    """(cost, dcost/dg, updated multiplier) of the PHR augmented-Lagrangian term of one knot's rows
    (docs/constraints.md, mech "al"), written from the definitions:
    interval rows: sum_i (rho/2) dist_[lo_i, hi_i](g_i + lam_i/rho)^2 - lam_i^2/(2 rho),
        lam <- rho (v - clip(v, lo, hi)), v = g + lam/rho;
    a cone (3 rows): (rho/2) dist_K(g - lam/rho)^2 - |lam|^2/(2 rho), lam <- Pi_K(lam - rho g)."""
    g, lam = np.asarray(g, dtype=float), np.asarray(lam, dtype=float)
    if cone:
        v = g - lam / rho
        e = v - soc_project(v)
        return 0.5 * rho * e @ e - lam @ lam / (2 * rho), rho * e, soc_project(lam - rho * g)
    v = g + lam / rho
    e = v - np.clip(v, lo, hi)
    return float(np.sum(0.5 * rho * e * e - lam * lam / (2 * rho))), rho * e, rho * e
