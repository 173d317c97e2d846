"""The controller's run-time parameters (:class:`ControllerParameters`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`): a requested change validated against the
schema (:mod:`gato_ros.params`) plus the capability checks (limit mechanisms, collision rows,
settings of planner bsqp), queued and applied between two ticks; the tunables in force read
back; the planners' configurations from the node's parameters."""
from __future__ import annotations

import json

from gato.planners import controller_setup as setup
from gato.planners import planner as planners

from . import params as schema
from .controller_runaway import check_runaway_factor

_SCHEMA = schema.by_name(schema.CONTROLLER)
#: OSC gains of the schema (osc_<name>) = gato.osc_planner config keys
_OSC_GAINS = ("stiffness", "damping", "orientation_stiffness", "orientation_damping", "null_space_stiffness",
              "null_space_damping")
_FALLBACK_KEYS = ("fallback", "fallback_after_misses", "fallback_grace_ticks", "fallback_recover_ticks",
                  "fault_solver_delay_s", "runaway_factor", "runaway_hold_s")


class ControllerParameters:
    """Parameter changes and planner configurations of :class:`gato_ros.controller_logic.ControllerLogic`
    (its state: ``cfg``, ``_pending``, ``controller`` / ``solver`` / ``planner``, the OSC ``_osc`` /
    ``_fb`` / ``_osc_x0``, ``status``)."""

    def validate_changes(self, changes: dict) -> str | None:
        """Why a run-time change is refused (first reason), or None. Schema checks (type,
        range, choices, read-only) plus the limit-mechanism capability check."""
        for name, value in changes.items():
            reason = schema.validate(schema.CONTROLLER, name, value)
            if reason:
                return reason
            if name == "runaway_factor" and check_runaway_factor(float(value)):
                return check_runaway_factor(float(value))
            if name == "limits" and value != "off" and not callable(getattr(self.solver, f"enable_limit_{value}",
                                                                               None)):
                return (f"limits: {value!r} needs the solver's constraint row-group layer, which this solver "
                        f"({type(self.solver).__name__}, backend {self.cfg['backend']}) does not have "
                        f"(no enable_limit_{value}); only 'off' is available")
            if self.controller is None and (name in setup.TUNABLE_KEYS or (name == "hypotheses"
                                                                              and value != "none")):
                return (f"{name}: a setting of planner bsqp; this node runs planner {self.planner_name!r} "
                        "(planner is read-only)")
        if self.controller is not None and set(changes) & {"limits", *setup.COLLISION_KEYS}:
            merged = {**self.cfg, **self._pending, **changes}
            try:
                setup.check_collision_limits(merged, merged["limits"])
            except ValueError as e:
                return str(e)
            if (merged["collision_spheres"] or merged["collision_planes"]) \
                    and not callable(getattr(self.solver, "enable_collision", None)):
                return (f"collision_spheres: this solver ({type(self.solver).__name__}, backend "
                        f"{self.cfg['backend']}) has no collision rows")
        return None

    def request_changes(self, changes: dict) -> None:
        """Queue validated changes; they take effect at the start of the next tick."""
        reason = self.validate_changes(changes)
        if reason:
            raise ValueError(reason)
        self._pending.update({k: schema.coerce(_SCHEMA[k], v) for k, v in changes.items()})

    def _apply_pending(self) -> None:
        if not self._pending:
            return
        ch, self._pending = self._pending, {}
        if self.controller is not None:
            setup.apply_tunables(self.controller, {k: v for k, v in ch.items() if k in setup.TUNABLE_KEYS})
        self.cfg.update(ch)
        if "plan_gains" in ch:
            self._sync_plan_gains()
        if "runaway_factor" in ch:
            if self._runaway is not None:
                self._need_reset = True        # a hold in control ends: the planner restarts cold
            self._build_runaway_guard(self._runaway_model)
        if any(k.startswith("osc_") for k in ch) and self._osc is not None:
            self._rebuild_osc()
        if self.cfg["fallback"] != "osc" and self._fb is not None:
            self._leave_fallback("fallback switched off")
        elif self.cfg["fallback"] == "osc" and self._osc is None:
            self._osc = planners.make("osc", self.cfg["robot"], self._osc_config(self.cfg))
        self.status.params_json = self.params_json()
        self._config_json = self._make_config_json()
        self._log("info", "parameters applied: " + ", ".join(f"{k}={v}" for k, v in sorted(ch.items())))

    def _sync_plan_gains(self) -> None:
        """plan_gains (issue 33): the bsqp planner attaches each step's feedback gains to its plan
        (one KKT assembly and a Riccati sweep per tick), which the node publishes in Plan.gains."""
        if self.controller is not None:
            self.planner.plan_gains = bool(self.cfg["plan_gains"])

    def params_json(self) -> str:
        """The tunables in force, read back from the solver and controller objects (JSON); the
        planner, the fallback settings and the OSC gains read back from the OSC in force."""
        out = setup.tunables(self.controller) if self.controller is not None else {}
        out.update(budget_s=self.cfg["budget_s"], joint_state_timeout_s=self.cfg["joint_state_timeout_s"],
                   resume_speed_mps=self.cfg["resume_speed_mps"], planner=self.planner_name,
                   **{k: self.cfg[k] for k in _FALLBACK_KEYS})
        if self._osc is not None:
            out.update({"osc_" + k: float(self._osc.config[k]) for k in _OSC_GAINS})
        return json.dumps(out, sort_keys=True)

    @staticmethod
    def _osc_config(cfg: dict) -> dict:
        """gato.osc_planner config from the node's osc_* parameters, stepped at the control rate."""
        return {"dt": 1.0 / cfg["control_rate_hz"], **{k: cfg["osc_" + k] for k in _OSC_GAINS}}

    @classmethod
    def _planner_config(cls, cfg: dict) -> dict:
        """The registry config of a planner other than bsqp (planner sampling / osc)."""
        if cfg["planner"] == "osc":
            return cls._osc_config(cfg)
        if cfg["sampling_horizon_s"] > cfg["N"] * cfg["dt"] + 1e-12:
            raise ValueError(f"sampling_horizon_s: {cfg['sampling_horizon_s']:g} s is longer than the reference "
                             f"window N * dt = {cfg['N'] * cfg['dt']:g} s")
        return {"dt": 1.0 / cfg["control_rate_hz"], "timestep": cfg["sampling_timestep_s"],
                "horizon_s": cfg["sampling_horizon_s"], "num_samples": cfg["sampling_num_samples"],
                "iterations": cfg["sampling_iterations"], "ctrl_std": cfg["sampling_ctrl_std"],
                "ee_weight": cfg["sampling_ee_weight"], "ctrl_weight": cfg["sampling_ctrl_weight"],
                "nthread": cfg["sampling_threads"] or None, "seed": cfg["sampling_seed"],
                "planner": cfg["sampling_method"]}

    def _rebuild_osc(self) -> None:
        """New OSC gains: a new OSC, restarted at the state the running one started from (same
        orientation and posture targets)."""
        osc = planners.make("osc", self.cfg["robot"], self._osc_config(self.cfg))
        x0 = self._fb["x0"] if self._fb is not None else self._osc_x0
        if x0 is not None:
            osc.reset(x0)
        if self.planner is self._osc:
            self.planner = osc
        self._osc = osc

    def _make_config_json(self) -> str:
        """SolveInput.config_json: what gato replay rebuilds (bsqp); the configuration otherwise."""
        if self.controller is not None:
            return setup.config_json(self.cfg, self.controller, self.urdf)
        return json.dumps(self.cfg, sort_keys=True)
