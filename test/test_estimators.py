"""gato.estimators on synthetic data: the least-squares identifier recovers a known constant
wrench from simulated motion (PinocchioWorld, RK4, 1 ms), noise-free and with documented sensor
noise; the samplers converge on a known wrench when fed the feedback of an exact scorer; seeds
reproduce bit for bit; bad input raises ValueError naming the argument; a diverging estimate is
clamped to max_wrench and counted, never NaN.

Sensor noise of the noisy identification test (per 1 ms sample, Gaussian, seeded): joint
positions sigma 1e-4 rad, joint velocities 1e-3 rad/s, applied torques 0.1 N*m.
"""
import math

import numpy as np
import pytest

import gato
from gato import tasks
from gato.estimators import (CEMForceEstimator, ForceEstimator, IdentifiedWrenchSampler, OneStepWrenchIdentifier,
                             PendulumSwingEstimator, trilaterate)
from gato.worlds import PinocchioWorld

IIWA = gato.robot_urdf("iiwa14")
Q_READY = tasks.Q_READY["iiwa14"]
W_TRUE = np.array([30.0, -20.0, 40.0, 1.0, -0.5, 1.0])  # N, N*m at the EE origin, world axes


@pytest.fixture(scope="module")
def model():
    import pinocchio as pin

    return pin.buildModelFromUrdf(str(IIWA))


def simulate(model, wrench, n=600, noise=None, seed=0, pendulum=None):
    """A computed-torque tracked joint sine (0.3 rad, 0.5 Hz) in the PinocchioWorld with the
    constant world wrench; yields the measured (q, dq, dq_next, tau, q_next) per 1 ms step."""
    import pinocchio as pin

    world = PinocchioWorld(IIWA, constant_f_ext=wrench, pendulum=pendulum)
    data = model.createData()
    rng = np.random.default_rng(seed)
    q, dq = Q_READY.copy(), np.zeros(7)

    def meas(q, dq):
        if noise is None:
            return q, dq
        return q + rng.normal(0, noise[0], 7), dq + rng.normal(0, noise[1], 7)

    qm, dqm = meas(q, dq)
    for k in range(n):
        qr = Q_READY + 0.3 * np.sin(2 * np.pi * 0.5 * k * 1e-3 + np.arange(7))
        tau = pin.rnea(model, data, q, dq, 400.0 * (qr - q) - 40.0 * dq)
        qn, dqn = world.step(q, dq, tau, 1e-3)
        qnm, dqnm = meas(qn, dqn)
        tau_m = tau if noise is None else tau + rng.normal(0, noise[2], 7)
        yield qm, dqm, dqnm, tau_m, qnm
        q, dq, qm, dqm = qn, dqn, qnm, dqnm


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# ------------------------------------------------------------------ OneStepWrenchIdentifier
def test_identifier_recovers_a_constant_wrench_noise_free(model):
    idf = OneStepWrenchIdentifier(model, alpha=1.0)
    errs = [rel(idf.identify(q, dq, dqn, tau, 1e-3, q_next=qn), W_TRUE)
            for q, dq, dqn, tau, qn in simulate(model, W_TRUE, n=400)]
    assert max(errs) <= 0.01, f"worst per-sample fit {max(errs):.4f}"
    assert np.median(errs) <= 0.002
    st = idf.get_stats()
    assert st["n_updates"] == 400 and st["n_clamped"] == 0 and st["mode"] == "wrench"
    assert rel(idf.generate_batch()[0], W_TRUE) <= 0.01 and idf.generate_batch().shape == (1, 6)
    assert st["unexplained_norm"] < 1e-3 * st["tau_resid_norm"]  # an EE wrench explains it all


def test_identifier_with_sensor_noise_within_5_percent(model):
    idf = OneStepWrenchIdentifier(model, alpha=0.1)
    est = []
    for q, dq, dqn, tau, qn in simulate(model, W_TRUE, n=1000, noise=(1e-4, 1e-3, 0.1), seed=3):
        idf.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
        est.append(idf.generate_batch()[0])
    errs = [rel(e, W_TRUE) for e in est[500:]]  # after the EMA settled
    assert np.median(errs) <= 0.05 and max(errs) <= 0.15
    assert np.all(np.isfinite(est))


