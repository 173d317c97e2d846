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


# ------------------------------------------------------------------ bit-identity and telemetry
def test_without_row_groups_nothing_changes_bit_for_bit():
    """No group, and enable + disable, leave the solver bit-identical to a fresh plain one."""
    plain, other = solver(), solver()
    other.enable_limit_admm()
    other.add_lin_u_rows(np.eye(7)[:2])
    other.disable_row_groups()
    ref = ref_for(plain, (0.0, 0.4, 0.1))
    xa = xb = None
    for _ in range(4):
        ra, rb = plain.solve(X0, ref, xa), other.solve(X0, ref, xb)
        xa, xb = ra.xu, rb.xu
        assert np.array_equal(xa, xb)
        for f in ("row_max_violation", "row_sum_violation", "admm_r_prim", "admm_r_dual", "admm_iters",
                  "admm_linsys_iters"):
            assert getattr(ra.stats, f) is None and getattr(rb.stats, f) is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_telemetry_is_bit_identical_and_reports_the_true_violation(dtype):
    """Telemetry changes no bit of the plan; its statistics are the violation NumPy computes
    from the returned plan (velocity rows violated by ~0.85 rad/s here)."""
    x = np.stack([X0, X0 + np.r_[np.zeros(7), 0.3 * np.ones(7)]])
    plain, tele = solver(B=2, dtype=dtype), solver(B=2, dtype=dtype)
    tele.enable_limit_telemetry()
    ref = np.stack([ref_for(plain, (0.0, 0.4, 0.1)), ref_for(plain, (0.1, -0.3, 0.0))])
    xa = xb = None
    for _ in range(10):
        ra, rb = plain.solve(x, ref, xa), tele.solve(x, ref, xb)
        xa, xb = ra.xu, rb.xu
        assert np.array_equal(xa, xb)
    st = rb.stats
    assert st.row_max_violation.shape == (2, 3) and st.row_sum_violation.shape == (2, 3)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=2e-5)
    for b in range(2):
        v = np_violation(tele, xb[b])
        np.testing.assert_allclose(st.row_max_violation[b], v[:, 0], **tol)
        np.testing.assert_allclose(st.row_sum_violation[b], v[:, 1], **tol)
    assert st.row_max_violation[0, 1] > 0.5                      # the velocity box is violated
    assert np.array_equal(st.admm_iters, [0, 0]) and np.array_equal(st.admm_r_prim, [0.0, 0.0])


# ------------------------------------------------------------------ NumPy oracle
TOY_N, TOY_DT, TOY_VB = 6, 0.05, 0.4   # tight velocity bounds make the rows bind on the toy problem


def toy():
    x = np.stack([X0, X0 + np.r_[0.02 * np.ones(7), 0.3 * np.ones(7)]])
    s = gato.BSQP(URDF, 2, TOY_N, TOY_DT, max_sqp_iters=2, linsys="bdsv")
    ref = np.stack([ref_for(s, (0.0, 0.3, 0.1)), ref_for(s, (0.1, -0.2, 0.0))])
    return s, x, ref


def toy_refs(s, mech, weights, extra=None, **kw):
    """One RefRows per batch entry with the solver's groups (limits + appended, read back from
    get_row_groups so both sides run the same rows)."""
    out = []
    for b in range(s.batch_size):
        p = RefProblem(URDF, "EE", TOY_N, TOY_DT)
        gs = RefRows.limit_groups(p, mech, weights)
        gs[1]["lo"], gs[1]["hi"] = -TOY_VB * np.ones(7), TOY_VB * np.ones(7)
        for g in s.get_row_groups()[3:]:
            d = dict(mech=g["mech_name"], lo=g["lo"], hi=g["hi"], w=g["rho"], delta=g["delta"],
                     knots=range(g["knot_lo"], g["knot_hi"]))
            if g["kind"] == rk.LIN_U:
                d.update(kind="lin_u", C=g["C"], d=g["d"])
            else:
                d.update(kind="ee", target=g["target"][b])
            gs.append(d)
        out.append(RefRows(p, gs, **kw))
    return out


def compare_with_oracle(s, x, ref, refs, repeats=3):
    xu, xr = None, [None] * s.batch_size
    for _ in range(repeats):
        r = s.solve(x, ref, xu)
        xu = r.xu
        for b in range(s.batch_size):
            xr[b], _ = refs[b].sqp(x[b], ref[b], xr[b], iters=2)
            np.testing.assert_allclose(xu[b], xr[b], rtol=0, atol=1e-8)
            vio = [v[0] for v in refs[b].violation]
            np.testing.assert_allclose(r.stats.row_max_violation[b], vio, rtol=0, atol=1e-9)
    return r


