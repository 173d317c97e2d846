"""gato.tasks: the per-plant tables, the figure-8 geometry, and the scenario generators' guarantees.

Every guarantee a generator documents is re-measured here independently of the
generator's own bookkeeping (reach, limit margin, speed ratio), per plant and
per returned scenario; same seed -> identical output.
"""
import math

import numpy as np
import pytest

import gato
from gato.sim import scenarios as tasks  # the module, so monkeypatch reaches its callers

pin = pytest.importorskip("pinocchio")

PLANTS = ("iiwa14", "indy7", "fr3", "gen3", "ur5e")


def model_of(plant):
    return pin.buildModelFromUrdf(str(gato.robot_urdf(plant)))


def fk(model, frame, q):
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(q, dtype=float))
    return data.oMf[model.getFrameId(frame)].translation.copy()


def assert_same(a, b):
    """Deep equality of scenario lists (arrays compared exactly)."""
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("plant", PLANTS)
def test_ready_pose_tables(plant):
    model = model_of(plant)
    ee = tasks.ee_frame_of(plant)
    assert ee == gato.robot_info(plant)["ee_frame"]
    q = tasks.Q_READY[plant]
    assert tasks.within_q_limits(model, q, margin=0.3)
    x = fk(model, ee, q)
    assert np.linalg.norm(x - tasks.CENTRE_OF_RECORD[plant]) < 0.01
    data = model.createData()
    J = pin.computeFrameJacobian(model, data, q, model.getFrameId(ee), pin.LOCAL_WORLD_ALIGNED)[:3]
    s = np.linalg.svd(J, compute_uv=False)
    assert s[-1] > 0.25 and s[0] / s[-1] < 3.0  # well-conditioned position Jacobian (m/rad)
    lo, hi = tasks.GOAL_BOX[plant]
    assert np.all(lo < tasks.CENTRE_OF_RECORD[plant]) and np.all(tasks.CENTRE_OF_RECORD[plant] < hi)
    a_lo, a_hi = tasks.FIG8_AMPLITUDE[plant]
    assert 0 < a_lo < a_hi <= 0.2


def test_urdf_limits_and_unknown_plant():
    lim = tasks.urdf_limits(model_of("iiwa14"))
    assert lim["u"][0] == 320.0 and lim["qd"][0] == pytest.approx(1.48353) and lim["q_hi"][6] == pytest.approx(3.05433)
    assert np.all(lim["q_lo"] == -lim["q_hi"])
    with pytest.raises(ValueError, match="unknown robot"):
        tasks.ee_frame_of("nope")
    with pytest.raises(ValueError, match="nq"):
        tasks.fig8_scenarios(model_of("indy7"), "iiwa14", 1, seed=0)


def test_figure8_geometry():
    offset, theta, period, dt = np.array([0.5, 0.1, 0.4]), 0.6, 2.0, 0.01
    p = tasks.figure8(dt, 0.15, 0.08, offset, theta, period, cycles=2)
    assert p.shape == (400, 3)
    np.testing.assert_allclose(p[0], offset, atol=1e-15)  # starts at the crossing point
    np.testing.assert_allclose(p[:200], p[200:], atol=1e-12)  # periodic
    n = np.array([-math.sin(theta), math.cos(theta), 0.0])  # plane normal: vertical plane rotated by theta
    np.testing.assert_allclose((p - offset) @ n, 0.0, atol=1e-15)
    h = np.array([math.cos(theta), math.sin(theta), 0.0])
    assert np.max((p - offset) @ h) == pytest.approx(0.15, abs=1e-6)
    assert np.ptp(p[:, 2]) == pytest.approx(0.16, abs=1e-6)
    # the two lobes: the horizontal coordinate crosses zero at half period, the vertical twice as often
    t = np.arange(400) * dt
    np.testing.assert_allclose(p[:, 2] - offset[2], 0.08 * np.sin(4 * math.pi * t / period), atol=1e-15)
    assert tasks.fig8_path(dict(A_x=0.15, A_z=0.08, offset=offset, theta=theta, period=period), dt).shape == (200, 3)


