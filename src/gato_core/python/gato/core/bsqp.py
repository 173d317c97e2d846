"""The batched SQP solver: :class:`BSQP` and the robot/module discovery helpers.

CPU backend: one C++ solver (``gato._core``) for any fixed-base URDF, any
horizon N and batch size B chosen at run time, float64 (default) or float32.
The method and every convention: ``docs/solver_method.md``.
"""
from __future__ import annotations

import inspect
import math
import os
import time
from pathlib import Path

import numpy as np

from .native import core as _core
from .arrays import batch_array, flag, from_numpy, kind_of, to_numpy, vector
from .cuda_backend import check_backend, solver_class
from .config import DEFAULT_INTEGRATOR, DEFAULT_LINSYS, INTEGRATOR_MODES, LINSYS_MODES, SolverParams
from .results import SolveResult, SolverStats
from .state import MeasuredState
from .collision_rows import CollisionRowAPI
from .cost_weights import CostWeightAPI
from .external_loads import ExternalLoadAPI
from .feedback_gains import FeedbackGainAPI
from .kkt_inspection import KKTInspectionAPI
from .rowgroups import (ADMM_LINSYS_MODES, MAX_ROW_GROUPS, MAX_ROWS_PER_GROUP,  # noqa: F401 (re-exported)
                        MECH_DEFAULT_WEIGHT, RowGroupAPI)
from ..robots.registry import all_robots, detect_plant, robot_info, robot_urdf

__all__ = ["BSQP", "SolveResult", "SolverStats", "available", "module_name", "robot_info", "robot_urdf"]

#: Horizons the CPU backend is tested at and that :func:`available` lists; any N >= 2 works.
CPU_HORIZONS = (8, 16, 32, 64, 128)
#: Integrator names -> the integer value of the core's enum (gato._core.Integrator; the
#: plan executor's ``submit`` and gato_msgs/Plan carry it as an integer).
INTEGRATORS = {n: int(getattr(_core.Integrator, n.upper())) for n in INTEGRATOR_MODES}
VARIANTS = ("default", "fc", "eh")
#: The variants the CPU backend runs: one core serves both ("eh" switches the stage Hessians to
#: the exact ones, docs/solver_method.md "Exact Hessian"); "fc" is a CUDA build.
CPU_VARIANTS = ("default", "eh")


def module_name(plant: str, N: int, variant: str | None = None) -> str:
    """Name of the solver module for (plant, N, variant): ``bsqpN{N}_{plant}[_{variant}]``.

    The CPU backend serves every (plant, N) from one module (``gato._core``);
    the name identifies a configuration in reports and discrepancy bundles.
    """
    suffix = "" if variant in (None, "default") else f"_{variant}"
    return f"bsqpN{int(N)}_{plant}{suffix}"


def available(variant: str = "default") -> dict:
    """Solver configurations this installation can run.

    ``variant="default"`` -> ``{(plant, N): module file}`` for every registered
    fixed-base robot and each N of :data:`CPU_HORIZONS` (the CPU backend runs
    any N >= 2; these are the tested ones). ``"eh"`` (exact Hessian) -> the same table: the
    CPU core runs it (``BSQP(variant="eh")``). ``"fc"`` -> ``{}`` (a CUDA build).
    ``"all"`` -> ``{(plant, N, variant): file}`` over "default" and "eh".
    """
    if variant not in (*VARIANTS, "all"):
        raise ValueError(f"variant: expected one of {VARIANTS + ('all',)}, got {variant!r}")
    so = Path(_core.__file__).name
    plants = [n for n, m in all_robots().items() if not m.get("floating_base")]
    if variant == "fc":
        return {}
    if variant == "all":
        return {(p, N, v): so for v in CPU_VARIANTS for p in plants for N in CPU_HORIZONS}
    return {(p, N): so for p in plants for N in CPU_HORIZONS}


