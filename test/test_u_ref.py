"""The gravity-referenced control cost (SolverParams.u_ref, docs/solver_method.md) through the
public API: the CUDA backend's shared numeric core (run on the host) against the CPU backend,
the setter and the controller configuration, and bad values refused with the field named.
Derivatives and the KKT against the NumPy reference: test/test_factory.py."""
import sys
from pathlib import Path

import numpy as np
import pytest

import gato
from gato.core.config import SolverParams
from gato.planners.controller_setup import apply_tunables, build_controller

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solver_inputs import HOME, goal_ref, perturbed_state  # noqa: E402


def _solve(robot, backend, integrator, linsys, **kw):
    urdf, ee = str(gato.robot_urdf(robot)), gato.robot_info(robot)["ee_frame"]
    x0 = perturbed_state(HOME[robot], np.random.default_rng(3))
    s = gato.BSQP(urdf, 2, 16, 0.02, ee_frame=ee, backend=backend, integrator=integrator, linsys=linsys,
                  max_sqp_iters=3, u_cost=1e-3, **kw)
    ref = goal_ref(s, x0, offset=(0.06, 0.04, -0.05))
    xs, refs = np.stack([x0, x0 + 0.01]), np.stack([ref, ref])
    for _ in range(3):
        res = s.solve(xs, refs)
    return res.xu.copy()


@pytest.mark.parametrize("robot", ("iiwa14", "indy7"))
@pytest.mark.parametrize("integrator", ("euler", "semi_implicit", "rk4"))
@pytest.mark.parametrize("linsys", ("bdsv", "pcg"))
def test_cuda_shared_core_matches_the_cpu_backend_with_the_gravity_reference(robot, integrator, linsys):
    """gato_cuda/sqp.hpp + rbd.hpp gravity (dual numbers), run on the host, against the CPU backend
    (pinocchio gravity derivatives): 3 warm solves of 3 SQP iterations, B = 2."""
    pytest.importorskip("gato._cuda_host")
    cpu = _solve(robot, "cpu", integrator, linsys, u_ref="gravity")
    dev = _solve(robot, "cuda_host", integrator, linsys, u_ref="gravity")
    zero = _solve(robot, "cpu", integrator, linsys)
    assert np.abs(cpu - zero).max() > 1e-3, "u_ref made no difference"
    err = np.abs(cpu - dev).max() / max(1.0, np.abs(cpu).max())
    assert err < 1e-8, err


def test_bad_u_ref_is_refused_with_the_field_named():
    with pytest.raises(ValueError, match=r"u_ref: expected one of \('zero', 'gravity'\), got 'bogus'"):
        SolverParams(u_ref="bogus")
    with pytest.raises(ValueError, match="u_ref"):
        gato._core.Settings(u_ref="bogus")
    with pytest.raises(ValueError, match="u_ref"):
        gato.BSQP(str(gato.robot_urdf("iiwa14")), 1, 8, 0.02, u_ref=3.5)


def test_set_cost_weights_switches_u_ref_between_solves():
    """set_cost_weights(u_ref=...) gives bit for bit the plans of a solver built with that u_ref."""
    urdf = str(gato.robot_urdf("iiwa14"))
    x0 = perturbed_state(HOME["iiwa14"], np.random.default_rng(4))
    built = gato.BSQP(urdf, 1, 8, 0.02, u_cost=1e-3, max_sqp_iters=2, u_ref="gravity")
    switched = gato.BSQP(urdf, 1, 8, 0.02, u_cost=1e-3, max_sqp_iters=2)
    switched.set_cost_weights(u_ref="gravity")
    assert switched.params.u_ref == "gravity"
    ref = goal_ref(built, x0)
    a = built.solve(x0[None], ref[None]).xu
    b = switched.solve(x0[None], ref[None]).xu
    assert np.array_equal(a, b)


def test_controller_configuration_and_tunables_carry_u_ref():
    cfg = dict(robot="iiwa14", N=8, dt=0.03125, batch_size=1, warm_start="shift", linsys="bdsv",
               reseed_threshold=0.0, limits="off", u_ref="gravity")
    ctrl = build_controller(cfg)
    assert ctrl.solver.params.u_ref == "gravity"
    apply_tunables(ctrl, {"u_ref": "zero"})
    assert ctrl.solver.params.u_ref == "zero"
    with pytest.raises(ValueError, match="u_ref"):
        apply_tunables(ctrl, {"u_ref": "upward"})


def test_orientation_bad_input_is_refused_with_the_field_named():
    """rot_cost / N_rot_cost < 0, per-axis factors < 0 or not 3, and (with the term on) a reference
    rotation vector that is not finite or longer than pi: ValueError naming the field."""
    urdf = str(gato.robot_urdf("iiwa14"))
    with pytest.raises(ValueError, match="rot_cost: expected a finite number >= 0"):
        SolverParams(rot_cost=-1.0)
    with pytest.raises(ValueError, match="N_rot_cost"):
        SolverParams(N_rot_cost=float("nan"))
    s = gato.BSQP(urdf, 1, 8, 0.02, rot_cost=2.0)
    with pytest.raises(ValueError, match="rot_axis_weights: entries must be finite and >= 0"):
        s.set_rot_axis_weights([1.0, -0.5, 1.0])
    with pytest.raises(ValueError, match="rot_axis_weights: expected 3 numbers"):
        s.set_rot_axis_weights([1.0, 1.0])
    x0 = np.concatenate([HOME["iiwa14"], np.zeros(7)])
    ref = goal_ref(s, x0).reshape(8, 6)
    ref[3, 3:6] = [0.0, 0.0, 3.3]
    with pytest.raises(ValueError, match=r"eepos_goals_B: orientation slots \[3:6\] of entry 0, knot 3: rotation "
                                         r"vector norm 3.3 > pi"):
        s.solve(x0[None], ref.ravel()[None])
    ref[3, 3:6] = [np.nan, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"eepos_goals_B: contains NaN or Inf"):
        s.solve(x0[None], ref.ravel()[None])
    # weight 0: the slots are not the term's, nothing to refuse
    off = gato.BSQP(urdf, 1, 8, 0.02)
    ref[3, 3:6] = [0.0, 0.0, 3.3]
    off.solve(x0[None], ref.ravel()[None])
