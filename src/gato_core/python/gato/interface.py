"""``gato.interface``, a path the reference API and older code import: the module is
:mod:`gato.core.bsqp` (docs/architecture.md); this file only re-exports it."""
from .core.bsqp import (__all__, ADMM_LINSYS_MODES, all_robots, available, batch_array, BSQP,
                        check_backend, CPU_HORIZONS, DEFAULT_INTEGRATOR, DEFAULT_LINSYS,
                        detect_plant, from_numpy, INTEGRATOR_MODES, INTEGRATORS,
                        kind_of, LINSYS_MODES, MAX_ROW_GROUPS, MAX_ROWS_PER_GROUP,
                        MECH_DEFAULT_WEIGHT, module_name, robot_info, robot_urdf, RowGroupAPI,
                        shift_plan, solver_class, SolveResult, SolverParams, SolverStats, to_numpy,
                        VARIANTS, vector)  # noqa: F401
from .robots.registry import find_urdf  # noqa: F401
