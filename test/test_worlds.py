"""gato.worlds: MuJoCoWorld and PinocchioWorld against the solver's dynamics and against physics.

Model alignment is the dynamics fingerprint (every probe, per-joint inertia
response ratios); integration is checked against the known one-step error of
each integrator; contact reporting against a static press whose answer is
known in closed form.
"""
import numpy as np
import pytest

import gato
import gato.fingerprint as fp
from gato import tasks
from gato.worlds import MuJoCoWorld, PinocchioWorld, probe_tip_drop

mujoco = pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

ARMS = ("iiwa14", "indy7")


def urdf(plant):
    return str(gato.robot_urdf(plant))


def pin_model(plant):
    model = pin.buildModelFromUrdf(urdf(plant))
    return model, model.createData()


def ee_pos(model, data, frame, q):
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(frame)].translation.copy()


@pytest.fixture(scope="module", params=ARMS)
def plant(request):
    return request.param


# ------------------------------------------------------- model alignment
def test_mujoco_joint_order_is_pinocchios(plant):
    w = MuJoCoWorld(urdf(plant))
    model, _ = pin_model(plant)
    assert w.joint_names == list(model.names)[1:] == gato.robot_info(plant)["joints"]
    assert (w.nq, w.nv) == (model.nq, model.nv)


def test_worlds_pass_the_fingerprint_against_the_solver(plant):
    solver = gato.BSQP(urdf(plant), 1, 8, 0.01)
    res_solver = fp.check_solver(solver)
    assert res_solver["ok"], fp.report(res_solver)
    for world, tol in ((MuJoCoWorld(urdf(plant)), 1e-7), (PinocchioWorld(urdf(plant)), 1e-12)):
        res = fp.check(world.qdd, plant)
        assert res["ok"], fp.report(res)
        assert res["max_rel_err"] < tol  # measured: MuJoCo 5e-9 (iiwa14) / 3e-14 (indy7), pinocchio 0
        np.testing.assert_allclose(res["inertia_ratio"], 1.0, atol=0.02)
        np.testing.assert_allclose(res["inertia_ratio"], 1.0, atol=tol)
    # and directly against the solver's own dynamics off the probes
    mj, sq = MuJoCoWorld(urdf(plant)), fp.solver_qdd_fn(solver)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, qd, u = rng.uniform(-1, 1, mj.nq), rng.uniform(-1, 1, mj.nv), rng.uniform(-10, 10, mj.nv)
        a_ref = sq(q, qd, u)
        np.testing.assert_allclose(mj.qdd(q, qd, u), a_ref, rtol=0, atol=1e-7 * np.max(np.abs(a_ref)))


# ------------------------------------------------------- validation / determinism
@pytest.mark.parametrize("kind", ["mujoco", "pinocchio"])
def test_nonfinite_or_misshaped_arguments_raise_naming_the_argument(kind):
    w = MuJoCoWorld(urdf("iiwa14")) if kind == "mujoco" else PinocchioWorld(urdf("iiwa14"))
    q, dq, u = tasks.Q_READY["iiwa14"], np.zeros(7), np.zeros(7)
    with pytest.raises(ValueError, match=r"^u: contains NaN or Inf"):
        w.step(q, dq, np.full(7, np.nan), 0.001)
    with pytest.raises(ValueError, match=r"^u: contains NaN or Inf"):
        w.step(q, dq, np.array([0, 0, np.inf, 0, 0, 0, 0]), 0.001)
    with pytest.raises(ValueError, match=r"^q: contains NaN or Inf"):
        w.step(np.full(7, np.nan), dq, u, 0.001)
    with pytest.raises(ValueError, match=r"^dq: contains NaN or Inf"):
        w.step(q, np.full(7, -np.inf), u, 0.001)
    with pytest.raises(ValueError, match=r"^u: expected shape \(7,\)"):
        w.step(q, dq, np.zeros(6), 0.001)
    with pytest.raises(ValueError, match=r"^sim_dt"):
        w.step(q, dq, u, float("nan"))


