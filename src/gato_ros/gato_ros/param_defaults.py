"""What the parameter schema (:mod:`gato_ros.params`) takes from the robot registry and the
core: per-robot defaults (joint names, EE frame, ready pose, goals around the centre of record),
the robots that get parameter files, the limit-mechanism and linear-solver choices, the solver
defaults (the C++ core's struct through gato.SolverParams) and the obstacle-array check.
ROS-free; imports only gato."""
from __future__ import annotations

from gato.core.config import DEFAULT_LINSYS, SolverParams
from gato.planners.controller_setup import COLLISION_DEFAULTS, COLLISION_MECHS, collision_obstacles

__all__ = ["COLLISION_DEFAULTS", "COLLISION_MECHS", "DEFAULT_LINSYS", "LIMITS", "LINSYS", "ROBOTS", "SOLVER",
           "ee_frame", "goals", "joint_names", "obstacle_check", "q_ready", "registry_entry"]


def registry_entry(robot: str) -> dict:
    from gato.core.bsqp import robot_info

    info = robot_info(robot)
    if not info:
        raise ValueError(f"robot: unknown robot {robot!r}")
    return info


def joint_names(robot: str) -> list:
    return list(registry_entry(robot)["joints"])


def ee_frame(robot: str) -> str:
    return str(registry_entry(robot)["ee_frame"])


def q_ready(robot: str) -> list:
    from gato.sim import scenarios as tasks

    q = tasks.Q_READY.get(robot)
    if q is None:
        q = registry_entry(robot).get("q_ready")
    return [float(v) for v in q]


def goals(robot: str) -> list:
    """Three goals around the plant's centre of record (gato.tasks), flat [x, y, z] * 3, mm-rounded."""
    from gato.sim import scenarios as tasks

    c = tasks.CENTRE_OF_RECORD[robot]
    offsets = ((0.08, 0.12, 0.06), (0.08, -0.12, -0.06), (-0.06, 0.0, 0.08))
    return [round(float(c[i] + o[i]), 3) for o in offsets for i in range(3)]


#: Robots with task tables (start pose, centre of record): the ones that get parameter files.
ROBOTS = ("iiwa14", "indy7", "fr3", "gen3", "ur5e")

LIMITS = ("off", "telemetry", "barrier", "al", "admm")
LINSYS = ("pcg", "bdsv", "bdsv_first", "auto")
#: The solver defaults are the C++ core's struct (gato/types.hpp through gato._core.Settings and
#: gato.SolverParams), the one place they are written; test/test_defaults_agree.py checks the schema,
#: the dataclass, the struct and docs/parameters.md against each other.
SOLVER = SolverParams()


def obstacle_check(name: str):
    """The check of a flat obstacle array (gato.controller_setup.collision_obstacles: length a multiple
    of 4, radius > 0, normal non-zero): its reason, or None."""
    def check(value):
        try:
            collision_obstacles(name, value)
        except ValueError as e:
            return str(e)
        return None
    return check
