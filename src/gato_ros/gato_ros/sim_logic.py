"""ROS-free logic of the simulation-world node: a gato world (MuJoCo or pinocchio)
advanced one control period at a time, external loads, and the lockstep rule.

Lockstep: the world publishes the joint state of tick k (stamp t_k = k * period) and
advances to t_{k+1} only when a command stamped t_k arrives (gato_msgs/EffortCommand
carries the stamp of the joint state it answers; the ros2_control Float64MultiArray
has none). Commands for other stamps are ignored and counted. Given the same
commands, the run is bit-for-bit reproducible regardless of machine load.

Realtime: the caller advances the world on a wall-clock timer with the latest
command held (zero-order hold) while it is fresh.

Command watchdog (:class:`CommandWatchdog`): like a drive with a watchdog. No command
for ``command_timeout_s`` is a timeout, measured in the world's own (simulated) time in
realtime (a world stalled by machine load does not time out a live controller) and on
the wall clock in lockstep (where simulated time stops while the world waits). Realtime: from then on (and before
the first command) the world applies ``command_timeout_action`` instead of commands
(:meth:`SimWorldLogic.advance_safe`), until a command arrives again:

- ``hold``: PD to the joint positions at the moment of the timeout, critically damped
  through the mass matrix, plus gravity and Coriolis compensation (inverse dynamics
  ``rnea(q, dq, w^2 (q_hold - q) - 2 w dq)``, w = 2 pi ``hold_frequency_hz``), clamped
  to the URDF effort limits, evaluated at every physics step (a drive's servo rate);
- ``brake``: motor torque zero; joint brakes with a capacity of the URDF effort limit
  apply the torque that stops every joint within one physics step (gravity included),
  clamped to that capacity (a brake that slips when overloaded).

Both use the URDF model, not the world's (a drive knows the nominal robot: with
``link_mass_scale`` or a payload the hold settles off its target by the model error
over the PD stiffness). Lockstep: the world waits for the command of the current tick
as always; a timeout only reports that the controller stopped answering.

Loads: ``payload_mass_kg`` (a point mass at the EE frame origin: its weight only,
inertia neglected) and ``external_wrench`` (world axes, at the EE frame origin) are
applied as joint torques J(q)^T w, re-evaluated at every physics step. The pinocchio
world can also carry a pendulum payload (gato.worlds.PinocchioWorld).

Model errors: ``link_mass_scale`` ("L4:1.2,L6:0.9": URDF link name : factor, comma
separated) scales those links' mass and rotational inertia (COM unchanged) in the
world's model only (gato.worlds ``mass_scale``); the controller keeps the nominal
model, so the two disagree the way a real robot and its URDF do.
"""
from __future__ import annotations

import numpy as np

import gato

from . import params as schema
from .types import JointStateSample, sec_to_ns

__all__ = ["SimWorldLogic", "CommandWatchdog", "parse_link_mass_scale"]

GRAVITY = 9.81  # m/s^2


def parse_link_mass_scale(text: str) -> dict:
    """{link: factor} from the ``link_mass_scale`` parameter: comma-separated ``LINK:FACTOR``
    entries (blanks around entries ignored; "" = none). ValueError (naming the parameter and
    the entry) for an entry that is not LINK:FACTOR, a factor that is not a finite number > 0
    and a link given twice; whether the link exists is the world's check."""
    out: dict = {}
    for entry in (e.strip() for e in str(text).split(",")):
        if not entry:
            continue
        link, sep, factor = (x.strip() for x in entry.rpartition(":"))
        if not sep or not link or not factor:
            raise ValueError(f"link_mass_scale: entry {entry!r} is not LINK:FACTOR (e.g. L4:1.2)")
        try:
            f = float(factor)
        except ValueError:
            raise ValueError(f"link_mass_scale: entry {entry!r}: factor {factor!r} is not a number") from None
        if not np.isfinite(f) or f <= 0:
            raise ValueError(f"link_mass_scale: entry {entry!r}: factor must be a finite number > 0, got {factor}")
        if link in out:
            raise ValueError(f"link_mass_scale: link {link!r} is given twice")
        out[link] = f
    return out