def test_mismatched_timestep_raises():
    q, dq, u = tasks.Q_READY["indy7"], np.zeros(6), np.zeros(6)
    with pytest.raises(ValueError, match=r"sim_dt: 0.002 s does not match the world's timestep 0.001 s"):
        MuJoCoWorld(urdf("indy7"), timestep=0.001).step(q, dq, u, 0.002)
    with pytest.raises(ValueError, match=r"does not match the world's timestep"):
        PinocchioWorld(urdf("indy7"), timestep=0.001).step(q, dq, u, 0.0005)
    with pytest.raises(ValueError, match=r"sim_dt: expected a finite step > 0"):
        PinocchioWorld(urdf("indy7")).step(q, dq, u, 0.0)
    # a free PinocchioWorld accepts any positive step
    assert PinocchioWorld(urdf("indy7")).step(q, dq, u, 0.0005)[0].shape == (6,)


def test_mujoco_world_is_deterministic_on_repeat():
    rng = np.random.default_rng(11)
    torques = rng.uniform(-5, 5, (200, 7))

    def run(world):
        q, dq = tasks.Q_READY["iiwa14"].copy(), np.zeros(7)
        out = []
        for u in torques:
            q, dq = world.step(q, dq, u, 0.001)
            out.append(np.concatenate([q, dq]))
        return np.array(out)

    w = MuJoCoWorld(urdf("iiwa14"))
    a = run(w)
    b = run(w)  # same world again: no state leaks between runs
    c = run(MuJoCoWorld(urdf("iiwa14")))
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert np.all(np.isfinite(a)) and np.ptp(a[:, 0]) > 0  # it moved


# ------------------------------------------------------- integration
def test_free_fall_one_step_mujoco_euler_vs_pinocchio_rk4(plant):
    """From rest, semi-implicit Euler (MuJoCo) and RK4 (pinocchio) differ by known terms.

    Euler: v1 = a0 h, q1 = q0 + a0 h^2. Exact / RK4: v(h) = a0 h + a0' h^2/2 + a0'' h^3/6 + ...,
    q(h) = q0 + a0 h^2/2 + a0' h^3/6 + O(h^4), with a0' = da/dt = 0 at rest (a depends on q
    only through v, and on v quadratically). So q_mj - q_rk4 = a0 h^2/2 + O(h^4) and
    v_mj - v_rk4 = O(h^3): after removing a0 h^2 / 2 the residuals must scale by 16 and 8
    when h doubles, and stay at the measured 1e-10 rad / 1e-6 rad/s sizes (any model
    mismatch would leave an O(h) velocity error instead, ~1e-3 rad/s here).
    """
    model, data = pin_model(plant)
    q0, v0, u = tasks.Q_READY[plant], np.zeros(model.nv), np.zeros(model.nv)
    a0 = pin.aba(model, data, q0, v0, u)
    res = {}
    for h in (1e-3, 2e-3):
        qm, vm = MuJoCoWorld(urdf(plant), timestep=h).step(q0, v0, u, h)
        qp, vp = PinocchioWorld(urdf(plant)).step(q0, v0, u, h)
        res[h] = (np.max(np.abs(qm - qp - 0.5 * h * h * a0)), np.max(np.abs(vm - vp)))
        # Euler's v from rest; the two models agree to ~5e-9 relative (iiwa14's MuJoCo inertias)
        assert np.max(np.abs(vm - a0 * h)) < 1e-8 * h * np.max(np.abs(a0))
    dq1, dv1 = res[1e-3]
    dq2, dv2 = res[2e-3]
    assert dq1 < 1e-9 and dv1 < 1e-6  # measured: 7.8e-11 / 3.1e-7 (iiwa14), 7.2e-11 / 2.9e-7 (indy7)
    assert 12 < dq2 / dq1 < 20  # O(h^4)
    assert 6.4 < dv2 / dv1 < 9.6  # O(h^3)


