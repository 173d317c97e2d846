"""``gato.simloop``, a path the reference API and older code import: the simulation loop is
:mod:`gato.sim.loop`, with its parts in :mod:`gato.sim.clock`, :mod:`gato.sim.disturbances`,
:mod:`gato.sim.commands`, :mod:`gato.sim.tasks`, :mod:`gato.sim.record` and
:class:`EEKinematics` in :mod:`gato.robots.frames`, and the floating-base go2 episodes
(:class:`Go2Planner`, :class:`Go2StandTask`, :class:`Go2PushTask`, ...) in :mod:`gato.sim.go2_loop`
(docs/architecture.md); this file only re-exports them."""
from .core.references import MinJerkSegment  # noqa: F401
from .robots.frames import EEKinematics  # noqa: F401
from .sim.clock import check_substep, EPS, substeps_in  # noqa: F401
from .sim.commands import command_of, HoldTorque, PlanPlayback, StateFeedback  # noqa: F401
from .sim.disturbances import (ConstantWrench, Disturbance, GRAVITY, Impulse, LinkMassError,  # noqa: F401
                               parse_link_mass_scale, PendulumPayload, PointPayload)
from .sim.loop import make_world, run_closed_loop, Simulation, World  # noqa: F401
from .sim.record import RunRecord  # noqa: F401
from .sim.tasks import GoalTask, TaskTick, Task, TrackingTask  # noqa: F401
from .sim.go2_loop import (BasePush, go2_simulation, Go2Execution, Go2Planner, Go2PushTask,  # noqa: F401
                          Go2StandTask, Go2World, simloop_go2_push, simloop_go2_stand)
