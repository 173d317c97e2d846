"""BSQP's public surface: bad input gets a ValueError naming the argument and the
expected shape, without changing solver state; array kinds; warm-start helpers;
external wrenches; parameters."""
import numpy as np
import pytest

import gato
from gato.common import world_wrench_to_joint_local
from gato.interface import shift_plan

URDF = gato.robot_urdf("iiwa14")
Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])


@pytest.fixture(scope="module")
def solver():
    return gato.BSQP(URDF, 2, 8, 0.03)


def inputs(s):
    x = np.tile(np.r_[Q0, np.zeros(7)], (s.batch_size, 1))
    ref = np.tile(np.r_[s.ee_pos(Q0) + [0.05, 0, 0], 0, 0, 0], (s.batch_size, s.N))
    return x, ref


@pytest.mark.parametrize("kwargs,match", [
    (dict(N=1), r"N: expected an integer >= 2"),
    (dict(dt=0.0), r"dt: expected a finite knot spacing > 0"),
    (dict(dt=-0.1), r"dt: expected a finite knot spacing > 0"),
    (dict(batch_size=0), r"batch_size: expected an integer >= 1"),
    (dict(ee_frame="no_such_frame"), r"ee_frame: frame 'no_such_frame' not found"),
    (dict(plant_type="no_such_robot"), r"plant_type: unknown robot 'no_such_robot'"),
    (dict(linsys="lu"), r"linsys: expected one of"),
    (dict(mu=float("nan")), r"mu: expected a finite number"),
    (dict(no_such_param=1.0), r"unknown field\(s\) \['no_such_param'\]"),
    (dict(variant="fc"), r"variant: 'fc' modules are CUDA builds"),
    (dict(integrator="midpoint"), r"integrator: expected one of"),
])
def test_constructor_rejects_bad_arguments(kwargs, match):
    args = dict(model_path=URDF, batch_size=1, N=8, dt=0.03)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        gato.BSQP(**args)


def test_missing_urdf_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="model_path: URDF file not found"):
        gato.BSQP(tmp_path / "nope.urdf", 1, 8, 0.03)


def test_floating_base_robot_is_refused():
    with pytest.raises(ValueError, match="floating-base"):
        gato.BSQP(gato.robot_urdf("go2"), 1, 8, 0.03)


@pytest.mark.parametrize("which,bad,match", [
    ("x", np.zeros((2, 13)), r"xcur_B: expected shape \(2, 14\) or \(14,\), got \(2, 13\)"),
    ("x", np.zeros((3, 14)), r"xcur_B: expected shape \(2, 14\)"),
    ("ref", np.zeros((2, 47)), r"eepos_goals_B: expected shape \(2, 48\) or \(48,\), got \(2, 47\)"),
    ("warm", np.zeros((2, 10)), r"xu_warm: expected shape \(2, 161\)"),
    ("x", "nan", r"xcur_B: contains NaN or Inf"),
    ("ref", "inf", r"eepos_goals_B: contains NaN or Inf"),
    ("warm", "nan", r"xu_warm: contains NaN or Inf"),
])
def test_solve_rejects_bad_inputs_without_touching_state(solver, which, bad, match):
    x, ref = inputs(solver)
    warm = solver.hold_trajectory(x)
    good = solver.solve(x, ref, warm)
    rho_before, lam_before = solver.rho(), solver.get_lambda()
    args = {"x": x.copy(), "ref": ref.copy(), "warm": warm.copy()}
    if isinstance(bad, str):
        args[which][0, 3] = float(bad)
    else:
        args[which] = bad
    with pytest.raises(ValueError, match=match):
        solver.solve(args["x"], args["ref"], args["warm"])
    np.testing.assert_array_equal(solver.rho(), rho_before)
    np.testing.assert_array_equal(solver.get_lambda(), lam_before)
    assert good.xu.shape == (2, solver.xu_size)


def test_bad_setter_arguments(solver):
    with pytest.raises(ValueError, match=r"linsys: expected one of"):
        solver.set_linsys("cholesky")
    with pytest.raises(ValueError, match=r"knot_weights: expected shape \(8, 3\)"):
        solver.set_cost_weights_per_knot(np.ones((7, 3)))
    with pytest.raises(ValueError, match=r"weights: expected shape \(7,\)"):
        solver.set_u_cost_vec(np.ones(6))
    with pytest.raises(ValueError, match=r"q_nom: contains NaN"):
        solver.set_q_nom(np.full(7, np.nan))
    with pytest.raises(ValueError, match=r"f_ext_B: expected shape \(2, 6\), \(2, 42\), \(2, 8, 6\) or \(2, 8, 42\)"):
        solver.set_f_ext_B(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"q_cost: expected a finite number >= 0"):
        solver.set_cost_weights(q_cost=-1.0)
    with pytest.raises(ValueError, match=r"budget_s: expected a finite budget > 0"):
        solver.solve(*inputs(solver), budget_s=-1.0)
    with pytest.raises(ValueError, match=r"frame: unknown frame 'nope'"):
        solver.ee_pos(Q0, frame="nope")


