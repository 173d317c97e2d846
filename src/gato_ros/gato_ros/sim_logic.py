"""ROS-free logic of the simulation-world node: an adapter from the simulation schema
(gato_ros.params.SIM) to the core's one simulation loop, ``Simulation(make_world(...))``
(:mod:`gato.simloop`), advanced one control period at a time: each command is held over the
period's ``physics_dt`` steps (no remainder carried). Disturbances from the parameters:
``payload_mass_kg`` (its weight at the EE frame origin) plus ``external_wrench`` (world axes,
EE frame origin) as one ``ConstantWrench(via="jacobian")`` (J(q)^T w at every physics step);
``pendulum_mass_kg`` / ``pendulum_length_m`` as a ``PendulumPayload`` (pinocchio world only);
``link_mass_scale`` ("L4:1.2,L6:0.9") as a ``LinkMassError`` in the world's model only (the
controller keeps the nominal URDF, as a real robot and its URDF disagree).

Lockstep: the world publishes the joint state of tick k (stamp t_k = k * period) and
advances to t_{k+1} only when a command stamped t_k arrives (gato_msgs/EffortCommand carries
the stamp of the joint state it answers; the ros2_control Float64MultiArray has none).
Commands for other stamps are ignored and counted. Given the same commands, the run is
bit-for-bit reproducible regardless of machine load.

Realtime: the caller advances the world on a wall-clock timer with the latest command held
while it is fresh (:class:`gato_ros.watchdog.CommandWatchdog`; timeouts count the world's
own simulated time). Before the first command and after a timeout the world applies
``command_timeout_action`` (:meth:`SimWorldLogic.advance_safe`), re-evaluated at every
physics step (a drive's servo rate): ``hold`` (:class:`gato.safety.JointHold` towards the
joint positions at the timeout, ``hold_frequency_hz``) or ``brake``
(:class:`gato.safety.JointBrake`). Both use the URDF model, not the world's: with a model
error or a payload the hold settles off its target by that error. In lockstep a timeout only
reports that the controller stopped answering (the world waits as always).
"""
from __future__ import annotations

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf
from gato.robots.frames import EEKinematics
from gato.sim.clock import check_substep
from gato.sim.commands import HoldTorque, StateFeedback
from gato.sim.loop import make_world, Simulation
from gato.planners.safety import JointBrake, JointHold
# parse_link_mass_scale: the node's bringup and the tests import it from here
from gato.sim.disturbances import ConstantWrench, GRAVITY, LinkMassError, parse_link_mass_scale, PendulumPayload

from . import params as schema
from .joint_order import JointOrder
from .types import JointStateSample, sec_to_ns
from .watchdog import CommandWatchdog  # noqa: F401  (the node and tests import it from here)

__all__ = ["SimWorldLogic", "CommandWatchdog", "parse_link_mass_scale"]