def test_mujoco_rk4_matches_pinocchio_rk4_step(plant):
    model, _ = pin_model(plant)
    rng = np.random.default_rng(5)
    q0 = tasks.Q_READY[plant] + rng.uniform(-0.3, 0.3, model.nq)
    v0, u = rng.uniform(-1, 1, model.nv), rng.uniform(-5, 5, model.nv)
    qm, vm = MuJoCoWorld(urdf(plant), timestep=1e-3, integrator="rk4").step(q0, v0, u, 1e-3)
    qp, vp = PinocchioWorld(urdf(plant)).step(q0, v0, u, 1e-3)
    assert np.max(np.abs(qm - qp)) < 1e-12 and np.max(np.abs(vm - vp)) < 1e-9  # measured 5e-14 / 1e-10


def test_pinocchio_substeps_equal_repeated_steps():
    q, dq, u = tasks.Q_READY["indy7"], np.zeros(6), np.full(6, 2.0)
    a = PinocchioWorld(urdf("indy7"), substeps=4).step(q, dq, u, 0.004)
    w = PinocchioWorld(urdf("indy7"))
    b = (q, dq)
    for _ in range(4):
        b = w.step(*b, u, 0.001)
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(a[1], b[1], rtol=0, atol=1e-14)


def test_floating_mujoco_matches_pinocchio_free_flyer():
    """floating=True: state in pinocchio's free-flyer convention (quat xyzw, base-frame twist)."""
    w = MuJoCoWorld(urdf("iiwa14"), floating=True, integrator="rk4")
    model = pin.buildModelFromUrdf(urdf("iiwa14"), pin.JointModelFreeFlyer())
    data = model.createData()
    assert (w.nq, w.nv, w.n_actuated) == (model.nq, model.nv, 7)
    rng = np.random.default_rng(2)
    q = pin.neutral(model)
    q[:3] = [0.1, 0.2, 0.5]
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)).coeffs()
    q[7:] = rng.uniform(-0.5, 0.5, 7)
    v = np.concatenate([np.zeros(6), rng.normal(size=7)])
    u = rng.normal(size=13) * 5
    a = pin.aba(model, data, q, v, u)
    np.testing.assert_allclose(w.qdd(q, v, u), a, rtol=0, atol=1e-8 * np.max(np.abs(a)))
    u[:6] = 0.0  # joint torques only (a base wrench is held in the world frame by MuJoCo, body frame by pin)
    h = 0.001
    f = lambda qq, vv: pin.aba(model, data, qq, vv, u)  # noqa: E731

    def pin_rk4(q, v):
        a1 = f(q, v)
        v2 = v + h / 2 * a1
        a2 = f(pin.integrate(model, q, h / 2 * v), v2)
        v3 = v + h / 2 * a2
        a3 = f(pin.integrate(model, q, h / 2 * v2), v3)
        v4 = v + h * a3
        a4 = f(pin.integrate(model, q, h * v3), v4)
        return pin.integrate(model, q, h / 6 * (v + 2 * v2 + 2 * v3 + v4)), v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)

    # base at rest: the same ODE, the same RK4 (measured 1e-13 rad / 3e-10 rad/s)
    qm, vm = w.step(q, v, u[6:], h)  # n_actuated torques are accepted too
    qp, vp = pin_rk4(q, v)
    assert np.max(np.abs(qm - qp)) < 1e-11 and np.max(np.abs(vm - vp)) < 1e-8
    # moving base: pinocchio's RK4 sums base-frame stage twists on the group, MuJoCo's sums world-frame
    # ones: O(h^2 |v|^2) apart per step (measured 4e-9 at h = 1 ms); a convention error (quaternion order,
    # twist frame) would be O(h |v|) ~ 1e-3.
    v[:6] = rng.normal(size=6)
    qm, vm = w.step(q, v, u, h)
    qp, vp = pin_rk4(q, v)
    assert np.max(np.abs(qm - qp)) < 1e-7 and np.max(np.abs(vm - vp)) < 1e-8


