"""The C++ core's floating-base plant, gato.floating.FloatingPlant (issue 34), on go2.

Checked against the NumPy/pinocchio oracle (test/reference/numpy_floating.py) to 1e-9
relative on seeded random states: forward dynamics with and without contact wrenches,
its derivatives, the semi-implicit Euler step and its tangent Jacobians A, B_u, B_f, the
state difference / integration. The C++ contact term's q-derivative is a closed form
(motion-subspace cross products), the oracle's is one Jacobian-time-variation sweep per
tangent direction: two derivations of the same term. Independently of the oracle: central
finite differences on the manifold (perturb with integrate, compare with difference), the
difference Jacobians, and bad input refused with a ValueError naming the field.
"""

import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from gato.floating import FloatingPlant, for_robot
from reference.numpy_floating import FloatingPlant as Oracle, manifold_fd, random_state

GO2_URDF = Path(__file__).resolve().parents[1] / "src/gato_description/robots/go2_description/go2.urdf"
FEET = ("FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint")
DT = 0.01
#: Largest accepted max|C++ - oracle| / max(1, max|oracle|).
ORACLE_TOL = 1e-9
FD_EPS = 1e-6
#: Largest accepted max|J - J_fd| / max|J_fd| (central differences at FD_EPS).
FD_REL_TOL = 1e-6
SEEDS = range(6)


@pytest.fixture(scope="module")
def plant():
    return FloatingPlant(str(GO2_URDF), list(FEET))


@pytest.fixture(scope="module")
def oracle():
    return Oracle(GO2_URDF, FEET)