def test_admm_matches_the_numpy_oracle():
    """Two entries, 2 SQP iterations per solve, 4 inner iterations, 3 warm-started solves:
    plan, (z, y) of every group and the violations agree with the dense NumPy ADMM."""
    s, x, ref = toy()
    w = (0.1, 0.03, 1e-3)
    s.enable_limit_admm(rho_q=w[0], rho_qd=w[1], rho_u=w[2], iters=4)
    s.set_row_group_bounds(1, -TOY_VB, TOY_VB)
    refs = toy_refs(s, "admm", w, admm_iters=4)
    r = compare_with_oracle(s, x, ref, refs)
    st = s.get_admm_state()
    for b in range(2):
        for gi, g in enumerate(refs[b].groups):
            k = list(g["knots"])
            np.testing.assert_allclose(st["z"][b, gi, k, :7], g["z"][k], rtol=0, atol=1e-9)
            np.testing.assert_allclose(st["y"][b, gi, k, :7], g["y"][k], rtol=0, atol=1e-9)
    assert np.abs(st["y"][:, 1]).max() > 0.1                   # the velocity rows bind
    assert np.array_equal(r.stats.admm_iters, [8, 8]) and np.array_equal(r.stats.admm_linsys_iters, [8, 8])


def test_al_matches_the_numpy_oracle():
    """PHR cost, Gauss-Newton Hessian and the once-per-solve dual update agree with NumPy."""
    s, x, ref = toy()
    w = (1.0, 1.0, 1e-3)
    s.enable_limit_al(rho_q=w[0], rho_qd=w[1], rho_u=w[2])
    s.set_row_group_bounds(1, -TOY_VB, TOY_VB)
    refs = toy_refs(s, "al", w)
    compare_with_oracle(s, x, ref, refs)
    du = s.get_row_duals()
    for b in range(2):
        for gi, g in enumerate(refs[b].groups):
            k = list(g["knots"])
            np.testing.assert_allclose(du["lam_hi"][b, gi, k, :7], g["lam_hi"][k], rtol=0, atol=1e-9)
            np.testing.assert_allclose(du["lam_lo"][b, gi, k, :7], g["lam_lo"][k], rtol=0, atol=1e-9)
    assert du["lam_hi"][:, 1].max() > 0.1 and du["lam_lo"].min() >= 0


def test_barrier_matches_the_numpy_oracle():
    s, x, ref = toy()
    s.enable_limit_barrier(mu=0.003, delta=0.05)
    s.set_row_group_bounds(1, -TOY_VB, TOY_VB)
    refs = toy_refs(s, "barrier", (0.003,) * 3)
    r = compare_with_oracle(s, x, ref, refs)
    for b in range(2):                                           # the merit carries the barrier
        np.testing.assert_allclose(s.merit(r.xu, x, ref)[b], refs[b].merit(r.xu[b], x[b], ref[b]),
                                   rtol=0, atol=1e-10)


@pytest.mark.parametrize("mech", ["admm", "al"])
def test_appended_groups_match_the_numpy_oracle(mech):
    """EE terminal equality (rho J'J on the dense position block) and LIN_U rows (rho C'C on R)
    next to the limits, under ADMM and AL."""
    s, x, ref = toy()
    if mech == "admm":
        w = (0.1, 0.03, 1e-3)
        s.enable_limit_admm(rho_q=w[0], rho_qd=w[1], rho_u=w[2], iters=3)
    else:
        w = (1.0, 1.0, 1e-3)
        s.enable_limit_al(rho_q=w[0], rho_qd=w[1], rho_u=w[2])
    s.set_row_group_bounds(1, -TOY_VB, TOY_VB)
    tgt = np.stack([s.ee_pos(Q0) + [0.0, 0.05, 0.02], s.ee_pos(Q0) + [0.02, -0.03, 0.0]])
    assert s.enable_ee_terminal_equality(tgt, rho=5.0) == 3
    C = np.random.default_rng(3).standard_normal((2, 7))
    assert s.add_lin_u_rows(C, d=[1.0, -2.0], lo=-3.0, hi=[4.0, 2.0], rho=0.02, knot_lo=1) == 4
    g = s.get_row_groups()
    assert g[3]["kind"] == rk.EE_TERMINAL and (g[3]["knot_lo"], g[3]["knot_hi"]) == (TOY_N - 1, TOY_N)
    assert g[4]["kind"] == rk.LIN_U and (g[4]["knot_lo"], g[4]["knot_hi"]) == (1, TOY_N - 1)
    np.testing.assert_allclose(np.linalg.norm(g[4]["C"], axis=1), 1.0)    # normalize=True
    np.testing.assert_allclose(g[4]["hi"], [4.0, 2.0] / np.linalg.norm(C, axis=1))
    refs = toy_refs(s, mech, w, **({"admm_iters": 3} if mech == "admm" else {}))
    compare_with_oracle(s, x, ref, refs)
    state = s.get_admm_state() if mech == "admm" else s.get_row_duals()
    for b in range(2):
        for gi in (3, 4):
            rg = refs[b].groups[gi]
            k = list(rg["knots"])
            for key_s, key_r in ((("z", "z"), ("y", "y")) if mech == "admm" else (("lam_hi", "lam_hi"),
                                                                                   ("lam_lo", "lam_lo"))):
                np.testing.assert_allclose(state[key_s][b, gi, k, :rg["lo"].size], rg[key_r][k], rtol=0, atol=1e-8)


