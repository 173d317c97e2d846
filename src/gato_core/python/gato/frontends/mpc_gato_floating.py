"""MPC_GATO on a floating-base plant (go2, issue 34): what ``gato.MPC_GATO(None, go2_urdf, N=20,
dt=0.02, plant_type="go2", variant="fc")`` returns (the dispatch mirrors gato.BSQP's: NOT an
MPC_GATO instance, a separate driver with its constructor and the go2 tasks).

- ``solver``: ``gato.BSQP(model_path, 1, N, dt, plant_type=..., variant="fc")``, the
  :class:`gato.floating.FloatingBSQP`; the controller (:class:`gato.sim.go2.Go2Balance`, its
  FloatingMPC standing task replanned every dt, the plan's Riccati gains at every 1 ms substep)
  runs on that solver's C++ SQP.
- ``run_mpc_stand`` / ``run_mpc_push``: the go2 standing / push-recovery episodes of
  gato.tasks (go2_stand_scenarios / go2_push_scenarios) through gato.simloop.run_closed_loop
  (gato.sim.go2_loop), lockstep at sim_dt 0.001 s in MuJoCoWorld(floating=True). Their results
  equal gato.tasks.run_go2_stand / run_go2_push on the same scenario (test/test_go2_simloop.py).

The fixed-base options (hypothesis batches, wrench estimators, pendulum, constant wrench,
SolverParams, the ADMM / linear-solver settings, the PD executor, the start-pose hold, the
runaway guard, the pinocchio world, paced runs) are refused with a ValueError naming them;
so are run_mpc_fig8 / run_mpc_goals (EE tasks of arms).
"""
from __future__ import annotations

import numpy as np

from ..core.bsqp import BSQP
from ..core.floating_bsqp import FloatingBSQP
from ..sim.go2 import Go2Balance, SIM_DT
from ..sim.go2_loop import go2_simulation, Go2World
from ..sim.loop import run_closed_loop

__all__ = ["FloatingMPC_GATO"]

#: MPC_GATO's keywords that only the fixed-base driver has, with the value that means "not used".
_FIXED_ONLY = dict(constant_f_ext=None, pendulum_config=None, params=None, linsys=None, bdsv_threshold=None,
                   reseed_threshold=None, admm_linsys=None, admm_threshold=None, limits=None, limits_kw=None,
                   fc_config=None, wrench_id=None, observe_first=None, feedback_kp=None, feedback_kd=None,
                   feedback_limit=None)


