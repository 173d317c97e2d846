"""``gato.bsqp_planner``, a path the reference API and older code import: the module is
:mod:`gato.planners.bsqp_planner` (docs/architecture.md); this file only re-exports it."""
from .planners.bsqp_planner import (__all__, BSQPPlanner, Capabilities, CONTROLLER_KEYS, Plan,
                                    Planner, PlannerStats, ReferenceWindow, SOLVER_KEYS,
                                    solver_params, StepResult)  # noqa: F401
