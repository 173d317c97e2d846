"""iLQR over MuJoCo rollouts: SimMPC's ``planner="ilqr"`` (RoboKit's ``ILQROptimizer``), on the CPU.

The decision variables are command offsets held for ``node_steps`` sim steps each (N intervals
over the horizon) on top of the reference commands: step k applies
u_k = clip(ctrl_ref[t0 + k] + delta_j, lo, hi), j = k // node_steps. One iteration:

1. roll the current offsets out (``mujoco.rollout``) and linearise the dynamics at every step
   along it with MuJoCo's ``mjd_transitionFD`` (A_k, B_k, and the sensor derivatives C_k, D_k);
2. Gauss-Newton cost from the residual terms (:mod:`gato.sampling.residuals`): row k's residual
   r_k (scaled by sqrt of the row's running / terminal weight) and its Jacobian: sensor terms
   through C_k, D_k, state terms (they read the state after the step) through A_k, B_k, control
   terms directly; a held offset moves every step of its interval (clipped components: zero);
3. per interval, the linearised steps condense into one step x_b = F x_a + G delta_j with the
   interval's quadratic cost; a Riccati backward pass with Levenberg-Marquardt regularisation
   mu I on Q_uu gives the gains (k_j, K_j); an indefinite Q_uu raises mu and repeats;
4. line search on the rollout cost of the residual terms: delta_j + alpha k_j + K_j (x_a' - x_a)
   for alpha in ``line_search``, rolled out interval by interval (all alphas in one call each);
   the cheapest that lowers the cost is kept and mu shrinks, else mu grows and the offsets stay.

Costs are sums over rows of ``|r|^2``-type term costs (no 1/2); the quadratic model is that of
1/2 sum |r + J dz|^2 + mu/2 |delta|^2 (the gradient and Hessian halved alike), so one iteration
from linear dynamics solves the regularised least-squares problem exactly (tested against a
dense NumPy solve). Contact terms (cost-only: StateTask's penetration / contacts, ContactTask)
are not seen by the iLQR, as in RoboKit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from .residuals import SimResidualTask

__all__ = ["ILQROptimizer", "ILQROptimizerConfig", "ILQRProblem"]


@dataclass
class ILQROptimizerConfig:
    """Settings of :class:`ILQROptimizer` (``SimMPCConfig.ilqr``; ``max_iter`` is SimMPCConfig.max_iterations there).

    - ``max_iter`` [1]: iterations per call of :meth:`ILQROptimizer.optimize`.
    - ``mu_init`` [1e-6], ``mu_min`` [1e-9], ``mu_max`` [1e8], ``mu_factor`` [10]: Levenberg-Marquardt
      regularisation mu I of Q_uu (command units^-2 x cost); shrinks by mu_factor after an
      accepted step, grows after a rejected one or an indefinite Q_uu.
    - ``line_search`` [(1, 0.5, 0.25, 0.1)]: step fractions tried (all in one rollout batch).
    - ``max_step`` [None]: cap on |alpha k_j + K_j dx| per interval and command [command units].
    - ``fd_eps`` [1e-6], ``fd_centered`` [False]: mjd_transitionFD's perturbation and scheme.
    - ``feedback`` [True]: use K_j in the forward pass (False: open-loop steps alpha k_j).
    """

    max_iter: int = 1
    mu_init: float = 1e-6
    mu_min: float = 1e-9
    mu_max: float = 1e8
    mu_factor: float = 10.0
    line_search: Sequence[float] = (1.0, 0.5, 0.25, 0.1)
    max_step: Optional[float] = None
    fd_eps: float = 1e-6
    fd_centered: bool = False
    feedback: bool = True

    def __post_init__(self):
        def num(name, lo, strict=False):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(float(v)) or (float(v) <= lo if strict else float(v) < lo):
                raise ValueError(f"ilqr.{name}: expected a finite number {'>' if strict else '>='} {lo}, got {v!r}")
            setattr(self, name, float(v))
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"ilqr.max_iter: expected an integer >= 1, got {self.max_iter!r}")
        for n in ("mu_init", "mu_min", "mu_max"):
            num(n, 0.0)
        num("mu_factor", 1.0, strict=True)
        num("fd_eps", 0.0, strict=True)
        if not (self.mu_min <= self.mu_init <= self.mu_max):
            raise ValueError(f"ilqr.mu_init: expected mu_min <= mu_init <= mu_max, got {self.mu_min}, "
                             f"{self.mu_init}, {self.mu_max}")
        ls = tuple(float(a) for a in self.line_search)
        if not ls or any(not (0 < a <= 1) for a in ls):
            raise ValueError(f"ilqr.line_search: expected step fractions in (0, 1], got {self.line_search!r}")
        self.line_search = ls
        if self.max_step is not None:
            num("max_step", 0.0, strict=True)

    @classmethod
    def cautious(cls, max_iter: int = 1) -> "ILQROptimizerConfig":
        """``SimMPCConfig.ilqr=None``'s: damped (mu starts at 1: robot costs seldom penalise
        commands, so Q_uu alone can be near singular) and cautious (steps of at most 0.2 command
        units per interval, line search down to 1/8)."""
        return cls(max_iter=max_iter, mu_init=1.0, mu_min=1e-4, line_search=(1.0, 0.5, 0.25, 0.125), max_step=0.2)


@dataclass
class ILQRProblem:
    """One instance's problem: model, start state x0 (nstate full physics), warm start (nv),
    reference commands ``uref`` (H, nu), bounds lo / hi (nu,), terms [(term, running, terminal)]
    (residual terms only are used), terminal_scale (default for terms without one), t0 [sim step],
    node_steps, and a ``rollout(x0s (n, nstate), warm (n, nv), ctrl (n, T, nu)) -> (state, sensordata)``."""

    model: object
    x0: np.ndarray
    warm: np.ndarray
    uref: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    terms: list
    terminal_scale: float
    t0: int
    node_steps: int
    rollout: object
    layout: dict = field(default_factory=dict)

    @property
    def H(self) -> int:
        return self.uref.shape[0]

    @property
    def N(self) -> int:
        return -(-self.H // self.node_steps)


class ILQROptimizer:
    """Refines held command offsets delta (N, nu) of an :class:`ILQRProblem` (module docstring).

    ``optimize(problem, delta)`` runs ``config.max_iter`` iterations and returns (delta, info):
    info {iterations, cost (residual terms, the returned offsets), cost0 (the given ones), mu,
    accepted (per iteration), alphas (per iteration, None when rejected)}. The regularisation mu
    carries over between calls (a receding-horizon plan starts where the last one ended).
    """

    def __init__(self, config: Optional[ILQROptimizerConfig] = None):
        self.config = config or ILQROptimizerConfig()
        self.mu = self.config.mu_init

    # ------------------------------------------------------------------ pieces
    def commands(self, p: ILQRProblem, delta: np.ndarray):
        """(U (H, nu) clipped commands, mask (H, nu): 1 where the offset moves the command)."""
        j = np.arange(p.H) // p.node_steps
        raw = p.uref + delta[j]
        U = np.clip(raw, p.lo, p.hi)
        mask = ((raw > p.lo) & (raw < p.hi)) | (p.lo == p.hi)
        return U, (mask & (p.lo < p.hi)).astype(np.float64)

    def batch(self, p: ILQRProblem, state, sens, ctrl):
        """The RolloutBatch of rollouts (W, H, ...) of the problem."""
        from .batch import RolloutBatch

        m, lay = p.model, p.layout
        H = ctrl.shape[1]
        k = np.arange(H)
        return RolloutBatch(model=m, qpos=state[..., lay["qpos"]:lay["qpos"] + m.nq],
                            qvel=state[..., lay["qvel"]:lay["qvel"] + m.nv], ctrl=ctrl, sensordata=sens,
                            clock=p.t0 + k + 1, ctrl_clock=p.t0 + k, t0=p.t0)

    def row_weights(self, p: ILQRProblem, run: float, term_scale) -> np.ndarray:
        w = np.full(p.H, float(run))
        w[-1] = p.terminal_scale if term_scale is None else term_scale
        return w

    def cost(self, p: ILQRProblem, state, sens, ctrl) -> np.ndarray:
        """(W,) rollout costs of the residual terms (their own costs; contact terms left out)."""
        b = self.batch(p, state, sens, ctrl)
        total = np.zeros(ctrl.shape[0])
        for term, run, ts in p.terms:
            if isinstance(term, SimResidualTask):
                total += term.residual_cost(b) @ self.row_weights(p, run, ts)
        return np.where(np.isfinite(total), total, np.inf)

    def linearize(self, p: ILQRProblem, state, ctrl):
        """A (H, nx, nx), B (H, nx, nu), C (H, ns, nx), D (H, ns, nu) along one rollout (mjd_transitionFD
        at every step from the state before it)."""
        import mujoco

        m, H = p.model, ctrl.shape[0]
        nx, nu, ns = 2 * m.nv + m.na, m.nu, m.nsensordata
        A, B = np.zeros((H, nx, nx)), np.zeros((H, nx, nu))
        C, D = np.zeros((H, ns, nx)), np.zeros((H, ns, nu))
        d = mujoco.MjData(m)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        d.qacc_warmstart[:] = p.warm
        for k in range(H):
            mujoco.mj_setState(m, d, p.x0 if k == 0 else state[k - 1], spec)
            d.ctrl[:] = ctrl[k]
            mujoco.mjd_transitionFD(m, d, self.config.fd_eps, int(self.config.fd_centered), A[k], B[k], C[k], D[k])
        return A, B, C, D

    def quadratize(self, p: ILQRProblem, state, sens, ctrl, mask, A, B, C, D):
        """Per interval j: (F, G, qx, qu, Qxx, Quu, Qux) of 1/2 sum |r + R dz|^2 over its rows, in
        the interval's start-state deviation and offset (module docstring, step 3)."""
        m = p.model
        nv, na, nu = m.nv, m.na, m.nu
        nx = 2 * nv + na
        b = self.batch(p, state[None], sens[None], ctrl[None])
        rs, Gx, Gu = [], [], []
        for term, run, ts in p.terms:
            if not isinstance(term, SimResidualTask):
                continue
            sw = np.sqrt(self.row_weights(p, run, ts))
            r = term.residuals(b)[0] * sw[:, None]
            jin = {k: v[0] * sw[:, None, None] for k, v in term.input_jacobian(b).items()}
            mdim = r.shape[-1]
            gx, gu = np.zeros((p.H, mdim, nx)), np.zeros((p.H, mdim, nu))
            if "qpos" in jin or "qvel" in jin:   # the state after the step: through A, B
                Jy = np.zeros((p.H, mdim, nx))
                if "qpos" in jin:
                    Jy[..., :nv] = jin["qpos"]
                if "qvel" in jin:
                    Jy[..., nv:2 * nv] = jin["qvel"]
                gx += Jy @ A
                gu += Jy @ B
            if "sensordata" in jin and jin["sensordata"].shape[-1]:
                gx += jin["sensordata"] @ C
                gu += jin["sensordata"] @ D
            if "ctrl" in jin:
                gu += jin["ctrl"]
            rs.append(r)
            Gx.append(gx)
            Gu.append(gu)
        r, Gx, Gu = np.concatenate(rs, -1), np.concatenate(Gx, -2), np.concatenate(Gu, -2)
        Gu = Gu * mask[:, None, :]
        out = []
        for j in range(p.N):
            a, e = j * p.node_steps, min(p.H, (j + 1) * p.node_steps)
            Phi, Gam = np.eye(nx), np.zeros((nx, nu))
            qx, qu = np.zeros(nx), np.zeros(nu)
            Qxx, Quu, Qux = np.zeros((nx, nx)), np.zeros((nu, nu)), np.zeros((nu, nx))
            for k in range(a, e):
                Bm = B[k] * mask[k]
                Rx, Ru = Gx[k] @ Phi, Gx[k] @ Gam + Gu[k]
                qx += Rx.T @ r[k]
                qu += Ru.T @ r[k]
                Qxx += Rx.T @ Rx
                Quu += Ru.T @ Ru
                Qux += Ru.T @ Rx
                Phi, Gam = A[k] @ Phi, A[k] @ Gam + Bm
            out.append((Phi, Gam, qx, qu, Qxx, Quu, Qux))
        return out

    def backward(self, quads, mu: float):
        """Gains (kff (N, nu), K (N, nu, nx)) of the regularised Riccati pass, or None where Q_uu + mu I
        is not positive definite."""
        nx = quads[0][0].shape[0]
        nu = quads[0][3].shape[0]
        Vx, Vxx = np.zeros(nx), np.zeros((nx, nx))
        N = len(quads)
        kff, K = np.zeros((N, nu)), np.zeros((N, nu, nx))
        for j in range(N - 1, -1, -1):
            F, G, qx, qu, Qxx, Quu, Qux = quads[j]
            Qx, Qu = qx + F.T @ Vx, qu + G.T @ Vx
            Qxx_, Quu_, Qux_ = Qxx + F.T @ Vxx @ F, Quu + G.T @ Vxx @ G, Qux + G.T @ Vxx @ F
            Quu_ = Quu_ + mu * np.eye(nu)   # the regularised model's own Q_uu: V below is its exact value
            try:
                L = np.linalg.cholesky(Quu_)
            except np.linalg.LinAlgError:
                return None
            solve = lambda X: np.linalg.solve(L.T, np.linalg.solve(L, X))  # noqa: E731
            kff[j], K[j] = -solve(Qu), -solve(Qux_)
            k_, K_ = kff[j], K[j]
            Vx = Qx + K_.T @ Quu_ @ k_ + K_.T @ Qu + Qux_.T @ k_
            Vxx = Qxx_ + K_.T @ Quu_ @ K_ + K_.T @ Qux_ + Qux_.T @ K_
            Vxx = 0.5 * (Vxx + Vxx.T)
        return kff, K

    def linear_step(self, quads, kff, K, alpha: float = 1.0) -> np.ndarray:
        """(N, nu) offset steps of the gains applied along the linearised dynamics (no simulation)."""
        nx = quads[0][0].shape[0]
        dx, out = np.zeros(nx), []
        for (F, G, *_), k_, K_ in zip(quads, kff, K):
            du = alpha * k_ + K_ @ dx
            out.append(du)
            dx = F @ dx + G @ du
        return np.array(out)

    def _tangent(self, p, x_new, x_ref):
        """(n, nx) tangent difference of full-physics states x_new (n, nstate) and x_ref (nstate,)."""
        import mujoco

        m, lay = p.model, p.layout
        nv, na = m.nv, m.na
        out = np.zeros((x_new.shape[0], 2 * nv + na))
        qr = x_ref[lay["qpos"]:lay["qpos"] + m.nq]
        for i, x in enumerate(x_new):
            mujoco.mj_differentiatePos(m, out[i, :nv], 1.0, qr, x[lay["qpos"]:lay["qpos"] + m.nq])
        out[:, nv:2 * nv] = x_new[:, lay["qvel"]:lay["qvel"] + nv] - x_ref[lay["qvel"]:lay["qvel"] + nv]
        if na:
            out[:, 2 * nv:] = x_new[:, lay["act"]:lay["act"] + na] - x_ref[lay["act"]:lay["act"] + na]
        return out

    def forward(self, p: ILQRProblem, delta, kff, K, state):
        """Line-search rollouts: (deltas (S, N, nu), states (S, H, nstate), sens, ctrl) for the alphas."""
        c = self.config
        alphas = np.array(c.line_search)
        S, N, nu = len(alphas), p.N, delta.shape[-1]
        new = np.repeat(delta[None], S, axis=0)
        x = np.repeat(p.x0[None], S, axis=0)
        warm = np.repeat(p.warm[None], S, axis=0)
        states = np.empty((S, p.H, p.x0.shape[0]))
        sens = np.empty((S, p.H, p.model.nsensordata))
        ctrl = np.empty((S, p.H, nu))
        for j in range(N):
            a, e = j * p.node_steps, min(p.H, (j + 1) * p.node_steps)
            x_ref = p.x0 if a == 0 else state[a - 1]
            dx = self._tangent(p, x, x_ref) if c.feedback else np.zeros((S, K.shape[-1]))
            step = alphas[:, None] * kff[j][None] + dx @ K[j].T
            if c.max_step is not None:
                step = np.clip(step, -c.max_step, c.max_step)
            new[:, j] = delta[j] + step
            u = np.clip(p.uref[a:e][None] + new[:, j][:, None], p.lo, p.hi)
            st, sd = p.rollout(x, warm, u)
            states[:, a:e], sens[:, a:e], ctrl[:, a:e] = st, sd, u
            x = st[:, -1].copy()
        return new, states, sens, ctrl

    # ------------------------------------------------------------------ driver
    def optimize(self, p: ILQRProblem, delta: np.ndarray, max_iter: Optional[int] = None):
        c = self.config
        delta = np.array(delta, dtype=np.float64).reshape(p.N, p.uref.shape[1])
        U, mask = self.commands(p, delta)
        state, sens = (a[0].copy() for a in p.rollout(p.x0[None], p.warm[None], U[None]))
        cost = float(self.cost(p, state[None], sens[None], U[None])[0])
        info = dict(cost0=cost, accepted=[], alphas=[], iterations=0)
        for _ in range(max_iter or c.max_iter):
            info["iterations"] += 1
            A, B, C, D = self.linearize(p, state, U)
            quads = self.quadratize(p, state, sens, U, mask, A, B, C, D)
            gains = None
            while gains is None and self.mu <= c.mu_max:
                gains = self.backward(quads, self.mu)
                if gains is None:
                    self.mu = max(self.mu * c.mu_factor, c.mu_min)
            if gains is None:
                self.mu = c.mu_max
                info["accepted"].append(False)
                info["alphas"].append(None)
                break
            news, states, senss, ctrls = self.forward(p, delta, *gains, state)
            costs = self.cost(p, states, senss, ctrls)
            i = int(np.argmin(costs))
            if costs[i] < cost:
                delta, state, sens, U = news[i], states[i].copy(), senss[i].copy(), ctrls[i].copy()
                cost = float(costs[i])
                _, mask = self.commands(p, delta)
                self.mu = max(self.mu / c.mu_factor, c.mu_min)
                info["accepted"].append(True)
                info["alphas"].append(float(c.line_search[i]))
            else:
                self.mu = min(self.mu * c.mu_factor, c.mu_max)
                info["accepted"].append(False)
                info["alphas"].append(None)
        info.update(cost=cost, mu=self.mu)
        return delta, info