def test_identifier_midpoint_beats_the_start_point(model):
    """Without q_next the dynamics are evaluated at the interval start (first order): worse."""
    mid, start = OneStepWrenchIdentifier(model, alpha=1.0), OneStepWrenchIdentifier(model, alpha=1.0)
    e_mid, e_start = [], []
    for q, dq, dqn, tau, qn in simulate(model, W_TRUE, n=300):
        e_mid.append(rel(mid.identify(q, dq, dqn, tau, 1e-3, q_next=qn), W_TRUE))
        e_start.append(rel(start.identify(q, dq, dqn, tau, 1e-3), W_TRUE))
    assert np.median(e_mid) < np.median(e_start)


def test_identifier_weight_mode_reports_the_gravity_aligned_weight(model):
    """mode='weight': [weight * g_hat; 0] with the weight low-passed on weight_tau; a 5 kg point
    weight (49 N down) is recovered to 1 %, and an upward push reads as weight 0 (floored)."""
    down = np.array([0.0, 0.0, -49.05, 0.0, 0.0, 0.0])
    idf = OneStepWrenchIdentifier(model, mode="weight", weight_tau=0.05)
    for q, dq, dqn, tau, qn in simulate(model, down, n=500):
        idf.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
    w = idf.generate_batch()[0]
    assert w[3:].tolist() == [0, 0, 0] and w[0] == 0 and w[1] == 0
    assert idf.get_stats()["weight"] == pytest.approx(49.05, rel=0.01) and w[2] == pytest.approx(-49.05, rel=0.01)
    up = OneStepWrenchIdentifier(model, mode="weight")
    for q, dq, dqn, tau, qn in simulate(model, -down, n=100):
        up.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
    assert up.weight == 0.0 and np.all(up.generate_batch() == 0)


def test_identifier_weight_filter_lag_follows_weight_tau(model):
    """After 50 ms the weight filter with tau = 0.1 s has risen 1 - exp(-0.5) ~ 39 %, tau = 0.01 s ~ 100 %."""
    down = np.array([0.0, 0.0, -100.0, 0.0, 0.0, 0.0])
    slow = OneStepWrenchIdentifier(model, mode="weight", weight_tau=0.1)
    fast = OneStepWrenchIdentifier(model, mode="weight", weight_tau=0.01)
    for q, dq, dqn, tau, qn in simulate(model, down, n=50):
        slow.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
        fast.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
    assert 0.35 < slow.weight / 100.0 < 0.43 and fast.weight == pytest.approx(100.0, rel=0.02)


def test_identifier_clamps_a_diverging_fit(model):
    """A wild residual (a torque sensor glitch) is clamped to max_wrench and counted, never NaN."""
    idf = OneStepWrenchIdentifier(model, max_wrench=50.0)
    q, dq = Q_READY, np.zeros(7)
    w = idf.identify(q, dq, dq + 50.0, np.zeros(7), 1e-3, q_next=q)
    assert np.linalg.norm(w[:3]) == pytest.approx(50.0) and np.linalg.norm(w[3:]) <= 50.0 + 1e-9
    assert idf.get_stats()["n_clamped"] == 1 and np.all(np.isfinite(idf.generate_batch()))
    idf.update(0, [0.0])  # the contract's hook: a no-op
    idf.reset()
    assert idf.n_updates == 0 and np.all(idf.estimate == 0)


def test_identifier_bad_input(model):
    import pinocchio as pin

    with pytest.raises(ValueError, match="ee_frame"):
        OneStepWrenchIdentifier(model, ee_frame="tool0_missing")
    bare = pin.Model()
    with pytest.raises(ValueError, match="ee_frame"):
        OneStepWrenchIdentifier(bare)
    with pytest.raises(ValueError, match="model"):
        OneStepWrenchIdentifier(object())
    for kw, name in ((dict(mode="torque"), "mode"), (dict(alpha=0.0), "alpha"), (dict(damping=-1.0), "damping"),
                     (dict(max_wrench=0.0), "max_wrench"), (dict(weight_tau=float("nan")), "weight_tau")):
        with pytest.raises(ValueError, match=name):
            OneStepWrenchIdentifier(model, **kw)
    idf = OneStepWrenchIdentifier(model)
    q, dq = Q_READY, np.zeros(7)
    with pytest.raises(ValueError, match="q:"):
        idf.identify(q[:6], dq, dq, dq, 1e-3)
    with pytest.raises(ValueError, match="dq_next"):
        idf.identify(q, dq, np.r_[dq[:6], np.nan], dq, 1e-3)
    with pytest.raises(ValueError, match="tau_applied"):
        idf.identify(q, dq, dq, np.full(7, np.inf), 1e-3)
    with pytest.raises(ValueError, match="dt"):
        idf.identify(q, dq, dq, dq, 0.0)
    with pytest.raises(ValueError, match="q_next"):
        idf.identify(q, dq, dq, dq, 1e-3, q_next=np.zeros(3))
    assert idf.n_updates == 0  # nothing was folded in


