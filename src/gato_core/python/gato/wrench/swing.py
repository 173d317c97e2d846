"""Swing-aware payload hypotheses: an unmodelled payload hanging from the EE read as a pendulum,
its wrench predicted knot by knot over the horizon.

:class:`PendulumSwingEstimator` (the observer and the per-row predictions, fed at sensor rate like
the identifiers of :mod:`gato.estimators`); :class:`SwingWrenchBatch` in :mod:`gato.wrench.swing_batch`
(the hypothesis batch that programs the predicted (B, N, 6) band and
scores the rows by their past predictions). The
compatibility paths :mod:`gato.estimators` / :mod:`gato.hypotheses` re-export them.

Units: N, N*m, m, s, kg; wrenches in world axes at the EE frame origin, [force; torque].
"""
from __future__ import annotations

import math

import numpy as np

from .estimators import _batch_size, _feedback, _real, _seed
from .attach import PayloadChangeDetector
from .identifier import OneStepWrenchIdentifier, _ee_frame_id
from .hypotheses import HypothesisBatch, planned_knots, winning_plan  # noqa: F401 (gato.swing re-exports them)

__all__ = ["PendulumSwingEstimator", "PAYLOAD_MODELS"]

#: The payload models a B = 1 :class:`SwingWrenchBatch` chooses between (its ``model_choice``):
#: "swing" (a pendulum from the EE origin at the identified length), "rigid" (the identified mass
#: fixed at the identified offset: m (g - a) along the planned EE acceleration, its lever arm's
#: torque) and "constant" (the identified wrench held over the horizon, the payload's weight
#: without inertia).
PAYLOAD_MODELS = ("swing", "rigid", "constant")


