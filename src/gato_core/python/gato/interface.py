"""The batched SQP solver: :class:`BSQP` and the robot/module discovery helpers.

CPU backend: one C++ solver (``gato._core``) for any fixed-base URDF, any
horizon N and batch size B chosen at run time, float64 (default) or float32.
The method and every convention: ``docs/solver_method.md``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from . import _core
from . import rowkinds as rk
from ._arrays import batch_array, from_numpy, kind_of, to_numpy, vector
from .config import LINSYS_MODES, SolverParams
from .results import SolveResult, SolverStats
from .robots import all_robots, detect_plant, find_urdf

__all__ = ["BSQP", "SolveResult", "SolverStats", "available", "module_name", "robot_info", "robot_urdf"]

#: Horizons the CPU backend is tested at and that :func:`available` lists; any N >= 2 works.
CPU_HORIZONS = (8, 16, 32, 64, 128)
INTEGRATORS = {"euler": _core.INTEGRATOR_EULER, "semi_implicit": _core.INTEGRATOR_SEMI_IMPLICIT,
               "rk4": _core.INTEGRATOR_RK4}
_LINSYS_CODE = {"pcg": _core.LINSYS_PCG, "bdsv": _core.LINSYS_BDSV, "bdsv_first": _core.LINSYS_BDSV_FIRST}
_LINSYS_NAME = {v: k for k, v in _LINSYS_CODE.items()}
ADMM_LINSYS_MODES = ("pcg", "bdsv_factor")
_ADMM_LINSYS_CODE = {"pcg": 0, "bdsv_factor": 1}
#: Dense row-state layout of get_row_duals / get_admm_state: (B, MAX_ROW_GROUPS, N, MAX_ROWS_PER_GROUP).
MAX_ROW_GROUPS = int(_core.MAX_ROW_GROUPS)
MAX_ROWS_PER_GROUP = int(_core.MAX_ROWS_PER_GROUP)
#: Mechanism weights of an appended group whose rho is not given and whose mechanism is not the
#: limit groups' (barrier mu, ADMM rho, AL rho); docs/constraints.md.
MECH_DEFAULT_WEIGHT = {"barrier": 0.003, "admm": 0.01, "al": 1.0, "telemetry": 0.0}
VARIANTS = ("default", "fc", "eh")


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
    any N >= 2; these are the tested ones). ``"fc"`` / ``"eh"`` -> ``{}`` (not
    built for the CPU backend). ``"all"`` -> ``{(plant, N, variant): file}``.
    """
    if variant not in (*VARIANTS, "all"):
        raise ValueError(f"variant: expected one of {VARIANTS + ('all',)}, got {variant!r}")
    so = Path(_core.__file__).name
    plants = [n for n, m in all_robots().items() if not m.get("floating_base")]
    if variant in ("fc", "eh"):
        return {}
    if variant == "all":
        return {(p, N, "default"): so for p in plants for N in CPU_HORIZONS}
    return {(p, N): so for p in plants for N in CPU_HORIZONS}


def robot_info(plant_type: str) -> dict:
    """Registry metadata of a plant ({nq, nv, ee_frame, urdf, floating_base, ...}), or {} if unregistered."""
    meta = all_robots().get(plant_type)
    if not meta:
        return {}
    out = dict(meta)
    path = robot_urdf(plant_type)
    out["urdf"] = str(path) if path else meta.get("urdf")
    out.setdefault("contact_frames", [meta["ee_frame"]])
    out.setdefault("collision", False)
    out.setdefault("codegen_key", meta.get("urdf_sha256", "")[:16])
    return out


def robot_urdf(plant_type: str) -> Path:
    """Absolute path of a registered robot's URDF (the checkout's copy with meshes when present)."""
    meta = all_robots().get(plant_type)
    if not meta:
        raise ValueError(f"plant_type: unknown robot {plant_type!r}; registered: {sorted(all_robots())}")
    if meta.get("urdf_path"):
        return Path(meta["urdf_path"])
    path = find_urdf(meta["description"], meta["urdf"])
    if path is None:
        raise FileNotFoundError(f"URDF {meta['urdf']} of {plant_type!r} not found; set GATO_DESCRIPTION_DIR "
                                "to the gato_description/robots folder")
    return path.resolve()


