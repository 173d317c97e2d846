"""gato.sampling: sampling MPC over MuJoCo rollouts (the RoboKit SimMPC API, on the CPU).

- :class:`SimMPCConfig` / :class:`SimMPCStage`: the planner's settings (docs/sampling.md);
- cost terms :class:`StateTask`, :class:`SensorTask`, :class:`ControlTask`, :class:`AlignTask`,
  :class:`ContactTask`, :class:`GraspTask`, added with ``config.add(term, running_scale)``;
- :class:`SimMPC`: ``plan(data, t0)`` / ``execute(sim, steps)``;
- :class:`MjSim`: the CPU simulator (``mujoco.rollout`` over a pinned thread pool), with
  ``build_coarse_spec`` (:class:`CoarseConfig`), ``build_entity`` (:class:`Entity`),
  ``build_contact_sensor`` (:class:`ContactSensor`) and ``compute_rays``;
- :class:`CartesianControl`: an end-effector twist command map;
- :mod:`gato.sampling.scenes`: the bundled robots and MJCF files as planning scenes, the iiwa14
  figure-8 / pick-and-place / box-pushing tasks as terms.

Imports MuJoCo lazily (inside functions); NumPy only at import time.
"""
from .cartesian import CartesianControl
from .config import SimMPCConfig, SimMPCStage
from .sim import MjSim
from .sim_mpc import SimMPC
from .batch import RolloutBatch
from .terms import AlignTask, ContactTask, ControlTask, GraspTask, SensorTask, StateTask, Term
from .task import Context, SimContext, Task, VarKey, sim_context
from .residuals import SimResidualTask, SimTask
from .ilqr import ILQROptimizer, ILQROptimizerConfig
from .coarse import CoarseConfig, build_coarse_spec
from .entities import ContactSensor, Entity, EntityData

__all__ = ["SimMPC", "SimMPCConfig", "SimMPCStage", "MjSim", "CartesianControl", "StateTask", "SensorTask",
           "ControlTask", "AlignTask", "ContactTask", "GraspTask", "Term", "RolloutBatch", "Context", "SimContext",
           "Task", "VarKey", "sim_context", "SimTask", "SimResidualTask", "ILQROptimizer", "ILQROptimizerConfig",
           "CoarseConfig", "build_coarse_spec", "Entity", "EntityData", "ContactSensor"]
