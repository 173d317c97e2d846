"""The residual interface of the sampling planner's cost terms (RoboKit's ``SimResidualTask``).

A residual term maps what a world shows (qpos, qvel, ctrl, sensordata at a row's clock) to a
residual vector r (``residual_dim``). For terms whose cost is a sum of squares (SensorTask and
ControlTask by default, StateTask with ``squared=True``) ``|r|^2`` is the term's cost; for the
norm and hinge costs (StateTask's default, GraspTask, ``norm=True``) r is the weighted error
whose squared norm Gauss-Newton minimises (the hinge and tolerance shrink r to the excess), while
``compute_weighted_cost`` stays the term's own cost.

Jacobians are taken with respect to the world's state and controls in MuJoCo's tangent layout,
the columns of ``mjd_transitionFD``: [dqpos (nv), dqvel (nv), dact (na), dctrl (nu)].

- :meth:`SimResidualTask.compute_weighted_jacobian_analytic`: the term's derivative with respect
  to what it reads (analytic for StateTask, ControlTask and SensorTask's linear / angle residuals;
  central differences over the sensordata it reads for the rest), chained with MuJoCo's sensor
  derivatives (``mjd_transitionFD``'s C and D, themselves finite differences inside MuJoCo).
- :meth:`SimResidualTask.compute_weighted_jacobian`: central differences through the simulator
  (each column's perturbed state is re-evaluated with ``mj_forward``): the check of the above.

Values come from the context the term was resolved with (:class:`gato.sampling.SimContext`), or
from ``var_values``: None, or a mapping with (nworld, ...) arrays among qpos, qvel, act, ctrl
that replace the context's state before the derived quantities are recomputed (needs MODEL).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from .task import ContextModel, SimContext, Task, as_array

__all__ = ["SimTask", "SimResidualTask", "fd_input_jacobian", "state_jacobian_columns"]

_FD_EPS = 1e-6


def fd_input_jacobian(term, batch, columns) -> dict:
    """{"sensordata": (W, T, m, nsensordata)}: central differences of ``term.residual`` over the
    sensordata ``columns`` (the rest stay zero); no simulation, the inputs only."""
    W, T = batch.sensordata.shape[:2]
    m = term.residual_dim
    J = np.zeros((W, T, m, batch.sensordata.shape[-1]))
    base = batch.sensordata
    for c in columns:
        h = _FD_EPS * max(1.0, float(np.max(np.abs(base[..., c]))) if base.size else 1.0)
        sd = base.copy()
        sd[..., c] += h
        batch.sensordata = sd
        rp = term.residuals(batch)
        sd[..., c] -= 2 * h
        rm = term.residuals(batch)
        J[..., c] = (rp - rm) / (2 * h)
    batch.sensordata = base
    return {"sensordata": J}


def state_jacobian_columns(model) -> tuple:
    """(nx, nu) of the Jacobian columns: nx = 2 nv + na, then nu."""
    return 2 * model.nv + model.na, model.nu


def chain_input_jacobian(jin: dict, nv: int, na: int, nu: int, C=None, D=None) -> np.ndarray:
    """(..., m, nx + nu) state-control Jacobian of an input Jacobian ``jin`` (residual_input_jacobian's
    dict) whose qpos / qvel / ctrl are the state and controls themselves and whose sensordata
    derivatives are C (..., nsensordata, nx), D (..., nsensordata, nu)."""
    some = next(iter(jin.values()))
    out = np.zeros(some.shape[:-1] + (2 * nv + na + nu,))
    if "qpos" in jin:
        out[..., :nv] += jin["qpos"]
    if "qvel" in jin:
        out[..., nv:2 * nv] += jin["qvel"]
    if "ctrl" in jin:
        out[..., 2 * nv + na:] += jin["ctrl"]
    if "sensordata" in jin and jin["sensordata"].shape[-1]:
        out[..., :2 * nv + na] += jin["sensordata"] @ C
        out[..., 2 * nv + na:] += jin["sensordata"] @ D
    return out


class SimTask(Task):
    """A cost term of the sampling planner: ``bind(model)`` (the subclass's: what it reads in a
    compiled model), ``cost(batch)`` (W, T); this class adds RoboKit's context path:
    ``resolve(var_values, context)`` and ``compute_weighted_cost(var_values, out_cost)``."""

    def bind(self, model) -> None:
        """Look up what the term reads in the compiled planning model (or a ContextModel)."""

    # -------------------------------------------------------------- context binding
    def resolve(self, var_values, context: Mapping = None) -> None:
        """Bind the term to a context's worlds (references, sensors, buffers), after swapping
        placeholders. ``resolve(model)`` (one compiled MjModel) binds it to a planning model, as
        SimMPC does."""
        if context is None:
            self._context = None
            self.bind(var_values)
            return
        super().resolve(var_values, context)
        self._context = dict(context)
        self.bind(ContextModel(self._context))

    def _view(self, var_values):
        """(ContextModel, RolloutBatch of the worlds as one row each) for var_values / the context."""
        from .batch import RolloutBatch

        ctx = getattr(self, "_context", None)
        if ctx is None:
            raise ValueError(f"{type(self).__name__}: resolve(var_values, context) first")
        if var_values is not None:
            ctx = _with_state(ctx, var_values)
        cm = ContextModel(ctx)
        W = cm.nworld
        clock = as_array(ctx.get(SimContext.CLOCK, [0, 0, 1])).astype(int).reshape(-1)
        step = int(clock[0])
        t0 = step - int(clock[1]) * (int(clock[2]) if clock.size > 2 else 1) if clock.size > 1 else step
        z = lambda a, n: np.zeros((W, n)) if a is None else a.reshape(W, -1)  # noqa: E731
        nq, nv, nu = cm.nq, cm.nv, cm.nu
        batch = RolloutBatch(model=cm, qpos=z(cm.qpos, nq)[:, None], qvel=z(cm.qvel, nv)[:, None],
                             ctrl=z(cm.ctrl, nu)[:, None], sensordata=cm.sensordata.reshape(W, 1, -1),
                             clock=np.array([step]), ctrl_clock=np.array([step]), t0=t0)
        return cm, batch

    def compute_weighted_cost(self, var_values, out_cost) -> None:
        """Add each world's cost of this term at the context's clock to out_cost (nworld,)."""
        _, batch = self._view(var_values)
        as_array(out_cost)[...] += self.cost(batch)[:, 0]


class SimResidualTask(SimTask):
    """A cost term with residuals: ``residuals(batch)`` (W, T, residual_dim) and
    ``residual_input_jacobian(batch)`` (a dict of derivatives with respect to what it reads, or
    None for finite differences over its sensordata) are the subclass's; this class supplies the
    RoboKit interface on top (module docstring)."""

    #: A scale of the residual rows (a number or one per row), applied to residuals and Jacobians.
    residual_weight: Optional[Any] = None
    #: The device of the term's buffers: "cpu" after init_buffers, None before.
    device: Any = None

    def init_buffers(self, device) -> None:
        """Keep buffers on ``device``: the CPU only ("cpu" or None); others raise ValueError."""
        if device not in (None, "cpu") and str(device) != "cpu":
            raise ValueError(f"device: gato.sampling terms run on the CPU; got {device!r}")
        self.device = "cpu"

    # -------------------------------------------------------------- subclass hooks
    def residuals(self, batch) -> np.ndarray:  # pragma: no cover - every subclass defines it
        raise TypeError(f"{type(self).__name__} defines no residual")

    def residual_input_jacobian(self, batch) -> Optional[dict]:
        """None: finite differences over the sensordata the term reads (``_sensor_columns``)."""
        return None

    def _sensor_columns(self) -> list:
        return []

    def input_jacobian(self, batch) -> dict:
        """The term's derivatives with respect to its inputs (analytic, or the FD fallback)."""
        j = self.residual_input_jacobian(batch)
        return fd_input_jacobian(self, batch, self._sensor_columns()) if j is None else j

    # -------------------------------------------------------------- the interface
    @property
    def residual_dim(self) -> int:
        """Rows of the term's residual (after resolve)."""
        d = getattr(self, "_residual_dim", None)
        if d is None:
            raise ValueError(f"{type(self).__name__}: residual_dim is known after resolve")
        return d

    def residual_cost(self, batch) -> np.ndarray:
        """(W, T) the cost the iLQR sees: the term's cost without its cost-only parts (default: all of it)."""
        return self.cost(batch)

    def compute_weighted_residual(self, var_values, out_residual, row_offset: int = 0):
        """Write each world's weighted residual into out_residual[:, row_offset:row_offset + residual_dim]
        (out_residual (nworld, >= row_offset + residual_dim)); returns out_residual."""
        _, batch = self._view(var_values)
        r = self.residuals(batch)[:, 0]
        if self.residual_weight is not None:
            r = r * np.asarray(self.residual_weight, dtype=np.float64)
        as_array(out_residual)[:, row_offset:row_offset + r.shape[-1]] = r
        return out_residual

    def compute_weighted_jacobian_analytic(self, var_values, args: Any = (), out_jacobian=None,
                                           row_offset: int = 0, kwargs: Any = None):
        """(nworld, residual_dim, nx + nu) Jacobian of the weighted residual with respect to each world's
        [dqpos, dqvel, dact, dctrl] (module docstring), written into out_jacobian[:, row_offset:...]
        when given (then returned)."""
        import mujoco

        cm, batch = self._view(var_values)
        jin = {k: v[:, 0] for k, v in self.input_jacobian(batch).items()}
        C = D = None
        if "sensordata" in jin and np.any(jin["sensordata"]):
            C, D = _sensor_derivatives(cm, mujoco, np.any(jin["sensordata"] != 0, axis=(0, 1)))
        J = chain_input_jacobian(jin, cm.nv, cm.na, cm.nu, C, D)
        if self.residual_weight is not None:
            J = J * np.asarray(self.residual_weight, dtype=np.float64).reshape(-1, 1)
        if out_jacobian is None:
            return J
        as_array(out_jacobian)[:, row_offset:row_offset + J.shape[1]] = J
        return out_jacobian

    def compute_weighted_jacobian(self, var_values, args: Any = (), kwargs: Any = None) -> np.ndarray:
        """(nworld, residual_dim, nx + nu): central differences through the simulator (needs MODEL)."""
        import mujoco

        cm, _ = self._view(var_values)
        m = _need_model(cm)
        ctx = self._context if var_values is None else _with_state(self._context, var_values)
        nv, na, nu = m.nv, m.na, m.nu
        W = cm.nworld
        J = np.zeros((W, self.residual_dim, 2 * nv + na + nu))
        base = {k: as_array(ctx[k]).reshape(W, -1).copy() for k in (SimContext.QPOS, SimContext.QVEL, SimContext.CTRL)}
        act = as_array(ctx[SimContext.ACT]).reshape(W, na).copy() if na else np.zeros((W, 0))
        for col in range(J.shape[-1]):
            res = []
            for sign in (1.0, -1.0):
                q, v = base[SimContext.QPOS].copy(), base[SimContext.QVEL].copy()
                u, a = base[SimContext.CTRL].copy(), act.copy()
                h = sign * _FD_EPS
                if col < nv:
                    for w in range(W):
                        dq = np.zeros(nv)
                        dq[col] = 1.0
                        mujoco.mj_integratePos(m, q[w], dq, h)
                elif col < 2 * nv:
                    v[:, col - nv] += h
                elif col < 2 * nv + na:
                    a[:, col - 2 * nv] += h
                else:
                    u[:, col - 2 * nv - na] += h
                res.append(self._residual_at(m, ctx, q, v, a, u))
            J[..., col] = (res[0] - res[1]) / (2 * _FD_EPS)
        if self.residual_weight is not None:
            J = J * np.asarray(self.residual_weight, dtype=np.float64).reshape(-1, 1)
        return J

    def _residual_at(self, m, ctx, q, v, a, u) -> np.ndarray:
        """(nworld, residual_dim) residual with the worlds at (q, v, a, u), derived quantities by mj_forward."""
        new = _forward_context(m, ctx, q, v, a, u)
        saved = self._context
        try:
            self._context = new
            _, batch = self._view(None)
            return self.residuals(batch)[:, 0]
        finally:
            self._context = saved

    def accumulate_normal_equations(self, var_values, costs, JtJ=None, Jtr=None) -> None:
        """Add the term's cost to costs (nworld,) and, when given, JᵀJ to JtJ (nworld, n, n) and Jᵀr
        to Jtr (nworld, n), n = nx + nu (analytic Jacobian, weighted residual); JtJ / Jtr None: cost only."""
        self.compute_weighted_cost(var_values, costs)
        if JtJ is None and Jtr is None:
            return
        r = np.zeros((ContextModel(self._context).nworld, self.residual_dim))
        self.compute_weighted_residual(var_values, r)
        J = self.compute_weighted_jacobian_analytic(var_values)
        if JtJ is not None:
            as_array(JtJ)[...] += np.einsum("wri,wrj->wij", J, J)
        if Jtr is not None:
            as_array(Jtr)[...] += np.einsum("wri,wr->wi", J, r)


