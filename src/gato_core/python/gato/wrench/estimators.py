"""External-wrench estimators: sample B wrench hypotheses and refit on feedback, or identify the
wrench directly from the motion.

Every estimator here follows one duck-typed contract, the one
:class:`gato.hypotheses.ForceHypothesisBatch` consumes::

    batch_size                                   B, the rows of generate_batch()
    generate_batch() -> (B, 6) float64           WORLD-axes wrenches [force(3) N; torque(3) N*m]
                                                 acting at the EE frame origin
    update(best_idx, prediction_errors, batch_used)   feed back which row explained the last
                                                 motion best (errors: (B,), lower = better)
    reset();  get_stats() -> dict

``generate_batch`` is pure: it returns the same batch until the next ``update``/``identify``
(the controller calls it in both ``warmup`` and ``step``). All randomness comes from a
``numpy.random.Generator`` seeded at construction (and re-seeded by ``reset``), so a seed
reproduces a run bit for bit.

Feedback conventions: a ``+inf`` prediction error marks a hypothesis whose rollout diverged (it
loses); NaN or ``-inf`` is a caller bug (ValueError naming the argument). When every error is
``+inf`` the update carries no information and is skipped (``get_stats()["skipped_updates"]``).

Divergence guard: every estimate is clamped to ``max_wrench`` on its force and torque halves
(norms) and each clamp is counted (``get_stats()["n_clamped"]``), so no estimator ever emits a
NaN or an unbounded wrench.

Units: forces N, torques N*m, radii and sigmas in the same units, times s.

The identifier (:class:`OneStepWrenchIdentifier`) and its sampler live in
:mod:`gato.wrench.identifier`, the swing-aware :class:`PendulumSwingEstimator` in
:mod:`gato.wrench.swing`.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ForceEstimator", "CEMForceEstimator", "fibonacci_sphere", "random_rotation", "trilaterate"]

#: Rows of the deterministic "core" seeds at the head of a sampled batch (estimate, zero,
#: momentum seed) when the batch is wide enough (B >= 4) to explore as well.
_CORE = 3


# ----------------------------------------------------------------- argument checks
def _batch_size(b, minimum=1) -> int:
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or int(b) < minimum:
        raise ValueError(f"batch_size: expected an integer >= {minimum}, got {b!r}")
    return int(b)


def _real(v, name, lo=None, hi=None, lo_open=False, hi_open=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise ValueError(f"{name}: expected a finite number, got {v!r}")
    v = float(v)
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise ValueError(f"{name}: expected a value {'>' if lo_open else '>='} {lo}, got {v}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise ValueError(f"{name}: expected a value {'<' if hi_open else '<='} {hi}, got {v}")
    return v


def _seed(seed, allow_none=True):
    if seed is None and allow_none:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise ValueError(f"seed: expected a non-negative integer{' or None' if allow_none else ''}, got {seed!r}")
    return int(seed)


def _feedback(best_idx, errors, batch_used, B, last_batch, name="prediction_errors"):
    """Validated (best, errors (B,), batch (B, 6)) of an update call; batch_used None -> the
    last generated batch."""
    if isinstance(best_idx, bool) or not isinstance(best_idx, (int, np.integer)) or not 0 <= int(best_idx) < B:
        raise ValueError(f"best_idx: expected an index in [0, {B}), got {best_idx!r}")
    try:
        e = np.array(errors, dtype=np.float64).reshape(-1) if errors is not None else None
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected ({B},) numbers, got {type(errors).__name__}") from None
    if e is None or e.shape != (B,):
        raise ValueError(f"{name}: expected shape ({B},), got {None if e is None else np.shape(errors)}")
    if np.any(np.isnan(e)) or np.any(e == -np.inf):
        raise ValueError(f"{name}: contains NaN or -inf (a diverged rollout is +inf)")
    if batch_used is None:
        if last_batch is None:
            raise ValueError("batch_used: None and no batch generated yet; pass the (B, 6) batch the errors "
                             "were scored under")
        b = last_batch
    else:
        try:
            b = np.array(batch_used, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"batch_used: expected ({B}, 6) wrenches, got {type(batch_used).__name__}") from None
        if b.shape != (B, 6):
            raise ValueError(f"batch_used: expected shape ({B}, 6), got {b.shape}")
        if not np.all(np.isfinite(b)):
            raise ValueError("batch_used: contains NaN or Inf")
    return int(best_idx), e, b


def _clamp_halves(w, max_wrench) -> tuple[np.ndarray, bool]:
    """w (6,) with its force and torque halves scaled down to norm <= max_wrench; (w, clamped)."""
    w = np.array(w, dtype=np.float64)
    clamped = False
    for half in (slice(0, 3), slice(3, 6)):
        n = float(np.linalg.norm(w[half]))
        if n > max_wrench:
            w[half] *= max_wrench / n
            clamped = True
    return w, clamped


def fibonacci_sphere(n: int) -> np.ndarray:
    """(n, 3) near-uniform unit vectors on the sphere (the Fibonacci spiral; n = 1: +z)."""
    if n <= 0:
        return np.zeros((0, 3))
    if n == 1:
        return np.array([[0.0, 0.0, 1.0]])
    i = np.arange(n, dtype=np.float64)
    z = 1.0 - 2.0 * i / (n - 1)
    r = np.sqrt(np.clip(1.0 - z * z, 0.0, None))
    phi = 2.0 * np.pi * i / ((1.0 + math.sqrt(5.0)) / 2.0)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def trilaterate(forces, errors):
    """The force (3,) that best explains scored rows under an isotropic error model, or None.

    Model: each row's error is e_b = sqrt(c) ||f* - f_b|| (the generalized-momentum residual
    of gato.hypotheses.ForceHypothesisBatch is ||J^T (w* - w_b)||, isotropic up to J's
    conditioning). Differences against the best row cancel the quadratic term::

        e_b^2 - e_0^2 = -2 (f_b - f_0) . (c f*) + c (|f_b|^2 - |f_0|^2)

    linear in the 4 unknowns (c, c f*): least squares over the finite rows. None when fewer than
    5 finite rows, the rows do not span 3-D, or c <= 0 (the data contradict the model).
    """
    f = np.asarray(forces, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    ok = np.isfinite(e)
    f, e = f[ok], e[ok]
    if len(e) < 5:
        return None
    i0 = int(np.argmin(e))
    df = f - f[i0]
    keep = np.arange(len(e)) != i0
    A = np.column_stack([-2.0 * df[keep], np.sum(f[keep] ** 2, axis=1) - np.sum(f[i0] ** 2)])
    y = e[keep] ** 2 - e[i0] ** 2
    if np.linalg.matrix_rank(A[:, :3], tol=1e-9 * max(1.0, float(np.abs(A[:, :3]).max()))) < 3:
        return None
    sol, *_ = np.linalg.lstsq(A, y, rcond=None)
    c = sol[3]
    if not np.isfinite(c) or c <= 0:
        return None
    out = sol[:3] / c
    return out if np.all(np.isfinite(out)) else None


def random_rotation(rng) -> np.ndarray:
    """(3, 3) rotation drawn uniformly (Haar) from ``rng``: QR of a Gaussian matrix, signs fixed."""
    Q, R = np.linalg.qr(rng.standard_normal((3, 3)))
    Q = Q * np.sign(np.diag(R))[None, :]
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


# ----------------------------------------------------------------- Fibonacci-sphere sampler
class ForceEstimator:
    """Fibonacci-sphere external-wrench hypothesis sampler (batch-as-identity).

    Each batch entry rolls out under one candidate wrench; the winner of the one-step rollout
    test moves the estimate and drives the sampling radius.

    Batch rows (B >= 4): ``[0]`` the smoothed estimate, ``[1]`` zero (the nominal model), ``[2]``
    the momentum seed (estimate + 0.5 momentum), ``[3:]`` the estimate's force plus ``radius``
    times B - 3 Fibonacci-sphere directions, rotated by a fresh seeded random rotation after
    every update (so successive batches probe different directions). From B = 8 the last row is
    instead the TRILATERATION seed once the first feedback arrived: the force that best explains
    the last batch's errors under an isotropic error model (:func:`trilaterate`), a model-based
    jump the sphere would need many ticks to walk (it only moves the estimate when it wins the
    rollout like any row; the radius is kept then). B = 1: the smoothed
    estimate alone (no exploration: the estimate never moves); B = 2, 3: the smoothed estimate
    and B - 1 sphere rows. Torques stay at the estimate's torque (this sampler searches force).

    Update with the winner w_b of the batch that was scored::

        momentum <- beta * momentum + (1 - beta) * (w_b - estimate)
        estimate <- estimate + alpha * (w_b - estimate) + 0.5 * (1 - alpha) * momentum
        smoothed <- (1 - smoothing_factor) * smoothed + smoothing_factor * estimate
        radius   <- radius * RADIUS_GROW   if a sphere row won (the truth may lie further out)
                    radius * RADIUS_SHRINK if row 0 or 1 won (the estimate explains the motion)
                    radius                 if the momentum seed won (still travelling)

    clipped to [min_radius, max_radius]; the estimate is clamped to ``max_wrench``.

    Centred sampling (``centre``, keyword-only; None = the above, unchanged): a sensor-rate
    identifier (duck-typed: ``identify(q, dq, dq_next, tau_applied, dt, q_next=None)``,
    ``generate_batch()`` whose row 0 is its wrench now, ``reset()``; e.g. an
    :class:`OneStepWrenchIdentifier` in mode "weight" or a B = 1
    :class:`gato.swing.PendulumSwingEstimator`) whose current wrench c is added to every row: the
    estimate, momentum, radius and trilateration above then search the RESIDUAL w - c (row 1 is
    c itself instead of zero), so the sphere is spread around what the identifier knows rather
    than around the slowly walking estimate. :meth:`update` subtracts the c the scored batch was
    generated with; :meth:`reset` resets the identifier too. No trilateration row then (the last
    row stays a sphere row): its isotropic model reads the errors as the force's alone, but with
    a centre they are mostly the centre's own misprediction of a swinging payload, and its jumps
    walked the residual to hundreds of N (payload experiment, seed 3: 123 of 165 wins, a
    diverged world). Feeding the identifier is the
    caller's job (gato.hypotheses.ForceHypothesisBatch exposes it as its ``sensor_identifier``).

    Args:
        batch_size: B >= 1.
        initial_radius: sphere radius at start and after reset [N].
        min_radius, max_radius: radius bounds [N], 0 < min <= max.
        smoothing_factor: EMA weight of the smoothed estimate (row 0), in (0, 1].
        seed: seed of the rotation generator (None: fresh entropy, not reproducible).
        alpha: step of the estimate toward the winning hypothesis, in (0, 1].
        beta: momentum retention, in [0, 1).
        max_wrench: keyword-only divergence guard [N, N*m] on the force / torque halves.
        centre: keyword-only sensor-rate identifier the batch is centred on (see above), or None.
    """

    RADIUS_GROW = 1.25
    RADIUS_SHRINK = 0.8
    #: Smallest batch that carries the trilateration row.
    TRI_MIN_BATCH = 8

    def __init__(self, batch_size, initial_radius=10.0, min_radius=1.0, max_radius=100.0, smoothing_factor=0.3,
                 seed=0, alpha=0.5, beta=0.8, *, max_wrench=2000.0, centre=None):
        self.batch_size = _batch_size(batch_size)
        if centre is not None:
            missing = [a for a in ("identify", "generate_batch", "reset") if not callable(getattr(centre, a, None))]
            if missing:
                raise ValueError(f"centre: expected None or a sensor-rate identifier (identify / generate_batch / "
                                 f"reset), got {type(centre).__name__} (no {missing[0]}())")
        self.centre = centre
        self.min_radius = _real(min_radius, "min_radius", 0.0, lo_open=True)
        self.max_radius = _real(max_radius, "max_radius", self.min_radius)
        self.initial_radius = _real(initial_radius, "initial_radius", self.min_radius, self.max_radius)
        self.smoothing_factor = _real(smoothing_factor, "smoothing_factor", 0.0, 1.0, lo_open=True)
        self.alpha = _real(alpha, "alpha", 0.0, 1.0, lo_open=True)
        self.beta = _real(beta, "beta", 0.0, 1.0, hi_open=True)
        self.max_wrench = _real(max_wrench, "max_wrench", 0.0, lo_open=True)
        self.seed = _seed(seed)
        B = self.batch_size
        self.n_core = _CORE if B > _CORE else 1
        self._dirs = fibonacci_sphere(B - self.n_core)
        self.reset()

    def reset(self) -> None:
        """Back to zero estimate, initial radius, identity rotation and the seed's generator (and
        the ``centre`` identifier's reset)."""
        if self.centre is not None:
            self.centre.reset()
        self._centre_used = np.zeros(6)
        self._rng = np.random.default_rng(self.seed)
        self.estimate = np.zeros(6)
        self.smoothed_estimate = np.zeros(6)
        self.momentum = np.zeros(6)
        self.radius = self.initial_radius
        self._rotation = np.eye(3)
        self._last_batch = None
        self.n_updates = self.skipped_updates = self.n_clamped = 0
        self.core_wins = self.sphere_wins = self.tri_wins = 0
        self.last_best = 0
        self.last_error = float("inf")
        self._tri = None

    @property
    def _tri_row(self):
        """Index of the trilateration row (the last one) when it is in use, else None."""
        return self.batch_size - 1 if (self._tri is not None and self.batch_size >= self.TRI_MIN_BATCH
                                       and self.centre is None) else None

    def generate_batch(self) -> np.ndarray:
        """(B, 6) world-axes wrenches [force N; torque N*m] at the EE frame origin (rows above,
        plus the ``centre`` identifier's current wrench when one is set)."""
        B = self.batch_size
        batch = np.zeros((B, 6))
        batch[0] = self.smoothed_estimate
        if self.n_core == _CORE:
            batch[2] = self.estimate + 0.5 * self.momentum
        batch[self.n_core:, :3] = self.estimate[:3] + self.radius * (self._dirs @ self._rotation.T)
        batch[self.n_core:, 3:] = self.estimate[3:]
        t = self._tri_row
        if t is not None:
            batch[t, :3] = self._tri
        self._centre_used = self._centre_now()
        batch += self._centre_used
        self._last_batch = batch
        return batch.copy()

    def _centre_now(self) -> np.ndarray:
        """(6,) the centre identifier's wrench now (zeros without one; a non-finite one counts as
        zero: the residual search then carries the whole wrench, as without a centre)."""
        if self.centre is None:
            return np.zeros(6)
        c = np.asarray(self.centre.generate_batch(), dtype=np.float64).reshape(-1, 6)[0]
        return c.copy() if np.all(np.isfinite(c)) else np.zeros(6)

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        """Refit on feedback. ``best_idx``: the winning row; ``prediction_errors`` (B,): each row's
        one-step prediction error (lower = better, +inf = diverged); ``batch_used`` (B, 6): the
        exact world-axes batch those errors were scored under (None: the last generated one;
        with a ``centre`` the centre that batch was generated with is subtracted)."""
        B = self.batch_size
        best, err, batch = _feedback(best_idx, prediction_errors, batch_used, B, self._last_batch)
        if not np.any(np.isfinite(err)):
            self.skipped_updates += 1
            return
        batch = batch - self._centre_used  # the residual rows (no-op without a centre)
        wb = batch[best]
        delta = wb - self.estimate
        self.momentum = self.beta * self.momentum + (1.0 - self.beta) * delta
        est = self.estimate + self.alpha * delta + 0.5 * (1.0 - self.alpha) * self.momentum
        self.estimate, c = _clamp_halves(est, self.max_wrench)
        self.n_clamped += int(c)
        self.smoothed_estimate = ((1.0 - self.smoothing_factor) * self.smoothed_estimate
                                  + self.smoothing_factor * self.estimate)
        if best < min(self.n_core, 2):
            self.core_wins += 1
            self.radius *= self.RADIUS_SHRINK
        elif best == self._tri_row:
            self.tri_wins += 1
        elif best >= self.n_core:
            self.sphere_wins += 1
            self.radius *= self.RADIUS_GROW
        # (a winning momentum seed, row 2, means the estimate is travelling: radius kept)
        self.radius = float(np.clip(self.radius, self.min_radius, self.max_radius))
        self._rotation = random_rotation(self._rng)
        tri = trilaterate(batch[:, :3], err) if B >= self.TRI_MIN_BATCH and self.centre is None else None
        self._tri = None if tri is None else _clamp_halves(np.r_[tri, 0.0, 0.0, 0.0], self.max_wrench)[0][:3]
        self.n_updates += 1
        self.last_best, self.last_error = best, float(err[best])

    def get_stats(self) -> dict:
        """{estimate, smoothed_estimate, momentum (6,); radius N; n_updates, skipped_updates,
        n_clamped, core_wins, sphere_wins, tri_wins; last_best; last_error}; with a ``centre`` also
        centre (6,): the centre of the last generated batch (estimate etc. are then residuals)."""
        st = dict(estimate=self.estimate.copy(), smoothed_estimate=self.smoothed_estimate.copy(),
                  momentum=self.momentum.copy(), radius=float(self.radius), n_updates=self.n_updates,
                  skipped_updates=self.skipped_updates, n_clamped=self.n_clamped, core_wins=self.core_wins,
                  sphere_wins=self.sphere_wins, tri_wins=self.tri_wins, last_best=self.last_best,
                  last_error=self.last_error)
        if self.centre is not None:
            st["centre"] = self._centre_used.copy()
        return st


