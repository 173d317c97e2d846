"""Poses through the Python layers (issue 30): rotations, windows with orientations, the pose
references (PoseFigure8, tool_down, PoseReference), the BSQP controller's reference path (slots
[3:6] and the orientation weight from the window; a position-only window solves bit for bit as
before) and the OSC planner's pose target; every bad input refused by field name."""
import math

import numpy as np
import pinocchio as pin
import pytest

import gato
from gato import references as R
from gato.planners.bsqp_planner import BSQPPlanner
from gato.planners.osc_planner import OSCPlanner
from gato.planners.shipped_weights import ORIENTATION_WEIGHTS

Q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
X0 = np.concatenate([Q0, np.zeros(7)])


def _rng():
    return np.random.default_rng(7)


def test_rotations_match_pinocchio_and_round_trip():
    r = _rng().normal(size=(200, 3))
    r *= (_rng().uniform(0, math.pi, 200) / np.linalg.norm(r, axis=1))[:, None]
    r[:3] = [[0, 0, 0], [1e-9, 0, 0], [math.pi, 0, 0]]
    q = R.rotvec_to_quat(r)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-14)
    for ri, qi in zip(r, q):
        R_pin = pin.exp3(ri)
        x, y, z, w = qi
        R_q = pin.Quaternion(w, x, y, z).toRotationMatrix()
        np.testing.assert_allclose(R_q, R_pin, atol=1e-12)
    np.testing.assert_allclose(R.quat_to_rotvec(q)[3:], r[3:], atol=1e-12)
    np.testing.assert_allclose(R.quat_to_rotvec(-q)[3:], r[3:], atol=1e-12)   # q and -q: one rotation
    a, b = q[10], q[11]
    np.testing.assert_allclose(pin.exp3(R.quat_to_rotvec(R.quat_multiply(a, b))),
                               pin.exp3(r[10]) @ pin.exp3(r[11]), atol=1e-12)


def test_window_orientations_layout_and_resampling():
    pos = np.zeros((4, 3))
    quats = R.rotvec_to_quat(np.outer([0.0, 0.2, 0.4, 0.6], [0, 1, 0]))
    w = R.ReferenceWindow(0, 0.1, pos, orientations=quats, orientation_weight=3.0)
    np.testing.assert_allclose(w.orientations, np.outer([0.0, 0.2, 0.4, 0.6], [0, 1, 0]), atol=1e-15)
    flat = w.solver_layout().reshape(4, 6)
    assert np.array_equal(flat[:, 3:], w.orientations) and w.orientation_weight == 3.0
    # knots are copied exactly; between knots the rotation interpolates at constant rate; clamped outside
    s = w.sample_orientations(0, 4, 0.1)
    assert np.array_equal(s, w.orientations)
    mid = w.sample_orientations(sec := R.sec_to_ns(0.05), 3, 0.1)
    np.testing.assert_allclose(mid[:, 1], [0.1, 0.3, 0.5], atol=1e-12)
    assert np.array_equal(w.sample_orientations(-R.sec_to_ns(1.0), 1, 0.1), w.orientations[:1])
    np.testing.assert_allclose(w.solver_reference(sec, 3, 0.1).reshape(3, 6)[:, 3:], mid)
    # position only: no orientations, zeros in the slots, as before
    p = R.ReferenceWindow(0, 0.1, pos)
    assert p.orientations is None and p.sample_orientations(0, 2, 0.1) is None
    assert not np.any(p.solver_layout().reshape(4, 6)[:, 3:])


