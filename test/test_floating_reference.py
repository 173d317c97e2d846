"""The floating-base NumPy/pinocchio reference (test/reference/numpy_floating.py) on go2 (issue 34).

go2 loads with a free-flyer root; the reference's ABA (crba / nonLinearEffects
formula) equals pin.aba; its tangent-space step Jacobians equal central finite
differences on the manifold; the integrator keeps the quaternion unit; bad
input is refused naming the field.
"""

import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from reference.numpy_floating import FloatingPlant, manifold_fd, random_state

GO2_URDF = Path(__file__).resolve().parents[1] / "src/gato_description/robots/go2_description/go2.urdf"
FEET = ("FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint")
DT = 0.01
FD_EPS = 1e-6
#: Largest accepted max|J - J_fd| / max|J_fd| (central differences at FD_EPS).
FD_REL_TOL = 1e-6


@pytest.fixture(scope="module")
def plant():
    return FloatingPlant(GO2_URDF, FEET)



def test_go2_loads_with_free_flyer_root(plant):
    assert (plant.nq, plant.nv, plant.nu, plant.nc) == (19, 18, 12, 4)
    assert plant.model.joints[1].shortname() == "JointModelFreeFlyer"
    assert plant.model.names[1] == "root_joint"
    assert plant.model.nq == plant.model.nv + 1  # the quaternion


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("with_contacts", [False, True])
def test_reference_aba_equals_pinocchio_aba(plant, seed, with_contacts):
    q, v, u, f = random_state(plant, np.random.default_rng(seed))
    f = f if with_contacts else None
    a = plant.aba(q, v, u, f)
    tau = plant.generalized_force(q, u, f)
    a_pin = pin.aba(plant.model, plant.model.createData(), q, v, tau)
    assert np.max(np.abs(a - a_pin)) <= 1e-12 * max(1.0, np.max(np.abs(a_pin)))
    if with_contacts:
        # The wrenches matter: same state without them gives another acceleration.
        assert np.max(np.abs(a - plant.aba(q, v, u))) > 1e-3


def test_contact_wrench_equals_pinocchio_external_force(plant):
    """J_c^T f (world-aligned wrench at the frame) equals pin.aba's fext path (the same wrench in joint frames)."""
    q, v, u, f = random_state(plant, np.random.default_rng(11))
    m, d = plant.model, plant.model.createData()
    pin.framesForwardKinematics(m, d, q)
    fext = [pin.Force.Zero() for _ in range(m.njoints)]
    for fid, fc in zip(plant.frame_ids, f):
        frame = m.frames[fid]
        # world-aligned wrench at the frame origin -> frame-local -> parent-joint-local
        R = d.oMf[fid].rotation
        f_local = pin.Force(R.T @ fc[:3], R.T @ fc[3:])
        fext[frame.parentJoint] += frame.placement.act(f_local)
    tau = np.concatenate([np.zeros(6), u])
    a_fext = pin.aba(m, d, q, v, tau, fext)
    a = plant.aba(q, v, u, f)
    assert np.max(np.abs(a - a_fext)) <= 1e-10 * max(1.0, np.max(np.abs(a_fext)))



@pytest.mark.parametrize("seed", range(3))
def test_step_jacobians_match_manifold_finite_differences(plant, seed):
    q, v, u, f = random_state(plant, np.random.default_rng(100 + seed))
    x = np.concatenate([q, v])
    A, B_u, B_f = plant.step_jacobians(x, u, f, DT)
    assert A.shape == (36, 36) and B_u.shape == (36, 12) and B_f.shape == (36, 24)
    x1 = plant.step(x, u, f, DT)
    fd_A = manifold_fd(plant, x1, lambda e: plant.step(plant.integrate(x, e), u, f, DT), 36, FD_EPS)
    fd_u = manifold_fd(plant, x1, lambda e: plant.step(x, u + e, f, DT), 12, FD_EPS)
    fd_f = manifold_fd(plant, x1, lambda e: plant.step(x, u, f + e.reshape(4, 6), DT), 24, FD_EPS)
    for name, J, J_fd in (("A", A, fd_A), ("B_u", B_u, fd_u), ("B_f", B_f, fd_f)):
        rel = np.max(np.abs(J - J_fd)) / np.max(np.abs(J_fd))
        assert rel <= FD_REL_TOL, f"{name}: relative error {rel:.3g}"
    # The base block is not the identity map of a Euclidean state: the tangent
    # Jacobian differs from the naive one (d q'/d dq = I) by the dIntegrate term.
    assert np.max(np.abs(A[:6, :6] - np.eye(6))) > 1e-6


def test_manifold_difference_inverts_integrate(plant):
    q, v, _, _ = random_state(plant, np.random.default_rng(7))
    x = np.concatenate([q, v])
    dx = 0.3 * np.random.default_rng(8).normal(size=36)
    assert np.allclose(plant.difference(x, plant.integrate(x, dx)), dx, atol=1e-12)


def test_integrator_keeps_quaternion_unit(plant):
    q, v, u, f = random_state(plant, np.random.default_rng(3))
    v[3:6] = [4.0, -3.0, 5.0]  # spinning base: the quaternion turns every step
    x = np.concatenate([q, v])
    worst = 0.0
    for _ in range(300):
        x = plant.step(x, np.zeros(plant.nu), None, DT)
        worst = max(worst, abs(np.linalg.norm(x[3:7]) - 1.0))
    assert worst <= 1e-12
    assert not np.allclose(x[3:7], q[3:7])


def _good(plant):
    q, v, u, f = random_state(plant, np.random.default_rng(0))
    return np.concatenate([q, v]), u, f


@pytest.mark.parametrize(
    "case, field",
    [
        ("x_short", "x"),
        ("x_nan", "x"),
        ("quat_not_unit", "x[:nq] (q): base quaternion"),
        ("u_shape", "u"),
        ("u_nan", "u"),
        ("f_shape", "f"),
        ("f_inf", "f"),
        ("dt_negative", "dt"),
        ("dt_nan", "dt"),
    ],
)
def test_bad_input_is_refused_naming_the_field(plant, case, field):
    x, u, f = _good(plant)
    dt = DT
    if case == "x_short":
        x = x[:-1]
    elif case == "x_nan":
        x[plant.nq + 2] = np.nan
    elif case == "quat_not_unit":
        x[3:7] *= 1.01
    elif case == "u_shape":
        u = u[:6]
    elif case == "u_nan":
        u[0] = np.nan
    elif case == "f_shape":
        f = f[:3]
    elif case == "f_inf":
        f[1, 2] = np.inf
    elif case == "dt_negative":
        dt = -0.01
    elif case == "dt_nan":
        dt = float("nan")
    with pytest.raises(ValueError, match="^" + re.escape(field)):
        plant.step(x, u, f, dt)
    with pytest.raises(ValueError, match="^" + re.escape(field)):
        plant.step_jacobians(x, u, f, dt)


def test_unknown_contact_frame_is_refused():
    with pytest.raises(ValueError, match="contact_frames"):
        FloatingPlant(GO2_URDF, ("FL_foot_joint", "no_such_foot"))
