"""The sampling planner ("sampling") behind gato's planner interface (:mod:`gato.planner`).

Each tick plans EE tracking of the reference window with :class:`gato.sampling.SimMPC` on the
robot's MuJoCo scene (:func:`gato.sampling.scenes.robot_spec`: joint PD servos with gravity
compensation, forces clamped to the URDF effort limits), then returns the joint torque that
servo's commands realize, as joint torques (the inverse dynamics of the plan's first steps from the
measured state; :meth:`SamplingPlanner._torque_plan`). Per tick:

1. the window's EE targets are resampled at the scene's timestep over the horizon (its
   orientations too, when it carries them);
2. ctrl_ref (the joint targets the plan offsets): a damped-least-squares IK pass along those
   targets from the measured configuration (one update per step, :func:`gato.tasks.ik_track`;
   6-D on a pose window);
3. costs: ee_weight * |EE - target|^2 per step, ctrl_weight * |command - ctrl_ref|^2, and on a
   pose window rot_weight * |log(R_target^-1 R_EE)|^2 (the EE body's frame quaternion; the term
   costs nothing on a position-only window);
4. ``SimMPC.plan`` from the measured state at the tick's sim step (the clock advances by the
   elapsed time in scene steps), the previous plan shifted as the warm start.

``StepResult.plan``: the first ``ctrl_steps`` scene steps as a state-torque Plan (knots one scene
timestep apart). Fields of the interface that do not apply: no batch of problems or hypotheses
(best_id 0), no budget (the iterations are fixed), no warm-up solve. ``PlannerStats.iterations``
is the sampling iterations run;
``extra`` holds plan_cost, best_cost, executed, rollout_steps and rollout_s.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..planners.planner import Capabilities, Plan, Planner, PlannerStats, StepResult
from ..core.references import ReferenceWindow
from ..core.state import state_vector

__all__ = ["SamplingPlanner", "DEFAULTS"]

_ROT_OFF = 1e300  # the orientation term's hinge on position-only windows: above any error, so it adds 0

#: Config keys and defaults: control period dt [s], scene timestep [s], horizon [s], candidates per
#: iteration, iterations per tick, node noise [rad], cost weights, rollout threads (None: all CPUs),
#: (rot_weight [1/rad^2]: the EE orientation of pose windows; their BSQP orientation_weight is not
#: read), seed, planner ("mppi" | "cem"), knots N of the windows the planner asks for, rollout backend
#: ("cpu" | "warp"), its Warp device, contact / constraint-row capacity per world and CUDA graph
#: mode (SimMPCConfig's backend, device, nconmax, njmax, cuda_graph_mode).
DEFAULTS = dict(dt=0.01, timestep=0.005, horizon_s=0.5, num_samples=64, iterations=2, ctrl_std=0.01,
                ee_weight=2000.0, ctrl_weight=1.0, rot_weight=20.0, nthread=None, seed=0, planner="mppi", N=None,
                backend="cpu", device=None, nconmax=64, njmax=256, cuda_graph_mode="step")


class SamplingPlanner(Planner):
    """Args: robot (a registered plant name or its URDF path), config (None or a dict of
    :data:`DEFAULTS` keys; unknown keys raise ValueError)."""

    capabilities = Capabilities(plan_output=True)

    def __init__(self, robot, config=None):
        import mujoco
        import pinocchio as pin

        from ..robots.registry import resolve_robot
        from . import MjSim, SimMPC, SimMPCConfig, SimMPCStage
        from .scenes import add_frame_sensors, ee_body, robot_spec
        from .terms import ControlTask, SensorTask

        cfg = dict(config or {})
        unknown = sorted(set(cfg) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"config: unknown keys {unknown}; sampling takes {sorted(DEFAULTS)}")
        cfg = {**DEFAULTS, **cfg}
        urdf, plant, ee_frame = resolve_robot(robot, None)
        if plant is None:
            raise ValueError(f"robot: {robot!r} is not a registered plant; the sampling planner builds its scene "
                             "from the registry")
        for key in ("dt", "timestep", "horizon_s"):
            v = cfg[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{key}: expected a finite time > 0 s, got {v!r}")
        ts = float(cfg["timestep"])
        self.ctrl_steps = max(1, int(round(cfg["dt"] / ts)))
        H = max(self.ctrl_steps, int(round(cfg["horizon_s"] / ts)))
        self.timestep, self.H, self.ee_frame = ts, H, ee_frame
        spec = robot_spec(plant, timestep=ts)
        rw = cfg["rot_weight"]
        if isinstance(rw, bool) or not isinstance(rw, (int, float)) or not math.isfinite(rw) or rw < 0:
            raise ValueError(f"rot_weight: expected a finite weight >= 0 [1/rad^2], got {rw!r}")
        pos_sensor, quat_sensor = add_frame_sensors(spec, ee_body(plant))
        self.pin_model = pin.buildModelFromUrdf(urdf)
        nq = int(self.pin_model.nq)
        self.nx, self.nu, self.nu_act = 2 * nq, nq, nq
        self.dt = self.ctrl_steps * ts
        self.N = int(cfg["N"]) if cfg["N"] is not None else max(2, int(math.ceil(H * ts / self.dt)) + 1)
        its = int(cfg["iterations"])
        config = SimMPCConfig(num_samples=int(cfg["num_samples"]), horizon_steps=H, node_steps=max(1, H // 5),
                              ctrl_steps=self.ctrl_steps, max_iterations=its, ctrl_std=cfg["ctrl_std"],
                              stages=[SimMPCStage(its, [(0.25, None), (1.0, 4 * ts)])] if H >= 8 else
                              [SimMPCStage(its)], seed=int(cfg["seed"]), planner=cfg["planner"],
                              backend=cfg["backend"], device=cfg["device"], nconmax=cfg["nconmax"],
                              njmax=cfg["njmax"], cuda_graph_mode=cfg["cuda_graph_mode"])
        self._ee_term = SensorTask(np.zeros((H + 1, 3)), {pos_sensor: float(cfg["ee_weight"])}, name="ee")
        self._ctrl_term = ControlTask(float(cfg["ctrl_weight"]), np.zeros((H + 1, nq)), name="ctrl")
        config = config.add(self._ee_term).add(self._ctrl_term)
        # The orientation term (wxyz references); on a position-only window its hinge exceeds any
        # error, so it adds exact zeros and the plans are the position-only ones.
        self._rot_term = None
        if rw > 0:
            self._rot_term = SensorTask(np.tile([1.0, 0.0, 0.0, 0.0], (H + 1, 1)), {quat_sensor: float(rw)},
                                        residual="quaternion", hinge=_ROT_OFF, name="ee_rot")
            config = config.add(self._rot_term)
        self.mpc = SimMPC(config, MjSim(spec, 1, nthread=cfg["nthread"]), np.zeros((H + 1, nq)))
        self._data = mujoco.MjData(self.mpc.model)
        self._mj = mujoco
        self._R_off = self._body_offset(quat_sensor)
        m = self.mpc.model
        frc = np.asarray(m.jnt_actfrcrange[:nq], dtype=np.float64)
        self._effort = (np.where(m.jnt_actfrclimited[:nq], frc[:, 0], -np.inf),
                        np.where(m.jnt_actfrclimited[:nq], frc[:, 1], np.inf))
        self._t = 0
        self._started = False

    def reset(self, x0) -> None:
        """Start over at x0 = [q; qd] (2 nq,): the clock at step 0, no previous plan."""
        x0 = state_vector(x0, self.nx, "x0")
        self.mpc.reset()
        self._t, self._started = 0, False

    def _body_offset(self, quat_sensor) -> np.ndarray:
        """(3, 3) rotation of the MuJoCo EE body in the EE frame (identity when the body is the frame):
        R_body = R_ee R_off, read at the zero posture."""
        import pinocchio as pin

        mj, m, d = self._mj, self.mpc.model, self._data
        mj.mj_resetData(m, d)
        mj.mj_forward(m, d)
        adr = m.sensor_adr[mj.mj_name2id(m, mj.mjtObj.mjOBJ_SENSOR, quat_sensor)]
        w, x, y, z = d.sensordata[adr:adr + 4]
        R_body = pin.Quaternion(w, x, y, z).toRotationMatrix()
        pdata = self.pin_model.createData()
        q = np.zeros(self.pin_model.nq)
        pin.forwardKinematics(self.pin_model, pdata, q)
        R_ee = pin.updateFramePlacement(self.pin_model, pdata, self.pin_model.getFrameId(self.ee_frame)).rotation
        return R_ee.T @ R_body

    def _orientation_targets(self, reference, t_ns):
        """(H + 1, 3) target rotation vectors of a pose window at the scene's steps, or None."""
        if isinstance(reference, ReferenceWindow):
            return reference.sample_orientations(t_ns, self.H + 1, self.timestep)
        return None

    def _set_rot_term(self, rotvecs) -> None:
        """The orientation term's references (wxyz of R_target R_off) and hinge (off: none given)."""
        import pinocchio as pin

        term = self._rot_term
        if rotvecs is None:
            term.hinge = _ROT_OFF
            term.sensor_ref = np.tile([1.0, 0.0, 0.0, 0.0], (self.H + 1, 1))
        else:
            term.hinge = None
            ref = np.empty((len(rotvecs), 4))
            for i, r in enumerate(rotvecs):
                qt = pin.Quaternion(pin.exp3(r) @ self._R_off)
                ref[i] = (qt.w, qt.x, qt.y, qt.z)
            term.sensor_ref = ref
        term.resolve(self.mpc.model)
        term.ref_offset = self._t

    def _targets(self, reference, t_ns):
        if isinstance(reference, ReferenceWindow):
            return reference.sample(t_ns, self.H + 1, self.timestep)
        ref = np.asarray(reference, dtype=np.float64).reshape(-1, 6)[:, :3]  # flat [x, y, z, 0, 0, 0] knots
        tk = np.arange(len(ref)) * self.dt
        t = np.arange(self.H + 1) * self.timestep
        return np.stack([np.interp(t, tk, ref[:, i]) for i in range(3)], axis=1)

    def step(self, x_measured, reference, dt_elapsed=None, budget_s=None) -> StepResult:
        from ..sim.scenarios import ik_track

        tic = time.perf_counter()
        x = state_vector(x_measured, self.nx, "x_measured")   # a MeasuredState as it is (checked once)
        if self._started:
            el = self.dt if dt_elapsed is None else float(dt_elapsed)
            self._t += max(1, int(round(el / self.timestep)))
        self._started = True
        q, dq = x[:self.nu], x[self.nu:]
        t_ns = reference.stamp_ns if isinstance(reference, ReferenceWindow) else 0
        targets = self._targets(reference, t_ns)
        rotvecs = self._orientation_targets(reference, t_ns)
        qs, _ = ik_track(self.pin_model, self.ee_frame, q, targets, first_iters=3, path_rotvec=rotvecs)
        if self._rot_term is not None:
            self._set_rot_term(rotvecs)
        for term, ref in ((self._ee_term, targets), (self._ctrl_term, qs)):
            if term is self._ee_term:
                term.sensor_ref = ref
            else:
                term.ctrl_ref = ref
            term.resolve(self.mpc.model)
            term.ref_offset = self._t
        self.mpc.set_ctrl_ref(qs, offset=self._t)
        commands, infos = self.mpc.plan({"qpos": q[None], "qvel": dq[None]}, self._t)
        xu = self._torque_plan(q, dq, commands[:, 0])
        plan = Plan(xu, self.nx, self.nu, self.nu_act, self.ctrl_steps + 1, self.timestep)
        u = plan.control(0)
        info = infos[0]
        wall = time.perf_counter() - tic
        stats = PlannerStats(solve_s=info["wall_s"], wall_s=wall, iterations=info["iterations"],
                             extra=dict(plan_cost=info["plan_cost"], best_cost=info["best_cost"],
                                        executed=info["executed"], rollout_steps=info["rollout_steps"],
                                        rollout_s=info["rollout_s"], command=np.array(commands[0, 0])))
        return StepResult(u=u, plan=plan, stats=stats, detail=info)

    def _torque_plan(self, q, dq, commands) -> np.ndarray:
        """The plan's first ctrl_steps steps as joint torques: the servo commands are stepped from
        the measured state in the planning model, and each step's torque is the inverse dynamics
        of the step's realized acceleration (mj_inverse; gravity included, clamped to the effort
        limits). Inverse dynamics rather than the servo's explicit PD torque: the implicit
        integration's damping is already in the realized motion, so torques held for a knot stay
        stable on light distal joints. Returns the flat [x0, u0, ..., x_n] ((n (nx + nu) + nx,))."""
        mj, m, d = self._mj, self.mpc.model, self._data
        mj.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = q, dq
        xs = [np.concatenate([q, dq])]
        for c in commands:
            d.ctrl[:] = c
            mj.mj_step(m, d)
            xs.append(np.concatenate([d.qpos, d.qvel]))
        lo, hi = self._effort
        out = []
        for k, c in enumerate(commands):
            d.qpos[:], d.qvel[:] = xs[k][:self.nu], xs[k][self.nu:]
            d.qacc[:] = (xs[k + 1][self.nu:] - xs[k][self.nu:]) / self.timestep
            mj.mj_inverse(m, d)
            out += [xs[k], np.clip(d.qfrc_inverse[:self.nu_act], lo, hi)]
        out.append(xs[-1])
        return np.concatenate(out)