def test_solver_params_dataclass():
    p = gato.SolverParams()
    assert p.max_sqp_iters == 1 and p.mu == 10.0 and p.rho == 0.01 and p.u_cost == 2e-6
    q = p.replace(mu=5.0)
    assert q.mu == 5.0 and p.mu == 10.0
    assert gato.SolverParams.from_mapping({"q_cost": 3.0}).q_cost == 3.0
    with pytest.raises(ValueError, match="unknown field"):
        gato.SolverParams.from_mapping({"kkt_tol": 1e-3})
    assert p.asdict()["N_cost"] == 50.0
    with pytest.raises(Exception):
        p.mu = 3.0  # frozen


def test_torch_inputs_return_torch():
    torch = pytest.importorskip("torch", reason="torch not installed: the numpy path is tested elsewhere")
    s = gato.BSQP(URDF, 1, 8, 0.03)
    x, ref = inputs(s)
    r_np = s.solve(x, ref)
    s.reset()
    r_t = s.solve(torch.from_numpy(x), torch.from_numpy(ref))
    assert isinstance(r_t.xu, torch.Tensor)
    np.testing.assert_array_equal(r_t.xu.numpy(), r_np.xu)


def test_warm_start_helpers_and_shift():
    s = gato.BSQP(URDF, 2, 6, 0.03)
    x, ref = inputs(s)
    s.hold_warm(x[0])
    np.testing.assert_array_equal(s.get_warm(), s.hold_trajectory(x))
    res = s.solve_warm(x, ref)
    np.testing.assert_array_equal(s.get_warm(), res.xu)
    row = res.xu[1].copy()
    s.shift_warm(best_id=1)
    shifted = s.get_warm()
    st = s.nx + s.nu
    np.testing.assert_array_equal(shifted[0], shifted[1])
    np.testing.assert_array_equal(shifted[0, :4 * st], row[st:5 * st])  # knots advanced by one
    np.testing.assert_array_equal(shifted[0, 5 * st:], row[5 * st:])  # last knot repeated
    np.testing.assert_array_equal(shifted[0, 4 * st + s.nx:5 * st], row[4 * st + s.nx:5 * st])  # last u repeated
    assert s.pred_err_warm(row[st:st + s.nx]) == 0.0
    s.shift_warm(best_id=0, hold=True)
    np.testing.assert_array_equal(s.get_warm()[1], shifted[0])
    np.testing.assert_array_equal(shift_plan(row, s.nx, s.nu, s.N), shifted[0])


def test_result_accessors():
    s = gato.BSQP(URDF, 2, 6, 0.03)
    x, ref = inputs(s)
    r = s.solve(x, ref)
    st = s.nx + s.nu
    np.testing.assert_array_equal(r.u0(1), r.xu[1, s.nx:st])
    np.testing.assert_array_equal(r.control_at(99, 0), r.xu[0, 4 * st + s.nx:5 * st])  # clamped to N-2
    assert r.batch_size == 2 and r.n_fc == 0 and r.fc_at(0).shape == (0,) and r.fc_traj().shape == (5, 0)
    assert not r.diverged.any()
    assert r.stats.sqp_iters.shape == (2,) and r.stats.pcg_iters.shape == (2, 1)
    lam = s.get_lambda()
    assert lam.shape == (2, s.N + 2, s.nx) and np.all(lam[:, s.N:] == 0)


def test_external_wrench_shapes_agree_and_change_the_dynamics():
    s = gato.BSQP(URDF, 1, 4, 0.03, integrator="semi_implicit")
    x = np.r_[Q0, np.zeros(7)][None]
    u = np.zeros((1, 7))
    free = s.sim_forward(x, u, 0.01)
    _, slot = world_wrench_to_joint_local(s.model, s.data, s.ee_frame_id, Q0, [0, 0, -50.0, 0, 0, 0])
    s.set_f_ext_B(slot[None])
    pushed = s.sim_forward(x, u, 0.01)
    assert np.abs(pushed - free).max() > 1e-4
    band = np.zeros((1, s.N, 6 * s.n_bodies))
    band[:, :, 6 * 6:6 * 7] = slot
    for f in (slot[None], band[:, 0], slot[None, None].repeat(s.N, 1), band):
        s.set_f_ext_B(f)
        np.testing.assert_array_equal(s.sim_forward(x, u, 0.01), pushed)
    # The same wrench through pinocchio's aba with a world-frame external force.
    import pinocchio as pin
    m, d = s.model, s.data
    fext = [pin.Force.Zero() for _ in range(m.njoints)]
    fext[7] = pin.Force(slot[3:], slot[:3])
    qdd = pin.aba(m, d, Q0, np.zeros(7), np.zeros(7), fext)
    np.testing.assert_allclose(pushed[0, 7:], 0.01 * qdd, rtol=1e-10, atol=1e-12)
    s.reset()
    np.testing.assert_array_equal(s.sim_forward(x, u, 0.01), free)


