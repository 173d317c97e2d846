"""Hard rows of the floating-base contact-force SQP and the reference's fc / floating-base surface
(issue 34): fc boxes, friction cones and contact-position rows under the augmented Lagrangian of
gato._core.FloatingSQP (docs/floating_solver.md), and gato.BSQP(..., variant="fc") on go2 /
gato.build(..., floating_base=True, contact_forces=True) / gato.register_robot.

Checked: every row kind's values and Jacobians against central finite differences (the base on
the manifold: the state perturbed with integrate); the AL terms of the knot cost against the NumPy
definitions (test/reference/numpy_floating_kkt.al_row_terms) and their gradients against
differences; the Riccati step with rows against the dense NumPy KKT solve (1e-9); a solve that
meets the rows to 1e-5 where the penalty version of the same task does not; every public name;
bad input refused naming the argument. Seeded; no timing asserted.
"""
from pathlib import Path

import numpy as np
import pytest

import gato
from gato.core.floating_bsqp import FloatingBSQP
from gato.floating import FloatingController, FloatingMPC, FloatingPlant, FloatingSolveResult, FloatingSQP
from reference.numpy_floating_kkt import al_row_terms, dense_kkt_step

GO2_URDF = str(Path(__file__).resolve().parents[1] / "src/gato_description/robots/go2_description/go2.urdf")
FEET = ["FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint"]
Q_STAND = np.array([0.0, 0.9, -1.8] * 4)
N, DT = 5, 0.02
EPS = 1e-6
MU = 0.3
ROW_TOL = 1e-5  # the rows met by the AL solves (N for the cone, m for the feet)


def stand_state(height=0.30):
    return np.concatenate([[0.0, 0.0, height, 0.0, 0.0, 0.0, 1.0], Q_STAND, np.zeros(18)])


def random_x(rng):
    x = stand_state()
    x[:3] += 0.05 * rng.normal(size=3)
    quat = np.array([0.0, 0.0, 0.0, 1.0]) + 0.1 * rng.normal(size=4)
    x[3:7] = quat / np.linalg.norm(quat)
    x[7:19] += 0.2 * rng.normal(size=12)
    x[19:] = 0.5 * rng.normal(size=18)
    return x


def random_w(rng):
    fc = 10.0 * rng.normal(size=(4, 6))
    fc[:, 5] += 30.0
    return np.concatenate([3.0 * rng.normal(size=12), fc.ravel()])


def cone_C(c, mu=MU):
    C = np.zeros((3, 24))
    C[0, 6 * c + 5], C[1, 6 * c + 3], C[2, 6 * c + 4] = mu, 1.0, 1.0
    return C


def sqp_pair(seed, n=N):
    """(with rows, without rows): the same random costs; rows = an fc box on random slots, a
    general linear fc row group, a cone on every foot and contact-position rows (per-knot targets)."""
    out = []
    for rows in (True, False):
        rng = np.random.default_rng(seed)
        s = FloatingSQP(GO2_URDF, FEET, n, DT)
        s.set_state_weights(rng.uniform(0.5, 50.0, 36), rng.uniform(5.0, 100.0, 36))
        s.set_x_ref(np.stack([random_x(rng) for _ in range(n)]))
        s.set_u_cost(rng.uniform(1e-3, 1e-1, 12))
        s.set_fc_cost(rng.uniform(1e-3, 1e-1, 24))
        C = rng.normal(size=(4, 24))
        d, lo, hi = rng.normal(size=4), -np.abs(rng.normal(size=4)), np.abs(rng.normal(size=4))
        tg = rng.normal(size=(n, 12)) * 0.1
        if rows:
            s.add_fc_rows(np.eye(24)[[0, 5, 11, 17]], None, -2.0 * np.ones(4), [3.0, 40.0, np.inf, 30.0])
            s.add_fc_rows(C, d, lo, hi, rho=3.0)
            for c in range(4):
                s.add_fc_rows(cone_C(c), cone=True, rho=2.0)
            s.add_contact_pos_rows(tg, rho=5.0)
        out.append(s)
    return out