# ------------------------------------------------------- contact
def test_probe_tip_drop_iiwa14_ready_is_the_contact_ball_radius():
    model, data = pin_model("iiwa14")
    q = tasks.Q_READY["iiwa14"]
    ee = ee_pos(model, data, "EE", q)
    drop = probe_tip_drop(urdf("iiwa14"), q, ee)
    # the iiwa14 EE frame is the centre of the 33 mm-radius "contact" sphere: the lowest point is 33 mm below
    assert 0.0 < drop < 0.2
    assert abs(drop - 0.033) < 1e-6  # bisection resolution 0.2 / 2**24 = 1.2e-8 m
    with pytest.raises(ValueError, match="increase span"):
        probe_tip_drop(urdf("iiwa14"), q, ee, span=0.01)


def test_table_press_reports_the_commanded_force():
    """Gravity compensation + J^T (0, 0, -F) pressing the tip onto the table: at rest the table's
    reaction on the robot is exactly F upward, all on the 'contact' link (no tangential load)."""
    model, data = pin_model("iiwa14")
    fid = model.getFrameId("EE")
    q = tasks.Q_READY["iiwa14"].copy()
    ee = ee_pos(model, data, "EE", q)
    drop = probe_tip_drop(urdf("iiwa14"), q, ee)
    w = MuJoCoWorld(urdf("iiwa14"), plane=dict(z=ee[2] - drop, pos_xy=ee[:2]), record_contact=True)
    F, dq = 20.0, np.zeros(7)
    for _ in range(300):
        J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        u = pin.computeGeneralizedGravity(model, data, q) + J.T @ [0.0, 0.0, -F] - M @ (20.0 * dq)
        q, dq = w.step(q, dq, u, 0.001)
    c = w.last_contact
    assert c["ncon"] >= 1 and abs(c["fn"] - F) < 0.01 * F  # measured 19.999999 N
    assert c["ft"] < 0.01 and set(c["fn_by_body"]) == {"contact"}
    assert c["fn_by_body"]["contact"] == pytest.approx(c["fn"])
    assert len(w.contact_history) == 300 and w.contact_history[-1] is c
    assert w.params["plane"]["z"] == pytest.approx(ee[2] - drop)


def test_no_table_means_no_contacts_and_bad_tables_raise():
    w = MuJoCoWorld(urdf("indy7"))
    w.step(tasks.Q_READY["indy7"], np.zeros(6), np.zeros(6), 0.001)
    assert w.last_contact == dict(ncon=0, fn=0.0, ft=0.0, fn_by_body={})
    assert w.params["plane"] is None and w.params["kind"] == "mujoco"
    with pytest.raises(ValueError, match="unknown keys"):
        MuJoCoWorld(urdf("indy7"), plane=dict(z=0.3, colour="red"))
    with pytest.raises(ValueError, match="'z'"):
        MuJoCoWorld(urdf("indy7"), plane=dict(friction=0.5))


# ------------------------------------------------------- PinocchioWorld disturbances
PEND = dict(mass=1.5, length=0.3)


def test_pendulum_hangs_in_equilibrium_and_loads_the_arm():
    model, data = pin_model("iiwa14")
    fid = model.getFrameId("EE")
    q = tasks.Q_READY["iiwa14"]
    J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
    g = pin.computeGeneralizedGravity(model, data, q)
    # the bob's weight m g pulls down at the pivot: holding it takes J^T (0, 0, +m g) on top of g(q)
    u_payload = g + J.T @ [0.0, 0.0, PEND["mass"] * 9.81]
    w = PinocchioWorld(urdf("iiwa14"), pendulum=PEND)
    qq, dq = q.copy(), np.zeros(7)
    for _ in range(100):
        qq, dq = w.step(qq, dq, u_payload, 0.001)
    angles, rates = w.pendulum_state
    assert np.max(np.abs(dq)) < 1e-9 and np.max(np.abs(qq - q)) < 1e-11 and np.max(np.abs(rates)) < 1e-9
    # the rod points at world -z
    pin.framesForwardKinematics(w.model, w.data, np.concatenate([qq, angles]))
    bob = w.data.oMi[w.model.njoints - 1].act(np.array([0.0, 0.0, -PEND["length"]]))
    np.testing.assert_allclose(bob, ee_pos(model, data, "EE", qq) + [0, 0, -PEND["length"]], atol=1e-9)
    # without the payload term the arm sags (the payload is a real load the caller cannot see)
    w.reset()
    assert w.pendulum_state is None
    qq, dq = q.copy(), np.zeros(7)
    for _ in range(100):
        qq, dq = w.step(qq, dq, g, 0.001)
    assert np.max(np.abs(dq)) > 1e-2