# ---------------------------------------------------------------------- SimMPC's planner="ilqr"
class ILQRPlans:
    """SimMPC's iLQR state: per instance an :class:`ILQROptimizer` and its held offsets (N, nu),
    shifted by the elapsed whole intervals at the next plan (the last offset repeats)."""

    def __init__(self, mpc):
        c = mpc.config
        base = c.ilqr if c.ilqr is not None else ILQROptimizerConfig.cautious()
        self.opts = [ILQROptimizer(ILQROptimizerConfig(**{**base.__dict__, "max_iter": c.max_iterations}))
                     for _ in range(c.batch_size)]
        self.N = -(-c.horizon_steps // c.node_steps)
        self.delta = np.zeros((c.batch_size, self.N, mpc.nu))
        self.t_prev: Optional[int] = None

    def shift(self, t0: int, node_steps: int) -> None:
        if self.t_prev is None or t0 <= self.t_prev:
            return
        s = int(round((t0 - self.t_prev) / node_steps))
        if s > 0:
            j = np.minimum(np.arange(self.N) + s, self.N - 1)
            self.delta = self.delta[:, j].copy()

    def plan(self, mpc, x0: np.ndarray, warm: np.ndarray, t0: int) -> list:
        """Refine every instance's offsets from x0 (B, nstate); set mpc.plan_commands; return infos."""
        c = mpc.config
        self.shift(t0, c.node_steps)
        uref = mpc._ref_window(t0)
        infos = []
        for b, opt in enumerate(self.opts):
            p = ILQRProblem(model=mpc.model, x0=x0[b], warm=warm[b], uref=uref[b], lo=mpc.lo, hi=mpc.hi,
                            terms=c.terms, terminal_scale=c.terminal_scale, t0=t0, node_steps=c.node_steps,
                            rollout=lambda x, w, u: mpc.engine.run(mpc.model, x, w, u), layout=mpc._layout)
            self.delta[b], info = opt.optimize(p, self.delta[b])
            U, _ = opt.commands(p, self.delta[b])
            mpc.plan_commands[b] = U
            infos.append(dict(t0=t0, iterations=info["iterations"], ilqr_cost=info["cost"],
                              ilqr_cost0=info["cost0"], mu=info["mu"], accepted=info["accepted"],
                              alphas=info["alphas"], executed="plan", stages=None, per_iteration=[]))
        self.t_prev = t0
        return infos
