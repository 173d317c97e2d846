"""The floating-base contact-force SQP of the C++ core (gato._core.FloatingSQP, issue 34), on go2.

Checked: every cost term's gradient against central finite differences on the manifold (the
state perturbed with integrate, a control entry by +-eps), the Gauss-Newton Hessian against the
residual Jacobian's J^T J (finite differences of the residuals on the manifold), the friction
term's Hessian against differences of its gradient; the LQ blocks (B's fc columns are the
plant's B_f in the contract's [n; f] order); the Riccati step against a dense NumPy KKT solve of
the same blocks (test/reference/numpy_floating_kkt.py) to 1e-9; the SQP's descent and its
standing solution in the model; the FloatingMPC wrapper's fc layout; bad input refused by name.
"""
from pathlib import Path

import numpy as np
import pytest

from gato.floating import FloatingMPC, FloatingPlant, FloatingSQP
from reference.numpy_floating_kkt import dense_kkt_step

GO2_URDF = str(Path(__file__).resolve().parents[1] / "src/gato_description/robots/go2_description/go2.urdf")
FEET = ["FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint"]
Q_STAND = np.array([0.0, 0.9, -1.8] * 4)
N, DT = 5, 0.02
FD_EPS = 1e-6
FD_REL_TOL = 1e-6
KKT_TOL = 1e-9
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def plant():
    return FloatingPlant(GO2_URDF, FEET)


def stand_state(height=0.30):
    q = np.concatenate([[0.0, 0.0, height, 0.0, 0.0, 0.0, 1.0], Q_STAND])
    return np.concatenate([q, np.zeros(18)])


def random_x(rng):
    x = stand_state()
    x[:3] += 0.05 * rng.normal(size=3)
    quat = np.array([0.0, 0.0, 0.0, 1.0]) + 0.1 * rng.normal(size=4)
    x[3:7] = quat / np.linalg.norm(quat)
    x[7:19] += 0.2 * rng.normal(size=12)
    x[19:] = 0.5 * rng.normal(size=18)
    return x


def make_sqp(rng, n=N, friction=True):
    s = FloatingSQP(GO2_URDF, FEET, n, DT)
    s.set_state_weights(rng.uniform(0.5, 50.0, 36), rng.uniform(5.0, 100.0, 36))
    xr = np.stack([random_x(rng) for _ in range(n)])
    s.set_x_ref(xr)
    s.set_u_cost(rng.uniform(1e-3, 1e-1, 12))
    s.set_u_ref(rng.normal(size=12))
    s.set_fc_cost(rng.uniform(1e-3, 1e-1, 24))
    s.set_fc_ref(rng.normal(size=24) * 5 + np.tile([0, 0, 0, 0, 0, 39.0], 4))
    s.set_contact_pos_cost(300.0, rng.normal(size=(n, 12)) * 0.1)
    if friction:
        s.set_friction(0.6, 5.0, 50.0)
    return s


def random_w(rng):
    w = np.zeros(36)
    w[:12] = 3.0 * rng.normal(size=12)
    fc = 10.0 * rng.normal(size=(4, 6))
    fc[:, 5] += 30.0
    w[12:] = fc.ravel()
    return w


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.max(np.abs(a - b)) / max(1e-12, np.max(np.abs(b)))


def rel1(a, b):
    """max|a - b| / max(1, max|b|)."""
    return np.max(np.abs(np.asarray(a) - b)) / max(1.0, np.max(np.abs(b)))


def residuals(s, plant, k, x, w, p):
    """The knot's residual vector r with cost = 1/2 ||r||^2 (state, contact-position, u, fc terms;
    the friction term off): built from the plant's difference / contact_positions in NumPy."""
    r = [np.sqrt(p["wx"]) * plant.difference(p["xr"][k], x),
         np.sqrt(p["wp"]) * (plant.contact_positions(x[:19]).ravel() - p["pt"][k])]
    if w is not None:
        r += [np.sqrt(p["ru"]) * (w[:12] - p["ur"]), np.sqrt(p["wf"]) * (w[12:] - p["fr"])]
    return np.concatenate(r)


