"""gato::EmbeddedMpc (the MPC loop of the plugin's embedded mode) through gato._core, no ROS.

Checked against the pieces it is made of, driven from Python: the raw solver (gato._core
Solver64) for the cold start (hold warm start + warm-up solves) and the time-shifted warm
start, gato.references.ReferenceWindow for the reference sampling, the solver's EE
kinematics for the hold reference.
"""
import numpy as np
import pytest

import gato
from gato._native import core
from gato.references import ReferenceWindow

ROBOT = "iiwa14"
N, DT = 16, 0.03125
T0 = 5 * 10**9


@pytest.fixture(scope="module")
def robot():
    info = gato.robot_info(ROBOT)
    return str(gato.robot_urdf(ROBOT)), info["ee_frame"]


def x0():
    q = np.array([0.1, 0.5, -0.2, -1.2, 0.1, 0.6, 0.0])
    return np.concatenate([q, np.linspace(-0.1, 0.1, 7)])


def hold_warm(x, nv=7):
    nx = 2 * nv
    xu = np.zeros(N * (nx + nv) - nv)
    for k in range(N):
        xu[k * (nx + nv):k * (nx + nv) + nx] = x
    return xu


def shift(xu, s, nv=7):
    """The documented time shift: drop s knots, repeat the last valid state and torque."""
    nx, stride = 2 * nv, 3 * nv
    knots = [xu[k * stride:k * stride + nx].copy() for k in range(N)]
    us = [xu[k * stride + nx:(k + 1) * stride].copy() for k in range(N - 1)]
    knots = knots[s:] + [knots[-1]] * s
    us = us[s:] + [us[-1] if len(us) else np.zeros(nv)] * s
    out = np.zeros_like(xu)
    for k in range(N):
        out[k * stride:k * stride + nx] = knots[k]
        if k < N - 1:
            out[k * stride + nx:(k + 1) * stride] = us[k]
    return out


def test_cold_start_and_shifted_step_match_the_raw_solver(robot):
    urdf, ee = robot
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, {}, warmup_solves=3)
    ref_solver = core.Solver64(urdf, ee, 1, N, DT, {}, 1)
    win = ReferenceWindow(stamp_ns=T0 - 10**8, knot_dt=0.05,
                          positions=np.array([[0.5, 0.0, 0.6], [0.55, 0.05, 0.6], [0.6, 0.1, 0.55], [0.6, 0.1, 0.5]]))
    x = x0()

    assert mpc.step(T0, x, win.positions, win.stamp_ns, win.knot_dt)
    assert mpc.last_was_cold
    ref = win.solver_reference(T0, N, DT)
    np.testing.assert_array_equal(mpc.reference, ref)
    xu = hold_warm(x)[None, :].copy()
    for _ in range(3 + 1):
        ref_solver.solve(x[None, :], ref[None, :], xu)
    np.testing.assert_allclose(mpc.xu, xu[0], rtol=0, atol=1e-12)
    plan_x, plan_u = mpc.plan_x, mpc.plan_u
    assert plan_x.shape == (N, 14) and plan_u.shape == (N - 1, 7)
    np.testing.assert_array_equal(plan_x[3], xu[0, 3 * 21:3 * 21 + 14])
    np.testing.assert_array_equal(plan_u[3], xu[0, 3 * 21 + 14:4 * 21])

    # Two knots later (plus 3 ms): the warm start shifts by round(elapsed / dt) = 2 knots.
    t1 = T0 + 2 * int(DT * 1e9) + 3_000_000
    x1 = x + 0.01
    assert mpc.step(t1, x1, win.positions, win.stamp_ns, win.knot_dt)
    assert not mpc.last_was_cold
    ref1 = win.solver_reference(t1, N, DT)
    np.testing.assert_array_equal(mpc.reference, ref1)
    xu1 = shift(xu[0], 2)[None, :].copy()
    ref_solver.solve(x1[None, :], ref1[None, :], xu1)
    np.testing.assert_allclose(mpc.xu, xu1[0], rtol=0, atol=1e-12)


