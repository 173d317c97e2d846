"""The real-time plan executor (C++ gato::PlanExecutor through gato._core), no ROS.

Interpolation is checked against NumPy / SciPy references for each integrator; each
safety rule has its own test; a C++ consumer of the installed CMake package counts heap
allocations in 10^4 update() calls with a malloc hook.
"""
import subprocess

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline

import gato
from conftest import build_core_consumer
from gato.executor import INTEGRATORS, plan_executor

ROBOT = "iiwa14"
H = 0.02          # knot spacing [s]
N = 16            # knots
T0 = 10**9        # plan stamp [ns]
NS = 10**9


@pytest.fixture(scope="module")
def model():
    pin = pytest.importorskip("pinocchio")
    m = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    return pin, m, m.createData()


def gravity(model, q):
    pin, m, d = model
    z = np.zeros(m.nv)
    return np.array(pin.rnea(m, d, np.asarray(q, float), z, z))


def make_executor(**kw):
    kw.setdefault("plan_timeout", 0.5)
    return plan_executor(ROBOT, **kw)


def mid(ex):
    """A measured state in the middle of the position range, at rest."""
    pin = pytest.importorskip("pinocchio")
    m = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    return 0.5 * (m.lowerPositionLimit + m.upperPositionLimit), np.zeros(ex.nv)


def rollout(integrator, nv, rng):
    """A plan consistent with ``integrator``: random accelerations integrated knot to knot.
    Returns x (N, 2 nv), u (N - 1, nv), acc (N - 1, nv)."""
    q = np.zeros((N, nv))
    v = np.zeros((N, nv))
    q[0] = rng.uniform(-0.5, 0.5, nv)
    v[0] = rng.uniform(-0.3, 0.3, nv)
    acc = rng.uniform(-2, 2, (N - 1, nv))
    for k in range(N - 1):
        v[k + 1] = v[k] + H * acc[k]
        if integrator == "euler":
            q[k + 1] = q[k] + H * v[k] + 0.5 * H * H * acc[k]
        else:  # semi-implicit; rk4 plans are built from a smooth curve below
            q[k + 1] = q[k] + H * v[k + 1]
    u = rng.uniform(-20, 20, (N - 1, nv))
    return np.hstack([q, v]), u, acc


def reference_sample(integrator, x, u, acc, s, nv):
    """The planned (q, v, u) at s seconds, from the integrator's own continuous model."""
    k = int(np.floor(s / H))
    t = s - k * H
    q0, v0 = x[k, :nv], x[k, nv:]
    if integrator == "euler":  # constant acceleration over the interval
        return q0 + t * v0 + 0.5 * t * t * acc[k], v0 + t * acc[k], u[k]
    if integrator == "semi_implicit":  # piecewise-linear position and velocity
        knots = H * np.arange(N)
        qs = np.array([np.interp(s, knots, x[:, j]) for j in range(nv)])
        vs = np.array([np.interp(s, knots, x[:, nv + j]) for j in range(nv)])
        return qs, vs, u[k]
    raise AssertionError(integrator)


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit", "rk4"])
def test_interpolation_matches_numpy_reference(integrator):
    ex = make_executor()
    nv = ex.nv
    rng = np.random.default_rng(7)
    if integrator == "rk4":
        # Knots of a smooth curve; the reference is SciPy's cubic Hermite spline of it.
        tk = H * np.arange(N)
        a, w, ph = rng.uniform(0.2, 0.6, nv), rng.uniform(1, 4, nv), rng.uniform(0, 6, nv)
        q = a * np.sin(w * tk[:, None] + ph)
        v = a * w * np.cos(w * tk[:, None] + ph)
        x = np.hstack([q, v])
        u = rng.uniform(-20, 20, (N - 1, nv))
        spl = CubicHermiteSpline(tk, q, v, axis=0)

        def ref(s):
            k = int(np.floor(s / H))
            return spl(s), spl(s, 1), u[k]
    else:
        x, u, acc = rollout(integrator, nv, rng)

        def ref(s):
            return reference_sample(integrator, x, u, acc, s, nv)
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=INTEGRATORS[integrator], x=x, u=u)
    q_meas, v_meas = mid(ex)
    times = np.concatenate([H * np.arange(N - 1), rng.uniform(0, (N - 1) * H - 1e-9, 40)])
    for s in times:
        now = T0 + int(round(s * NS))
        s_exact = (now - T0) / NS
        tau, mode = ex.update(now, q_meas, v_meas)   # kp = kd = 0: tau is the feed-forward
        assert mode == "follow", (s, ex.hold_reason)
        q_ref, v_ref, u_ref = ref(s_exact)
        np.testing.assert_allclose(ex.q_ref, q_ref, rtol=0, atol=1e-9, err_msg=f"q at s={s_exact}")
        np.testing.assert_allclose(ex.v_ref, v_ref, rtol=0, atol=1e-8, err_msg=f"v at s={s_exact}")
        np.testing.assert_array_equal(tau, u_ref, err_msg=f"u at s={s_exact}")
    assert ex.counters["follow"] == len(times)


