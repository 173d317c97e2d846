"""MPCPolicy: an obs -> action adapter for a gymnasium env or a plain loop.

Pure numpy (no gymnasium import). The policy keeps its own clock, slides a
reference window over it and lets :class:`gato.controller.MPCController` solve.
References are EE position windows: (6N,) = [x, y, z, 0, 0, 0] per knot, metres,
world frame. :class:`TrajectoryReference` and :class:`GoalReference` are the
reference API's fixed-horizon views of :class:`gato.references.SampledTrajectory`
and :class:`gato.references.Hold`; any :class:`gato.references.Reference` works too.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.arrays import to_numpy
from ..core.references import Hold, Reference, SampledTrajectory, _positive

__all__ = ["MPCPolicy", "TrajectoryReference", "GoalReference"]


def _horizon(N) -> int:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 2:
        raise ValueError(f"N: expected an integer horizon >= 2 knots, got {N!r}")
    return int(N)


def _time(t) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float, np.floating, np.integer)) or not math.isfinite(t):
        raise ValueError(f"t: expected a finite time in seconds, got {t!r}")
    return float(t)


class TrajectoryReference:
    """Sliding (6N,) window over a flat ``[x, y, z, 0, 0, 0] * T`` trajectory.

    Args:
        traj_flat: (6T,) flat trajectory (or (T, 6)), one EE goal per knot [m];
            knot j is the goal at time ``j * dt_knot``.
        dt_knot: time between trajectory knots [s] (normally the solver's dt).
        N: solver horizon in knots (T >= N).

    Units are KNOTS on both sides: the trajectory holds ``T = size // 6`` knots,
    the window at time t starts at knot ``floor(t / dt_knot)`` clamped to
    ``[0, T - N]`` (the last full horizon), and :meth:`done` fires one knot after
    that last valid start.
    """

    def __init__(self, traj_flat, dt_knot, N):
        arr = to_numpy(traj_flat, "traj_flat", np.float64)
        if arr.ndim == 2 and arr.shape[1] == 6:
            arr = arr.reshape(-1)
        if arr.ndim != 1 or arr.size % 6:
            raise ValueError(f"traj_flat: expected a flat (6T,) array or (T, 6), got shape {tuple(arr.shape)}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("traj_flat: contains NaN or Inf")
        self.N = _horizon(N)
        self.dt_knot = _positive(dt_knot, "dt_knot", "s")
        self.T = arr.size // 6
        if self.T < self.N:
            raise ValueError(f"traj_flat: {self.T} knots is shorter than the horizon N = {self.N}")
        self.traj = arr
        self.last_start = self.T - self.N
        self.reference = SampledTrajectory(arr.reshape(-1, 6)[:, :3], self.dt_knot)

    def _knot(self, t) -> int:
        return self.reference.index(_time(t))

    def window(self, t) -> np.ndarray:
        """The (6N,) goal window starting at time t [s] (clamped to the trajectory ends; the
        orientation slots as given)."""
        k = min(max(self._knot(t), 0), self.last_start)
        return self.traj[6 * k:6 * (k + self.N)].copy()

    def done(self, t) -> bool:
        """True once the window start (knot ``floor(t / dt_knot)``) is past the last
        full horizon, i.e. at knot ``T - N + 1`` and later."""
        return self._knot(t) > self.last_start


class GoalReference:
    """Constant window: hold one 3D EE goal ``goal_xyz`` [m] over the whole horizon of N knots."""

    def __init__(self, goal_xyz, N):
        g = to_numpy(goal_xyz, "goal_xyz", np.float64)
        if g.shape != (3,):
            raise ValueError(f"goal_xyz: expected shape (3,) [x, y, z] metres, got {tuple(g.shape)}")
        if not np.all(np.isfinite(g)):
            raise ValueError("goal_xyz: contains NaN or Inf")
        self.N = _horizon(N)
        self.goal = g
        self.reference = Hold(g)

    def window(self, t) -> np.ndarray:
        """The (6N,) window (the same at every time t)."""
        return self.reference.window(_time(t), self.N, 1.0).solver_layout()

    def done(self, t) -> bool:
        """Always False: a goal never runs out."""
        _time(t)
        return False


class MPCPolicy:
    """Callable ``obs -> action`` wrapping an :class:`gato.controller.MPCController`.

    Args:
        controller: gato.MPCController.
        reference: object with ``window(t) -> (6N,)`` (TrajectoryReference,
            GoalReference, ...), or a :class:`gato.references.Reference` (windowed at
            the solver's N and dt; a pose reference's windows, with their orientations and
            weight, go to the controller as windows); ``done(t)`` is used by :attr:`done`
            when present.
        dt_step: the env's control period [s]: how long each returned action is
            applied; the policy clock advances by it per call and it is the
            ``dt_elapsed`` handed to the controller (hypothesis scoring).
        obs_to_state: maps an observation to the (nx,) solver state (default:
            ``np.asarray`` — for envs whose observation IS [q; qd]).
        budget_s: per-call wall-clock budget for ``MPCController.step`` [s]
            (None = unbudgeted).

    Calling the policy on an observation at policy time t solves against
    ``reference.window(t)``, advances t by ``dt_step`` and returns the actuated
    control (N·m). ``last_result`` holds the last :class:`StepResult`.
    """

    def __init__(self, controller, reference, dt_step, obs_to_state=None, budget_s=None):
        if not callable(getattr(controller, "step", None)):
            raise ValueError(f"controller: expected a gato.MPCController, got {type(controller).__name__}")
        if not callable(getattr(reference, "window", None)):
            raise ValueError(f"reference: expected an object with window(t), got {type(reference).__name__}")
        if obs_to_state is not None and not callable(obs_to_state):
            raise ValueError(f"obs_to_state: expected a callable or None, got {type(obs_to_state).__name__}")
        self.controller = controller
        self.reference = reference
        self._window = reference.window
        if isinstance(reference, Reference):
            N, dt = int(controller.solver.N), float(controller.solver.dt)

            def window(t):
                # a pose window goes to the controller as it is (its orientation weight with it);
                # a position-only one as the flat layout, as before
                w = reference.window(t, N, dt)
                return w if w.orientations is not None else w.solver_layout()

            self._window = window
        self.dt_step = _positive(dt_step, "dt_step", "s")
        self.obs_to_state = obs_to_state if obs_to_state is not None else (lambda o: np.asarray(o))
        if budget_s is not None:
            _positive(budget_s, "budget_s", "s")
        self.budget_s = budget_s
        self.t = 0.0
        self.last_result = None

    def reset(self, obs):
        """Reset the controller and run a warm-up solve from the initial observation.

        Sets the policy clock to 0, seeds a hold at the observed state
        (``controller.reset``) and runs ``controller.warmup`` against
        ``reference.window(0)``. Returns the warm-up SolveResult.
        """
        x = self.obs_to_state(obs)
        self.t = 0.0
        self.last_result = None
        self.controller.reset(x)
        return self.controller.warmup(x, self._window(0.0))

    def __call__(self, obs):
        """One control period: the (n_actuated,) action for observation ``obs``."""
        x = self.obs_to_state(obs)
        res = self.controller.step(x, self._window(self.t), dt_elapsed=self.dt_step,
                                   budget_s=self.budget_s)
        self.t += self.dt_step
        self.last_result = res
        return res.u

    @property
    def done(self) -> bool:
        """The reference has run out at the current policy time (False if it cannot tell)."""
        d = getattr(self.reference, "done", None)
        return bool(d(self.t)) if callable(d) else False
