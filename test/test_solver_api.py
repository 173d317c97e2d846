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


#: torch runs on the CPU in CI (requirements/lock.txt pins PyPI's wheel with its CUDA runtime wheels,
#: which it needs to import even without a GPU). JAX: test/test_jax_inputs.py.
TORCH_SKIP = "torch is not installed (requirements/lock.txt pins it: run scripts/setup.sh)"


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


def test_floating_base_robot_gets_the_contact_force_solver():
    """Issue 34: a floating-base plant is the contact-force SQP (test/test_floating_rows.py), not
    a batched fixed-base BSQP; B > 1 is refused by name."""
    s = gato.BSQP(gato.robot_urdf("go2"), 1, 8, 0.03)
    assert not isinstance(s, gato.BSQP) and s.variant == "fc" and s.floating_base
    with pytest.raises(ValueError, match="batch_size"):
        gato.BSQP(gato.robot_urdf("go2"), 2, 8, 0.03)


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
    torch = pytest.importorskip("torch", reason=TORCH_SKIP)
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


def test_stats_and_result_fields_of_a_solve():
    s = gato.BSQP(URDF, 2, 8, 0.03, max_sqp_iters=3, linsys="pcg")
    x, ref = inputs(s)
    r = s.solve(x, ref)
    st = r.stats
    assert isinstance(st.solve_time_us, int) and st.solve_time_us > 0 and r.solve_time_us == st.solve_time_us
    assert st.kkt_converged.shape == (2,) and st.kkt_converged.dtype == bool
    assert st.ls_num_iters == 8                                   # alpha = 2^-i, i = 0..7
    assert np.shape(st.pcg_times_us) == (3,) and np.all(np.asarray(st.pcg_times_us) >= 0)
    assert np.all(st.final_merit <= st.initial_merit)
    assert r.n_actuated == s.n_actuated == 7
    np.testing.assert_array_equal(r.xu_b(1), r.xu[1])
    assert r.xu_b().shape == (s.xu_size,)


def test_exact_hessian_switches_on_the_cpu_backend():
    # The method and its checks: test/test_exact_hessian.py.
    s = gato.BSQP(URDF, 1, 8, 0.03)
    assert s.exact_hessian_available() is True and s.variant == "default"
    s.set_exact_hessian(True)
    assert s.variant == "eh" and s.params.exact_hessian is True
    s.set_params(gato.SolverParams())                            # Gauss-Newton again
    assert s.variant == "default"
    assert gato.BSQP(URDF, 1, 8, 0.03, exact_hessian=True).variant == "eh"
    with pytest.raises(ValueError, match=r"^on: expected True or False, got 'yes'$"):
        s.set_exact_hessian("yes")
    with pytest.raises(ValueError, match=r"^exact_hessian: expected a bool, got 1$"):
        gato.SolverParams(exact_hessian=1)


def test_set_warm_broadcasts_or_takes_a_batch():
    s = gato.BSQP(URDF, 2, 6, 0.03)
    x, ref = inputs(s)
    row = s.hold_trajectory(x[:1])[0]
    s.set_warm(row)                                              # (xu_size,) broadcast
    np.testing.assert_array_equal(s.get_warm(), np.stack([row, row]))
    batch = s.hold_trajectory(x) + 0.01
    s.set_warm(batch)                                            # (B, xu_size)
    np.testing.assert_array_equal(s.get_warm(), batch)
    with pytest.raises(ValueError, match=r"^xu: expected shape"):
        s.set_warm(np.zeros(5))
    np.testing.assert_array_equal(s.get_warm(), batch)           # unchanged by the refusal