def fd_rows(s, g, k, x, w, plant):
    """Central differences of row group g at knot k: (Jx on the manifold, Jw)."""
    ndx = 36
    Jx = np.zeros((len(s.row_values(g, k, x, w)[0]), ndx))
    for i in range(ndx):
        e = np.zeros(ndx)
        e[i] = EPS
        Jx[:, i] = (s.row_values(g, k, plant.integrate(x, e), w)[0]
                    - s.row_values(g, k, plant.integrate(x, -e), w)[0]) / (2 * EPS)
    Jw = None
    if w is not None:
        Jw = np.zeros((Jx.shape[0], 36))
        for j in range(36):
            wp, wm = w.copy(), w.copy()
            wp[j] += EPS
            wm[j] -= EPS
            Jw[:, j] = (s.row_values(g, k, x, wp)[0] - s.row_values(g, k, x, wm)[0]) / (2 * EPS)
    return Jx, Jw


def rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, np.max(np.abs(b)))


@pytest.mark.parametrize("seed", [0, 1])
def test_row_jacobians_match_finite_differences_on_the_manifold(seed):
    s, _ = sqp_pair(seed)
    plant = FloatingPlant(GO2_URDF, FEET)
    rng = np.random.default_rng(100 + seed)
    x, w = random_x(rng), random_w(rng)
    for g in range(s.n_row_groups):
        for k in (1, N - 2, N - 1):
            wk = None if k == N - 1 else w
            if wk is None and g < 6:
                with pytest.raises(ValueError, match="k: fc rows live on the control knots"):
                    s.row_values(g, k, x, wk)
                continue
            v, Jx, Jw = s.row_values(g, k, x, wk)
            fx, fw = fd_rows(s, g, k, x, wk, plant)
            assert rel(Jx, fx) < 1e-6, (g, k)
            if wk is not None:
                assert rel(Jw, fw) < 1e-6, (g, k)
    # the contact rows are the feet minus the knot's target; the fc rows C fc + d
    v, _, _ = s.row_values(6, 2, x, w)
    np.testing.assert_allclose(v, plant.contact_positions(x[:19]).ravel() - s_targets(seed)[2], atol=1e-12)


def s_targets(seed, n=N):
    """The contact-position targets sqp_pair drew (the same generator sequence)."""
    rng = np.random.default_rng(seed)
    rng.uniform(0.5, 50.0, 36), rng.uniform(5.0, 100.0, 36)
    [random_x(rng) for _ in range(n)]
    rng.uniform(1e-3, 1e-1, 12), rng.uniform(1e-3, 1e-1, 24)
    rng.normal(size=(4, 24)), rng.normal(size=4), rng.normal(size=4), rng.normal(size=4)
    return rng.normal(size=(n, 12)) * 0.1


