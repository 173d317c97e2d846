"""Payload-change detection for the swing estimator (issue 32: a payload picked up mid-run).

:class:`PayloadChangeDetector` is a mixin of :class:`gato.wrench.swing.PendulumSwingEstimator`: fed
once per sensor sample (:meth:`_detect_change`), it tells a payload picked up (or let go) from the
step it makes in what the EE carries, and then restarts the estimator's mass, rigid, offset and
length fits (:meth:`refit`); a :class:`gato.wrench.swing_batch.SwingWrenchBatch` re-opens its
payload-model choice when the count :attr:`n_attach` moves.

Units: s, kg, N.
"""
from __future__ import annotations

__all__ = ["PayloadChangeDetector"]


class PayloadChangeDetector:
    """A payload picked up (or let go) mid-run: the estimator's short-memory mass (``attach_mass``)
    apart from its own low-pass (ATTACH_REF_TAU s) by more than ATTACH_KG [kg] and ATTACH_FRAC of
    the low-pass, or an identified force beyond ATTACH_N [N] where its low-pass is below half of it
    (the bare arm picks something up: the mass fit's first samples lag the force), for
    ATTACH_HOLD_S of samples. Then :meth:`refit`: the mass, rigid, offset and length fits restart
    from the next sample, with a memory that grows with the time since (:meth:`_fit_tau`), and
    :attr:`n_attach` / :attr:`attach_times` record it. Never within ATTACH_QUIET_S of the start or
    of the last detection (the fits are settling then; a payload carried from t = 0 is no change).

    Needs of the host: ``attach_mass`` [kg], ``forgetting_tau`` [s] and the least-squares sums
    ``_m_AtA, _m_Aty, _r_AtA, _r_Aty, _c_AtA, _c_Aty`` (numpy arrays), ``_ls_num, _ls_den, _d_num, _d_den``.

    The constants were set on seed 113's mid-run scenarios of the payload-kinds bench (the tuning
    seed; docs/benchmarks_hypotheses.md "Attachment detection"): the 15 kg object read 24 N in the
    first period after it was picked up (the arm falling with it), so ATTACH_N sits below that,
    above a bare arm's 0 N. ATTACH_TIE: right after a pick-up the rigid fit read 0.2-3 kg of the
    15 kg (its first samples taken with the offset not yet known); tied, 8.5 kg at the first tick.
    """

    ATTACH_KG = 3.0
    ATTACH_FRAC = 0.3
    ATTACH_N = 15.0
    ATTACH_HOLD_S = 0.003
    ATTACH_QUIET_S = 0.25
    ATTACH_REF_TAU = 0.1
    ATTACH_MIN_TAU = 0.01
    ATTACH_TIE = 1000.0
    ATTACH_TIE_S = 0.1

    def _reset_change(self) -> None:
        self.n_attach = 0  # payload changes detected
        self.attach_times = []  # when [s of samples since reset]
        self._t = self._attach_run = 0.0
        self._since_attach = self._m_ref = self._f_ref = 0.0

    def _fit_tau(self) -> float:
        """The mass fits' memory [s]: ``forgetting_tau``, and after a detected payload change half
        the time since it (at least ATTACH_MIN_TAU): the first samples after a pick-up were fit
        with an offset not yet known (the centre's acceleration wrong by its turn), so they fade."""
        if self.n_attach == 0:
            return self.forgetting_tau
        return min(self.forgetting_tau, max(self.ATTACH_MIN_TAU, 0.5 * self._since_attach))

    def _tie_scale(self) -> float:
        """Factor on the inertia prior (m_i = m): ATTACH_TIE within ATTACH_TIE_S of a detected
        pick-up (a payload that appeared has the inertia of its weight until the data say
        otherwise), else 1."""
        return self.ATTACH_TIE if self.n_attach and self._since_attach < self.ATTACH_TIE_S else 1.0

    def refit(self) -> None:
        """Forget what the mass, rigid, offset and length fits learnt (a payload change): they
        restart from the next sample; the wrench identifier and the rod direction keep going."""
        for a in (self._m_AtA, self._m_Aty, self._r_AtA, self._r_Aty, self._c_AtA, self._c_Aty):
            a[...] = 0.0
        self._ls_num = self._ls_den = 0.0
        self._d_num = self._d_den = 0.0
        self.n_attach += 1
        self.attach_times.append(self._t)
        self._since_attach = self._attach_run = 0.0

    def _detect_change(self, dt, fn) -> None:
        """One sensor sample of dt [s] whose identified force has norm fn [N]."""
        self._t += dt
        self._since_attach += dt
        ma, m0, f0 = self.attach_mass, self._m_ref, self._f_ref
        a_ref = dt / (self.ATTACH_REF_TAU + dt)
        self._m_ref = ma if self._since_attach <= self.ATTACH_QUIET_S else m0 + a_ref * (ma - m0)
        self._f_ref += a_ref * (fn - f0)
        n = self.ATTACH_N
        if self._t > self.ATTACH_QUIET_S and self._since_attach > self.ATTACH_QUIET_S \
                and (abs(ma - m0) > max(self.ATTACH_KG, self.ATTACH_FRAC * m0) or (f0 < 0.5 * n and fn > n)):
            self._attach_run += dt
            if self._attach_run >= self.ATTACH_HOLD_S - 1e-12:
                self.refit()
        else:
            self._attach_run = 0.0