def test_solve_ratio_ends_the_loop_when_that_fraction_converged():
    """Entry 0 (a goal 1 cm away) converges in 5 iterations, entry 1 (a far goal) needs more:
    solve_ratio = 0.5 stops the whole batch when the first half has converged."""
    x = np.tile(np.r_[Q0, np.zeros(7)], (2, 1))
    out = {}
    for ratio in (1.0, 0.5):
        s = gato.BSQP(URDF, 2, 8, 0.03, max_sqp_iters=40, solve_ratio=ratio, linsys="bdsv")
        ref = np.stack([np.tile(np.r_[s.ee_pos(Q0) + off, 0, 0, 0], 8) for off in ([0.01, 0, 0], [0.3, 0.2, -0.2])])
        out[ratio] = s.solve(x, ref).stats
    full, half = out[1.0], out[0.5]
    assert full.kkt_converged.all() and full.sqp_iters[1] > full.sqp_iters[0]
    assert half.kkt_converged[0] and not half.kkt_converged[1]
    assert list(half.sqp_iters) == [full.sqp_iters[0]] * 2
    with pytest.raises(ValueError, match=r"^solve_ratio: expected a fraction in \(0, 1\], got 0.0$"):
        gato.SolverParams(solve_ratio=0.0)


def _kkt(**params):
    s = gato.BSQP(URDF, 1, 4, 0.03, **params)
    x = np.r_[Q0, 0.2 * np.ones(7)]
    xu = s.hold_trajectory(x[None])
    xu[0, s.nx:s.nx + s.nu] = 3.0
    return s, s.debug_setup_kkt(xu, x[None], np.tile(np.r_[s.ee_pos(Q0), 0, 0, 0], 4)[None])


def test_solver_params_fields_reach_the_solver():
    """Each numeric field of SolverParams changes what the solver does."""
    nv = 7
    # qd_cost: the velocity diagonal of Q; q_lim_cost / vel_lim_cost / ctrl_lim_cost add barrier curvature.
    _, k0 = _kkt(qd_cost=0.3, q_lim_cost=0.0)
    np.testing.assert_allclose(np.diagonal(k0["Q"][0, 1])[nv:], 0.3)
    _, kq = _kkt(qd_cost=0.3, q_lim_cost=0.5)
    assert np.all(np.diagonal(kq["Q"][0, 1])[:nv] > np.diagonal(k0["Q"][0, 1])[:nv])
    _, kv = _kkt(qd_cost=0.3, q_lim_cost=0.0, vel_lim_cost=0.5)
    assert np.all(np.diagonal(kv["Q"][0, 1])[nv:] > 0.3)
    _, ku = _kkt(ctrl_lim_cost=0.5)
    _, ku0 = _kkt()
    assert np.all(np.diagonal(ku["R"][0, 0]) > np.diagonal(ku0["R"][0, 0]))
    # max_pcg_iters caps, pcg_tol loosens, the PCG iterations of a solve.
    x = np.r_[Q0, np.zeros(7)][None]
    ref = np.tile(np.r_[gato.BSQP(URDF, 1, 8, 0.03).ee_pos(Q0) + [0.1, 0, 0], 0, 0, 0], 8)[None]
    iters = {}
    for key, kw in {"tight": dict(pcg_tol=1e-12), "loose": dict(pcg_tol=1e-2),
                    "capped": dict(pcg_tol=1e-12, max_pcg_iters=3)}.items():
        s = gato.BSQP(URDF, 1, 8, 0.03, linsys="pcg", **kw)
        iters[key] = int(s.solve(x, ref).stats.pcg_iters[0, 0])
    assert iters["capped"] == 3 and iters["loose"] < iters["tight"], iters
    # adapt_rho: off keeps the trust region weight, on adapts it.
    for adapt in (False, True):
        s = gato.BSQP(URDF, 1, 8, 0.03, max_sqp_iters=3, adapt_rho=adapt, rho=0.05)
        s.solve(x, ref)
        assert bool(s.rho()[0] == 0.05) is (not adapt)


