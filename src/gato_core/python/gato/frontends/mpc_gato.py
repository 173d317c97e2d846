"""MPC_GATO: the closed-loop simulation driver of the reference API (compatibility layer).

An adapter over the core's one simulation loop (:mod:`gato.simloop`): it builds the
world (pinocchio RK4 or MuJoCo, with the unmodelled pendulum payload and the
ground-truth wrench), the ``bsqp`` planner (:class:`gato.bsqp_planner.BSQPPlanner` over
an :class:`gato.MPCController`) and a task (:class:`gato.simloop.TrackingTask` over a
sampled figure-8, :class:`gato.simloop.GoalTask` with minimum-jerk ramps and a settle
dwell), runs :func:`gato.simloop.run_closed_loop` and returns the run record as the
stats dict of the reference API. New code should use those pieces directly
(docs/architecture.md).

Pacing: ``pace_by_solve_time=False`` is lockstep (the world advances one control period
dt per solve; deterministic); True advances it by each step's measured wall time, "solve" by
the solver's measured solve time alone (the reference's wording). Within
a period each ``sim_dt`` substep plays the plan's control of the knot it falls in, and a
period that is not a whole number of substeps carries its remainder (gato.simloop).
Applied torques are clamped to the URDF effort limits unless ``clamp_torques=False``.
Units: rad, rad/s, N*m, metres (world frame), seconds; ``*_times`` stats in ms.

Wrench hypotheses (gato.hypotheses over gato.estimators): ``estimator="fe"`` (B > 1:
Fibonacci-sphere sampler), ``"cem"`` (B > 1: cross-entropy sampler), ``"wid"`` (B >= 1:
identified-weight sampler) and the B = 1 identifier ``wrench_id``. The identifiers are fed at
sensor rate, once per simulation substep (:func:`gato.wrench.options.substep_observers`); the
options become a hypothesis batch in :func:`gato.wrench.options.from_options`.

The exact-Hessian variant (``variant="eh"``) runs on the CPU core (docs/solver_method.md,
"Exact Hessian"). Not in this build for fixed-base arms (each raises ValueError naming the
option): the contact-force variant (``fc_config``, ``variant="fc"``).

Floating-base plants (go2): ``MPC_GATO(None, go2_urdf, N=20, dt=0.02, plant_type="go2",
variant="fc")`` returns a :class:`gato.frontends.mpc_gato_floating.FloatingMPC_GATO` (not an
MPC_GATO instance, as gato.BSQP returns a FloatingBSQP there): ``run_mpc_stand`` /
``run_mpc_push`` run the go2 tasks of gato.tasks through gato.simloop; the fixed-base options
are refused by name.
"""
from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import numpy as np

from ..wrench import options as wrench_options
from ..sim.clock import check_substep, EPS
from ..sim.commands import FEEDBACK_MODES, FeedbackLaw, PlanPlayback, StateFeedback
from ..sim.disturbances import _wrench, ConstantWrench, PendulumPayload
from ..sim.guard import RunawayGuard
from ..sim.loop import make_world, run_closed_loop, Simulation
from ..sim.tasks import GoalTask, TrackingTask
from ..planners.bsqp_planner import BSQPPlanner, solver_params
from ..planners.controller import MPCController
from ..core.arrays import flag
from ..core.bsqp import BSQP
from ..planners.planner import Plan
from ..core.references import SampledTrajectory, _points, _positive, _vector
from ..robots.registry import all_robots, detect_plant

__all__ = ["MPC_GATO"]