# ------------------------------------------------------------------ samplers on an exact scorer
def score(batch, truth):
    """The scorer's stand-in: the prediction error of each row is its distance to the truth
    (what a one-step rollout measures, up to the dynamics' scale)."""
    return np.linalg.norm(batch - truth, axis=1)


def run_sampler(est, truth, n):
    hist = []
    for _ in range(n):
        b = est.generate_batch()
        e = score(b, truth)
        est.update(int(np.argmin(e)), e, b)
        hist.append(b.copy())
    return hist


def test_force_estimator_converges_on_a_constant_force():
    """From zero to a 60 N push in a random direction within 40 updates (B = 8): the smoothed
    estimate (row 0) within 10 % and the best row of the batch within 5 %."""
    truth = np.r_[60.0 * np.array([0.48, -0.6, 0.64]), np.zeros(3)]
    for B in (8, 32):
        est = ForceEstimator(B, seed=1)
        run_sampler(est, truth, 40)
        b = est.generate_batch()
        assert b.shape == (B, 6) and np.all(b[1] == 0)  # row 1 is the nominal model
        assert rel(b[0], truth) <= 0.10, (B, b[0])
        assert np.min(score(b, truth)) / 60.0 <= 0.05
        st = est.get_stats()
        assert st["n_updates"] == 40 and est.min_radius <= st["radius"] <= est.max_radius
        assert st["sphere_wins"] > 0 and st["tri_wins"] > 0 and st["n_clamped"] == 0


def test_force_estimator_radius_rules_and_small_batches():
    est = ForceEstimator(8, initial_radius=10.0, seed=0)
    b = est.generate_batch()
    assert np.allclose(np.linalg.norm(b[3:, :3], axis=1), 10.0)  # the sphere rows
    est.update(5, np.arange(8.0), b)  # a sphere row won: grow
    assert est.radius == pytest.approx(10.0 * ForceEstimator.RADIUS_GROW)
    est.update(0, np.arange(8.0))      # a core row won (batch_used None: the last batch): shrink
    assert est.radius == pytest.approx(10.0 * ForceEstimator.RADIUS_GROW * ForceEstimator.RADIUS_SHRINK)
    assert np.array_equal(est.generate_batch(), est.generate_batch())  # pure between updates
    one = ForceEstimator(1)
    assert one.generate_batch().shape == (1, 6)
    two = ForceEstimator(2, initial_radius=5.0)
    assert np.linalg.norm(two.generate_batch()[1, :3]) == pytest.approx(5.0)


def test_cem_converges_within_50_updates():
    """CEM (B = 16, force axes only) brings mu within 5 % of a 50 N push in 50 updates (seeds 0-5;
    most seeds within 20)."""
    truth = np.r_[30.0, -40.0, 0.0, 0.0, 0.0, 0.0]
    for seed in range(6):
        est = CEMForceEstimator(16, seed=seed)
        run_sampler(est, truth, 50)
        assert rel(est.get_stats()["mu"], truth) <= 0.05, seed
    assert np.all(est.get_stats()["mu"][3:] == 0)  # torque_sigma = 0: torques stay put
    S = est.Sigma
    assert S.shape == (6, 6) and np.all(np.diag(S)[3:] == 0) and np.all(np.diag(S)[:3] >= est.min_sigma ** 2)
    b = est.generate_batch()
    assert np.all(b[1] == 0) and np.array_equal(b[0], est.mu)
    assert np.array_equal(b, est.generate_batch())  # pure until the next update