# ------------------------------------------------------------------ what each mechanism promises
STEP = (0.0, 0.4, 0.1)   # EE offset whose unconstrained plans exceed the velocity box by ~0.85 rad/s


def test_each_mechanism_delivers_its_promise_on_a_violated_box():
    """The unconstrained optimum violates the velocity box; over warm-started repeat solves
    ADMM ends within its residual tolerance, AL's outer loop drives the violation to ~0 and the
    relaxed barrier keeps the plan strictly inside (from the feasible hold start)."""
    ref = ref_for(solver(), STEP)
    s = solver()
    s.enable_limit_telemetry()
    r = repeat(s, X0, ref, 30)
    v_free = r.stats.row_max_violation[0, 1]
    assert v_free > 0.8
    # ADMM with the residual exit: violation <= eps_rel * max|z| of the velocity group
    s = solver()
    s.enable_limit_admm(eps_rel=1e-2)
    r = repeat(s, X0, ref, 30)
    z = s.get_admm_state()["z"][0, 1, 1:N, :7]
    tol = 1e-2 * np.abs(z).max()
    assert r.stats.row_max_violation[0, 1] <= tol and r.stats.admm_r_prim[0] <= tol
    assert np.all(r.stats.row_max_violation[0] <= tol)
    # AL: the violation falls over the outer loop
    s = solver()
    s.enable_limit_al()
    v = [repeat(s, X0, ref, 1).stats.row_max_violation[0, 1]]
    xu = None
    for _ in range(60):
        r = s.solve(X0, ref, xu)
        xu = r.xu
        v.append(r.stats.row_max_violation[0, 1])
    assert max(v[-10:]) < 0.012 * v_free                       # ~1 % of the unconstrained violation
    assert s.get_row_duals()["lam_hi"][0, 1].max() > 0.01 or s.get_row_duals()["lam_lo"][0, 1].max() > 0.01
    # barrier: strictly inside every box
    s = solver()
    s.enable_limit_barrier()
    r = repeat(s, X0, ref, 30)
    assert np.all(r.stats.row_max_violation[0] == 0.0)
    xs, us = split(s, r.xu[0])
    b = limit_boxes(s)
    assert np.min(b["qd"][1] - np.abs(xs[1:, 7:])) > 0 and np.min(b["u"][1] - np.abs(us)) > 0
    assert np.min(np.minimum(xs[1:, :7] - b["q"][0], b["q"][1] - xs[1:, :7])) > 0


def test_duals_persist_across_solves_and_reset_dual_zeroes_them():
    ref = ref_for(solver(), STEP)
    for mech in ("al", "admm"):
        s, fresh = solver(), solver()
        getattr(s, f"enable_limit_{mech}")()
        getattr(fresh, f"enable_limit_{mech}")()
        r = repeat(s, X0, ref, 5)
        state = s.get_row_duals() if mech == "al" else s.get_admm_state()
        key = "lam_hi" if mech == "al" else "y"
        assert np.abs(state[key]).max() > 0
        again = s.get_row_duals() if mech == "al" else s.get_admm_state()
        assert np.array_equal(state[key], again[key])          # reading does not touch them
        s.reset_dual()
        s.reset_rho()
        zero = s.get_row_duals() if mech == "al" else s.get_admm_state()
        assert all(not np.any(v) for v in zero.values())
        # the next solve is the first solve of a fresh solver, bit for bit
        assert np.array_equal(s.solve(X0, ref, r.xu).xu, fresh.solve(X0, ref, r.xu).xu)