class BSQP:
    """Batched SQP trajectory optimizer (CPU backend).

    Args:
        model_path: robot URDF (fixed base, revolute/prismatic joints).
        batch_size: number of parallel solves B (any B >= 1).
        N: horizon length in knots (any N >= 2).
        dt: knot spacing [s].
        params: :class:`gato.SolverParams` (defaults = the MPC set); keyword
            overrides of its fields may be passed directly (``BSQP(..., mu=5.0)``).
        plant_type: registered robot name; None detects it from the URDF bytes or file name.
        variant: "default" only on the CPU backend ("fc" / "eh" need the CUDA modules).
        rho_batch / mu_batch / pcg_tol_batch: optional per-solve (B,) overrides.
        ee_frame: end-effector frame (a URDF frame name); default from the registry, else "EE".
        dtype: np.float64 (default) or np.float32.
        integrator: "euler" (constant acceleration; default) | "semi_implicit" | "rk4".
        threads: worker threads over the batch (default: min(B, CPU count)).

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

    def __init__(self, model_path, batch_size, N, dt, params=None, *, plant_type=None, variant=None,
                 rho_batch=None, mu_batch=None, pcg_tol_batch=None, ee_frame=None, dtype=np.float64,
                 integrator="euler", threads=None, **overrides):
        if params is None:
            params = SolverParams()
        if not isinstance(params, SolverParams):
            raise ValueError(f"params: expected a gato.SolverParams, got {type(params).__name__}")
        params = params.replace(**overrides) if overrides else params
        if params.exact_hessian:
            raise ValueError("exact_hessian: the CPU backend has no exact-Hessian ('eh') variant; "
                             "it runs Gauss-Newton Hessians")
        if variant not in (None, "default"):
            raise ValueError(f"variant: {variant!r} modules are CUDA builds; the CPU backend runs 'default'")
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
        self.backend = "cpu"
        self.model_path = str(path.resolve())
        self.plant_type = plant_type
        self.variant = "default"
        self.ee_frame = ee_frame
        self.batch_size = int(batch_size)
        self.N = int(N)
        self.dt = float(dt)
        self.dtype = dtype
        self.integrator = integrator
        self.params = params
        if threads is None:
            threads = min(self.batch_size, os.cpu_count() or 1)
        # Wired CPU default: one exact block-tridiagonal solve is cheaper here than the
        # PCG iterations of a warm step (the reference's "pcg" default is GPU-shaped).
        self._linsys = params.linsys or "bdsv"
        cls = _core.Solver64 if dtype == np.float64 else _core.Solver32
        try:
            self._s = cls(self.model_path, ee_frame, self.batch_size, self.N, self.dt,
                          self._settings(params, self._linsys), int(threads))
        except ValueError as e:
            msg = str(e)
            if msg.startswith("ee_frame") and plant_type not in reg:
                msg += " (pass ee_frame=... for an unregistered robot)"
            raise ValueError(msg) from None
        self.nq, self.nv, self.nx, self.nu = self._s.nq, self._s.nv, self._s.nx, self._s.nu
        self.n_actuated = self.nu
        self.xu_size = self._s.xu_size
        self._collect_stats = True
        self._warm = None  # resident warm start (B, xu_size)
        self._model = None
        self._data = None
        self._knot_weights = None
        self._u_cost_vec = None
        self._q_pos_cost = np.zeros(self.nq)
        self._q_nom = np.zeros(self.nq)
        # Constraint row groups (docs/constraints.md): host-side descriptors, pushed whole.
        self._groups = []
        self._row_mech = None
        self._admm = dict(iters=10, eps_abs=0.0, eps_rel=0.0, check_every=1, linsys="bdsv_factor",
                          merit=False, rho_adapt=False)
        for name, arr, setter in (("rho_batch", rho_batch, self._s.set_rho_batch),
                                  ("mu_batch", mu_batch, self._s.set_mu_batch),
                                  ("pcg_tol_batch", pcg_tol_batch, self._s.set_pcg_tol_batch)):
            if arr is not None:
                v = vector(arr, name, self.batch_size)
                if np.any(v < 0) or (name == "rho_batch" and np.any(v <= 0)):
                    raise ValueError(f"{name}: entries must be > 0")
                setter(v)

    # ------------------------------------------------------------------ settings
    def _settings(self, p: SolverParams, linsys: str) -> dict:
        d = {k: v for k, v in p.asdict().items() if k not in ("linsys", "exact_hessian", "line_search")}
        d["linsys"] = _LINSYS_CODE[linsys]
        d["line_search"] = {"best": 0, "first": 1}[p.line_search]
        d["integrator"] = INTEGRATORS[self.integrator]
        return d

    def _push_settings(self) -> None:
        self._s.set_settings(self._settings(self.params, self._linsys))

    @property
    def linsys(self) -> str:
        """The S·λ = γ path of subsequent solves: "pcg" | "bdsv" | "bdsv_first"."""
        return self._linsys

    def set_linsys(self, mode: str) -> None:
        """Pick the S·λ = γ path for subsequent solves: "pcg" | "bdsv" | "bdsv_first" (zero cost)."""
        if mode not in LINSYS_MODES:
            raise ValueError(f"linsys: expected one of {LINSYS_MODES}, got {mode!r}")
        self._linsys = mode
        self._s.set_linsys(_LINSYS_CODE[mode])

    def set_collect_stats(self, on: bool) -> None:
        """Collect per-iteration statistics (on by default). Off: ``SolveResult.stats`` carries
        only the per-solve fields (times, iterations, merits); per-iteration arrays are empty."""
        self._collect_stats = bool(on)
        self._s.set_collect_stats(self._collect_stats)  # also skips the per-stage timers

    def set_drho_batch(self, drho_batch, set_as_reset_default: bool = True) -> None:
        """Per-solve trust-region adaptation factor (B,), > 1 (default 1.2): rho is divided by it
        on an accepted step and multiplied on a rejected one. ``reset_rho`` restores the default."""
        v = vector(drho_batch, "drho_batch", self.batch_size, allow_scalar=True)
        if np.any(v <= 1.0):
            raise ValueError("drho_batch: factors must be > 1")
        self._s.set_drho_batch(v, bool(set_as_reset_default))

    def exact_hessian_available(self) -> bool:
        """False: the CPU backend runs Gauss-Newton stage Hessians."""
        return False

    def set_exact_hessian(self, on: bool) -> None:
        """Only ``False`` is valid on the CPU backend (Gauss-Newton); True raises ValueError."""
        if on:
            raise ValueError("set_exact_hessian: the CPU backend has no exact-Hessian variant")

    # -------------------------------------------------------------- cost setters
    def set_cost_weights(self, q_cost=None, qd_cost=None, u_cost=None, N_cost=None, q_lim_cost=None,
                         vel_lim_cost=None, ctrl_lim_cost=None) -> None:
        """Update scalar cost weights (None keeps the current value); recorded in ``self.params``."""
        changes = {k: float(v) for k, v in dict(q_cost=q_cost, qd_cost=qd_cost, u_cost=u_cost, N_cost=N_cost,
                                                 q_lim_cost=q_lim_cost, vel_lim_cost=vel_lim_cost,
                                                 ctrl_lim_cost=ctrl_lim_cost).items() if v is not None}
        self.params = self.params.replace(**changes)  # validates (finite, >= 0)
        self._push_settings()

    def set_params(self, params: SolverParams) -> None:
        """Replace the whole configuration between solves (structural fields are the constructor's)."""
        if not isinstance(params, SolverParams):
            raise ValueError(f"params: expected a gato.SolverParams, got {type(params).__name__}")
        if params.exact_hessian:
            raise ValueError("exact_hessian: the CPU backend has no exact-Hessian variant")
        self.params = params
        if params.linsys is not None:
            self._linsys = params.linsys
        self._push_settings()

    def set_cost_weights_per_knot(self, knot_weights) -> None:
        """Per-knot [ee, qd, u] weights, shape (N, 3); overrides the scalar q/qd/u/N weights
        (the terminal EE weight is row N-1's ee entry). None clears the table."""
        if knot_weights is None:
            self._knot_weights = None
            self._s.set_knot_weights(np.zeros(0))
            return
        w = to_numpy(knot_weights, "knot_weights", np.float64)
        if w.shape != (self.N, 3):
            raise ValueError(f"knot_weights: expected shape ({self.N}, 3), got {tuple(w.shape)}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("knot_weights: entries must be finite and >= 0")
        self._knot_weights = w
        self._s.set_knot_weights(w.ravel())

    def set_q_pos_cost(self, weight) -> None:
        """Posture anchor: adds 0.5*w*||q - q_nom||^2 at every knot; w scalar or (nq,) (default 0 = off)."""
        w = vector(weight, "weight", self.nq, allow_scalar=True)
        if np.any(w < 0):
            raise ValueError("weight: anchor weights must be >= 0")
        self._q_pos_cost = w
        self._s.set_q_pos_cost(w)

    def set_q_nom(self, q_nom=None) -> None:
        """Posture target of the anchor, (nq,) rad (None resets to zeros)."""
        q = np.zeros(self.nq) if q_nom is None else vector(q_nom, "q_nom", self.nq)
        self._q_nom = q
        self._s.set_q_nom(q)

    def set_u_cost_vec(self, weights=None) -> None:
        """Per-joint control weights (n_actuated,), replacing the scalar/per-knot u weight at every
        knot; None resets to the scalar u_cost."""
        if weights is None:
            self._u_cost_vec = None
            self._s.set_u_cost_vec(np.zeros(0))
            return
        w = vector(weights, "weights", self.n_actuated)
        if np.any(w <= 0):
            raise ValueError("weights: control weights must be > 0 (R must stay positive definite)")
        self._u_cost_vec = w
        self._s.set_u_cost_vec(w)

    # ----------------------------------------------------------- external wrench
    @property
    def n_bodies(self) -> int:
        """Moving bodies: the f_ext band holds 6 numbers per body per knot."""
        return self._s.nbodies

    def set_f_ext_B(self, f_ext_B) -> None:
        """Upload the external-wrench band the dynamics see.

        Each 6-slot is one body's spatial force in its JOINT-LOCAL frame about
        the joint origin, ordered [angular(3) N·m; linear(3) N] (see
        :func:`gato.common.world_wrench_to_joint_local` for world wrenches).
        Accepted shapes (wrench k applies over the interval [k, k+1]):
        (B, 6) EE wrench broadcast over knots; (B, 6*n_bodies) body-major
        broadcast over knots; (B, N, 6) per-knot EE wrench; (B, N, 6*n_bodies).
        """
        f = to_numpy(f_ext_B, "f_ext_B", np.float64)
        B, N, nb = self.batch_size, self.N, self.n_bodies
        band = np.zeros((B, N, 6 * nb))
        ee = self._s.ee_body
        if f.shape == (B, 6):
            band[:, :, 6 * ee:6 * ee + 6] = f[:, None, :]
        elif f.shape == (B, 6 * nb):
            band[:] = f[:, None, :]
        elif f.shape == (B, N, 6):
            band[:, :, 6 * ee:6 * ee + 6] = f
        elif f.shape == (B, N, 6 * nb):
            band[:] = f
        else:
            raise ValueError(f"f_ext_B: expected shape ({B}, 6), ({B}, {6 * nb}), ({B}, {N}, 6) or "
                             f"({B}, {N}, {6 * nb}), got {tuple(f.shape)}")
        if not np.all(np.isfinite(band)):
            raise ValueError("f_ext_B: contains NaN or Inf")
        self._s.set_fext(band.astype(self.dtype))

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

    # -------------------------------------------------------------------- solve
    def _inputs(self, xcur_B, eepos_goals_B, xu_warm):
        B = self.batch_size
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
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
        """Solve the batch from states ``xcur_B`` (B, nx) toward the EE reference
        ``eepos_goals_B`` (B, 6N).

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
        kind = kind_of(xcur_B)
        budget = self._budget(budget_s)
        x, ref, xu = self._inputs(xcur_B, eepos_goals_B, xu_warm)
        self._s.solve(x, ref, xu, budget)
        return self._result(xu, kind)

    def _budget(self, budget_s) -> float:
        if budget_s is None:
            return 0.0
        if not isinstance(budget_s, (int, float, np.floating)) or not math.isfinite(budget_s) or budget_s <= 0:
            raise ValueError(f"budget_s: expected a finite budget > 0 s or None, got {budget_s!r}")
        return float(budget_s)

    def _result(self, xu: np.ndarray, kind: str) -> SolveResult:
        st = self._s.stats()
        full = self._collect_stats
        empty_i = np.zeros((self.batch_size, 0))
        stats = SolverStats(
            solve_time_us=int(st["solve_time_us"]),
            sqp_iters=st["sqp_iters"],
            kkt_converged=st["kkt_converged"],
            final_merit=st["final_merit"],
            initial_merit=st["initial_merit"],
            ls_num_iters=8,
            pcg_iters=st["pcg_iters"] if full else empty_i.astype(np.int32),
            pcg_times_us=st["pcg_times_us"] if full else np.zeros(0),
            min_merit=st["min_merit"] if full else empty_i,
            step_size=st["step_size"] if full else empty_i,
            linsys=_LINSYS_NAME[st["linsys_used"][-1]] if st["linsys_used"] else self._linsys,
            budget_hit=bool(st["budget_hit"]),
        )
        if st["n_groups"] > 0:
            stats.row_max_violation = np.asarray(st["row_max_violation"], dtype=np.float64)
            stats.row_sum_violation = np.asarray(st["row_sum_violation"], dtype=np.float64)
            stats.admm_r_prim = np.asarray(st["admm_r_prim"], dtype=np.float64)
            stats.admm_r_dual = np.asarray(st["admm_r_dual"], dtype=np.float64)
            stats.admm_iters = np.asarray(st["admm_iters"], dtype=np.int64)
            stats.admm_linsys_iters = np.asarray(st["admm_linsys_iters"], dtype=np.int64)
        self.last_profile = dict(st["profile"])
        return SolveResult(xu=from_numpy(xu.astype(np.float64, copy=False), kind), solve_time_us=int(st["solve_time_us"]),
                           stats=stats, nx=self.nx, nu=self.nu, N=self.N, n_actuated=self.n_actuated)

    def merit(self, xu_B, xcur_B, eepos_goals_B) -> np.ndarray:
        """(B,) merit φ = cost + μ·‖defects‖₁ of trajectories ``xu_B`` (no knot-0 replacement)."""
        B = self.batch_size
        xu = batch_array(xu_B, "xu_B", B, self.xu_size, self.dtype)
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        return np.asarray(self._s.merit(xu, x, ref), dtype=np.float64)

    def debug_setup_kkt(self, xu_B, xcur_B, eepos_goals_B) -> dict:
        """Assemble the KKT blocks at a trajectory (no solve, no knot-0 replacement):
        {Q (B,N,nx,nx), R (B,N-1,nu,nu), q (B,N,nx), r (B,N-1,nu), A (B,N-1,nx,nx),
        B (B,N-1,nx,nu), c (B,N,nx)}. Q excludes the trust-region rho."""
        B = self.batch_size
        xu = batch_array(xu_B, "xu_B", B, self.xu_size, self.dtype)
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        return {k: np.asarray(v, dtype=np.float64) for k, v in self._s.debug_setup_kkt(xu, x, ref).items()}

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

    # ------------------------------------------------------------ row groups
    # Constraint row groups: docs/constraints.md (mechanisms, equations, defaults, order rule).

    @property
    def row_mech(self):
        """The active ``enable_limit_*`` mechanism ("telemetry" | "barrier" | "admm" | "al"),
        or None when no limit mechanism is installed."""
        return self._row_mech

    @property
    def admm_active(self) -> bool:
        """True while any row group runs the ADMM mechanism (limits or appended)."""
        return any(g["mech"] == rk.ADMM for g in self._groups)

    @property
    def admm_linsys(self) -> str:
        """The ADMM inner-loop linear solver ("pcg" | "bdsv_factor")."""
        return self._admm["linsys"]

    @property
    def admm_eps_abs(self) -> float:
        """Absolute tolerance of the ADMM residual exit (0 with the exit off)."""
        return float(self._admm["eps_abs"])

    @property
    def admm_eps_rel(self) -> float:
        """Relative tolerance of the ADMM residual exit (0 with the exit off)."""
        return float(self._admm["eps_rel"])

    @property
    def admm_check_every(self) -> int:
        """Host-check period of the ADMM residual exit, in inner iterations (CUDA launch loop;
        the CPU backend checks every entry after every inner iteration regardless)."""
        return int(self._admm["check_every"])

    @property
    def admm_iters(self) -> int:
        """ADMM inner iterations per SQP iteration (the cap when the residual exit is on)."""
        return int(self._admm["iters"])

    def _push_admm(self) -> None:
        a = self._admm
        self._s.set_admm_config(int(a["iters"]), float(a["eps_abs"]), float(a["eps_rel"]),
                                int(a["check_every"]), _ADMM_LINSYS_CODE[a["linsys"]], bool(a["merit"]),
                                bool(a["rho_adapt"]))

    def _push_rows(self) -> None:
        specs = []
        for g in self._groups:
            spec = {k: g[k] for k in ("kind", "mech", "n_rows", "knot_lo", "knot_hi", "weight", "delta",
                                      "sigma", "cone", "admm_iters")}
            spec["lo"] = [float(v) for v in g["lo"]]
            spec["hi"] = [float(v) for v in g["hi"]]
            spec["mask"] = [] if g["mask"] is None else self._mask_rows(g).astype(np.uint8).ravel().tolist()
            spec["C"] = [] if g.get("C") is None else g["C"].ravel().tolist()
            spec["d"] = [] if g.get("d") is None else g["d"].ravel().tolist()
            spec["target"] = [] if g.get("target") is None else g["target"].ravel().tolist()
            for flag in ("reset_state", "admm_reinit", "admm_reclip"):
                spec[flag] = bool(g.pop("_" + flag, False))
            specs.append(spec)
        self._s.set_row_groups(specs)

    def _mask_rows(self, g) -> np.ndarray:
        """(N, n_rows) bool of a group's mask (a vector kind's (N,) mask repeated over its rows)."""
        m = np.asarray(g["mask"], dtype=bool)
        if m.ndim == 1:
            m = np.repeat(m[:, None], g["n_rows"], axis=1)
        return m

    @staticmethod
    def _positive(v, name: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: expected a finite number > 0, got {v!r}")
        return float(v)

    @staticmethod
    def _nonneg(v, name: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name}: expected a finite number >= 0, got {v!r}")
        return float(v)

    @staticmethod
    def _bounds(lo, hi, n: int, what: str):
        """(lo, hi) as (n,) float arrays: scalars broadcast, +-inf allowed (a one-sided row);
        wrong length, NaN or lo > hi raise ValueError."""
        out = []
        for name, v in (("lo", lo), ("hi", hi)):
            a = to_numpy(v, f"{what}: {name}", np.float64)
            if a.ndim == 0:
                a = np.full(n, float(a))
            if a.shape != (n,):
                raise ValueError(f"{what}: {name} needs {n} entries (one per row), got shape {tuple(a.shape)}")
            if np.any(np.isnan(a)):
                raise ValueError(f"{what}: {name} contains NaN (row {int(np.argwhere(np.isnan(a))[0][0])})")
            out.append(a)
        lo_a, hi_a = out
        bad = np.argwhere(lo_a > hi_a)
        if bad.size:
            i = int(bad[0][0])
            raise ValueError(f"{what}: lo > hi at row {i} ({lo_a[i]!r} > {hi_a[i]!r})")
        if np.any(np.isposinf(lo_a)) or np.any(np.isneginf(hi_a)):
            raise ValueError(f"{what}: lo = +inf or hi = -inf leaves no feasible value")
        return lo_a, hi_a

    def _limit_boxes(self) -> list:
        """The canonical boxes: URDF limits shrunk by the 0.1 margin ((lo, hi) per kind);
        a missing or non-finite limit is an unbounded side."""
        m = float(_core.LIMIT_MARGIN)
        L = self.limits

        def side(v, sign):
            v = np.asarray(v, dtype=np.float64)
            ok = np.isfinite(v) & (np.abs(v) < 1e10)
            return np.where(ok, v + sign * m, sign * -np.inf)

        def sym(v):
            v = np.asarray(v, dtype=np.float64)
            ok = np.isfinite(v) & (v > m) & (v < 1e10)
            hi = np.where(ok, v - m, np.inf)
            return -hi, hi

        return [side(L["q_lo"], +1), side(L["q_hi"], -1)], sym(L["qd"]), sym(L["u"])

    def _install_limits(self, mech: str, weights, delta: float = 0.05) -> None:
        (qlo, qhi), (vlo, vhi), (ulo, uhi) = self._limit_boxes()
        mid = rk.MECH_IDS[mech]
        N = self.N
        boxes = [(rk.Q_BOX, qlo, qhi, 1, N), (rk.QD_BOX, vlo, vhi, 1, N), (rk.U_BOX, ulo, uhi, 0, N - 1)]
        groups = []
        for (kind, lo, hi, k0, k1), w in zip(boxes, weights):
            groups.append(dict(kind=kind, mech=mid, n_rows=self.nv, knot_lo=k0, knot_hi=k1, lo=lo.copy(),
                               hi=hi.copy(), mask=None, weight=float(w), delta=float(delta), sigma=0.0,
                               cone=False, admm_iters=0, form="box", _reset_state=True))
        appended = [g for g in self._groups if g["kind"] not in rk.LIMIT_KINDS]
        self._groups = groups + appended
        self._row_mech = mech
        self._push_admm()
        self._push_rows()

    def enable_limit_telemetry(self) -> None:
        """Install the canonical limit row groups (URDF position / velocity / torque boxes shrunk
        by the 0.1 margin; position and velocity on knots 1..N-1, torque on controls 0..N-2) in
        TELEMETRY mode: solves report each group's true violation in
        ``stats.row_{max,sum}_violation`` and the trajectories stay bit-identical."""
        self._install_limits("telemetry", (0.0, 0.0, 0.0))

    def enable_limit_barrier(self, mu=0.003, delta=0.05) -> None:
        """Bind the limit row groups to the RELAXED log barrier: ``mu * sum b(d)`` per row side
        (distance d to the bound), ``b(d) = -log d`` for d >= delta and its C² quadratic
        extension below (finite everywhere, Hessian at most 1/delta²). A cost and merit term."""
        mu = self._positive(mu, "mu")
        delta = self._positive(delta, "delta")
        self._install_limits("barrier", (mu, mu, mu), delta)

    def enable_limit_admm(self, rho=0.01, iters=10, *, rho_q=None, rho_qd=None, rho_u=None, eps_abs=None,
                          eps_rel=None, check_every=1) -> None:
        """Bind the limit row groups to ADMM projection: an OSQP-style inner loop of ``iters``
        iterations per SQP iteration (proximal fold rho G'G in the Hessian, z-projection onto the
        box, dual update; the linear solver of :meth:`set_admm_linsys`). ``rho_q`` / ``rho_qd`` /
        ``rho_u`` override ``rho`` per box (position / velocity / torque rows). ``eps_abs`` /
        ``eps_rel`` (either given) turn on the residual early exit of :meth:`set_admm_exit`
        with ``iters`` as the cap; neither given = the fixed budget."""
        rho = self._positive(rho, "rho")
        w = [rho if v is None else self._positive(v, n) for v, n in ((rho_q, "rho_q"), (rho_qd, "rho_qd"),
                                                                    (rho_u, "rho_u"))]
        if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
            raise ValueError(f"iters: expected an integer >= 1, got {iters!r}")
        on = eps_abs is not None or eps_rel is not None
        ea = 0.0 if eps_abs is None else self._nonneg(eps_abs, "eps_abs")
        er = 0.0 if eps_rel is None else self._nonneg(eps_rel, "eps_rel")
        if on and ea == 0 and er == 0:
            raise ValueError("eps_abs / eps_rel: a residual exit needs a tolerance > 0 (omit both for the "
                             "fixed budget)")
        self._admm.update(iters=int(iters), eps_abs=ea, eps_rel=er, check_every=self._check_every(check_every))
        self._install_limits("admm", w)

    def enable_limit_al(self, rho=1.0, *, rho_q=None, rho_qd=None, rho_u=None) -> None:
        """Bind the limit row groups to the PHR augmented Lagrangian: cost +=
        (1/(2 rho)) (max(0, lam + rho viol)² - lam²) per row side; the multiplier update
        lam <- max(0, lam + rho viol) runs once per solve on the returned plan, so warm-started
        repeat solves are the outer loop. Duals persist across solves; reset_dual() zeroes them."""
        rho = self._positive(rho, "rho")
        w = [rho if v is None else self._positive(v, n) for v, n in ((rho_q, "rho_q"), (rho_qd, "rho_qd"),
                                                                    (rho_u, "rho_u"))]
        self._install_limits("al", w)

    @staticmethod
    def _check_every(v) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"check_every: expected an integer >= 0, got {v!r}")
        return int(v)

    def set_admm_exit(self, eps_abs=0.0, eps_rel=0.0, check_every=1) -> None:
        """Residual early exit of the ADMM inner loop: after each inner iteration an entry stops
        once every ADMM group g has r_prim_g <= eps_abs + eps_rel*max|z_g| and
        r_dual_g <= eps_abs + eps_rel*rho_g*max|z_g| AND that iteration's linear solve converged
        (PCG below its cap, or the direct factor). eps_abs = eps_rel = 0: the fixed budget, bit
        for bit. ``check_every`` is kept for the CUDA launch loop (no effect on the CPU)."""
        ea = self._nonneg(eps_abs, "eps_abs")
        er = self._nonneg(eps_rel, "eps_rel")
        self._admm.update(eps_abs=ea, eps_rel=er, check_every=self._check_every(check_every))
        self._push_admm()

    def set_admm_linsys(self, mode: str) -> None:
        """ADMM inner-loop linear solver: "bdsv_factor" (CPU default: block Cholesky once per
        SQP iteration, one back-substitution per inner iteration) | "pcg" (warm PCG per inner
        iteration)."""
        if mode not in ADMM_LINSYS_MODES:
            raise ValueError(f"admm_linsys: expected one of {ADMM_LINSYS_MODES}, got {mode!r}")
        self._admm["linsys"] = mode
        self._push_admm()

    def set_admm_merit(self, on: bool = True) -> None:
        """Ablation toggle: add y'(g - z) + (rho/2)|g - z|² (the current row state) to the
        line-search merit. Off by default: the ADMM merit is tracking only."""
        self._admm["merit"] = bool(on)
        self._push_admm()

    def set_admm_rho_adaptation(self, on: bool = True) -> None:
        """OSQP-style rho adaptation (opt-in): one per-entry scalar multiplier on every ADMM
        group's rho, updated once per SQP iteration from the inner loop's final (scale-free)
        residuals: when r_prim/r_dual is off by more than 5x, multiply by sqrt(ratio), clamped to
        [1e-2, 1e2]. Persists across solves; toggling (and reset_dual) resets it to 1."""
        self._admm["rho_adapt"] = bool(on)
        self._push_admm()

    def get_admm_rho_scale(self) -> np.ndarray:
        """(B,) adapted ADMM rho scale (effective rho = group rho * scale; 1 = unadapted)."""
        return np.asarray(self._s.get_admm_rho_scale(), dtype=np.float64)

    def _group(self, g) -> dict:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < len(self._groups):
            raise ValueError(f"g: expected a row-group index in [0, {len(self._groups)}), got {g!r}")
        return self._groups[int(g)]

    def set_row_group_rho(self, g, rho) -> None:
        """Mechanism weight of row group g (barrier mu, ADMM rho or AL rho). ADMM re-initializes
        its (z, y) at the next solve."""
        grp = self._group(g)
        grp["weight"] = self._positive(rho, "rho")
        grp["_admm_reinit"] = True
        self._push_rows()

    def set_row_group_bounds(self, g, lo, hi) -> None:
        """Override group g's interval bounds (n_rows each; scalars broadcast; +-inf for a
        one-sided row). lo == hi rows are equalities (AL: a signed multiplier in lam_hi).
        ADMM clips its z into the new bounds at the next solve."""
        grp = self._group(g)
        if grp["cone"]:
            raise ValueError(f"set_row_group_bounds: group {g} is a second-order cone (no interval bounds)")
        grp["lo"], grp["hi"] = self._bounds(lo, hi, grp["n_rows"], f"set_row_group_bounds (group {g})")
        grp["_admm_reclip"] = True
        self._push_rows()

    def set_row_group_mask(self, g, mask) -> None:
        """Per-knot row-activity mask of group g: (N, n_rows) bool (row i live at knot k), or
        (N,) for vector kinds (cones). The knot window applies first. An inactive (knot, row):
        ADMM keeps its proximal fold but no z/y update, gradient, merit or residual;
        AL / barrier / telemetry contribute nothing and its AL dual is reset. ADMM re-inits
        (z, y) at the next solve. None restores all-True."""
        grp = self._group(g)
        if mask is None:
            grp["mask"] = None
        else:
            m = to_numpy(mask, "mask", np.float64)
            shape = (self.N,) if rk.is_vector_kind(grp["kind"], grp["cone"]) else (self.N, grp["n_rows"])
            if m.shape != shape:
                raise ValueError(f"mask: expected shape {shape} for group {g} "
                                 f"({rk.KIND_NAMES[grp['kind']]}), got {tuple(m.shape)}")
            if not np.all((m == 0) | (m == 1)):
                raise ValueError("mask: expected booleans (0/1)")
            grp["mask"] = m.astype(bool)
        grp["_admm_reinit"] = True
        self._push_rows()

    def set_row_group_soft(self, g, sigma) -> None:
        """Elastic rows for group g: sigma > 0 caps the AL multiplier at sigma (the penalty
        turns linear, slope sigma) and makes ADMM's projection the prox of sigma*dist (|y| <= sigma);
        0 = hard. No effect on barrier or telemetry groups."""
        grp = self._group(g)
        s = self._nonneg(sigma, "sigma")
        if s > 0 and grp["cone"] and grp["mech"] == rk.AL:
            raise ValueError(f"set_row_group_soft: elastic cones are ADMM-only (group {g} runs AL)")
        grp["sigma"] = s
        self._push_rows()

    def disable_row_groups(self) -> None:
        """Remove every row group (stats lose the row_* / admm_* fields; row_mech is None)."""
        self._groups = []
        self._row_mech = None
        self._push_rows()

    def get_row_groups(self) -> list:
        """Installed row groups, in index order: dicts with index, kind (id, gato.rowkinds),
        kind_name, block ("q" | "qd" | "u"), mech (id), mech_name, n_rows, knot_lo, knot_hi
        (window [knot_lo, knot_hi) of knots, or controls for "u" groups), lo, hi (n_rows),
        mask ((N, n_rows), or (N,) for vector kinds; all True without a mask), rho (the
        mechanism weight), delta, sigma, cone, form, admm_iters, and C / d (LIN_U) or target
        (EE terminal, (B, 3))."""
        out = []
        for i, g in enumerate(self._groups):
            vec = rk.is_vector_kind(g["kind"], g["cone"])
            if g["mask"] is None:
                mask = np.ones((self.N,) if vec else (self.N, g["n_rows"]), dtype=bool)
            else:
                mask = np.array(g["mask"], dtype=bool)
            d = dict(index=i, kind=g["kind"], kind_name=rk.KIND_NAMES[g["kind"]], block=rk.BLOCK[g["kind"]],
                     mech=g["mech"], mech_name=rk.MECH_NAMES[g["mech"]], n_rows=g["n_rows"],
                     knot_lo=g["knot_lo"], knot_hi=g["knot_hi"], lo=np.array(g["lo"]), hi=np.array(g["hi"]),
                     mask=mask, rho=g["weight"], delta=g["delta"], sigma=g["sigma"], cone=g["cone"],
                     form=g["form"], admm_iters=g["admm_iters"])
            for k in ("C", "d", "target"):
                if g.get(k) is not None:
                    d[k] = np.array(g[k])
            out.append(d)
        return out

    def get_row_duals(self) -> dict:
        """AL multipliers {lam_hi, lam_lo}, each (B, MAX_ROW_GROUPS, N, MAX_ROWS_PER_GROUP):
        group gi's slots are [:, gi, knot_lo:knot_hi, :n_rows]. Equality rows (lo == hi) carry
        their signed multiplier in lam_hi; a cone's vector multiplier (in the cone) sits in
        lam_hi[..., :3]."""
        return {"lam_hi": np.asarray(self._s.get_row_state(0), dtype=np.float64),
                "lam_lo": np.asarray(self._s.get_row_state(1), dtype=np.float64)}

    def get_admm_state(self) -> dict:
        """ADMM state {z, y} (auxiliary and dual), in the layout of :meth:`get_row_duals`.
        y is the interval-constraint multiplier estimate."""
        return {"z": np.asarray(self._s.get_row_state(2), dtype=np.float64),
                "y": np.asarray(self._s.get_row_state(3), dtype=np.float64)}

    def _appended_mech(self, mech, what: str) -> str:
        if self._row_mech is None:
            raise ValueError(f"{what}: no limit mechanism is installed; call enable_limit_telemetry / "
                             "enable_limit_barrier / enable_limit_admm / enable_limit_al first (appended "
                             "row groups come after the canonical limit groups)")
        if len(self._groups) >= MAX_ROW_GROUPS:
            raise ValueError(f"{what}: at most {MAX_ROW_GROUPS} row groups (the limits take 3)")
        if mech is None:
            return self._row_mech
        if mech not in rk.MECH_IDS:
            raise ValueError(f"mech: expected None or one of {tuple(rk.MECH_IDS)}, got {mech!r}")
        return mech

    def _append(self, grp: dict) -> int:
        grp["_reset_state"] = True
        self._groups.append(grp)
        self._push_rows()
        return len(self._groups) - 1

    def enable_ee_terminal_equality(self, target, rho=10.0) -> int:
        """Append an EE terminal-position equality row group: p(q_{N-1}) == target (world
        metres, the solver's EE frame; (3,) or (B, 3)). Rows g = p(q_{N-1}) - target with
        lo = hi = 0 on the position block of the last knot (ADMM fold rho J'J). The mechanism
        follows the active ``enable_limit_*`` mode; ``rho`` is its weight. Call it AFTER the
        mechanism enable. Returns the group index."""
        mech = self._appended_mech(None, "enable_ee_terminal_equality")
        t = batch_array(target, "target", self.batch_size, 3, np.float64)
        w = 0.0 if mech == "telemetry" else self._positive(rho, "rho")
        return self._append(dict(kind=rk.EE_TERMINAL, mech=rk.MECH_IDS[mech], n_rows=3, knot_lo=self.N - 1,
                                 knot_hi=self.N, lo=np.zeros(3), hi=np.zeros(3), mask=None, weight=w,
                                 delta=0.05, sigma=0.0, cone=False, admm_iters=0, form="equality", target=t))

    def _appended_weight(self, mech: str, rho) -> float:
        if mech == "telemetry":
            return 0.0
        if rho is not None:
            return self._positive(rho, "rho")
        if mech == self._row_mech and self._groups and self._groups[2]["kind"] == rk.U_BOX:
            return float(self._groups[2]["weight"])  # the torque box's weight: same block, same scale
        return MECH_DEFAULT_WEIGHT[mech]

    def add_lin_u_rows(self, C, d=None, lo=None, hi=None, mech=None, rho=None, delta=0.05, sigma=0.0, cone=False,
                       knot_lo=0, knot_hi=None, admm_iters=0, equilibrate=False, normalize=True) -> int:
        """Append a LIN_U row group: m rows g = C @ u_k + d on the control block, C (m, nu)
        FROZEN (m <= MAX_ROWS_PER_GROUP), over controls [knot_lo, knot_hi) (default all,
        0..N-2). Bounds lo <= g <= hi (scalars broadcast; default lo = -inf, hi = 0: C u + d <= 0).
        ``cone=True`` (m = 3): the second-order cone ||[g1, g2]|| <= g0 instead of bounds.
        ``normalize`` scales each row to unit norm (a cone by its largest row norm), with d and
        the bounds; violations and duals are then in the scaled units. mech None follows the
        limit mechanism; rho None takes the torque box's weight when the mechanism is the limits',
        else the mechanism default (docs/constraints.md). ``admm_iters`` > the global cap raises
        the inner-iteration cap. ``equilibrate`` is not available on the CPU backend. Returns the
        group index."""
        mech = self._appended_mech(mech, "add_lin_u_rows")
        Cm = to_numpy(C, "C", np.float64)
        if Cm.ndim != 2 or Cm.shape[1] != self.nu or not 1 <= Cm.shape[0] <= MAX_ROWS_PER_GROUP:
            raise ValueError(f"C: expected shape (m, {self.nu}) with 1 <= m <= {MAX_ROWS_PER_GROUP}, "
                             f"got {tuple(Cm.shape)}")
        if not np.all(np.isfinite(Cm)):
            raise ValueError("C: contains NaN or Inf")
        m = Cm.shape[0]
        dv = np.zeros(m) if d is None else vector(d, "d", m, allow_scalar=True)
        if equilibrate:
            raise ValueError("equilibrate: not available on the CPU backend (normalize=True scales the rows)")
        cone = bool(cone)
        if cone:
            if m != 3:
                raise ValueError(f"C: a cone needs 3 rows [g0; g1; g2] (||[g1, g2]|| <= g0), got {m}")
            if lo is not None or hi is not None:
                raise ValueError("lo / hi: a cone group has no interval bounds")
            lo_a, hi_a = np.zeros(3), np.full(3, np.inf)
        else:
            lo_a, hi_a = self._bounds(-np.inf if lo is None else lo, 0.0 if hi is None else hi, m, "add_lin_u_rows")
        norms = np.linalg.norm(Cm, axis=1)
        if cone and norms.max() == 0:
            raise ValueError("C: all rows are zero")
        if not cone and np.any(norms == 0):
            raise ValueError(f"C: row {int(np.argwhere(norms == 0)[0][0])} is zero (a constant row is a bound "
                             "on d, not a constraint)")
        if normalize:
            sc = np.full(m, 1.0 / norms.max()) if cone else 1.0 / norms
            Cm = Cm * sc[:, None]
            dv = dv * sc
            if not cone:
                lo_a, hi_a = lo_a * sc, hi_a * sc
        k1 = self.N - 1 if knot_hi is None else knot_hi
        for name, v in (("knot_lo", knot_lo), ("knot_hi", k1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{name}: expected an integer, got {v!r}")
        if not 0 <= knot_lo < k1 <= self.N - 1:
            raise ValueError(f"knot_lo / knot_hi: expected 0 <= knot_lo < knot_hi <= {self.N - 1} "
                             f"(controls), got {knot_lo}, {k1}")
        if isinstance(admm_iters, bool) or not isinstance(admm_iters, (int, np.integer)) or admm_iters < 0:
            raise ValueError(f"admm_iters: expected an integer >= 0, got {admm_iters!r}")
        w = self._appended_weight(mech, rho)
        return self._append(dict(kind=rk.LIN_U, mech=rk.MECH_IDS[mech], n_rows=m, knot_lo=int(knot_lo),
                                 knot_hi=int(k1), lo=lo_a, hi=hi_a, mask=None, weight=w,
                                 delta=self._positive(delta, "delta"), sigma=self._nonneg(sigma, "sigma"),
                                 cone=cone, admm_iters=int(admm_iters), form="soc" if cone else "rows",
                                 C=Cm, d=dv))

    def enable_u_cone(self, C, d=None, mech=None, rho=None, form="soc", facets=8, facet_scale="inscribed",
                      **kw) -> int:
        """Cone constraint on a mapped control quantity g = C @ u + d, C (3, nu) FROZEN (e.g.
        rows [mu*f_n; f_t1; f_t2] of a contact force): ||[g1, g2]|| <= g0.

        form="soc": one second-order-cone group (ADMM projects onto the cone; AL uses the cone's
        PHR term; the barrier acts on g0 - ||[g1, g2]||). form="facets": the polyhedral
        alternative, ``facets`` half-planes cos(t_j) g1 + sin(t_j) g2 <= s g0, t_j = 2 pi j /
        facets, with s = cos(pi/facets) ("inscribed": the polygon lies inside the cone) or 1
        ("circumscribed": it contains the cone); a plain LIN_U group. Other keywords go to
        :meth:`add_lin_u_rows`. Returns the group index."""
        Cm = to_numpy(C, "C", np.float64)
        if Cm.shape != (3, self.nu):
            raise ValueError(f"C: expected shape (3, {self.nu}) (rows g0, g1, g2), got {tuple(Cm.shape)}")
        dv = np.zeros(3) if d is None else vector(d, "d", 3, allow_scalar=True)
        if form == "soc":
            return self.add_lin_u_rows(Cm, dv, mech=mech, rho=rho, cone=True, **kw)
        if form != "facets":
            raise ValueError(f"form: expected 'soc' or 'facets', got {form!r}")
        if isinstance(facets, bool) or not isinstance(facets, (int, np.integer)) \
                or not 3 <= facets <= MAX_ROWS_PER_GROUP:
            raise ValueError(f"facets: expected an integer in [3, {MAX_ROWS_PER_GROUP}], got {facets!r}")
        if facet_scale not in ("inscribed", "circumscribed"):
            raise ValueError(f"facet_scale: expected 'inscribed' or 'circumscribed', got {facet_scale!r}")
        s = math.cos(math.pi / facets) if facet_scale == "inscribed" else 1.0
        t = 2 * np.pi * np.arange(facets) / facets
        rows = np.cos(t)[:, None] * Cm[1] + np.sin(t)[:, None] * Cm[2] - s * Cm[0]
        drow = np.cos(t) * dv[1] + np.sin(t) * dv[2] - s * dv[0]
        gi = self.add_lin_u_rows(rows, drow, lo=-np.inf, hi=0.0, mech=mech, rho=rho, **kw)
        self._groups[gi]["form"] = "facets"
        return gi

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
        kind = kind_of(x)
        budget = self._budget(budget_s)
        xs = batch_array(x, "x", self.batch_size, self.nx, self.dtype)
        r = batch_array(ref, "ref", self.batch_size, 6 * self.N, self.dtype)
        xu = self._resident().copy()
        self._s.solve(xs, r, xu, budget)
        self._warm = xu.copy()
        return self._result(xu, kind)

    def shift_warm(self, best_id: int = 0, hold: bool = False) -> None:
        """Next tick's warm start from resident row ``best_id`` into every row: advanced one knot
        with the last knot (and last control) repeated, or as solved with ``hold=True``."""
        if not 0 <= int(best_id) < self.batch_size:
            raise ValueError(f"best_id: expected 0 <= best_id < {self.batch_size}, got {best_id}")
        row = self._resident()[int(best_id)]
        row = row.copy() if hold else shift_plan(row, self.nx, self.nu, self.N)
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