def test_cem_with_torque_axes_and_axial_seeds():
    truth = np.r_[10.0, 0.0, -20.0, 2.0, -1.0, 0.5]
    est = CEMForceEstimator(24, torque_sigma=2.0, seed=3)
    b = est.generate_batch()
    assert np.allclose(b[3], est.mu + np.r_[est.force_sigma, 0, 0, 0, 0, 0])  # mu + sigma_x
    assert np.allclose(b[4], est.mu - np.r_[est.force_sigma, 0, 0, 0, 0, 0])
    run_sampler(est, truth, 60)
    assert np.linalg.norm(est.mu[:3] - truth[:3]) / np.linalg.norm(truth[:3]) <= 0.05
    assert np.linalg.norm(est.mu[3:] - truth[3:]) <= 0.25


def test_identified_wrench_sampler_rows_and_radius(model):
    down = np.array([0.0, 0.0, -80.0, 0.0, 0.0, 0.0])
    s = IdentifiedWrenchSampler(8, model, seed=2, weight_tau=0.02)
    for q, dq, dqn, tau, qn in simulate(model, down, n=300):
        s.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
    assert s.n_updates == 300
    b = s.generate_batch()
    assert b.shape == (8, 6) and b[0, 2] == pytest.approx(-80.0, rel=0.01) and np.all(b[1] == 0)
    assert np.allclose(np.linalg.norm(b[2:, :3] - b[0, :3], axis=1), s.radius)
    s.update(4, np.arange(8.0), b)
    assert s.radius == pytest.approx(s.initial_radius * s.RADIUS_GROW)
    s.update(1, np.arange(8.0))
    assert s.get_stats()["core_wins"] == 1 and s.get_stats()["sphere_wins"] == 1
    inert = IdentifiedWrenchSampler(6, model, inertial_rows=True)
    assert inert.n_core == 4 and inert.generate_batch().shape == (6, 6)
    single = IdentifiedWrenchSampler(1, model)
    assert single.generate_batch().shape == (1, 6)
    s.reset()
    assert s.n_updates == 0 and s.radius == s.initial_radius


def test_seeds_reproduce_bit_for_bit(model):
    truth = np.r_[20.0, 10.0, -30.0, 0, 0, 0]
    for make in (lambda: ForceEstimator(8, seed=11), lambda: CEMForceEstimator(8, seed=11)):
        a, b = make(), make()
        ha, hb = run_sampler(a, truth, 15), run_sampler(b, truth, 15)
        assert all(np.array_equal(x, y) for x, y in zip(ha, hb))
        a.reset()
        assert all(np.array_equal(x, y) for x, y in zip(run_sampler(a, truth, 15), ha))  # reset re-seeds
    c = run_sampler(ForceEstimator(8, seed=12), truth, 15)
    assert not all(np.array_equal(x, y) for x, y in zip(c, run_sampler(ForceEstimator(8, seed=11), truth, 15)))
    s1, s2 = IdentifiedWrenchSampler(8, model, seed=4), IdentifiedWrenchSampler(8, model, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(run_sampler(s1, truth, 5), run_sampler(s2, truth, 5)))