class PendulumSwingEstimator(PayloadChangeDetector):
    """Swing-aware payload hypotheses: the identified wrench read as a pendulum hanging from the EE,
    predicted over the horizon along the planned EE motion (instead of held constant).

    A point mass m on a massless rod of length L hanging from the EE frame origin pulls the EE
    along the rod with the tension T: the wrench at the EE origin is ``[T u; 0]`` (u: the unit rod
    direction, EE -> bob, world axes), and with the EE acceleration a::

        T / m = (g - a) . u + L |du/dt|^2                          (the rod constraint)
        d2u/dt2 = ((g - a) - ((g - a) . u) u) / L - |du/dt|^2 u      (the swing)

    Sensor-rate observer (:meth:`identify`, fed per 1 ms substep like the
    :class:`IdentifiedWrenchSampler`): an :class:`OneStepWrenchIdentifier` (mode "weight") fits
    the wrench; u is its force direction (low-passed, time constant ``u_tau``), du/dt the
    low-passed finite difference of u (``rate_tau``), a the EE acceleration from the interval's
    velocities; least squares with exponential forgetting (``forgetting_tau``) on the tension
    equation ``F . u = m (g - a) . u + (m L) |du/dt|^2`` identify m (regressor (g - a) . u, the
    centripetal term at the current estimate moved to the left) and m L (regressor m |du/dt|^2;
    while the payload hangs still L stays at its prior, and the reaction m (g - a) is still
    predicted from the planned acceleration). Reading m from the tension corrected by the EE
    acceleration gives the payload's mass from the first samples, also while the arm sags under
    it (the identifier's low-passed weight reads 0.7 of 15 kg after 31 ms there); the same fit
    with the short memory ``attach_tau`` is :attr:`attach_mass`.

    The weight's mass and the inertial mass apart (issue 32): the fit is ``F . u - m_i L |du/dt|^2
    = m g . u - m_i a . u``, m what the payload weighs (:attr:`mass`), m_i how much of it resists
    the EE's acceleration (:attr:`inertial_mass`, in [0, m]), tied to m by a prior
    (``INERTIA_PRIOR``) wherever the EE's acceleration does not vary; the rows' reaction to the
    planned motion is m_i's. A pendulum or a grasped object has m_i = m; a force without inertia
    (a weight on a cable) m_i = 0, which one mass m (g - a) . u read as 20-170 kg while the EE
    fell under it at the start, and the plans then pushed against a weight it did not have.

    A payload that does not swing (issue 32): the same fit reads a grasped object's mass (its
    force is m (g - a), along the rod direction u the fit follows), and a least squares with
    memory ``offset_tau`` on the identified torque, tau = (R c) x F, reads its centre's offset c
    (3,) m in EE axes (:attr:`offset`; a component along every force seen so far is not
    observable and stays at 0).

    A payload picked up mid-run (issue 32): :class:`gato.wrench.attach.PayloadChangeDetector`
    tells it from the step in what the EE carries and restarts the fits (:meth:`refit`,
    ``n_attach``); a SwingWrenchBatch then re-opens its model choice.

    Rows of a batch (B = ``batch_size``): ``[0]`` the swing predicted at the identified length L;
    from B = 2 ``[1]`` the full identified wrench held constant (the ``inertial_rows`` hypothesis,
    its part beyond the weight scaled by ``inertial_gain`` like the others); from B = 3 with
    ``rigid_rows`` (default) ``[2]`` the rigid payload: the identified mass at the identified
    offset, force m (g - a_k) along the planned EE acceleration (its part beyond the weight scaled
    by ``inertial_gain``) and the torque of that force at the offset (length 0 in
    :meth:`row_lengths`); the remaining rows the swing at L times ``length_scales`` (default:
    factors spaced evenly in log between 0.5 and 2, one per row). :meth:`predict_models` gives the
    three models of :data:`PAYLOAD_MODELS` (what a B = 1 batch chooses between).
    :meth:`predict` gives each row's wrench per horizon interval
    (gato.hypotheses.SwingWrenchBatch programs them knot by knot); :meth:`generate_batch` is
    the duck-typed contract's (B, 6): each row's wrench at the current state.

    Args:
        batch_size: B >= 1.
        model, ee_frame: the solver's pinocchio Model (robot only) and the EE frame the payload
            hangs from (ValueError if the model lacks it).
        length_scales: keyword-only, factors > 0 of the swing rows after the constant (and rigid)
            row: B - 2 of them, B - 3 with ``rigid_rows`` from B = 3 (None: the default grid).
        rigid_rows: keyword-only bool (default True): row 2 is the rigid payload from B = 3.
        offset_tau: memory [s] (> 0) of the offset least squares.
        rigid_gain: keyword-only, in [0, 1]: ``inertial_gain`` of the rigid model (None: the same).
        u_tau, rate_tau: time constants [s] (> 0) of the rod-direction and rate filters.
        forgetting_tau: memory [s] (> 0) of the mass and length least squares.
        attach_tau: memory [s] (> 0) of :attr:`attach_mass`, the mass fit that follows a payload
            picked up mid-run.
        min_length, max_length: bounds [m] of the identified length, 0 < min <= max.
        prior_length: the length [m] the fit starts from (in [min_length, max_length]), weighed
            as PRIOR_WEIGHT samples' worth until the payload swings.
        inertial_gain: in [0, 1], the share of the predicted inertial reaction (prediction minus
            the weight m g) that goes into the rows (0: the weight alone, knot by knot). None
            (default): :attr:`SINGLE_INERTIAL_GAIN` at B = 1, :attr:`BATCH_INERTIAL_GAIN` from B = 2
            (why the two differ: at those attributes).
        substeps: integration steps of the swing per horizon interval (>= 1).
        weight_tau, wrench_alpha, damping, max_wrench: the identifier's (weight_tau, alpha,
            damping, max_wrench).

    Units: N, N*m, m, s, kg. Deterministic (no randomness; ``seed`` is accepted and unused so the
    samplers share a constructor shape).
    """

    #: The rod counts as slack below this fraction of the weight (its direction is not observed).
    SLACK = 0.3
    #: Rates above this [rad/s] are not used by the length fit (a noise burst, not a swing).
    MAX_RATE = 15.0
    #: Weight of the prior length in the length fit [N^2 s^4 / m ... as (m |du/dt|^2)^2 sums]: a
    #: few samples' worth of a 15 kg payload swinging at 1 rad/s, so the data take over once it swings.
    PRIOR_WEIGHT = 50.0
    #: :attr:`attach_mass` is fit only while (g - a) . u exceeds this fraction of g (an EE in near
    #: free fall loads the rod too little to read the mass from by division).
    MIN_LOAD = 0.02
    #: Weight of the prior "the payload's inertia is its weight's" (m_i = m) in the mass least
    #: squares [(m/s^2)^2 samples]: about one sample at 10 m/s^2. The two split only where the EE's
    #: acceleration varies: a force without inertia (a weight on a cable, the payload bench's
    #: constant weight) reads m_i ~ 0 within its first sag; at rest or under a steady acceleration
    #: they stay one mass (the single-mass fit). A noisy acceleration (hardware encoders, not the
    #: simulated worlds) would bias m_i low: noise in a regressor shrinks its coefficient.
    INERTIA_PRIOR = 100.0
    #: Default ``inertial_gain`` of a lone estimator (B = 1). The solver sees the reaction as an
    #: exogenous wrench predicted from the previous plan, so the gain closes a loop across ticks:
    #: too little and a step move's unmodelled reaction spins the wrist past its velocity limit
    #: (J6 1.07x at 0.3), too much and the loop pumps (payload study, seeds 0-9, B = 1: 0.3 199 /
    #: 200, 0.7 200 / 200, 0.75 194 / 200, 0.8 159 / 200; docs/benchmarks_hypotheses.md).
    SINGLE_INERTIAL_GAIN = 0.7
    #: Default ``inertial_gain`` of a batch (B >= 2) and of the fe batch's ``centre``: the rollout
    #: selection drops a row that has started to pump for the constant-wrench or another-length
    #: row, so a batch can model more of the reaction (seeds 0-9: 0.8 400 / 400 at B = 8 and 32,
    #: 0.7 398 / 400).
    BATCH_INERTIAL_GAIN = 0.8

    def __init__(self, batch_size, model, ee_frame="EE", *, seed=0, length_scales=None, u_tau=0.005,
                 rate_tau=0.01, forgetting_tau=1.0, min_length=0.05, max_length=2.0, prior_length=0.3,
                 inertial_gain=None, substeps=4, weight_tau=0.1, attach_tau=0.01,
                 wrench_alpha=0.5, damping=0.001, max_wrench=2000.0, rigid_rows=True, offset_tau=0.5,
                 rigid_gain=None):
        import pinocchio as pin

        self._pin = pin
        self.batch_size = B = _batch_size(batch_size)
        self.identifier = OneStepWrenchIdentifier(model, ee_frame, alpha=wrench_alpha, damping=damping,
                                                  max_wrench=max_wrench, mode="weight", weight_tau=weight_tau)
        self.model, self.ee_frame = model, ee_frame
        self._fid = _ee_frame_id(model, ee_frame)
        self._data = model.createData()
        self.seed = _seed(seed)
        self.u_tau = _real(u_tau, "u_tau", 0.0, lo_open=True)
        self.rate_tau = _real(rate_tau, "rate_tau", 0.0, lo_open=True)
        self.forgetting_tau = _real(forgetting_tau, "forgetting_tau", 0.0, lo_open=True)
        self.attach_tau = _real(attach_tau, "attach_tau", 0.0, lo_open=True)
        self.min_length = _real(min_length, "min_length", 0.0, lo_open=True)
        self.max_length = _real(max_length, "max_length", self.min_length)
        self.prior_length = _real(prior_length, "prior_length", self.min_length, self.max_length)
        if inertial_gain is None:
            inertial_gain = self.SINGLE_INERTIAL_GAIN if B == 1 else self.BATCH_INERTIAL_GAIN
        self.inertial_gain = _real(inertial_gain, "inertial_gain", 0.0, 1.0)
        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) or int(substeps) < 1:
            raise ValueError(f"substeps: expected an integer >= 1, got {substeps!r}")
        self.substeps = int(substeps)
        if not isinstance(rigid_rows, (bool, np.bool_)):
            raise ValueError(f"rigid_rows: expected True or False, got {rigid_rows!r}")
        self.rigid_rows = bool(rigid_rows)
        self.offset_tau = _real(offset_tau, "offset_tau", 0.0, lo_open=True)
        self.rigid_gain = self.inertial_gain if rigid_gain is None else _real(rigid_gain, "rigid_gain", 0.0, 1.0)
        self._rigid_row = 2 if self.rigid_rows and B >= 3 else None
        #: The rigid payload's row (2), or None (B < 3 or rigid_rows False).
        self.rigid_row = self._rigid_row
        n_grid = max(B - 2 - (self._rigid_row is not None), 0)
        if length_scales is None:
            scales = np.exp(np.linspace(math.log(0.5), math.log(2.0), n_grid)) if n_grid > 1 else np.ones(n_grid)
        else:
            try:
                scales = np.array(length_scales, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                raise ValueError(f"length_scales: expected {n_grid} numbers > 0, got {length_scales!r}") from None
            if scales.shape != (n_grid,) or not np.all(np.isfinite(scales)) or np.any(scales <= 0):
                raise ValueError(f"length_scales: expected {n_grid} finite numbers > 0 (one per swing row "
                                 f"after row 1{' and the rigid row 2' if self._rigid_row else ''}), "
                                 f"got {length_scales!r}")
        self.length_scales = scales
        g = np.asarray(model.gravity.linear, dtype=np.float64)
        self._g = g
        self.reset()

    # ------------------------------------------------------------------ observer
    def reset(self) -> None:
        """Forget the identified payload and swing (the identifier too)."""
        self.identifier.reset()
        self.u = np.array(self.identifier._g_hat)  # hanging straight down until told otherwise
        self.rate = np.zeros(3)
        self._ls_num = self._ls_den = 0.0  # the (m L) least squares' sums, see identify
        self._m_AtA, self._m_Aty = np.zeros((2, 2)), np.zeros(2)  # (m, m_i) least squares along u, see identify
        self._r_AtA, self._r_Aty = np.zeros((2, 2)), np.zeros(2)  # the same on the rigid payload's full force
        self._mf_num = self._mf_den = 0.0  # the same with memory attach_tau (the "just attached" mass)
        self._v_prev = None
        self._c_AtA = np.zeros((3, 3))  # the offset least squares' sums (memory offset_tau), see identify
        self._c_Aty = np.zeros(3)
        self._d_num = self._d_den = 0.0  # the rod damping's (memory offset_tau), see identify
        self._R = np.eye(3)  # EE rotation (world <- EE) at the last sample
        self._f_sum = np.zeros(3)
        self._f_n = 0
        self.last_best = 0
        self.n_feedback = 0
        self.row_wins = np.zeros(self.batch_size, dtype=np.int64)
        self.n_nonfinite = 0  # (row, interval) predictions that overflowed and fell back to the weight
        self._reset_change()

    @property
    def n_updates(self) -> int:
        """Sensor samples fit so far (identify calls)."""
        return self.identifier.n_updates

    def _masses(self, AtA, Aty) -> tuple:
        """(m, m_i) [kg] of a (weight, inertia) least squares' sums: m >= 0, m_i in [0, m] (a passive
        payload's inertia is at most its weight's, and the rows' gains were tuned with m_i = m);
        None before its first sample."""
        if AtA[0, 0] <= 0.0:
            return None
        P = self.INERTIA_PRIOR * self._tie_scale()
        mw, mi = np.linalg.solve(AtA + P * np.array([[1.0, -1.0], [-1.0, 1.0]]), Aty)
        mw = max(0.0, float(mw))
        return mw, float(np.clip(mi, 0.0, mw))

    @property
    def mass(self) -> float:
        """Identified payload mass [kg] (>= 0), what it weighs: the tension equation's least
        squares (memory ``forgetting_tau``, jointly with :attr:`inertial_mass`); before the rod was
        ever loaded, the identifier's low-passed weight / g."""
        ms = self._masses(self._m_AtA, self._m_Aty)
        return float(self.identifier.weight / np.linalg.norm(self._g)) if ms is None else ms[0]

    @property
    def inertial_mass(self) -> float:
        """Identified inertial mass [kg] in [0, :attr:`mass`]: how much of the payload resists the
        EE's acceleration (a pendulum's or a grasped object's: its mass; a force without inertia: 0).
        The same least squares as :attr:`mass`; :attr:`mass` until the first sample."""
        ms = self._masses(self._m_AtA, self._m_Aty)
        return self.mass if ms is None else ms[1]

    @property
    def attach_mass(self) -> float:
        """The same least squares with the short memory ``attach_tau`` [kg] (>= 0): follows a
        payload picked up (or dropped) mid-run within a few ``attach_tau``, where :attr:`mass`
        takes ~``forgetting_tau``."""
        if self._mf_den > 0.0:
            return max(0.0, self._mf_num / self._mf_den)
        return self.mass

    @property
    def length(self) -> float:
        """Identified rod length [m], in [min_length, max_length]."""
        L = (self._ls_num + self.PRIOR_WEIGHT * self.prior_length) / (self._ls_den + self.PRIOR_WEIGHT)
        return float(np.clip(L, self.min_length, self.max_length))

    #: A predicted wrench component beyond this [N, N*m] is a blown-up plan, not a payload: the
    #: interval falls back to the weight like a non-finite one (the rigid rows' m a stays finite
    #: for a plan velocity of 1e200 m/s, but its norm would overflow).
    ABSURD = 1e12
    #: Weight of the zero-offset prior in the offset least squares [N^2 s]: the unobservable
    #: component (along the forces seen) stays at 0 instead of being noise.
    OFFSET_PRIOR = 1.0

    @property
    def offset(self) -> np.ndarray:
        """(3,) identified payload centre [m] in EE axes (the rigid rows' lever arm)."""
        return np.linalg.solve(self._c_AtA + self.OFFSET_PRIOR * np.eye(3), self._c_Aty)

    #: Weight of the zero prior on the rod's damping [s (rad/s)^2], and its bound [N*m*s/rad].
    DAMPING_PRIOR = 0.005
    MAX_DAMPING = 20.0
    #: The swing rows carry the damping's torque only with an identified offset below this [m]
    #: (SwingWrenchBatch.OFFSET_RIGID's value).
    DAMPING_OFFSET = 0.03

    @property
    def rod_damping(self) -> float:
        """Identified damping [N*m*s/rad] in [0, MAX_DAMPING] of the rod's joint at the EE (issue 32:
        a damped pendulum drags the wrist with c (omega_rod - omega_EE), perpendicular to the rod),
        least squares (memory offset_tau) on what the offset leaves of the identified torque:
        tau - (R c) x F = damping u x (du/dt - omega_EE x u). The swing rows carry its torque only while
        the offset is below SwingWrenchBatch.OFFSET_RIGID (a rod from the EE origin; a grasped
        object off-centre turns the force in the EE frame as well, read as a damping)."""
        return float(np.clip(self._d_num / (self._d_den + self.DAMPING_PRIOR), 0.0, self.MAX_DAMPING))

    @property
    def rigid_mass(self) -> float:
        """Identified mass [kg] (>= 0) of a payload fixed to the EE at :attr:`offset`: least squares
        (memory ``forgetting_tau``) of F = m g - m_i a_c, a_c the acceleration of the payload's
        centre (the EE's plus the offset's turn), m_i :attr:`rigid_inertial_mass`; :attr:`mass`
        until a sample was fit."""
        ms = self._masses(self._r_AtA, self._r_Aty)
        return self.mass if ms is None else ms[0]

    @property
    def rigid_inertial_mass(self) -> float:
        """The rigid fit's inertial mass [kg] in [0, :attr:`rigid_mass`] (as :attr:`inertial_mass`)."""
        ms = self._masses(self._r_AtA, self._r_Aty)
        return self.inertial_mass if ms is None else ms[1]

    def ee_twist(self, q, dq) -> tuple:
        """(linear velocity (3,) m/s, angular velocity (3,) rad/s, rotation (3, 3) world <- EE) of
        the EE frame at (q, dq), world axes."""
        pin = self._pin
        pin.forwardKinematics(self.model, self._data, q, dq)
        R = np.array(pin.updateFramePlacement(self.model, self._data, self._fid).rotation)
        tw = pin.getFrameVelocity(self.model, self._data, self._fid, pin.LOCAL_WORLD_ALIGNED)
        return np.array(tw.linear), np.array(tw.angular), R

    def identify(self, q, dq, dq_next, tau_applied, dt, q_next=None) -> np.ndarray:
        """One sensor interval (see :meth:`OneStepWrenchIdentifier.identify`; give q_next): fit the
        wrench, then update the rod direction, its rate and the (m, m L) least squares. Returns
        the raw wrench fit (6,) [N; N*m], world axes at the EE origin."""
        w = self.identifier.identify(q, dq, dq_next, tau_applied, dt, q_next=q_next)
        dt = float(dt)
        qn = q if q_next is None else q_next
        v0, w0, self._R = self.ee_twist(np.asarray(q, dtype=np.float64), np.asarray(dq, dtype=np.float64))
        v1, w1, R1 = self.ee_twist(np.asarray(qn, dtype=np.float64), np.asarray(dq_next, dtype=np.float64))
        a = (v1 - v0) / dt
        F = w[:3]
        self._f_sum += F
        self._f_n += 1
        fn = float(np.linalg.norm(F))
        m = self.mass
        g = float(np.linalg.norm(self._g))
        # the offset: tau = (R c) x F = -[F]x R c, least squares in c with forgetting (per second
        # of samples, so the memory does not depend on the sensor rate)
        A = -_skew(F) @ self._R
        lc = math.exp(-dt / self.offset_tau)
        self._c_AtA = lc * self._c_AtA + dt * (A.T @ A)
        self._c_Aty = lc * self._c_Aty + dt * (A.T @ w[3:])
        d = np.cross(self.u, self.rate - np.cross(w1, self.u))  # the rod's turn relative to the EE's, across it
        res = w[3:] - A @ self.offset
        self._d_num = lc * self._d_num + dt * float(d @ res)
        self._d_den = lc * self._d_den + dt * float(d @ d)
        # the rigid mass: F = m g - m_i a_c, a_c the centre's acceleration at the current offset
        c = self.offset
        a_c = (v1 + np.cross(w1, R1 @ c) - v0 - np.cross(w0, self._R @ c)) / dt
        phi = np.stack([self._g, -a_c], axis=1)  # (3, 2): the regressors of (m, m_i)
        lr = math.exp(-dt / self._fit_tau())
        self._r_AtA = lr * self._r_AtA + phi.T @ phi
        self._r_Aty = lr * self._r_Aty + phi.T @ F
        # A near-slack rod (|F| well below the weight) says little about its direction: hold the
        # swing estimate then instead of differentiating noise. The weight: the smaller of the
        # model's m g and the measured (low-passed) one, so an overestimated mass cannot call the rod
        # slack for good and lock itself in (issue 32: a constant 147 N read as 170 kg while the EE
        # fell under it at the start, then no sample passed this gate and the arm ran away).
        if fn > max(self.SLACK * min(m * g, self.identifier.weight), 1e-3):
            au = dt / (self.u_tau + dt)
            u_new = self.u + au * (F / fn - self.u)
            u_new /= np.linalg.norm(u_new)
            ar = dt / (self.rate_tau + dt)
            d = (u_new - self.u) / dt
            self.rate = self.rate + ar * (d - self.rate)
            self.u = u_new
            self.rate -= (self.rate @ self.u) * self.u
            w2 = float(self.rate @ self.rate)
            load = float((self._g - a) @ self.u)  # (g - a) . u: what the rod carries per kg
            lam = math.exp(-dt / self._fit_tau())
            mi = self.inertial_mass
            gu, au = float(self._g @ self.u), float(a @ self.u)
            if w2 < self.MAX_RATE ** 2:
                # least squares with forgetting on F . u - m_i L |du/dt|^2 = m g . u - m_i a . u, the
                # centripetal part at the current estimate: the mass from the tension corrected by
                # the EE acceleration, right from the first samples (the identifier's low-passed
                # weight needs ~0.2 s, and reads low while the arm sags under a new payload: the
                # attachment transient of docs/benchmarks_hypotheses.md). The weight's mass m and
                # the inertial mass m_i apart (INERTIA_PRIOR ties them): one mass read a force
                # without inertia, under which the EE falls at up to twice g, as 20-170 kg at first
                y = float(F @ self.u) - mi * self.length * w2
                phi = np.array([gu, -au])
                self._m_AtA = lam * self._m_AtA + np.outer(phi, phi)
                self._m_Aty = lam * self._m_Aty + phi * y
                if load > self.MIN_LOAD * g:
                    lf = math.exp(-dt / self.attach_tau)
                    self._mf_num = lf * self._mf_num + load * y
                    self._mf_den = lf * self._mf_den + load * load
                m, mi = self.mass, self.inertial_mass
            if mi > 0 and w2 < self.MAX_RATE ** 2:
                # least squares with forgetting on F . u - (m g - m_i a) . u = (m_i L) |du/dt|^2
                res = float(F @ self.u) - (m * gu - mi * au)
                self._ls_num = lam * self._ls_num + mi * w2 * res
                self._ls_den = lam * self._ls_den + (mi * w2) ** 2
        self._detect_change(dt, fn)
        return w

    def take_mean_force(self):
        """(3,) mean identified force [N] over the sensor samples since the last call, or None."""
        if self._f_n == 0:
            return None
        f = self._f_sum / self._f_n
        self._f_sum = np.zeros(3)
        self._f_n = 0
        return f

    # ------------------------------------------------------------------ hypotheses
    def row_lengths(self) -> np.ndarray:
        """(B,) rod length [m] of each row (NaN: row 1, the constant identified wrench; 0: the
        rigid row)."""
        B, L = self.batch_size, self.length
        out = np.full(B, L)
        if B >= 2:
            out[1] = np.nan
            first = 2
            if self._rigid_row is not None:
                out[self._rigid_row] = 0.0
                first = 3
            out[first:] = np.clip(L * self.length_scales, self.min_length, self.max_length)
        return out

    def predict(self, ee_vel, dt, ee_rot=None) -> np.ndarray:
        """(B, K, 6) world-axes wrenches [N; N*m] at the EE origin per horizon interval, each row's
        mean over the interval, given the EE velocities ``ee_vel`` (K + 1, 3) [m/s] at the knots
        (knot 0: now) spaced ``dt`` s (the acceleration of interval k is their difference / dt),
        the part beyond the weight scaled by ``inertial_gain``. ``ee_rot``: None or the EE
        rotations (K + 1, 3, 3) (world <- EE) at the knots: the rigid rows' offset turns with them
        (its centre's acceleration includes the EE's rotation); None: the offset held as now."""
        return self._predict(ee_vel, dt, self.row_lengths(), ee_rot)

    def predict_models(self, ee_vel, dt, ee_rot=None, *, ee_omega=None, state=None, gain=None) -> np.ndarray:
        """(3, K, 6) the wrenches of the :data:`PAYLOAD_MODELS` ("swing" at the identified length,
        "rigid", "constant"), as :meth:`predict` gives its rows (same arguments, same units).
        ``ee_omega``: None or the EE angular velocities (K + 1, 3) [rad/s] at the knots (the rigid
        model's offset turn from them instead of from the rotations' differences); ``state``: a
        :meth:`model_state` (None: now); ``gain``: the inertial gain in [0, 1] (None: ``inertial_gain``)."""
        st = self.model_state() if state is None else state
        return self._predict(ee_vel, dt, np.array([st["length"], 0.0, np.nan]), ee_rot, ee_omega, st, gain)

    def model_state(self) -> dict:
        """What the predictions start from, copied: rod direction u, rate, length, mass,
        inertial_mass, rigid_mass, rigid_inertial_mass, offset (EE axes), R (the EE rotation at the last sample),
        damping (:attr:`rod_damping`), wrench (the identified (6,))."""
        return dict(u=self.u.copy(), rate=self.rate.copy(), length=self.length, mass=self.mass,
                    inertial_mass=self.inertial_mass, rigid_mass=self.rigid_mass,
                    rigid_inertial_mass=self.rigid_inertial_mass, offset=self.offset, R=self._R.copy(),
                    damping=self.rod_damping if float(np.linalg.norm(self.offset)) < self.DAMPING_OFFSET else 0.0,
                    wrench=np.array(self.identifier.wrench, dtype=np.float64))

    def _predict(self, ee_vel, dt, L, ee_rot=None, ee_omega=None, st=None, gain=None) -> np.ndarray:
        """:meth:`predict` for rows of rod lengths L (B,) [m]: > 0 swing, 0 rigid, NaN constant."""
        st = self.model_state() if st is None else st
        rgain = self.rigid_gain if gain is None else _real(gain, "gain", 0.0, 1.0)
        gain = self.inertial_gain if gain is None else gain
        v = np.asarray(ee_vel, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] < 2 or not np.all(np.isfinite(v)):
            raise ValueError(f"ee_vel: expected finite (K + 1, 3) knot velocities with K >= 1, got {v.shape}")
        dt = _real(dt, "dt", 0.0, lo_open=True)
        if ee_rot is None:
            c_w = np.repeat((st["R"] @ st["offset"])[None, :], v.shape[0], axis=0)
        else:
            rot = np.asarray(ee_rot, dtype=np.float64)
            if rot.shape != (v.shape[0], 3, 3) or not np.all(np.isfinite(rot)):
                raise ValueError(f"ee_rot: expected finite ({v.shape[0]}, 3, 3) knot rotations, got {rot.shape}")
            c_w = rot @ st["offset"]  # (K + 1, 3) the payload centre from the EE origin, world axes
        if ee_omega is not None:
            om_ee = np.asarray(ee_omega, dtype=np.float64)
            if om_ee.shape != v.shape or not np.all(np.isfinite(om_ee)):
                raise ValueError(f"ee_omega: expected finite {v.shape} knot angular velocities, got {om_ee.shape}")
        B, K = len(L), v.shape[0] - 1
        swing = np.isfinite(L) & (L > 0)
        rigid = L == 0
        Ls = L[swing][:, None]
        R = int(swing.sum())
        u = np.repeat(st["u"][None, :], R, axis=0)
        # the identified rate is the rate of a rod of the identified length: the other rows keep
        # the bob's speed relative to the EE (L |du/dt|), so their rates scale with 1 / L
        om = np.repeat(st["rate"][None, :], R, axis=0) * (st["length"] / Ls)
        m, mi = st["mass"], st["inertial_mass"]
        h = dt / self.substeps
        out = np.zeros((B, K, 6))
        fs = np.zeros((R, K, 3))
        ts = np.zeros((R, K, 3))
        cd = float(st.get("damping", 0.0))
        # the rod's damping c (issue 32): the rod's rate relative to the EE's turn decays at c / (m_i L^2) and
        # drags the EE with the torque c u x (du/dt - omega_EE x u); omega_EE per interval from the knots
        kd = cd / (mi * Ls ** 2) if cd > 0 and mi > 0 else np.zeros_like(Ls)
        w_ee = np.zeros((K, 3))
        if cd > 0 and ee_omega is not None:
            w_ee = 0.5 * (om_ee[1:] + om_ee[:-1])
        elif cd > 0 and ee_rot is not None:
            dR = rot[1:] @ np.transpose(rot[:-1], (0, 2, 1))
            w_ee = 0.5 * np.stack([dR[:, 2, 1] - dR[:, 1, 2], dR[:, 0, 2] - dR[:, 2, 0],
                                   dR[:, 1, 0] - dR[:, 0, 1]], axis=1) / dt
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is caught below
            for k in range(K):
                gp = self._g - (v[k + 1] - v[k]) / dt
                acc = np.zeros((R, 3))
                tq = np.zeros((R, 3))
                for _ in range(self.substeps):
                    gu = u @ gp
                    w2 = np.sum(om * om, axis=1)
                    t_m = np.maximum(gu + Ls[:, 0] * w2, 0.0)  # a slack rod pulls nothing
                    acc += t_m[:, None] * u  # per kg of inertial mass
                    rel = om - np.cross(w_ee[k][None, :], u)
                    tq += cd * np.cross(u, rel)
                    om = om + h * ((gp[None, :] - gu[:, None] * u) / Ls - w2[:, None] * u - kd * rel)
                    u = u + h * om
                    u /= np.linalg.norm(u, axis=1, keepdims=True)
                    om -= np.sum(om * u, axis=1, keepdims=True) * u
                fs[:, k] = acc / self.substeps
                ts[:, k] = tq / self.substeps
            # the inertial part (the prediction minus the weight) scaled by inertial_gain: the solver
            # sees it as an exogenous wrench, not as mass, so a full-gain m (g - a_planned) feeds the
            # plan's acceleration back into the next plan's wrench (with the old low-passed mass: 1.0
            # diverged in 6 of 6 runs, 0.3 5 of 6 succeeded; with the tension mass the defaults above)
            wvec = m * self._g
            out[swing, :, :3] = wvec + gain * mi * (fs - self._g)  # the weight, then m_i's reaction
            out[swing, :, 3:] = gain * ts
            if np.any(rigid):  # the payload moves with the EE: m (g - a_c), at its offset's lever arm
                mr, mri = st["rigid_mass"], st["rigid_inertial_mass"]
                wr = mr * self._g
                # the centre's velocity at the knots: the EE's plus the offset's turn (omega x c_w, or
                # d c_w / dt: central inside, one-sided at the ends), its acceleration their difference / dt
                if ee_omega is not None:
                    dc = np.cross(om_ee, c_w)
                elif len(c_w) > 2:
                    dc = np.gradient(c_w, dt, axis=0)
                else:
                    dc = np.repeat(np.diff(c_w, axis=0) / dt, 2, axis=0)
                acc = np.diff(v + dc, axis=0) / dt
                fr = wr - rgain * mri * acc  # the weight and its inertial mass's reaction
                out[rigid, :, :3] = fr
                out[rigid, :, 3:] = np.cross(0.5 * (c_w[1:] + c_w[:-1]), fr)
        const = np.isnan(L)
        if np.any(const):  # the identified wrench held constant, its inertial part scaled the same way
            wrench = st["wrench"]
            out[const, :, :3] = wvec + gain * (wrench[:3] - wvec)
            out[const, :, 3:] = gain * wrench[3:]
        # a plan whose acceleration blew up (a diverging solve) can overflow the swing: such an
        # interval falls back to the weight alone (never NaN into the solver), counted in the stats
        bad = ~np.all(np.isfinite(out), axis=2) | np.any(np.abs(out) > self.ABSURD, axis=2)
        if np.any(bad):
            out[bad] = np.r_[wvec, np.zeros(3)] if np.all(np.isfinite(wvec)) else 0.0
            self.n_nonfinite += int(bad.sum())
        return _clamp_rows(out, self.identifier.max_wrench)

    def generate_batch(self) -> np.ndarray:
        """(B, 6) each row's wrench at the current state (the EE at rest: interval 0 of
        :meth:`predict` with zero velocities), world axes at the EE origin."""
        return self.predict(np.zeros((2, 3)), 1e-3)[:, 0]

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        """Count the winning row (``prediction_errors`` (B,) validated like the other samplers';
        the payload itself comes from :meth:`identify`)."""
        best, err, _ = _feedback(best_idx, prediction_errors, np.zeros((self.batch_size, 6)) if batch_used is None
                                 else batch_used, self.batch_size, None)
        if not np.any(np.isfinite(err)):
            return
        self.row_wins[best] += 1
        self.last_best = best
        self.n_feedback += 1

    def get_stats(self) -> dict:
        """The identifier's stats plus mass, inertial_mass, rigid_mass, rigid_inertial_mass kg,
        length m, offset (3,) m (EE axes), rod direction u
        (3,), rate (3,) 1/s, row_lengths (B,) m, row_wins (B,), last_best, n_feedback, n_nonfinite
        ((row, interval) predictions that overflowed and fell back to the weight), n_attach (payload
        changes detected)."""
        st = self.identifier.get_stats()
        st.update(mass=self.mass, inertial_mass=self.inertial_mass, rigid_mass=self.rigid_mass,
                  rigid_inertial_mass=self.rigid_inertial_mass, length=self.length, offset=self.offset, u=self.u.copy(), rate=self.rate.copy(),
                  row_lengths=self.row_lengths(), row_wins=self.row_wins.copy(), last_best=self.last_best,
                  n_feedback=self.n_feedback, n_nonfinite=self.n_nonfinite, n_attach=self.n_attach,
                  rod_damping=self.rod_damping)
        return st



def _skew(v) -> np.ndarray:
    """(3, 3) cross-product matrix: _skew(a) @ b == a x b."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _clamp_rows(w, max_wrench) -> np.ndarray:
    """(..., 6) wrenches with each force / torque half scaled to norm <= max_wrench."""
    w = np.array(w, dtype=np.float64)
    for half in (slice(0, 3), slice(3, 6)):
        n = np.linalg.norm(w[..., half], axis=-1, keepdims=True)
        w[..., half] *= np.minimum(1.0, max_wrench / np.maximum(n, 1e-300))
    return w

