"""Seeded inputs for the BSQP solver tests (test_solver_core, test_factory): states near a
home pose, an EE goal reference, and dynamically inconsistent trajectories. Every draw
comes from the caller's numpy Generator, in a fixed order, so a test's inputs depend on
its seed only."""
import numpy as np

#: Home joint positions [rad] that the states are drawn around (robots with fixed-size kernels).
HOME = {
    "iiwa14": np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4]),
    "indy7": np.array([0.1, -0.3, -1.2, 0.2, -1.0, 0.3]),
}


def perturbed_state(q0, rng, qd_scale=0.3):
    """x = [q0 + 0.05 N(0, 1), qd_scale N(0, 1)]: shape (2 nv,), [rad, rad/s]; q0 shape (nv,)."""
    return np.concatenate([q0 + 0.05 * rng.standard_normal(q0.size), qd_scale * rng.standard_normal(q0.size)])


def goal_ref(solver, x, offset=(0.04, -0.03, 0.05)):
    """The EE position at x's q plus ``offset`` [m], held over the horizon: the solver's
    reference layout, shape (6 N,) (position, then 3 zeros, per knot)."""
    p = solver.ee_pos(x[:solver.nq]) + np.asarray(offset)
    return np.tile(np.r_[p, 0.0, 0.0, 0.0], solver.N)


def random_traj(solver, x0, rng, u_scale):
    """A dynamically inconsistent trajectory near x0 (nonzero defects everywhere): the
    solver's hold trajectory, states + 0.02 N(0, 1), controls u_scale N(0, 1) [N m];
    shape (xu_size,)."""
    xu = solver.hold_trajectory(x0[None, :])[0]
    s = solver.nx + solver.nu
    for k in range(solver.N):
        xu[k * s:k * s + solver.nx] += 0.02 * rng.standard_normal(solver.nx)
        if k < solver.N - 1:
            xu[k * s + solver.nx:k * s + s] = u_scale * rng.standard_normal(solver.nu)
    return xu
