"""Factory test of the solver: every cost term x integrator x robot.

Robots: iiwa14 (7 DoF) and indy7 (6 DoF) run the fixed-size kernels; a synthetic
9-DoF chain (generated here) runs the dynamic-size ones (gato/solver.hpp: fixed
sizes for 6 and 7 DoF only). For each cost term, alone:

- its gradient (the KKT q_k, r_k of ``BSQP.debug_setup_kkt``) against central
  finite differences of the merit with mu = 0 (= the total cost);
- its Gauss-Newton Hessian (Q_k, R_k): for the EE position term w J'J with J the
  finite-difference Jacobian of ``BSQP.ee_pos``; for every other term (quadratic
  or barrier: their Gauss-Newton Hessian is the exact one) the finite-difference
  Jacobian of the gradient.

For each integrator the dynamics Jacobians (A, B) against finite differences of
``BSQP.sim_forward``; and for every term x integrator x robot, the KKT blocks and
two SQP iterations against the NumPy reference (test/reference/numpy_bsqp.py, an
independent implementation of docs/solver_method.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import gato

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference.numpy_bsqp import LIMIT_MARGIN, RefProblem  # noqa: E402
from solver_inputs import HOME as SOLVER_HOME, goal_ref, perturbed_state  # noqa: E402
from solver_inputs import random_traj as _random_traj  # noqa: E402

INTEGRATORS = ("euler", "semi_implicit", "rk4")
ROBOTS = ("iiwa14", "indy7", "chain9")
HOME = {**SOLVER_HOME, "chain9": np.array([0.2, 0.4, -0.6, 0.3, 0.5, -0.2, 0.4, 0.3, -0.1])}
#: Every weight off: a term is switched on over this.
ZERO = dict(q_cost=0.0, N_cost=0.0, qd_cost=0.0, u_cost=0.0, q_lim_cost=0.0, vel_lim_cost=0.0, ctrl_lim_cost=0.0)
DT = 0.02
EPS = 1e-6


def chain9_urdf(path: Path) -> Path:
    """A 9-revolute-joint serial chain (axes z, y, y, z, y, x, z, y, x), 0.12 m links of 1.2 to
    0.4 kg, EE frame "EE" 0.08 m past the last joint; limits +-2.6 rad, 2.5 rad/s, 60 N m."""
    axes = ["0 0 1", "0 1 0", "0 1 0", "0 0 1", "0 1 0", "1 0 0", "0 0 1", "0 1 0", "1 0 0"]
    links = ['<link name="base"><inertial><mass value="2.0"/><origin xyz="0 0 0"/>'
             '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>']
    joints = []
    for i, axis in enumerate(axes):
        m = 1.2 - 0.1 * i
        links.append(f'<link name="l{i}"><inertial><mass value="{m:.2f}"/><origin xyz="0.01 0 0.06"/>'
                     f'<inertia ixx="{0.004 * m:.5f}" iyy="{0.005 * m:.5f}" izz="{0.002 * m:.5f}" '
                     'ixy="0" ixz="0" iyz="0"/></inertial></link>')
        parent = "base" if i == 0 else f"l{i - 1}"
        z = 0.1 if i == 0 else 0.12
        joints.append(f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
                      f'<origin xyz="0 0 {z}" rpy="0 0 0"/><axis xyz="{axis}"/>'
                      '<limit lower="-2.6" upper="2.6" effort="60" velocity="2.5"/></joint>')
    links.append('<link name="EE"/>')
    joints.append('<joint name="ee_fixed" type="fixed"><parent link="l8"/><child link="EE"/>'
                  '<origin xyz="0 0 0.08"/></joint>')
    path.write_text('<?xml version="1.0"?>\n<robot name="chain9">\n' + "\n".join(links + joints) + "\n</robot>\n")
    return path


@pytest.fixture(scope="module")
def urdfs(tmp_path_factory):
    d = tmp_path_factory.mktemp("factory")
    return {"iiwa14": (str(gato.robot_urdf("iiwa14")), gato.robot_info("iiwa14")["ee_frame"]),
            "indy7": (str(gato.robot_urdf("indy7")), gato.robot_info("indy7")["ee_frame"]),
            "chain9": (str(chain9_urdf(d / "chain9.urdf")), "EE")}


# ----------------------------------------------------------------- the terms
def _posture(N, nv, rng):
    return dict(q_pos_cost=0.2 + 0.3 * rng.random(nv), q_nom=0.3 * rng.standard_normal(nv))


def _u_vec(N, nv, rng):
    return dict(u_cost_vec=1e-3 * (1.0 + rng.random(nv)))


def _table(N, nv, rng):
    t = np.column_stack([1.0 + 2.0 * rng.random(N), 0.05 + 0.2 * rng.random(N), 1e-4 + 1e-3 * rng.random(N)])
    return dict(knot_weights=t)


#: Each cost term: its scalar weights (over ZERO) and its runtime setters (built per robot).
TERMS = {
    "ee_position": (dict(q_cost=2.0, N_cost=50.0), None),
    "posture": ({}, _posture),
    "joint_velocity": (dict(qd_cost=0.3), None),
    "control": (dict(u_cost=1e-3), None),
    "control_per_joint": ({}, _u_vec),
    "per_knot_table": ({}, _table),
    "q_barrier": (dict(q_lim_cost=0.05), None),
    "qd_barrier": (dict(vel_lim_cost=0.05), None),
    "u_barrier": (dict(ctrl_lim_cost=1e-3), None),
}


def build(urdfs, robot, term, N, *, integrator="euler", base=ZERO, seed=0, **params):
    """(BSQP, RefProblem) with the cost ``base`` + ``term``, identically configured."""
    urdf, ee = urdfs[robot]
    scalars, setters = TERMS[term]
    weights = {**base, **scalars}
    s = gato.BSQP(urdf, 1, N, DT, integrator=integrator, ee_frame=ee, linsys="bdsv", **weights, **params)
    extra = setters(N, s.nv, np.random.default_rng(seed)) if setters else {}
    if "q_pos_cost" in extra:
        s.set_q_pos_cost(extra["q_pos_cost"])
        s.set_q_nom(extra["q_nom"])
    if "u_cost_vec" in extra:
        s.set_u_cost_vec(extra["u_cost_vec"])
    if "knot_weights" in extra:
        s.set_cost_weights_per_knot(extra["knot_weights"])
    ref_kw = {k: v for k, v in {**weights, **params}.items() if k not in ("max_sqp_iters",)}
    ref_p = RefProblem(urdf, ee, N, DT, integrator=integrator, **ref_kw, **extra)
    return s, ref_p, extra


def state(robot, rng, qd_scale=0.3):
    return perturbed_state(HOME[robot], rng, qd_scale)


def random_traj(s, x0, rng, u_scale=3.0):
    return _random_traj(s, x0, rng, u_scale)


def near_bounds(s, xu):
    """Push a few coordinates against (and one past) the barrier boxes (URDF limits shrunk by
    LIMIT_MARGIN), so the barrier derivatives are checked in the log and in the quadratic
    extension (distance < 1e-3) regions."""
    L = s.limits
    st = s.nx + s.nu
    out = xu.copy()
    q_hi, q_lo = L["q_hi"] - LIMIT_MARGIN, L["q_lo"] + LIMIT_MARGIN
    v_hi, u_hi = L["qd"] - LIMIT_MARGIN, L["u"] - LIMIT_MARGIN
    for k in range(s.N):
        out[k * st + 0] = q_hi[0] - 5e-4           # inside the extension
        out[k * st + 1] = q_lo[1] - 0.02           # past the bound
        out[k * st + s.nq + 0] = v_hi[0] - 0.05    # log region, close
        out[k * st + s.nq + 1] = -v_hi[1] - 3e-4   # past the bound
        if k < s.N - 1:
            out[k * st + s.nx + 0] = u_hi[0] - 2e-4
            out[k * st + s.nx + 1] = -u_hi[1] + 0.3
    return out


def kkt_grad(s, kkt):
    """The stacked gradient [q_0, r_0, ..., q_{N-1}] of a debug_setup_kkt result (batch row 0)."""
    st = s.nx + s.nu
    g = np.zeros(s.xu_size)
    for k in range(s.N):
        g[k * st:k * st + s.nx] = kkt["q"][0, k]
        if k < s.N - 1:
            g[k * st + s.nx:(k + 1) * st] = kkt["r"][0, k]
    return g


def assert_close(got, want, rtol, what):
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"{what}: max error {err:.3e} > {rtol:.0e} x {scale:.3e}"


# ------------------------------------------------- gradients and Hessians
@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("term", list(TERMS))
def test_term_gradient_and_gauss_newton_hessian(urdfs, robot, term):
    rng = np.random.default_rng(11)
    N = 3
    s, _, extra = build(urdfs, robot, term, N, mu=0.0, seed=1)
    x0 = state(robot, rng)
    xu = random_traj(s, x0, rng)
    if term.endswith("barrier"):
        xu = near_bounds(s, xu)
    ref = goal_ref(s, x0)
    kkt = s.debug_setup_kkt(xu[None], x0[None], ref[None])
    grad = kkt_grad(s, kkt)
    assert np.abs(grad).max() > 0, "the term contributes no gradient at this point"

    def merit(z):
        return s.merit(z[None], x0[None], ref[None])[0]

    fd = np.zeros_like(xu)
    for i in range(xu.size):
        d = np.zeros_like(xu)
        d[i] = EPS
        fd[i] = (merit(xu + d) - merit(xu - d)) / (2 * EPS)
    assert_close(grad, fd, 1e-5, f"{term} gradient")

    # Hessian blocks per knot: d(gradient)/d(x_k, u_k) by central differences of the core's gradient.
    st, nx, nu, nq = s.nx + s.nu, s.nx, s.nu, s.nq
    H_fd = np.zeros((xu.size, xu.size))
    for i in range(xu.size):
        d = np.zeros_like(xu)
        d[i] = EPS
        gp = kkt_grad(s, s.debug_setup_kkt((xu + d)[None], x0[None], ref[None]))
        gm = kkt_grad(s, s.debug_setup_kkt((xu - d)[None], x0[None], ref[None]))
        H_fd[:, i] = (gp - gm) / (2 * EPS)
    for k in range(N):
        xs = slice(k * st, k * st + nx)
        Q = kkt["Q"][0, k]
        if term in ("ee_position", "per_knot_table"):
            # The EE term's Gauss-Newton block w J'J (not its exact Hessian); the rest exact.
            q = xu[k * st:k * st + nq]
            J = np.column_stack([(s.ee_pos(q + EPS * e) - s.ee_pos(q - EPS * e)) / (2 * EPS) for e in np.eye(nq)])
            w = extra["knot_weights"][k, 0] if extra else (50.0 if k == N - 1 else 2.0)
            assert_close(Q[:nq, :nq], w * J.T @ J, 1e-6, f"{term} Gauss-Newton Q_{k}")
            assert_close(Q[nq:, :], H_fd[xs, xs][nq:, :], 1e-5, f"{term} Q_{k} velocity rows")
        else:
            assert_close(Q, H_fd[xs, xs], 1e-5, f"{term} Q_{k}")
        if k < N - 1:
            us = slice(k * st + nx, (k + 1) * st)
            R = kkt["R"][0, k]
            assert_close(R, H_fd[us, us], 1e-5, f"{term} R_{k}")
            assert_close(H_fd[xs, us], 0 * H_fd[xs, us], 1e-6, f"{term} cross block S_{k} (separable cost)")


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_integrator_jacobians(urdfs, robot, integrator):
    rng = np.random.default_rng(12)
    s, _, _ = build(urdfs, robot, "ee_position", 3, integrator=integrator)
    x0 = state(robot, rng)
    xu = random_traj(s, x0, rng)
    kkt = s.debug_setup_kkt(xu[None], x0[None], goal_ref(s, x0)[None])
    x, u = xu[:s.nx], xu[s.nx:s.nx + s.nu]
    A_fd = np.column_stack([(s.sim_forward((x + EPS * e)[None], u[None], DT) -
                             s.sim_forward((x - EPS * e)[None], u[None], DT))[0] / (2 * EPS) for e in np.eye(s.nx)])
    B_fd = np.column_stack([(s.sim_forward(x[None], (u + EPS * e)[None], DT) -
                             s.sim_forward(x[None], (u - EPS * e)[None], DT))[0] / (2 * EPS) for e in np.eye(s.nu)])
    assert_close(kkt["A"][0, 0], A_fd, 1e-6, f"{integrator} A")
    assert_close(kkt["B"][0, 0], B_fd, 1e-6, f"{integrator} B")


# ---------------------------------------------------- against the reference
@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("term", list(TERMS))
def test_kkt_and_solve_match_the_numpy_reference(urdfs, robot, integrator, term):
    """The term over the default weights (a well-posed tracking problem): the KKT blocks at a
    random trajectory and two SQP iterations (Schur system, line search, rho adaptation)."""
    rng = np.random.default_rng(13)
    N = 4
    base = {k: getattr(gato.SolverParams(), k) for k in ZERO}
    s, ref_p, _ = build(urdfs, robot, term, N, integrator=integrator, base=base, seed=2, max_sqp_iters=2)
    x0 = state(robot, rng)
    ref = goal_ref(s, x0, offset=(0.06, 0.04, -0.05))
    xu = random_traj(s, x0, rng, u_scale=1.0)
    if term.endswith("barrier"):
        xu = near_bounds(s, xu)
    got = s.debug_setup_kkt(xu[None], x0[None], ref[None])
    want = ref_p.kkt_blocks(xu, x0, ref)
    for key in ("Q", "R", "q", "r", "A", "B", "c"):
        assert_close(got[key][0], want[key], 1e-9, f"KKT {key}")

    res = s.solve(x0[None], ref[None])
    xu_ref, records = ref_p.sqp(x0, ref, iters=2)
    assert_close(res.xu[0], xu_ref, 1e-7, "solution after 2 SQP iterations")
    np.testing.assert_allclose(res.stats.step_size[0], [r.alpha for r in records])
    np.testing.assert_allclose(res.stats.final_merit[0], records[-1].merit_after, rtol=1e-8)
    assert records[-1].merit_after < records[0].merit_before, "the reference made no progress"
