"""JAX arrays through the public API (the numpy / torch / JAX promise of gato.BSQP and
gato.MPCController): inputs are copied in, results come back as JAX arrays, equal to the
numpy path's. JAX hands float64 back only with ``jax_enable_x64`` on (its own rule); with
it off, the results are the numpy results rounded to JAX's float32."""
from __future__ import annotations

import numpy as np
import pytest

import gato
from gato.controller import MPCController

jax = pytest.importorskip("jax", reason="jax is not installed (requirements/lock.txt pins it: run scripts/setup.sh)")
jnp = jax.numpy

URDF = gato.robot_urdf("iiwa14")
Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])


def inputs(s, B=2):
    rng = np.random.default_rng(7)
    x = np.tile(np.r_[Q0, np.zeros(7)], (B, 1)) + 0.02 * rng.standard_normal((B, 14))
    p = s.ee_pos(Q0) + np.array([0.05, -0.04, 0.03])
    ref = np.tile(np.r_[p, 0.0, 0.0, 0.0], (B, s.N))
    return x, ref


def is_jax(a) -> bool:
    return isinstance(a, jax.Array)


def test_solve_with_jax_inputs_returns_jax_equal_to_numpy():
    s = gato.BSQP(URDF, 2, 8, 0.03, max_sqp_iters=2)
    x, ref = inputs(s)
    r_np = s.solve(x, ref)
    s.reset()
    with jax.enable_x64(True):
        r_j = s.solve(jnp.asarray(x), jnp.asarray(ref))
        assert is_jax(r_j.xu) and r_j.xu.dtype == jnp.float64 and r_j.xu.shape == (2, s.xu_size)
        np.testing.assert_array_equal(np.asarray(r_j.xu), r_np.xu)
    # a JAX warm start, too; the result's kind follows xcur_B
    s.reset()
    with jax.enable_x64(True):
        r_w = s.solve(jnp.asarray(x), jnp.asarray(ref), jnp.asarray(s.hold_trajectory(x)))
        np.testing.assert_array_equal(np.asarray(r_w.xu), r_np.xu)
    s.reset()
    r_w = s.solve(x, ref, jnp.asarray(s.hold_trajectory(x)))
    assert isinstance(r_w.xu, np.ndarray)


def test_jax_float32_default_rounds_the_numpy_result():
    """Without jax_enable_x64 JAX holds float32: the result is the float64 solve rounded once."""
    s = gato.BSQP(URDF, 2, 8, 0.03)
    x, ref = inputs(s)
    r_np = s.solve(x.astype(np.float32).astype(np.float64), ref.astype(np.float32).astype(np.float64))
    s.reset()
    r_j = s.solve(jnp.asarray(x), jnp.asarray(ref))  # float32 inputs (JAX's default)
    assert is_jax(r_j.xu) and r_j.xu.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(r_j.xu), r_np.xu.astype(np.float32))


def test_resident_warm_start_and_sim_forward_with_jax():
    s = gato.BSQP(URDF, 2, 6, 0.03)
    x, ref = inputs(s)
    with jax.enable_x64(True):
        s.hold_warm(jnp.asarray(x[0]))
        np.testing.assert_array_equal(s.get_warm(), s.hold_trajectory(np.tile(x[0], (2, 1))))
        r = s.solve_warm(jnp.asarray(x), jnp.asarray(ref))
        assert is_jax(r.xu)
        np.testing.assert_array_equal(s.get_warm(), np.asarray(r.xu))
        u = jnp.zeros((2, s.nu))
        xn = s.sim_forward(jnp.asarray(x), u, 0.01)
        assert is_jax(xn) and xn.shape == (2, s.nx)
        np.testing.assert_array_equal(np.asarray(xn), s.sim_forward(x, np.zeros((2, s.nu)), 0.01))


def test_jax_wrench_and_cost_setters():
    s = gato.BSQP(URDF, 1, 6, 0.03)
    x, ref = inputs(s, B=1)
    s.set_f_ext_B(np.array([[0.0, 0.0, 0.0, 0.0, 0.0, -5.0]]))
    s.set_u_cost_vec(np.full(7, 1e-5))
    r_np = s.solve(x, ref)
    s.reset()
    with jax.enable_x64(True):
        s.set_f_ext_B(jnp.asarray([[0.0, 0.0, 0.0, 0.0, 0.0, -5.0]]))
        s.set_u_cost_vec(jnp.full(7, 1e-5))
        r_j = s.solve(jnp.asarray(x), jnp.asarray(ref))
    np.testing.assert_array_equal(np.asarray(r_j.xu), r_np.xu)


def test_bad_jax_input_raises_value_error_naming_the_argument():
    s = gato.BSQP(URDF, 2, 6, 0.03)
    x, ref = inputs(s)
    with pytest.raises(ValueError, match="xcur_B: contains NaN"):
        s.solve(jnp.asarray(x).at[0, 3].set(jnp.nan), jnp.asarray(ref))
    with pytest.raises(ValueError, match=r"eepos_goals_B: expected shape \(2, 36\)"):
        s.solve(jnp.asarray(x), jnp.asarray(ref)[:, :-1])


def test_controller_step_with_jax_returns_jax_u():
    s = gato.BSQP(URDF, 1, 8, 0.03)
    x, ref = inputs(s, B=1)
    c_np = MPCController(s, limits="off")
    c_np.reset(x[0])
    u_np = c_np.step(x[0], ref[0]).u
    s2 = gato.BSQP(URDF, 1, 8, 0.03)
    c_j = MPCController(s2, limits="off")
    with jax.enable_x64(True):
        c_j.reset(jnp.asarray(x[0]))
        r = c_j.step(jnp.asarray(x[0]), jnp.asarray(ref[0]))
        assert is_jax(r.u) and r.u.shape == (s.nu,)
        np.testing.assert_array_equal(np.asarray(r.u), np.asarray(u_np))
