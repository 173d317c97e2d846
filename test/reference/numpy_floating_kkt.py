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