@pytest.mark.parametrize("seed", [0, 1])
def test_al_terms_match_numpy_and_their_gradients_match_differences(seed):
    s, bare = sqp_pair(seed)
    plant = FloatingPlant(GO2_URDF, FEET)
    rng = np.random.default_rng(200 + seed)
    x0 = stand_state()
    s.set_al(1)
    s.solve(x0, None, 2, 1e-8)          # one multiplier update: nonzero duals
    duals = [s.duals(g) for g in range(s.n_row_groups)]
    assert any(np.any(d != 0) for d in duals)
    rhos = [1.0, 3.0, 2.0, 2.0, 2.0, 2.0, 5.0]
    cones = [False, False, True, True, True, True, False]
    bounds = [(-2.0 * np.ones(4), np.array([3.0, 40.0, np.inf, 30.0]))]
    x, w = random_x(rng), random_w(rng)
    for k in (1, N - 1):
        wk = None if k == N - 1 else w
        c_rows, gx, gw, _, _ = s.knot_cost(k, x, wk)
        c_bare, gx0, gw0, _, _ = bare.knot_cost(k, x, wk)
        want = 0.0
        for g in range(s.n_row_groups):
            if k == N - 1 and g < 6:
                continue                 # fc rows live on control knots only
            v = s.row_values(g, k, x, wk)[0]
            if cones[g]:
                lo = hi = None
            elif g == 0:
                lo, hi = bounds[0]
            elif g == 6:
                lo = hi = np.zeros(12)
            else:
                lo, hi = group1_bounds(seed)
            want += al_row_terms(v, duals[g][k], rhos[g], lo, hi, cones[g])[0]
        assert abs((c_rows - c_bare) - want) <= 1e-9 * max(1.0, abs(want))
        # gradient of the AL part (rows minus bare) against central differences
        for i in range(0, 36, 5):
            e = np.zeros(36)
            e[i] = EPS
            fd = ((s.knot_cost(k, plant.integrate(x, e), wk)[0] - bare.knot_cost(k, plant.integrate(x, e), wk)[0])
                  - (s.knot_cost(k, plant.integrate(x, -e), wk)[0]
                     - bare.knot_cost(k, plant.integrate(x, -e), wk)[0])) / (2 * EPS)
            assert abs((gx - gx0)[i] - fd) <= 1e-5 * max(1.0, abs(fd)), (k, i)
        if wk is not None:
            for j in range(12, 36):
                wp, wm = w.copy(), w.copy()
                wp[j] += EPS
                wm[j] -= EPS
                fd = ((s.knot_cost(k, x, wp)[0] - bare.knot_cost(k, x, wp)[0])
                      - (s.knot_cost(k, x, wm)[0] - bare.knot_cost(k, x, wm)[0])) / (2 * EPS)
                assert abs((gw - gw0)[j] - fd) <= 1e-5 * max(1.0, abs(fd)), (k, j)


def group1_bounds(seed):
    rng = np.random.default_rng(seed)
    rng.uniform(0.5, 50.0, 36), rng.uniform(5.0, 100.0, 36)
    [random_x(rng) for _ in range(N)]
    rng.uniform(1e-3, 1e-1, 12), rng.uniform(1e-3, 1e-1, 24)
    rng.normal(size=(4, 24)), rng.normal(size=4)
    return -np.abs(rng.normal(size=4)), np.abs(rng.normal(size=4))


def test_al_cone_hessian_matches_differences_of_its_gradient():
    """The cone term's GN Hessian rho (I - D Pi_K) is exact for the linear fc rows (off the kinks)."""
    s, bare = sqp_pair(3)
    s.set_al(1)
    s.solve(stand_state(), None, 2, 1e-8)
    rng = np.random.default_rng(7)
    x, w = random_x(rng), random_w(rng)
    _, _, gw, _, H = s.knot_cost(1, x, w)
    _, _, gw0, _, H0 = bare.knot_cost(1, x, w)
    for j in range(12, 36):
        wp, wm = w.copy(), w.copy()
        wp[j] += EPS
        wm[j] -= EPS
        fd = ((s.knot_cost(1, x, wp)[2] - bare.knot_cost(1, x, wp)[2])
              - (s.knot_cost(1, x, wm)[2] - bare.knot_cost(1, x, wm)[2])) / (2 * EPS)
        assert rel((H - H0)[:, j], fd) < 1e-5, j


@pytest.mark.parametrize("reg", [0.0, 1e-3])
def test_riccati_step_with_rows_matches_dense_kkt(reg):
    s, _ = sqp_pair(4)
    s.set_al(1)
    x0 = stand_state()
    s.solve(x0, None, 1, 1e-8)
    W = s.cold_start(x0)
    lq = s.lq(x0, W)
    dX, dW, _, _, _ = s.riccati_step(x0, W, reg)
    rX, rW, _ = dense_kkt_step(lq["A"], lq["B"], lq["Hxx"], lq["Hww"], lq["gx"], lq["gw"], reg)
    scale = max(np.max(np.abs(rX)), np.max(np.abs(rW)))
    assert np.max(np.abs(dX - rX)) / scale < 1e-9 and np.max(np.abs(dW - rW)) / scale < 1e-9


