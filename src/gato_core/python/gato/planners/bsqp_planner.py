"""The batched-SQP planner ("bsqp"): :class:`gato.MPCController` behind the planner interface.

The controller keeps doing all the work (warm start, hypothesis hooks, best-of-batch,
time shift, linear-system policy, divergence fallback); the controller also turns a
:class:`gato.references.ReferenceWindow` into the solver's flat reference and orientation
weights; this class only converts the
controller's :class:`gato.StepResult` into the planner's (the same type, with ``plan`` and
``stats`` filled in, and ``replay`` under ``record_replay``). Its torques are the controller's,
bit for bit (test/test_planner.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .planner import Capabilities, Plan, Planner, PlannerStats, ReplayInput, StepResult
from ..core.references import ReferenceWindow  # noqa: F401  (gato.bsqp_planner re-exports it)

__all__ = ["BSQPPlanner", "solver_params", "set_posture"]

#: Config keys that build the solver: horizon [knots], knot spacing [s], batch size, SolverParams
#: (an instance or a dict of its fields), and the plant name when ``robot`` is a URDF path.
SOLVER_KEYS = ("N", "dt", "batch_size", "params", "plant_type")
#: Config keys passed to :class:`gato.MPCController` as they are (see there).
CONTROLLER_KEYS = ("hypotheses", "warm_start", "reset_rho_each_step", "linsys", "bdsv_threshold", "task_tag",
                   "reseed_threshold", "admm_linsys", "admm_threshold", "limits", "limits_kw",
                   "orientation_weights", "pose_ee_weight_scale")


def set_posture(solver, q_nom, weight) -> None:
    """The posture term of ``solver`` (a :class:`gato.BSQP`): joint targets ``q_nom`` ((nq,) rad,
    or (N, nq) per knot) at ``weight`` (scalar, (nq,) or (N, nq)) [1/rad^2]; ``q_nom`` None with
    weight 0 turns it off (:meth:`gato.BSQP.set_q_nom`, :meth:`gato.BSQP.set_q_pos_cost`). The
    controller node's joint targets and ``gato replay`` of their ticks both program it here, in
    this order, so a replayed tick solves the same problem bit for bit."""
    if q_nom is None:
        solver.set_q_pos_cost(weight)
        solver.set_q_nom(None)
    else:
        solver.set_q_nom(q_nom)
        solver.set_q_pos_cost(weight)


def solver_params(params):
    """A :class:`gato.SolverParams` from None (the defaults), an instance, or a dict of its fields;
    ValueError naming ``params`` otherwise."""
    from ..core.config import SolverParams

    if params is None:
        return SolverParams()
    if isinstance(params, dict):
        return SolverParams.from_mapping(params)
    if not isinstance(params, SolverParams):
        raise ValueError(f"params: expected None, a gato.SolverParams or a dict of its fields, "
                         f"got {type(params).__name__}")
    return params


class BSQPPlanner(Planner):
    """Args:
        robot: a registered plant name or a URDF path.
        config: None or a dict: ``N`` (32), ``dt`` (0.03125 s), ``batch_size`` (1), ``params``
            (SolverParams or dict; default SolverParams()), ``plant_type``, and the
            MPCController keywords :data:`CONTROLLER_KEYS`. Unknown keys raise ValueError.

    ``controller`` (the MPCController) and ``solver`` (its BSQP) stay reachable for the
    reference-API layer. :meth:`from_controller` wraps an existing controller instead.

    ``plan_gains`` (attribute, default False): attach the winning row's feedback gains
    (:meth:`gato.BSQP.feedback_gains`) to each step's plan as :attr:`Plan.K`; a plan of the
    gravity fallback, or one whose model has no unique minimizer, carries none (counted in
    ``gains_failed``).

    ``record_replay`` (attribute, default False): each step's result carries
    :attr:`StepResult.replay`, what an exact re-run of it needs (the warm start and carried state
    it started from, the hypothesis wrenches it solved under: gato_msgs/SolveInput, ``gato replay``).
    """

    capabilities = Capabilities(batch=True, hypotheses=True, plan_output=True, warmup=True, budget=True,
                                warm_start_io=True)

    def __init__(self, robot, config=None):
        from .controller import MPCController
        from ..core.bsqp import BSQP
        from ..robots.registry import resolve_robot

        cfg = dict(config or {})
        unknown = sorted(set(cfg) - set(SOLVER_KEYS) - set(CONTROLLER_KEYS))
        if unknown:
            raise ValueError(f"config: unknown keys {unknown}; bsqp takes {list(SOLVER_KEYS + CONTROLLER_KEYS)}")
        urdf, plant, _ = resolve_robot(robot, None)
        solver = BSQP(urdf, cfg.get("batch_size", 1), cfg.get("N", 32), cfg.get("dt", 0.03125),
                      solver_params(cfg.get("params")),
                      plant_type=cfg.get("plant_type", plant))
        self._bind(MPCController(solver, **{k: cfg[k] for k in CONTROLLER_KEYS if k in cfg}))

    @classmethod
    def from_controller(cls, controller) -> "BSQPPlanner":
        """The planner over an existing :class:`gato.MPCController` (shared, not copied)."""
        from .controller import MPCController

        if not isinstance(controller, MPCController):
            raise ValueError(f"controller: expected a gato.MPCController, got {type(controller).__name__}")
        self = cls.__new__(cls)
        self._bind(controller)
        return self

    def _bind(self, controller) -> None:
        self.controller = controller
        s = self.solver = controller.solver
        self.nx, self.nu, self.N, self.dt = int(s.nx), int(s.nu), int(s.N), float(s.dt)
        self.nu_act = int(getattr(s, "n_actuated", s.nu))
        self.plan_gains = False
        self.record_replay = False
        self.gains_failed = 0

    # ------------------------------------------------------------------ conversions
    def _plan(self, xu) -> Plan:
        return Plan(np.asarray(xu, dtype=np.float64), self.nx, self.nu, self.nu_act, self.N, self.dt,
                    integrator=str(self.solver.integrator))

    def _replay_input(self) -> ReplayInput:
        """The warm start and carried state the next step starts from (its wrenches are added
        after it: the hypothesis batch programs them inside the step)."""
        c = self.controller
        warm = c.xu_warm
        if warm is not None and np.all(warm == warm[:1]):
            warm = warm[:1]          # every entry starts from the same plan: store it once
        carried = c.carried_state()
        return ReplayInput(xu_warm=warm, solver_state=None if carried is None else carried["solver"],
                           capped_out=bool(carried and carried["capped_out"]),
                           force_reseed=bool(carried and carried["force_reseed"]))

    # ------------------------------------------------------------------ interface
    def reset(self, x0) -> None:
        self.controller.reset(x0)

    def warmup(self, x, reference) -> Plan:
        """The controller's warm-up solve; the plan of batch entry 0 (with its gains under
        ``plan_gains`` unless it diverged)."""
        res = self.controller.warmup(x, reference)
        plan = self._plan(np.asarray(res.xu, dtype=np.float64)[0])
        if self.plan_gains and not bool(np.asarray(res.diverged)[0]):
            plan.K = self._row_gains(0)
        return plan

    def step(self, x_measured, reference, dt_elapsed=None, budget_s=None) -> StepResult:
        """The controller's step; its StepResult with ``plan`` (the winning plan), ``stats``,
        ``detail`` (the controller's own result) and, under ``record_replay``, ``replay``."""
        replay = self._replay_input() if self.record_replay else None
        r = self.controller.step(x_measured, reference, dt_elapsed=dt_elapsed, budget_s=budget_s)
        st = r.solve.stats
        pcg = np.asarray(st.pcg_iters)
        extra = dict(pred_err=float(r.pred_err), reseeded=bool(r.reseeded), linsys=str(st.linsys),
                     pcg_iters=int(pcg[r.best_id].sum()) if pcg.ndim == 2 and pcg.size else 0,
                     admm_linsys=r.admm_linsys, limits=r.limits, diverged=bool(r.diverged))
        stats = PlannerStats(solve_s=r.solve.solve_time_us * 1e-6, wall_s=r.wall_s, iterations=r.iterations,
                             best_id=int(r.best_id), fallback=r.fallback, budget_hit=r.budget_hit, extra=extra)
        plan = self._plan(r.xu_best)
        if self.plan_gains:
            plan.K = self._gains(r)
        if replay is not None:
            # the (B, 6) world wrenches this step's hypothesis batch programmed and scored
            hyp = self.controller.hypotheses
            used = None if hyp is None else getattr(hyp, "batch_used", None)
            replay.wrench_hypotheses = None if used is None else np.array(used)
        return replace(r, plan=plan, stats=stats, detail=r, replay=replay)

    def set_posture(self, q_nom, weight) -> None:
        """The solver's posture term (:func:`set_posture`)."""
        set_posture(self.solver, q_nom, weight)

    def _gains(self, r):
        """The winning row's gains (N-1, nu, nx), or None for the gravity fallback's plan (not
        a solved one) and a model without a unique minimizer (counted in ``gains_failed``)."""
        return None if r.fallback == "gravity" else self._row_gains(int(r.best_id))

    def _row_gains(self, row):
        try:
            return self.solver.feedback_gains(row)
        except ValueError:
            self.gains_failed += 1
            return None
