"""ArmTrackEnv: a gymnasium environment for torque-controlled arm end-effector tracking.

An adapter over the core's simulation loop (:mod:`gato.simloop`): a
:class:`gato.simloop.Simulation` on a pinocchio RK4 world holds each action over the
control period (zero-order hold, actuator saturation, the unmodelled wrench as a
:class:`gato.simloop.ConstantWrench`, divergence detection); the env adds only the gym
API, the reward and termination. Pair it with :class:`gato.MPCPolicy` or any torque
policy::

    import gato, gato.envs
    env = gato.envs.ArmTrackEnv("iiwa14", reference=ref, ctrl_dt=0.01)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)

This module imports gymnasium; ``import gato`` does not import it (use
``import gato.envs``). Units: q rad, dq rad/s, torques N*m, positions m (world
frame), times s, wrenches [force N; torque N*m].
"""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..robots.frames import EEKinematics
from ..sim.clock import check_substep, EPS
from ..sim.commands import HoldTorque
from ..sim.disturbances import _wrench, ConstantWrench
from ..sim.loop import make_world, Simulation
from ..core.references import Reference, _positive, _vector
from ..robots.registry import all_robots, resolve_robot

__all__ = ["ArmTrackEnv"]


class ArmTrackEnv(gym.Env):
    """Torque-controlled arm with RK4 substeps and an optional unmodelled EE wrench.

    - Observation: the state ``[q, dq]``, ``Box(-inf, inf, (nq + nv,), float64)``
      (rad, rad/s; unbounded: the plant does not enforce position limits).
    - Action: joint torques (nv,) N*m, ``Box(-effort, effort)`` from the URDF
      ``<limit effort>`` tags. An in-shape, finite action outside the box is
      clipped to it (actuator saturation); a misshaped or non-finite action
      raises ValueError. The action is held (zero-order hold) for ``ctrl_dt``:
      ``n_substeps = floor(ctrl_dt / sim_dt)`` RK4 steps of ``sim_dt``
      (float rounding absorbed: 0.03 / 0.001 is 30 substeps).
    - Reward: ``-||ee_pos(q) - reference.window(t)[0:3]||`` (m) at the state and
      time after the step; 0 without a reference.
    - terminated: the state became non-finite (the integrator diverged); the
      observation then holds NaN, the reward is ``-nonfinite_penalty`` and
      further ``step`` calls raise until ``reset``.
    - truncated: ``t >= horizon_s`` or ``reference.done(t)`` (stepping on after
      a truncation is allowed and keeps reporting truncated).
    - info: ``{"t": time after the step [s], "ee_pos": (3,) m, "ref0": (3,) m
      reference knot 0 at t, "tracking_err": ||ee_pos - ref0|| m}`` (``ref0`` and
      ``tracking_err`` are None without a reference; ``ee_pos`` and
      ``tracking_err`` are NaN on a terminated step). ``reset`` returns the same
      keys at t = 0.

    Args:
        robot: a registered plant name ("iiwa14", "indy7", ...) or a URDF path.
        ee_frame: tracked frame (URDF frame name); default: the plant's registered
            EE frame (the point the solver's tracking cost uses), else "EE".
        q0: (nq,) start configuration [rad]; default the registry's ready pose
            (``gato.tasks.Q_READY[plant]``), else zeros.
        dq0: (nv,) start velocity [rad/s]; default zeros.
        reference: None or an object with ``window(t) -> (6N,)`` ([x, y, z, 0, 0, 0]
            per knot, m) and optionally ``done(t) -> bool``
            (:class:`gato.TrajectoryReference`, :class:`gato.GoalReference`), or a
            :class:`gato.references.Reference` (its position at t is the reward's target).
        ctrl_dt: control period [s] (how long one action is held).
        sim_dt: integration step [s] (<= ctrl_dt).
        horizon_s: episode length [s]: truncation at t >= horizon_s.
        f_ext_world: None or (6,) constant wrench [force (3) N; torque (3) N*m],
            WORLD axes, acting at the EE frame origin, re-expressed at every RK4
            stage (it stays world-constant while the arm moves). The ground truth a
            controller does not see.
        q0_jitter: half-width [rad] of a uniform per-joint jitter added to the start
            configuration at every ``reset``, drawn from the env's seeded
            ``np_random`` (``reset(seed=s)`` makes it reproducible); 0 (default)
            starts exactly at q0.
        nonfinite_penalty: reward of the step on which the state became non-finite
            (``-nonfinite_penalty``; a finite number so returns stay finite).

    ``reset(seed=None, options=None)``: options may hold ``"q0"`` (nq,) and/or
    ``"dq0"`` (nv,) to override the start state of this episode (the jitter is
    added to that q0 too).
    """

    metadata = {"render_modes": []}

    def __init__(self, robot="iiwa14", *, ee_frame=None, q0=None, dq0=None, reference=None, ctrl_dt=0.01,
                 sim_dt=0.001, horizon_s=10.0, f_ext_world=None, q0_jitter=0.0, nonfinite_penalty=100.0):
        super().__init__()
        self.urdf_path, self.plant, self.ee_frame = resolve_robot(robot, ee_frame)
        try:
            self.kin = EEKinematics(self.urdf_path, self.ee_frame)
        except ValueError:
            raise ValueError(f"ee_frame: frame {self.ee_frame!r} not found in {Path(self.urdf_path).name}") from None
        self.model = self.kin.model
        self.nq, self.nv = int(self.model.nq), int(self.model.nv)
        self.ctrl_dt = _positive(ctrl_dt, "ctrl_dt", "s")
        self.n_substeps = check_substep(sim_dt, self.ctrl_dt, "ctrl_dt")
        self.sim_dt = float(sim_dt)
        self.horizon_s = _positive(horizon_s, "horizon_s", "s")
        if reference is not None and not callable(getattr(reference, "window", None)):
            raise ValueError(f"reference: expected None or an object with window(t), got {type(reference).__name__}")
        self.reference = reference
        self.q0_jitter = _positive(q0_jitter, "q0_jitter", "rad (uniform half-width)", zero_ok=True)
        self.nonfinite_penalty = _positive(nonfinite_penalty, "nonfinite_penalty", "", zero_ok=True)
        if q0 is None:
            q0 = all_robots().get(self.plant or "", {}).get("q_ready", np.zeros(self.nq))
        self.q0 = _vector(q0, "q0", self.nq, "[rad]")
        self.dq0 = np.zeros(self.nv) if dq0 is None else _vector(dq0, "dq0", self.nv, "[rad/s]")
        self.f_ext_world = None if f_ext_world is None else _wrench(f_ext_world, "f_ext_world")
        wrench = [] if self.f_ext_world is None else [ConstantWrench(self.f_ext_world)]
        self.world = make_world("pinocchio", self.urdf_path, ee_frame=self.ee_frame, timestep=self.sim_dt,
                                disturbances=wrench)
        self.effort_limit = np.array(self.model.effortLimit, dtype=np.float64)
        self.action_space = spaces.Box(-self.effort_limit, self.effort_limit, shape=(self.nv,), dtype=np.float64)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(self.nq + self.nv,), dtype=np.float64)
        self.sim = None
        self._terminated = False

    # ---------------------------------------------------------------- helpers
    @property
    def t(self) -> float:
        """Episode time [s] (counted periods x ctrl_dt)."""
        return 0.0 if self.sim is None else self.sim.t

    @property
    def state(self):
        """Current state [q, dq] (nq + nv,) (a copy), or None before the first reset."""
        return None if self.sim is None else self.sim.x

    def ee_pos(self, q) -> np.ndarray:
        """World position [m] (3,) of the ``ee_frame`` origin at configuration q (nq,) rad."""
        return self.kin.ee_pos(_vector(q, "q", self.nq, "[rad]"))

    def _ref0(self):
        r = self.reference
        if r is None:
            return None
        p = r.positions(self.t)[0] if isinstance(r, Reference) else np.asarray(r.window(self.t), dtype=np.float64)
        return p[0:3].copy()

    def _info(self):
        q = self.sim.q
        ee = self.kin.ee_pos(q) if np.all(np.isfinite(q)) else np.full(3, np.nan)
        ref0 = self._ref0()
        return {"t": self.t, "ee_pos": ee, "ref0": ref0,
                "tracking_err": None if ref0 is None else float(np.linalg.norm(ee - ref0))}

    # ---------------------------------------------------------------- gym API
    def reset(self, *, seed=None, options=None):
        """Start an episode at t = 0 from q0 (+ seeded jitter) and dq0. Returns (obs, info)."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"q0", "dq0"}
        if unknown:
            raise ValueError(f"options: unknown keys {sorted(unknown)}; expected 'q0' and/or 'dq0'")
        q = _vector(options["q0"], "options['q0']", self.nq, "[rad]") if "q0" in options else self.q0.copy()
        dq = _vector(options["dq0"], "options['dq0']", self.nv, "[rad/s]") if "dq0" in options else self.dq0.copy()
        if self.q0_jitter > 0:
            q = q + self.np_random.uniform(-self.q0_jitter, self.q0_jitter, self.nq)
        self.sim = Simulation(self.world, q, dq, sim_dt=self.sim_dt, kinematics=self.kin,
                              effort_limit=self.effort_limit, carry_remainder=False)
        self._terminated = False
        return self.state, self._info()

    def step(self, action):
        """Hold ``action`` (nv,) N*m for ctrl_dt. Returns (obs, reward, terminated, truncated, info)."""
        if self.sim is None:
            raise RuntimeError("ArmTrackEnv.step: call reset() first")
        if self._terminated:
            raise RuntimeError("ArmTrackEnv.step: the episode terminated (non-finite state); call reset()")
        u = _vector(action, "action", self.nv, "(joint torques N*m)")
        self.sim.advance(HoldTorque(u), self.ctrl_dt)
        info = self._info()
        if self.sim.diverged:
            self._terminated = True
            info["tracking_err"] = None if self.reference is None else float("nan")
            return self.state, -self.nonfinite_penalty, True, False, info
        reward = 0.0 if self.reference is None else -info["tracking_err"]
        done = getattr(self.reference, "done", None)
        truncated = self.t >= self.horizon_s - EPS or (callable(done) and bool(done(self.t)))
        return self.state, float(reward), False, bool(truncated), info
