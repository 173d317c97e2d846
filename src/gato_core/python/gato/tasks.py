"""``gato.tasks``, a path the reference API and older code import: the module is
:mod:`gato.sim.scenarios` (docs/architecture.md); this file only re-exports it."""
from .sim.scenarios import (__all__, CENTRE_OF_RECORD, ee_frame_of, feasible_fig8, FIG8_AMPLITUDE,
                            FIG8_DEFAULT_PARAMS, fig8_path, fig8_reference, fig8_scenarios,
                            Figure8, figure8, GOAL_BOX, ik_track, joint_speed_ratio,
                            pickplace_scenarios, Q_MARGIN, Q_READY, shipped_registry, urdf_limits,
                            within_q_limits)  # noqa: F401
from .sim.go2 import (Go2Balance, go2_push_scenarios, go2_stand_scenarios, PUSH_RECOVERY,  # noqa: F401
                      run_go2_push, run_go2_stand)
