"""gato: batched SQP model-predictive control for torque-controlled robots.

The public surface: :class:`BSQP` (the solver), :class:`SolverParams` (its
configuration), :class:`SolveResult` / :class:`SolverStats`, and the robot
registry helpers. No ROS imports anywhere in this package.

The package's folders are its layers (docs/architecture.md): ``robots`` < ``core`` <
``wrench`` / ``planners`` < ``sim`` / ``replay`` < ``frontends`` / ``sampling`` < ``eval``,
``tools``. This module and the flat module paths beside it (``gato.interface``,
``gato.tasks``, ...) only re-export them for the reference API's consumers.
"""
from ._native import core as _core  # noqa: F401  (gato._core: the C++ core this CPU runs, gato._native)
from .config import SolverParams
from .interface import BSQP, SolveResult, SolverStats, available, module_name, robot_info, robot_urdf
from ._cache import register_robot
from .builder import build  # codegen + solver cache entries of a URDF (gato.builder)
from .controller import MPCController, StepResult
from .policy import GoalReference, MPCPolicy, TrajectoryReference
from . import fingerprint, tasks, worlds  # dynamics fingerprint, task generators, simulation worlds (numpy-only imports)
from . import planner, references, simloop  # planner interface + registry, EE references, the one simulation loop
from . import sampling  # sampling MPC over MuJoCo rollouts (numpy-only imports; MuJoCo loaded on use)
from . import osc  # batched operational-space controller (C++ core; pinocchio models built on use)
from . import estimators, hypotheses  # wrench samplers / identifier and the hypothesis batches (pinocchio on use)
from .mpc_gato import MPC_GATO  # closed-loop simulation driver (numpy-only imports; worlds built on use)

from .core.version import __version__  # noqa: F401 (gato.__version__)
# The flat package's module paths that `import gato` loaded (gato.cuda_backend, gato.rowkinds, ...):
# compatibility modules over the layers (docs/architecture.md), still attributes of the package.
from . import (_arrays, _cache, _native, _rowgroups_api, bsqp_planner, builder, common, config,  # noqa: F401
               controller, cuda_backend, interface, linsys_autotune, mpc_gato, policy, results, robots, rowkinds)

__all__ = ["BSQP", "SolverParams", "SolveResult", "SolverStats", "available", "module_name",
           "robot_info", "robot_urdf", "register_robot", "build",
           "MPCController", "StepResult", "MPCPolicy", "TrajectoryReference", "GoalReference",
           "fingerprint", "tasks", "worlds", "MPC_GATO", "planner", "references", "simloop", "sampling", "osc",
           "estimators", "hypotheses"]
