"""gato: batched SQP model-predictive control for torque-controlled robots.

The public surface: :class:`BSQP` (the solver), :class:`SolverParams` (its
configuration), :class:`SolveResult` / :class:`SolverStats`, and the robot
registry helpers. No ROS imports anywhere in this package.
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

__version__ = "0.1.0"

__all__ = ["BSQP", "SolverParams", "SolveResult", "SolverStats", "available", "module_name",
           "robot_info", "robot_urdf", "register_robot", "build",
           "MPCController", "StepResult", "MPCPolicy", "TrajectoryReference", "GoalReference",
           "fingerprint", "tasks", "worlds", "MPC_GATO", "planner", "references", "simloop", "sampling", "osc",
           "estimators", "hypotheses"]
