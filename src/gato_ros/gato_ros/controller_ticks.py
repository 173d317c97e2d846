"""The planner tick of the controller (:class:`PlannerTicks`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`): every planner (bsqp, sampling, osc) through
the :mod:`gato.planner` interface on one path. ``_tick`` calls ``planner.step`` itself (a joint
state reaches the C++ solver in five Python frames: test/test_tick_path.py); what comes before
the step is :meth:`PlannerTicks._prepare_step`, what comes after :meth:`PlannerTicks._planner_result`.

The one bsqp-specific part: its ticks publish their plan and the SolveInput replay re-solves
them from (``StepResult.replay``, recorded by the bsqp planner), and program the posture of the
node's targets (:meth:`gato.planners.bsqp_planner.BSQPPlanner.set_posture`). Every command is
clamped to the effort limits."""
from __future__ import annotations

import time

import numpy as np

from .controller_types import TickOutput
from .types import SolveInput


class PlannerTicks:
    """The planner tick of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``cfg``,
    ``controller`` / ``planner``, ``_need_reset``, ``_grace_left``, ``_osc`` / ``_osc_x0``,
    ``_plan_seq`` / ``_plan_epoch``, ``_prev_tick_stamp``, ``target_source`` / ``_posture_on`` / ``_posture``,
    ``status``)."""

    @property
    def _records(self) -> bool:
        """The planner's ticks publish a plan and a SolveInput (bsqp: ``gato replay`` re-solves them)."""
        return self.controller is not None

    def _step_budget(self):
        """budget_s [s] for a planner that honours a budget, else None (0 = none)."""
        return (self.cfg["budget_s"] or None) if self.planner.capabilities.budget else None

    def _prepare_step(self, stamp, state, ref, reset) -> None:
        """Before the step: the posture of the node's targets (bsqp), a cold start (reset at
        ``state``, a :class:`gato.core.state.MeasuredState`; the seeding solve of a planner with one)
        and the fault injection's delay."""
        if self._records:
            self._program_posture(stamp)
        if reset:
            self.planner.reset(state)
            if self.planner.capabilities.warmup:
                self.planner.warmup(state, ref)
            if self.planner is self._osc:
                self._osc_x0 = state        # immutable (a MeasuredState): no copy
            self._need_reset = False
            self._grace_left = self.cfg["fallback_grace_ticks"]
        if self.planner is not self._osc:
            self._fault_delay()

    def _planner_result(self, res, reset, stamp, state, ref, dt_el, note, events) -> TickOutput:
        """After the step: a non-finite command fails the tick, a diverged or re-seeded bsqp solve
        enters the OSC fallback (when on); the command clamped, with the plan and SolveInput of a
        bsqp tick. ``res``: the planner's :class:`gato.planner.StepResult`; ``state`` (a
        :class:`gato.core.state.MeasuredState` (nx,)) and ``ref`` (a ReferenceWindow on the solver's
        grid) what it solved from; SolveInput records
        its flat (6N,) layout, the solver's (gato_msgs/SolveInput)."""
        word = "solver" if self._records else "planner"
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            return self._planner_failed(f"{word} returned a non-finite command", stamp, state, ref, dt_el, events)
        if self._fallback_on and (res.diverged or res.reseeded):
            self._need_reset = True
            why = f"solver diverged ({res.fallback})" if res.diverged else \
                f"warm start re-seeded (prediction error {res.pred_err:.3g} > reseed_threshold)"
            return self._enter_fallback("diverged" if res.diverged else "reseeded", why, stamp, state, ref, dt_el,
                                        events)
        source = "mpc" if self._records else self.planner_name
        if res.diverged:
            source = "fallback"
            self.status.fallbacks += 1
            self._set_state("running", f"solver diverged: {res.fallback} fallback this tick", events)
        else:
            self._set_state("running", note, events, "info")
        plan = solve_input = None
        if self._records:
            self._plan_seq += 1
            self._plan_epoch += int(reset)  # a cold start begins a new epoch: consumers drop older plans
            plan = res.plan
            plan.stamp_ns, plan.joint_names = stamp, list(self._solver_joints)
            plan.seq, plan.reset_epoch = self._plan_seq, self._plan_epoch
            rp = res.replay
            solve_input = SolveInput(stamp_ns=stamp, tick=self.status.ticks + 1, joint_names=self._solver_joints,
                                     x_measured=state.x, reference=ref.solver_layout(), xu_warm=rp.xu_warm,
                                     dt_elapsed=dt_el or 0.0, budget_s=self._step_budget() or 0.0, reset=reset,
                                     config_json=self._config_json, solver_state=rp.solver_state,
                                     capped_out=rp.capped_out, force_reseed=rp.force_reseed,
                                     wrench_hypotheses=rp.wrench_hypotheses,
                                     orientation_weight=0.0 if ref.orientations is None else
                                     float(ref.orientation_weight),
                                     posture_q=None if self._posture is None else self._posture[0],
                                     posture_weight=None if self._posture is None else self._posture[1])
        self._track(state.x, ref)
        return self._command(stamp, u, source, events, res, self.planner_name, plan=plan, solve_input=solve_input)

    def _command(self, stamp, u, source, events, res, planner, plan=None, solve_input=None) -> TickOutput:
        """Clamp (counted), stats, emit: the tail of every planner tick (the OSC fallback's too).
        ``step`` of the output: the solver-level result when the planner has one (bsqp's
        MPCController StepResult, ``res.detail``)."""
        clamped = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(clamped != u):
            self.status.clamped += 1
        self._prev_tick_stamp = stamp
        self.status.solve_us = float(res.stats.wall_s) * 1e6
        step = res.detail if res.solve is not None else None
        return self._emit(stamp, clamped[self._cmd_from_solver], source, events, step=step, plan=plan,
                          solve_input=solve_input, planner_step=res, planner=planner)

    def _fault_delay(self) -> None:
        if self.cfg["fault_solver_delay_s"] > 0:     # fault injection (tests): a stalled solver
            time.sleep(self.cfg["fault_solver_delay_s"])

    def _program_posture(self, stamp_ns: int) -> None:
        """Issue 31: the solver's posture term carries target_source's per-knot joint targets (a joint
        trajectory or a joint hold) while it has them, and is off (weight 0) otherwise. The tables
        go into the tick's SolveInput (posture_q / posture_weight), so ``gato replay`` re-solves
        the tick with them."""
        post = None if self.target_source is None else self.target_source.posture(stamp_ns)
        self._posture = post      # recorded in the tick's SolveInput (gato replay programs the same)
        if post is None:
            if self._posture_on:
                self.planner.set_posture(None, 0.0)
                self._posture_on = False
            return
        self.planner.set_posture(post[0], post[1])
        self._posture_on = True