def test_feedback_toward_the_planned_state_and_plan_gains():
    nv = 7
    kp, kd = np.linspace(10, 70, nv), np.linspace(1, 7, nv)
    ex = make_executor(kp=kp, kd=kd, feedback="riccati+pd")
    rng = np.random.default_rng(3)
    x, u, _ = rollout("semi_implicit", nv, rng)
    K = rng.uniform(-2, 2, (N - 1, nv, 2 * nv))
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=INTEGRATORS["semi_implicit"], x=x, u=u, K=K)
    q = x[3, :nv] + rng.uniform(-0.05, 0.05, nv)
    v = x[3, nv:] + rng.uniform(-0.1, 0.1, nv)
    now = T0 + int(3.5 * H * NS)
    tau, mode = ex.update(now, q, v)
    assert mode == "follow"
    dx = np.concatenate([ex.q_ref - q, ex.v_ref - v])
    np.testing.assert_allclose(tau, u[3] + kp * dx[:nv] + kd * dx[nv:] + K[3] @ dx, rtol=1e-12, atol=1e-9)
    # use_plan_gains=False drops the plan's K term (applied at the next update).
    ex.set_tunables(plan_timeout=0.5, kp=kp, kd=kd, use_plan_gains=False)
    tau2, _ = ex.update(now, q, v)
    np.testing.assert_allclose(tau2, u[3] + kp * dx[:nv] + kd * dx[nv:], rtol=1e-12, atol=1e-9)
    # issue 33's modes, live: riccati = the gains alone, pd = the PD alone (gains ignored)
    ex.set_tunables(plan_timeout=0.5, kp=kp, kd=kd, feedback="riccati")
    tau3, _ = ex.update(now, q, v)
    np.testing.assert_allclose(tau3, u[3] + K[3] @ dx, rtol=1e-12, atol=1e-9)
    ex.set_tunables(plan_timeout=0.5, kp=kp, kd=kd, feedback="pd")
    tau4, _ = ex.update(now, q, v)
    np.testing.assert_allclose(tau4, u[3] + kp * dx[:nv] + kd * dx[nv:], rtol=1e-12, atol=1e-9)
    assert ex.tunables["feedback"] == "pd"
    with pytest.raises(ValueError, match="feedback"):
        ex.set_tunables(feedback="lqr")


def test_plan_gains_are_saturated_held_per_knot_and_bad_ones_fall_back_to_pd():
    """Issue 33: the executor's K is the negated BSQP gain (torque += K (x_plan - x)), held over
    each knot interval like u_k; the gain term is clipped per joint to feedback_limit (default
    0.25 x the effort limit); non-finite gains drop the gains (dropped_gains), not the plan,
    which runs with the PD."""
    nv = 7
    kp, kd = np.full(nv, 30.0), np.full(nv, 3.0)
    ex = make_executor(kp=kp, kd=kd)
    assert ex.tunables["feedback"] == "riccati"
    np.testing.assert_allclose(ex.tunables["feedback_limit"], 0.25 * ex.effort_limit)
    rng = np.random.default_rng(11)
    x, u, _ = rollout("euler", nv, rng)
    K_solver = rng.uniform(-50, 50, (N - 1, nv, 2 * nv))
    K_solver[:, 0, 0] = -1e5                        # joint 0: far past its limit
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=INTEGRATORS["euler"], x=x, u=u, K=-K_solver)
    q = x[5, :nv] + rng.uniform(-0.02, 0.02, nv)
    v = x[5, nv:] + rng.uniform(-0.05, 0.05, nv)
    lim = 0.25 * ex.effort_limit
    for s in (5.2, 5.8):                            # the same knot's gains over the interval
        tau, mode = ex.update(T0 + int(s * H * NS), q, v)
        xp = np.concatenate([ex.q_ref, ex.v_ref])
        fb = K_solver[5] @ (np.concatenate([q, v]) - xp)
        assert mode == "follow" and abs(fb[0]) > lim[0]
        np.testing.assert_allclose(tau, np.clip(u[5] + np.clip(fb, -lim, lim), -ex.effort_limit, ex.effort_limit),
                                   rtol=1e-12, atol=1e-9)
    c = ex.counters
    assert c["follow_gains"] == 2 and c["gains_saturated"] == 2 and c["dropped_gains"] == 0
    bad = -K_solver.copy()
    bad[3, 2, 4] = np.inf
    ex.submit(seq=2, epoch=1, stamp_ns=T0, knot_dt=H, integrator=INTEGRATORS["euler"], x=x, u=u + 1.0, K=bad)
    tau, mode = ex.update(T0 + int(5.5 * H * NS), q, v)
    dx = np.concatenate([ex.q_ref - q, ex.v_ref - v])
    assert mode == "follow" and ex.active_seq == 2     # the plan runs, without its gains
    np.testing.assert_allclose(tau, u[5] + 1.0 + kp * dx[:nv] + kd * dx[nv:], rtol=1e-12, atol=1e-9)
    assert ex.counters["dropped_gains"] == 1 and ex.counters["dropped_invalid"] == 0
    with pytest.raises(ValueError, match="feedback_limit"):
        ex.set_tunables(feedback_limit=np.full(nv, -1.0))