def rel(a, b):
    """max|a - b| / max(1, max|b|)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def test_go2_sizes_frames_and_mass(plant, oracle):
    assert (plant.nq, plant.nv, plant.nu, plant.nc, plant.nx, plant.ndx) == (19, 18, 12, 4, 37, 36)
    assert plant.contact_frames == list(FEET)
    assert plant.joint_names == list(oracle.model.names[2:])
    assert plant.total_mass == pytest.approx(pin.computeTotalMass(oracle.model), rel=1e-14)
    reg = for_robot("go2")  # the registry's URDF and feet
    assert reg.contact_frames == list(FEET) and reg.nq == 19
    assert for_robot("go2", []).nc == 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("with_contacts", [False, True])
def test_dynamics_and_derivatives_equal_the_oracle(plant, oracle, seed, with_contacts):
    q, v, u, f = random_state(oracle, np.random.default_rng(seed))
    f = f if with_contacts else None
    a = plant.aba(q, v, u, f)
    assert rel(a, oracle.aba(q, v, u, f)) <= ORACLE_TOL
    a2, da_dq, da_dv, da_du, da_df = plant.aba_derivatives(q, v, u, f)
    assert np.array_equal(a2, a) or rel(a2, a) <= ORACLE_TOL
    ref = oracle.aba_derivatives(q, v, u, f)
    for name, got, want in zip(("da_dq", "da_dv", "da_du", "da_df"), (da_dq, da_dv, da_du, da_df), ref):
        assert rel(got, want) <= ORACLE_TOL, f"{name}: {rel(got, want):.3g}"
    # A flat (6 nc,) f is the same as (nc, 6).
    if with_contacts:
        assert np.array_equal(plant.aba(q, v, u, f.ravel()), a)


@pytest.mark.parametrize("seed", SEEDS)
def test_step_and_tangent_jacobians_equal_the_oracle(plant, oracle, seed):
    q, v, u, f = random_state(oracle, np.random.default_rng(20 + seed))
    x = np.concatenate([q, v])
    xn = plant.step(x, u, f, DT)
    assert rel(xn, oracle.step(x, u, f, DT)) <= ORACLE_TOL
    xl, A, B_u, B_f = plant.linearize(x, u, f, DT)
    # linearize's x' comes from computeABADerivatives' acceleration, step's from aba: the same to rounding.
    assert rel(xl, xn) <= 1e-12
    assert A.shape == (36, 36) and B_u.shape == (36, 12) and B_f.shape == (36, 24)
    for name, got, want in zip(("A", "B_u", "B_f"), (A, B_u, B_f), oracle.step_jacobians(x, u, f, DT)):
        assert rel(got, want) <= ORACLE_TOL, f"{name}: {rel(got, want):.3g}"
    for got, want in zip(plant.step_jacobians(x, u, f, DT), (A, B_u, B_f)):
        assert np.array_equal(got, want)


def test_contact_jacobians_equal_the_oracle(plant, oracle):
    q, _, _, _ = random_state(oracle, np.random.default_rng(5))
    J = plant.contact_jacobians(q)
    assert J.shape == (4, 6, 18)
    assert rel(J, oracle.contact_jacobians(q)) <= ORACLE_TOL


@pytest.mark.parametrize("seed", range(3))
def test_difference_and_integrate_equal_the_oracle(plant, oracle, seed):
    rng = np.random.default_rng(40 + seed)
    q0, v0, _, _ = random_state(oracle, rng)
    q1, v1, _, _ = random_state(oracle, rng)
    x0, x1 = np.concatenate([q0, v0]), np.concatenate([q1, v1])
    assert rel(plant.difference(x0, x1), oracle.difference(x0, x1)) <= ORACLE_TOL
    dx = 0.5 * rng.normal(size=36)
    xi = plant.integrate(x0, dx)
    assert rel(xi, oracle.integrate(x0, dx)) <= ORACLE_TOL
    assert abs(np.linalg.norm(xi[3:7]) - 1.0) <= 1e-14
    assert np.max(np.abs(plant.difference(x0, xi) - dx)) <= 1e-12



@pytest.mark.parametrize("seed", range(3))
def test_tangent_jacobians_match_manifold_finite_differences(plant, oracle, seed):
    q, v, u, f = random_state(oracle, np.random.default_rng(100 + seed))
    x = np.concatenate([q, v])
    x1, A, B_u, B_f = plant.linearize(x, u, f, DT)
    fd_A = manifold_fd(plant, x1, lambda e: plant.step(plant.integrate(x, e), u, f, DT), 36, FD_EPS)
    fd_u = manifold_fd(plant, x1, lambda e: plant.step(x, u + e, f, DT), 12, FD_EPS)
    fd_f = manifold_fd(plant, x1, lambda e: plant.step(x, u, f + e.reshape(4, 6), DT), 24, FD_EPS)
    for name, J, J_fd in (("A", A, fd_A), ("B_u", B_u, fd_u), ("B_f", B_f, fd_f)):
        r = np.max(np.abs(J - J_fd)) / np.max(np.abs(J_fd))
        assert r <= FD_REL_TOL, f"{name}: relative error {r:.3g}"
    # The contact term's q-derivative is in A: without it A misses the finite differences.
    _, A0, _, _ = plant.linearize(x, u, None, DT)
    assert np.max(np.abs(A - A0)) > 1e3 * FD_REL_TOL * np.max(np.abs(fd_A))


def test_difference_jacobians_match_manifold_finite_differences(plant, oracle):
    rng = np.random.default_rng(60)
    q0, v0, _, _ = random_state(oracle, rng)
    x0 = np.concatenate([q0, v0])
    x1 = plant.integrate(x0, 0.4 * rng.normal(size=36))
    D0, D1 = plant.difference_jacobians(x0, x1)
    for D, which in ((D0, 0), (D1, 1)):
        fd = np.zeros((36, 36))
        for i in range(36):
            e = np.zeros(36)
            e[i] = FD_EPS
            if which == 0:
                plus, minus = plant.difference(plant.integrate(x0, e), x1), plant.difference(plant.integrate(x0, -e), x1)
            else:
                plus, minus = plant.difference(x0, plant.integrate(x1, e)), plant.difference(x0, plant.integrate(x1, -e))
            fd[:, i] = (plus - minus) / (2 * FD_EPS)
        assert np.max(np.abs(D - fd)) / np.max(np.abs(fd)) <= FD_REL_TOL


def test_integrator_keeps_the_quaternion_unit(plant, oracle):
    q, v, _, _ = random_state(oracle, np.random.default_rng(3))
    v[3:6] = [4.0, -3.0, 5.0]  # a spinning base
    x = np.concatenate([q, v])
    worst = 0.0
    for _ in range(300):
        x = plant.step(x, np.zeros(12), None, DT)
        worst = max(worst, abs(np.linalg.norm(x[3:7]) - 1.0))
    assert worst <= 1e-12


def _good(oracle):
    q, v, u, f = random_state(oracle, np.random.default_rng(0))
    return np.concatenate([q, v]), u, f


@pytest.mark.parametrize(
    "case, field",
    [
        ("x_short", "x"),
        ("x_2d", "x"),
        ("x_nan", "x"),
        ("v_inf", "x"),
        ("quat_not_unit", "x: base quaternion"),
        ("quat_zero", "x: base quaternion"),
        ("u_shape", "u"),
        ("u_nan", "u"),
        ("f_shape", "f"),
        ("f_inf", "f"),
        ("f_text", "f"),
        ("dt_zero", "dt"),
        ("dt_negative", "dt"),
        ("dt_nan", "dt"),
        ("dt_inf", "dt"),
        ("dt_text", "dt"),
    ],
)
def test_bad_input_is_refused_naming_the_field(plant, oracle, case, field):
    x, u, f = _good(oracle)
    dt = DT
    if case == "x_short":
        x = x[:-1]
    elif case == "x_2d":
        x = x[None, :]
    elif case == "x_nan":
        x[2] = np.nan
    elif case == "v_inf":
        x[plant.nq + 4] = np.inf
    elif case == "quat_not_unit":
        x[3:7] *= 1.01
    elif case == "quat_zero":
        x[3:7] = 0.0
    elif case == "u_shape":
        u = u[:6]
    elif case == "u_nan":
        u[0] = np.nan
    elif case == "f_shape":
        f = f[:3]
    elif case == "f_inf":
        f[1, 2] = np.inf
    elif case == "f_text":
        f = "feet"
    elif case == "dt_zero":
        dt = 0.0
    elif case == "dt_negative":
        dt = -0.01
    elif case == "dt_nan":
        dt = float("nan")
    elif case == "dt_inf":
        dt = float("inf")
    elif case == "dt_text":
        dt = "0.01"
    pattern = "^" + re.escape(field)
    with pytest.raises(ValueError, match=pattern):
        plant.step(x, u, f, dt)
    with pytest.raises(ValueError, match=pattern):
        plant.linearize(x, u, f, dt)


def test_bad_q_v_dx_are_refused_naming_the_field(plant, oracle):
    x, u, f = _good(oracle)
    q, v = x[:19], x[19:]
    bad_q = q.copy()
    bad_q[3:7] *= 2.0
    with pytest.raises(ValueError, match=r"^q: base quaternion \(entries 3:7, x y z w\) has norm 2"):
        plant.aba(bad_q, v, u, f)
    with pytest.raises(ValueError, match=r"^q: base quaternion"):
        plant.aba_derivatives(bad_q, v, u, f)
    with pytest.raises(ValueError, match=r"^q: base quaternion"):
        plant.contact_jacobians(bad_q)
    with pytest.raises(ValueError, match=r"^v: expected shape \(18,\), got \(17,\)"):
        plant.aba(q, v[:-1], u, f)
    with pytest.raises(ValueError, match=r"^f: expected shape \(4, 6\) or \(24,\), got \(3, 6\)"):
        plant.aba(q, v, u, f[:3])
    with pytest.raises(ValueError, match=r"^dx: expected shape \(36,\)"):
        plant.integrate(x, np.zeros(35))
    dx = np.zeros(36)
    dx[0] = np.nan
    with pytest.raises(ValueError, match=r"^dx: contains NaN"):
        plant.integrate(x, dx)
    bad_x = x.copy()
    bad_x[3:7] *= 0.5
    with pytest.raises(ValueError, match=r"^x1: base quaternion"):
        plant.difference(x, bad_x)
    with pytest.raises(ValueError, match=r"^x0: contains NaN"):
        plant.difference_jacobians(np.full(37, np.nan), x)


def test_bad_model_arguments_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="^contact_frames: no frame named 'no_such_foot'"):
        FloatingPlant(str(GO2_URDF), ["FL_foot_joint", "no_such_foot"])
    with pytest.raises(ValueError, match="^contact_frames: frame 'FL_foot_joint' given twice"):
        FloatingPlant(str(GO2_URDF), ["FL_foot_joint", "FL_foot_joint"])
    with pytest.raises(ValueError, match="^urdf_path: URDF file not found"):
        FloatingPlant("/nonexistent/go2.urdf", [])
    with pytest.raises(ValueError, match="^name: robot 'iiwa14' is not a floating-base robot"):
        for_robot("iiwa14")
    with pytest.raises(ValueError, match="^name: no robot 'no_such_robot'"):
        for_robot("no_such_robot")


@pytest.mark.parametrize("seed", range(3))
def test_explicit_euler_on_the_manifold(plant, oracle, seed):
    """integrator="euler": v' = v + dt a, q' = integrate(q, dt v + dt^2/2 a); Jacobians vs manifold FD."""
    q, v, u, f = random_state(oracle, np.random.default_rng(200 + seed))
    x = np.concatenate([q, v])
    a = oracle.aba(q, v, u, f)
    want = np.concatenate([pin.integrate(oracle.model, q, DT * v + 0.5 * DT * DT * a), v + DT * a])
    x1 = plant.step(x, u, f, DT, integrator="euler")
    assert rel(x1, want) <= ORACLE_TOL
    assert not np.allclose(x1, plant.step(x, u, f, DT))  # not the semi-implicit step
    xl, A, B_u, B_f = plant.linearize(x, u, f, DT, integrator="euler")
    assert rel(xl, x1) <= 1e-12
    step = lambda x_, u_, f_: plant.step(x_, u_, f_, DT, integrator="euler")  # noqa: E731
    fd_A = manifold_fd(plant, x1, lambda e: step(plant.integrate(x, e), u, f), 36, FD_EPS)
    fd_u = manifold_fd(plant, x1, lambda e: step(x, u + e, f), 12, FD_EPS)
    fd_f = manifold_fd(plant, x1, lambda e: step(x, u, f + e.reshape(4, 6)), 24, FD_EPS)
    for name, J, J_fd in (("A", A, fd_A), ("B_u", B_u, fd_u), ("B_f", B_f, fd_f)):
        r = np.max(np.abs(J - J_fd)) / np.max(np.abs(J_fd))
        assert r <= FD_REL_TOL, f"{name}: relative error {r:.3g}"


@pytest.mark.parametrize("integrator", ["rk4", "midpoint", 3])
def test_other_integrators_are_refused(plant, oracle, integrator):
    x, u, f = _good(oracle)
    with pytest.raises(ValueError, match="^integrator"):
        plant.step(x, u, f, DT, integrator=integrator)
    with pytest.raises(ValueError, match="^integrator"):
        plant.linearize(x, u, f, DT, integrator=integrator)


@pytest.mark.parametrize("seed", range(3))
def test_tangent_state_cost(plant, oracle, seed):
    """1/2 e^T W e with e = x (-) x_ref: value and GN Hessian from pin.difference / dDifference, the
    gradient against manifold finite differences of the value."""
    rng = np.random.default_rng(300 + seed)
    q, v, _, _ = random_state(oracle, rng)
    x_ref = np.concatenate([q, v])
    x = plant.integrate(x_ref, 0.5 * rng.normal(size=36))
    w = rng.uniform(0.1, 10.0, size=36)
    c, g, H = plant.state_cost(x, x_ref, w)
    e = oracle.difference(x_ref, x)
    assert c == pytest.approx(0.5 * e @ (w * e), rel=1e-12)
    D = np.zeros((36, 36))
    D[:18, :18] = pin.dDifference(oracle.model, x_ref[:19], x[:19], pin.ArgumentPosition.ARG1)
    D[18:, 18:] = np.eye(18)
    assert rel(H, D.T @ np.diag(w) @ D) <= ORACLE_TOL
    fd = np.zeros(36)
    for i in range(36):
        d = np.zeros(36)
        d[i] = FD_EPS
        fd[i] = (plant.state_cost(plant.integrate(x, d), x_ref, w)[0]
                 - plant.state_cost(plant.integrate(x, -d), x_ref, w)[0]) / (2 * FD_EPS)
    assert np.max(np.abs(g - fd)) / np.max(np.abs(fd)) <= FD_REL_TOL
    # The base's tangent differs from the naive coordinate error: D is not the identity.
    assert np.max(np.abs(D[:6, :6] - np.eye(6))) > 1e-3
    # At the reference: zero cost and gradient.
    c0, g0, _ = plant.state_cost(x_ref, x_ref, w)
    assert c0 <= 1e-28 and np.max(np.abs(g0)) <= 1e-14


def test_state_cost_bad_input(plant, oracle):
    x, _, _ = _good(oracle)
    with pytest.raises(ValueError, match=r"^w: weights must be >= 0"):
        plant.state_cost(x, x, -np.ones(36))
    with pytest.raises(ValueError, match=r"^w: expected shape \(36,\)"):
        plant.state_cost(x, x, np.ones(37))
    bad = x.copy()
    bad[3:7] = [0, 0, 0, 2]
    with pytest.raises(ValueError, match=r"^x_ref: base quaternion"):
        plant.state_cost(x, bad, np.ones(36))
