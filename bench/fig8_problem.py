"""The benchmark problem shared by gato and its peers: iiwa14 figure-8 EE tracking.

The curve is gato's one figure-8 (:class:`gato.references.Figure8`, the y-z plane),
loaded from its file so the crocoddyl peer (its own venv, pin 4.0.0, no gato) can
import this module too: numpy + pinocchio only. Units: metres, seconds, rad.
"""
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np


def _references():
    """gato/references.py as a module (numpy only), without importing the gato package."""
    name = "gato_references_standalone"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "src" / "gato_core" / "python" / "gato" / "core" / "references.py"
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


#: Start configuration of the benchmark runs [rad]. A property of this benchmark problem (the
#: figures in docs/benchmarks.md were measured from it), not the robot's ready pose (that is
#: the registry's q_ready, gato.tasks.Q_READY).
Q_START = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0])
WEIGHTS = dict(q_cost=2.0, qd_cost=0.01, u_cost=2e-6, N_cost=50.0)
DT = 0.03125          # knot spacing and control period [s]
TICKS = 160           # MPC ticks per run (5 s = 1.25 figure-8 periods)
PERIOD = 4.0          # figure-8 period [s]
AMP = (0.15, 0.10)    # lateral / vertical half-widths [m]


def figure8(center, t):
    """(..., 3) points of the y-z figure-8 around ``center`` (3,) [m] at times t [s] (scalar or (T,))."""
    curve = _references().Figure8(center, AMP[0], AMP[1], theta=math.pi / 2, period=PERIOD)
    return curve.positions(t).reshape(np.shape(t) + (3,))


def ref_window(center, t0, N):
    """(N, 3) EE targets of the knots of a window starting at time t0 [s]."""
    return figure8(center, t0 + DT * np.arange(N))
