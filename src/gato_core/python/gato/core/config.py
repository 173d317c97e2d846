"""Solver configuration: :class:`SolverParams`, the one configuration object of BSQP.

Units: weights are dimensionless multipliers of the cost terms in
docs/solver_method.md; ``pcg_tol`` is relative; ``rho`` weights the position
block of the trust region (1/rad^2).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from .native import core as _core

#: The C++ struct's defaults (gato/types.hpp, through gato._core.Settings): the one place
#: every solver default is written. The dataclass below, BSQP and the ROS parameter schema
#: (gato_ros/params.py) read them from here; test/test_defaults_agree.py checks them all.
_D = _core.Settings()


def _name(member) -> str:
    """The API's string for an enum member of the core (LinSys.BDSV_FIRST -> "bdsv_first")."""
    return member.name.lower()


LINSYS_MODES = tuple(n.lower() for n in _core.LinSys.__members__)
LINE_SEARCH_MODES = tuple(n.lower() for n in _core.LineSearch.__members__)
INTEGRATOR_MODES = tuple(n.lower() for n in _core.Integrator.__members__)
#: What the control cost penalises (docs/solver_method.md): u ("zero") or u - g(q) ("gravity").
U_REF_MODES = tuple(n.lower() for n in _core.URef.__members__)
#: The backend's wired linsys (SolverParams.linsys = None resolves to it).
DEFAULT_LINSYS = _name(_D.linsys)
DEFAULT_INTEGRATOR = _name(_D.integrator)


