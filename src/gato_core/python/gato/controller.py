"""``gato.controller``, a path the reference API and older code import: the module is
:mod:`gato.planners.controller` (docs/architecture.md); this file only re-exports it."""
from .planners.controller import (__all__, check_threshold, from_numpy, kind_of, MPCController,
                                  resolve_admm_linsys, resolve_linsys, robot_info, shift_plan,
                                  SolveResult, StepResult, to_numpy)  # noqa: F401