@pytest.mark.parametrize("kw, field", [
    (dict(orientations=np.tile([0.0, 0.0, 0.0, 2.0], (4, 1))), "orientations: quaternion 0 has norm 2"),
    (dict(orientations=np.tile([0.0, 0.0, 0.0, 0.0], (4, 1))), "orientations: quaternion 0 has norm 0"),
    (dict(orientations=np.tile([np.nan, 0.0, 0.0, 1.0], (4, 1))), "orientations: row 0 contains NaN"),
    (dict(orientations=np.tile([0.0, np.inf, 0.0], (4, 1))), "orientations: row 0 contains NaN or Inf"),
    (dict(orientations=np.tile([3.2, 0.0, 0.0], (4, 1))), "orientations: rotation vector 0 has norm 3.2"),
    (dict(orientations=np.zeros((3, 3))), r"orientations: expected shape \(4, 3\)"),
    (dict(orientations=np.zeros((4, 3)), orientation_weight=-1.0), "orientation_weight: expected a finite value >= 0"),
    (dict(orientations=np.zeros((4, 3)), orientation_weight=float("nan")), "orientation_weight"),
    (dict(orientation_weight=1.0), "orientation_weight: given without orientations"),
])
def test_window_refuses_bad_orientations_by_field(kw, field):
    with pytest.raises(ValueError, match=field):
        R.ReferenceWindow(0, 0.1, np.zeros((4, 3)), **kw)


def test_pose_references():
    f8 = R.PoseFigure8([0.5, 0.0, 0.5], 0.1, 0.08, theta=0.3, period=4.0, orientation_weight=5.0)
    plain = R.Figure8([0.5, 0.0, 0.5], 0.1, 0.08, theta=0.3, period=4.0)
    t = np.linspace(0.0, 4.0, 81)
    assert np.array_equal(f8.positions(t), plain.positions(t)) and np.array_equal(f8.velocities(t), plain.velocities(t))
    R0 = pin.exp3(R.TOOL_DOWN)
    assert np.allclose(R0[:, 2], [0, 0, -1])                                     # tool z axis down
    ang = [pin.log3(R0.T @ pin.exp3(r)) for r in f8.orientations(t)]
    # R(t) = Rot(h, 30 deg sin(w t)) R0 with h = (cos 0.3, sin 0.3, 0): the relative rotation in world axes
    rel = [pin.log3(pin.exp3(r) @ R0.T) for r in f8.orientations(t)]
    h = np.array([math.cos(0.3), math.sin(0.3), 0.0])
    np.testing.assert_allclose(rel, np.outer(math.radians(30) * np.sin(2 * math.pi * t / 4.0), h), atol=1e-12)
    assert max(np.linalg.norm(ang, axis=1)) == pytest.approx(math.radians(30), abs=1e-12)
    w = f8.window(1.0, 8, 0.05)
    assert w.orientation_weight == 5.0 and np.allclose(w.orientations, f8.orientations(1.0 + 0.05 * np.arange(8)))
    # a constant tool-down pose over any position reference; its windows keep the reference's own
    traj = R.SampledTrajectory(np.arange(30.0).reshape(10, 3) / 100, 0.1)
    td = R.tool_down(traj)
    wt = td.window(0.25, 4, 0.1)
    assert np.array_equal(wt.positions, traj.window(0.25, 4, 0.1).positions)
    assert np.allclose(wt.orientations, R.TOOL_DOWN) and wt.orientation_weight is None
    assert td.covers(0.0, 10, 0.1) and not td.covers(0.1, 10, 0.1) and td.done(1.5)
    with pytest.raises(ValueError, match="axis: expected a finite, non-zero horizontal axis"):
        R.PoseFigure8([0.5, 0, 0.5], 0.1, 0.1, axis=[0, 0, 1])
    with pytest.raises(ValueError, match="sweep_deg"):
        R.PoseFigure8([0.5, 0, 0.5], 0.1, 0.1, sweep_deg=120)
    with pytest.raises(ValueError, match="orientation: quaternion 0 has norm"):
        R.PoseReference(plain, [0.0, 0.0, 0.5, 0.5])
    with pytest.raises(ValueError, match="orientation_weight"):
        R.tool_down(plain, orientation_weight=-2.0)
    with pytest.raises(ValueError, match="position: expected a gato.references.Reference"):
        R.PoseReference(np.zeros(3), R.TOOL_DOWN)


