"""``gato.controller_setup``, a path the reference API and older code import: the module is
:mod:`gato.planners.controller_setup` (docs/architecture.md); this file only re-exports it."""
from .planners.controller_setup import (__all__, apply_tunables, BSQP, build_controller,
                                        check_collision_limits, COLLISION_DEFAULTS, COLLISION_KEYS,
                                        COLLISION_MECHS, collision_obstacles, collision_settings,
                                        config_json, COST_KEYS, MPCController, rk, robot_urdf,
                                        SOLVER_KEYS, SolverParams, TUNABLE_KEYS, tunables,
                                        urdf_sha256)  # noqa: F401