class SimWorldLogic:
    """Args: config: values of the simulation-world schema (gato_ros.params.SIM); missing
    names take their defaults for ``config["robot"]``. Raises ValueError on invalid values.

    ``sim``: the core :class:`gato.simloop.Simulation`; ``q``, ``dq`` its state (URDF order);
    ``u`` (nv,) N*m the motor torques applied last; ``t_ns`` the stamp of the current tick;
    ``order``: joint_names vs the URDF's order (:class:`gato_ros.joint_order.JointOrder`)."""

    def __init__(self, config: dict):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.SIM, config, "sim")
        self.cfg = cfg
        urdf = str(robot_urdf(robot))
        ee = robot_info(robot)["ee_frame"]
        self.period_ns = sec_to_ns(1.0 / cfg["control_rate_hz"])
        self.physics_dt = cfg["physics_dt"]
        self.substeps = check_substep(self.physics_dt, self.period_ns / 1e9, "1 / control_rate_hz",
                                      name="physics_dt", whole=True)
        self.mass_scale = parse_link_mass_scale(cfg["link_mass_scale"])
        w = np.asarray(cfg["external_wrench"], dtype=np.float64)
        if w.shape != (6,):
            raise ValueError(f"external_wrench: expected 6 values [fx, fy, fz, tx, ty, tz], got {w.size}")
        self.wrench = w + np.r_[0.0, 0.0, -GRAVITY * cfg["payload_mass_kg"], 0.0, 0.0, 0.0]
        self._load = ConstantWrench(self.wrench, via="jacobian")
        dist = [self._load, LinkMassError(self.mass_scale)]
        if cfg["pendulum_mass_kg"] > 0:
            dist.append(PendulumPayload(cfg["pendulum_mass_kg"], cfg["pendulum_length_m"],
                                        name="pendulum_mass_kg"))
        try:
            self.world = make_world(cfg["world"], urdf, ee_frame=ee, timestep=self.physics_dt,
                                    disturbances=dist)
        except ValueError as e:
            if str(e).startswith("mass_scale: "):  # the world's check (unknown link): name the parameter
                raise ValueError("link_mass_scale: " + str(e)[len("mass_scale: "):]) from None
            raise
        self.kin = EEKinematics(urdf, ee)
        model = self.kin.model
        self.order = JointOrder(cfg["joint_names"], list(model.names)[1:], robot)
        self.joint_names, self.urdf_joints = self.order.names, self.order.model_joints
        q0 = np.asarray(cfg["q0"], dtype=np.float64)
        if q0.shape != (model.nq,):
            raise ValueError(f"q0: expected {model.nq} joint positions [rad], got {q0.size}")
        self.sim = Simulation(self.world, q0, sim_dt=self.physics_dt, kinematics=self.kin,
                              disturbances=dist, carry_remainder=False)
        self.t_ns = 0
        self.u = np.zeros(model.nv)     # last applied torques, URDF order
        self.ignored_commands = 0
        self.saturated_periods = 0      # control periods whose command saturated at the effort limits
        self.effort_limit = np.asarray(model.effortLimit, dtype=np.float64).copy()  # URDF order [N*m]
        self._u_lim = np.where(self.effort_limit > 0, self.effort_limit, np.inf)     # advance()'s saturation
        self.timeout_action = cfg["command_timeout_action"]
        self.hold = JointHold(model, cfg["hold_frequency_hz"], self.effort_limit)
        self.hold.target = q0.copy()
        self.brake = JointBrake(model, self.effort_limit, self.physics_dt)

    # ------------------------------------------------------------------ state
    @property
    def q(self) -> np.ndarray:
        return self.sim.q

    @property
    def dq(self) -> np.ndarray:
        return self.sim.dq

    def joint_state(self) -> JointStateSample:
        """The current state, stamped t_k, in ``joint_names`` order (effort: the applied torques)."""
        inv = self.order.to_names
        return JointStateSample(self.t_ns, list(self.joint_names), self.q[inv].copy(), self.dq[inv].copy(),
                                self.u[inv].copy())

    def ee_position(self) -> np.ndarray:
        return self.sim.ee_pos()

    @property
    def done(self) -> bool:
        d = self.cfg["duration_s"]
        return d > 0 and self.t_ns >= sec_to_ns(d)

    # ------------------------------------------------------------------ commands
    def effort_from(self, effort, names=None) -> np.ndarray:
        """Command torques in URDF order from ``effort`` in ``names`` order (default: the
        configured joint_names order, the Float64MultiArray convention). Raises ValueError on
        a wrong length, missing or repeated names, or NaN/Inf. Names beyond the model's joints
        (a gripper) are ignored. Finite torques beyond the URDF effort limits are accepted and
        saturate there when applied (:meth:`advance`), as the motors would."""
        e = np.asarray(effort, dtype=np.float64).reshape(-1)
        names = self.joint_names if names is None or len(names) == 0 else list(names)
        if e.size != len(names):
            raise ValueError(f"effort: {e.size} values for {len(names)} joints")
        if len(set(names)) != len(names):
            raise ValueError(f"effort: repeated joint names in {names}")
        idx = self.order.index(names)
        if idx is None:
            raise ValueError(f"effort: command lacks joints {self.order.missing(names)}")
        if not np.all(np.isfinite(e)):
            raise ValueError("effort: contains NaN or Inf")
        return e[idx]

    def lockstep_accepts(self, stamp_ns: int) -> bool:
        """True when a command stamped ``stamp_ns`` answers the current tick; others are counted."""
        if int(stamp_ns) == self.t_ns:
            return True
        self.ignored_commands += 1
        return False

    # ------------------------------------------------------------------ physics
    def load_torque(self) -> np.ndarray:
        """(nv,) N*m: the payload weight + external wrench as joint torques J(q)^T w at the current q."""
        tau = self._load.torque(self.sim.t, self.q, self.dq, self.kin)
        return np.zeros_like(self.u) if tau is None else tau

    def _advance(self, command) -> None:
        self.sim.advance(command, self.period_ns / 1e9)
        if self.sim.diverged:
            raise RuntimeError(f"sim world: the {self.cfg['world']} world diverged before t={self.t_ns / 1e9:.3f} s")
        self.t_ns += self.period_ns

    def advance(self, u_urdf: np.ndarray) -> None:
        """Advance one control period with torques ``u_urdf`` (URDF order) held; t_k -> t_{k+1}.
        Torques beyond the URDF effort limits saturate at them (actuator saturation, as in
        :class:`gato.sim.loop.Simulation` with ``effort_limit``; a joint without a limit, 0 in
        the URDF, is not clamped), counted in ``saturated_periods``."""
        u = np.asarray(u_urdf, dtype=np.float64)
        self.u = np.clip(u, -self._u_lim, self._u_lim)
        if np.any(self.u != u):
            self.saturated_periods += 1
        self._advance(HoldTorque(self.u))

    # ------------------------------------------------------------------ safe behaviour (command timeout)
    def engage_safe(self) -> None:
        """Latch the hold target: the joint positions now (call when a timeout happens)."""
        self.hold.target = self.q.copy()

    def advance_safe(self) -> None:
        """Advance one control period under ``command_timeout_action`` (torques re-evaluated
        at every physics step); ``u`` becomes the motor torque applied last (zero for brake)."""
        brake = self.timeout_action == "brake"
        law = StateFeedback(self.brake if brake else self.hold)
        self._advance(law)
        self.u = np.zeros_like(self.u) if brake else law.last
