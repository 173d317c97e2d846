"""A known external wrench on the floating base (issue 34's push hypotheses): FloatingPlant.set_base_wrench
and FloatingSQP.set_base_wrench / gato.floating.FloatingMPC.set_base_wrench, on go2.

The wrench (world-aligned force F and torque T at the base frame origin) adds (R^T F, R^T T, 0) to
the generalized force. Checked: the dynamics against pinocchio's aba with the wrench as the root
joint's external force (and the contact wrenches as their parent joints' forces) to 1e-9; the
derivatives (aba_derivatives' da_dq, the step's A) against central differences on the manifold;
the solver's rollout and LQ blocks use it in the first `knots` intervals only; a zero wrench or
None leaves every plan bit for bit as before; a standing plan under a constant sideways force leans
its feet against it; bad input refused naming the field.
"""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from gato.floating import FloatingPlant
from gato.core.floating_mpc import FloatingMPC
from reference.numpy_floating import FloatingPlant as Oracle, manifold_fd, random_state

GO2_URDF = Path(__file__).resolve().parents[1] / "src/gato_description/robots/go2_description/go2.urdf"
FEET = ("FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint")
DT = 0.01
TOL = 1e-9
FD_EPS = 1e-6
FD_REL_TOL = 1e-6


@pytest.fixture(scope="module")
def plant():
    return FloatingPlant(str(GO2_URDF), list(FEET))


@pytest.fixture(scope="module")
def oracle():
    return Oracle(GO2_URDF, FEET)


@pytest.fixture(scope="module")
def pin_model():
    model = pin.buildModelFromUrdf(str(GO2_URDF), pin.JointModelFreeFlyer())
    return model, model.createData()


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def wrench(rng):
    w = np.concatenate([200.0 * rng.normal(size=3), 20.0 * rng.normal(size=3)])
    return w


def pin_aba(model, data, q, v, u, f, w):
    """pinocchio's aba with the base wrench as the root joint's f_ext (its local frame) and each
    contact wrench moved into its parent joint's frame."""
    pin.forwardKinematics(model, data, q)
    pin.updateFramePlacements(model, data)
    fext = pin.StdVec_Force()
    for _ in range(model.njoints):
        fext.append(pin.Force.Zero())
    R = data.oMi[1].rotation
    fext[1] = fext[1] + pin.Force(R.T @ w[:3], R.T @ w[3:])
    if f is not None:
        for c, name in enumerate(FEET):
            fid = model.getFrameId(name)
            j = model.frames[fid].parentJoint
            p = data.oMf[fid].translation
            Fw = pin.Force(f[c, :3], f[c, 3:] + np.cross(p, f[c, :3]))
            fext[j] = fext[j] + data.oMi[j].actInv(Fw)
    return pin.aba(model, data, q, v, np.concatenate([np.zeros(6), u]), fext)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_contacts", [False, True])
def test_dynamics_with_the_base_wrench_equal_pinocchio_aba_with_f_ext(plant, oracle, pin_model, seed, with_contacts):
    rng = np.random.default_rng(300 + seed)
    q, v, u, f = random_state(oracle, rng)
    f = f if with_contacts else None
    w = wrench(rng)
    a0 = plant.aba(q, v, u, f)
    try:
        plant.set_base_wrench(w)
        assert np.array_equal(plant.base_wrench, w)
        a = plant.aba(q, v, u, f)
        a_d = plant.aba_derivatives(q, v, u, f)[0]
    finally:
        plant.set_base_wrench(None)
    ref = pin_aba(*pin_model, q, v, u, f, w)
    assert rel(a, ref) <= TOL
    assert rel(a_d, ref) <= TOL
    assert rel(a, a0) > 1e-3  # the wrench moves the base
    assert np.array_equal(plant.aba(q, v, u, f), a0)  # cleared: as before


@pytest.mark.parametrize("seed", range(3))
def test_base_wrench_derivatives_match_manifold_finite_differences(plant, oracle, seed):
    rng = np.random.default_rng(400 + seed)
    q, v, u, f = random_state(oracle, rng)
    w = wrench(rng)
    x = np.concatenate([q, v])
    try:
        plant.set_base_wrench(w)
        # da/dq in the tangent of q: central differences of aba along integrate(q, +-eps e_i).
        _, da_dq, da_dv, da_du, da_df = plant.aba_derivatives(q, v, u, f)
        fd = np.zeros((18, 18))
        for i in range(18):
            e = np.zeros(36)
            e[i] = FD_EPS
            qp, qm = plant.integrate(x, e)[:19], plant.integrate(x, -e)[:19]
            fd[:, i] = (plant.aba(qp, v, u, f) - plant.aba(qm, v, u, f)) / (2 * FD_EPS)
        r = np.max(np.abs(da_dq - fd)) / np.max(np.abs(fd))
        assert r <= FD_REL_TOL, f"da_dq: {r:.3g}"
        x1, A, B_u, B_f = plant.linearize(x, u, f, DT)
        fd_A = manifold_fd(plant, x1, lambda e: plant.step(plant.integrate(x, e), u, f, DT), 36, FD_EPS)
        fd_u = manifold_fd(plant, x1, lambda e: plant.step(x, u + e, f, DT), 12, FD_EPS)
        for name, J, J_fd in (("A", A, fd_A), ("B_u", B_u, fd_u)):
            r = np.max(np.abs(J - J_fd)) / np.max(np.abs(J_fd))
            assert r <= FD_REL_TOL, f"{name}: relative error {r:.3g}"
    finally:
        plant.set_base_wrench(None)
    # The wrench's own q-derivative (the base rotating under a world-fixed force) is in da_dq.
    _, da_dq0, _, _, _ = plant.aba_derivatives(q, v, u, f)
    assert np.max(np.abs(da_dq - da_dq0)) > 1e3 * FD_REL_TOL * np.max(np.abs(fd))


