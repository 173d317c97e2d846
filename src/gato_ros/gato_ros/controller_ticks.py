"""The planner ticks of the controller (:class:`PlannerTicks`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`): the bsqp tick (the MPCController through the
registry's bsqp planner, with its plan, SolveInput for replay and the posture of the node's
targets) and the tick of planner sampling or osc; both clamp the command to the effort limits."""
from __future__ import annotations

import time

import numpy as np

from .controller_reference import window_from_flat
from .controller_types import TickOutput
from .types import Plan, ReferenceWindow, SolveInput


class PlannerTicks:
    """The planner ticks of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``cfg``,
    ``controller`` / ``solver`` / ``planner``, ``_need_reset``, ``_grace_left``, ``_osc`` / ``_osc_x0``,
    ``_plan_seq`` / ``_plan_epoch``, ``_prev_tick_stamp``, ``target_source`` / ``_posture_on``,
    ``status``)."""

    def _bsqp_tick(self, stamp, x, ref, dt_el, note, events) -> TickOutput:
        """A tick of planner bsqp: the MPCController's step (cold start and warmup after a reset),
        its plan (gato_msgs/Plan) and the SolveInput replay re-solves it from."""
        budget = self.cfg["budget_s"] or None
        reset = self._need_reset
        try:
            self._program_posture(stamp)
            if reset:
                self.planner.reset(x)
                self.planner.warmup(x, ref)
                self._need_reset = False
                self._grace_left = self.cfg["fallback_grace_ticks"]
                dt_el = None
            warm = self.controller.xu_warm
            carried = self.controller.carried_state()  # with warm: what replay needs to continue exactly
            self._fault_delay()
            pres = self.planner.step(x, ref, dt_el, budget_s=budget)
            res = pres.detail
        except (ValueError, RuntimeError, FloatingPointError) as e:
            return self._planner_failed(f"solver error: {e}", stamp, x, ref, dt_el, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            return self._planner_failed("solver returned a non-finite command", stamp, x, ref, dt_el, events)
        if self._fallback_on and (res.diverged or res.reseeded):
            self._need_reset = True
            why = f"solver diverged ({res.fallback})" if res.diverged else \
                f"warm start re-seeded (prediction error {res.pred_err:.3g} > reseed_threshold)"
            return self._enter_fallback("diverged" if res.diverged else "reseeded", why, stamp, x, ref, dt_el,
                                        events)
        source = "mpc"
        if res.diverged:
            source = "fallback"
            self.status.fallbacks += 1
            self._set_state("running", f"solver diverged: {res.fallback} fallback this tick", events)
        else:
            self._set_state("running", note, events, "info")
        clamped = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(clamped != u):
            self.status.clamped += 1
        self._prev_tick_stamp = stamp
        self.status.solve_us = float(res.wall_s) * 1e6
        self._plan_seq += 1
        self._plan_epoch += int(reset)  # a cold start begins a new epoch: consumers drop older plans
        plan = Plan(stamp_ns=stamp, knot_dt=self.cfg["dt"], nx=res.solve.nx, nu=res.solve.nu, n_knots=res.solve.N,
                    joint_names=self._solver_joints, xu=np.asarray(res.xu_best, dtype=np.float64),
                    seq=self._plan_seq, reset_epoch=self._plan_epoch, integrator=str(self.solver.integrator))
        if np.all(warm == warm[:1]):
            warm = warm[:1]          # every entry starts from the same plan: store it once
        # the (B, 6) world wrenches this step's hypothesis batch programmed and scored: replay re-solves under them
        hyp = self.controller.hypotheses
        wrenches = None if hyp is None or getattr(hyp, "batch_used", None) is None else np.array(hyp.batch_used)
        solve_input = SolveInput(stamp_ns=stamp, tick=self.status.ticks + 1, joint_names=self._solver_joints,
                                 x_measured=x, reference=ref, xu_warm=warm, dt_elapsed=dt_el or 0.0,
                                 budget_s=budget or 0.0, reset=reset, config_json=self._config_json,
                                 solver_state=None if carried is None else carried["solver"],
                                 capped_out=bool(carried and carried["capped_out"]),
                                 force_reseed=bool(carried and carried["force_reseed"]),
                                 wrench_hypotheses=wrenches)
        return self._emit(stamp, clamped[self._cmd_from_solver], source, events, step=res, plan=plan,
                          solve_input=solve_input, planner_step=pres, planner="bsqp")

    def _planner_tick(self, stamp, x, ref, dt_el, note, events) -> TickOutput:
        """A tick of planner sampling or osc (no SolveInput: gato replay re-runs bsqp ticks)."""
        reset = self._need_reset
        try:
            if reset:
                self.planner.reset(x)
                if self.planner is self._osc:
                    self._osc_x0 = x.copy()
                self._need_reset = False
                self._grace_left = self.cfg["fallback_grace_ticks"]
                dt_el = None
            if self.planner is not self._osc:
                self._fault_delay()
            res = self.planner.step(x, self._window(stamp, ref), dt_el)
        except (ValueError, RuntimeError, FloatingPointError) as e:
            return self._planner_failed(f"planner error: {e}", stamp, x, ref, dt_el, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            return self._planner_failed("planner returned a non-finite command", stamp, x, ref, dt_el, events)
        self._set_state("running", note, events, "info")
        return self._command(stamp, u, self.planner_name, events, res, self.planner_name)

    def _command(self, stamp, u, source, events, res, planner) -> TickOutput:
        """Clamp (counted), stats, emit: the tail of every non-bsqp planner tick."""
        clamped = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(clamped != u):
            self.status.clamped += 1
        self._prev_tick_stamp = stamp
        self.status.solve_us = float(res.stats.wall_s) * 1e6
        return self._emit(stamp, clamped[self._cmd_from_solver], source, events, planner_step=res, planner=planner)

    def _window(self, stamp_ns: int, ref: np.ndarray) -> ReferenceWindow:
        """The tick's (6N,) solver-layout reference as the ReferenceWindow the planners take."""
        return window_from_flat(stamp_ns, self.cfg["dt"], ref)

    def _fault_delay(self) -> None:
        if self.cfg["fault_solver_delay_s"] > 0:     # fault injection (tests): a stalled solver
            time.sleep(self.cfg["fault_solver_delay_s"])

    def _program_posture(self, stamp_ns: int) -> None:
        """Issue 31: the solver's posture term carries target_source's per-knot joint targets (a joint
        trajectory or a joint hold) while it has them, and is off (weight 0) otherwise."""
        post = None if self.target_source is None else self.target_source.posture(stamp_ns)
        if post is None:
            if self._posture_on:
                self.solver.set_q_pos_cost(0.0)
                self.solver.set_q_nom(None)
                self._posture_on = False
            return
        self.solver.set_q_nom(post[0])
        self.solver.set_q_pos_cost(post[1])
        self._posture_on = True