def test_sampler_feedback_validation_and_clamp():
    est = ForceEstimator(8)
    b = est.generate_batch()
    with pytest.raises(ValueError, match="best_idx"):
        est.update(8, np.zeros(8), b)
    with pytest.raises(ValueError, match="prediction_errors"):
        est.update(0, np.zeros(7), b)
    with pytest.raises(ValueError, match="prediction_errors"):
        est.update(0, np.r_[np.nan, np.zeros(7)], b)
    with pytest.raises(ValueError, match="batch_used"):
        est.update(0, np.zeros(8), b[:4])
    with pytest.raises(ValueError, match="batch_used"):
        est.update(0, np.zeros(8), np.full((8, 6), np.inf))
    est.update(0, np.full(8, np.inf), b)  # every rollout diverged: no information, skipped
    assert est.get_stats()["skipped_updates"] == 1 and est.get_stats()["n_updates"] == 0
    cem = CEMForceEstimator(8)
    with pytest.raises(ValueError, match="errors"):
        cem.update(0, np.zeros(3), cem.generate_batch())
    with pytest.raises(ValueError, match="batch_used"):
        CEMForceEstimator(8).update(0, np.zeros(8))  # nothing generated yet
    for cls, kw, name in ((ForceEstimator, dict(batch_size=0), "batch_size"),
                          (ForceEstimator, dict(batch_size=8, min_radius=5.0, max_radius=1.0), "max_radius"),
                          (ForceEstimator, dict(batch_size=8, alpha=1.5), "alpha"),
                          (ForceEstimator, dict(batch_size=8, seed=-1), "seed"),
                          (CEMForceEstimator, dict(batch_size=8, elite_frac=0.0), "elite_frac"),
                          (CEMForceEstimator, dict(batch_size=8, spike_expand=0.5), "spike_expand"),
                          (CEMForceEstimator, dict(batch_size=8, axial_seeds="yes"), "axial_seeds")):
        with pytest.raises(ValueError, match=name):
            cls(**kw)
    # divergence guard: feedback that keeps rewarding an ever larger push saturates at max_wrench
    big = ForceEstimator(8, max_radius=500.0, max_wrench=100.0, seed=0)
    run_sampler(big, np.r_[1e5, 0, 0, 0, 0, 0], 60)
    st = big.get_stats()
    assert np.linalg.norm(st["estimate"][:3]) <= 100.0 + 1e-9 and st["n_clamped"] > 0
    assert np.all(np.isfinite(big.generate_batch()))
    cbig = CEMForceEstimator(8, max_sigma=1e4, max_wrench=100.0, seed=0)
    run_sampler(cbig, np.r_[1e5, 0, 0, 0, 0, 0], 200)
    assert np.linalg.norm(cbig.mu[:3]) <= 100.0 + 1e-9 and cbig.get_stats()["n_clamped"] > 0


def test_identified_sampler_bad_input(model):
    with pytest.raises(ValueError, match="ee_frame"):
        IdentifiedWrenchSampler(4, model, ee_frame="nope")
    with pytest.raises(ValueError, match="inertial_rows"):
        IdentifiedWrenchSampler(4, model, inertial_rows=1)
    with pytest.raises(ValueError, match="batch_size"):
        IdentifiedWrenchSampler(0, model)
    s = IdentifiedWrenchSampler(4, model)
    with pytest.raises(ValueError, match="dq"):
        s.identify(Q_READY, np.zeros(3), np.zeros(7), np.zeros(7), 1e-3)


def test_trilaterate_recovers_the_force_of_isotropic_errors():
    """e_b = sqrt(c) ||f* - f_b||: the 4-unknown linear solve returns f* exactly; too few rows,
    rows in a plane, or contradicting errors give None."""
    rng = np.random.default_rng(0)
    f_true = np.array([12.0, -40.0, 25.0])
    rows = rng.normal(0, 20, (8, 3))
    e = 3.0 * np.linalg.norm(rows - f_true, axis=1)
    assert np.allclose(trilaterate(rows, e), f_true, atol=1e-8)
    e_inf = e.copy()
    e_inf[[1, 4]] = np.inf  # diverged rollouts are left out
    assert np.allclose(trilaterate(rows, e_inf), f_true, atol=1e-8)
    assert trilaterate(rows[:4], e[:4]) is None
    flat = rows.copy()
    flat[:, 2] = 0.0
    assert trilaterate(flat, 3.0 * np.linalg.norm(flat - f_true, axis=1)) is None
    assert trilaterate(rows, np.full(8, 5.0)) is None  # equal errors: c = 0, no information


def test_force_estimator_trilateration_row():
    """From B = 8 the last row carries the trilaterated force after the first feedback; on an
    isotropic scorer it lands on the truth and wins."""
    truth = np.r_[50.0, -30.0, 20.0, 0, 0, 0]
    est = ForceEstimator(8, seed=0)
    b0 = est.generate_batch()
    e0 = score(b0, truth)
    est.update(int(np.argmin(e0)), e0, b0)
    b1 = est.generate_batch()
    assert np.allclose(b1[-1, :3], truth[:3], atol=1e-6)
    e1 = score(b1, truth)
    est.update(int(np.argmin(e1)), e1, b1)
    assert est.get_stats()["tri_wins"] == 1
    small = ForceEstimator(6, seed=0)
    b = small.generate_batch()
    small.update(0, score(b, truth), b)
    assert np.allclose(np.linalg.norm(small.generate_batch()[3:, :3] - small.estimate[:3], axis=1), small.radius)


