"""Task-agnostic batched MPC controller: one ``step(x, reference)`` per tick.

The controller owns only the solver interaction: the warm-start buffer, the
hypothesis-batch hooks, best-of-batch selection, the real-time-iteration time
shift, the per-step linear-system policy and the divergence fallback. It never
integrates dynamics, never sleeps and never paces itself: simulation and timing
belong to the caller (a gymnasium env, a hardware loop, a plain script).

Units: states x = [q; qd] (rad, rad/s), controls u in N·m, references in
metres (world frame), orientations as rotation vectors [rad] (world frame), times in seconds.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..core.arrays import flag, from_numpy, kind_of, to_numpy
from ..core.bsqp import robot_info, shift_plan
from ..core.linsys_autotune import check_threshold, resolve_admm_linsys, resolve_linsys
from ..core.references import ReferenceWindow
from ..core.results import SolveResult
from ..core.state import MeasuredState
from .planner import StepResult
from .shipped_weights import ORIENTATION_WEIGHTS
from .pose_ee_scale import PoseEEScale, check_scale

__all__ = ["MPCController", "StepResult"]

_LIMIT_MECHS = ("admm", "barrier", "al", "telemetry")


class MPCController:
    """Batched-SQP MPC controller around a :class:`gato.BSQP` solver.

    Args:
        solver: a constructed gato.BSQP.
        hypotheses: optional :class:`gato.hypotheses.HypothesisBatch` whose
            ``batch_size`` equals the solver's; each batch entry solves under its
            own hypothesis and the one that best explains the measured state wins.
            Before any evidence (the first step) the lowest final merit wins, unless
            the batch names a row: ``first_row()`` returning an index (None: merit).
            None: the entries solve the same problem and the lowest final merit wins
            (best-of-batch; B = 1 is a plain single-solve MPC).
        warm_start: "shift" (default): next tick's warm start is the winning plan
            advanced one knot with the final stage repeated (real-time iteration);
            "hold": the winning plan as solved. Either is copied into every entry.
        reset_rho_each_step: restore the trust-region rho to its configured default
            before every solve (its adaptation is per-solve state).
        linsys: Schur-system path policy. "pcg" | "bdsv" | "bdsv_first" pin the
            solver's path. "auto" chooses per step: a COLD step (pred_err above
            ``bdsv_threshold``, a PCG cap-out on the previous step — some entry's
            PCG ran ``max_pcg_iters`` — or a re-seed) runs "bdsv_first" (exact solve
            of the fresh linearization, PCG warm-started after), a warm step "pcg".
            (The cap-out signal reads ``SolverStats.pcg_iters``: it is absent while
            ``solver.set_collect_stats(False)``.)
            None (default): a tuned (plant, N, task_tag) entry, else the wired
            per-base default ("bdsv" on the CPU backend; on CUDA "auto" fixed base, "bdsv"
            floating base); see
            :func:`gato.linsys_autotune.resolve_linsys`. An explicit value always wins.
        bdsv_threshold: pred_err threshold of "auto" (default: the tuned tau, else 0.1).
        task_tag: workload tag into the autotuned table (``linsys_tuning.json`` next
            to the package, ``$GATO_LINSYS_TUNING`` overrides; written by
            ``python -m gato.tools.autotune_linsys``). Without a tag the table is not read.
        reseed_threshold: pred_err above which the warm start is RE-SEEDED to a hold
            at the measured state and the solver duals reset before solving (None =
            off). A re-seeded step counts as cold for "auto". Set it above
            ``bdsv_threshold``: re-seeding is the bigger hammer.
        admm_linsys: ADMM inner-loop linear solver, read only while a row group runs
            the ADMM mechanism (``solver.admm_active``): "pcg" | "bdsv_factor" pin
            it, "auto" factors on cold steps (pred_err above ``admm_threshold``, a
            previous PCG cap-out, a re-seed) and runs warm PCG otherwise. None: a
            tuned entry's admm_policy, else the wired default by horizon — "pcg"
            below ``ADMM_FACTOR_MIN_N`` knots, "bdsv_factor" from there
            (:func:`gato.linsys_autotune.resolve_admm_linsys`).
        admm_threshold: pred_err threshold of admm_linsys "auto" (default: the tuned
            admm_tau, else ``bdsv_threshold``, else 0.1).
        limits: the URDF joint limits (position, velocity, torque boxes) as constraint
            rows on the solver (docs/constraints.md). None (default): a fixed-base arm
            whose solver has no row groups yet gets the ADMM mechanism with the
            measured defaults (``LIMIT_DEFAULTS["admm"]``: per-box rho 0.1 / 0.1 / 1e-5
            for the position / velocity / torque rows, at most 30 inner iterations,
            residual exit at eps_rel 1e-2); a solver the caller already configured (any
            row group installed), a floating-base solver and a solver without the
            row-group layer are left as they are. "off": install nothing (the
            unconstrained step, bit for bit). "admm" | "barrier" | "al" | "telemetry":
            ``solver.enable_limit_<mech>(**LIMIT_DEFAULTS[mech], **limits_kw)`` after
            removing the installed row groups (appended groups must come after). A
            solver without that method raises ValueError.
        limits_kw: keyword overrides for the enable call behind ``limits`` (also for the
            None default; an error with "off").
        orientation_weights: (rot_cost, N_rot_cost) [1/rad^2], the EE orientation weights of a
            :class:`gato.references.ReferenceWindow` that carries orientations but no
            ``orientation_weight`` of its own. None (default): the solver's configured
            rot_cost / N_rot_cost when either is > 0, else the shipped
            :data:`gato.planners.shipped_weights.ORIENTATION_WEIGHTS`.
        pose_ee_weight_scale: factor (> 0) on the EE position weights (q_cost, N_cost) of the
            solves whose reference window carries orientations; position-only solves keep the
            configured weights (:mod:`gato.planners.pose_ee_scale`). None (default): 1, off.

    References: a flat (6N,) / (N, 6) array solves with the solver's configured weights, as
    given (slots [3:6] are read only when the configured orientation weight is > 0). A
    ReferenceWindow is resampled onto the solver's grid when its grid differs and sets the
    orientation weights of that solve: zero for a position-only window (its plans are the
    position-only plans, bit for bit), the window's ``orientation_weight`` (every knot) or
    ``orientation_weights`` for one with orientations (slots [3:6] = its rotation vectors).

    The controller runs the host path: the warm start is host memory and inputs
    of any kind (numpy, CPU torch, JAX) are copied in; ``u`` comes back in the
    kind of ``x_measured``.
    """

    #: Measured defaults of the limit mechanisms (docs/constraints.md), keyword
    #: arguments of ``solver.enable_limit_<mech>``.
    LIMIT_DEFAULTS = {
        "admm": {"eps_rel": 0.01, "iters": 30, "rho": 0.01, "rho_q": 0.1, "rho_qd": 0.1, "rho_u": 1e-05},
        "al": {},
        "barrier": {},
        "telemetry": {},
    }
    #: The reference's values (gato_api_reference.txt, MPCController.LIMIT_DEFAULTS; the consumer
    #: contract: "per-box rho 0.1 / 0.03 / 1e-5, cap 10"). gato's ADMM default raises the cap to 30
    #: and the velocity rho to 0.1: with these values the RK4 plant overshot the URDF velocity
    #: limit by up to ~5 % (issue 22, docs/constraints.md "Tracking weight"). Restore them with
    #: ``MPCController(solver, limits="admm", limits_kw=MPCController.LIMIT_DEFAULTS_REFERENCE["admm"])``
    #: (docs/reference_differences.md).
    LIMIT_DEFAULTS_REFERENCE = {
        "admm": {"eps_rel": 0.01, "iters": 10, "rho": 0.01, "rho_q": 0.1, "rho_qd": 0.03, "rho_u": 1e-05},
        "al": {},
        "barrier": {},
        "telemetry": {},
    }

    def __init__(self, solver, *, hypotheses=None, warm_start="shift", reset_rho_each_step=True, linsys=None,
                 bdsv_threshold=None, task_tag=None, reseed_threshold=None, admm_linsys=None,
                 admm_threshold=None, limits=None, limits_kw=None, orientation_weights=None,
                 pose_ee_weight_scale=None):
        for attr in ("solve", "nx", "nu", "N", "batch_size", "xu_size", "hold_trajectory"):
            if not hasattr(solver, attr):
                raise ValueError(f"solver: expected a gato.BSQP, got {type(solver).__name__} (no {attr!r})")
        self.solver = solver
        B = int(solver.batch_size)
        if hypotheses is not None:
            for attr in ("apply", "select", "update"):
                if not callable(getattr(hypotheses, attr, None)):
                    raise ValueError(f"hypotheses: expected a gato.hypotheses.HypothesisBatch, "
                                     f"got {type(hypotheses).__name__} (no {attr}())")
            hb = getattr(hypotheses, "batch_size", None)
            if hb != B:
                raise ValueError(f"hypotheses: batch_size {hb!r} differs from the solver's batch_size {B}; "
                                 "build the solver with one batch entry per hypothesis")
        self.hypotheses = hypotheses
        if warm_start not in ("shift", "hold"):
            raise ValueError(f"warm_start: expected 'shift' or 'hold', got {warm_start!r}")
        self.warm_start = warm_start
        self.reset_rho_each_step = flag(reset_rho_each_step, "reset_rho_each_step")
        if task_tag is not None and (not isinstance(task_tag, str) or not task_tag):
            raise ValueError(f"task_tag: expected a non-empty string or None, got {task_tag!r}")
        self.task_tag = task_tag
        self.reseed_threshold = check_threshold(reseed_threshold, "reseed_threshold")
        plant = getattr(solver, "plant_type", None)
        self.floating_base = bool(getattr(solver, "floating_base", False)
                                  or (robot_info(plant).get("floating_base", False) if plant else False))
        self.linsys, self.bdsv_threshold = resolve_linsys(self.floating_base, linsys, bdsv_threshold,
                                                          plant=plant, N=int(solver.N), task_tag=task_tag,
                                                          backend=getattr(solver, "backend", "cuda"))
        if self.linsys != "auto":
            solver.set_linsys(self.linsys)
        self.admm_linsys, self.admm_threshold = resolve_admm_linsys(
            admm_linsys, admm_threshold, fallback_tau=self.bdsv_threshold, plant=plant, N=int(solver.N),
            task_tag=task_tag, backend=getattr(solver, "backend", "cuda"))
        self._install_limits(limits, limits_kw)
        p = getattr(solver, "params", None)
        self._rot_configured = (float(getattr(p, "rot_cost", 0.0)), float(getattr(p, "N_rot_cost", 0.0)))
        self.orientation_weights = self._orientation_weights(orientation_weights)
        self._rot_saved = None     # the solver's own orientation weights while a window's are in force
        self._pose_ee = PoseEEScale(pose_ee_weight_scale)   # issue 30: the EE weights of pose windows
        self._warm = None          # (B, xu_size) float64 warm start of the next solve
        self._x_prev = None        # (nx,) state the last returned control was computed at
        self._u_prev = None        # (nu,) full-width control returned last
        self._capout = False       # some entry's PCG hit max_pcg_iters on the previous solve
        self._force_reseed = False  # the previous solve diverged: re-seed next tick
        self._gravity_hold = None  # gato.safety.GravityHold, built on the first divergence

    # ------------------------------------------------------------------ limits
    def _install_limits(self, limits, limits_kw) -> None:
        if limits is not None and limits != "off" and limits not in _LIMIT_MECHS:
            raise ValueError(f"limits: expected None, 'off' or one of {_LIMIT_MECHS}, got {limits!r}")
        if limits_kw is not None and not isinstance(limits_kw, dict):
            raise ValueError(f"limits_kw: expected a dict of keyword overrides, got {type(limits_kw).__name__}")
        if limits_kw and limits == "off":
            raise ValueError(f"limits_kw: given, but limits={limits!r} installs no mechanism to pass them to")
        self.limits_kw = dict(limits_kw or {})
        self._limits_arg = limits
        if limits == "off":
            return
        groups = getattr(self.solver, "get_row_groups", None)
        if limits is None:
            # The default: ADMM limits on a fixed-base arm the caller has not configured.
            if self.floating_base or not callable(getattr(self.solver, "enable_limit_admm", None)) \
                    or (callable(groups) and groups()):
                if self.limits_kw:
                    raise ValueError("limits_kw: given, but limits=None leaves this solver as configured "
                                     "(pass limits='admm' to re-install)")
                return
            limits = "admm"
        enable = getattr(self.solver, f"enable_limit_{limits}", None)
        if not callable(enable):
            raise ValueError(f"limits: {limits!r} needs the constraint row-group layer, which is not built yet "
                             f"for this solver ({type(self.solver).__name__} has no enable_limit_{limits}()); "
                             "use limits=None or 'off'")
        if callable(groups) and groups() and callable(getattr(self.solver, "disable_row_groups", None)):
            self.solver.disable_row_groups()  # re-install the canonical limit groups
        enable(**{**self.LIMIT_DEFAULTS[limits], **self.limits_kw})

    @property
    def limits(self):
        """The limit mechanism in force on the solver ("admm" | "barrier" | "al" |
        "telemetry"), or None when none is installed (always None on a solver
        without the row-group layer)."""
        mech = getattr(self.solver, "row_mech", None)
        return mech if isinstance(mech, str) and mech else None

    @property
    def xu_warm(self):
        """The warm start the next :meth:`step` starts from, (B, xu_size) float64 (a copy),
        or None before the first :meth:`reset` / step. Recorders store it so a tick can be
        re-solved offline (``gato replay``)."""
        return None if self._warm is None else self._warm.copy()

    def set_warm_start(self, xu_warm) -> None:
        """Make ``xu_warm`` — (xu_size,) (broadcast) or (B, xu_size) — the warm start of the
        next :meth:`step`, exactly as given (knot 0 included), keeping the solver state
        (duals, adapted rho, row-group multipliers). Unlike :meth:`reset` nothing else is
        cleared: this re-creates a recorded tick (``gato replay``). Inputs are copied;
        raises ValueError on a wrong shape or NaN/Inf."""
        self._warm = self._warm_arg(xu_warm)

    def carried_state(self) -> dict | None:
        """What the next :meth:`step` carries over from the previous ones besides the warm
        start, for exact replay from any tick: ``{"solver": (B, K) float64`` (the solver's
        :meth:`gato.BSQP.get_solver_state`), ``"capped_out"``, ``"force_reseed"`` (bool)}.
        None when the solver cannot export its state. A hypothesis batch's own state is
        not included."""
        get = getattr(self.solver, "get_solver_state", None)
        if not callable(get):
            return None
        return {"solver": get(), "capped_out": bool(self._capout), "force_reseed": bool(self._force_reseed)}

    def set_carried_state(self, state: dict) -> None:
        """Install a :meth:`carried_state` (of a controller with the same configuration):
        with :meth:`set_warm_start`, the next :meth:`step` continues exactly where the
        recorded one did. Raises ValueError when the solver state does not fit (other
        row groups, batch size or horizon) or the solver cannot take one."""
        if not isinstance(state, dict) or "solver" not in state:
            raise ValueError(f"state: expected a dict from carried_state(), got {type(state).__name__}")
        put = getattr(self.solver, "set_solver_state", None)
        if not callable(put):
            raise ValueError(f"state: {type(self.solver).__name__} cannot install a solver state")
        put(state["solver"])
        self._capout = bool(state.get("capped_out", False))
        self._force_reseed = bool(state.get("force_reseed", False))

    # ------------------------------------------------------------------ inputs
    def _warm_arg(self, xu_warm) -> np.ndarray:
        """A (B, xu_size) float64 copy of a caller's warm start, (xu_size,) broadcast."""
        s = self.solver
        B, xs = int(s.batch_size), int(s.xu_size)
        arr = np.array(to_numpy(xu_warm, "xu_warm", np.float64), dtype=np.float64)
        if arr.shape == (xs,):
            arr = np.repeat(arr[None, :], B, axis=0)
        if arr.shape != (B, xs):
            raise ValueError(f"xu_warm: expected shape ({xs},) or ({B}, {xs}), got {tuple(arr.shape)}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("xu_warm: contains NaN or Inf")
        return arr

    def _state(self, x, name: str) -> MeasuredState:
        """``x`` as a :class:`gato.core.state.MeasuredState` of this solver's nx: one as it is (checked
        when it was built: the ROS controller's joint state), anything else checked now (a ValueError
        naming ``name``). The solve takes it as it is too: a state is checked once per step."""
        nx = int(self.solver.nx)
        return x if type(x) is MeasuredState and x.nx == nx else MeasuredState(x, nx, name=name)

    def _orientation_weights(self, w) -> tuple:
        if w is None:
            return self._rot_configured if max(self._rot_configured) > 0 else \
                (ORIENTATION_WEIGHTS["rot_cost"], ORIENTATION_WEIGHTS["N_rot_cost"])
        try:
            a = np.array(w, dtype=np.float64)
        except (TypeError, ValueError):
            a = np.array([np.nan])
        if a.shape != (2,) or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"orientation_weights: expected (rot_cost, N_rot_cost), two finite numbers >= 0 "
                             f"[1/rad^2], got {w!r}")
        return float(a[0]), float(a[1])

    @property
    def pose_ee_weight_scale(self) -> float:
        """The factor on the EE position weights of pose windows (1 = off); settable between steps."""
        return self._pose_ee.scale

    @pose_ee_weight_scale.setter
    def pose_ee_weight_scale(self, v) -> None:
        self._pose_ee.scale = check_scale(v)

    def configured_ee_weights(self) -> tuple:
        """(q_cost, N_cost) as configured: the solver's, without a pose window's scale."""
        return self._pose_ee.configured(self.solver)

    def restore_ee_weights(self) -> None:
        """The configured EE position weights back on the solver (call before changing them)."""
        self._pose_ee.restore(self.solver)

    def _set_rot(self, want: tuple) -> None:
        """The solver's orientation weights for the next solve (set only on a change: a settings push);
        the weights a window replaced are kept, for the next flat reference."""
        p = getattr(self.solver, "params", None)
        if p is not None and (float(p.rot_cost), float(p.N_rot_cost)) != want:
            if self._rot_saved is None:
                self._rot_saved = (float(p.rot_cost), float(p.N_rot_cost))
            self.solver.set_cost_weights(rot_cost=want[0], N_rot_cost=want[1])

    def _window(self, win: ReferenceWindow) -> np.ndarray:
        """(6N,) solver reference of a window (its knots as they are on the solver's grid, else
        resampled at its stamp) and the orientation weights it asks for."""
        s = self.solver
        N, dt = int(s.N), float(s.dt)
        if win.orientations is None:
            self._set_rot((0.0, 0.0))
        elif win.orientation_weight is not None:
            self._set_rot((win.orientation_weight, win.orientation_weight))
        else:
            self._set_rot(self.orientation_weights)
        self._pose_ee.apply(s, win.orientations is not None)
        if win.n_knots == N and win.knot_dt == dt:
            return win.solver_layout()
        return win.solver_reference(win.stamp_ns, N, dt)

    def _reference(self, ref) -> np.ndarray:
        if isinstance(ref, ReferenceWindow):
            return self._window(ref)
        if self._rot_saved is not None:  # a window set the weights: the flat reference gets the solver's own back
            saved, self._rot_saved = self._rot_saved, None
            self.solver.set_cost_weights(rot_cost=saved[0], N_rot_cost=saved[1])
        self._pose_ee.restore(self.solver)
        arr = to_numpy(ref, "reference", np.float64)
        N = int(self.solver.N)
        if arr.shape == (N, 6):
            arr = arr.reshape(-1)
        if arr.shape != (6 * N,):
            raise ValueError(f"reference: expected shape ({6 * N},) or ({N}, 6) — one [x, y, z, 0, 0, 0] "
                             f"EE goal per knot for N = {N} — got {tuple(arr.shape)}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("reference: contains NaN or Inf")
        return arr

    def _hold(self, x: np.ndarray) -> np.ndarray:
        B = int(self.solver.batch_size)
        return np.asarray(self.solver.hold_trajectory(np.repeat(x[None, :], B, axis=0)), dtype=np.float64)

    # ------------------------------------------------------------------ lifecycle
    def reset(self, x0, *, xu_warm=None) -> None:
        """Reset solver state and seed the trajectory.

        Clears the solver's duals, adapted rho and external wrench
        (``solver.reset()``), the hypothesis batch (``reset()``), the previous
        control and the linsys history. The warm start becomes a hold at ``x0``
        (nx,) — every knot x0, zero controls — or, with ``xu_warm`` of shape
        (xu_size,) (broadcast) or (B, xu_size), that guess with its knot-0 state
        replaced by x0. Inputs are copied (numpy, CPU torch or JAX).
        """
        x = self._state(x0, "x0").x
        s = self.solver
        nx = int(s.nx)
        if xu_warm is None:
            warm = self._hold(x)
        else:
            warm = self._warm_arg(xu_warm)
            warm[:, :nx] = x
        s.reset()
        if self.hypotheses is not None and callable(getattr(self.hypotheses, "reset", None)):
            self.hypotheses.reset()
        self._warm = warm
        self._x_prev = self._u_prev = None
        self._capout = False
        self._force_reseed = False

    def warmup(self, x_measured, reference) -> SolveResult:
        """Warm-up solve: seed the warm start with each batch entry's own solution.

        Unlike :meth:`step` this neither selects a winner nor time-shifts: every
        row keeps its own solved trajectory (each hypothesis' solution warm-starts
        itself on the next step). Under ``linsys="auto"`` the warm-up counts as a
        cold solve ("bdsv_first"). A diverged row is re-seeded to a hold at
        ``x_measured``. ``x_measured`` (nx,), ``reference`` (6N,) or (N, 6), or a
        ReferenceWindow (see the class docstring).
        Returns the SolveResult.
        """
        state = self._state(x_measured, "x_measured")
        x = state.x
        ref = self._reference(reference)
        if self._warm is None:
            self.reset(state)
        s = self.solver
        if self.reset_rho_each_step:
            s.reset_rho()
        if self.hypotheses is not None:
            self.hypotheses.apply(s, x)
        if self.linsys == "auto":
            s.set_linsys("bdsv_first")
        self._set_admm(cold=True)
        result = s.solve(state, ref, self._warm)
        xu = to_numpy(result.xu, "xu", np.float64)
        div = np.asarray(result.diverged, dtype=bool)
        warm = xu.copy()
        if np.any(div):
            warm[div] = self._hold(x)[div]
            s.reset_dual()
        self._warm = warm
        self._capout = self._capped_out(result)
        return result

    # ------------------------------------------------------------------ step helpers
    def _capped_out(self, result) -> bool:
        pcg = np.asarray(result.stats.pcg_iters)
        cap = int(self.solver.params.max_pcg_iters) if hasattr(self.solver, "params") else None
        return bool(cap is not None and pcg.size and np.any(pcg >= cap))

    def _set_admm(self, cold: bool, pred_err: float = 0.0) -> str:
        s = self.solver
        if not bool(getattr(s, "admm_active", False)):
            return ""
        mode = self.admm_linsys
        if mode == "auto":
            mode = "bdsv_factor" if (cold or pred_err > self.admm_threshold) else "pcg"
        s.set_admm_linsys(mode)
        return mode

    def _gravity(self, x: np.ndarray) -> np.ndarray:
        """Gravity compensation rnea(q, 0, 0) at x, clamped to the URDF effort limits (n_actuated,)
        (the shared :class:`gato.safety.GravityHold`, built on first use)."""
        if self._gravity_hold is None:
            from .safety import GravityHold

            s = self.solver
            self._gravity_hold = GravityHold(s.model, s.limits["u"], int(getattr(s, "n_actuated", s.nu)))
        return self._gravity_hold(x)

    # ------------------------------------------------------------------ step
    def step(self, x_measured, reference, dt_elapsed=None, *, budget_s=None) -> StepResult:
        """One MPC tick: solve from the measured state, return the control.

        Args:
            x_measured: (nx,) measured state [q; qd], or a :class:`gato.core.state.MeasuredState`
                (checked where it was built: taken as it is, here and by the solve).
            reference: (6N,) EE-goal window, [x, y, z, rx, ry, rz] per knot [m, rad] (or (N, 6)),
                or a :class:`gato.references.ReferenceWindow` (orientations optional; see the
                class docstring).
            dt_elapsed: how long the PREVIOUS control was actually applied [s], the
                realized integration time (used only for hypothesis scoring);
                default ``solver.dt``.
            budget_s: wall-clock budget of this step [s], measured from entry. SQP
                iterations run while the time spent plus the next iteration's
                predicted cost fits; at least one runs and the cut is at an
                iteration boundary. None: ``max_sqp_iters`` iterations.

        A first call without a prior :meth:`reset` resets at ``x_measured`` (hold seed).
        Per tick: pred_err against the warm start; optional re-seed; rho reset;
        ``hypotheses.apply``; the linsys choice; one batched solve; selection
        (``hypotheses.select`` / ``update`` once a previous control exists, else
        the batch's ``first_row()`` where it names one, else the lowest finite final
        merit); the next warm start (shift or hold of the
        winner into every entry).

        A diverged solve never yields a non-finite control: if no entry is finite,
        ``u`` is gravity compensation at the measured state clamped to the URDF
        effort limits (``diverged=True, fallback="gravity"``) and the next tick
        re-seeds a hold at its measured state with the duals reset.

        Returns a :class:`StepResult`; ``u`` (and ``xu_best``) in the array kind of
        ``x_measured``.
        """
        t_entry = time.perf_counter()
        s = self.solver
        kind = kind_of(x_measured)
        state = self._state(x_measured, "x_measured")
        x = state.x
        ref = self._reference(reference)
        if dt_elapsed is None:
            dt = float(s.dt)
        else:
            if isinstance(dt_elapsed, bool) or not isinstance(dt_elapsed, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(dt_elapsed) or dt_elapsed <= 0:
                raise ValueError(f"dt_elapsed: expected a finite duration > 0 s (how long the previous control "
                                 f"was applied) or None, got {dt_elapsed!r}")
            dt = float(dt_elapsed)
        if budget_s is not None and (isinstance(budget_s, bool)
                                     or not isinstance(budget_s, (int, float, np.floating, np.integer))
                                     or not math.isfinite(budget_s) or budget_s <= 0):
            raise ValueError(f"budget_s: expected a finite budget > 0 s or None, got {budget_s!r}")
        if self._warm is None:
            self.reset(state)
        B, nx, nu = int(s.batch_size), int(s.nx), int(s.nu)
        na = int(getattr(s, "n_actuated", nu))

        pred_err = float(np.linalg.norm(x - self._warm[0, :nx]))
        reseeded = False
        if self._force_reseed or (self.reseed_threshold is not None and pred_err > self.reseed_threshold):
            self._warm = self._hold(x)
            s.reset_dual()
            reseeded = True
            self._force_reseed = False
        if self.reset_rho_each_step:
            s.reset_rho()
        if self.hypotheses is not None:
            self.hypotheses.apply(s, x)
        cold = reseeded or self._capout
        if self.linsys == "auto":
            s.set_linsys("bdsv_first" if (cold or pred_err > self.bdsv_threshold) else "pcg")
        admm_used = self._set_admm(cold, pred_err)

        budget = None
        if budget_s is not None:
            budget = max(float(budget_s) - (time.perf_counter() - t_entry), 1e-9)
        result = s.solve(state, ref, self._warm, budget_s=budget)
        xu = to_numpy(result.xu, "xu", np.float64)
        div = np.asarray(result.diverged, dtype=bool)
        merit = np.asarray(result.stats.final_merit, dtype=np.float64)
        self._capout = self._capped_out(result)

        # ---- selection
        hyp = self.hypotheses
        if hyp is not None and self._x_prev is not None:
            best = int(hyp.select(s, result, self._x_prev, self._u_prev, x, dt))
            if not 0 <= best < B:
                raise ValueError(f"hypotheses: select() returned {best}, expected an index in [0, {B})")
            hyp.update(best, getattr(hyp, "last_errors", None))
        else:
            first = getattr(hyp, "first_row", None)
            best = first() if callable(first) else None
            if best is None:
                best = int(np.argmin(np.where(div, np.inf, merit))) if B > 1 else 0
            elif isinstance(best, bool) or not isinstance(best, (int, np.integer)) or not 0 <= best < B:
                raise ValueError(f"hypotheses: first_row() returned {best!r}, expected None or an index in [0, {B})")
            best = int(best)
        fallback = ""
        all_div = bool(np.all(div))
        if div[best] and not all_div:
            best = int(np.argmin(np.where(div, np.inf, merit)))
            fallback = "best_finite"

        if all_div:
            u_act = self._gravity(x)
            u_full = np.zeros(nu)
            u_full[:na] = u_act
            row = self._hold(x)[0]
            for k in range(int(s.N) - 1):
                row[k * (nx + nu) + nx:(k + 1) * (nx + nu)] = u_full
            self._warm = self._hold(x)
            self._force_reseed = True
            fallback = "gravity"
            iterations = int(np.asarray(result.stats.sqp_iters)[best])
        else:
            row = xu[best].copy()
            u_full = row[nx:nx + nu].copy()
            u_act = u_full[:na].copy()
            nxt = row.copy() if self.warm_start == "hold" else shift_plan(row, nx, nu, int(s.N))
            self._warm = np.repeat(nxt[None, :], B, axis=0)
            if np.any(div):
                s.reset_dual()  # the diverged entries' duals are not to be warm-started from
            iterations = int(np.asarray(result.stats.sqp_iters)[best])
        self._x_prev = x
        self._u_prev = u_full

        rv = getattr(result.stats, "row_max_violation", None)
        row_viol = None if rv is None else np.array(np.asarray(rv)[best])
        fc = u_full[na:].copy() if nu > na else None
        mech = self.limits
        hypo_stats = hyp.get_stats() if hyp is not None and callable(getattr(hyp, "get_stats", None)) else None
        return StepResult(
            u=from_numpy(u_act, kind), best_id=best, xu_best=from_numpy(row, kind), solve=result,
            hypo_stats=hypo_stats, pred_err=pred_err, reseeded=reseeded, fc=fc, iterations=iterations,
            budget_hit=bool(result.stats.budget_hit), wall_s=time.perf_counter() - t_entry,
            admm_linsys=admm_used, limits=mech or "", row_viol=row_viol, diverged=all_div, fallback=fallback)