def _planner(**cfg):
    return BSQPPlanner("iiwa14", dict(dict(N=16, dt=0.02, limits="off"), **cfg))


class _Spy:
    """Records the reference and orientation weights of every solve."""

    def __init__(self, solver):
        self.solver, self.calls = solver, []
        self._solve = solver.solve
        solver.solve = self

    def __call__(self, x, ref, warm, **kw):
        p = self.solver.params
        self.calls.append((np.array(ref), p.rot_cost, p.N_rot_cost))
        return self._solve(x, ref, warm, **kw)


def test_controller_fills_slots_and_weights_from_the_window():
    pl = _planner()
    spy = _Spy(pl.solver)
    ee = pl.solver.ee_pos(Q0)
    posew = R.tool_down(R.Hold(ee)).window(0.0, 16, 0.02)
    pl.reset(X0)
    pl.step(X0, posew)
    ref, rc, nrc = spy.calls[-1]
    assert np.array_equal(ref, posew.solver_layout())
    assert (rc, nrc) == (ORIENTATION_WEIGHTS["rot_cost"], ORIENTATION_WEIGHTS["N_rot_cost"])
    pl.step(X0, R.tool_down(R.Hold(ee), orientation_weight=7.5).window(0.02, 16, 0.02))
    assert spy.calls[-1][1:] == (7.5, 7.5)
    # another grid: resampled onto the solver's (orientations too)
    coarse = R.tool_down(R.Hold(ee)).window(0.04, 8, 0.04)
    pl.step(X0, coarse)
    assert np.array_equal(spy.calls[-1][0], coarse.solver_reference(coarse.stamp_ns, 16, 0.02))
    pl.step(X0, R.Hold(ee).window(0.06, 16, 0.02))                    # position only: the term off
    assert spy.calls[-1][1:] == (0.0, 0.0) and not np.any(spy.calls[-1][0].reshape(16, 6)[:, 3:])
    own = _planner(orientation_weights=(1.5, 4.0))
    s2 = _Spy(own.solver)
    own.step(X0, posew)
    assert s2.calls[-1][1:] == (1.5, 4.0)
    with pytest.raises(ValueError, match="orientation_weights: expected"):
        _planner(orientation_weights=(-1.0, 1.0))
    with pytest.raises(ValueError, match="orientation_weights: expected"):
        _planner(orientation_weights=(1.0,))


def test_position_only_windows_solve_bit_for_bit_as_before():
    """A planner that tracked a pose and then gets position-only windows plans exactly what a
    planner that only ever saw position-only windows plans (the weights go back to 0)."""
    ee = _planner().solver.ee_pos(Q0)
    fig = R.Figure8(ee, 0.05, 0.03, period=2.0)
    a, b = _planner(), _planner()
    a.reset(X0)
    b.reset(X0)
    b.step(X0, R.tool_down(fig).window(0.0, 16, 0.02))
    b.reset(X0)
    for k in range(4):
        w = fig.window(0.02 * k, 16, 0.02)
        ua, ub = a.step(X0, w).u, b.step(X0, w).u
        assert np.array_equal(ua, ub)
    assert b.solver.params.rot_cost == 0.0 and b.solver.params.N_rot_cost == 0.0


def test_bsqp_turns_the_tool_toward_the_window_orientation():
    """Closed loop on the solver's own model (sim_forward): a target rotated 20 deg about world x
    from the start orientation; the tool turns toward it while the position holds."""
    pl = _planner()
    s = pl.solver
    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    data = model.createData()
    fid = model.getFrameId(gato.robot_info("iiwa14")["ee_frame"])

    def rot(q):
        pin.forwardKinematics(model, data, q)
        return pin.updateFramePlacement(model, data, fid).rotation.copy()

    target = pin.log3(pin.exp3(np.array([math.radians(20), 0, 0])) @ rot(Q0))
    ref = R.PoseReference(R.Hold(s.ee_pos(Q0)), target, orientation_weight=10.0)
    x = X0.copy()
    pl.reset(x)
    for k in range(40):
        u = pl.step(x, ref.window(0.02 * k, 16, 0.02)).u
        x = np.asarray(s.sim_forward(x, u, 0.02), dtype=np.float64).reshape(-1)
    err = np.degrees(np.linalg.norm(pin.log3(pin.exp3(target).T @ rot(x[:7]))))
    assert err < 5.0, err
    assert np.linalg.norm(s.ee_pos(x[:7]) - s.ee_pos(Q0)) < 0.02