# ------------------------------------------------------------------ PendulumSwingEstimator
def _swinging(model, n, amp=0.15):
    """A computed-torque tracked joint sine (amp rad, 0.5 Hz) carrying an unmodelled 15 kg, 0.5 m
    pendulum in the PinocchioWorld; yields (q, dq, dq_next, tau, q_next, true rod direction
    EE -> bob (3,), world axes) per 1 ms step."""
    import pinocchio as pin

    world = PinocchioWorld(IIWA, pendulum=dict(mass=15.0, length=0.5))
    data, fm = model.createData(), world.model
    fd, bob = fm.createData(), fm.njoints - 1
    q, dq = Q_READY.copy(), np.zeros(7)
    for k in range(n):
        qr = Q_READY + amp * np.sin(2 * np.pi * 0.5 * k * 1e-3 + np.arange(7))
        tau = pin.rnea(model, data, q, dq, 400.0 * (qr - q) - 40.0 * dq)
        qn, dqn = world.step(q, dq, tau, 1e-3)
        ang, _ = world.pendulum_state
        pin.forwardKinematics(fm, fd, np.r_[qn, ang])
        o = fd.oMi[bob]
        yield q, dq, dqn, tau, qn, (o.act(np.array([0.0, 0.0, -0.5])) - o.translation) / 0.5
        q, dq = qn, dqn


def test_swing_estimator_identifies_the_payload_and_follows_its_rod(model):
    """Fed per 1 ms substep under a moving arm, the estimator finds the 15 kg payload's mass to
    10 % (its low-passed weight) and keeps the rod direction within 3 degrees of the world's."""
    est = PendulumSwingEstimator(1, model)
    worst = 0.0
    for k, (q, dq, dqn, tau, qn, u_true) in enumerate(_swinging(model, 1500)):
        est.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
        if k >= 500:
            worst = max(worst, math.degrees(math.acos(min(1.0, float(est.u @ u_true)))))
    st = est.get_stats()
    assert st["mass"] == pytest.approx(15.0, rel=0.10) and worst < 3.0, (st["mass"], worst)
    assert est.min_length <= st["length"] <= est.max_length and est.n_updates == 1500
    f = est.take_mean_force()
    assert f.shape == (3,) and est.take_mean_force() is None  # the mean since the last call


def test_swing_prediction_of_a_blown_up_plan_falls_back_to_the_weight(model):
    """A plan whose EE velocity jumps by 1e200 m/s between knots (a diverging solve) overflows the
    swing integration: those intervals predict the identified weight alone (finite, never NaN into
    the solver) and are counted in n_nonfinite; the sane intervals keep their prediction."""
    est = PendulumSwingEstimator(3, model)
    for q, dq, dqn, tau, qn, _ in _swinging(model, 300):
        est.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
    v = np.zeros((5, 3))
    v[3] = [1e200, 0.0, 0.0]
    with np.errstate(all="raise"):  # the estimator itself keeps numpy quiet
        pred = est.predict(v, 0.03125)
    assert np.all(np.isfinite(pred))
    weight = est.mass * np.asarray(model.gravity.linear)
    assert est.get_stats()["n_nonfinite"] > 0
    assert np.allclose(pred[0, 2, :3], weight) and np.allclose(pred[0, 2, 3:], 0.0)
    sane = est.predict(np.zeros((5, 3)), 0.03125)
    assert np.allclose(pred[:, :2], sane[:, :2])


