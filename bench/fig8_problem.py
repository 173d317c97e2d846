"""The benchmark problem shared by gato and its peers: iiwa14 figure-8 EE tracking.

Pure numpy + pinocchio so the crocoddyl peer (its own venv, pin 4.0.0) can
import it too. Units: metres, seconds, rad.
"""
import numpy as np

Q_READY = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0])
WEIGHTS = dict(q_cost=2.0, qd_cost=0.01, u_cost=2e-6, N_cost=50.0)
DT = 0.03125          # knot spacing and control period [s]
TICKS = 160           # MPC ticks per run (5 s = 1.25 figure-8 periods)
PERIOD = 4.0          # figure-8 period [s]
AMP = (0.15, 0.10)    # lateral / vertical half-widths [m]


def figure8(center, t):
    """(T, 3) lemniscate in the y-z plane around center at times t (s)."""
    w = 2 * np.pi * np.asarray(t) / PERIOD
    return np.stack([np.full_like(w, center[0]), center[1] + AMP[0] * np.sin(w),
                     center[2] + AMP[1] * np.sin(2 * w)], axis=-1)


def ref_window(center, t0, N):
    """(N, 3) EE targets of the knots of a window starting at time t0."""
    return figure8(center, t0 + DT * np.arange(N))
