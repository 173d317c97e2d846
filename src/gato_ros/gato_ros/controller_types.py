"""What the controller logic (:mod:`gato_ros.controller_logic`) reports: its health counters
and state (:class:`Status`, gato_msgs/ControllerStatus) and what one tick publishes
(:class:`TickOutput`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .types import Plan, SolveInput


@dataclass
class Status:
    """Health counters and state (gato_msgs/ControllerStatus without the header)."""

    state: str = "waiting"
    reason: str = "no joint state received yet"
    ticks: int = 0
    deadline_misses: int = 0
    dropped_out_of_order: int = 0
    rejected_nonfinite: int = 0
    rejected_names: int = 0
    rejected_range: int = 0        # joint states beyond the plausible range (gato_ros.inputs.state_bounds)
    rejected_stamps: int = 0       # joint states stamped negative or too far ahead of the node clock
    rejected_references: int = 0   # EE reference windows refused (gato_ros.inputs.reference_window)
    rejected_wrenches: int = 0     # wrench estimates refused (gato_ros.inputs.wrench)
    stale_events: int = 0
    fallbacks: int = 0
    clamped: int = 0
    holds: int = 0
    latency_us: float = 0.0
    solve_us: float = 0.0
    params_json: str = ""
    active_planner: str = ""       # planner that computed the last command ("" on hold ticks)
    fallback_reason: str = ""      # "" | "deadline" | "diverged" | "reseeded" while the OSC fallback commands,
    #                                "runaway" while the runaway guard's joint hold does (gato_ros.controller_runaway)
    fallback_switches: int = 0     # switches from the planner to the OSC fallback or the runaway hold
    # EE tracking at the tick's joint state against knot 0 of its reference (issue 30): position [m],
    # orientation [rad] (NaN on a position-only reference); both NaN on hold ticks and before the first command
    ee_position_error: float = math.nan
    ee_orientation_error: float = math.nan


@dataclass
class TickOutput:
    """What one tick publishes.

    ``effort`` (n,) N*m in ``joint_names`` order, or None when there is nothing to command
    (refused input before any good state). ``stamp_ns``: the stamp of the joint state it
    answers. ``step`` / ``plan`` / ``solve_input`` are set on MPC ticks only (``solve_input``:
    what the step solved from, for recording and replay). ``duplicate``: a re-send of the
    previous output for a repeated state stamp. ``planner_step``: the
    :class:`gato.planner.StepResult` of a planner tick (any planner, the OSC fallback
    included); ``step`` stays the BSQP controller's own result (bsqp ticks only).
    """

    stamp_ns: int
    effort: np.ndarray | None
    source: str
    tick: int
    step: object = None
    plan: Plan | None = None
    solve_input: SolveInput | None = None
    duplicate: bool = False
    events: list = field(default_factory=list)
    planner_step: object = None
    planner: str = ""