def test_swing_estimator_predicts_the_planned_reaction_scaled_by_inertial_gain(model):
    """A payload hanging still under a still arm: the rows are its weight; along a planned
    constant upward EE acceleration a, row 0 is m g - inertial_gain * m a on every interval
    (the rigid reaction; the rod stays vertical), row 1 the identified wrench held constant (its
    part beyond the weight times inertial_gain), and rows 2.. the swing at the length grid."""
    world = PinocchioWorld(IIWA, pendulum=dict(mass=15.0, length=0.5))
    import pinocchio as pin

    data = model.createData()
    J = pin.computeFrameJacobian(model, data, Q_READY, model.getFrameId("EE"), pin.LOCAL_WORLD_ALIGNED)
    tau = pin.computeGeneralizedGravity(model, data, Q_READY) + J[:3].T @ np.array([0.0, 0.0, 15.0 * 9.81])
    ests = [PendulumSwingEstimator(4, model, inertial_gain=g) for g in (0.0, 0.3, 1.0)]
    q, dq = Q_READY.copy(), np.zeros(7)
    for _ in range(800):
        qn, dqn = world.step(q, dq, tau, 1e-3)
        for e in ests:
            e.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
        q, dq = qn, dqn
    m = ests[0].mass
    assert m == pytest.approx(15.0, rel=0.01)
    v = np.zeros((9, 3))
    v[:, 2] = 2.0 * 0.03125 * np.arange(9)  # 2 m/s^2 up
    for e, gain in zip(ests, (0.0, 0.3, 1.0)):
        p = e.predict(v, 0.03125)
        assert p.shape == (4, 8, 6) and np.all(np.isfinite(p))
        want = np.array([0.0, 0.0, -m * 9.81 - gain * m * 2.0])
        assert np.allclose(p[0, :, :3], want, atol=0.02 * m), (gain, p[0, :2, :3])
        wv, wr = np.array([0.0, 0.0, -m * 9.81]), e.identifier.wrench
        assert np.allclose(p[1, :, :3], wv + gain * (wr[:3] - wv)) and np.allclose(p[1, :, 3:], gain * wr[3:])
        assert np.allclose(p[2:, :, :3], want, atol=0.02 * m)
        assert np.allclose(e.generate_batch()[0, :3], [0.0, 0.0, -m * 9.81], atol=0.02 * m)
    assert ests[0].row_lengths()[1] != ests[0].row_lengths()[1]  # NaN: the constant row


def test_swing_estimator_reads_the_mass_of_a_payload_the_arm_sags_under(model):
    """The attachment transient: a 15 kg pendulum hangs from an arm at rest that holds only its own
    weight (the payload unmodelled), so the arm sags and the rod carries less than m g. Over the
    first control period (31 samples of 1 ms) the identifier's low-passed weight reads under a
    third of the payload; the estimator's mass, the tension corrected by the EE acceleration,
    is within 2 % from the first tick (and its short-memory attach_mass too)."""
    import pinocchio as pin

    world = PinocchioWorld(IIWA, pendulum=dict(mass=15.0, length=0.5))
    data = model.createData()
    est = PendulumSwingEstimator(3, model)
    q, dq = Q_READY.copy(), np.zeros(7)
    for _ in range(31):
        tau = pin.computeGeneralizedGravity(model, data, q)
        qn, dqn = world.step(q, dq, tau, 1e-3)
        est.identify(q, dq, dqn, tau, 1e-3, q_next=qn)
        q, dq = qn, dqn
    g = 9.81
    assert est.identifier.weight / g < 5.0, est.identifier.weight / g
    assert est.mass == pytest.approx(15.0, rel=0.02) and est.attach_mass == pytest.approx(15.0, rel=0.02)
    assert est.get_stats()["mass"] == est.mass
    # the rows are built on it: row 0 at rest is the payload's weight, not the lagging filter's
    assert est.generate_batch()[0, 2] == pytest.approx(-15.0 * g, rel=0.03)


def test_swing_estimator_bad_input(model):
    with pytest.raises(ValueError, match="length_scales"):
        PendulumSwingEstimator(4, model, length_scales=[1.0, 2.0])  # B - 3: one swing row after the rigid row
    with pytest.raises(ValueError, match="inertial_gain"):
        PendulumSwingEstimator(1, model, inertial_gain=1.5)
    with pytest.raises(ValueError, match="prior_length"):
        PendulumSwingEstimator(1, model, prior_length=5.0)
    with pytest.raises(ValueError, match="substeps"):
        PendulumSwingEstimator(1, model, substeps=0)
    with pytest.raises(ValueError, match="attach_tau"):
        PendulumSwingEstimator(1, model, attach_tau=0.0)
    from gato.hypotheses import SwingWrenchBatch

    for bad in (1.0, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="switch_margin"):
            SwingWrenchBatch(PendulumSwingEstimator(2, model), model, switch_margin=bad)
    with pytest.raises(ValueError, match="ee_frame"):
        PendulumSwingEstimator(1, model, "nope")
    est = PendulumSwingEstimator(2, model)
    with pytest.raises(ValueError, match="ee_vel"):
        est.predict(np.zeros((1, 3)), 0.03)
    with pytest.raises(ValueError, match="ee_vel"):
        est.predict(np.full((3, 3), np.nan), 0.03)
    with pytest.raises(ValueError, match="dt"):
        est.predict(np.zeros((3, 3)), 0.0)
    with pytest.raises(ValueError, match="best_idx"):
        est.update(2, [0.0, 0.0])
    with pytest.raises(ValueError, match="q"):
        est.identify(np.zeros(3), np.zeros(7), np.zeros(7), np.zeros(7), 1e-3)