class SimWorldLogic:
    """Args: config: values of the simulation-world schema (gato_ros.params.SIM); missing
    names take their defaults for ``config["robot"]``. Raises ValueError on invalid values."""

    def __init__(self, config: dict):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.SIM, config, "sim")
        self.cfg = cfg
        urdf = str(gato.robot_urdf(robot))
        ee = gato.robot_info(robot)["ee_frame"]
        self.period_ns = sec_to_ns(1.0 / cfg["control_rate_hz"])
        self.physics_dt = cfg["physics_dt"]
        n_sub = self.period_ns / sec_to_ns(self.physics_dt)
        if abs(n_sub - round(n_sub)) > 1e-9 or round(n_sub) < 1:
            raise ValueError(f"physics_dt: {self.physics_dt:g} s does not divide the control period "
                             f"{1.0 / cfg['control_rate_hz']:g} s")
        self.substeps = int(round(n_sub))
        self.mass_scale = parse_link_mass_scale(cfg["link_mass_scale"])
        try:
            if cfg["world"] == "mujoco":
                if cfg["pendulum_mass_kg"] > 0:
                    raise ValueError("pendulum_mass_kg: the pendulum payload is a pinocchio-world feature; "
                                     "use world=pinocchio or payload_mass_kg")
                self.world = gato.worlds.MuJoCoWorld(urdf, plane=None, timestep=self.physics_dt,
                                                     mass_scale=self.mass_scale)
            else:
                pend = None
                if cfg["pendulum_mass_kg"] > 0:
                    pend = dict(mass=cfg["pendulum_mass_kg"], length=cfg["pendulum_length_m"])
                self.world = gato.worlds.PinocchioWorld(urdf, ee_frame=ee, pendulum=pend, timestep=self.physics_dt,
                                                        mass_scale=self.mass_scale)
        except ValueError as e:
            if str(e).startswith("mass_scale: "):  # the world's check (unknown link): name the parameter
                raise ValueError("link_mass_scale: " + str(e)[len("mass_scale: "):]) from None
            raise
        import pinocchio as pin

        self._pin = pin
        self._model = pin.buildModelFromUrdf(urdf)
        self._data = self._model.createData()
        self._fid = self._model.getFrameId(ee)
        self.urdf_joints = list(self._model.names)[1:]
        names = list(cfg["joint_names"])
        if sorted(names) != sorted(self.urdf_joints):
            raise ValueError(f"joint_names: {names} are not the joints of {robot}'s URDF {self.urdf_joints}")
        self.joint_names = names
        self._to_urdf = np.array([names.index(n) for n in self.urdf_joints])  # urdf order <- names order
        nq = self._model.nq
        q0 = np.asarray(cfg["q0"], dtype=np.float64)
        if q0.shape != (nq,):
            raise ValueError(f"q0: expected {nq} joint positions [rad], got {q0.size}")
        w = np.asarray(cfg["external_wrench"], dtype=np.float64)
        if w.shape != (6,):
            raise ValueError(f"external_wrench: expected 6 values [fx, fy, fz, tx, ty, tz], got {w.size}")
        self.wrench = w + np.r_[0.0, 0.0, -GRAVITY * cfg["payload_mass_kg"], 0.0, 0.0, 0.0]
        self.q, self.dq = q0.copy(), np.zeros(nq)
        self.t_ns = 0
        self.u = np.zeros(nq)           # last applied torques, URDF order
        self.ignored_commands = 0
        self.effort_limit = np.asarray(self._model.effortLimit, dtype=np.float64).copy()  # URDF order [N*m]
        self.timeout_action = cfg["command_timeout_action"]
        self.hold_omega = 2.0 * np.pi * cfg["hold_frequency_hz"]
        self.hold_q = self.q.copy()     # target of the safe hold [rad], URDF order
        self._data_id = self._model.createData()

    # ------------------------------------------------------------------ state
    def joint_state(self) -> JointStateSample:
        """The current state, stamped t_k, in ``joint_names`` order (effort: the applied torques)."""
        inv = np.argsort(self._to_urdf)  # names order <- urdf order
        return JointStateSample(self.t_ns, list(self.joint_names), self.q[inv].copy(), self.dq[inv].copy(),
                                self.u[inv].copy())

    def ee_position(self) -> np.ndarray:
        pin = self._pin
        pin.forwardKinematics(self._model, self._data, self.q)
        return pin.updateFramePlacement(self._model, self._data, self._fid).translation.copy()

    @property
    def done(self) -> bool:
        d = self.cfg["duration_s"]
        return d > 0 and self.t_ns >= sec_to_ns(d)

    # ------------------------------------------------------------------ commands
    def effort_from(self, effort, names=None) -> np.ndarray:
        """Command torques in URDF order from ``effort`` in ``names`` order (default: the
        configured joint_names order, the Float64MultiArray convention). Raises ValueError on
        a wrong length, unknown names or NaN/Inf."""
        e = np.asarray(effort, dtype=np.float64).reshape(-1)
        names = self.joint_names if names is None or len(names) == 0 else list(names)
        if e.size != len(names):
            raise ValueError(f"effort: {e.size} values for {len(names)} joints")
        pos = {n: i for i, n in enumerate(names)}
        missing = [j for j in self.urdf_joints if j not in pos]
        if missing:
            raise ValueError(f"effort: command lacks joints {missing}")
        if not np.all(np.isfinite(e)):
            raise ValueError("effort: contains NaN or Inf")
        return e[[pos[j] for j in self.urdf_joints]]

    def lockstep_accepts(self, stamp_ns: int) -> bool:
        """True when a command stamped ``stamp_ns`` answers the current tick; others are counted."""
        if int(stamp_ns) == self.t_ns:
            return True
        self.ignored_commands += 1
        return False

    # ------------------------------------------------------------------ physics
    def _load_torque(self) -> np.ndarray:
        if not np.any(self.wrench):
            return 0.0
        pin = self._pin
        J = pin.computeFrameJacobian(self._model, self._data, self.q, self._fid, pin.LOCAL_WORLD_ALIGNED)
        return J.T @ self.wrench  # [f; tau] at the EE frame origin, world axes

    def advance(self, u_urdf: np.ndarray) -> None:
        """Advance one control period with torques ``u_urdf`` (URDF order) held; t_k -> t_{k+1}."""
        self.u = np.asarray(u_urdf, dtype=np.float64).copy()
        for _ in range(self.substeps):
            self.q, self.dq = self.world.step(self.q, self.dq, self.u + self._load_torque(), self.physics_dt)
        self.t_ns += self.period_ns

    # ------------------------------------------------------------------ safe behaviour (command timeout)
    def engage_safe(self) -> None:
        """Latch the hold target: the joint positions now (call when a timeout happens)."""
        self.hold_q = self.q.copy()

    def hold_torque(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """(nv,) N*m, URDF order: the ``hold`` torque at state (q, dq): inverse dynamics of the
        critically damped PD acceleration towards ``hold_q``, clamped to the effort limits."""
        w = self.hold_omega
        a = w * w * (self.hold_q - q) - 2.0 * w * dq
        tau = np.asarray(self._pin.rnea(self._model, self._data_id, q, dq, a), dtype=np.float64)
        return np.clip(tau, -self.effort_limit, self.effort_limit)

    def brake_torque(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """(nv,) N*m, URDF order: the joint brakes' torque at (q, dq): what stops every joint
        within one physics step (``rnea(q, dq, -dq / physics_dt)``: gravity included),
        clamped to the brake capacity (the effort limit)."""
        tau = np.asarray(self._pin.rnea(self._model, self._data_id, q, dq, -dq / self.physics_dt), dtype=np.float64)
        return np.clip(tau, -self.effort_limit, self.effort_limit)

    def advance_safe(self) -> None:
        """Advance one control period under ``command_timeout_action`` (torques re-evaluated
        at every physics step); ``u`` becomes the motor torque applied last (zero for brake)."""
        brake = self.timeout_action == "brake"
        for _ in range(self.substeps):
            tau = self.brake_torque(self.q, self.dq) if brake else self.hold_torque(self.q, self.dq)
            self.q, self.dq = self.world.step(self.q, self.dq, tau + self._load_torque(), self.physics_dt)
        self.u = np.zeros_like(self.u) if brake else tau
        self.t_ns += self.period_ns


class CommandWatchdog:
    """Freshness of the command input on the caller's clock (seconds), and its events. States: ``waiting`` (no command yet), ``running``, ``timeout``. Only a running
    input times out (start-up is not a timeout); the next command ends a timeout.

    Args:
        timeout_s: age of the last command [s] beyond which the input times out (> 0).
        action: what the world does meanwhile, for the reports: "hold", "brake" or "wait".
    """

    def __init__(self, timeout_s: float, action: str):
        if not timeout_s > 0:
            raise ValueError(f"command_timeout_s: expected > 0 s, got {timeout_s!r}")
        if action not in ("hold", "brake", "wait"):
            raise ValueError(f"command_timeout_action: expected hold, brake or wait, got {action!r}")
        self.timeout_s, self.action = float(timeout_s), action
        self.state = "waiting"
        self.reason = "no command received yet"
        self.timeouts = 0
        self.last_timeout_sim_ns = 0
        self.applied = 0
        self.rejected = 0
        self._last_s = None

    @property
    def fresh(self) -> bool:
        """True while commands are to be applied (state ``running``)."""
        return self.state == "running"

    def age_s(self, now_s: float) -> float:
        """Age of the last accepted command [s], -1 before the first."""
        return -1.0 if self._last_s is None else float(now_s) - self._last_s

    def command(self, now_s: float, sim_ns: int) -> str | None:
        """An accepted command at ``now_s``. Returns the event text when it ends a timeout
        (or is the first command), else None."""
        prev, since = self.state, self.age_s(now_s)
        self._last_s = float(now_s)
        self.applied += 1
        if prev == "running":
            return None
        self.state, self.reason = "running", ""
        if prev == "waiting":
            return f"first command at t={sim_ns / 1e9:.3f} s"
        return f"commands resumed at t={sim_ns / 1e9:.3f} s after {since:.3f} s without"

    def check(self, now_s: float, sim_ns: int) -> str | None:
        """Time out a running input whose last command is older than ``timeout_s``. Returns
        the event text on the transition, else None."""
        if self.state != "running" or self.age_s(now_s) <= self.timeout_s + 1e-9:   # 1e-9: float sums of periods
            return None
        self.state = "timeout"
        self.timeouts += 1
        self.last_timeout_sim_ns = int(sim_ns)
        what = {"hold": "holding the joint positions (damped PD + gravity compensation)",
                "brake": "motor torque zero, joint brakes on",
                "wait": "the lockstep world waits for it"}[self.action]
        self.reason = (f"controller stopped answering at t={sim_ns / 1e9:.3f} s: no command for "
                       f"{self.age_s(now_s):.3f} s (command_timeout_s = {self.timeout_s:g}); {what}")
        return self.reason