def test_masks_bounds_and_soft_rows():
    ref = ref_for(solver(), STEP)
    s = solver()
    s.enable_limit_telemetry()
    s.set_row_group_bounds(1, -0.3, [0.3] * 6 + [np.inf])     # a one-sided row on joint 7
    mask = np.ones((N, 7), dtype=bool)
    mask[:8] = False                                           # rows off on knots 0..7
    mask[:, 0] = False                                         # and joint 1 everywhere
    s.set_row_group_mask(1, mask)
    r = repeat(s, X0, ref, 3)
    xs, _ = split(s, r.xu[0])
    hi = np.array([0.3] * 6 + [np.inf])
    v = np.maximum(0.0, np.maximum(-0.3 - xs[:, 7:], xs[:, 7:] - hi))
    v[~mask] = 0.0
    v[0] = 0.0
    np.testing.assert_allclose(r.stats.row_max_violation[0, 1], v.max(), rtol=1e-12)
    np.testing.assert_allclose(r.stats.row_sum_violation[0, 1], v.sum(), rtol=1e-12)
    g = s.get_row_groups()[1]
    assert np.array_equal(g["mask"], mask) and g["hi"][6] == np.inf
    s.set_row_group_mask(1, None)
    assert s.get_row_groups()[1]["mask"].all()
    # an all-True mask is the unmasked behaviour, bit for bit
    a, m = solver(), solver()
    for x in (a, m):
        x.enable_limit_admm()
    m.set_row_group_mask(1, np.ones((N, 7), dtype=bool))
    m.set_row_group_mask(2, np.ones((N, 7), dtype=bool))
    assert np.array_equal(repeat(a, X0, ref, 3).xu, repeat(m, X0, ref, 3).xu)
    # AL: masked slots carry no dual; elastic rows cap the multiplier at sigma
    s = solver()
    s.enable_limit_al(rho=5.0)
    mask = np.ones((N, 7), dtype=bool)
    mask[1:5, 0] = False                                       # joint 1 (the violated row) off on knots 1..4
    s.set_row_group_mask(1, mask)
    s.set_row_group_soft(1, 0.02)
    repeat(s, X0, ref, 10)
    du = s.get_row_duals()
    lam = np.maximum(du["lam_hi"][0, 1, :N, :7], du["lam_lo"][0, 1, :N, :7])
    assert np.all(lam[~mask] == 0) and lam.max() == pytest.approx(0.02, rel=1e-12)
    # ADMM: elastic rows keep |y| <= sigma
    s = solver()
    s.enable_limit_admm(rho_qd=1.0)
    s.set_row_group_soft(1, 0.05)
    ys, xu = [], None
    for _ in range(6):
        xu = s.solve(X0, ref, xu).xu
        ys.append(np.abs(s.get_admm_state()["y"][0, 1]).max())
    assert max(ys) == pytest.approx(0.05, rel=1e-12)            # saturated, never beyond sigma
    # set_row_group_rho reads back and re-initializes ADMM's (z, y) at the next solve
    s.set_row_group_rho(1, 0.5)
    assert s.get_row_groups()[1]["rho"] == 0.5
    r = s.solve(X0, ref, None)
    assert np.isfinite(r.stats.final_merit[0])


def test_ee_terminal_equality_reaches_its_target():
    ref = ref_for(solver(), (0.0, 0.3, 0.1))
    for mech, tol in (("al", 1e-4), ("admm", 1e-3)):
        s = solver()
        getattr(s, f"enable_limit_{mech}")()
        tgt = s.ee_pos(Q0) + np.array([0.05, 0.2, 0.1])
        g = s.enable_ee_terminal_equality(tgt)
        r = repeat(s, X0, ref, 40)
        qN = r.xu[0, (N - 1) * 21:(N - 1) * 21 + 7]
        err = np.abs(s.ee_pos(qN) - tgt)
        np.testing.assert_allclose(r.stats.row_max_violation[0, g], err.max(), rtol=1e-9, atol=1e-12)
        assert err.max() < tol
        assert s.get_row_groups()[g]["mech_name"] == mech and s.get_row_groups()[g]["rho"] == 10.0


