"""The reference's contact-force ("fc") solver surface for floating-base robots (issue 34).

``gato.BSQP(urdf, 1, N, dt, plant_type="go2", variant="fc")`` (and any registered floating-base
robot, ``gato.build(..., floating_base=True, contact_forces=True)``) returns a
:class:`FloatingBSQP`: NOT a :class:`gato.BSQP` instance (the batched fixed-base core has no
floating knots), a separate class with the reference's fc / contact-row method names over the
floating-base contact-force SQP ``gato._core.FloatingSQP`` (docs/floating_solver.md).

Rows are HARD under an augmented Lagrangian (PHR, the fixed-base ``mech="al"`` equations of
docs/constraints.md) whose outer loop runs inside each solve (``al_iters`` multiplier updates,
rho grown x10 for a group whose violation did not fall 4x); the multipliers persist across
solves (:meth:`reset_dual`). ADMM and the barrier are not available here (refused by name).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..robots.registry import all_robots, detect_plant
from .floating_mpc import FloatingSolveResult
from .native import core

__all__ = ["FloatingBSQP", "FloatingBSQPResult"]

MECHS = {"al": 3, "telemetry": 0}
FC_DEFAULT_WEIGHT = 1e-2  # the consumer contract's fc default


def _num(v, name, lo=None, strict=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ValueError(f"{name}: expected a finite number, got {v!r}")
    if lo is not None and (v <= lo if strict else v < lo):
        raise ValueError(f"{name}: expected a number {'>' if strict else '>='} {lo}, got {v!r}")
    return float(v)


def _int(v, name, lo):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    return int(v)


def _array(v, name):
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected an array of numbers") from None
    if np.any(np.isnan(a)):
        raise ValueError(f"{name}: contains NaN")
    return a


class FloatingBSQPResult(FloatingSolveResult):
    """One solve of :class:`FloatingBSQP`: the reference SolveResult accessors with a batch
    index (B = 1: ``b`` must be 0). ``xu`` [x_0, w_0, ..., x_{N-1}] with w = (u, fc);
    ``stats``: iters, al_iters, converged, row_max_violation (per row group)."""

    def __init__(self, d: dict, nu: int):
        super().__init__(d, nu)
        self.row_max_violation = np.asarray(d["violation"], dtype=np.float64)
        self.stats = dict(sqp_iters=self.iters, al_iters=int(d["al_iters"]), converged=self.converged,
                          row_max_violation=self.row_max_violation)

    @staticmethod
    def _b(b):
        if b != 0 or isinstance(b, bool):
            raise ValueError(f"b: the floating solver runs one batch entry (b = 0), got {b!r}")

    def u0(self, b=0) -> np.ndarray:
        """The first ACTUATED control (nu,) N m (the fc slots excluded)."""
        self._b(b)
        return super().u0()

    def control_at(self, k, b=0) -> np.ndarray:
        self._b(b)
        return super().control_at(min(int(k), len(self.W) - 1))

    def fc_at(self, k, b=0) -> np.ndarray:
        """The contact wrenches of knot k, (n_fc,) in [n; f] blocks per frame."""
        self._b(b)
        return super().fc_at(min(int(k), len(self.W) - 1))

    def fc_traj(self, b=0) -> np.ndarray:
        """(N-1, n_fc) contact-wrench trajectory."""
        self._b(b)
        return super().fc_traj()

    def trajectory(self, b=0) -> np.ndarray:
        self._b(b)
        return self.xu


class FloatingBSQP:
    """Contact-force SQP for a floating-base robot with the reference BSQP's fc surface.

    States are schema 2 (base position, quaternion xyzw, joints; base-frame twist, joint
    rates); ``nu`` is the control width n_actuated + n_fc (CONTROL_SIZE of an fc module), the
    applied control is ``SolveResult.u0()`` (actuated only). The cost: tangent state cost to
    ``set_x_ref`` with ``set_state_weights``, ``set_u_cost`` / ``set_u_ref``, ``set_fc_cost``
    (default 1e-2) / ``set_fc_ref``; rows: :meth:`add_fc_box`, :meth:`add_fc_cone`,
    :meth:`add_contact_pos_rows`.
    """

    def __init__(self, model_path, batch_size=1, N=32, dt=0.02, params=None, *, plant_type=None, variant="fc",
                 contact_frames=None, max_sqp_iters=10, al_iters=20, al_tol=1e-6, tol=1e-8):
        path = Path(os.fspath(model_path))
        if not path.is_file():
            raise ValueError(f"model_path: URDF file not found: {path}")
        if isinstance(batch_size, bool) or batch_size != 1:
            raise ValueError(f"batch_size: the floating-base solver runs B = 1, got {batch_size!r}")
        if params is not None:
            raise ValueError("params: the floating-base solver takes no SolverParams (its settings: "
                             "max_sqp_iters, al_iters, al_tol, tol)")
        if variant not in (None, "fc"):
            raise ValueError(f"variant: the floating-base solver is the contact-force variant 'fc', got {variant!r}")
        reg = all_robots()
        if plant_type is None:
            plant_type = detect_plant(path) or path.stem
        meta = reg.get(plant_type, {})
        if not meta.get("floating_base"):
            raise ValueError(f"plant_type: {plant_type!r} is not a registered floating-base robot "
                             "(gato.build(..., floating_base=True, contact_forces=True) registers one)")
        frames = meta.get("contact_frames") if contact_frames is None else contact_frames
        if not isinstance(frames, (list, tuple)) or not frames or not all(isinstance(f, str) for f in frames):
            raise ValueError(f"contact_frames: expected a non-empty list of frame names, got {frames!r}")
        self.max_sqp_iters = _int(max_sqp_iters, "max_sqp_iters", 1)
        self.tol = _num(tol, "tol", 0.0)
        self._al = [_int(al_iters, "al_iters", 1), _num(al_tol, "al_tol", 0.0)]
        self.model_path, self.plant_type, self.variant = str(path.resolve()), plant_type, "fc"
        self.floating_base, self.batch_size = True, 1
        self._s = core.FloatingSQP(self.model_path, list(frames), N, dt)
        self._s.set_al(*self._al)
        self.plant = core.FloatingPlant(self.model_path, list(frames))
        self.N, self.dt = self._s.N, self._s.dt
        self.nq, self.nv, self.nx = self.plant.nq, self.plant.nv, self._s.nx
        self.n_actuated, self.n_fc = self._s.nu, self._s.nf
        self.nu = self.n_actuated + self.n_fc
        self.contact_frames = list(self._s.contact_frames)
        self._fc_w = np.full(self.n_fc, FC_DEFAULT_WEIGHT)
        self._groups = []  # host descriptors: kind, mech, rho, n_rows
        self._warm = None

    # ------------------------------------------------------------------ layout
    def fc_slots(self, frame, part=None) -> list:
        """fc slot indices of one contact frame (index or name): the 6-wide [n; f] block
        (world-aligned, about the frame origin), or its "n" (moment) / "f" (force) half."""
        if isinstance(frame, str):
            if frame not in self.contact_frames:
                raise ValueError(f"frame: {frame!r} is not a contact frame; frames: {self.contact_frames}")
            c = self.contact_frames.index(frame)
        elif isinstance(frame, (int, np.integer)) and not isinstance(frame, bool) \
                and 0 <= frame < len(self.contact_frames):
            c = int(frame)
        else:
            raise ValueError(f"frame: expected a contact frame name or an index < {len(self.contact_frames)}, "
                             f"got {frame!r}")
        lo = {None: 0, "n": 0, "f": 3}.get(part, -1) if isinstance(part, (str, type(None))) else -1
        if lo < 0:
            raise ValueError(f"part: expected None, 'n' or 'f', got {part!r}")
        return list(range(6 * c + lo, 6 * c + lo + (6 if part is None else 3)))

    @property
    def n_contact_rows(self) -> int:
        """3 rows per contact frame (the CONTACT_POS group width)."""
        return 3 * len(self.contact_frames)

    def contact_positions(self, q) -> np.ndarray:
        """(n_frames, 3) world positions of the contact frames' origins at q (nq,)."""
        return self.plant.contact_positions(q)

    # ------------------------------------------------------------------ costs
    def set_state_weights(self, w_running, w_terminal=None) -> None:
        """Tangent state weights (ndx,) or a scalar (w_terminal None: w_running)."""
        self._s.set_state_weights(w_running, w_terminal)

    def set_x_ref(self, x_ref) -> None:
        """State reference: (nx,) for every knot or (N, nx) per knot (schema 2)."""
        self._s.set_x_ref(x_ref)

    def set_u_cost(self, u_cost) -> None:
        self._s.set_u_cost(u_cost)

    def set_u_ref(self, u_ref=None) -> None:
        self._s.set_u_ref(u_ref)

    def set_fc_cost(self, weight) -> None:
        """0.5 weight ||fc - ref||^2 per running knot; a scalar or (n_fc,), >= 0 (default 1e-2).
        An all-zero weight needs fc box rows (an unregularized fc is a free wrench actuator)."""
        if isinstance(weight, bool):
            raise ValueError("weight: expected a number or an array, got a bool")
        w = _array(weight, "weight")
        if w.ndim == 0:
            w = np.full(self.n_fc, float(w))
        if w.shape != (self.n_fc,):
            raise ValueError(f"weight: expected a scalar or shape ({self.n_fc},), got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weight: expected finite numbers >= 0")
        if not np.any(w > 0) and not any(g["kind"] == "fc_box" and g["mech"] == "al" for g in self._groups):
            raise ValueError("weight: 0 only together with fc box rows (add_fc_box): an unregularized fc "
                             "is a free wrench actuator")
        self._s.set_fc_cost(w)
        self._fc_w = w

    def set_fc_ref(self, ref=None) -> None:
        """fc reference (n_fc,) or (n_frames, 6) in [n; f] per frame; None / empty = zeros."""
        self._s.set_fc_ref(ref)

    # ------------------------------------------------------------------ rows
    def _mech(self, mech, rho):
        if mech is None:
            mech = "al"
        if mech not in MECHS:
            raise ValueError(f"mech: the floating solver runs {tuple(MECHS)} (no ADMM / barrier here), got {mech!r}")
        rho = 1.0 if rho is None else _num(rho, "rho", 0.0, strict=True)
        return mech, rho

    def _knots(self, knot_lo, knot_hi, top):
        lo = _int(knot_lo, "knot_lo", 0)
        hi = top if knot_hi is None else _int(knot_hi, "knot_hi", 0)
        if not lo < hi <= top:
            raise ValueError(f"knot_lo / knot_hi: expected {lo} < knot_hi <= {top}, got [{knot_lo}, {knot_hi})")
        return lo, hi

    def _bounds(self, lo, hi, n, what):
        out = []
        for name, v in (("lo", lo), ("hi", hi)):
            a = _array(v, f"{what}: {name}")
            a = np.full(n, float(a)) if a.ndim == 0 else a
            if a.shape != (n,):
                raise ValueError(f"{what}: {name} needs {n} entries (one per row), got shape {a.shape}")
            out.append(a)
        bad = np.argwhere(out[0] > out[1])
        if bad.size:
            i = int(bad[0][0])
            raise ValueError(f"{what}: lo > hi at row {i} ({out[0][i]!r} > {out[1][i]!r})")
        if np.any(np.isposinf(out[0])) or np.any(np.isneginf(out[1])):
            raise ValueError(f"{what}: lo = +inf or hi = -inf leaves no feasible value")
        return out

    def _add(self, kind, mech, rho, n_rows, idx) -> int:
        assert idx == len(self._groups)
        self._groups.append(dict(kind=kind, mech=mech, rho=rho, n_rows=n_rows))
        return idx

    def add_fc_box(self, lo, hi, slots=None, *, mech=None, rho=None, knot_lo=0, knot_hi=None) -> int:
        """Box rows lo <= fc[slots] <= hi on control knots [knot_lo, knot_hi) (default all N-1);
        slots index the fc block (default all n_fc); lo / hi broadcast. Pin a point contact's
        moments with add_fc_box(0, 0, slots=range(3)) (layout [n; f]). Returns the group index."""
        if slots is None:
            slots = list(range(self.n_fc))
        try:
            sl = [int(s) for s in slots if not isinstance(s, bool) and float(s) == int(s)]
        except (TypeError, ValueError):
            raise ValueError(f"slots: expected indices into the fc block (< {self.n_fc}), got {slots!r}") from None
        if not sl or len(sl) != len(list(slots)) or min(sl) < 0 or max(sl) >= self.n_fc or len(set(sl)) != len(sl):
            raise ValueError(f"slots: expected distinct indices into the fc block (< {self.n_fc}), got {slots!r}")
        lo_a, hi_a = self._bounds(lo, hi, len(sl), "add_fc_box")
        mech, rho = self._mech(mech, rho)
        k0, k1 = self._knots(knot_lo, knot_hi, self.N - 1)
        C = np.zeros((len(sl), self.n_fc))
        C[np.arange(len(sl)), sl] = 1.0
        g = self._s.add_fc_rows(C, None, lo_a, hi_a, False, MECHS[mech], rho, k0, k1)
        return self._add("fc_box", mech, rho, len(sl), g)

    def add_fc_cone(self, frame, mu, mech=None, rho=None, form="soc", *, facets=8, facet_scale="inscribed",
                    knot_lo=0, knot_hi=None) -> int:
        """Friction cone on one contact frame's force slots: ||(f_x, f_y)|| <= mu f_z (rows
        [mu f_z; f_x; f_y], a constant map: the wrench is world-aligned). form "soc" (the cone) or
        "facets" (``facets`` half-planes cos t f_x + sin t f_y - s mu f_z <= 0, s = cos(pi/facets)
        "inscribed" or 1 "circumscribed"). Returns the group index."""
        fs = self.fc_slots(frame, "f")
        mu = _num(mu, "mu", 0.0, strict=True)
        mech, rho = self._mech(mech, rho)
        k0, k1 = self._knots(knot_lo, knot_hi, self.N - 1)
        nf = _int(facets, "facets", 3)
        if facet_scale not in ("inscribed", "circumscribed"):
            raise ValueError(f"facet_scale: expected 'inscribed' or 'circumscribed', got {facet_scale!r}")
        if form == "soc":
            C = np.zeros((3, self.n_fc))
            C[0, fs[2]], C[1, fs[0]], C[2, fs[1]] = mu, 1.0, 1.0
            g = self._s.add_fc_rows(C, None, None, None, True, MECHS[mech], rho, k0, k1)
            return self._add("fc_cone", mech, rho, 3, g)
        if form != "facets":
            raise ValueError(f"form: expected 'soc' or 'facets', got {form!r}")
        s = math.cos(math.pi / nf) if facet_scale == "inscribed" else 1.0
        t = 2 * np.pi * np.arange(nf) / nf
        C = np.zeros((nf, self.n_fc))
        C[:, fs[0]], C[:, fs[1]], C[:, fs[2]] = np.cos(t), np.sin(t), -s * mu
        g = self._s.add_fc_rows(C, None, np.full(nf, -np.inf), np.zeros(nf), False, MECHS[mech], rho, k0, k1)
        return self._add("fc_cone", mech, rho, nf, g)

    def _targets(self, targets):
        n = self.n_contact_rows
        if targets is None:
            return np.zeros(n)
        t = _array(targets, "targets")
        if t.shape == (len(self.contact_frames), 3):
            t = t.ravel()
        if t.shape not in ((n,), (self.N, n)):
            raise ValueError(f"targets: expected shape ({self.N}, {n}), ({len(self.contact_frames)}, 3) or ({n},), "
                             f"got {t.shape}")
        if not np.all(np.isfinite(t)):
            raise ValueError("targets: contains inf")
        return t

    def add_contact_pos_rows(self, targets=None, lo=0.0, hi=0.0, mech=None, rho=None, delta=0.05, sigma=0.0,
                             knot_lo=1, knot_hi=None, admm_iters=0) -> int:
        """CONTACT_POS rows: per contact frame f and state knot k in [knot_lo, knot_hi) (default
        1..N-1), g = p_f(q_k) - tgt_k[f] (world xyz, m) with lo <= g <= hi (default an equality:
        the frames pinned to their targets). targets (N, n_rows), (n_frames, 3) or (n_rows,);
        None = zeros. delta (a barrier setting), sigma (elastic rows) and admm_iters (ADMM) have no
        mechanism here: values other than their defaults are refused. Returns the group index."""
        if _num(delta, "delta", 0.0, strict=True) != 0.05:
            raise ValueError("delta: a barrier setting; the floating solver has no barrier (leave 0.05)")
        if _num(sigma, "sigma", 0.0) != 0.0:
            raise ValueError("sigma: elastic rows are not available on the floating solver (leave 0)")
        if _int(admm_iters, "admm_iters", 0) != 0:
            raise ValueError("admm_iters: the floating solver has no ADMM (leave 0)")
        t = self._targets(targets)
        lo_a, hi_a = self._bounds(lo, hi, self.n_contact_rows, "add_contact_pos_rows")
        mech, rho = self._mech(mech, rho)
        k0, k1 = self._knots(knot_lo, knot_hi, self.N)
        g = self._s.add_contact_pos_rows(t, lo_a, hi_a, MECHS[mech], rho, k0, k1)
        return self._add("contact_pos", mech, rho, self.n_contact_rows, g)

    def _group(self, g) -> dict:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < len(self._groups):
            raise ValueError(f"g: expected a row-group index in [0, {len(self._groups)}), got {g!r}")
        return self._groups[int(g)]

    def set_row_group_targets(self, g, targets) -> None:
        """Per-knot targets of CONTACT_POS group g: (N, n_rows), (n_frames, 3) or (n_rows,)."""
        if self._group(g)["kind"] != "contact_pos":
            raise ValueError(f"g: group {g} is not a CONTACT_POS group")
        self._s.set_row_group_targets(int(g), self._targets(targets))

    def set_row_group_rho(self, g, rho) -> None:
        grp = self._group(g)
        grp["rho"] = _num(rho, "rho", 0.0, strict=True)
        self._s.set_row_group_rho(int(g), grp["rho"])

    def get_row_groups(self) -> list:
        return [dict(g) for g in self._groups]

    def get_row_duals(self, g) -> np.ndarray:
        """(N, n_rows) multipliers of group g (a cone: its vector multiplier in the cone)."""
        self._group(g)
        return self._s.duals(int(g))

    def reset_dual(self) -> None:
        self._s.reset_duals()

    def reset(self) -> None:
        """Zero the multipliers and forget the MPC warm start."""
        self._s.reset_duals()
        self._warm = None

    # ------------------------------------------------------------------ solves
    def _x(self, xcur_B):
        x = _array(xcur_B, "xcur_B")
        if x.shape == (1, self.nx):
            x = x[0]
        if x.shape != (self.nx,):
            raise ValueError(f"xcur_B: expected shape ({self.nx},) or (1, {self.nx}), got {x.shape}")
        return x

    def solve(self, xcur_B, x_ref=None, xu_warm=None) -> FloatingBSQPResult:
        """The SQP (max_sqp_iters per AL outer iteration, al_iters outer) from xcur_B (nx,) or
        (1, nx); x_ref: None keeps set_x_ref's, else (nx,) or (N, nx); xu_warm: a previous
        result's xu (its controls warm-start; None: the cold start, a damped hold)."""
        x = self._x(xcur_B)
        if x_ref is not None:
            self.set_x_ref(x_ref)
        W = None
        if xu_warm is not None:
            xu = _array(xu_warm, "xu_warm")
            st = self.nx + self.nu
            if xu.shape != (self.N * st - self.nu,):
                raise ValueError(f"xu_warm: expected shape ({self.N * st - self.nu},), got {xu.shape}")
            W = np.stack([xu[k * st + self.nx:(k + 1) * st] for k in range(self.N - 1)])
        d = self._s.solve(x, W, self.max_sqp_iters, self.tol)
        return FloatingBSQPResult(d, self.n_actuated)

    def solve_tick(self, x) -> FloatingBSQPResult:
        """One MPC tick's solve from the measured state x: warm-started from the previous tick's
        plan shifted by one knot and rolled out with its gains (FloatingMPC.step's policy; the
        cold start where that costs less); the first tick (or after :meth:`reset`) cold-starts.
        gato.floating.FloatingController.step wraps it into a gato.StepResult."""
        x = self._x(x)
        if self._warm is None:
            d = self._s.solve(x, None, self.max_sqp_iters, self.tol)
        else:
            Xp, Wp, Kp = self._warm
            d = self._s.solve(x, np.vstack([Wp[1:], Wp[-1:]]), self.max_sqp_iters, self.tol,
                              np.vstack([Xp[1:], Xp[-1:]]), np.concatenate([Kp[1:], Kp[-1:]]), True)
        r = FloatingBSQPResult(d, self.n_actuated)
        self._warm = (r.X, r.W, r.K)
        return r

    @property
    def row_mech(self):
        """"al" when an AL row group exists, "telemetry" with telemetry groups only, else None."""
        mechs = {g["mech"] for g in self._groups}
        return "al" if "al" in mechs else ("telemetry" if mechs else None)