def test_embedded_mpc_plans_carry_the_solvers_gains():
    """EmbeddedMpc.gains (the plugin's embedded mode under feedback riccati): each step's plan
    carries the solved plan's gains (BatchSolver::feedback_gains, the C++ of BSQP.feedback_gains,
    checked against the NumPy LQR in test_feedback_gains) in the executor's shape; off: none."""
    from gato.core.native import core as _core

    info = gato.robot_info(ROBOT)
    Nh, dt = 8, 0.02
    mpc = _core.EmbeddedMpc(str(gato.robot_urdf(ROBOT)), info["ee_frame"], Nh, dt, None, 2)
    q0, _ = mid(make_executor())
    x0 = np.concatenate([q0, np.zeros(7)])
    assert mpc.step(T0, x0) and mpc.plan_K is None
    mpc.gains = True
    assert mpc.step(T0 + int(dt * NS), x0)
    K = mpc.plan_K
    assert K.shape == (Nh - 1, 7, 14) and np.all(np.isfinite(K)) and np.abs(K).max() > 0


def hold_torque(model, q, v, q_hold, f_hz, damping):
    """The documented hold law: g(q) + M(q) (w^2 (q_hold - q) - 2 w v) - damping v, w = 2 pi f."""
    pin, m, d = model
    w = 2 * np.pi * f_hz
    M = pin.crba(m, d, np.asarray(q, float))
    M = np.triu(M) + np.triu(M, 1).T
    return gravity(model, q) + M @ (w * w * (q_hold - q) - 2 * w * v) - damping * v


def test_no_plan_holds_gravity_plus_damping(model):
    damping = np.full(7, 3.0)
    ex = make_executor(hold_damping=damping, hold_frequency_hz=0.0)   # the position hold off
    q, _ = mid(ex)
    v = np.linspace(-0.2, 0.2, 7)
    tau, mode = ex.update(T0, q, v)
    assert (mode, ex.hold_reason) == ("hold", "no_plan")
    np.testing.assert_allclose(tau, gravity(model, q) - damping * v, atol=1e-9)
    np.testing.assert_allclose(ex.gravity(q), gravity(model, q), atol=1e-9)
    assert ex.counters["holds"] == 1 and ex.counters["follow"] == 0


def test_hold_keeps_the_position_where_it_began_through_the_mass_matrix(model):
    damping = np.full(7, 0.5)
    ex = make_executor(hold_damping=damping, hold_frequency_hz=3.0)
    assert ex.tunables["hold_frequency_hz"] == 3.0
    q0, _ = mid(ex)
    v0 = np.linspace(-0.2, 0.2, 7)
    tau, mode = ex.update(T0, q0, v0)       # the hold begins here: anchored at q0
    assert mode == "hold"
    np.testing.assert_allclose(tau, hold_torque(model, q0, v0, q0, 3.0, damping), rtol=1e-10, atol=1e-9)
    q1, v1 = q0 + np.linspace(0.05, -0.05, 7), -0.5 * v0   # drifted: pulled back toward q0, not held at q1
    tau, _ = ex.update(T0 + 10**6, q1, v1)
    np.testing.assert_allclose(tau, hold_torque(model, q1, v1, q0, 3.0, damping), rtol=1e-10, atol=1e-9)
    # a plan, then a new hold: a new anchor
    x, u, _ = rollout("euler", 7, np.random.default_rng(3))
    ex.submit(seq=1, epoch=1, stamp_ns=T0 + 2 * 10**6, knot_dt=H, integrator=0, x=x, u=u)
    assert ex.update(T0 + 2 * 10**6, q1, v1)[1] == "follow"
    ex.reset()
    tau, _ = ex.update(T0 + 3 * 10**6, q1, v1)
    np.testing.assert_allclose(tau, hold_torque(model, q1, v1, q1, 3.0, damping), rtol=1e-10, atol=1e-9)
    with pytest.raises(ValueError, match="hold_frequency_hz"):
        ex.set_tunables(hold_frequency_hz=-1.0)


