"""gato: batched SQP model-predictive control for torque-controlled robots.

The public surface: :class:`BSQP` (the solver), :class:`SolverParams` (its
configuration), :class:`SolveResult` / :class:`SolverStats`, and the robot
registry helpers. No ROS imports anywhere in this package.
"""
from .config import SolverParams
from .interface import BSQP, SolveResult, SolverStats, available, module_name, robot_info, robot_urdf
from ._cache import register_robot

__version__ = "0.1.0"

__all__ = ["BSQP", "SolverParams", "SolveResult", "SolverStats", "available", "module_name",
           "robot_info", "robot_urdf", "register_robot"]