# ------------------------------------------------------------------ cost derivatives
@pytest.mark.parametrize("seed", SEEDS)
def test_knot_cost_gradient_matches_manifold_fd(plant, seed):
    rng = np.random.default_rng(seed)
    s = make_sqp(rng)
    for k in (0, 2, N - 1):
        x, w = random_x(rng), random_w(rng)
        w[12 + 5] = 2.0           # one foot below fz_min and outside the pyramid: the friction rows active
        w[12 + 3] = 10.0
        last = k == N - 1
        c, gx, gw, Hxx, Hww = s.knot_cost(k, x, None if last else w)
        fdx = np.array([(s.knot_cost(k, plant.integrate(x, e), w)[0] - s.knot_cost(k, plant.integrate(x, -e), w)[0])
                        / (2 * FD_EPS) for e in FD_EPS * np.eye(36)])
        assert rel(gx, fdx) < FD_REL_TOL
        if not last:
            fdw = np.array([(s.knot_cost(k, x, w + e)[0] - s.knot_cost(k, x, w - e)[0]) / (2 * FD_EPS)
                            for e in FD_EPS * np.eye(36)])
            assert rel(gw, fdw) < FD_REL_TOL
            # the friction term is piecewise quadratic: its Hessian is exact off the kinks
            fdH = np.array([(s.knot_cost(k, x, w + e)[2] - s.knot_cost(k, x, w - e)[2]) / (2 * FD_EPS)
                            for e in FD_EPS * np.eye(36)])
            assert rel(Hww, fdH) < FD_REL_TOL
        else:
            assert gw is None and Hww is None


@pytest.mark.parametrize("seed", SEEDS)
def test_gauss_newton_hessian_is_residual_jacobian_product(plant, seed):
    rng = np.random.default_rng(10 + seed)
    s = FloatingSQP(GO2_URDF, FEET, N, DT)
    p = dict(wx=rng.uniform(0.5, 50.0, 36), xr=np.stack([random_x(rng) for _ in range(N)]),
             wp=300.0, pt=rng.normal(size=(N, 12)) * 0.1, ru=rng.uniform(1e-3, 1e-1, 12), ur=rng.normal(size=12),
             wf=rng.uniform(1e-3, 1e-1, 24), fr=rng.normal(size=24))
    s.set_state_weights(p["wx"], p["wx"])
    s.set_x_ref(p["xr"])
    s.set_contact_pos_cost(p["wp"], p["pt"])
    s.set_u_cost(p["ru"])
    s.set_u_ref(p["ur"])
    s.set_fc_cost(p["wf"])
    s.set_fc_ref(p["fr"])
    k = 1
    x, w = random_x(rng), random_w(rng)
    c, gx, gw, Hxx, Hww = s.knot_cost(k, x, w)
    r = residuals(s, plant, k, x, w, p)
    assert abs(c - 0.5 * r @ r) < 1e-10 * max(1.0, c)
    Jx = np.array([(residuals(s, plant, k, plant.integrate(x, e), w, p)
                    - residuals(s, plant, k, plant.integrate(x, -e), w, p)) / (2 * FD_EPS)
                   for e in FD_EPS * np.eye(36)]).T
    Jw = np.array([(residuals(s, plant, k, x, w + e, p) - residuals(s, plant, k, x, w - e, p)) / (2 * FD_EPS)
                   for e in FD_EPS * np.eye(36)]).T
    assert rel(Hxx, Jx.T @ Jx) < FD_REL_TOL
    assert rel(Hww, Jw.T @ Jw) < FD_REL_TOL
    assert rel(gx, Jx.T @ r) < FD_REL_TOL


# ------------------------------------------------------------------ LQ blocks and Riccati
def test_lq_blocks_are_the_plants_linearization_in_fc_layout(plant):
    rng = np.random.default_rng(20)
    s = make_sqp(rng)
    x0 = random_x(rng)
    W = np.stack([random_w(rng) for _ in range(N - 1)])
    lq = s.lq(x0, W)
    cost, X = s.rollout(x0, W)
    np.testing.assert_allclose(lq["X"], X, rtol=0, atol=1e-14)
    for k in range(N - 1):
        fc = W[k, 12:].reshape(4, 6)
        f_plant = np.hstack([fc[:, 3:], fc[:, :3]])       # [n; f] -> (f; n)
        xn, A, Bu, Bf = plant.linearize(X[k], W[k, :12], f_plant, DT)
        # the rollout's step and linearize's step agree to rounding (two code paths of the plant)
        assert rel1(X[k + 1], xn) < 1e-12
        assert rel1(lq["A"][k], A) < 1e-12
        assert rel1(lq["B"][k][:, :12], Bu) < 1e-12
        Bf4 = Bf.reshape(36, 4, 6)
        assert rel1(lq["B"][k][:, 12:].reshape(36, 4, 6), np.concatenate([Bf4[:, :, 3:], Bf4[:, :, :3]], 2)) < 1e-12
    total = sum(s.knot_cost(k, X[k], W[k])[0] for k in range(N - 1)) + s.knot_cost(N - 1, X[-1])[0]
    assert abs(cost - total) < 1e-12 * total


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("reg", [0.0, 1e-3])
def test_riccati_step_matches_dense_kkt(seed, reg):
    rng = np.random.default_rng(30 + seed)
    s = make_sqp(rng)
    x0 = random_x(rng)
    W = np.stack([random_w(rng) for _ in range(N - 1)])
    lq = s.lq(x0, W)
    dX, dW, K, dV1, dV2 = s.riccati_step(x0, W, reg)
    rX, rW, res = dense_kkt_step(lq["A"], lq["B"], lq["Hxx"], lq["Hww"], lq["gx"], lq["gw"], reg)
    assert res < 1e-8
    scale = max(np.max(np.abs(rX)), np.max(np.abs(rW)))
    assert np.max(np.abs(dX - rX)) / scale < KKT_TOL
    assert np.max(np.abs(dW - rW)) / scale < KKT_TOL
    np.testing.assert_array_equal(dX[0], 0.0)
    # the predicted decrease is the LQ model's value at the step (reg = 0)
    if reg == 0.0:
        model = sum(0.5 * dX[k] @ lq["Hxx"][k] @ dX[k] + lq["gx"][k] @ dX[k] for k in range(N)) + \
            sum(0.5 * dW[k] @ lq["Hww"][k] @ dW[k] + lq["gw"][k] @ dW[k] for k in range(N - 1))
        assert abs(model - (dV1 + dV2)) < 1e-9 * max(1.0, abs(model))