def _viol(res, plant, feet, n):
    fc = res.fc_traj().reshape(n - 1, 4, 6)
    cone = max(0.0, np.max(np.linalg.norm(fc[:, :, 3:5], axis=2) - MU * fc[:, :, 5]))
    pos = max(np.max(np.abs(plant.contact_positions(res.X[k, :19]) - feet)) for k in range(1, n))
    return cone, pos


def test_hard_rows_meet_the_cone_and_the_feet_where_the_penalties_did_not():
    """A lateral base velocity of 0.5 m/s and mu = 0.3: the standing task's friction and foot
    PENALTIES (FloatingMPC.set_standing) leave the cone violated by 0.67 N and a foot 3.6 mm off
    (measured); the same costs with the cone and contact-position rows under the AL meet both
    to 1e-5 (measured 9e-7 N, 4.6e-7 m; 12 multiplier updates, 119 GN iterations)."""
    n = 15
    mpc = FloatingMPC("go2", N=n, dt=0.02, max_iters=30)
    plant = mpc.plant
    x_ref = stand_state()
    feet = plant.contact_positions(x_ref[:19])
    x0 = x_ref.copy()
    x0[2] -= 0.03
    x0[20] = 0.5
    mpc.set_standing(x_ref, feet, mu=MU)
    pen = _viol(mpc.solve(x0), plant, feet, n)
    assert pen[0] > 100 * ROW_TOL and pen[1] > 100 * ROW_TOL
    s = mpc.sqp
    s.set_friction(MU, 0.0, 0.0)                       # the penalties off
    s.set_contact_pos_cost(0.0, feet)
    groups = [s.add_fc_rows(cone_C(c), cone=True) for c in range(4)]
    groups.append(s.add_contact_pos_rows(feet.ravel()))
    s.set_al(30, 1e-6)
    d = s.solve(x0, None, 30, 1e-8)
    res = FloatingSolveResult(d, 12)
    hard = _viol(res, plant, feet, n)
    assert hard[0] < ROW_TOL and hard[1] < ROW_TOL, hard
    assert max(d["violation"]) < ROW_TOL and d["al_iters"] >= 2
    assert np.all(res.fc_traj().reshape(n - 1, 4, 6)[:, :, 5] > 0)   # the cone implies f_z >= 0


# ---------------------------------------------------------------- the public surface
def fc_solver(n=10, **kw):
    return gato.BSQP(GO2_URDF, 1, n, 0.02, plant_type="go2", variant="fc", **kw)


def standing(s):
    x_ref = stand_state()
    w = np.r_[[1e3, 1e3, 3e3], [3e3] * 3, [10.0] * 12, [30.0] * 6, [0.1] * 12]
    s.set_state_weights(w, 5 * w)
    s.set_x_ref(x_ref)
    s.set_u_cost(1e-3)
    ref = np.zeros((4, 6))
    ref[:, 5] = s.plant.total_mass * 9.81 / 4
    s.set_fc_ref(ref)
    return x_ref