def test_u_cone_soc_and_facets():
    """||[u_1, u_3]|| <= 5 N·m (joints 1 and 3, zero-based 0 and 2): violated by ~230 N·m
    unconstrained; the ADMM cone drives it to 0; the inscribed facets lie inside the cone."""
    ref = ref_for(solver(), STEP)
    C = np.zeros((3, 7))
    C[1, 0] = C[2, 2] = 1.0

    def soc_violation(s, xu):
        _, us = split(s, xu)
        return np.max(np.maximum(0.0, np.hypot(us[:, 0], us[:, 2]) - 5.0))

    s = solver()
    s.enable_limit_telemetry()
    g = s.enable_u_cone(C, d=[5.0, 0.0, 0.0])
    r = repeat(s, X0, ref, 10)
    assert g == 3 and rk.is_vector_kind(rk.LIN_U, s.get_row_groups()[g]["cone"])
    np.testing.assert_allclose(r.stats.row_max_violation[0, g], soc_violation(s, r.xu[0]), rtol=1e-9)
    assert soc_violation(s, r.xu[0]) > 100
    s = solver()
    s.enable_limit_admm()
    g = s.enable_u_cone(C, d=[5.0, 0.0, 0.0], rho=1e-2)
    assert s.get_row_groups()[g]["mask"].shape == (N,)
    r = repeat(s, X0, ref, 30)
    assert soc_violation(s, r.xu[0]) < 1e-6
    z = s.get_admm_state()["z"][0, g, :N - 1, :3]
    assert np.all(np.hypot(z[:, 1], z[:, 2]) <= z[:, 0] + 1e-12)  # z lives in the cone
    # facets: 8 half-planes, inscribed (s = cos(pi/8)) ⊂ cone ⊂ circumscribed (s = 1)
    s = solver()
    s.enable_limit_admm()
    g = s.enable_u_cone(C, d=[5.0, 0.0, 0.0], rho=1e-2, form="facets", facets=8)
    grp = s.get_row_groups()[g]
    assert grp["n_rows"] == 8 and grp["form"] == "facets" and not grp["cone"]
    r = repeat(s, X0, ref, 30)
    assert r.stats.row_max_violation[0, g] < 1e-3               # N·m (unit rows), from ~230
    assert soc_violation(s, r.xu[0]) <= r.stats.row_max_violation[0, g] + 1e-12   # inscribed: inside
    t = np.linspace(0, 2 * np.pi, 8, endpoint=False)
    for scale, inside in (("inscribed", True), ("circumscribed", False)):
        s2 = solver()
        s2.enable_limit_telemetry()
        g2 = s2.enable_u_cone(C, d=[5.0, 0.0, 0.0], form="facets", facet_scale=scale)
        Cf, df = s2.get_row_groups()[g2]["C"], s2.get_row_groups()[g2]["d"]
        # the point of the circle along a facet normal: outside the inscribed polygon only
        ang = t[1]
        u = np.zeros(7)
        u[0], u[2] = 5.0 * np.cos(ang), 5.0 * np.sin(ang)
        assert (np.max(Cf @ u + df) > 1e-9) == inside


# ------------------------------------------------------------------ ADMM loop controls and statistics
def test_admm_exit_linear_solvers_and_statistics():
    ref = ref_for(solver(), STEP)
    runs = {}
    for name, setup in {
        "budget": lambda s: s.enable_limit_admm(iters=6),
        "budget_again": lambda s: (s.enable_limit_admm(iters=6, eps_rel=1e-2), s.set_admm_exit(0.0, 0.0)),
        "exit": lambda s: s.enable_limit_admm(iters=6, eps_rel=1e-2),
        "pcg": lambda s: (s.enable_limit_admm(iters=6), s.set_admm_linsys("pcg")),
    }.items():
        s = solver(max_sqp_iters=2)
        setup(s)
        runs[name] = [s.solve(X0, ref)]
        for _ in range(15):
            runs[name].append(s.solve(X0, ref, runs[name][-1].xu))
    b, e, p = runs["budget"], runs["exit"], runs["pcg"]
    for r in b:                                    # fixed budget: iters per SQP iteration, one back-solve each
        assert r.stats.admm_iters[0] == 6 * r.stats.sqp_iters[0]
        assert r.stats.admm_linsys_iters[0] == r.stats.admm_iters[0]
    for ra, rb in zip(b, runs["budget_again"]):    # eps = 0 is the fixed budget, bit for bit
        assert np.array_equal(ra.xu, rb.xu)
    assert sum(r.stats.admm_iters[0] for r in e) < sum(r.stats.admm_iters[0] for r in b)
    assert min(r.stats.admm_iters[0] for r in e[-4:]) < 6 * e[-1].stats.sqp_iters[0]  # warm: early exit
    last = e[-1].stats
    assert last.admm_r_prim.shape == (1,) and last.admm_r_dual.shape == (1,)
    # the PCG inner loop solves the same systems to its tolerance (linsys iterations = PCG steps)
    assert all(r.stats.admm_linsys_iters[0] > r.stats.admm_iters[0] for r in p)
    assert p[-1].stats.row_max_violation[0, 1] < 0.02 and b[-1].stats.row_max_violation[0, 1] < 0.02
    out = {}
    for lin in ("bdsv_factor", "pcg"):
        s = solver(max_sqp_iters=2, pcg_tol=1e-12, max_pcg_iters=5000)
        s.enable_limit_admm(iters=6)
        s.set_admm_linsys(lin)
        out[lin] = (repeat(s, X0, ref, 3).xu, s.get_admm_state()["y"])
    np.testing.assert_allclose(out["pcg"][0], out["bdsv_factor"][0], rtol=0, atol=1e-3)   # N·m-sized entries
    np.testing.assert_allclose(out["pcg"][1], out["bdsv_factor"][1], rtol=0, atol=1e-5)
    s = solver()
    s.enable_limit_admm()
    s.set_admm_exit(1e-4, 1e-3, check_every=0)
    assert (s.admm_eps_abs, s.admm_eps_rel, s.admm_check_every) == (1e-4, 1e-3, 0)