def test_budget_stops_at_an_iteration_boundary():
    s = gato.BSQP(URDF, 1, 16, 0.03, max_sqp_iters=50)
    x, ref = inputs(s)
    r = s.solve(x[:1], ref[:1], budget_s=1e-6)
    assert r.stats.budget_hit and r.stats.sqp_iters[0] == 1  # the first iteration always runs
    r = s.solve(x[:1], ref[:1])
    assert not r.stats.budget_hit


def test_registry_helpers():
    assert gato.robot_info("iiwa14")["ee_frame"] == "EE"
    assert gato.robot_info("nope") == {}
    assert gato.module_name("iiwa14", 32) == "bsqpN32_iiwa14"
    assert gato.module_name("iiwa14", 32, "fc") == "bsqpN32_iiwa14_fc"
    av = gato.available()
    assert ("iiwa14", 32) in av and ("indy7", 64) in av and not any(p == "go2" for p, _ in av)
    assert gato.available("fc") == {}
    with pytest.raises(ValueError, match="variant"):
        gato.available("xx")
    with pytest.raises(ValueError, match="unknown robot"):
        gato.robot_urdf("nope")


def test_drho_batch_sets_the_trust_region_adaptation_factor():
    s = gato.BSQP(URDF, 2, 8, 0.03, max_sqp_iters=1, rho=0.01)
    x, ref = inputs(s)
    s.set_drho_batch([2.0, 1.5])
    r = s.solve(x, ref)
    # One accepted step: rho <- rho * min(1/f, 1/f) per entry.
    assert np.all(r.stats.step_size[:, 0] > 0)
    np.testing.assert_allclose(s.rho(), [0.01 / 2.0, 0.01 / 1.5], rtol=1e-12)
    s.reset_rho()
    np.testing.assert_allclose(s.rho(), [0.01, 0.01])
    with pytest.raises(ValueError, match="drho_batch: factors must be > 1"):
        s.set_drho_batch([1.0, 2.0])
    with pytest.raises(ValueError, match=r"drho_batch: expected shape \(2,\)"):
        s.set_drho_batch([2.0, 2.0, 2.0])


def test_collect_stats_off_keeps_results_and_drops_per_iteration_arrays():
    s = gato.BSQP(URDF, 1, 8, 0.03, max_sqp_iters=3)
    x, ref = inputs(s)
    on = s.solve(x[:1], ref[:1])
    s.reset()
    s.set_collect_stats(False)
    off = s.solve(x[:1], ref[:1])
    np.testing.assert_array_equal(on.xu, off.xu)
    assert off.stats.pcg_iters.shape == (1, 0) and off.stats.step_size.shape == (1, 0)
    assert off.stats.sqp_iters[0] == on.stats.sqp_iters[0]
    assert s.last_profile["kkt_us"] == 0.0  # the per-stage timers are skipped too


def test_register_robot_makes_a_urdf_usable_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    entry = gato.register_robot("my_arm", URDF, ee_frame="EE")
    assert entry["nq"] == 7 and gato.robot_info("my_arm")["ee_frame"] == "EE"
    s = gato.BSQP(URDF, 1, 8, 0.03, plant_type="my_arm")
    assert s.plant_type == "my_arm" and s.ee_frame == "EE"
    assert gato.robot_urdf("my_arm") == URDF.resolve() if hasattr(URDF, "resolve") else True
    with pytest.raises(ValueError, match="ee_frame: frame 'nope' not found"):
        gato.register_robot("bad", URDF, ee_frame="nope")
    with pytest.raises(ValueError, match="urdf_path: file not found"):
        gato.register_robot("bad", tmp_path / "none.urdf")
    other = gato.robot_urdf("indy7")
    with pytest.raises(ValueError, match="already registered with another URDF"):
        gato.register_robot("my_arm", other)
    assert gato.register_robot("my_arm", other, force=True)["nq"] == 6
