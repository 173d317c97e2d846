"""``gato.planner``, a path the reference API and older code import: the module is
:mod:`gato.planners.planner` (docs/architecture.md); this file only re-exports it."""
from .planners.planner import (__all__, _REGISTRY, Capabilities, make, Plan, Planner,
                               planner_class, planners, PlannerStats, register_planner, StepResult)  # noqa: F401