def test_without_a_reference_it_holds_the_ee_position_of_the_cold_start(robot):
    urdf, ee = robot
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, {}, warmup_solves=1)
    solver = core.Solver64(urdf, ee, 1, N, DT, {}, 1)
    x = x0()
    assert mpc.step(T0, x)
    p = solver.frame_position(x[:7], -1)
    np.testing.assert_allclose(mpc.reference.reshape(N, 6), np.tile(np.r_[p, 0, 0, 0], (N, 1)), atol=1e-12)
    # a later step without a window keeps that point, wherever the arm is now
    assert mpc.step(T0 + int(DT * 1e9), x + 0.05)
    np.testing.assert_allclose(mpc.reference.reshape(N, 6)[:, :3], np.tile(p, (N, 1)), atol=1e-12)
    mpc.reset()
    assert mpc.step(T0 + 2 * int(DT * 1e9), x + 0.05) and mpc.last_was_cold


def test_bad_arguments_raise_value_errors(robot):
    urdf, ee = robot
    with pytest.raises(ValueError, match="N"):
        core.EmbeddedMpc(urdf, ee, 1, DT, {})
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, {})
    with pytest.raises(ValueError, match="x: expected shape"):
        mpc.step(T0, np.zeros(7))
    with pytest.raises(ValueError, match="ref_positions"):
        mpc.step(T0, x0(), np.zeros((4, 2)), T0, 0.05)
    with pytest.raises(ValueError, match="ref_knot_dt"):
        mpc.step(T0, x0(), np.zeros((4, 3)), T0, 0.0)


def test_ee_position_error_is_the_measured_ee_against_knot_0_of_the_solved_reference(robot):
    """Issue 30: what the plugin's ~/status reports as ee_position_error in embedded mode, as the
    controller node does: the EE at the state the step solved from against knot 0 of the
    reference it solved toward (the window sampled at the state's time, or the hold point)."""
    urdf, ee = robot
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, {}, warmup_solves=1)
    solver = core.Solver64(urdf, ee, 1, N, DT, {}, 1)
    assert np.isnan(mpc.ee_position_error)       # no step yet
    win = ReferenceWindow(stamp_ns=T0 - 10**8, knot_dt=0.05,
                          positions=np.array([[0.5, 0.0, 0.6], [0.55, 0.05, 0.6], [0.6, 0.1, 0.55]]))
    x = x0()
    for k, xk in enumerate((x, x + 0.02)):
        t = T0 + k * int(DT * 1e9)
        assert mpc.step(t, xk, win.positions, win.stamp_ns, win.knot_dt)
        want = np.linalg.norm(solver.frame_position(xk[:7], -1) - win.solver_reference(t, N, DT)[:3])
        assert want > 1e-3
        assert mpc.ee_position_error == pytest.approx(want, rel=1e-12)
    # no window: against the hold point (the EE of the cold start's state)
    mpc.reset()
    assert mpc.step(T0 + 3 * int(DT * 1e9), x)
    assert mpc.ee_position_error == pytest.approx(0.0, abs=1e-12)
    assert mpc.step(T0 + 4 * int(DT * 1e9), x + 0.05)
    want = np.linalg.norm(solver.frame_position(x[:7] + 0.05, -1) - solver.frame_position(x[:7], -1))
    assert mpc.ee_position_error == pytest.approx(want, rel=1e-12)


def _pose_window(urdf, ee, x):
    """A 4-knot window around the EE at x whose orientations turn away from the EE's (rotation
    vectors) and the same one's unit quaternions xyzw (gato_msgs/EEReference.orientations)."""
    import pinocchio as pin

    from gato.references import rotvec_to_quat

    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    pin.forwardKinematics(model, data, x[:7])
    M = pin.updateFramePlacement(model, data, model.getFrameId(ee))
    rv = np.array([pin.log3(M.rotation @ pin.exp3(np.array([0.0, 0.1 * k, 0.05 * k]))) for k in range(4)])
    pos = M.translation + np.array([[0.0, 0.0, 0.0], [0.02, 0.01, 0.0], [0.04, 0.0, -0.01], [0.05, -0.01, -0.02]])
    win = ReferenceWindow(stamp_ns=T0 - 10**8, knot_dt=0.05, positions=pos, orientations=rv)
    return win, rotvec_to_quat(rv), model, data