@dataclass(frozen=True)
class SolverParams:
    """BSQP solver configuration. Immutable; derive variants with :meth:`replace`.

    SQP and linear system:

    - ``max_sqp_iters``: SQP iterations per solve (1 = real-time iteration / MPC).
    - ``max_pcg_iters``, ``pcg_tol``: PCG budget and relative tolerance (pcg and bdsv_first).
    - ``solve_ratio``: fraction of the batch that must converge before the loop exits early.
    - ``mu``: merit-function weight of the L1 defect norm.
    - ``rho``: initial trust-region weight on the position block (> 0);
      ``adapt_rho`` lets the line search adapt it per solve.
    - ``linsys``: "pcg" | "bdsv" | "bdsv_first" | None (None = the backend's wired default:
      "bdsv" on the CPU backend (:data:`DEFAULT_LINSYS`, the C++ struct's), "pcg" for
      fixed-base robots on CUDA; see :func:`gato.linsys_autotune.resolve_linsys`).

    Every default is the C++ core's (``gato._core.Settings``, gato/types.hpp);
    :meth:`to_settings` gives the typed core object.

    Cost weights: ``q_cost`` (running EE position), ``N_cost`` (terminal EE position),
    ``qd_cost`` (joint velocity), ``u_cost`` (torque), and the log-barrier limit weights
    ``q_lim_cost`` / ``vel_lim_cost`` / ``ctrl_lim_cost`` (0 = off). Per-knot and per-joint
    refinements are runtime setters on BSQP and take precedence over these. Every weight is
    finite and >= 0; a zero ``qd_cost`` or ``u_cost`` (with its barrier off) gets a step-only
    regularization, exact at convergence (docs/solver_method.md, "Zero weights").

    ``u_ref``: "zero" (default, the reference: the control term is 1/2 s u^2) or "gravity"
    (1/2 s (u - g(q_k))^2: the torque beyond gravity compensation at each knot, so holding the
    arm up costs nothing and the plan does not sag; docs/solver_method.md).

    ``rot_cost`` / ``N_rot_cost``: EE orientation weights [1/rad^2] on running knots / the last
    knot (0 = off, the default: the reference's cost). The reference's slots [3:6] of each knot
    then carry the target orientation as a rotation vector (world frame, norm <= pi); the cost
    is 1/2 w sum_a c_a e_a^2 with e = log(R_ref' R_ee(q)) (tool frame) and per-axis factors c
    (:meth:`BSQP.set_rot_axis_weights`); docs/solver_method.md. CPU and CUDA backends.

    ``exact_hessian``: exact-Hessian SQP (the "eh" variant): the stage Hessians gain the
    Lagrangian's second-order terms, made positive definite per stage; False (default) is
    Gauss-Newton. Read by BSQP (``set_exact_hessian``), not a core Settings field
    (docs/solver_method.md, "Exact Hessian").

    ``line_search`` (a gato extension): "best" (default; the reference semantics) evaluates
    all 8 step sizes 2^-i and takes the lowest merit; "first" backtracks from alpha = 1
    and takes the first strict decrease (one rollout when the full step is accepted).
    """

    max_sqp_iters: int = _D.max_sqp_iters
    max_pcg_iters: int = _D.max_pcg_iters
    pcg_tol: float = _D.pcg_tol
    solve_ratio: float = _D.solve_ratio
    mu: float = _D.mu
    rho: float = _D.rho
    adapt_rho: bool = _D.adapt_rho
    linsys: str | None = None  # None: DEFAULT_LINSYS, the struct's (the reference's None semantics)
    q_cost: float = _D.q_cost
    qd_cost: float = _D.qd_cost
    u_cost: float = _D.u_cost
    N_cost: float = _D.N_cost
    q_lim_cost: float = _D.q_lim_cost
    vel_lim_cost: float = _D.vel_lim_cost
    ctrl_lim_cost: float = _D.ctrl_lim_cost
    u_ref: str = _name(_D.u_ref)
    rot_cost: float = _D.rot_cost
    N_rot_cost: float = _D.N_rot_cost
    exact_hessian: bool = False
    line_search: str = _name(_D.line_search)

    def __post_init__(self) -> None:
        for name in ("max_sqp_iters", "max_pcg_iters"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int,)) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        floats = ("pcg_tol", "solve_ratio", "mu", "rho", "q_cost", "qd_cost", "u_cost",
                  "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost", "rot_cost", "N_rot_cost")
        for name in floats:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name}: expected a finite number >= 0, got {v!r}")
        if self.rho <= 0:
            raise ValueError(f"rho: expected > 0 (the trust region regularizes the position block), got {self.rho!r}")
        if not 0 < self.solve_ratio <= 1:
            raise ValueError(f"solve_ratio: expected a fraction in (0, 1], got {self.solve_ratio!r}")
        if self.linsys is not None and self.linsys not in LINSYS_MODES:
            raise ValueError(f"linsys: expected one of {LINSYS_MODES} or None, got {self.linsys!r}")
        if self.u_ref not in U_REF_MODES:
            raise ValueError(f"u_ref: expected one of {U_REF_MODES}, got {self.u_ref!r}")
        if self.line_search not in LINE_SEARCH_MODES:
            raise ValueError(f"line_search: expected one of {LINE_SEARCH_MODES}, got {self.line_search!r}")
        for name in ("adapt_rho", "exact_hessian"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected a bool, got {getattr(self, name)!r}")

    def replace(self, **changes: Any) -> "SolverParams":
        """A copy with ``changes`` applied (unknown names are an error)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"SolverParams: unknown field(s) {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    def asdict(self) -> dict:
        """The fields as a plain dict."""
        return dataclasses.asdict(self)

    def to_settings(self, *, integrator: str = DEFAULT_INTEGRATOR) -> "_core.Settings":
        """The typed core settings (gato._core.Settings) of these parameters: linsys None
        resolves to :data:`DEFAULT_LINSYS`; the integrator is the solver's (a constructor
        argument of BSQP, not a SolverParams field); ``exact_hessian`` has no Settings field (BSQP
        switches it with the core's ``set_exact_hessian``)."""
        if integrator not in INTEGRATOR_MODES:
            raise ValueError(f"integrator: expected one of {INTEGRATOR_MODES}, got {integrator!r}")
        d = {k: v for k, v in self.asdict().items() if k != "exact_hessian"}
        d["linsys"] = self.linsys or DEFAULT_LINSYS
        d["integrator"] = integrator
        return _core.Settings.from_dict(d)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> "SolverParams":
        """Build from a dict of field overrides (unknown keys are an error)."""
        return cls().replace(**dict(m))