@pytest.fixture(scope="module")
def mpc():
    from gato.sim.go2 import _world

    world = _world()
    q, dq = world.reset("stand")
    m = FloatingMPC("go2", N=12, dt=0.02, max_iters=4)
    m.set_standing(np.concatenate([q, np.zeros(18)]), m.contact_positions(q))
    x0 = np.concatenate([q, dq])
    x0[19] += 0.2
    return m, x0


def _solve(m, x0):
    r = m.solve(x0, None, 4)
    return r.X, r.W, r.K


def test_zero_or_cleared_wrench_leaves_the_plan_bit_for_bit(mpc):
    m, x0 = mpc
    base = _solve(m, x0)
    m.set_base_wrench(np.zeros(6))
    assert all(np.array_equal(a, b) for a, b in zip(_solve(m, x0), base))
    m.set_base_wrench([0.0, 80.0, 0.0, 0.0, 0.0, 0.0], knots=3)
    pushed = _solve(m, x0)
    assert not np.array_equal(pushed[0], base[0])
    m.set_base_wrench(None)
    assert all(np.array_equal(a, b) for a, b in zip(_solve(m, x0), base))
    assert np.array_equal(m.sqp.base_wrench, np.zeros(6))


def test_the_solver_steps_with_the_wrench_in_its_first_knots_only(mpc, plant):
    m, x0 = mpc
    w = np.array([30.0, -60.0, 10.0, 1.0, -2.0, 0.5])
    W = m.sqp.cold_start(x0)
    try:
        m.set_base_wrench(w, knots=2)
        assert m.sqp.base_wrench_knots == 2
        _, X = m.sqp.rollout(x0, W)
        lq = m.sqp.lq(x0, W)
    finally:
        m.set_base_wrench(None)
    nu = m.nu
    for k in range(4):
        fc = W[k, nu:].reshape(4, 6)[:, [3, 4, 5, 0, 1, 2]]  # contract [n; f] -> plant (f; n)
        plant.set_base_wrench(w if k < 2 else None)
        try:
            xn, A, _, _ = plant.linearize(X[k], W[k, :nu], fc, 0.02)
        finally:
            plant.set_base_wrench(None)
        assert rel(X[k + 1], xn) <= 1e-12, k
        assert rel(lq["A"][k], A) <= 1e-12, k


def test_a_standing_plan_leans_its_feet_against_a_steady_sideways_force(mpc):
    """A constant 60 N world +y force over the whole horizon (N = 12 x 20 ms): the planned feet push
    back, their y forces summing to -30 .. -90 N at the first knot and below -24 N on average over the
    first five (the short horizon lets the base give way toward its end); none of that without it."""
    m, x0 = mpc
    x = x0.copy()
    x[19] = 0.0
    m.set_base_wrench([0.0, 60.0, 0.0, 0.0, 0.0, 0.0])
    try:
        r = m.solve(x, None, 15)
    finally:
        m.set_base_wrench(None)
    fy = r.W[:, m.nu:].reshape(-1, 4, 6)[:, :, 4].sum(axis=1)
    assert -90.0 <= fy[0] <= -30.0 and fy[:5].mean() < -24.0, fy
    r0 = m.solve(x, None, 15)
    assert np.all(np.abs(r0.W[:, m.nu:].reshape(-1, 4, 6)[:, :, 4].sum(axis=1)) <= 1.0)


@pytest.mark.parametrize("w,knots,field", [
    ([0.0] * 5, -1, "base_wrench"), ([np.nan, 0, 0, 0, 0, 0], -1, "base_wrench"),
    (["a"] * 6, -1, "base_wrench"), ([1.0, 0, 0, 0, 0, 0], -2, "knots")])
def test_bad_base_wrench_is_refused_naming_the_field(mpc, plant, w, knots, field):
    m, _ = mpc
    with pytest.raises(ValueError, match=field):
        m.set_base_wrench(w, knots)
    if field == "base_wrench":
        with pytest.raises(ValueError, match=field):
            plant.set_base_wrench(w)
    assert np.array_equal(m.sqp.base_wrench, np.zeros(6))