# ----------------------------------------------------------------- cross-entropy sampler
class CEMForceEstimator:
    """Cross-Entropy Method (CEM) force/torque estimator for 6-D wrenches.

    Keeps a diagonal Gaussian N(mu, diag(sigma^2)) over [fx, fy, fz, mx, my, mz]. Batch rows
    (B >= 4): ``[0]`` mu, ``[1]`` zero, ``[2]`` the momentum seed mu + 0.5 momentum, then (with
    ``axial_seeds``) the axial probes mu +- sigma_d e_d over the axes whose sigma is non-zero,
    then seeded draws from N(mu, Sigma). B = 1: mu alone; B = 2, 3: mu and draws.

    Update (elite refit): the ``elite_k = max(1, floor(elite_frac * B))`` rows of lowest error
    are weighted by a softmax of their errors (temperature: the elites' median minus minimum
    error), giving an elite mean m and variance v (+ process_noise^2); then (the mean shift
    |m - mu| counts as spread, so sigma does not collapse while mu is still travelling)::

        mu       <- (1 - alpha_mean) mu + alpha_mean m
        sigma    <- (1 - alpha_cov) sigma + alpha_cov max(sqrt(v), |m - mu|)   (per axis)
        momentum <- momentum_beta momentum + (1 - momentum_beta) (w_best - mu)

    and sigma adapts to the error trend over the last 6 updates: a plateau (std of the previous
    five below 1 % of their mean) multiplies it by ``plateau_shrink``, a spike (last error above
    1.5 times the previous five's mean) by ``spike_expand``; mu or the zero row winning multiplies
    it by ``shrink_on_exploit`` (a winning momentum seed means mu is still travelling: no shrink). Sigma is clipped to [min_sigma, max_sigma] on the axes that started
    non-zero (``torque_sigma=0`` keeps the torque fixed at mu's, i.e. zero); mu is clamped to
    ``max_wrench``.

    Args:
        batch_size: B >= 1. force_sigma, torque_sigma: initial std [N], [N*m] (>= 0, force > 0).
        elite_frac: fraction of the batch refit on, in (0, 1]. min_sigma, max_sigma: std bounds.
        alpha_mean, alpha_cov: refit step of the mean / std, in (0, 1]. process_noise: std added
        to the elite spread (keeps exploring). momentum_beta: momentum retention in [0, 1).
        seed: generator seed (None: fresh entropy). axial_seeds: include the axial probes.
        shrink_on_exploit, plateau_shrink (in (0, 1]), spike_expand (>= 1): sigma adaptation.
        max_wrench: keyword-only divergence guard on mu's force / torque halves.
    """

    def __init__(self, batch_size, force_sigma=10.0, torque_sigma=0.0, elite_frac=0.25, min_sigma=0.5,
                 max_sigma=100.0, alpha_mean=0.6, alpha_cov=0.3, process_noise=0.1, momentum_beta=0.4, seed=None,
                 axial_seeds=True, shrink_on_exploit=0.7, plateau_shrink=0.85, spike_expand=1.25, *,
                 max_wrench=2000.0):
        self.batch_size = _batch_size(batch_size)
        self.force_sigma = _real(force_sigma, "force_sigma", 0.0, lo_open=True)
        self.torque_sigma = _real(torque_sigma, "torque_sigma", 0.0)
        self.elite_frac = _real(elite_frac, "elite_frac", 0.0, 1.0, lo_open=True)
        self.min_sigma = _real(min_sigma, "min_sigma", 0.0, lo_open=True)
        self.max_sigma = _real(max_sigma, "max_sigma", self.min_sigma)
        self.alpha_mean = _real(alpha_mean, "alpha_mean", 0.0, 1.0, lo_open=True)
        self.alpha_cov = _real(alpha_cov, "alpha_cov", 0.0, 1.0, lo_open=True)
        self.process_noise = _real(process_noise, "process_noise", 0.0)
        self.momentum_beta = _real(momentum_beta, "momentum_beta", 0.0, 1.0, hi_open=True)
        self.seed = _seed(seed)
        if not isinstance(axial_seeds, (bool, np.bool_)):
            raise ValueError(f"axial_seeds: expected a bool, got {axial_seeds!r}")
        self.axial_seeds = bool(axial_seeds)
        self.shrink_on_exploit = _real(shrink_on_exploit, "shrink_on_exploit", 0.0, 1.0, lo_open=True)
        self.plateau_shrink = _real(plateau_shrink, "plateau_shrink", 0.0, 1.0, lo_open=True)
        self.spike_expand = _real(spike_expand, "spike_expand", 1.0)
        self.max_wrench = _real(max_wrench, "max_wrench", 0.0, lo_open=True)
        B = self.batch_size
        self.n_core = _CORE if B > _CORE else 1
        self.elite_k = max(1, int(math.floor(self.elite_frac * B)))
        self._init_sigma = np.array([self.force_sigma] * 3 + [self.torque_sigma] * 3)
        self._active = self._init_sigma > 0  # axes that are searched at all
        self.reset()

    @property
    def Sigma(self) -> np.ndarray:
        """(6, 6) diagonal covariance diag(sigma^2) [N^2, N^2*m^2]."""
        return np.diag(self._sigma ** 2)

    def reset(self) -> None:
        """mu = 0, sigma = the initial stds, no momentum or history, the seed's generator."""
        self.rng = np.random.default_rng(self.seed)
        self.mu = np.zeros(6)
        self._sigma = self._init_sigma.copy()
        self.momentum = np.zeros(6)
        self.last_best = np.zeros(6)
        self.error_history = []
        self._last_batch = None
        self.n_updates = self.skipped_updates = self.n_clamped = 0

    def _clip_sigma(self, s) -> np.ndarray:
        return np.where(self._active, np.clip(s, self.min_sigma, self.max_sigma), 0.0)

    def generate_batch(self) -> np.ndarray:
        """(B, 6) world-axes wrenches at the EE frame origin. Slots: [0] mu; [1] zero; [2] the
        momentum seed mu + 0.5 momentum; then the axial probes; the rest samples of N(mu, Sigma).
        Draws are made once per update, so repeated calls return the same batch."""
        if self._last_batch is not None:
            return self._last_batch.copy()
        B = self.batch_size
        batch = np.zeros((B, 6))
        batch[0] = self.mu
        i = 1
        if self.n_core == _CORE:
            batch[2] = self.mu + 0.5 * self.momentum
            i = _CORE
        if self.axial_seeds:
            for d in np.flatnonzero(self._active):
                for sign in (1.0, -1.0):
                    if i < B:
                        batch[i] = self.mu
                        batch[i, d] += sign * self._sigma[d]
                        i += 1
        if i < B:
            batch[i:] = self.mu + self.rng.standard_normal((B - i, 6)) * self._sigma
        self._last_batch = batch
        return batch.copy()

    def update(self, best_idx, errors, batch_used=None) -> None:
        """Refit the Gaussian on the elites of ``errors`` (B,) (lower = better) scored under
        ``batch_used`` (B, 6) (None: the last generated batch)."""
        B = self.batch_size
        best, err, batch = _feedback(best_idx, errors, batch_used, B, self._last_batch, name="errors")
        if not np.any(np.isfinite(err)):
            self.skipped_updates += 1
            return
        self.error_history.append(float(err[best]))
        self.last_best = batch[best].copy()
        ids = np.argsort(err, kind="stable")[:self.elite_k]
        ids = ids[np.isfinite(err[ids])]
        e = err[ids]
        tau = max(float(np.median(e) - np.min(e)), 1e-6)
        w = np.exp(-(e - np.min(e)) / tau)
        w /= np.sum(w)
        m = w @ batch[ids]
        v = w @ (batch[ids] - m) ** 2 + self.process_noise ** 2
        shift = np.abs(m - self.mu)
        mu = (1.0 - self.alpha_mean) * self.mu + self.alpha_mean * m
        self.mu, c = _clamp_halves(np.where(self._active, mu, 0.0), self.max_wrench)
        self.n_clamped += int(c)
        # The elites' own spread collapses while mu is still travelling (they cluster on the
        # side of the truth), so the mean shift counts as spread too: the search keeps the
        # scale of the step it is taking (the idea of CMA-ES's step-size path).
        target = np.maximum(np.sqrt(v), shift)
        self._sigma = self._clip_sigma((1.0 - self.alpha_cov) * self._sigma + self.alpha_cov * target)
        self.momentum = self.momentum_beta * self.momentum + (1.0 - self.momentum_beta) * (self.last_best - self.mu)
        if len(self.error_history) >= 6:
            recent = np.array(self.error_history[-6:])
            prev = recent[:-1]
            if np.std(prev) < 0.01 * max(float(np.mean(prev)), 1e-12):
                self._sigma = self._clip_sigma(self._sigma * self.plateau_shrink)
            elif recent[-1] > 1.5 * np.mean(prev):
                self._sigma = self._clip_sigma(self._sigma * self.spike_expand)
        if best < min(self.n_core, 2):
            # mu or the zero row explained the motion best: exploit. A winning momentum seed
            # (row 2) means the mean is still travelling, so it does not shrink the search.
            self._sigma = self._clip_sigma(self._sigma * self.shrink_on_exploit)
        self._last_batch = None  # the next generate_batch draws afresh
        self.n_updates += 1

    def get_stats(self) -> dict:
        """{mu, sigma_diag, momentum, last_best (6,); last_error; n_updates, skipped_updates,
        n_clamped}."""
        return dict(mu=self.mu.copy(), sigma_diag=self._sigma.copy(), momentum=self.momentum.copy(),
                    last_best=self.last_best.copy(),
                    last_error=self.error_history[-1] if self.error_history else float("inf"),
                    n_updates=self.n_updates, skipped_updates=self.skipped_updates, n_clamped=self.n_clamped)
