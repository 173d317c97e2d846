"""The control-map protocol: ``control_map(sim, clock)`` edits ``sim.data.ctrl`` before a step.

RoboKit's ``SimMPCConfig.control_map(sim, clock)`` "turns the commands in sim.data.ctrl into
actuator controls before every step". On the CPU the planner's rollouts run in C
(``mujoco.rollout``), so a map cannot see the rollout worlds' ``MjData``: before each (coarse)
step the planner hands the map a :class:`MapWorlds` view of the worlds about to step, whose
``data`` holds world-axis arrays (as a Warp simulator's ``sim.data`` does), and ``execute`` hands
it the same view of the executing simulator's worlds. So a plan is mapped the same way when it is
predicted and when it is executed (tests: test/test_sampling_control_map.py).

``sim.data.ctrl`` is (nworld, max(nu, num_commands)): on entry its first ``num_commands``
columns hold the planned commands (``num_commands``: the map's attribute of that name, else
``nu``), on return its first ``nu`` columns are the actuator controls MuJoCo applies (then
clipped to the actuators' ``ctrlrange``). ``clock``: (3,) int, SimContext.CLOCK's layout — the
sim step about to be taken, its row in the rollout (execute: its index in the plan's executed
commands), the fine steps it spans (k in a coarse stage of k × timestep, else 1).
"""
from __future__ import annotations

import inspect
import numpy as np

__all__ = ["MapWorlds", "WorldArrays", "map_commands", "check_control_map", "num_commands", "clock_of"]


class WorldArrays:
    """``sim.data`` of a :class:`MapWorlds`: (nworld, ...) arrays of the worlds about to step.

    ``time`` (nworld,) s, ``qpos`` (nworld, nq), ``qvel`` (nworld, nv), ``act`` (nworld, na):
    the state (a map may read them; writing them changes nothing); ``ctrl`` (nworld,
    max(nu, num_commands)): the commands in, the actuator controls out (the map edits it)."""

    __slots__ = ("time", "qpos", "qvel", "act", "ctrl")

    def __init__(self, time, qpos, qvel, act, ctrl):
        self.time, self.qpos, self.qvel, self.act, self.ctrl = time, qpos, qvel, act, ctrl


class MapWorlds:
    """The simulator a control map is called with: ``mjm`` (the planning model), ``models`` (each
    world's ``MjModel``: its per-world rows where it has them), ``nworld``, ``nu`` (actuators),
    ``num_commands`` and ``data`` (:class:`WorldArrays`)."""

    def __init__(self, mjm, models, data: WorldArrays, num_commands: int):
        self.mjm, self.data, self.num_commands = mjm, data, int(num_commands)
        self.nworld, self.nu = int(data.qpos.shape[0]), int(mjm.nu)
        self._models = models

    @property
    def models(self) -> list:
        m = self._models
        return list(m) if isinstance(m, (list, tuple)) else [m] * self.nworld


def num_commands(control_map, model) -> int:
    """Commands a plan holds per step: the map's ``num_commands``, else the model's nu."""
    n = getattr(control_map, "num_commands", None) if control_map is not None else None
    return int(model.nu) if n is None else int(n)


def check_control_map(control_map) -> None:
    """ValueError naming ``control_map`` unless it is None or a callable taking (sim, clock)."""
    if control_map is None:
        return
    if not callable(control_map):
        raise ValueError(f"control_map: expected None or a callable control_map(sim, clock), got {control_map!r}")
    try:
        inspect.signature(control_map).bind(None, None)
    except TypeError:
        raise ValueError(f"control_map: expected a callable control_map(sim, clock) that edits sim.data.ctrl; "
                         f"{control_map!r} does not take (sim, clock)") from None
    except ValueError:  # a builtin without a signature: trust it
        pass
    n = getattr(control_map, "num_commands", None)
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise ValueError(f"control_map: its num_commands must be an integer >= 1, got {n!r}")


def map_commands(control_map, mjm, models, time, qpos, qvel, act, commands, clock) -> np.ndarray:
    """(n, nu) actuator controls: ``control_map(MapWorlds, clock)`` applied to n worlds' state and
    their commands (n, num_commands); ``clock`` (3,) int (module docstring)."""
    n, nc = commands.shape
    nu = int(mjm.nu)
    ctrl = np.zeros((n, max(nu, nc)))
    ctrl[:, :nc] = commands
    view = MapWorlds(mjm, models, WorldArrays(np.array(time, dtype=np.float64).reshape(n), np.array(qpos),
                                              np.array(qvel), np.array(act).reshape(n, -1), ctrl), nc)
    out = control_map(view, np.asarray(clock, dtype=np.int64))
    if out is not None:
        raise ValueError("control_map: must edit sim.data.ctrl in place and return None (RoboKit's "
                         f"control_map(sim, clock)); it returned {type(out).__name__}")
    if view.data.ctrl is not ctrl or not np.all(np.isfinite(ctrl[:, :nu])):
        raise ValueError("control_map: sim.data.ctrl must stay the same array and hold finite controls")
    return ctrl[:, :nu].copy()


def clock_of(step: int, row: int, k: int) -> np.ndarray:
    """The (3,) clock handed to a control map (module docstring)."""
    return np.array([step, row, k], dtype=np.int64)
