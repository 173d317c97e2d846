"""``gato.mpc_gato``, a path the reference API and older code import: the module is
:mod:`gato.frontends.mpc_gato` (docs/architecture.md); this file only re-exports it."""
from .frontends.mpc_gato import (__all__, BSQP, BSQPPlanner, MPC_GATO, MPCController,
                                 Plan, SampledTrajectory, solver_params)  # noqa: F401
