"""``gato.limit_scenarios``, a path the reference API and older code import: the module is
:mod:`gato.frontends.limit_scenarios` (docs/architecture.md); this file only re-exports it."""
from .frontends.limit_scenarios import (__all__, GOAL_S, LAG_GRID, LIMITS_DT, limits_fig8_set,
                                        LIMITS_N, limits_pickplace_set, LIMITS_SOLVER,
                                        LIMITS_SUBSTEPS, path_lag, REACH_TOL, run_limits_fig8,
                                        run_limits_pickplace, run_step_scenario, settle_time,
                                        STEP_RANGE, step_scenarios)  # noqa: F401