@pytest.mark.parametrize("lag_ms", [1, 8])
def test_hold_keeps_a_moving_arm_still_under_a_control_lag(model, lag_ms):
    """A dead planner mid-motion: the executor holds a simulated iiwa14 (pinocchio, 1 ms
    steps) whose torque is refreshed only every lag_ms. The hold brings it to rest near
    where the hold began; the old law (gravity minus joint damping, hold_frequency_hz=0,
    the former default damping 0.02 x effort limit) lets it coast away or go unstable."""
    pin, m, d = model

    def run(f_hz, damping):
        ex = make_executor(hold_damping=damping, hold_frequency_hz=f_hz)
        q = np.array(gato.tasks.Q_READY[ROBOT], float)
        v = np.array([0.6, -0.4, 0.8, 0.5, -1.2, 1.0, 2.0])    # rad/s when the plans stop
        q_start, peak_v, tau = q.copy(), 0.0, np.zeros(7)
        for i in range(2000):                                   # 2 s
            if i % lag_ms == 0:
                tau, mode = ex.update(T0 + i * 10**6, q, v)
                assert mode == "hold"
            a = pin.aba(m, d, q, v, tau)
            v = v + 1e-3 * a
            q = q + 1e-3 * v
            peak_v = max(peak_v, float(np.max(np.abs(v))))
            if not np.all(np.isfinite(q)) or peak_v > 1e3:
                return np.inf, np.inf, peak_v
        return float(np.max(np.abs(q - q_start))), float(np.max(np.abs(v))), peak_v

    drift, v_end, peak = run(4.0, np.zeros(7))
    assert drift < 0.15 and v_end < 1e-2 and peak <= 2.0 + 1e-9, (drift, v_end, peak)
    old_damping = 0.02 * np.asarray(m.effortLimit)
    old_drift, _, _ = run(0.0, old_damping)
    assert old_drift > 2 * drift, (old_drift, drift)


def test_stale_plan_holds_and_a_fresh_one_resumes(model):
    ex = make_executor(plan_timeout=0.05)
    x, u, _ = rollout("euler", 7, np.random.default_rng(1))
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q, v = mid(ex)
    assert ex.update(T0 + int(0.04 * NS), q, v)[1] == "follow"
    for dt in (0.051, 0.06, 0.07):   # older than plan_timeout: hold, one stale event
        tau, mode = ex.update(T0 + int(dt * NS), q, v)
        assert (mode, ex.hold_reason) == ("hold", "plan_stale")
        np.testing.assert_allclose(tau, gravity(model, q), atol=1e-9)
    assert ex.counters["stale_events"] == 1
    ex.submit(seq=2, epoch=1, stamp_ns=T0 + int(0.07 * NS), knot_dt=H, integrator=0, x=x, u=u)
    assert ex.update(T0 + int(0.08 * NS), q, v)[1] == "follow"


def test_plan_past_its_last_knot_holds():
    ex = make_executor(plan_timeout=10.0)
    x, u, _ = rollout("euler", 7, np.random.default_rng(2))
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q, v = mid(ex)
    assert ex.update(T0 + int((N - 1) * H * NS) - 1000, q, v)[1] == "follow"
    tau, mode = ex.update(T0 + int((N - 1) * H * NS), q, v)
    assert (mode, ex.hold_reason) == ("hold", "plan_exhausted")
    assert ex.counters["stale_events"] == 1