def test_admm_rho_adaptation_and_merit_toggle():
    ref = ref_for(solver(), STEP)
    s = solver()
    s.enable_limit_admm()
    assert np.array_equal(s.get_admm_rho_scale(), [1.0])
    s.set_admm_rho_adaptation(True)
    repeat(s, X0, ref, 6)
    scale = s.get_admm_rho_scale()[0]
    assert scale != 1.0 and 1e-2 <= scale <= 1e2
    s.set_admm_rho_adaptation(False)               # toggling resets the scale
    assert np.array_equal(s.get_admm_rho_scale(), [1.0])
    # merit toggle: the same plan is scored with y'(g - z) + rho/2 |g - z|^2 added
    a, m = solver(), solver()
    for x in (a, m):
        x.enable_limit_admm(rho_qd=0.5)
    m.set_admm_merit(True)
    xa = repeat(a, X0, ref, 3).xu
    repeat(m, X0, ref, 3)
    st = m.get_admm_state()
    z, y = st["z"][0, 1, 1:N, :7], st["y"][0, 1, 1:N, :7]
    xs, _ = split(m, xa[0])
    g = xs[1:, 7:]
    extra = np.sum(y * (g - z) + 0.25 * (g - z) ** 2)
    # merit() of the toggled solver adds the term (groups 0 and 2 inactive: y = 0, z = g)
    st0 = [st["z"][0, gi] for gi in (0, 2)]
    assert all(np.isfinite(v).all() for v in st0)
    np.testing.assert_allclose(m.merit(xa, X0, ref)[0] - a.merit(xa, X0, ref)[0], extra, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mech", ["telemetry", "barrier", "admm", "al"])
def test_float32_runs_every_mechanism_like_float64(mech):
    ref = ref_for(solver(), STEP)
    out = {}
    for dt in (np.float64, np.float32):
        s = solver(dtype=dt)
        getattr(s, f"enable_limit_{mech}")()
        r = repeat(s, X0, ref, 8)
        assert np.all(np.isfinite(r.xu)) and r.stats.row_max_violation.dtype == np.float64
        out[dt] = r
    np.testing.assert_allclose(out[np.float32].stats.row_max_violation, out[np.float64].stats.row_max_violation,
                               rtol=0, atol=0.02)
    xa, _ = split(s, out[np.float64].xu[0])
    xb, _ = split(s, out[np.float32].xu[0])
    np.testing.assert_allclose(xb, xa, rtol=0, atol=0.05)      # states (torques are nearly free: u_cost 2e-6)


def test_batch_entries_are_independent_and_solves_deterministic():
    """Each entry of a B = 3 batch (different states, references, appended rows) equals the
    B = 1 solve of its own problem bit for bit, run after run."""
    rng = np.random.default_rng(7)
    xs = np.stack([X0 + np.r_[0.05 * rng.standard_normal(7), 0.2 * rng.standard_normal(7)] for _ in range(3)])
    refs = np.stack([ref_for(solver(), off) for off in ((0.0, 0.4, 0.1), (0.1, -0.3, 0.0), (-0.1, 0.2, -0.1))])
    tgts = np.stack([solver().ee_pos(Q0) + d for d in ([0, .1, 0], [0, -.1, .05], [.05, 0, 0])])

    def configure(s, tgt):
        s.enable_limit_admm(eps_rel=1e-2)
        s.enable_ee_terminal_equality(tgt)
        s.add_lin_u_rows(np.eye(7)[:2], lo=-40.0, hi=40.0)

    def run_batch():
        s = solver(B=3, threads=2)
        configure(s, tgts)
        xu = None
        for _ in range(3):
            r = s.solve(xs, refs, xu)
            xu = r.xu
        return r, s.get_admm_state()

    r1, st1 = run_batch()
    r2, st2 = run_batch()
    assert np.array_equal(r1.xu, r2.xu) and np.array_equal(st1["y"], st2["y"])
    for b in range(3):
        s = solver()
        configure(s, tgts[b])
        xu = None
        for _ in range(3):
            r = s.solve(xs[b], refs[b], xu)
            xu = r.xu
        assert np.array_equal(r.xu[0], r1.xu[b])
        assert np.array_equal(r.stats.row_max_violation[0], r1.stats.row_max_violation[b])
        assert np.array_equal(s.get_admm_state()["y"][0], st1["y"][b])


def test_row_gradients_match_finite_differences_of_the_merit():
    """Barrier and AL terms of every kind (boxes, SOC cone, LIN_U, EE rows): the gradient the
    KKT blocks carry equals a central difference of merit() (the groups' cost)."""
    rng = np.random.default_rng(0)
    C = np.zeros((3, 7))
    C[1, 0], C[2, 2], C[0, 3] = 1.0, 1.0, 0.2
    cases = [
        lambda s: s.enable_limit_barrier(mu=0.01),
        lambda s: s.enable_limit_al(rho=0.5),
        lambda s: (s.enable_limit_telemetry(), s.enable_u_cone(C, d=[5.0, 0, 0], mech="al", rho=0.1)),
        lambda s: (s.enable_limit_telemetry(), s.enable_u_cone(C, d=[50.0, 0, 0], mech="barrier", rho=0.1)),
        lambda s: (s.enable_limit_telemetry(), s.add_lin_u_rows(rng.standard_normal((3, 7)), d=[1, 2, 3], lo=-5,
                                                                hi=5, mech="al", rho=0.3)),
        lambda s: (s.enable_limit_barrier(), s.enable_ee_terminal_equality(s.ee_pos(Q0) + 0.01, rho=0.05)),
        lambda s: (s.enable_limit_al(), s.enable_ee_terminal_equality(s.ee_pos(Q0) + 0.05, rho=3.0)),
    ]
    n, st = 5, 21
    for setup in cases:
        s, s0 = solver(n=n), solver(n=n)
        setup(s)
        ref = ref_for(s)
        xu = s.hold_trajectory(X0[None])[0]
        for k in range(n - 1):
            xu[k * st + 14:(k + 1) * st] = 30 * rng.standard_normal(7)
        for k in range(1, n):
            xu[k * st + 7:k * st + 14] += 1.5 * rng.standard_normal(7)
        K, K0 = (x.debug_setup_kkt(xu[None], X0[None], ref[None]) for x in (s, s0))

        def f(z):
            return (s.merit(z[None], X0[None], ref[None]) - s0.merit(z[None], X0[None], ref[None]))[0]

        grad = np.zeros_like(xu)
        for k in range(n):
            grad[k * st:k * st + 14] = K["q"][0, k] - K0["q"][0, k]
            if k < n - 1:
                grad[k * st + 14:(k + 1) * st] = K["r"][0, k] - K0["r"][0, k]
        fd = np.zeros_like(xu)
        for i in range(xu.size):
            e = 1e-6 * max(1.0, abs(xu[i]))
            zp, zm = xu.copy(), xu.copy()
            zp[i] += e
            zm[i] -= e
            fd[i] = (f(zp) - f(zm)) / (2 * e)
        assert np.abs(grad).max() > 0.1
        np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-5 * max(1.0, np.abs(fd).max()))


