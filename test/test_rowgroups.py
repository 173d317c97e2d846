"""Constraint row groups (docs/constraints.md) through the public API: telemetry, relaxed
barrier, ADMM projection and augmented Lagrangian on the URDF limit boxes and the appended
groups; the NumPy oracle in test/reference/numpy_rows.py; bad input; the controller default.

Everything is seeded or deterministic (solves are bit-deterministic run to run).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from gato import rowkinds as rk
from gato.controller import MPCController

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference.numpy_bsqp import RefProblem  # noqa: E402
from reference.numpy_rows import RefRows  # noqa: E402

URDF = gato.robot_urdf("iiwa14")
Q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
X0 = np.concatenate([Q0, np.zeros(7)])
N, DT = 16, 0.03125


def solver(B=1, n=N, dt=DT, **kw):
    return gato.BSQP(URDF, B, n, dt, **kw)


def ref_for(s, offset=(0.0, 0.3, 0.1)):
    return np.tile(np.concatenate([s.ee_pos(Q0) + np.asarray(offset), np.zeros(3)]), s.N)


def split(s, xu):
    """(xs (N, nx), us (N-1, nu)) of one flat plan."""
    st = s.nx + s.nu
    xs = np.array([xu[k * st:k * st + s.nx] for k in range(s.N)])
    us = np.array([xu[k * st + s.nx:(k + 1) * st] for k in range(s.N - 1)])
    return xs, us


def limit_boxes(s):
    """The canonical boxes, computed here from the URDF limits (NumPy side)."""
    L = s.limits
    m = 0.1
    return {"q": (L["q_lo"] + m, L["q_hi"] - m), "qd": (-(L["qd"] - m), L["qd"] - m), "u": (-(L["u"] - m), L["u"] - m)}


def np_violation(s, xu, boxes=None):
    """(max, sum) violation per limit group of one plan: position/velocity on knots 1..N-1,
    torque on controls 0..N-2."""
    boxes = boxes or limit_boxes(s)
    xs, us = split(s, xu)
    vals = [xs[1:, :s.nv], xs[1:, s.nv:], us]
    out = []
    for v, key in zip(vals, ("q", "qd", "u")):
        lo, hi = boxes[key]
        viol = np.maximum(0.0, np.maximum(lo - v, v - hi))
        out.append((viol.max(), viol.sum()))
    return np.array(out)


def repeat(s, x, ref, n, xu=None):
    """n warm-started repeat solves from x; returns the last result."""
    r = None
    for _ in range(n):
        r = s.solve(x, ref, xu)
        xu = r.xu
    return r


# ------------------------------------------------------------------ ids and descriptors
def test_rowkinds_ids_and_vector_kinds():
    assert (rk.Q_BOX, rk.QD_BOX, rk.U_BOX, rk.EE_TERMINAL, rk.LIN_U) == (0, 1, 2, 3, 4)
    assert (rk.TELEMETRY, rk.BARRIER, rk.ADMM, rk.AL) == (0, 1, 2, 3)
    assert rk.is_vector_kind(rk.LIN_U, cone=True) and rk.is_vector_kind(rk.COLLISION)
    assert not rk.is_vector_kind(rk.LIN_U) and not rk.is_vector_kind(rk.QD_BOX, cone=False)


def test_limit_groups_are_the_margin_shrunk_urdf_boxes():
    s = solver()
    assert s.row_mech is None and s.get_row_groups() == [] and not s.admm_active
    s.enable_limit_admm(rho=0.01, rho_q=0.1, rho_qd=0.03, rho_u=1e-5, iters=7)
    g = s.get_row_groups()
    L = s.limits
    assert [x["kind"] for x in g] == [rk.Q_BOX, rk.QD_BOX, rk.U_BOX]
    assert [x["block"] for x in g] == ["q", "qd", "u"]
    assert [(x["knot_lo"], x["knot_hi"]) for x in g] == [(1, N), (1, N), (0, N - 1)]
    assert [x["rho"] for x in g] == [0.1, 0.03, 1e-5]
    assert all(x["mech_name"] == "admm" and x["mask"].shape == (N, 7) and x["mask"].all() for x in g)
    np.testing.assert_array_equal(g[0]["lo"], L["q_lo"] + 0.1)
    np.testing.assert_array_equal(g[0]["hi"], L["q_hi"] - 0.1)
    np.testing.assert_array_equal(g[1]["hi"], L["qd"] - 0.1)
    np.testing.assert_array_equal(g[2]["lo"], -(L["u"] - 0.1))
    assert s.row_mech == "admm" and s.admm_active and s.admm_iters == 7
    assert (s.admm_eps_abs, s.admm_eps_rel, s.admm_linsys) == (0.0, 0.0, "bdsv_factor")
    s.disable_row_groups()
    assert s.row_mech is None and s.get_row_groups() == []
    assert s.solve(X0, ref_for(s)).stats.row_max_violation is None
