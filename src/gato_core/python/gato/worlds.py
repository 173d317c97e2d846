"""``gato.worlds``, a path the reference API and older code import: the worlds are
:mod:`gato.sim.mujoco_world` and :mod:`gato.sim.pinocchio_world` (with the MuJoCo model in
:mod:`gato.robots.mjcf`; docs/architecture.md); this file only re-exports them."""
from .robots.mjcf import TABLE_CONAFFINITY, TABLE_CONTYPE, ROBOT_CONAFFINITY, ROBOT_CONTYPE  # noqa: F401
from .sim.mujoco_world import MuJoCoWorld, probe_tip_drop  # noqa: F401
from .sim.pinocchio_world import PinocchioWorld  # noqa: F401