class BSQP(RowGroupAPI, CollisionRowAPI, CostWeightAPI, ExternalLoadAPI, FeedbackGainAPI, KKTInspectionAPI):
    """Batched SQP trajectory optimizer (CPU backend).

    Args:
        model_path: robot URDF (fixed base, revolute/prismatic joints).
        batch_size: number of parallel solves B (any B >= 1).
        N: horizon length in knots (any N >= 2).
        dt: knot spacing [s].
        params: :class:`gato.SolverParams` (defaults = the MPC set); keyword
            overrides of its fields may be passed directly (``BSQP(..., mu=5.0)``).
        plant_type: registered robot name; None detects it from the URDF bytes or file name.
        variant: None / "default" (Gauss-Newton stage Hessians) | "eh" (exact Hessian of the
            Lagrangian, the same as ``exact_hessian=True``; docs/solver_method.md "Exact
            Hessian") | "fc" raises ValueError (a CUDA build).
        rho_batch / mu_batch / pcg_tol_batch: optional per-solve (B,) overrides.
        ee_frame: end-effector frame (a URDF frame name); default from the registry, else "EE".
        dtype: np.float64 (default) or np.float32.
        integrator: "euler" (constant acceleration; default) | "semi_implicit" | "rk4".
        threads: worker threads over the batch (default: min(B, CPU count)).
        backend: "cpu" (default) | "cuda" (the GPU batch, gato._cuda; RuntimeError where it is not
            built or no CUDA device is usable) | "cuda_host" (the CUDA core run on the host, for
            tests); see :mod:`gato.cuda_backend` and docs/cuda.md.

    Layouts: ``xcur_B`` (B, nx) with x = [q; qd]; the reference (B, 6N), per knot
    [x, y, z, 0, 0, 0] metres (world frame; orientation slots reserved); the
    trajectory (B, N*(nx+nu) - nu) = [x_0, u_0, ..., x_{N-1}].

    ``solve`` is stateless in the trajectory (``xu_warm=None`` seeds a hold at
    the state) and stateful in rho, duals and the external wrench
    (``reset_rho`` / ``reset_dual`` / ``reset``).

    Cost precedence: SolverParams scalars < set_cost_weights (scalars) <
    set_cost_weights_per_knot (N, 3) [ee, qd, u]; a per-joint control vector
    (set_u_cost_vec) replaces the control weight at every knot; the posture
    anchor (set_q_pos_cost / set_q_nom) is an added term.
    """

    def __new__(cls, model_path=None, *args, plant_type=None, **kwargs):
        # A floating-base plant (go2; gato.build(..., floating_base=True, contact_forces=True)) gets
        # the contact-force SQP with the reference's fc surface (gato.core.floating_bsqp, issue 34).
        try:
            pt = plant_type or detect_plant(Path(os.fspath(model_path)))
        except (TypeError, OSError):
            pt = None
        if pt and all_robots().get(pt, {}).get("floating_base"):
            from .floating_bsqp import FloatingBSQP
            return FloatingBSQP(model_path, *args, plant_type=pt, **kwargs)
        return super().__new__(cls)

    def __init__(self, model_path, batch_size, N, dt, params=None, *, plant_type=None, variant=None,
                 rho_batch=None, mu_batch=None, pcg_tol_batch=None, ee_frame=None, dtype=np.float64,
                 integrator=DEFAULT_INTEGRATOR, threads=None, backend="cpu", **overrides):
        check_backend(backend)
        if params is None:
            params = SolverParams()
        if not isinstance(params, SolverParams):
            raise ValueError(f"params: expected a gato.SolverParams, got {type(params).__name__}")
        params = params.replace(**overrides) if overrides else params
        if variant not in (None, *CPU_VARIANTS):
            if variant == "fc":
                raise ValueError("variant: 'fc' modules are CUDA builds (contact-force controls); the CPU "
                                 "backend runs 'default' and 'eh'")
            raise ValueError(f"variant: expected None, 'default' or 'eh', got {variant!r}")
        if variant == "eh":
            params = params.replace(exact_hessian=True)
        path = Path(os.fspath(model_path))
        if not path.is_file():
            raise ValueError(f"model_path: URDF file not found: {path}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 2:
            raise ValueError(f"N: expected an integer >= 2 (knots), got {N!r}")
        if not isinstance(dt, (int, float, np.floating)) or not math.isfinite(dt) or dt <= 0:
            raise ValueError(f"dt: expected a finite knot spacing > 0 s, got {dt!r}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator: expected one of {tuple(INTEGRATORS)}, got {integrator!r}")
        dtype = np.dtype(dtype)
        if dtype not in (np.float64, np.float32):
            raise ValueError(f"dtype: expected float64 or float32, got {dtype}")
        reg = all_robots()
        if plant_type is None:
            plant_type = detect_plant(path) or path.stem
        elif plant_type not in reg:
            raise ValueError(f"plant_type: unknown robot {plant_type!r}; registered: {sorted(reg)} "
                             "(gato.register_robot adds one)")
        meta = reg.get(plant_type, {})
        if meta.get("floating_base"):
            raise ValueError(f"plant_type: {plant_type!r} is a floating-base robot; the CPU backend "
                             "supports fixed-base arms")
        if ee_frame is None:
            ee_frame = meta.get("ee_frame", "EE")
        self.backend = backend
        self.model_path = str(path.resolve())
        self.plant_type = plant_type
        self.variant = "eh" if params.exact_hessian else "default"
        self.ee_frame = ee_frame
        self.batch_size = int(batch_size)
        self.N = int(N)
        self.dt = float(dt)
        self.dtype = dtype
        self.integrator = integrator
        self.params = params
        if threads is None:
            threads = min(self.batch_size, os.cpu_count() or 1)
        elif isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
            raise ValueError(f"threads: expected an integer >= 1 or None, got {threads!r}")
        # Wired CPU default (the C++ struct's, gato/types.hpp): one exact block-tridiagonal
        # solve is cheaper here than the PCG iterations of a warm step.
        self._linsys = params.linsys or DEFAULT_LINSYS
        cls = solver_class(backend, dtype)  # RuntimeError for "cuda" without a usable GPU
        try:
            self._s = cls(self.model_path, ee_frame, self.batch_size, self.N, self.dt,
                          self._settings(params, self._linsys), int(threads))
        except ValueError as e:
            msg = str(e)
            if msg.startswith("ee_frame") and plant_type not in reg:
                msg += " (pass ee_frame=... for an unregistered robot)"
            raise ValueError(msg) from None
        if params.exact_hessian:
            self._s.set_exact_hessian(True)
        self.nq, self.nv, self.nx, self.nu = self._s.nq, self._s.nv, self._s.nx, self._s.nu
        self.n_actuated = self.nu
        self.xu_size = self._s.xu_size
        self._collect_stats = True
        self._warm = None  # resident warm start (B, xu_size)
        self._solved = None  # (x_s, ref, xu) of the last solve (feedback_gains)
        self.ee_payload = None  # (mass, com, inertia) of set_ee_payload, None: the URDF's EE body
        self._model = None
        self._data = None
        self._knot_weights = None
        self._u_cost_vec = None
        self._q_pos_cost = np.zeros(self.nq)
        self._q_nom = np.zeros(self.nq)
        # Constraint row groups (docs/constraints.md): host-side descriptors, pushed whole.
        self._groups = []
        self._row_mech = None
        # The ADMM inner-loop settings, from the C++ struct's defaults (gato::AdmmConfig).
        self._admm = {k: (v.name.lower() if k == "linsys" else v) for k, v in _core.AdmmConfig().to_dict().items()}
        for name, arr, setter in (("rho_batch", rho_batch, self._s.set_rho_batch),
                                  ("mu_batch", mu_batch, self._s.set_mu_batch),
                                  ("pcg_tol_batch", pcg_tol_batch, self._s.set_pcg_tol_batch)):
            if arr is not None:
                v = vector(arr, name, self.batch_size)
                if np.any(v < 0) or (name == "rho_batch" and np.any(v <= 0)):
                    raise ValueError(f"{name}: entries must be > 0")
                setter(v)

    # ------------------------------------------------------------------ settings
    def _settings(self, p: SolverParams, linsys: str):
        """The typed core settings (gato._core.Settings) of ``p`` with this solver's linsys and integrator."""
        return p.replace(linsys=linsys).to_settings(integrator=self.integrator)

    def _push_settings(self) -> None:
        self._s.set_settings(self._settings(self.params, self._linsys))

    @property
    def linsys(self) -> str:
        """The S·λ = γ path of subsequent solves: "pcg" | "bdsv" | "bdsv_first"."""
        return self._linsys

    def set_linsys(self, mode: str) -> None:
        """Pick the S·λ = γ path for subsequent solves: "pcg" | "bdsv" | "bdsv_first" (zero cost).
        Recorded in ``self.params.linsys`` (the contract: setters of configuration fields update
        ``solver.params``)."""
        if mode not in LINSYS_MODES:
            raise ValueError(f"linsys: expected one of {LINSYS_MODES}, got {mode!r}")
        self._linsys = mode
        self.params = self.params.replace(linsys=mode)
        self._s.set_linsys(mode)

    def set_collect_stats(self, on: bool) -> None:
        """Collect per-iteration statistics (on by default). Off: ``SolveResult.stats`` carries
        only the per-solve fields (times, iterations, merits); per-iteration arrays are empty."""
        self._collect_stats = flag(on, "on")
        self._s.set_collect_stats(self._collect_stats)  # also skips the per-stage timers

    def set_drho_batch(self, drho_batch, set_as_reset_default: bool = True) -> None:
        """Per-solve trust-region adaptation factor (B,), > 1 (default 1.2): rho is divided by it
        on an accepted step and multiplied on a rejected one. ``reset_rho`` restores the default."""
        v = vector(drho_batch, "drho_batch", self.batch_size, allow_scalar=True)
        if np.any(v <= 1.0):
            raise ValueError("drho_batch: factors must be > 1")
        self._s.set_drho_batch(v, flag(set_as_reset_default, "set_as_reset_default"))

    def exact_hessian_available(self) -> bool:
        """True: the CPU core runs the exact-Hessian stage blocks (:meth:`set_exact_hessian`)."""
        return True

    def set_exact_hessian(self, on: bool) -> None:
        """Exact-Hessian SQP for subsequent solves (True) or Gauss-Newton (False, the default).

        On: the stage Hessians gain the Lagrangian's second-order terms (the dynamics'
        sum_k lam_{k+1}' d2f/dz2 with the multipliers of the last step, and the EE residual's
        curvature); the step is a Riccati recursion on that KKT system (the exact Newton step where
        the reduced Hessian is positive definite, the Gauss-Newton step where it is not; with ADMM
        rows the stage blocks blended toward Gauss-Newton); docs/solver_method.md "Exact Hessian".
        Recorded in ``self.params.exact_hessian``
        and ``self.variant``. ValueError naming ``on`` for anything but True / False."""
        on = flag(on, "on")
        self._s.set_exact_hessian(on)
        self.params = self.params.replace(exact_hessian=on)
        self.variant = "eh" if on else "default"

    # -------------------------------------------------------------- cost setters
    def set_cost_weights(self, q_cost=None, qd_cost=None, u_cost=None, N_cost=None, q_lim_cost=None,
                         vel_lim_cost=None, ctrl_lim_cost=None, u_ref=None, rot_cost=None, N_rot_cost=None) -> None:
        """Update scalar cost weights (the EE orientation weights ``rot_cost`` / ``N_rot_cost``
        included) and the control reference ``u_ref`` ("zero" | "gravity") (None keeps the current
        value); recorded in ``self.params``."""
        changes = {k: v for k, v in dict(q_cost=q_cost, qd_cost=qd_cost, u_cost=u_cost, N_cost=N_cost,
                                          q_lim_cost=q_lim_cost, vel_lim_cost=vel_lim_cost,
                                          ctrl_lim_cost=ctrl_lim_cost, rot_cost=rot_cost,
                                          N_rot_cost=N_rot_cost).items() if v is not None}
        for k, v in changes.items():
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise ValueError(f"{k}: expected a finite number >= 0, got {v!r}")
            changes[k] = float(v)
        if u_ref is not None:
            changes["u_ref"] = u_ref
        self.params = self.params.replace(**changes)  # validates (finite, >= 0)
        self._push_settings()

    def set_params(self, params: SolverParams) -> None:
        """Replace the whole configuration between solves (structural fields are the constructor's)."""
        if not isinstance(params, SolverParams):
            raise ValueError(f"params: expected a gato.SolverParams, got {type(params).__name__}")
        self.params = params
        self._s.set_exact_hessian(params.exact_hessian)
        self.variant = "eh" if params.exact_hessian else "default"
        if params.linsys is not None:
            self._linsys = params.linsys
        self._push_settings()

    # -------------------------------------------------------------------- state
    def reset(self) -> None:
        """Clear state carried across solves: duals (Schur λ, AL multipliers, ADMM (z, y) and
        its adapted rho scale), the adapted trust-region rho and the external wrench."""
        self._s.reset_dual()
        self._s.reset_rho()
        self._s.set_fext(np.zeros(0, dtype=self.dtype))

    def reset_rho(self) -> None:
        """Restore the trust-region rho (and its adaptation factor) to the configured defaults."""
        self._s.reset_rho()

    def reset_dual(self) -> None:
        """Zero the warm-started Schur duals λ and the row-group duals: AL multipliers, ADMM
        (z, y) (re-initialized at the next solve) and the ADMM rho scale."""
        self._s.reset_dual()

    def rho(self) -> np.ndarray:
        """(B,) current trust-region rho of every entry."""
        return np.array([self._s.rho(b) for b in range(self.batch_size)])

    def get_lambda(self) -> np.ndarray:
        """(B, N+2, nx) multipliers λ of the last solve: rows 0..N-1 hold λ_k (row 0 the
        initial-state constraint), rows N and N+1 are zero padding (the reference layout)."""
        lam = np.zeros((self.batch_size, self.N + 2, self.nx))
        lam[:, :self.N] = self._s.get_lambda()
        return lam

    def get_solver_state(self) -> np.ndarray:
        """(B, K) float64: everything a solve carries into the next one, so that a later
        :meth:`set_solver_state` makes the next solve continue exactly (exact replay from
        any tick, ``gato replay``). Per entry: the Schur duals λ (N*nx, knot-major), the
        trust-region rho [1/rad^2] and its adaptation factor, the ADMM rho scale, then per
        installed row group (in :meth:`get_row_groups` order) its two re-initialization
        flags (0/1) and lam_hi, lam_lo (AL duals), z, y (ADMM), N*n_rows each, knot-major.
        K depends on the installed row groups."""
        return np.asarray(self._s.get_state(), dtype=np.float64)

    def set_solver_state(self, state) -> None:
        """Install a :meth:`get_solver_state` of a solver with the same robot, N, batch
        size and row groups. Raises ValueError on a wrong shape (the row groups differ),
        a non-finite value, rho <= 0 or a flag other than 0/1; the state is then unchanged."""
        arr = np.asarray(state, dtype=np.float64)
        if arr.ndim == 1:
            arr = arr[None, :]
        self._s.set_state(np.ascontiguousarray(arr))

    # -------------------------------------------------------------------- solve
    def _inputs(self, xcur_B, eepos_goals_B, xu_warm):
        B = self.batch_size
        if type(xcur_B) is MeasuredState and xcur_B.nx == self.nx:   # checked where it was built
            x = np.repeat(xcur_B.x[None, :].astype(self.dtype, copy=False), B, axis=0)
        else:
            x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        self._check_orientation(ref, "eepos_goals_B")
        if xu_warm is None:
            xu = self.hold_trajectory(x)
        else:
            xu = batch_array(xu_warm, "xu_warm", B, self.xu_size, self.dtype)
        return x, ref, xu

    def hold_trajectory(self, x: np.ndarray) -> np.ndarray:
        """(B, xu_size) hold at x (B, nx): every knot's state = x, zero controls."""
        x = np.asarray(x, dtype=self.dtype).reshape(-1, self.nx)
        xu = np.zeros((x.shape[0], self.xu_size), dtype=self.dtype)
        for k in range(self.N):
            xu[:, k * (self.nx + self.nu):k * (self.nx + self.nu) + self.nx] = x
        return xu

    def solve(self, xcur_B, eepos_goals_B, xu_warm=None, *, budget_s=None) -> SolveResult:
        """Solve the batch from states ``xcur_B`` (B, nx) (or (nx,), or a
        :class:`gato.core.state.MeasuredState`, taken as it is: checked where it was built) toward
        the EE reference ``eepos_goals_B`` (B, 6N).

        ``xu_warm`` (B, xu_size): the warm start (its knot-0 states are replaced by
        ``xcur_B``); None seeds a hold at ``xcur_B`` (a cold start). The caller's
        arrays are never modified and ``SolveResult.xu`` is fresh, of the kind of
        ``xcur_B`` (numpy, torch or JAX).

        ``budget_s``: wall-clock budget for the SQP loop [s]. The next iteration
        runs only while the time spent plus its predicted cost (its measured cost
        in the previous budgeted solve, else the slowest iteration of this solve)
        fits; the first iteration always runs. ``stats.budget_hit`` and
        ``stats.sqp_iters`` report it. None: ``max_sqp_iters`` iterations.
        """
        t0 = time.perf_counter()  # the budget is measured from entry (the input copies count)
        kind = kind_of(xcur_B)
        budget = self._budget(budget_s)
        x, ref, xu = self._inputs(xcur_B, eepos_goals_B, xu_warm)
        self._s.solve(x, ref, xu, self._remaining(budget, t0))
        self._solved = (x, ref, xu.copy())
        return self._result(xu, kind)

    def _budget(self, budget_s) -> float:
        if budget_s is None:
            return 0.0
        if not isinstance(budget_s, (int, float, np.floating)) or not math.isfinite(budget_s) or budget_s <= 0:
            raise ValueError(f"budget_s: expected a finite budget > 0 s or None, got {budget_s!r}")
        return float(budget_s)

    @staticmethod
    def _remaining(budget: float, t0: float) -> float:
        """What is left of ``budget`` [s] (0 = none set) after the Python-side work since ``t0``:
        the core's clock starts at its own entry, the contract's at the call's. At least 1 ns, so
        a budget already spent still runs the one iteration that always runs."""
        if budget <= 0.0:
            return 0.0
        return max(budget - (time.perf_counter() - t0), 1e-9)

    def _result(self, xu: np.ndarray, kind: str) -> SolveResult:
        st = self._s.stats()  # gato._core.SolveStats
        full = self._collect_stats
        empty_i = np.zeros((self.batch_size, 0))
        stats = SolverStats(
            solve_time_us=int(st.solve_time_us),
            sqp_iters=st.sqp_iters,
            kkt_converged=st.kkt_converged,
            final_merit=st.final_merit,
            initial_merit=st.initial_merit,
            ls_num_iters=8,
            pcg_iters=st.pcg_iters if full else empty_i.astype(np.int32),
            pcg_times_us=st.pcg_times_us if full else np.zeros(0),
            min_merit=st.min_merit if full else empty_i,
            step_size=st.step_size if full else empty_i,
            linsys=st.linsys_used[-1].name.lower() if st.linsys_used else self._linsys,
            budget_hit=bool(st.budget_hit),
            exact_step=np.asarray(st.exact_step, dtype=bool) if full and self.params.exact_hessian else None,
        )
        if st.n_groups > 0:
            stats.row_max_violation = np.asarray(st.row_max_violation, dtype=np.float64)
            stats.row_sum_violation = np.asarray(st.row_sum_violation, dtype=np.float64)
            stats.admm_r_prim = np.asarray(st.admm_r_prim, dtype=np.float64)
            stats.admm_r_dual = np.asarray(st.admm_r_dual, dtype=np.float64)
            stats.admm_iters = np.asarray(st.admm_iters, dtype=np.int64)
            stats.admm_linsys_iters = np.asarray(st.admm_linsys_iters, dtype=np.int64)
        self.last_profile = st.profile
        return SolveResult(xu=from_numpy(xu.astype(np.float64, copy=False), kind), solve_time_us=int(st.solve_time_us),
                           stats=stats, nx=self.nx, nu=self.nu, N=self.N, n_actuated=self.n_actuated)

    def sim_forward(self, xk, uk, sim_dt):
        """One step of the solver's integrator for every entry with the knot-0 wrench:
        xk (B, nx), uk (B, nu), sim_dt [s] -> (B, nx), of the kind of xk."""
        B = self.batch_size
        kind = kind_of(xk)
        x = batch_array(xk, "xk", B, self.nx, self.dtype)
        u = batch_array(uk, "uk", B, self.nu, self.dtype)
        if not isinstance(sim_dt, (int, float, np.floating)) or not math.isfinite(sim_dt) or sim_dt <= 0:
            raise ValueError(f"sim_dt: expected a finite step > 0 s, got {sim_dt!r}")
        return from_numpy(np.asarray(self._s.sim_forward(x, u, float(sim_dt)), dtype=np.float64), kind)

    # ----------------------------------------------------- resident warm start
    def _resident(self) -> np.ndarray:
        if self._warm is None:
            raise ValueError("no resident warm start: call set_warm(xu) or hold_warm(x) first")
        return self._warm

    def set_warm(self, xu) -> None:
        """Seed the resident warm start: (xu_size,) broadcast to the batch or (B, xu_size)."""
        self._warm = batch_array(xu, "xu", self.batch_size, self.xu_size, self.dtype)

    def get_warm(self) -> np.ndarray:
        """The resident warm start as a fresh (B, xu_size) numpy array."""
        return self._resident().astype(np.float64, copy=True)

    def hold_warm(self, x) -> None:
        """Seed the resident warm start with hold-at-x: x (nx,) broadcast or (B, nx)."""
        self._warm = self.hold_trajectory(batch_array(x, "x", self.batch_size, self.nx, self.dtype))

    def pred_err_warm(self, x) -> float:
        """‖x − knot 0 of resident row 0‖ (the controller's warm-startedness signal)."""
        xv = vector(x, "x", self.nx)
        return float(np.linalg.norm(xv - self._resident()[0, :self.nx]))

    def solve_warm(self, x, ref, *, budget_s=None) -> SolveResult:
        """Solve from the resident warm start (its knot-0 states replaced by x); the solution
        stays resident and comes back as ``SolveResult.xu`` in the caller's kind."""
        t0 = time.perf_counter()
        kind = kind_of(x)
        budget = self._budget(budget_s)
        xs = batch_array(x, "x", self.batch_size, self.nx, self.dtype)
        r = batch_array(ref, "ref", self.batch_size, 6 * self.N, self.dtype)
        self._check_orientation(r, "ref")
        xu = self._resident().copy()
        self._s.solve(xs, r, xu, self._remaining(budget, t0))
        self._warm = xu.copy()
        self._solved = (xs, r, xu.copy())
        return self._result(xu, kind)

    def shift_warm(self, best_id: int = 0, hold: bool = False) -> None:
        """Next tick's warm start from resident row ``best_id`` into every row: advanced one knot
        with the last knot (and last control) repeated, or as solved with ``hold=True``."""
        if not 0 <= int(best_id) < self.batch_size:
            raise ValueError(f"best_id: expected 0 <= best_id < {self.batch_size}, got {best_id}")
        row = self._resident()[int(best_id)]
        row = row.copy() if flag(hold, "hold") else shift_plan(row, self.nx, self.nu, self.N)
        self._warm = np.repeat(row[None, :], self.batch_size, axis=0)

    # --------------------------------------------------------------- kinematics
    @property
    def model(self):
        """pinocchio Model of model_path (built on first use)."""
        if self._model is None:
            import pinocchio as pin

            self._model = pin.buildModelFromUrdf(self.model_path)
        return self._model

    @property
    def data(self):
        """pinocchio Data of :attr:`model` (built on first use)."""
        if self._data is None:
            self._data = self.model.createData()
        return self._data

    @property
    def ee_frame_id(self) -> int | None:
        """pinocchio frame id of the EE target frame."""
        return int(self._s.ee_frame_id)

    @property
    def joint_names(self) -> list[str]:
        return list(self._s.joint_names)

    @property
    def limits(self) -> dict:
        """URDF limits {q_lo, q_hi, qd, u} (rad, rad/s, N·m) of the solver's plant."""
        return {k: np.asarray(v) for k, v in self._s.limits.items()}

    def ee_pos(self, q, frame: str = "ee"):
        """World position [m] of a frame: q (nq,) -> (3,), or (T, nq) -> (T, 3).

        ``frame="ee"`` (or the alias "solver") is the solver's EE frame, origin
        included (the point the tracking cost uses); any other string is a URDF
        frame name.
        """
        if frame in ("ee", "solver"):
            fid = -1
        else:
            fid = int(self._s.frame_id(str(frame)))
            if fid < 0:
                raise ValueError(f"frame: unknown frame {frame!r} in {Path(self.model_path).name}")
        qa = to_numpy(q, "q", np.float64)
        if qa.ndim == 1:
            qs, single = qa[None, :], True
        elif qa.ndim == 2:
            qs, single = qa, False
        else:
            raise ValueError(f"q: expected shape ({self.nq},) or (T, {self.nq}), got {tuple(qa.shape)}")
        if qs.shape[1] != self.nq:
            raise ValueError(f"q: expected shape ({self.nq},) or (T, {self.nq}), got {tuple(qa.shape)}")
        if not np.all(np.isfinite(qs)):
            raise ValueError("q: contains NaN or Inf")
        out = np.array([self._s.frame_position(qi.astype(self.dtype), fid) for qi in qs], dtype=np.float64)
        return out[0] if single else out


def shift_plan(row: np.ndarray, nx: int, nu: int, N: int) -> np.ndarray:
    """A plan advanced one knot: x_k <- x_{k+1}, u_k <- u_{k+1}, last knot and last control repeated."""
    s = nx + nu
    out = np.empty_like(row)
    out[:(N - 1) * s - nu] = row[s:]  # x_1, u_1, ..., x_{N-1} -> x_0 .. x_{N-2}
    out[(N - 2) * s + nx:(N - 1) * s] = row[(N - 2) * s + nx:(N - 1) * s]  # u_{N-2} repeated
    out[(N - 1) * s:] = row[(N - 1) * s:]  # x_{N-1} repeated
    return out


# BSQP.__new__ (the floating-base dispatch) takes *args / **kwargs: the class's signature stays
# __init__'s (inspect.signature(gato.BSQP) prefers __new__ otherwise).
_INIT_SIG = inspect.signature(BSQP.__init__)
BSQP.__signature__ = _INIT_SIG.replace(parameters=list(_INIT_SIG.parameters.values())[1:])