def test_ik_track_reach_and_step_clipping():
    model = model_of("iiwa14")
    q0 = tasks.Q_READY["iiwa14"]
    path = tasks.figure8(0.01, 0.1, 0.05, fk(model, "EE", q0), 0.3, 3.0)
    qs, err = tasks.ik_track(model, "EE", q0, path)
    assert qs.shape == (300, 7) and err.shape == (300,)
    assert err.max() < 1e-3
    np.testing.assert_allclose([fk(model, "EE", qs[k]) for k in (0, 150, 299)], path[[0, 150, 299]], atol=1e-3)
    far = np.array([[3.0, 0.0, 0.5], [3.0, 0.0, 0.6]])  # out of reach: large error, bounded steps
    qs, err = tasks.ik_track(model, "EE", q0, far, first_iters=5, max_step=0.1)
    assert err.min() > 1.0
    assert np.max(np.abs(qs[0] - q0)) <= 5 * 0.1 + 1e-12 and np.max(np.abs(qs[1] - qs[0])) <= 0.1 + 1e-12


@pytest.mark.parametrize("ratio", [0.5, 1.3])
def test_feasible_fig8_lands_the_speed_ratio(ratio):
    model = model_of("iiwa14")
    q0 = tasks.Q_READY["iiwa14"]
    res = tasks.feasible_fig8(model, "EE", q0, 0.01, ratio=ratio, A_x=0.12, A_z=0.08, theta=0.4)
    assert abs(res["ratio_est"] / ratio - 1) < 0.05
    np.testing.assert_allclose(res["params"]["offset"], fk(model, "EE", q0))  # offset=None: centred at q0
    assert res["ik_err_max"] < 0.005 and res["within_q_limits"]
    # independent re-measurement of the documented quantity
    r, e, inside = tasks.joint_speed_ratio(model, "EE", q0, tasks.fig8_path(res["params"], 0.01), 0.01)
    assert r == pytest.approx(res["ratio_est"]) and e == pytest.approx(res["ik_err_max"]) and inside
    # speed ~ 1/period: halving the ratio doubles the period
    res2 = tasks.feasible_fig8(model, "EE", q0, 0.01, ratio=ratio / 2, A_x=0.12, A_z=0.08, theta=0.4)
    assert res2["params"]["period"] / res["params"]["period"] == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("plant", PLANTS)
def test_fig8_scenarios_guarantees(plant):
    model = model_of(plant)
    ee = tasks.ee_frame_of(plant)
    scen = tasks.fig8_scenarios(model, plant, 3, seed=42)
    assert len(scen) == 3 and len({s["id"] for s in scen}) == 3
    a_lo, a_hi = tasks.FIG8_AMPLITUDE[plant]
    for s in scen:
        p, dt = s["params"], s["dt"]
        assert s["plant"] == plant and s["ee_frame"] == ee and dt == 0.01
        assert a_lo <= p["A_x"] <= a_hi and a_lo <= p["A_z"] <= a_hi and 0 <= p["theta"] <= math.pi / 2
        assert np.linalg.norm(p["offset"] - tasks.CENTRE_OF_RECORD[plant]) <= 0.1
        assert 0.6 <= s["ratio"] <= 1.6
        # the episode starts ON the path, near the ready pose
        assert np.linalg.norm(fk(model, ee, s["q0"]) - p["offset"]) < 0.005
        assert np.max(np.abs(s["q0"] - tasks.Q_READY[plant])) < 0.5
        # re-measured: reach, limit margin, speed ratio within 15 % of the drawn one
        r, err, inside = tasks.joint_speed_ratio(model, ee, s["q0"], tasks.fig8_path(p, dt), dt)
        assert err <= 0.005 and inside
        assert abs(r / s["ratio"] - 1) <= 0.15
        assert r == pytest.approx(s["ratio_est"])