def test_osc_tracks_the_window_orientation():
    """The OSC planner takes knot 0's orientation of a pose window (its reset orientation for a
    position-only one): 1 ms ticks on pinocchio, 0.5 s, a target 15 deg from the start."""
    from gato import simloop as S

    urdf = str(gato.robot_urdf("iiwa14"))
    ee_frame = gato.robot_info("iiwa14")["ee_frame"]
    kin = S.EEKinematics(urdf, ee_frame)
    model, data = kin.model, kin.data
    fid = model.getFrameId(ee_frame)

    def rot(q):
        pin.forwardKinematics(model, data, q)
        return pin.updateFramePlacement(model, data, fid).rotation.copy()

    target = pin.log3(pin.exp3(np.array([0, math.radians(15), 0])) @ rot(Q0))
    for orient, want in ((target, target), (None, pin.log3(rot(Q0)))):
        pl = OSCPlanner("iiwa14")
        hold = R.Hold(kin.ee_pos(Q0))
        ref = hold if orient is None else R.PoseReference(hold, orient)
        sim = S.Simulation(S.make_world("pinocchio", urdf, ee_frame=ee_frame), Q0, sim_dt=0.001, kinematics=kin)
        rec = S.run_closed_loop(sim, pl, S.TrackingTask(ref, pl.N, pl.dt, 0.5))
        q_end = np.asarray(rec.stats()["joint_positions"])[-1]
        err = np.degrees(np.linalg.norm(pin.log3(pin.exp3(want).T @ rot(q_end))))
        assert err < 1.0, (orient is None, err)


def test_mpc_policy_hands_pose_windows_to_the_controller():
    """MPCPolicy over a pose reference solves with the orientation term on (the window's weight);
    over a position-only reference exactly as before (the flat layout, the term off)."""
    from gato.frontends.policy import MPCPolicy

    pl = _planner()
    spy = _Spy(pl.solver)
    ee = pl.solver.ee_pos(Q0)
    pol = MPCPolicy(pl.controller, R.tool_down(R.Hold(ee), orientation_weight=6.0), 0.02)
    pol.reset(X0)
    pol(X0)
    assert spy.calls[-1][1:] == (6.0, 6.0) and np.allclose(spy.calls[-1][0].reshape(16, 6)[:, 3:], R.TOOL_DOWN)
    pos = MPCPolicy(pl.controller, R.Hold(ee), 0.02)
    pos.reset(X0)
    pos(X0)
    assert spy.calls[-1][1:] == (0.0, 0.0)
    assert np.array_equal(spy.calls[-1][0], R.Hold(ee).window(0.02, 16, 0.02).solver_layout())


def test_flat_references_keep_the_solvers_own_orientation_weights():
    """A flat reference solves with the weights the solver has (also ones set after the controller
    was built); after a window replaced them, the next flat reference gets them back."""
    pl = _planner()
    spy = _Spy(pl.solver)
    ee = pl.solver.ee_pos(Q0)
    flat = R.tool_down(R.Hold(ee)).window(0.0, 16, 0.02).solver_layout()
    pl.solver.set_cost_weights(rot_cost=3.0, N_rot_cost=4.0)
    pl.reset(X0)
    pl.controller.step(X0, flat)
    assert spy.calls[-1][1:] == (3.0, 4.0)
    pl.step(X0, R.Hold(ee).window(0.02, 16, 0.02))
    assert spy.calls[-1][1:] == (0.0, 0.0)
    pl.controller.step(X0, flat)
    assert spy.calls[-1][1:] == (3.0, 4.0)