# ------------------------------------------------------------------ bad input
def test_bad_input_raises_with_clear_messages():
    s = solver()
    with pytest.raises(ValueError, match="no limit mechanism is installed.*enable_limit_"):
        s.add_lin_u_rows(np.eye(7)[:1])
    with pytest.raises(ValueError, match="enable_ee_terminal_equality: no limit mechanism"):
        s.enable_ee_terminal_equality([0.5, 0.0, 0.5])
    with pytest.raises(ValueError, match="enable_u_cone|add_lin_u_rows: no limit mechanism"):
        s.enable_u_cone(np.eye(7)[:3])
    with pytest.raises(ValueError, match="row-group index"):
        s.set_row_group_bounds(0, -1, 1)
    s.enable_limit_al()
    with pytest.raises(ValueError, match="lo needs 7 entries"):
        s.set_row_group_bounds(1, np.zeros(6), np.ones(7))
    with pytest.raises(ValueError, match="hi needs 7 entries"):
        s.set_row_group_bounds(1, -1.0, np.ones(8))
    with pytest.raises(ValueError, match=r"lo > hi at row 2"):
        s.set_row_group_bounds(1, [0, 0, 2, 0, 0, 0, 0], 1.0)
    with pytest.raises(ValueError, match="lo contains NaN"):
        s.set_row_group_bounds(1, [0, np.nan, 0, 0, 0, 0, 0], 1.0)
    with pytest.raises(ValueError, match="hi contains NaN"):
        s.set_row_group_bounds(1, -1.0, np.nan)
    with pytest.raises(ValueError, match=r"mask: expected shape \(16, 7\)"):
        s.set_row_group_mask(1, np.ones((16, 6), dtype=bool))
    with pytest.raises(ValueError, match=r"mask: expected shape \(16, 7\)"):
        s.set_row_group_mask(1, np.ones(16, dtype=bool))
    with pytest.raises(ValueError, match="mask: expected booleans"):
        s.set_row_group_mask(1, np.full((16, 7), 2.0))
    with pytest.raises(ValueError, match="row-group index"):
        s.set_row_group_rho(3, 1.0)
    with pytest.raises(ValueError, match="rho: expected a finite number > 0"):
        s.set_row_group_rho(0, -1.0)
    with pytest.raises(ValueError, match="sigma"):
        s.set_row_group_soft(0, np.nan)
    with pytest.raises(ValueError, match=r"C: expected shape \(m, 7\)"):
        s.add_lin_u_rows(np.ones((2, 6)))
    with pytest.raises(ValueError, match="C: contains NaN"):
        s.add_lin_u_rows(np.full((1, 7), np.nan))
    with pytest.raises(ValueError, match="lo > hi"):
        s.add_lin_u_rows(np.eye(7)[:1], lo=1.0, hi=0.0)
    with pytest.raises(ValueError, match="knot_lo / knot_hi"):
        s.add_lin_u_rows(np.eye(7)[:1], knot_lo=5, knot_hi=5)
    with pytest.raises(ValueError, match="a cone needs 3 rows"):
        s.add_lin_u_rows(np.eye(7)[:2], cone=True)
    with pytest.raises(ValueError, match="form"):
        s.enable_u_cone(np.eye(7)[:3], form="ellipse")
    with pytest.raises(ValueError, match="equilibrate"):
        s.add_lin_u_rows(np.eye(7)[:1], equilibrate=True)
    with pytest.raises(ValueError, match="mech: expected None or one of"):
        s.add_lin_u_rows(np.eye(7)[:1], mech="hard")
    with pytest.raises(ValueError, match=r"target: expected shape \(1, 3\)"):
        s.enable_ee_terminal_equality([0.5, 0.0])
    with pytest.raises(ValueError, match="admm_linsys"):
        s.set_admm_linsys("lu")
    with pytest.raises(ValueError, match="eps_rel"):
        s.set_admm_exit(0.0, -1.0)
    with pytest.raises(ValueError, match="iters: expected an integer >= 1"):
        s.enable_limit_admm(iters=0)
    with pytest.raises(ValueError, match="a residual exit needs a tolerance"):
        s.enable_limit_admm(eps_rel=0.0)
    with pytest.raises(ValueError, match="mu"):
        s.enable_limit_barrier(mu=0.0)
    cone = s.enable_u_cone(np.eye(7)[:3])
    with pytest.raises(ValueError, match=r"mask: expected shape \(16,\)"):
        s.set_row_group_mask(cone, np.ones((16, 3), dtype=bool))
    with pytest.raises(ValueError, match="second-order cone"):
        s.set_row_group_bounds(cone, 0.0, 1.0)
    with pytest.raises(ValueError, match="elastic cones are ADMM-only"):
        s.set_row_group_soft(cone, 0.1)
    for _ in range(8 - len(s.get_row_groups())):
        s.add_lin_u_rows(np.eye(7)[:1])
    with pytest.raises(ValueError, match="at most 8 row groups"):
        s.add_lin_u_rows(np.eye(7)[:1])
    assert len(s.get_row_groups()) == 8