def test_scenarios_are_reproducible():
    model = model_of("fr3")
    a = tasks.fig8_scenarios(model, "fr3", 2, seed=7)
    assert_same(a, tasks.fig8_scenarios(model, "fr3", 2, seed=7))
    assert a[0]["params"]["period"] != tasks.fig8_scenarios(model, "fr3", 2, seed=8)[0]["params"]["period"]
    b = tasks.pickplace_scenarios(model, "fr3", 2, seed=7)
    assert_same(b, tasks.pickplace_scenarios(model, "fr3", 2, seed=7))
    assert not np.array_equal(b[0]["goals"], tasks.pickplace_scenarios(model, "fr3", 2, seed=8)[0]["goals"])


@pytest.mark.parametrize("plant", PLANTS)
def test_pickplace_scenarios_guarantees(plant):
    model = model_of(plant)
    ee = tasks.ee_frame_of(plant)
    scen = tasks.pickplace_scenarios(model, plant, 3, seed=1, n_goals=3)
    lo, hi = tasks.GOAL_BOX[plant]
    for s in scen:
        assert s["goals"].shape == (3, 3) and s["q_goals"].shape == (3, model.nq)
        assert np.all(s["goals"] >= lo) and np.all(s["goals"] <= hi)
        assert np.all(np.linalg.norm(np.diff(s["goals"], axis=0), axis=1) >= 0.1)
        assert s["ramp"] in (0.0, 0.6, 1.2)
        assert np.max(np.abs(s["q0"] - tasks.Q_READY[plant])) <= 0.05
        for g in s["goals"]:  # re-measured: reachable from the ready pose, inside the limits by Q_MARGIN
            qg, err = tasks.ik_track(model, ee, tasks.Q_READY[plant], g[None], first_iters=100)
            assert err[0] <= 0.005 and tasks.within_q_limits(model, qg, tasks.Q_MARGIN)


def test_fig8_reference_layout_and_padding():
    model = model_of("indy7")
    s = tasks.fig8_scenarios(model, "indy7", 1, seed=3)[0]
    N, dt, period = 32, s["dt"], s["params"]["period"]
    ref, sim_time = tasks.fig8_reference(s, N, periods=2)
    assert sim_time == pytest.approx(2 * period)
    r = ref.reshape(-1, 6)
    assert ref.ndim == 1 and len(r) >= round(sim_time / dt) + N
    assert not r[:, 3:].any()
    # sample k is the figure-8 at t = k dt (the scenario's dt = the solver's knot spacing)
    np.testing.assert_allclose(r[:, :3], tasks.figure8(dt, **{**s["params"], "cycles": len(r) * dt / period}),
                               atol=1e-12)
    # the last window start still has N knots
    k_last = int(math.floor(sim_time / dt))
    assert r[k_last:k_last + N].shape == (N, 6)


def test_infeasible_draws_are_redrawn_not_returned(monkeypatch):
    """With amplitudes up to 0.4 m some indy7 figure-8s leave the position limits: those draws are
    redrawn (seed 0: 4 candidates for 3 scenarios), and what comes back still meets the guarantees."""
    model = model_of("indy7")
    monkeypatch.setitem(tasks.FIG8_AMPLITUDE, "indy7", (0.25, 0.4))
    seen = []
    real = tasks.feasible_fig8

    def spy(*args, **kw):
        res = real(*args, **kw)
        seen.append(res)
        return res

    monkeypatch.setattr(tasks, "feasible_fig8", spy)
    scen = tasks.fig8_scenarios(model, "indy7", 3, seed=0)
    assert len(seen) > 3 and any(not r["within_q_limits"] for r in seen)
    for s in scen:
        r, err, inside = tasks.joint_speed_ratio(model, "EE", s["q0"], tasks.fig8_path(s["params"], s["dt"]), s["dt"])
        assert inside and err <= 0.005 and abs(r / s["ratio"] - 1) <= 0.15
    monkeypatch.setattr(tasks, "feasible_fig8", real)
    with pytest.raises(RuntimeError, match="draws gave only 0 of 1"):  # nothing can pass: bounded, then a clear error
        tasks.fig8_scenarios(model, "indy7", 1, seed=0, ik_err_max=1e-12)
