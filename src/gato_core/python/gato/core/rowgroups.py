"""The constraint row-group methods of :class:`gato.BSQP` (mixed into it): limits, appended
groups, ADMM settings, duals. The collision rows are :mod:`gato.core.collision_rows`.

Mechanisms, equations, defaults and the order rule: docs/constraints.md. The
methods here drive the C++ row-group layer through ``self._s`` and keep the
host-side group descriptors in ``self._groups`` / ``self._admm`` (set up by
``BSQP.__init__``).
"""
from __future__ import annotations

import math

import numpy as np

from .native import core as _core
from . import rowkinds as rk
from .arrays import batch_array, flag, to_numpy, vector

#: ADMM inner-loop linear solvers: the names of the core's enum (gato._core.AdmmLinSys).
ADMM_LINSYS_MODES = tuple(n.lower() for n in _core.AdmmLinSys.__members__)
#: Dense row-state layout of get_row_duals / get_admm_state: (B, MAX_ROW_GROUPS, N, MAX_ROWS_PER_GROUP).
MAX_ROW_GROUPS = int(_core.MAX_ROW_GROUPS)
MAX_ROWS_PER_GROUP = int(_core.MAX_ROWS_PER_GROUP)
#: Mechanism weights of an appended group whose rho is not given and whose mechanism is not the
#: limit groups' (barrier mu, ADMM rho, AL rho); docs/constraints.md.
MECH_DEFAULT_WEIGHT = {"barrier": 0.003, "admm": 0.01, "al": 1.0, "telemetry": 0.0}


class RowGroupAPI:
    """Row-group methods of BSQP: limit mechanisms, appended groups, ADMM settings, duals."""

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
        self._s.set_admm_config(_core.AdmmConfig(
            iters=int(a["iters"]), eps_abs=float(a["eps_abs"]), eps_rel=float(a["eps_rel"]),
            check_every=int(a["check_every"]), linsys=a["linsys"], merit=bool(a["merit"]),
            rho_adapt=bool(a["rho_adapt"])))

    def _push_rows(self) -> None:
        """Install every host-side group in the core as typed gato._core.RowGroupSpec objects."""
        specs = []
        for g in self._groups:
            spec = _core.RowGroupSpec(**{k: g[k] for k in ("kind", "mech", "n_rows", "knot_lo", "knot_hi", "weight",
                                                           "delta", "sigma", "cone", "admm_iters")})
            spec.lo = [float(v) for v in g["lo"]]
            spec.hi = [float(v) for v in g["hi"]]
            spec.mask = [] if g["mask"] is None else self._mask_rows(g).astype(np.uint8).ravel().tolist()
            spec.C = [] if g.get("C") is None else g["C"].ravel().tolist()
            spec.d = [] if g.get("d") is None else g["d"].ravel().tolist()
            spec.target = [] if g.get("target") is None else g["target"].ravel().tolist()
            spec.reset_state = bool(g.pop("_reset_state", False))
            spec.admm_reinit = bool(g.pop("_admm_reinit", False))
            spec.admm_reclip = bool(g.pop("_admm_reclip", False))
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
        self._admm["merit"] = flag(on, "on")
        self._push_admm()

    def set_admm_rho_adaptation(self, on: bool = True) -> None:
        """OSQP-style rho adaptation (opt-in): one per-entry scalar multiplier on every ADMM
        group's rho, updated once per SQP iteration from the inner loop's final (scale-free)
        residuals: when r_prim/r_dual is off by more than 5x, multiply by sqrt(ratio), clamped to
        [1e-2, 1e2]. Persists across solves; toggling (and reset_dual) resets it to 1."""
        self._admm["rho_adapt"] = flag(on, "on")
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
        (N,) for vector kinds (cones, the collision group: every sphere at knot k). The knot
        window applies first. An inactive (knot, row):
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
        if flag(equilibrate, "equilibrate"):
            raise ValueError("equilibrate: not available on the CPU backend (normalize=True scales the rows)")
        cone = flag(cone, "cone")
        normalize = flag(normalize, "normalize")
        if cone:
            if m != 3:
                raise ValueError(f"C: a cone needs 3 rows [g0; g1; g2] (||[g1, g2]|| <= g0), got {m}")
            if lo is not None or hi is not None:
                raise ValueError("lo / hi: a cone group has no interval bounds")
            if mech == "al" and self._nonneg(sigma, "sigma") > 0:
                # the core's AL cone has no multiplier cap: sigma would be silently ignored
                raise ValueError("sigma: elastic cones are ADMM-only (this cone runs AL); "
                                 "pass sigma=0 or mech='admm'")
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
        if form not in ("soc", "facets"):
            raise ValueError(f"form: expected 'soc' or 'facets', got {form!r}")
        # checked whatever the form (an unusable value is refused, not ignored by form="soc")
        if isinstance(facets, bool) or not isinstance(facets, (int, np.integer)) \
                or not 3 <= facets <= MAX_ROWS_PER_GROUP:
            raise ValueError(f"facets: expected an integer in [3, {MAX_ROWS_PER_GROUP}], got {facets!r}")
        if facet_scale not in ("inscribed", "circumscribed"):
            raise ValueError(f"facet_scale: expected 'inscribed' or 'circumscribed', got {facet_scale!r}")
        if form == "soc":
            return self.add_lin_u_rows(Cm, dv, mech=mech, rho=rho, cone=True, **kw)
        s = math.cos(math.pi / facets) if facet_scale == "inscribed" else 1.0
        t = 2 * np.pi * np.arange(facets) / facets
        rows = np.cos(t)[:, None] * Cm[1] + np.sin(t)[:, None] * Cm[2] - s * Cm[0]
        drow = np.cos(t) * dv[1] + np.sin(t) * dv[2] - s * dv[0]
        gi = self.add_lin_u_rows(rows, drow, lo=-np.inf, hi=0.0, mech=mech, rho=rho, **kw)
        self._groups[gi]["form"] = "facets"
        return gi
