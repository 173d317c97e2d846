"""The cost-weight setters of :class:`gato.core.bsqp.BSQP` that take tables: per-knot weights,
the EE orientation term's per-axis factors and reference check, the posture anchor (scalar,
per joint or per knot) and per-joint control weights. A mixin: it uses the solver's ``_s``
(the C++ solver), ``N``, ``nq``, ``n_actuated`` and ``params``; every method validates its
input and names the argument in its error."""
from __future__ import annotations

import numpy as np

from .arrays import kind_of, to_numpy, vector


class CostWeightAPI:
    """Table-valued cost weights (mixed into BSQP; docs/solver_method.md)."""

    def set_cost_weights_per_knot(self, knot_weights) -> None:
        """Per-knot [ee, qd, u] weights, shape (N, 3), or [ee, qd, u, rot] (N, 4), finite and >= 0;
        overrides the scalar q/qd/u/N weights (the terminal EE weight is row N-1's ee entry) and,
        with a 4th column, rot_cost / N_rot_cost (the EE orientation weight per knot). None clears
        the table. A zero qd or u entry gets a step-only regularization (docs/solver_method.md,
        "Zero weights")."""
        if knot_weights is None:
            self._knot_weights = None
            self._s.set_knot_weights(np.zeros(0))
            self._s.set_rot_knot_weights(np.zeros(0))
            return
        w = to_numpy(knot_weights, "knot_weights", np.float64)
        if w.shape not in ((self.N, 3), (self.N, 4)):
            raise ValueError(f"knot_weights: expected shape ({self.N}, 3) or ({self.N}, 4), got {tuple(w.shape)}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("knot_weights: entries must be finite and >= 0")
        self._knot_weights = w
        self._s.set_knot_weights(np.ascontiguousarray(w[:, :3]).ravel())
        self._s.set_rot_knot_weights(np.ascontiguousarray(w[:, 3]) if w.shape[1] == 4 else np.zeros(0))
        self._rot_knot = w.shape[1] == 4 and bool(np.any(w[:, 3] > 0))

    def set_rot_axis_weights(self, weights) -> None:
        """Per-axis factors c (3,) of the EE orientation term, tool-frame axes x, y, z (default 1):
        the cost is 1/2 w sum_a c_a e_a^2 (e.g. [1, 1, 0]: the tool may spin about its z axis)."""
        c = to_numpy(weights, "rot_axis_weights", np.float64).reshape(-1)
        if c.shape != (3,):
            raise ValueError(f"rot_axis_weights: expected 3 numbers, got shape {tuple(c.shape)}")
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError(f"rot_axis_weights: entries must be finite and >= 0, got {c.tolist()}")
        self._s.set_rot_axis_weights(c)

    def _rot_on(self) -> bool:
        return self.params.rot_cost > 0 or self.params.N_rot_cost > 0 or getattr(self, "_rot_knot", False)

    def _check_orientation(self, ref: np.ndarray, name: str) -> None:
        """With the orientation term on, the reference's slots [3:6] of every knot are a rotation
        vector: finite, norm <= pi."""
        if not self._rot_on():
            return
        rv = np.asarray(ref, dtype=np.float64).reshape(-1, self.N, 6)[:, :, 3:6]
        if not np.all(np.isfinite(rv)):
            raise ValueError(f"{name}: orientation slots [3:6] must be finite")
        n = np.linalg.norm(rv, axis=2)
        if np.any(n > np.pi + 1e-9):
            b, k = np.unravel_index(int(np.argmax(n)), n.shape)
            raise ValueError(f"{name}: orientation slots [3:6] of entry {b}, knot {k}: rotation vector norm "
                             f"{n[b, k]:.6g} > pi (a rotation vector in [0, pi])")

    def _per_knot(self, value, name: str):
        """An (N, nq) per-knot table (finite, float64) or None when ``value`` is not 2-D."""
        a = np.asarray(to_numpy(value, name, np.float64) if kind_of(value) != "numpy" else value,
                       dtype=np.float64)
        if a.ndim != 2:
            return None
        if a.shape != (self.N, self.nq):
            raise ValueError(f"{name}: expected ({self.nq},) or per knot ({self.N}, {self.nq}), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: entries must be finite")
        return a

    def set_q_pos_cost(self, weight) -> None:
        """Posture anchor: adds 0.5*w_kj*(q_j - q_nom,kj)^2 at every knot k; w scalar, (nq,), or
        (N, nq) per knot (a joint trajectory to track; default 0 = off)."""
        w = self._per_knot(weight, "weight")
        if w is None:
            w = vector(weight, "weight", self.nq, allow_scalar=True)
        if np.any(w < 0):
            raise ValueError("weight: anchor weights must be >= 0")
        self._q_pos_cost = w
        self._s.set_q_pos_cost(w.ravel())

    def set_q_nom(self, q_nom=None) -> None:
        """Posture target of the anchor, (nq,) rad or (N, nq) per knot (None resets to zeros)."""
        q = None if q_nom is None else self._per_knot(q_nom, "q_nom")
        if q is None:
            q = np.zeros(self.nq) if q_nom is None else vector(q_nom, "q_nom", self.nq)
        self._q_nom = q
        self._s.set_q_nom(q.ravel())

    def set_u_cost_vec(self, weights=None) -> None:
        """Per-joint control weights (n_actuated,), >= 0, replacing the scalar/per-knot u weight at
        every knot; None resets to the scalar u_cost. A zero weight (torque free on that joint) is
        given a step-only regularization (docs/solver_method.md, "Zero weights")."""
        if weights is None:
            self._u_cost_vec = None
            self._s.set_u_cost_vec(np.zeros(0))
            return
        w = vector(weights, "weights", self.n_actuated)
        if np.any(w < 0):
            raise ValueError(f"weights: control weights must be >= 0, got {w.tolist()}")
        self._u_cost_vec = w
        self._s.set_u_cost_vec(w)