def _need_model(cm):
    m = cm.__dict__.get("_model")
    if m is None:
        raise ValueError("context: Jacobians need SimContext.MODEL (sim_context(sim) gives it)")
    return m


def _with_state(ctx: dict, var_values) -> dict:
    """The context with var_values' qpos / qvel / act / ctrl, derived quantities recomputed."""
    if not isinstance(var_values, Mapping):
        raise ValueError(f"var_values: expected None or a mapping of qpos / qvel / act / ctrl arrays, got "
                         f"{type(var_values).__name__}")
    cm = ContextModel(ctx)
    m = _need_model(cm)
    W = cm.nworld
    pick = lambda k, key, n: np.asarray(var_values[k], dtype=np.float64).reshape(W, n) if k in var_values \
        else as_array(ctx[key]).reshape(W, n)  # noqa: E731
    return _forward_context(m, ctx, pick("qpos", SimContext.QPOS, m.nq), pick("qvel", SimContext.QVEL, m.nv),
                            pick("act", SimContext.ACT, m.na), pick("ctrl", SimContext.CTRL, m.nu))


def _forward_context(m, ctx, q, v, a, u) -> dict:
    """ctx with the worlds' state replaced and its derived values (sensordata, poses, contacts) recomputed."""
    import mujoco

    from .task import sim_context

    class _Sim:  # the few members sim_context reads
        mjm = m
        data = []
    t = as_array(ctx.get(SimContext.TIME, np.zeros(q.shape[0]))).reshape(-1)
    for w in range(q.shape[0]):
        d = mujoco.MjData(m)
        d.time = float(t[w]) if t.size > w else 0.0
        d.qpos[:], d.qvel[:], d.ctrl[:] = q[w], v[w], u[w]
        if m.na:
            d.act[:] = a[w]
        mujoco.mj_forward(m, d)
        _Sim.data.append(d)
    new = dict(ctx)
    new.update(sim_context(_Sim))
    for key in (SimContext.SENSORS, SimContext.BODIES, SimContext.GEOMS):  # the context's own names
        if key in ctx:
            new[key] = ctx[key]
    return new