class FloatingMPC_GATO:
    """The closed-loop driver of a floating-base plant (module docstring). MPC_GATO's constructor;
    ``controller``: Go2Balance's keywords other than N / dt (iters, first_iters, w_base_vel,
    follow_xy, feedback, standing, hypotheses, wrench_knots, hypothesis_options; e.g.
    gato.tasks.PUSH_RECOVERY). ``feedback``: None or
    "riccati" (the plan's gains at every substep; ``controller={"feedback": False}`` plays the
    plans open loop). ``runaway_factor``: None or its default (no guard on a floating base);
    ``clamp_torques``: True (Go2Balance clamps to the URDF efforts). ``world``: None / "mujoco"
    (a new :class:`gato.sim.go2_loop.Go2World`) or a Go2World.

    Attributes: ``solver`` (FloatingBSQP), ``controller`` (Go2Balance), ``last_record`` (the
    gato.simloop.RunRecord of the last run), ``world``, ``N``, ``dt``, ``nq``, ``nv``, ``nx``,
    ``nu`` (actuated + fc), ``nu_act``, ``plant_type``.
    """

    floating_base = True

    def __init__(self, model, model_path, N=32, dt=0.03125, batch_size=1, constant_f_ext=None,
                 track_full_stats=False, plant_type=None, variant=None, pendulum_config=None, params=None,
                 linsys=None, bdsv_threshold=None, reseed_threshold=None, admm_linsys=None, admm_threshold=None,
                 limits=None, limits_kw=None, fe_seed=0, fc_config=None, wrench_id=None, world=None,
                 estimator="fe", *, verbose=None, clamp_torques=True, observe_first=None, feedback=None,
                 feedback_kp=None, feedback_kd=None, feedback_limit=None, runaway_factor=3.0, controller=None):
        given = dict(constant_f_ext=constant_f_ext, pendulum_config=pendulum_config, params=params, linsys=linsys,
                     bdsv_threshold=bdsv_threshold, reseed_threshold=reseed_threshold, admm_linsys=admm_linsys,
                     admm_threshold=admm_threshold, limits=limits, limits_kw=limits_kw, fc_config=fc_config,
                     wrench_id=wrench_id, observe_first=observe_first, feedback_kp=feedback_kp,
                     feedback_kd=feedback_kd, feedback_limit=feedback_limit)
        for name, v in given.items():
            if v is not _FIXED_ONLY[name] and not (name == "constant_f_ext" and _zero(v)) \
                    and not (name == "observe_first" and v is False):
                raise ValueError(f"{name}: a fixed-base MPC_GATO option; the floating-base driver (plant "
                                 f"{plant_type or model_path!s}) does not take it, got {name}={v!r}")
        if isinstance(batch_size, bool) or batch_size != 1:
            raise ValueError(f"batch_size: the floating-base driver runs B = 1 (no hypothesis batch), "
                             f"got {batch_size!r}")
        if estimator not in ("fe", None):
            raise ValueError(f"estimator: wrench hypotheses need a fixed-base robot (B > 1 or 'wid'); "
                             f"the floating-base driver takes 'fe' (none at B = 1) or None, got {estimator!r}")
        if variant not in (None, "fc"):
            raise ValueError(f"variant: a floating-base plant runs the contact-force variant 'fc', got {variant!r}")
        if feedback not in (None, "riccati"):
            raise ValueError(f"feedback: the floating-base driver executes each plan with its Riccati gains "
                             f"(None or 'riccati'); got {feedback!r} (the PD executor needs a fixed-base robot)")
        if clamp_torques is not True:
            raise ValueError(f"clamp_torques: the go2 controller always clamps to the URDF efforts; "
                             f"got {clamp_torques!r}")
        if runaway_factor not in (None, 3.0) or isinstance(runaway_factor, bool):
            raise ValueError(f"runaway_factor: the runaway guard needs a fixed-base robot; pass None, got "
                             f"{runaway_factor!r}")
        if verbose not in (None, True, False):
            raise ValueError(f"verbose: expected None, True or False, got {verbose!r}")
        if isinstance(fe_seed, bool) or not isinstance(fe_seed, (int, np.integer)) or fe_seed < 0:
            raise ValueError(f"fe_seed: expected a non-negative integer, got {fe_seed!r}")
        s = BSQP(model_path, 1, N, dt, plant_type=plant_type, variant="fc")
        if not isinstance(s, FloatingBSQP):
            raise ValueError(f"plant_type: {plant_type!r} is not a floating-base plant")
        if s.plant_type != "go2":
            raise ValueError(f"plant_type: the floating-base driver runs go2's tasks (gato.tasks); "
                             f"got {s.plant_type!r}")
        if model is not None and (getattr(model, "nq", None) != s.nq or getattr(model, "nv", None) != s.nv):
            raise ValueError(f"model: expected the pinocchio Model of {model_path} (nq={s.nq}, nv={s.nv}), "
                             f"got nq={getattr(model, 'nq', None)}, nv={getattr(model, 'nv', None)}")
        opts = dict(controller or {})
        for k in ("N", "dt"):
            if k in opts:
                raise ValueError(f"controller: give {k} as MPC_GATO's own argument")
        if feedback == "riccati" and opts.get("feedback") is False:
            raise ValueError("feedback: 'riccati' contradicts controller={'feedback': False}")
        self.solver = s
        self.controller = Go2Balance(N=N, dt=dt, **opts)
        # one C++ SQP: rows added on self.solver act in the runs (with hypotheses=B > 1: in the
        # nominal hypothesis's plan, Go2Balance.mpcs[0], only)
        self.controller.mpc.sqp = s._s
        if world is None or world == "mujoco":
            world = Go2World()
        elif not isinstance(world, Go2World):
            raise ValueError(f"world: the floating-base driver runs MuJoCo with ground contacts (None, 'mujoco' or "
                             f"a gato.sim.go2_loop.Go2World), got {world!r}")
        self.world, self._world_kind = world, "mujoco"
        self.model = model
        self.model_path, self.plant_type, self.N, self.dt = s.model_path, s.plant_type, int(s.N), float(s.dt)
        self.batch_size, self.nq, self.nv, self.nx = 1, int(s.nq), int(s.nv), int(s.nx)
        self.nu, self.nu_act = int(s.nu), int(s.n_actuated)
        self.track_full_stats, self.verbose, self.fe_seed = bool(track_full_stats), verbose, int(fe_seed)
        self.feedback = "riccati" if self.controller.feedback else None
        self.last_record = None
        self.constant_f_ext_world = np.zeros(6)

    def setup_external_forces(self, constant_f_ext):
        """Only None / zeros: the floating world has no constant-wrench support (push the base with
        :meth:`run_mpc_push`)."""
        if not _zero(constant_f_ext):
            raise ValueError("constant_f_ext: the floating-base driver's world has no constant wrench; "
                             "push the base with run_mpc_push")

    def run_mpc_fig8(self, *args, **kwargs):
        raise ValueError("run_mpc_fig8: an EE-tracking task of fixed-base arms; a floating-base plant runs "
                         "run_mpc_stand / run_mpc_push")

    def run_mpc_goals(self, *args, **kwargs):
        raise ValueError("run_mpc_goals: an EE-goal task of fixed-base arms; a floating-base plant runs "
                         "run_mpc_stand / run_mpc_push")

    def _run(self, kind, scenario, sim_time, sim_dt, pace):
        if isinstance(pace, np.bool_):
            pace = bool(pace)
        if pace is not False:
            raise ValueError(f"pace_by_solve_time: the floating-base driver runs lockstep (False), got {pace!r}")
        if isinstance(sim_dt, bool) or not isinstance(sim_dt, (int, float)) or abs(sim_dt - SIM_DT) > 1e-12:
            raise ValueError(f"sim_dt: the go2 world steps at {SIM_DT} s, got {sim_dt!r}")
        if isinstance(sim_time, bool) or not isinstance(sim_time, (int, float)) or not np.isfinite(sim_time) \
                or sim_time <= 0:
            raise ValueError(f"sim_time: expected a duration > 0 s, got {sim_time!r}")
        if not isinstance(scenario, dict):
            raise ValueError(f"scenario: expected a scenario dict of gato.tasks.go2_{kind}_scenarios, got "
                             f"{type(scenario).__name__}")
        if kind == "push" and sim_time <= scenario["t_push"] + scenario["duration"]:
            raise ValueError(f"sim_time: the run must outlast the push ({scenario['t_push']} s + "
                             f"{scenario['duration']} s), got {sim_time!r}")
        sim, planner, task = go2_simulation(kind, scenario, sim_time, self.world, self.controller)
        verbose = self.verbose if self.verbose is not None else task.t_end > 2.0
        if verbose:
            print(f"[MPC_GATO {kind}] go2 N={self.N} dt={self.dt} sim_time={task.t_end:.2f}s world=mujoco", flush=True)
        rec = run_closed_loop(sim, planner, task, feedback=planner.execution)
        self.last_record = rec
        if rec.stop_reason == "diverged":
            raise RuntimeError(f"MPC_GATO: the mujoco world diverged at t = {rec.sim_time:.4f} s")
        st = rec.stats()
        for k in ("mean_tracking_error", "max_tracking_error", "mean_goal_distance"):
            st.pop(k, None)     # EE-goal summaries: no EE goal here (ee_actual is the base position)
        st.update(task.results())
        if self.track_full_stats:
            st["sqp_iters"] = np.array([p.iterations for p in rec.planner_stats], dtype=int)
        st["completed"] = rec.stop_reason == "sim_time"
        c = self.controller
        st["config"] = dict(task=kind, plant=self.plant_type, N=self.N, dt=self.dt, batch_size=1, sim_dt=SIM_DT,
                            pace_by_solve_time=False, iters=c.mpc.max_iters, first_iters=c.first_iters,
                            w_base_vel=c.w_base_vel.tolist(), follow_xy=c.follow_xy, feedback=self.feedback,
                            scenario=dict(scenario), world=dict(self.world.params))
        if verbose:
            print(f"[MPC_GATO {kind}] done: {rec.stats()['n_ticks']} ticks, {st['sim_time']:.2f}s sim", flush=True)
        return st

    def run_mpc_stand(self, scenario, sim_dt=0.001, sim_time=10.0, pace_by_solve_time=False):
        """go2 stands from a perturbed crouch (a gato.tasks.go2_stand_scenarios scenario) for
        sim_time s. Returns (None, stats): the run record's columns (timestamps, joint_positions
        (T, 19), joint_velocities (T, 18), torques (T, 18) generalized (zero base rows),
        ee_actual (T, 3) the base position, base_height, tilt_deg, solve_times ms, ...),
        run_go2_stand's results (h_err_max_after2s m, tilt_max_after2s deg,
        min_foot_fn_after2s N, slip_max_m, mean_iters, t_within_2cm s, ...), ``completed``,
        ``config``."""
        return None, self._run("stand", scenario, sim_time, sim_dt, pace_by_solve_time)

    def run_mpc_push(self, scenario, sim_dt=0.001, sim_time=3.0, pace_by_solve_time=False):
        """go2 from reset("stand"), pushed on the base (a gato.tasks.go2_push_scenarios scenario),
        for sim_time s. Returns (None, stats): the columns of :meth:`run_mpc_stand` and
        run_go2_push's results (up, hmin_rel, body_contact, trunk_contact, contact_fn_max,
        drift_m, ...)."""
        return None, self._run("push", scenario, sim_time, sim_dt, pace_by_solve_time)


def _zero(v) -> bool:
    if v is None:
        return True
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.shape == (6,) and not np.any(a)