def test_a_window_with_orientations_solves_the_pose_problem(robot):
    """Issue 30: the embedded loop solves toward the window's orientations as the Python controller
    does: slots [3:6] = the orientations slerped onto the solver's knots (ReferenceWindow
    .sample_orientations), the settings' rot_cost / N_rot_cost on, q_cost / N_cost times
    pose_ee_weight_scale; ee_orientation_error = the angle of R_ref^T R_ee at knot 0."""
    import pinocchio as pin

    urdf, ee = robot
    rot = {"rot_cost": 8.0, "N_rot_cost": 8.0}
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, rot, warmup_solves=2, pose_ee_weight_scale=2.0)
    sp = gato.SolverParams()
    raw = core.Solver64(urdf, ee, 1, N, DT, {**rot, "q_cost": 2 * sp.q_cost, "N_cost": 2 * sp.N_cost}, 1)
    x = x0()
    win, quats, model, data = _pose_window(urdf, ee, x)
    assert np.isnan(mpc.ee_orientation_error)
    assert mpc.step(T0, x, win.positions, win.stamp_ns, win.knot_dt, quats)
    ref = win.solver_reference(T0, N, DT)
    assert np.any(ref.reshape(N, 6)[:, 3:] != 0.0)
    np.testing.assert_allclose(mpc.reference, ref, rtol=0, atol=1e-12)
    xu = hold_warm(x)[None, :].copy()
    for _ in range(2 + 1):
        raw.solve(x[None, :], mpc.reference[None, :], xu)
    np.testing.assert_allclose(mpc.xu, xu[0], rtol=0, atol=1e-12)
    pin.forwardKinematics(model, data, x[:7])
    R = pin.updateFramePlacement(model, data, model.getFrameId(ee)).rotation
    want = np.linalg.norm(pin.log3(pin.exp3(mpc.reference[3:6]).T @ R))
    assert want > 1e-3
    assert mpc.ee_orientation_error == pytest.approx(want, rel=1e-9)
    # the same window without its orientations: the position-only step, NaN orientation error
    assert mpc.step(T0 + int(DT * 1e9), x, win.positions, win.stamp_ns, win.knot_dt)
    assert np.all(mpc.reference.reshape(N, 6)[:, 3:] == 0.0) and np.isnan(mpc.ee_orientation_error)


def test_position_only_steps_are_as_before_whatever_the_orientation_settings(robot):
    """rot_cost / N_rot_cost and pose_ee_weight_scale act on windows with orientations only: a
    position-only run is bit for bit the run without them."""
    urdf, ee = robot
    a = core.EmbeddedMpc(urdf, ee, N, DT, {"rot_cost": 8.0, "N_rot_cost": 8.0}, warmup_solves=2,
                         pose_ee_weight_scale=3.0)
    b = core.EmbeddedMpc(urdf, ee, N, DT, {}, warmup_solves=2)
    x = x0()
    win, _, _, _ = _pose_window(urdf, ee, x)
    for k in range(3):
        t = T0 + k * int(DT * 1e9)
        assert a.step(t, x, win.positions, win.stamp_ns, win.knot_dt)
        assert b.step(t, x, win.positions, win.stamp_ns, win.knot_dt)
        np.testing.assert_array_equal(a.xu, b.xu)


def test_bad_orientations_and_scales_raise_value_errors(robot):
    urdf, ee = robot
    mpc = core.EmbeddedMpc(urdf, ee, N, DT, {})
    pos = np.zeros((2, 3)) + 0.5
    for bad in (np.zeros((2, 4)), np.array([[0.0, 0.0, 0.0, 1.01], [0.0, 0.0, 0.0, 1.0]]),
                np.array([[np.nan, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]]), np.zeros((3, 4))):
        with pytest.raises(ValueError, match="ref_orientations"):
            mpc.step(T0, x0(), pos, T0, 0.05, bad)
    with pytest.raises(ValueError, match="pose_ee_weight_scale"):
        core.EmbeddedMpc(urdf, ee, N, DT, {}, pose_ee_weight_scale=0.0)
    with pytest.raises(ValueError, match="pose_ee_weight_scale"):
        mpc.pose_ee_weight_scale = -1.0