class MPC_GATO:
    """Closed-loop simulation DRIVER: world + pacing + task loops around an MPCController.

    Args:
        model: pinocchio Model of ``model_path`` (checked against the solver's
            dimensions and kept as ``self.model``), or None to build it. The
            simulated plant is built by the world from ``model_path``.
        model_path: robot URDF (fixed base).
        N: horizon [knots]; dt: knot spacing [s], also the fixed control period.
        batch_size: solver batch B. B > 1 means B wrench hypotheses under ``estimator``
            (each entry solves under its own guess, the one-step rollout picks the winner);
            ``estimator=None`` with B > 1 runs B identical entries with
            best-of-batch selection (lowest final merit).
        constant_f_ext: None or (6,) ground-truth wrench [force N; torque N*m],
            WORLD axes, at the solver's EE frame origin (see
            :meth:`setup_external_forces`); pinocchio world only.
        track_full_stats: also record per-tick ``sqp_iters``, ``pcg_iters``,
            ``pred_err``, ``linsys`` and ``step_reseeded``.
        plant_type: registered plant name (None: detected from the URDF).
        variant: None / "default" (Gauss-Newton) | "eh" (exact-Hessian SQP: the solver's
            ``BSQP(variant="eh")``); "fc" raises ValueError (not available in this build).
        pendulum_config: None or {"mass" kg, "length" m[, "damping" N*m*s/rad,
            "radius" m]}: an unmodelled payload hanging from the EE (pinocchio
            world only; see :class:`gato.worlds.PinocchioWorld`).
        params: None (``SolverParams()``: one SQP iteration per tick), a
            :class:`gato.SolverParams`, or a dict of SolverParams field overrides.
        linsys, bdsv_threshold, reseed_threshold, admm_linsys, admm_threshold,
        limits, limits_kw: passed to :class:`gato.MPCController` (see there).
        fe_seed: seed of the wrench-hypothesis sampler (runs with the same seed are identical).
        fc_config: not available in this build (ValueError unless None).
        wrench_id: None, or the B = 1 identified-wrench hypothesis
            (:class:`gato.hypotheses.IdentifiedWrenchBatch` over a
            :class:`gato.estimators.OneStepWrenchIdentifier` fed every substep): True / "wrench"
            (mode "wrench"), "weight" (mode "weight"), or a dict of OneStepWrenchIdentifier
            keyword arguments. Needs batch_size == 1 and takes the place of ``estimator``.
        world: None or "pinocchio" (a :class:`gato.worlds.PinocchioWorld` on
            model_path, with the pendulum / constant wrench), "mujoco" (a
            :class:`gato.worlds.MuJoCoWorld` on model_path, timestep = the run's
            sim_dt), or any object with ``step(q, dq, u, sim_dt) -> (q, dq)``.
        estimator: "fe" (default): :class:`gato.estimators.ForceEstimator` at B > 1 (no
            hypotheses at B = 1); "cem": :class:`gato.estimators.CEMForceEstimator` at B > 1;
            "wid": :class:`gato.estimators.IdentifiedWrenchSampler` at any B (its identifier fed
            every substep); None: no hypothesis batch. All seeded with ``fe_seed`` and
            wrapped in a :class:`gato.hypotheses.ForceHypothesisBatch`.
        verbose: progress lines on stdout (one per ~1 s of simulated time plus a
            summary): True, False, or None (default) = on for runs whose planned
            sim time exceeds 2 s (run_mpc_fig8: sim_time; run_mpc_goals:
            goal_timeout * len(goals)).
        clamp_torques: clamp the applied torques to the URDF effort limits (default True).
        observe_first: hold the start pose for the first control period of every run (the
            nominal model's :class:`gato.safety.JointHold` at :attr:`OBSERVE_HOLD_HZ`, every
            substep) instead of playing the warm-up plan, so a sensor-fed identifier sees the
            load before the first plan moves the arm (the warm-up still warms the solver).
            None (default): on when the hypotheses identify from the sensor at the run's start
            (a ``sensor_identifier``: wid, wrench_id, swing, an fe centre) on a fixed-base
            robot; True / False: always / never. Why: a plan made at t = 0 knows nothing of an
            attached payload, and a step reference at t = 0 then drives the wrist past its
            velocity limit before the first re-plan (payload study, docs/benchmarks_hypotheses.md).
        feedback: how each plan is executed over the substeps until the next one: None
            (default: the plan's torques open loop, knot by knot), "pd" (plus joint PD toward
            the planned state, the ros2_control plugin's executor), "riccati" (plus the
            plan's own time-varying gains, gato.BSQP.feedback_gains of the winning row),
            "riccati+pd" (both); see :class:`gato.sim.commands.FeedbackLaw`. Plans without
            usable gains fall back to PD (counted: the run's ``stats["feedback"]``).
        feedback_kp, feedback_kd, feedback_limit: (nu,) or scalar PD stiffness [N*m/rad],
            damping [N*m*s/rad] and the saturation of the feedback term [N*m]; None: 0.1,
            0.01 and 0.25 x the URDF effort limits.
        runaway_factor: the runaway guard (:class:`gato.sim.guard.RunawayGuard`): a joint
            faster than this x its URDF velocity limit (default 3) at two control periods in a
            row, or than 10x at one, or more than 0.5 rad beyond its position limits, ends the
            run as failed (``stats["stop_reason"] == "runaway"``,
            the reason in the record's ``"runaway"`` event) after the guard's joint hold
            caught the arm; None: no guard (fixed-base robots only).

    Attributes: ``solver`` (gato.BSQP), ``controller`` (gato.MPCController), ``planner``
    (its gato.bsqp_planner.BSQPPlanner), ``last_record`` (the gato.simloop.RunRecord of the
    last run, None before one),
    ``world``, ``model``, ``N``, ``dt``, ``nq``, ``nv``, ``nx``, ``nu``.
    """

    #: Natural frequency [Hz] of the start-pose hold of ``observe_first``: critically damped, so an
    #: unknown load's torque step moves a joint at most a0 / (e w) (a0 its acceleration, w = 2 pi f).
    #: 12 Hz: at 4 Hz (the ROS hold's) a 15 kg weight threw joint 6 to 1.03-1.10x its velocity limit
    #: within the 31 ms hold (seeds 7, 77, 91); at 12 Hz 0.41x (docs/benchmarks_hypotheses.md).
    OBSERVE_HOLD_HZ = 12.0
    #: Runs whose planned simulated time exceeds this [s] print progress when verbose is None.
    VERBOSE_AUTO_S = 2.0
    #: Simulated seconds between progress lines.
    PROGRESS_EVERY_S = 1.0

    def __new__(cls, model=None, model_path=None, *args, plant_type=None, **kwargs):
        # A floating-base plant (go2) gets its own driver, as gato.BSQP dispatches to FloatingBSQP:
        # gato.frontends.mpc_gato_floating.FloatingMPC_GATO (the go2 tasks through gato.simloop).
        try:
            pt = plant_type or detect_plant(Path(os.fspath(model_path)))
        except (TypeError, OSError):
            pt = None
        if pt and all_robots().get(pt, {}).get("floating_base"):
            from .mpc_gato_floating import FloatingMPC_GATO
            return FloatingMPC_GATO(model, model_path, *args, plant_type=plant_type, **kwargs)
        return super().__new__(cls)

    def __init__(self, model, model_path, N=32, dt=0.03125, batch_size=1, constant_f_ext=None,
                 track_full_stats=False, plant_type=None, variant=None, pendulum_config=None, params=None,
                 linsys=None, bdsv_threshold=None, reseed_threshold=None, admm_linsys=None, admm_threshold=None,
                 limits=None, limits_kw=None, fe_seed=0, fc_config=None, wrench_id=None, world=None,
                 estimator="fe", *, verbose=None, clamp_torques=True, observe_first=None, feedback=None,
                 feedback_kp=None, feedback_kd=None, feedback_limit=None, runaway_factor=3.0):
        # --- options whose machinery this build lacks: refuse loudly, never degrade silently
        if variant not in (None, "default", "eh"):
            raise ValueError(f"variant: {variant!r} solver modules are not available in this build for a "
                             "fixed-base arm (the CPU backend runs 'default' and 'eh'; 'fc' runs on floating-base "
                             "plants such as go2)")
        if fc_config is not None:
            raise ValueError("fc_config: contact-force decision variables need the 'fc' solver variant, "
                             "which is not available in this build for a fixed-base arm; pass fc_config=None")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        wrench_id = wrench_options.wrench_id_options(wrench_id, batch_size)
        if not isinstance(fe_seed, (int, np.integer)) or isinstance(fe_seed, bool) or fe_seed < 0:
            raise ValueError(f"fe_seed: expected a non-negative integer, got {fe_seed!r}")
        if verbose not in (None, True, False):
            raise ValueError(f"verbose: expected None, True or False, got {verbose!r}")
        if observe_first not in (None, True, False):
            raise ValueError(f"observe_first: expected None, True or False, got {observe_first!r}")

        self.solver = s = BSQP(model_path, int(batch_size), N, dt, solver_params(params), plant_type=plant_type,
                               variant=variant)
        hyp = wrench_options.from_options(s.model, s.ee_frame, s.batch_size, estimator=estimator, wrench_id=wrench_id,
                                          seed=int(fe_seed), n_actuated=int(s.n_actuated))
        self.controller = MPCController(s, hypotheses=hyp, warm_start="shift", reset_rho_each_step=True,
                                        linsys=linsys, bdsv_threshold=bdsv_threshold,
                                        reseed_threshold=reseed_threshold, admm_linsys=admm_linsys,
                                        admm_threshold=admm_threshold, limits=limits, limits_kw=limits_kw)
        self.planner = BSQPPlanner.from_controller(self.controller)
        self.last_record = None
        #: extra gato.sim.loop.Simulation observers f(q, dq, u, q_next, dq_next, sim_dt), called after
        #: every physics substep of a run (e.g. limits checked at 1 ms, not only at control ticks)
        self.substep_observers = []
        self.model_path, self.plant_type = s.model_path, s.plant_type
        self.N, self.dt, self.batch_size = int(s.N), float(s.dt), int(s.batch_size)
        self.nq, self.nv, self.nx, self.nu = int(s.nq), int(s.nv), int(s.nx), int(s.nu)
        self.nu_act = int(s.n_actuated)
        if model is None:
            model = s.model
        elif getattr(model, "nq", None) != self.nq or getattr(model, "nv", None) != self.nv:
            raise ValueError(f"model: expected the pinocchio Model of {model_path} (nq={self.nq}, nv={self.nv}), "
                             f"got nq={getattr(model, 'nq', None)}, nv={getattr(model, 'nv', None)}")
        self.model = model
        self.track_full_stats = flag(track_full_stats, "track_full_stats")
        self.fe_seed, self.estimator, self.fc_config, self.wrench_id = int(fe_seed), estimator, None, wrench_id
        self.verbose = verbose
        self.clamp_torques = flag(clamp_torques, "clamp_torques")
        self.observe_first = observe_first
        self.u_limit = np.asarray(s.limits["u"], dtype=np.float64).reshape(-1)[:self.nu_act]
        self.pendulum_config = pendulum_config
        self.feedback = feedback
        self.feedback_law = None
        if feedback is None:        # the PD / saturation settings act on an executor's feedback only
            for name, v in (("feedback_kp", feedback_kp), ("feedback_kd", feedback_kd),
                            ("feedback_limit", feedback_limit)):
                if v is not None:
                    raise ValueError(f"{name}: used with feedback='pd' | 'riccati' | 'riccati+pd' only (feedback "
                                     f"is None: the plans play open loop); got {name}={v!r}")
        else:
            if feedback not in FEEDBACK_MODES:
                raise ValueError(f"feedback: expected one of {FEEDBACK_MODES} or None, got {feedback!r}")
            if not self._fixed_base:
                raise ValueError("feedback: the plan executor's feedback needs a fixed-base robot (every joint "
                                 "actuated)")
            self.feedback_law = FeedbackLaw(feedback, self.u_limit, feedback_kp, feedback_kd, feedback_limit)
        self.planner.plan_gains = feedback in ("riccati", "riccati+pd")
        # the runaway guard (gato.sim.guard): a joint beyond runaway_factor x its velocity limit, or
        # far beyond its position limits, stops the run as failed (held by the fallback); None: off
        self.runaway_factor = runaway_factor
        self.guard = None
        if runaway_factor is not None:
            if isinstance(runaway_factor, bool) or not isinstance(runaway_factor, (int, float, np.floating)) \
                    or not np.isfinite(runaway_factor) or runaway_factor <= 1.0:
                raise ValueError(f"runaway_factor: expected None or a finite number > 1, got {runaway_factor!r}")
            if not self._fixed_base:
                raise ValueError("runaway_factor: the runaway guard needs a fixed-base robot; pass None")
            self.guard = RunawayGuard(s.model, factor=runaway_factor, hard_factor=max(10.0, float(runaway_factor)),
                                      effort_limit=self.u_limit)

        if world is None or world in ("pinocchio", "mujoco"):
            self._world_kind = world or "pinocchio"
            pend = [] if pendulum_config is None else [
                PendulumPayload.from_config(pendulum_config, "pendulum_config")]
            self.world = make_world(self._world_kind, self.model_path, ee_frame=s.ee_frame,
                                    timestep=0.001 if world == "mujoco" else None, disturbances=pend)
        elif isinstance(world, str):
            raise ValueError(f"world: expected None, 'pinocchio', 'mujoco' or a world object, got {world!r}")
        else:
            if not callable(getattr(world, "step", None)):
                raise ValueError(f"world: expected an object with step(q, dq, u, sim_dt), "
                                 f"got {type(world).__name__}")
            if pendulum_config is not None:
                raise ValueError("pendulum_config: only the built-in pinocchio world carries the pendulum; "
                                 "model the payload in your world object")
            if getattr(world, "nq", self.nq) != self.nq:
                raise ValueError(f"world: its nq {world.nq} differs from the solver's nq {self.nq}")
            self._world_kind = "custom"
            self.world = world
        self.setup_external_forces(constant_f_ext)

    # ------------------------------------------------------------------ properties
    @property
    def force_estimator(self):
        """The hypothesis estimator behind the ForceHypothesisBatch ('fe' / 'cem' / 'wid'
        sampler); None at batch_size == 1 (the reference's rule; a B = 1 'wid' sampler is
        :attr:`wrench_identifier`), with estimator=None or wrench_id."""
        if self.batch_size == 1:
            return None
        return getattr(self.controller.hypotheses, "estimator", None)

    @property
    def wrench_identifier(self):
        """The sensor-rate wrench observer fed each substep: the wrench_id
        OneStepWrenchIdentifier, or the 'wid' sampler (which identifies too); None otherwise."""
        h = self.controller.hypotheses
        return None if h is None else h.sensor_identifier

    @property
    def world_params(self) -> dict:
        """The world's protocol stamp (its ``params``), or {"kind": "custom"}."""
        p = getattr(self.world, "params", None)
        return dict(p) if isinstance(p, dict) else {"kind": self._world_kind}

    # ------------------------------------------------------------------ disturbances
    def setup_external_forces(self, constant_f_ext):
        """Set the ground-truth external wrench of the simulation (None clears it).

        ``constant_f_ext`` = (6,) [force (3) N, torque (3) N*m] in WORLD axes acting at
        the solver's EE frame origin, installed on the world (the pinocchio world
        re-expresses it in the EE parent joint's frame at every RK4 stage:
        :class:`gato.simloop.ConstantWrench`). Worlds without ``set_constant_f_ext`` (MuJoCo,
        custom) accept only None / zeros here: ValueError otherwise. The solver is never
        told (it is the unmodelled disturbance).
        """
        f = np.zeros(6) if constant_f_ext is None else _wrench(constant_f_ext, "constant_f_ext")
        if not callable(getattr(self.world, "set_constant_f_ext", None)) and np.any(f):
            raise ValueError(f"constant_f_ext: the {self._world_kind} world has no constant-wrench support "
                             "(a PinocchioWorld feature); model the disturbance in the world itself")
        ConstantWrench(f).attach(self.world)
        self.constant_f_ext_world = f

    # ------------------------------------------------------------------ machinery
    def _simulation(self, q, dq, sim_dt: float) -> Simulation:
        if self._world_kind == "mujoco" and abs(self.world.timestep - sim_dt) > 1e-12 * sim_dt:
            self.world = make_world("mujoco", self.model_path, timestep=sim_dt)
        return Simulation(self.world, q, dq, sim_dt=sim_dt, ee_pos=self.solver.ee_pos,
                          effort_limit=self.u_limit if self.clamp_torques else None,
                          observers=[*wrench_options.substep_observers(self.controller.hypotheses, self.nq,
                                                                       self.nv), *self.substep_observers])

    def _check_start(self, x_start, sim_dt):
        x = _vector(x_start, "x_start", self.nx, "= [q; dq] (robot only)")
        check_substep(sim_dt, self.dt, "dt")
        return x, float(sim_dt)

    def _verbose(self, planned_s: float) -> bool:
        return planned_s > self.VERBOSE_AUTO_S if self.verbose is None else bool(self.verbose)

    def _play(self, xu, q, dq, period: float, sim_dt: float, clock: dict):
        """Advance the world by ``period`` [s] playing the plan ``xu`` (the reference-API hook of
        the stepping rule in gato.simloop). clock: {"t", "owed", "n", "periods", "sum", "fixed"}
        (task clock [s], carried remainder [s], substeps, periods, their sum, fixed pacing),
        updated. Returns (q, dq, substeps taken this period)."""
        sim = self._simulation(q, dq, sim_dt)
        sim.t, sim.owed, sim.substeps, sim.periods, sim.period_sum = (clock["t"], clock["owed"], clock["n"],
                                                                      clock["periods"], clock["sum"])
        plan = Plan(np.asarray(xu, dtype=np.float64), self.nx, self.nu, self.nu_act, self.N, self.dt)
        n = sim.advance(PlanPlayback(plan), period, fixed=clock["fixed"])
        clock.update(t=sim.t, owed=sim.owed, n=sim.substeps, periods=sim.periods, sum=sim.period_sum)
        return sim.q, sim.dq, n

    def observes_first(self) -> bool:
        """Whether the next run holds the start pose for its first control period
        (``observe_first``; None: the hypotheses' sensor identifier on a fixed-base robot)."""
        if self.observe_first is not None:
            return bool(self.observe_first)
        h = self.controller.hypotheses
        return self._fixed_base and h is not None and getattr(h, "sensor_identifier", None) is not None

    @property
    def _fixed_base(self) -> bool:
        return self.nq == self.nv == self.u_limit.size  # every joint actuated: a joint hold can hold it

    def _first_command(self, x):
        if not self.observes_first():
            return None
        from ..planners.safety import JointHold

        if not self._fixed_base:
            raise ValueError("observe_first: the start-pose hold needs a fixed-base robot (every joint actuated); "
                             f"this one has nq={self.nq}, nv={self.nv}, {self.u_limit.size} actuated")
        hold = JointHold(self.solver.model, self.OBSERVE_HOLD_HZ, self.u_limit)
        hold.target = np.array(x[:self.nq], dtype=np.float64)
        return StateFeedback(hold)

    def _run(self, task, x, sim_dt, pace, name, header, progress, done) -> dict:
        """Run ``task`` through gato.simloop.run_closed_loop. Verbose: a ``header`` line, a
        ``progress(columns, t)`` line per PROGRESS_EVERY_S of simulated time, the goal events and
        a ``done(stats)`` line."""
        if isinstance(pace, np.bool_):
            pace = bool(pace)
        if pace not in (True, False, "solve") or not isinstance(pace, (bool, str)):
            raise ValueError(f"pace_by_solve_time: expected True (step wall time), 'solve' (solve time) or "
                             f"False (fixed dt), got {pace!r}")
        verbose = self._verbose(task.t_end)
        say = (lambda m: print(m, file=sys.stdout, flush=True)) if verbose else (lambda m: None)
        say(f"[MPC_GATO {name}] {self.plant_type} N={self.N} dt={self.dt} B={self.batch_size} {header} "
            f"pace={'dt' if not pace else ('solve' if pace == 'solve' else 'wall')} world={self._world_kind}")
        nxt = [self.PROGRESS_EVERY_S]

        def on_tick(rec):
            t = rec.columns["timestamps"][-1]
            if t >= nxt[0] - EPS:
                nxt[0] += self.PROGRESS_EVERY_S
                say(progress(rec.columns, t))

        def on_event(t, kind, e):
            if kind == "runaway":
                say(f"  t={t:6.2f}s  RUNAWAY: {e['reason']}; held by the fallback (the run fails)")
                return
            say(f"  t={t:6.2f}s  goal {e['index'] + 1}/{len(task.goals)} {e['outcome']} "
                f"(dist {1000 * e['dist']:.1f} mm, |dq| {e['vel']:.2f} rad/s)")

        sim = self._simulation(x[:self.nq], x[self.nq:], sim_dt)
        law = self.feedback_law
        if law is not None:
            law.plans = law.gains_dropped = 0
        rec = run_closed_loop(sim, self.planner, task, paced=pace, on_tick=on_tick if verbose else None,
                              on_event=on_event if verbose else None, first_command=self._first_command(x),
                              feedback=law, guard=self.guard)
        self.last_record = rec  # the run as the core records it (planner stats, events)
        if rec.stop_reason == "diverged":
            raise RuntimeError(f"MPC_GATO: the {self._world_kind} world diverged at t = {rec.sim_time:.4f} s")
        st = rec.stats()
        if self.track_full_stats:
            ps = rec.planner_stats
            st.update(sqp_iters=np.array([p.iterations for p in ps], dtype=int),
                      pcg_iters=np.array([p.extra["pcg_iters"] for p in ps], dtype=int),
                      pred_err=np.array([p.extra["pred_err"] for p in ps], dtype=np.float64),
                      linsys=[p.extra["linsys"] for p in ps],
                      step_reseeded=np.array([p.extra["reseeded"] for p in ps], dtype=bool))
        st["config"] = dict(task=name, plant=self.plant_type, N=self.N, dt=self.dt, batch_size=self.batch_size,
                            sim_dt=sim_dt, pace_by_solve_time=pace, clamp_torques=self.clamp_torques,
                            linsys=self.controller.linsys, params=self.solver.params.asdict(),
                            estimator=self.estimator if self.wrench_id is None else None,
                            wrench_id=None if self.wrench_id is None else dict(self.wrench_id),
                            fe_seed=self.fe_seed,
                            constant_f_ext=self.constant_f_ext_world.tolist(),
                            pendulum=None if self.pendulum_config is None else dict(self.pendulum_config),
                            world=self.world_params, feedback=self.feedback, runaway_factor=self.runaway_factor)
        if law is not None:
            st["feedback"] = law.counters()
        say(f"[MPC_GATO {name}] done: {done(st)}")
        return st

    # ------------------------------------------------------------------ tasks
    def run_mpc_fig8(self, x_start, fig8_traj, sim_dt=0.001, sim_time=5.0, pace_by_solve_time=True):
        """Run MPC tracking a figure-8 (any sampled EE path) trajectory.

        Args:
            x_start: (nx,) initial state [q; dq] (robot only).
            fig8_traj: flat (6T,) (or (T, 6)) reference, [x, y, z, 0, 0, 0] per sample,
                sample j is the EE goal at time j * dt (e.g. ``gato.tasks.fig8_reference``).
                At sim time t the controller sees the N-knot window starting at sample
                floor(t / dt) (a :class:`gato.references.SampledTrajectory`).
            sim_dt: world substep [s].
            sim_time: simulated duration [s]: ticks run while the clock is below it. The run
                stops earlier when the next window would run off the end of fig8_traj.
            pace_by_solve_time: True: the sim advances by each step's measured wall time
                (not reproducible); "solve": by the solver's measured solve time only (the
                reference's "advance the sim by the solve time"; the controller's own host work
                is then not charged to the world); False: a fixed dt per solve (deterministic).

        Returns (None, stats): the columns of :class:`gato.simloop.RunRecord` (one row per
        controller step, measured after the world advanced; tick k of a fixed-pacing run at
        (k + 1) * dt): ``timestamps``, ``goal_distances`` (to window knot 1, the paper's
        convention), ``goal_distances_knot0`` (to knot 0, the baseline's), ``ee_actual``
        (alias ``ee_positions``), ``references`` (knot 0), ``joint_positions``,
        ``joint_velocities``, ``torques`` (as applied), ``solve_times``, ``step_wall_times``,
        ``best_trajectory_id``; with track_full_stats also ``sqp_iters``, ``pcg_iters``,
        ``pred_err``, ``linsys``, ``step_reseeded``. Scalars: its summary
        (``mean_tracking_error``, ``max_tracking_error``, ``mean_goal_distance``,
        ``deadline_s``, ``deadline_misses``, ``deadline_miss_rate``, ``n_ticks``, ``sim_time``,
        ``stop_reason`` "sim_time" | "reference_end"), ``completed`` and ``config`` (the
        protocol stamp: plant, N, dt, sim_dt, pacing, solver params, world, disturbances).
        """
        x, sim_dt = self._check_start(x_start, sim_dt)
        sim_time = _positive(sim_time, "sim_time", "s")
        ref = SampledTrajectory.from_flat(fig8_traj, self.dt, "fig8_traj", min_samples=self.N + 1)
        task = TrackingTask(ref, self.N, self.dt, sim_time)
        every = max(1, int(self.PROGRESS_EVERY_S / self.dt))
        st = self._run(task, x, sim_dt, pace_by_solve_time, "fig8", f"sim_time={sim_time:.2f}s", lambda c, t: (
            f"  t={t:6.2f}/{sim_time:.2f}s  err={1000 * np.mean(c['goal_distances_knot0'][-every:]):6.1f} mm  "
            f"solve={c['solve_times'][-1]:.2f} ms"), lambda st: (
            f"{st['n_ticks']} ticks, {st['sim_time']:.2f}s sim, mean err {1000 * st['mean_tracking_error']:.1f} mm "
            f"(knot 0), {1000 * st['mean_goal_distance']:.1f} mm (knot 1), "
            f"solve {np.mean(st['solve_times']) if st['n_ticks'] else float('nan'):.2f} ms"))
        st["completed"] = st["stop_reason"] == "sim_time"
        return None, st

    def run_mpc_goals(self, x_start, goals, sim_dt=0.001, goal_timeout=5.0, goal_threshold=0.05,
                      velocity_threshold=1.0, velocity_norm=1, pace_by_solve_time=True, settle_time=0.0,
                      goal_ramp=0.0):
        """Run MPC tracking discrete goal positions (pick-place style), one goal after another
        (:class:`gato.simloop.GoalTask`).

        Args:
            x_start: (nx,) initial state [q; dq] (robot only, no pendulum).
            goals: (G, 3) or a list of (3,) EE goal positions [m], visited in order.
            sim_dt: world substep [s].
            goal_timeout: max time per goal [s] from its switch-in; then "timeout" and the next.
            goal_threshold: distance gate [m]: ||ee - goal|| < goal_threshold.
            velocity_threshold: settling gate [rad/s]: ||dq||_velocity_norm < it.
            velocity_norm: norm order of the settling gate (np.linalg.norm ``ord``): 1 = L1
                (historic default, strictest), 2 = Euclidean, np.inf = worst joint.
            pace_by_solve_time: as in :meth:`run_mpc_fig8` (True: the clock, timeouts and reach
                times are cumulative wall time; False: physical task time, deterministic).
            settle_time: how long [s] both gates must hold at every tick before the goal counts
                as reached (the reach time is the end of the dwell); 0 = the paper's gate.
            goal_ramp: seconds of minimum-jerk reference travel from the EE position at the
                switch to the goal, knot by knot along the horizon; 0 = a step reference. The
                gates always test the goal itself.

        Returns (None, stats): the columns of :meth:`run_mpc_fig8` (the finishing tick records
        no row) with ``goal_distances`` = ||ee - active goal|| (the gate distance),
        ``goal_distances_knot0`` / ``references`` against the ramped window, plus
        ``velocity_norms`` (T,) rad/s and ``active_goal`` (T,). Per goal: ``goals`` (G, 3),
        ``goal_outcomes`` ("reached" | "timeout" | "not_reached"), ``goal_reached_times``,
        ``goal_start_times``, ``goal_durations`` [s or None], ``goals_reached``,
        ``all_reached``, ``time_to_all_reached`` [s or None], ``goal_timeout``; the scalars of
        run_mpc_fig8 with ``stop_reason`` "goals_done" | "time_limit".
        """
        x, sim_dt = self._check_start(x_start, sim_dt)
        G = _points(goals, "goals", rows="G")
        task = GoalTask(
            G, self.N, self.dt, timeout=_positive(goal_timeout, "goal_timeout", "s"),
            threshold=_positive(goal_threshold, "goal_threshold", "m"),
            velocity_threshold=_positive(velocity_threshold, "velocity_threshold", "rad/s"),
            velocity_norm=velocity_norm, settle_time=_positive(settle_time, "settle_time", "s", zero_ok=True),
            ramp=_positive(goal_ramp, "goal_ramp", "s", zero_ok=True))
        st = self._run(task, x, sim_dt, pace_by_solve_time, "goals",
                       f"{len(G)} goals, timeout {task.timeout:.1f}s each, ramp {task.ramp:.2f}s, "
                       f"settle {task.settle:.2f}s,", lambda c, t: (
                           f"  t={t:6.2f}s  goal {c['active_goal'][-1] + 1}/{len(G)}  "
                           f"dist={1000 * c['goal_distances'][-1]:6.1f} mm  |dq|={c['velocity_norms'][-1]:.2f} rad/s"
                           f"  solve={c['solve_times'][-1]:.2f} ms"),
                       lambda st: f"{st['goals_reached']}/{len(G)} reached, time to all {st['time_to_all_reached']}, "
                                  f"{st['n_ticks']} ticks")
        return None, st


# MPC_GATO.__new__ (the floating-base dispatch) takes *args / **kwargs: the class's signature stays
# __init__'s (inspect.signature(gato.MPC_GATO) prefers __new__ otherwise).
_INIT_SIG = inspect.signature(MPC_GATO.__init__)
MPC_GATO.__signature__ = _INIT_SIG.replace(parameters=list(_INIT_SIG.parameters.values())[1:])