def test_gato_bsqp_fc_on_go2_exposes_the_reference_surface():
    s = fc_solver()
    assert isinstance(s, FloatingBSQP) and not isinstance(s, gato.BSQP)
    assert (s.nq, s.nv, s.nx, s.n_actuated, s.n_fc, s.nu) == (19, 18, 37, 12, 24, 36)
    assert s.contact_frames == FEET and s.variant == "fc" and s.floating_base
    assert s.fc_slots("FR_foot_joint") == list(range(6, 12))
    assert s.fc_slots(2, "n") == [12, 13, 14] and s.fc_slots("RR_foot_joint", "f") == [21, 22, 23]
    assert s.n_contact_rows == 12
    x_ref = standing(s)
    feet = s.contact_positions(x_ref[:19])
    assert feet.shape == (4, 3)
    np.testing.assert_allclose(feet, FloatingPlant(GO2_URDF, FEET).contact_positions(x_ref[:19]))
    box = s.add_fc_box(0.0, 0.0, slots=[i for c in range(4) for i in s.fc_slots(c, "n")])   # point feet
    cones = [s.add_fc_cone(f, MU) for f in FEET]
    pos = s.add_contact_pos_rows(feet)
    assert (box, cones, pos) == (0, [1, 2, 3, 4], 5)
    s.set_fc_cost(1e-2)
    x0 = x_ref.copy()
    x0[2] -= 0.03
    x0[20] = 0.5
    res = s.solve(x0)
    assert res.u0().shape == (12,) and res.fc_at(0).shape == (24,) and res.fc_traj().shape == (9, 24)
    np.testing.assert_array_equal(res.u0(), res.xu[37:49])          # the actuated part of w_0
    np.testing.assert_array_equal(res.fc_at(3), res.fc_traj()[3])
    assert res.xu.shape == (10 * 37 + 9 * 36,)
    assert np.max(res.row_max_violation) < ROW_TOL, res.row_max_violation
    assert np.max(np.abs(res.fc_traj().reshape(9, 4, 6)[:, :, :3])) < ROW_TOL   # moments pinned
    # per-knot targets: lift the FL foot 2 cm at knots 5..9
    tg = np.tile(feet.ravel(), (10, 1))
    tg[5:, 2] += 0.02
    s.set_row_group_targets(pos, tg)
    res2 = s.solve(x0, xu_warm=res.xu)
    p = s.contact_positions(res2.X[7, :19])
    assert abs(p[0, 2] - tg[7, 2]) < ROW_TOL and np.max(res2.row_max_violation) < ROW_TOL
    # a step: StepResult with the actuated u and knot 0's contact wrenches
    ctl = FloatingController(s)
    st = ctl.step(x0)
    assert isinstance(st, gato.StepResult) and st.u.shape == (12,) and st.fc.shape == (24,)
    np.testing.assert_array_equal(st.fc, st.solve.fc_at(0))
    np.testing.assert_array_equal(st.u, st.solve.u0())
    assert st.row_viol.shape == (6,) and st.limits == "al" and not st.diverged
    st2 = ctl.step(x0)                                                # warm-started tick
    assert np.isfinite(st2.u).all() and np.max(st2.row_viol) < ROW_TOL
    assert s.get_row_duals(pos).shape == (10, 12)
    s.reset_dual()
    assert not np.any(s.get_row_duals(pos))


def test_fc_cone_facets_and_telemetry():
    s = fc_solver(8)
    x_ref = standing(s)
    x0 = x_ref.copy()
    x0[20] = 0.5
    g = s.add_fc_cone(0, MU, form="facets", facets=8)
    t = s.add_fc_cone(1, MU, mech="telemetry")
    res = s.solve(x0)
    assert res.row_max_violation[g] < ROW_TOL
    fc = res.fc_traj().reshape(7, 4, 6)
    # telemetry reports the true violation of the unconstrained frame
    want = max(0.0, np.max(np.linalg.norm(fc[:, 1, 3:5], axis=1) - MU * fc[:, 1, 5]))
    assert abs(res.row_max_violation[t] - want) < 1e-9