# ------------------------------------------------------------------ ForceEstimator(centre=...)
class _ScriptedCentre:
    """A sensor-rate identifier stand-in with the centre contract: its wrench is a script of the
    identify calls it got (a payload weight ramping in from 0 to 150 N over 20 calls, then a
    30 N sideways swing)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.k = 0
        self.resets = getattr(self, "resets", -1) + 1

    def identify(self, *args, **kw):
        self.k += 1

    def wrench(self, k=None):
        k = self.k if k is None else k
        return np.r_[30.0 * math.sin(0.2 * k), 0.0, -150.0 * min(k / 20.0, 1.0), 0.0, 0.0, 0.0]

    def generate_batch(self):
        return self.wrench()[None, :]


def test_force_estimator_centred_on_an_identifier_samples_around_it(model):
    """centre=: every row is the identifier's current wrench plus the residual sampler's row (row 1
    the centre itself), the sample mean follows the identified wrench, the residual search finds
    a 12 N offset the identifier misses, and the centred sampler tracks the moving wrench far
    closer than the plain one; seeded runs repeat bit for bit; bad centres are named."""
    offset = np.r_[8.0, -6.0, 6.0, 0.0, 0.0, 0.0]

    def run(est, n=60):
        worst_late, means = 0.0, []
        for k in range(n):
            c = est.centre
            if c is not None:
                c.identify()
            truth = _ScriptedCentre.wrench(None, k + 1) + offset
            b = est.generate_batch()
            if c is not None:
                assert np.array_equal(b[1], c.wrench()) and np.array_equal(est.get_stats()["centre"], c.wrench())
                means.append(np.linalg.norm(b.mean(axis=0) - c.wrench() - est.estimate))
            e = score(b, truth)
            est.update(int(np.argmin(e)), e, b)
            if k >= 40:
                worst_late = max(worst_late, float(np.min(e)))
        return worst_late, means, b

    for B in (8, 32):
        centred = ForceEstimator(B, seed=3, centre=_ScriptedCentre())
        worst, means, b = run(centred)
        # the sphere rows are spread around centre + estimate (their mean is that point up to the
        # Fibonacci directions' rotated mean, which is < the radius / (B - 3))
        assert max(means) <= 20.0, (B, max(means))
        assert rel(centred.estimate, offset) <= 0.25, (B, centred.estimate)  # the residual found
        assert worst <= 3.0, (B, worst)
        assert centred.get_stats()["tri_wins"] == 0  # no trilateration row with a centre
        plain_worst, _, _ = run(ForceEstimator(B, seed=3))
        assert plain_worst > 3.0 * worst, (B, plain_worst, worst)
        again = ForceEstimator(B, seed=3, centre=_ScriptedCentre())
        assert np.array_equal(run(again)[2], b)  # seeded: bit for bit
        before = centred.centre.resets
        centred.reset()  # resets the identifier too
        assert centred.centre.resets == before + 1 and centred.centre.k == 0 and np.all(centred.estimate == 0)
    assert "centre" not in ForceEstimator(8).get_stats()  # default: unchanged
    # the real identifiers plug in, and the hypothesis batch hands the one to feed to the simulation
    from gato.hypotheses import ForceHypothesisBatch, fe_centre

    for name, kind in (("weight", OneStepWrenchIdentifier), ("swing", PendulumSwingEstimator)):
        idf = fe_centre(name, model, "EE", seed=0)
        assert isinstance(idf, kind)
        hyp = ForceHypothesisBatch(ForceEstimator(8, centre=idf), model, "EE")
        assert hyp.sensor_identifier is idf
        assert np.all(hyp.estimator.generate_batch()[1] == 0)  # nothing identified yet
    assert ForceHypothesisBatch(ForceEstimator(8), model, "EE").sensor_identifier is None
    assert fe_centre(None, model) is None
    with pytest.raises(ValueError, match="centre"):
        fe_centre("mass", model)
    with pytest.raises(ValueError, match="centre"):
        ForceEstimator(8, centre=np.zeros(6))