# ------------------------------------------------------------------ the SQP
def test_hold_controls_give_zero_acceleration(plant):
    rng = np.random.default_rng(40)
    s = make_sqp(rng)
    for _ in range(3):
        x = random_x(rng)
        w = s.hold_controls(x)
        fc = w[12:].reshape(4, 6)
        a = plant.aba(x[:19], x[19:], w[:12], np.hstack([fc[:, 3:], fc[:, :3]]))
        assert np.max(np.abs(a)) < 1e-9
        cost, X = s.rollout(x, np.tile(w, (N - 1, 1)))
        assert np.max(np.abs(X[1, 19:] - x[19:])) < 1e-9
        # damping 0.5 halves the velocity in one step
        cost, X = s.rollout(x, np.tile(s.hold_controls(x, 0.5), (N - 1, 1)))
        assert np.max(np.abs(X[1, 19:] - 0.5 * x[19:])) < 1e-9
        # the cold start: that damped hold along its own rollout (velocities halve knot by knot)
        W = s.cold_start(x)
        cost, X = s.rollout(x, W)
        for k in range(N):
            assert np.max(np.abs(X[k, 19:] - 0.5 ** k * x[19:])) < 1e-9


def test_sqp_descends_and_holds_the_stance_in_the_model(plant):
    n = 15
    mpc = FloatingMPC("go2", N=n, dt=0.02, max_iters=30)
    x_ref = stand_state(0.30)
    feet = plant.contact_positions(x_ref[:19])
    feet[:, 2] = feet[:, 2]
    mpc.set_standing(x_ref, feet)
    x0 = x_ref.copy()
    x0[2] -= 0.04
    x0[7:19] += np.array([0.0, 0.1, -0.2] * 4)
    res = mpc.solve(x0)
    assert res.converged and res.iters <= 10          # measured: 4 Gauss-Newton iterations
    assert res.cost < 0.5 * res.cost0                 # measured 152.3 -> 41.1 (the rise's tracking cost stays)
    assert res.X.shape == (n, 37) and res.W.shape == (n - 1, 36) and res.K.shape == (n - 1, 36, 36)
    # the plan rises towards the reference with the feet (nearly) in place and loaded
    assert abs(res.X[-1, 2] - 0.30) < abs(x0[2] - 0.30)
    for k in range(n):
        assert np.max(np.abs(plant.contact_positions(res.X[k, :19]) - feet)) < 0.01
    fz = res.fc_traj().reshape(n - 1, 4, 6)[:, :, 5]
    assert np.all(fz > 0)
    assert abs(fz.sum(1).mean() - plant.total_mass * 9.81) < 0.2 * plant.total_mass * 9.81
    # result accessors
    np.testing.assert_array_equal(res.u0(), res.W[0, :12])
    np.testing.assert_array_equal(res.fc_at(2), res.W[2, 12:])
    assert res.xu.shape == (n * 37 + (n - 1) * 36,)
    np.testing.assert_array_equal(res.xu[37:37 + 36], res.W[0])
    # a warm re-solve from the solution does not move it (converged or a tiny step)
    again = mpc.solve(x0, res.W, max_iters=1)
    assert again.cost <= res.cost + 1e-9