def test_nonfinite_state_holds_at_the_last_good_state(model):
    ex = make_executor(hold_damping=np.full(7, 5.0))
    x, u, _ = rollout("euler", 7, np.random.default_rng(4))
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q_good, v = mid(ex)
    assert ex.update(T0, q_good, v + 0.1)[1] == "follow"
    for bad in (np.nan, np.inf, -np.inf):
        q = q_good + 0.3
        q[2] = bad
        tau, mode = ex.update(T0 + 1000, q, v + 0.1)
        assert (mode, ex.hold_reason) == ("hold", "state_nan_inf")
        # gravity at the last GOOD positions, and no damping on an untrusted velocity
        np.testing.assert_allclose(tau, gravity(model, q_good), atol=1e-9)
    vbad = v.copy()
    vbad[0] = np.nan
    assert ex.update(T0 + 2000, q_good, vbad)[1] == "hold"
    assert ex.counters["nonfinite_states"] == 4
    assert ex.update(T0 + 3000, q_good, v)[1] == "follow"   # recovers with the next good state


def test_nonfinite_state_before_any_good_one_outputs_zero():
    ex = make_executor()
    q = np.full(7, np.nan)
    tau, mode = ex.update(T0, q, np.zeros(7))
    assert mode == "no_state" and np.all(tau == 0.0)


def test_nonfinite_plan_is_dropped_and_the_previous_one_kept():
    ex = make_executor()
    x, u, _ = rollout("euler", 7, np.random.default_rng(5))
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q, v = mid(ex)
    ex.update(T0, q, v)
    bad_u = u.copy()
    bad_u[4, 1] = np.nan
    ex.submit(seq=2, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=bad_u + 1)
    tau, mode = ex.update(T0 + int(4.5 * H * NS), q, v)
    assert mode == "follow" and ex.active_seq == 1
    np.testing.assert_array_equal(tau, u[4])
    assert ex.counters["dropped_invalid"] == 1
    ex.submit(seq=3, epoch=1, stamp_ns=T0, knot_dt=0.0, integrator=0, x=x, u=u)   # knot_dt <= 0
    ex.update(T0, q, v)
    assert ex.counters["dropped_invalid"] == 2 and ex.active_seq == 1


def test_nonfinite_output_holds(model):
    ex = make_executor(kp=np.full(7, 10.0))
    x, u, _ = rollout("euler", 7, np.random.default_rng(6))
    x[:, 0] = 1e308      # finite plan whose feedback kp * (q_ref - q) overflows to inf
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=1, x=x, u=u)
    q, v = mid(ex)
    tau, mode = ex.update(T0, q, v)
    assert (mode, ex.hold_reason) == ("hold", "output_nan_inf")
    np.testing.assert_allclose(tau, gravity(model, q), atol=1e-9)
    assert ex.counters["nonfinite_outputs"] == 1


def test_torques_are_clamped_to_the_urdf_effort_limits():
    ex = make_executor()
    lim = ex.effort_limit
    np.testing.assert_array_equal(lim, [320, 320, 176, 176, 110, 40, 40])
    x, u, _ = rollout("euler", 7, np.random.default_rng(8))
    u[:] = 0.0
    u[:, 0], u[:, 3], u[:, 6] = 1000.0, -500.0, 39.0
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q, v = mid(ex)
    tau, mode = ex.update(T0, q, v)
    assert mode == "follow"
    assert tau[0] == 320 and tau[3] == -176 and tau[6] == 39.0
    assert ex.counters["clamped"] == 1


def test_torque_pushing_past_a_position_limit_is_cut(model):
    damping = np.full(7, 4.0)
    ex = make_executor(hold_damping=damping, limit_margin=0.05)
    pin, m, _ = model
    x, u, _ = rollout("euler", 7, np.random.default_rng(9))
    u[:] = 0.0
    u[:, 1], u[:, 2] = 100.0, -100.0
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    q, v = mid(ex)
    q[1] = m.upperPositionLimit[1] - 0.01     # inside the band, pushed up: cut
    q[2] = m.lowerPositionLimit[2] + 0.02     # inside the band, pushed down: cut
    v[1], v[2] = 0.3, -0.2                    # moving toward the limits: damped
    tau, mode = ex.update(T0, q, v)
    g = gravity(model, q)
    assert mode == "follow"
    assert tau[1] == pytest.approx(g[1] - 4.0 * 0.3)
    assert tau[2] == pytest.approx(g[2] + 4.0 * 0.2)
    assert ex.counters["limit_cuts"] == 1
    # pulled away from the limit: untouched
    ex.submit(seq=2, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=-u)
    tau, _ = ex.update(T0, q, v)
    assert tau[1] == -100.0 and tau[2] == 100.0
    assert ex.counters["limit_cuts"] == 1