def test_pendulum_world_conserves_energy():
    w = PinocchioWorld(urdf("indy7"), pendulum=PEND)
    q, dq = tasks.Q_READY["indy7"].copy(), np.zeros(6)

    def energy():
        a, r = w.pendulum_state
        qa, va = np.concatenate([q, a]), np.concatenate([dq, r])
        return pin.computeKineticEnergy(w.model, w.data, qa, va) + pin.computePotentialEnergy(w.model, w.data, qa)

    q, dq = w.step(q, dq, np.zeros(6), 0.001)
    e0, kmax = energy(), 0.0
    for _ in range(300):  # unpowered: the arm and the swinging payload fall together
        q, dq = w.step(q, dq, np.zeros(6), 0.001)
        a, r = w.pendulum_state
        kmax = max(kmax, pin.computeKineticEnergy(w.model, w.data, np.concatenate([q, a]), np.concatenate([dq, r])))
    assert kmax > 1.0  # J: it really moved
    assert abs(energy() - e0) < 1e-6 * kmax  # RK4 at 1 ms


def test_constant_world_wrench_is_re_expressed_at_every_configuration():
    plant = "indy7"
    model, data = pin_model(plant)
    fid = model.getFrameId("EE")
    f = np.array([5.0, -3.0, 8.0, 0.4, 0.2, -0.5])  # [force N; torque N m], world axes at the EE origin
    w = PinocchioWorld(urdf(plant), constant_f_ext=f)
    rng = np.random.default_rng(9)
    for _ in range(3):
        q, dq, u = tasks.Q_READY[plant] + rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6), rng.uniform(-5, 5, 6)
        J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)  # [linear; angular]
        np.testing.assert_allclose(w.qdd(q, dq, u), pin.aba(model, data, q, dq, u + J.T @ f), rtol=1e-10, atol=1e-10)
    # static hold: u = g(q) - J^T f keeps the arm at rest
    q = tasks.Q_READY[plant]
    J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)
    u = pin.computeGeneralizedGravity(model, data, q) - J.T @ f
    qq, dq = q.copy(), np.zeros(6)
    for _ in range(50):
        qq, dq = w.step(qq, dq, u, 0.001)
    assert np.max(np.abs(dq)) < 1e-9
    assert w.params["constant_f_ext"] == f.tolist()
    w.set_constant_f_ext(None)
    np.testing.assert_allclose(w.qdd(q, np.zeros(6), u), pin.aba(model, data, q, np.zeros(6), u), atol=1e-12)


def test_pinocchio_world_constructor_validation():
    with pytest.raises(ValueError, match="ee_frame"):
        PinocchioWorld(urdf("fr3"), pendulum=PEND)  # fr3's EE is fr3_hand_tcp_joint, not "EE"
    assert PinocchioWorld(urdf("fr3"), ee_frame=tasks.ee_frame_of("fr3"), pendulum=PEND).pendulum["mass"] == 1.5
    with pytest.raises(ValueError, match="pendulum"):
        PinocchioWorld(urdf("iiwa14"), pendulum=dict(mass=-1.0, length=0.3))
    with pytest.raises(ValueError, match="constant_f_ext"):
        PinocchioWorld(urdf("iiwa14"), constant_f_ext=[0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ValueError, match="substeps"):
        PinocchioWorld(urdf("iiwa14"), substeps=0)