def _sensor_derivatives(cm, mujoco, used):
    """(C (W, ns, nx), D (W, ns, nu)): MuJoCo's sensor derivatives at each world's context state
    (mjd_transitionFD, centred); a context's virtual pose / contact sensors (past the model's
    sensordata) that ``used`` (ns,) marks: central differences of the recomputed context."""
    m = _need_model(cm)
    W, ns_all = cm.nworld, cm.nsensordata
    nx, nu = 2 * m.nv + m.na, m.nu
    C, D = np.zeros((W, ns_all, nx)), np.zeros((W, ns_all, nu))
    ctx = cm.context
    t = as_array(ctx.get(SimContext.TIME, np.zeros(W))).reshape(-1)
    A_, B_ = np.zeros((nx, nx)), np.zeros((nx, nu))
    Cw, Dw = np.zeros((m.nsensordata, nx)), np.zeros((m.nsensordata, nu))
    for w in range(W):
        d = mujoco.MjData(m)
        d.time = float(t[w]) if t.size > w else 0.0
        d.qpos[:], d.qvel[:] = cm.qpos[w], cm.qvel[w]
        if m.nu:
            d.ctrl[:] = cm.ctrl[w]
        if m.na:
            d.act[:] = as_array(ctx[SimContext.ACT]).reshape(W, m.na)[w]
        mujoco.mj_forward(m, d)
        mujoco.mjd_transitionFD(m, d, 1e-6, 1, A_, B_, Cw, Dw)
        C[w, :m.nsensordata], D[w, :m.nsensordata] = Cw, Dw
    if ns_all > m.nsensordata and np.any(used[m.nsensordata:]):
        q0, v0, u0 = cm.qpos.reshape(W, -1), cm.qvel.reshape(W, -1), cm.ctrl.reshape(W, -1)
        a0 = as_array(ctx[SimContext.ACT]).reshape(W, m.na) if m.na else np.zeros((W, 0))
        for col in range(nx + nu):
            vals = []
            for sign in (1.0, -1.0):
                q, v, a, u = q0.copy(), v0.copy(), a0.copy(), u0.copy()
                h = sign * _FD_EPS
                if col < m.nv:
                    for w in range(W):
                        dq = np.zeros(m.nv)
                        dq[col] = 1.0
                        mujoco.mj_integratePos(m, q[w], dq, h)
                elif col < 2 * m.nv:
                    v[:, col - m.nv] += h
                elif col < nx:
                    a[:, col - 2 * m.nv] += h
                else:
                    u[:, col - nx] += h
                vals.append(ContextModel(_forward_context(m, ctx, q, v, a, u)).sensordata[:, m.nsensordata:])
            dcol = (vals[0] - vals[1]) / (2 * _FD_EPS)
            if col < nx:
                C[:, m.nsensordata:, col] = dcol
            else:
                D[:, m.nsensordata:, col - nx] = dcol
    return C, D