# ------------------------------------------------------------------ closed loop (simulated iiwa14)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


@pytest.mark.slow
def test_default_controller_keeps_a_step_pick_and_place_within_the_velocity_limit():
    """Step-reference pick-and-place (pickplace_scenarios, ramp 0) on PinocchioWorld: the
    unconstrained controller (telemetry, bit-identical to limits="off") drives a joint to 2x its
    URDF velocity limit or more; the default controller (ADMM limits) keeps the simulated peak,
    sampled at every RK4 substep, within 2 % of the limit. Figures: docs/benchmarks.md."""
    import bench_limits as bl

    for sc in bl.pickplace_set(5, seed=0)[1:5:3]:          # scenarios 1 and 4 of the dev set
        free = bl.run_pickplace(sc, "telemetry")
        lim = bl.run_pickplace(sc, None)
        assert free["peak_qd_ratio"] >= 2.0 and free["plan_viol"][1] > 0.5
        assert lim["limits"] == "admm" and lim["peak_qd_ratio"] <= 1.02
        assert lim["task_time"] < 2.0 * free["task_time"] + 0.5   # the goals are still reached


@pytest.mark.slow
def test_default_controller_matches_the_unconstrained_one_where_no_limit_binds():
    """A slow figure-8 (speed ratio 0.5 of the limit): no limit binds (the unconstrained plans
    never violate a row), and the default controller's RMS tracking error and task (settle)
    time stay within 5 % of the unconstrained run's."""
    import bench_limits as bl

    sc = bl.fig8_set(1, seed=0)[0]
    free = bl.run_fig8(sc, "telemetry")
    lim = bl.run_fig8(sc, None)
    assert np.all(free["plan_viol"] == 0) and free["peak_qd_ratio"] < 0.9
    assert lim["limits"] == "admm"
    assert abs(lim["rms_err"] / free["rms_err"] - 1) <= 0.05
    assert abs(lim["task_time"] - free["task_time"]) <= 0.05 * free["task_time"]