def test_out_of_order_plans_are_dropped_and_counted():
    ex = make_executor()
    x, u, _ = rollout("euler", 7, np.random.default_rng(10))
    q, v = mid(ex)
    ex.submit(seq=5, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    ex.update(T0, q, v)
    for seq in (5, 3):    # a repeat and an older one
        ex.submit(seq=seq, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u + 1)
        tau, _ = ex.update(T0, q, v)
        np.testing.assert_array_equal(tau, u[0])
    assert ex.counters["dropped_out_of_order"] == 2 and ex.active_seq == 5
    ex.submit(seq=6, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u + 1)
    tau, _ = ex.update(T0, q, v)
    np.testing.assert_array_equal(tau, u[0] + 1)
    assert ex.counters["plans_accepted"] == 2


def test_stale_epochs_are_dropped_and_a_new_epoch_restarts_the_sequence():
    ex = make_executor()
    x, u, _ = rollout("euler", 7, np.random.default_rng(11))
    q, v = mid(ex)
    ex.submit(seq=40, epoch=3, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    ex.update(T0, q, v)
    ex.submit(seq=41, epoch=2, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u + 1)   # older epoch
    ex.update(T0, q, v)
    assert ex.counters["dropped_stale_epoch"] == 1 and ex.active_epoch == 3
    ex.submit(seq=1, epoch=4, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u + 2)    # MPC reset
    tau, _ = ex.update(T0, q, v)
    assert (ex.active_epoch, ex.active_seq) == (4, 1)
    np.testing.assert_array_equal(tau, u[0] + 2)


def test_reset_holds_until_a_new_plan_and_forgets_the_sequence():
    ex = make_executor()
    x, u, _ = rollout("euler", 7, np.random.default_rng(12))
    q, v = mid(ex)
    ex.submit(seq=9, epoch=5, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)
    assert ex.update(T0, q, v)[1] == "follow"
    ex.reset()
    _, mode = ex.update(T0, q, v)
    assert (mode, ex.hold_reason) == ("hold", "no_plan")
    ex.submit(seq=1, epoch=1, stamp_ns=T0, knot_dt=H, integrator=0, x=x, u=u)   # a restarted publisher
    assert ex.update(T0, q, v)[1] == "follow"


def test_bad_settings_raise_value_errors_naming_them():
    with pytest.raises(ValueError, match="kp"):
        make_executor(kp=np.ones(3))
    with pytest.raises(ValueError, match="plan_timeout"):
        make_executor(plan_timeout=0.0)
    with pytest.raises(ValueError, match="max_knots"):
        make_executor(max_knots=1)
    ex = make_executor()
    with pytest.raises(ValueError, match="hold_damping"):
        ex.set_tunables(hold_damping=-np.ones(7))
    with pytest.raises(ValueError, match="x: expected"):
        ex.submit(seq=1, epoch=1, stamp_ns=0, knot_dt=H, integrator=0, x=np.zeros((200, 14)), u=np.zeros((199, 7)))
    with pytest.raises(ValueError, match="u: expected shape"):
        ex.submit(seq=1, epoch=1, stamp_ns=0, knot_dt=H, integrator=0, x=np.zeros((4, 14)), u=np.zeros((4, 7)))


def test_update_allocates_nothing_in_10k_calls(tmp_path):
    """A C++ consumer of find_package(gato_core) runs 10^4 update() calls through every
    path while a malloc hook counts; its control allocation proves the hook counts."""
    exe = build_core_consumer("executor_alloc", tmp_path / "build")
    info = gato.robot_info(ROBOT)
    run = subprocess.run([str(exe), str(gato.robot_urdf(ROBOT)), info["ee_frame"]],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    out = dict(line.split("=", 1) for line in run.stdout.split())
    assert int(out["control_allocs"]) >= 1, "the malloc hook does not count: the check would be meaningless"
    assert int(out["updates"]) == 10000
    assert int(out["update_allocs"]) == 0 and int(out["update_frees"]) == 0, run.stdout
    # every path ran under the hook
    for key in ("follow", "hold", "plans_accepted", "dropped_invalid", "dropped_out_of_order", "dropped_stale_epoch",
                "nonfinite_states", "nonfinite_outputs", "stale_events", "clamped", "limit_cuts"):
        assert int(out[key]) > 0, f"{key} never happened: {run.stdout}"
    assert float(out["kp_applied"]) == 80.0
