"""Every keyword argument of the public API (the solver, controller and builder, then the simulation
drivers, hypotheses, estimators, worlds, task generators and tools) refuses an unusable value
(issue 40: "no argument silently ignored"): a ValueError or TypeError whose message names the
argument. One case per (callable, parameter); ``test_every_keyword_argument_has_a_case`` fails
when a public callable of CALLABLES gains a parameter with a default that has no case here, and
``test_unknown_keywords_are_refused`` when one starts swallowing unknown keywords.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import gato
from gato import BSQP, MPCController, MPCPolicy, SolverParams
from gato.floating import FloatingBSQP

IIWA = gato.robot_urdf("iiwa14")
N, DT = 8, 0.03
NOT_A_NUMBER = "fast"


def solver(**kw):
    return BSQP(IIWA, 1, N, DT, **kw)


def admm_solver():
    s = solver()
    s.enable_limit_admm()
    return s


def collision_solver():
    s = admm_solver()
    s.set_collision_environment(spheres=[(0.6, 0.0, 0.4, 0.05)])
    return s


def x0():
    return np.r_[0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0, np.zeros(7)]


def ref0(s):
    return np.tile(np.r_[s.ee_pos(x0()[:7]), 0, 0, 0], s.N)


C3 = np.eye(7)[:3]

#: (name, make(): the bound callable, positional args, {parameter: unusable value}). A value is
#: unusable when it is of the wrong kind or outside the documented range.
CASES = [
    ("BSQP", lambda: BSQP, (IIWA, 1, N, DT), dict(
        params={"mu": 1.0}, plant_type="no_such_robot", variant="fc", rho_batch=[0.0], mu_batch=[-1.0],
        pcg_tol_batch=[1.0, 2.0], ee_frame="no_such_frame", dtype=np.int32, integrator="leapfrog",
        threads=0, backend="tpu")),
    ("BSQP.solve", lambda: solver().solve, (x0(), np.zeros(6 * N)), dict(xu_warm=np.zeros(3), budget_s=-1.0)),
    ("BSQP.solve_warm", lambda: _warm(solver()).solve_warm, (x0(), np.zeros(6 * N)), dict(budget_s=NOT_A_NUMBER)),
    ("BSQP.ee_pos", lambda: solver().ee_pos, (x0()[:7],), dict(frame="no_such_frame")),
    ("BSQP.shift_warm", lambda: _warm(solver()).shift_warm, (), dict(best_id=5, hold="yes")),
    ("BSQP.set_drho_batch", lambda: solver().set_drho_batch, (1.2,), dict(set_as_reset_default="yes")),
    ("BSQP.set_admm_exit", lambda: solver().set_admm_exit, (), dict(eps_abs=-1.0, eps_rel=np.nan, check_every=-1)),
    ("BSQP.set_admm_merit", lambda: solver().set_admm_merit, (), dict(on="yes")),
    ("BSQP.set_admm_rho_adaptation", lambda: solver().set_admm_rho_adaptation, (), dict(on="yes")),
    ("BSQP.set_cost_weights", lambda: solver().set_cost_weights, (), dict(
        q_cost=-1.0, qd_cost=np.inf, u_cost=NOT_A_NUMBER, N_cost=-2.0, q_lim_cost=-1.0, vel_lim_cost=np.nan,
        ctrl_lim_cost=-1.0, u_ref="gravitas", rot_cost=-1.0, N_rot_cost=np.nan)),
    ("BSQP.set_q_nom", lambda: solver().set_q_nom, (), dict(q_nom=np.zeros(3))),
    ("BSQP.set_u_cost_vec", lambda: solver().set_u_cost_vec, (), dict(weights=np.ones(3))),
    ("BSQP.set_collision_environment", lambda: solver().set_collision_environment, (), dict(
        spheres=[(0.0, 0.0)], capsules=[(1.0,)], cuboids=[(0.0,) * 4], planes=[(0.0,) * 2])),
    ("BSQP.enable_limit_barrier", lambda: solver().enable_limit_barrier, (), dict(mu=-1.0, delta=0.0)),
    ("BSQP.enable_limit_admm", lambda: solver().enable_limit_admm, (), dict(
        rho=0.0, iters=0, rho_q=-1.0, rho_qd=NOT_A_NUMBER, rho_u=np.inf, eps_abs=-1.0, eps_rel=-1.0,
        check_every=-1)),
    ("BSQP.enable_limit_al", lambda: solver().enable_limit_al, (), dict(rho=0.0, rho_q=-1.0, rho_qd=np.nan,
                                                                       rho_u=NOT_A_NUMBER)),
    ("BSQP.enable_ee_terminal_equality", lambda: admm_solver().enable_ee_terminal_equality, ([0.5, 0.0, 0.4],),
     dict(rho=-1.0)),
    ("BSQP.add_lin_u_rows", lambda: admm_solver().add_lin_u_rows, (C3,), dict(
        d=np.zeros(5), lo=np.zeros(5), hi=np.zeros(5), mech="magic", rho=-1.0, delta=0.0, sigma=-1.0, cone="yes",
        knot_lo=-1, knot_hi=N + 5, admm_iters=-1, equilibrate=True, normalize="yes")),
    ("BSQP.enable_u_cone", lambda: admm_solver().enable_u_cone, (C3,), dict(
        d=np.zeros(5), mech="magic", rho=-1.0, form="round", facets=2, facet_scale="huge")),
    ("BSQP.enable_collision", lambda: collision_solver().enable_collision, (), dict(
        mech="magic", margin=np.nan, rho=-1.0, delta=0.0, sigma=-1.0, knot_lo=N, admm_iters=-1)),
    ("BSQP.feedback_gains", lambda: _solved(solver()).feedback_gains, (), dict(row=3)),
    ("MPCController", lambda: MPCController, (solver(),), dict(
        hypotheses=object(), warm_start="keep", reset_rho_each_step="yes", linsys="direct", bdsv_threshold=-1.0,
        task_tag="", reseed_threshold=np.nan, admm_linsys="bdsv", admm_threshold=-1.0, limits="hard",
        limits_kw=[("iters", 3)], orientation_weights=(-1.0, 1.0), pose_ee_weight_scale=0.0)),
    ("MPCController.reset", lambda: MPCController(solver()).reset, (x0(),), dict(xu_warm=np.zeros(3))),
    ("MPCController.step", lambda: _reset(MPCController(solver())).step, (x0(), np.zeros(6 * N)), dict(
        dt_elapsed=-1.0, budget_s=0.0)),
    ("MPCPolicy", lambda: MPCPolicy, (MPCController(solver()), gato.GoalReference([0.5, 0, 0.4], N), DT), dict(
        obs_to_state="identity", budget_s=-1.0)),
    ("SolverParams", lambda: SolverParams, (), dict(
        max_sqp_iters=0, max_pcg_iters=1.5, pcg_tol=-1.0, solve_ratio=2.0, mu=np.inf, rho=0.0, adapt_rho="yes",
        linsys="direct", q_cost=-1.0, qd_cost=NOT_A_NUMBER, u_cost=-1.0, N_cost=np.nan, q_lim_cost=-1.0,
        vel_lim_cost=-1.0, ctrl_lim_cost=-1.0, u_ref="gravitas", rot_cost=-1.0, N_rot_cost=np.inf,
        exact_hessian="yes", line_search="all")),
    ("build", lambda: gato.build, (IIWA,), dict(
        name="my arm", N=[1], ee_frame="no_such_frame", arch="90", jobs=8, build_dir=3, collision_res=-1.0,
        contact_frames=["no_such_frame"], floating_base=True, contact_forces=True, exact_hessian="yes")),
    ("register_robot", lambda: gato.register_robot, ("arm", IIWA), dict(
        N=[1], ee_frame="no_such_frame", floating_base=True, collision_res=0.0, contact_frames=["nope"],
        variant="fc", build="yes", cache_dir_override=3, arch="90", jobs=4, force="yes")),
    ("codegen", lambda: gato.builder.codegen, (IIWA, "arm"), dict(
        ee_frame="no_such_frame", algorithm_list=["aba"], out_dir=3, register="yes", collision_res=-1.0,
        contact_frames=["nope"], floating_base=True)),
]

#: The floating-base contact-force solver (gato.BSQP(..., plant_type="go2", variant="fc"), issue 34).
GO2 = gato.robot_urdf("go2")


def fc_solver():
    return BSQP(GO2, 1, N, DT, plant_type="go2", variant="fc")


def go2_x0():
    return np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0, [0.0, 0.9, -1.8] * 4, np.zeros(18)]


CASES += [
    ("FloatingBSQP", lambda: FloatingBSQP, (GO2,), dict(
        batch_size=2, N=1, dt=-1.0, params={"mu": 1.0}, plant_type="iiwa14", variant="eh",
        contact_frames=["no_such_frame"], max_sqp_iters=0, al_iters=0, al_tol=-1.0, tol=np.nan)),
    ("FloatingBSQP.fc_slots", lambda: fc_solver().fc_slots, (0,), dict(part="m")),
    ("FloatingBSQP.add_fc_box", lambda: fc_solver().add_fc_box, (0.0, 1.0), dict(
        slots=[99], mech="admm", rho=-1.0, knot_lo=-1, knot_hi=99)),
    ("FloatingBSQP.add_fc_cone", lambda: fc_solver().add_fc_cone, (0, 0.5), dict(
        mech="barrier", rho=0.0, form="ellipse", facets=2, facet_scale="big", knot_lo=-1, knot_hi=99)),
    ("FloatingBSQP.add_contact_pos_rows", lambda: fc_solver().add_contact_pos_rows, (), dict(
        targets=np.zeros(5), lo=np.zeros(5), hi=np.nan, mech="admm", rho=-1.0, delta=0.1, sigma=0.1, knot_lo=-1,
        knot_hi=99, admm_iters=3)),
    ("FloatingBSQP.solve", lambda: fc_solver().solve, (go2_x0(),), dict(x_ref=np.zeros(3), xu_warm=np.zeros(3))),
    ("FloatingBSQP.set_state_weights", lambda: fc_solver().set_state_weights, (1.0,), dict(w_terminal=-1.0)),
    ("FloatingBSQP.set_u_ref", lambda: fc_solver().set_u_ref, (), dict(u_ref=np.zeros(3))),
    ("FloatingBSQP.set_fc_ref", lambda: fc_solver().set_fc_ref, (), dict(ref=np.zeros(5))),
]


def _model():
    return solver().model


def _mpc():
    return gato.MPC_GATO(None, IIWA, N=N, verbose=False)


#: The simulation drivers, hypotheses, estimators, worlds, task generators and tools.
CASES += [
    ("MPC_GATO", lambda: gato.MPC_GATO, (None, IIWA), dict(
        N=1, dt=-1.0, batch_size=0, constant_f_ext=np.zeros(3), track_full_stats="yes", plant_type="no_such_robot",
        variant="fc", pendulum_config={"mass": -1.0, "length": 0.3}, params=[1, 2], linsys="direct",
        bdsv_threshold=-1.0, reseed_threshold=np.nan, admm_linsys="bdsv", admm_threshold=-1.0, limits="hard",
        limits_kw=[("iters", 3)], fe_seed=-1, fc_config={"mu": 0.5}, wrench_id="everything", world="bullet",
        estimator="kalman", verbose="loud", clamp_torques="yes", observe_first="yes", feedback="lqr",
        feedback_kp=1.0, feedback_kd=[0.1] * 7, feedback_limit=2.0, runaway_factor="3")),
    ("MPC_GATO.run_mpc_fig8", lambda: _mpc().run_mpc_fig8, (x0(), np.zeros(6 * 200)), dict(
        sim_dt=-1.0, sim_time=-1.0, pace_by_solve_time="wall")),
    ("MPC_GATO.run_mpc_goals", lambda: _mpc().run_mpc_goals, (x0(), [np.array([0.5, 0.0, 0.4])]), dict(
        sim_dt=-1.0, goal_timeout=-1.0, goal_threshold=0.0, velocity_threshold=-1.0, velocity_norm="L2",
        pace_by_solve_time="wall", settle_time=-1.0, goal_ramp=np.nan)),
    ("ForceHypothesisBatch", lambda: gato.hypotheses.ForceHypothesisBatch,
     (gato.estimators.ForceEstimator(4), _model()), dict(ee_frame="no_such_frame", score_dt=0.0, centre_knots="yes",
                                                         scorer="merit")),
    ("IdentifiedWrenchBatch", lambda: gato.hypotheses.IdentifiedWrenchBatch,
     (gato.estimators.OneStepWrenchIdentifier(_model()), _model()), dict(ee_frame="no_such_frame", n_actuated=0,
                                                                          tick_fit="yes")),
    ("ForceEstimator", lambda: gato.estimators.ForceEstimator, (4,), dict(
        initial_radius=-1.0, min_radius=-1.0, max_radius=0.0, smoothing_factor=2.0, seed=-1, alpha=-1.0, beta=2.0,
        max_wrench=0.0, centre=object())),
    ("CEMForceEstimator", lambda: gato.estimators.CEMForceEstimator, (4,), dict(
        force_sigma=-1.0, torque_sigma=-1.0, elite_frac=2.0, min_sigma=-1.0, max_sigma=0.0, alpha_mean=2.0,
        alpha_cov=-1.0, process_noise=-1.0, momentum_beta=2.0, seed=-1, axial_seeds="yes", shrink_on_exploit=2.0,
        plateau_shrink=0.0, spike_expand=0.5, max_wrench=0.0)),
    ("OneStepWrenchIdentifier", lambda: gato.estimators.OneStepWrenchIdentifier, (_model(),), dict(
        ee_frame="no_such_frame", alpha=2.0, damping=-1.0, max_wrench=0.0, mode="torque", weight_tau=0.0)),
    ("IdentifiedWrenchSampler", lambda: gato.estimators.IdentifiedWrenchSampler, (4, _model()), dict(
        ee_frame="no_such_frame", seed=-1, initial_radius=-1.0, min_radius=-1.0, max_radius=0.0, weight_tau=0.0,
        wrench_alpha=2.0, damping=-1.0, max_wrench=0.0, inertial_rows="yes")),
    ("PinocchioWorld", lambda: gato.worlds.PinocchioWorld, (IIWA,), dict(
        ee_frame=3, substeps=0, pendulum={"mass": -1.0}, constant_f_ext=np.zeros(2), timestep=-1.0,
        mass_scale={"no_such_link": 2.0}, rigid_payload={"mass": -1.0})),
    ("MuJoCoWorld", lambda: gato.worlds.MuJoCoWorld, (IIWA,), dict(
        plane={"height": 0.1}, timestep=0.0, record_contact="yes", floating="yes", integrator="leapfrog",
        mass_scale={"no_such_link": 2.0}, ground="yes")),
    ("pickplace_scenarios", lambda: functools.partial(gato.tasks.pickplace_scenarios, seed=0), (_model(), "iiwa14", 1), dict(
        seed=-1, n_goals=0, ramps=(), ee_frame="no_such_frame", ik_err_max=0.0, min_separation=-1.0)),
    ("fig8_scenarios", lambda: functools.partial(gato.tasks.fig8_scenarios, seed=0), (_model(), "iiwa14", 1), dict(
        seed=-1, dt=0.0, ratio_range=(2.0, 1.0), ee_frame="no_such_frame", ik_err_max=0.0)),
    ("feasible_fig8", lambda: gato.tasks.feasible_fig8, (_model(), "EE", x0()[:7], 0.01), dict(ratio=0.0, cycles=0)),
    ("ik_track", lambda: gato.tasks.ik_track, (_model(), "EE", x0()[:7], np.zeros((2, 3))), dict(
        first_iters=-1, damping=-1.0, max_step=0.0, path_rotvec=np.full((2, 3), 4.0))),
    ("within_q_limits", lambda: gato.tasks.within_q_limits, (_model(), np.zeros((2, 7))), dict(margin=np.nan)),
    ("fig8_reference", lambda: gato.tasks.fig8_reference,
     ({"params": {"period": 2.0}, "dt": 0.01, "plant": "iiwa14"}, N), dict(periods=0)),
    ("fingerprint.check", lambda: gato.fingerprint.check, (lambda q, qd, u: q, "iiwa14"), dict(
        path="/no/such/fingerprint.json", rtol=-1.0)),
    ("fingerprint.check_solver", lambda: gato.fingerprint.check_solver, (solver(),), dict(
        path="/no/such/fingerprint.json", rtol=0.0)),
    ("linsys_autotune.fit_tau", lambda: gato.linsys_autotune.fit_tau, (np.ones(20), np.ones(20), 1.0), dict(n_bins=0)),
    ("linsys_autotune.decide_policy", lambda: gato.linsys_autotune.decide_policy, (np.ones(20), 0.5), dict(
        lo=1.5, hi=-0.5)),
]


def _warm(s):
    s.hold_warm(x0())
    return s


def _solved(s):
    s.solve(x0(), ref0(s))
    return s


def _reset(c):
    c.reset(x0())
    return c


def _params(fn):
    sig = inspect.signature(fn)
    return [p for p in sig.parameters.values() if p.name != "self" and p.default is not inspect.Parameter.empty]


@pytest.mark.parametrize("name,make,args,param,bad",
                         [(n, m, a, p, v) for n, m, a, kw in CASES for p, v in kw.items()],
                         ids=[f"{n}-{p}" for n, _, _, kw in CASES for p in kw])
def test_an_unusable_keyword_value_is_refused_naming_it(name, make, args, param, bad, tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))  # builder cases never touch the user's cache
    fn = make()
    with pytest.raises((ValueError, TypeError)) as e:
        fn(*args, **{param: bad})
    assert param in str(e.value), f"{name}({param}={bad!r}): the error does not name {param!r}: {e.value}"


#: Keyword arguments without a case yet (none now: a name here must still be a parameter).
PENDING = {}


def test_every_keyword_argument_has_a_case():
    missing, stale = [], []
    for name, make, _, kw in CASES:
        fn = make()
        if isinstance(fn, functools.partial):
            fn = fn.func
        target = fn.__init__ if inspect.isclass(fn) and fn is not SolverParams else fn
        have = {p.name for p in _params(target)}
        pending = PENDING.get(name, set())
        missing += [f"{name}({p})" for p in sorted(have - set(kw) - pending)]
        stale += [f"{name}({p})" for p in sorted(pending - have)]
    assert not missing, f"keyword arguments without an unusable-value case: {missing}"
    assert not stale, f"PENDING names parameters that no longer exist: {stale}"


@pytest.mark.parametrize("name,make,args", [(n, m, a) for n, m, a, _ in CASES], ids=[c[0] for c in CASES])
def test_unknown_keywords_are_refused(name, make, args, tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    fn = make()
    with pytest.raises((ValueError, TypeError), match="no_such_option"):
        fn(*args, no_such_option=1)
