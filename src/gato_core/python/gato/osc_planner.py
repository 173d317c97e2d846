"""``gato.osc_planner``, a path the reference API and older code import: the module is
:mod:`gato.planners.osc_planner` (docs/architecture.md); this file only re-exports it."""
from .planners.osc_planner import (__all__, Capabilities, DEFAULTS, OSCPlanner, Planner,
                                   PlannerStats, ReferenceWindow, StepResult)  # noqa: F401