def test_warm_start_as_a_policy(plant):
    """A warm X / K makes the first rollout the closed loop W_k + K_k (x_k (-) X_k): from the plan's
    own x0 it is the plan itself (cost0 = the plan's cost); from a perturbed x0 it stays bounded."""
    mpc = FloatingMPC("go2", N=12, dt=0.02, max_iters=20)
    x_ref = stand_state(0.30)
    mpc.set_standing(x_ref, plant.contact_positions(x_ref[:19]))
    x0 = x_ref.copy()
    x0[2] -= 0.03
    res = mpc.solve(x0)
    same = mpc.solve(x0, res.W, 1, res.X, res.K)
    assert abs(same.cost0 - res.cost) < 1e-9 * res.cost
    x1 = x0.copy()
    x1[19:] += np.random.default_rng(50).normal(size=18) * 0.3
    pol = mpc.solve(x1, res.W, 1, res.X, res.K)
    open_loop = mpc.sqp.rollout(x1, res.W)[0]
    assert pol.cost0 < open_loop
    with pytest.raises(ValueError, match="^X"):
        mpc.sqp.solve(x0, res.W, 1, 1e-8, res.X, None)
    with pytest.raises(ValueError, match="^K"):
        mpc.sqp.solve(x0, res.W, 1, 1e-8, res.X, res.K[:, :3])
    with pytest.raises(ValueError, match="^W"):
        mpc.sqp.solve(x0, None, 1, 1e-8, res.X, res.K)
    # the MPC tick: the first cold-starts, the next ones warm-start from the shifted plan
    r1 = mpc.step(x0)
    r2 = mpc.step(r1.X[1])
    assert r2.cost0 <= r1.cost + 1e-9 * r1.cost0 + 1.0   # the shifted plan is about as good as the last one


def test_fc_slots_layout():
    mpc = FloatingMPC("go2", N=4, dt=0.02)
    assert mpc.fc_slots("FL_foot_joint") == list(range(0, 6))
    assert mpc.fc_slots(2, "n") == [12, 13, 14]
    assert mpc.fc_slots("RR_foot_joint", "f") == [21, 22, 23]
    with pytest.raises(ValueError, match="frame"):
        mpc.fc_slots("FL_foot")
    with pytest.raises(ValueError, match="frame"):
        mpc.fc_slots(4)
    with pytest.raises(ValueError, match="part"):
        mpc.fc_slots(0, "x")


# ------------------------------------------------------------------ bad input
def test_bad_input_refused_by_name():
    with pytest.raises(ValueError, match="^N"):
        FloatingSQP(GO2_URDF, FEET, 1, DT)
    with pytest.raises(ValueError, match="^dt"):
        FloatingSQP(GO2_URDF, FEET, 4, 0.0)
    with pytest.raises(ValueError, match="^integrator"):
        FloatingSQP(GO2_URDF, FEET, 4, DT, "rk4")
    with pytest.raises(ValueError, match="contact_frames"):
        FloatingSQP(GO2_URDF, ["nope"], 4, DT)
    s = FloatingSQP(GO2_URDF, FEET, 4, DT)
    x = stand_state()
    W = np.zeros((3, 36))
    bad_q = x.copy()
    bad_q[6] = 2.0
    for call, name in [(lambda: s.solve(bad_q), "x0"), (lambda: s.solve(x, np.zeros((4, 36))), "W"),
                       (lambda: s.solve(x, W + np.nan), "W"), (lambda: s.solve(x, W, 0), "max_iters"),
                       (lambda: s.set_state_weights(-np.ones(36)), "w_running"),
                       (lambda: s.set_state_weights(np.ones(35)), "w_running"),
                       (lambda: s.set_x_ref(np.zeros(37)), "x_ref"),
                       (lambda: s.set_x_ref(np.zeros((2, 37))), "x_ref"),
                       (lambda: s.set_u_cost(-1.0), "u_cost"), (lambda: s.set_u_ref(np.ones(3)), "u_ref"),
                       (lambda: s.set_fc_cost(np.ones(23)), "fc_cost"), (lambda: s.set_fc_ref(np.ones(5)), "fc_ref"),
                       (lambda: s.set_fc_ref("text"), "fc_ref"),
                       (lambda: s.set_contact_pos_cost(-1.0, np.zeros((4, 3))), "contact_pos_weight"),
                       (lambda: s.set_contact_pos_cost(1.0, np.zeros((4, 2))), "contact_targets"),
                       (lambda: s.set_contact_pos_cost(1.0, np.full((4, 3), np.inf)), "contact_targets"),
                       (lambda: s.set_friction(0.0, 0.0, 1.0), "mu"), (lambda: s.set_friction(0.5, -1.0, 1.0), "fz_min"),
                       (lambda: s.set_friction(0.5, 0.0, -1.0), "friction_weight"),
                       (lambda: s.knot_cost(4, x, W[0]), "k"), (lambda: s.knot_cost(0, x, np.ones(3)), "w"),
                       (lambda: s.riccati_step(x, W, -1.0), "reg"),
                       (lambda: s.hold_controls(x, 1.5), "damping"), (lambda: s.cold_start(bad_q), "x0")]:
        with pytest.raises(ValueError, match=f"^{name}"):
            call()
    with pytest.raises(ValueError, match="robot"):
        FloatingMPC("indy7")
    with pytest.raises(ValueError, match="max_iters"):
        FloatingMPC("go2", max_iters=0)