def test_cache_manifest_helpers(tmp_path, monkeypatch):
    from gato import _cache

    monkeypatch.delenv("GATO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cache.cache_dir() == tmp_path / "xdg" / "gato"
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "c"))
    assert _cache.cache_dir() == tmp_path / "c"
    assert _cache.load_manifest() == {} and _cache.robot_entry("my_arm") is None
    gato.register_robot("my_arm", URDF, ee_frame="EE")
    assert _cache.robot_entry("my_arm")["urdf_path"] == str(URDF.resolve())
    assert set(_cache.load_manifest()) == {"my_arm"}
    (tmp_path / "c" / "manifest.json").write_text("{not json")
    with pytest.raises(RuntimeError, match="manifest.json is unreadable"):
        _cache.load_manifest()


def test_admm_check_every_is_validated_and_changes_no_cpu_result():
    """admm_check_every is the CUDA launch loop's host-break period; the CPU backend has no
    launch loop (each entry exits its inner loop at its own test), so every period gives the
    same plans, inner iteration counts and residuals (docs/status.md: partial)."""
    s0 = gato.BSQP(URDF, 2, 16, 0.03125)
    x = np.tile(np.r_[Q0, np.zeros(7)], (2, 1))
    ref = np.tile(np.r_[s0.ee_pos(Q0) + [0.0, 0.4, 0.1], 0, 0, 0], (2, 16))   # velocity box active
    out = []
    for every in (0, 1, 5):
        s = gato.BSQP(URDF, 2, 16, 0.03125, max_sqp_iters=2)
        s.enable_limit_admm(iters=6, eps_rel=1e-2)
        s.set_admm_exit(0.0, 1e-2, check_every=every)
        assert s.admm_check_every == every
        r = s.solve(x, ref)
        for _ in range(10):                                       # warm repeat solves: the exit ends loops
            r = s.solve(x, ref, r.xu)
        out.append((r.xu, r.stats.admm_iters, r.stats.admm_r_prim))
    assert np.all(out[0][1] < 6 * 2)                              # the exit test did end inner loops early
    for xu, iters, rp in out[1:]:
        np.testing.assert_array_equal(xu, out[0][0])
        np.testing.assert_array_equal(iters, out[0][1])
        np.testing.assert_array_equal(rp, out[0][2])
    with pytest.raises(ValueError, match=r"^check_every: expected an integer >= 0, got -1$"):
        s.set_admm_exit(1e-4, 1e-3, check_every=-1)


def test_description_meshes_are_exactly_the_referenced_ones():
    """gato_description ships what the registry's URDFs use and nothing else: every URDF in the
    package is a registered robot's (the core's CMake bundles robots/*/*.urdf), every mesh file
    is referenced by a URDF of its folder, every relative mesh reference of a collision model
    exists, and every folder has its provenance README."""
    import re
    from pathlib import Path

    from gato.robots import all_robots

    robots = Path(__file__).resolve().parents[1] / "src" / "gato_description" / "robots"
    registry = {(m["description"], m["urdf"]) for m in all_robots().values() if "description" in m}
    urdfs = sorted(robots.glob("*/*.urdf"))
    assert {(u.parent.name, u.name) for u in urdfs} <= registry, "a URDF no registered robot uses"
    for folder in sorted(p for p in robots.iterdir() if p.is_dir()):
        assert (folder / "README.md").is_file(), f"{folder.name}: no provenance README"
        text = "\n".join(u.read_text() for u in folder.glob("*.urdf"))
        refs = set(re.findall(r'<mesh filename="(?!package://)([^"]+)"', text))
        collision = set(re.findall(r'<collision>.*?<mesh filename="(?!package://)([^"]+)"', text, re.S))
        shipped = {p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.suffix.lower() in (".stl", ".dae", ".obj")}
        assert shipped <= refs, f"{folder.name}: unreferenced meshes {sorted(shipped - refs)}"
        assert collision <= shipped, f"{folder.name}: missing collision meshes {sorted(collision - shipped)}"