def test_build_and_register_a_floating_robot(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    made = gato.build(GO2_URDF, name="go2x", N=[8], ee_frame="imu_joint", floating_base=True,
                      contact_frames=FEET, contact_forces=True)
    assert made == [("go2x", 8)]
    info = gato.robot_info("go2x")
    assert info["floating_base"] and info["contact_frames"] == FEET and (info["nq"], info["nv"]) == (19, 18)
    s = gato.BSQP(GO2_URDF, 1, 8, 0.02, plant_type="go2x", variant="fc")
    assert isinstance(s, FloatingBSQP) and s.plant_type == "go2x"
    entry = gato.register_robot("go2y", GO2_URDF, N=[8], floating_base=True, contact_frames=FEET[:2], variant="fc")
    assert entry["floating_base"] and entry["contact_frames"] == FEET[:2]
    assert gato.BSQP(GO2_URDF, 1, 8, 0.02, plant_type="go2y").n_fc == 12


def test_bad_input_refused_naming_the_argument(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    s = fc_solver(6)
    cases = [
        (lambda: s.fc_slots("nope"), "frame"), (lambda: s.fc_slots(4), "frame"), (lambda: s.fc_slots(0, "m"), "part"),
        (lambda: s.add_fc_box(0, 0, slots=[24]), "slots"), (lambda: s.add_fc_box(0, 0, slots=[1, 1]), "slots"),
        (lambda: s.add_fc_box(1.0, 0.0), "lo > hi"), (lambda: s.add_fc_box(np.nan, 0.0), "lo"),
        (lambda: s.add_fc_box(0, np.zeros(3)), "hi needs 24"), (lambda: s.add_fc_box(0, 0, mech="admm"), "mech"),
        (lambda: s.add_fc_box(0, 0, rho=0.0), "rho"), (lambda: s.add_fc_box(0, 0, knot_lo=5), "knot_lo / knot_hi"),
        (lambda: s.add_fc_box(np.inf, np.inf), "no feasible value"),
        (lambda: s.add_fc_cone("nope", 0.5), "frame"), (lambda: s.add_fc_cone(0, 0.0), "mu"),
        (lambda: s.add_fc_cone(0, 0.5, form="ellipse"), "form"), (lambda: s.add_fc_cone(0, 0.5, facets=2), "facets"),
        (lambda: s.add_fc_cone(0, 0.5, facet_scale="big"), "facet_scale"),
        (lambda: s.add_contact_pos_rows(np.zeros(5)), "targets"),
        (lambda: s.add_contact_pos_rows(np.full(12, np.nan)), "targets"),
        (lambda: s.add_contact_pos_rows(sigma=0.1), "sigma"),
        (lambda: s.add_contact_pos_rows(admm_iters=2), "admm_iters"),
        (lambda: s.add_contact_pos_rows(delta=0.1), "delta"),
        (lambda: s.add_contact_pos_rows(knot_hi=7), "knot_lo / knot_hi"),
        (lambda: s.set_row_group_targets(0, np.zeros(12)), "g"),
        (lambda: s.set_fc_cost(-1.0), "weight"), (lambda: s.set_fc_cost(0.0), "weight: 0 only together with fc box"),
        (lambda: s.set_fc_cost(np.ones(5)), "weight"), (lambda: s.set_fc_ref(np.ones(5)), "fc_ref"),
        (lambda: s.solve(np.zeros(37)), "x0"), (lambda: s.solve(stand_state()[:30]), "xcur_B"),
        (lambda: s.solve(stand_state(), xu_warm=np.zeros(4)), "xu_warm"),
        (lambda: s.solve(stand_state()).u0(1), "b"), (lambda: s.set_row_group_rho(9, 1.0), "g"),
        (lambda: gato.BSQP(GO2_URDF, 2, 6, 0.02, plant_type="go2"), "batch_size"),
        (lambda: gato.BSQP(GO2_URDF, 1, 6, 0.02, plant_type="go2", variant="eh"), "variant"),
        (lambda: gato.BSQP(GO2_URDF, 1, 6, 0.02, plant_type="go2", contact_frames=["nope"]), "contact_frames"),
        (lambda: gato.build(GO2_URDF, floating_base=True, contact_frames=FEET), "floating_base"),
        (lambda: gato.build(GO2_URDF, floating_base=True, contact_forces=True), "floating_base"),
        (lambda: gato.build(GO2_URDF, floating_base=True, contact_forces=True, contact_frames=["nope"]),
         "contact_frames"),
        (lambda: gato.register_robot("g", GO2_URDF, floating_base=True, contact_frames=FEET), "variant"),
        (lambda: gato.register_robot("g", GO2_URDF, floating_base=True, variant="fc", contact_frames=FEET,
                                     ee_frame="nope"), "ee_frame"),
    ]
    cases.append((lambda: FloatingController(gato.BSQP(gato.robot_urdf("iiwa14"), 1, 6, 0.02)), "solver"))
    for i, (call, msg) in enumerate(cases):
        with pytest.raises(ValueError, match=msg):
            call()
    assert not (tmp_path / "cache" / "manifest.json").exists()        # nothing registered on bad input
    s.add_fc_box(-1.0, 1.0)
    s.set_fc_cost(0.0)                                                 # 0 is fine with an fc box
