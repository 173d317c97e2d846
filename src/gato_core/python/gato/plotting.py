"""``gato.plotting``, a path the reference API and older code import: the module is
:mod:`gato.sim.plotting` (docs/architecture.md); this file only re-exports it."""
from .sim.plotting import (__all__, plot_tracking)  # noqa: F401
