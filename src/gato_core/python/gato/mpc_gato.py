"""MPC_GATO: the closed-loop simulation driver used by the paper experiments.

This is a DRIVER, not the controller: it owns the simulation world
(pinocchio RK4 or MuJoCo, including the unmodelled pendulum payload and the
ground-truth disturbance wrench), the pacing of the simulated clock, the task
logic (figure-8 windowing, goal switching, minimum-jerk goal ramps, settle
dwell) and stat collection. The per-tick solver interaction lives in
:class:`gato.controller.MPCController` (warm start, best-of-batch selection,
time shift); users with their own sim or hardware loop should use
MPCController / :class:`gato.MPCPolicy` directly.

The loop (both tasks)::

    controller.reset(x0); plan = controller.warmup(x0, window(0))
    repeat:
        advance the world by one control period, playing the plan's controls
          (pace_by_solve_time: the measured wall time of the previous step; else dt)
        measure x = [q, dq]; task logic (reference window, goal gates)
        r = controller.step(x, window, dt_elapsed=realized period); plan = r.xu_best
        record stats

Within a control period each ``sim_dt`` substep plays the control of the
plan's knot it falls in (knot ``floor(i * sim_dt / dt)``, capped at the last
control): with fixed pacing every substep plays ``u_0``; a slow solve under
wall-clock pacing plays on into ``u_1, u_2, ...`` as a real robot would. A
period that is not a whole number of substeps carries its remainder to the
next period (dt = 0.03125 s at sim_dt = 0.001 s plays 31, 31, 31, 32 substeps).

The task clock t (timestamps, reference windows, timeouts, reach times) is the
sum of the periods played: exactly k * dt after k fixed-pacing ticks, so the
figure-8 window of tick k starts at reference sample k. The world itself has
simulated t minus the carried remainder (less than one sim_dt).

Applied torques are clamped to the URDF effort limits (actuator saturation;
``clamp_torques=False`` plays the plan's torques as they are, the paper-era
harness). Units: rad, rad/s, N*m, metres (world frame), seconds; ``solve_times``
and the other ``*_times`` stats are milliseconds.

What this build does not have (each raises ValueError naming the option): the
force-hypothesis estimators (``estimator="fe"`` with ``batch_size > 1``,
``"wid"``, ``"cem"``), the B = 1 wrench identifier (``wrench_id``), the
contact-force solver variant (``fc_config``, ``variant="fc"``) and the
exact-Hessian variant (``variant="eh"``).
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

from .config import SolverParams
from .controller import MPCController
from .interface import BSQP

__all__ = ["MPC_GATO"]

_EPS = 1e-9
_ESTIMATORS = ("fe", "wid", "cem")


def _nonneg(v, name: str, unit: str, positive=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) \
            or v < 0 or (positive and v == 0):
        rel = "> 0" if positive else ">= 0"
        raise ValueError(f"{name}: expected a finite value {rel} {unit}, got {v!r}")
    return float(v)


def _min_jerk(s: np.ndarray) -> np.ndarray:
    """Minimum-jerk blend 10 s^3 - 15 s^4 + 6 s^5 of s clipped to [0, 1]."""
    s = np.clip(s, 0.0, 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


class MPC_GATO:
    """Closed-loop simulation DRIVER: world + pacing + task loops around an MPCController.

    Args:
        model: pinocchio Model of ``model_path`` (checked against the solver's
            dimensions and kept as ``self.model``), or None to build it. The
            simulated plant is built by the world from ``model_path``.
        model_path: robot URDF (fixed base).
        N: horizon [knots]; dt: knot spacing [s], also the fixed control period.
        batch_size: solver batch B. B > 1 means force hypotheses under the
            default ``estimator="fe"`` (not available in this build: ValueError);
            ``estimator=None`` with B > 1 runs B identical entries with
            best-of-batch selection (lowest final merit).
        constant_f_ext: None or (6,) ground-truth wrench [force N; torque N*m],
            WORLD axes, at the solver's EE frame origin (see
            :meth:`setup_external_forces`); pinocchio world only.
        track_full_stats: also record per-tick ``sqp_iters``, ``pcg_iters``,
            ``pred_err``, ``linsys`` and ``step_reseeded``.
        plant_type: registered plant name (None: detected from the URDF).
        variant: None / "default" only ("fc" / "eh": not available in this build).
        pendulum_config: None or {"mass" kg, "length" m[, "damping" N*m*s/rad,
            "radius" m]}: an unmodelled payload hanging from the EE (pinocchio
            world only; see :class:`gato.worlds.PinocchioWorld`).
        params: None (``SolverParams()``: one SQP iteration per tick), a
            :class:`gato.SolverParams`, or a dict of SolverParams field overrides.
        linsys, bdsv_threshold, reseed_threshold, admm_linsys, admm_threshold,
        limits, limits_kw: passed to :class:`gato.MPCController` (see there).
        fe_seed: seed of the force-hypothesis sampler (kept for the protocol stamp;
            unused while no sampler is available).
        fc_config, wrench_id: not available in this build (ValueError unless None).
        world: None or "pinocchio" (a :class:`gato.worlds.PinocchioWorld` on
            model_path, with the pendulum / constant wrench), "mujoco" (a
            :class:`gato.worlds.MuJoCoWorld` on model_path, timestep = the run's
            sim_dt), or any object with ``step(q, dq, u, sim_dt) -> (q, dq)``.
        estimator: "fe" (default; needs nothing at B = 1), "wid" / "cem" (not
            available), or None (no hypothesis batch).
        verbose: progress lines on stdout (one per ~1 s of simulated time plus a
            summary): True, False, or None (default) = on for runs whose planned
            sim time exceeds 2 s (run_mpc_fig8: sim_time; run_mpc_goals:
            goal_timeout * len(goals)).
        clamp_torques: clamp the applied torques to the URDF effort limits (default True).

    Attributes: ``solver`` (gato.BSQP), ``controller`` (gato.MPCController),
    ``world``, ``model``, ``N``, ``dt``, ``nq``, ``nv``, ``nx``, ``nu``.
    """

    #: Runs whose planned simulated time exceeds this [s] print progress when verbose is None.
    VERBOSE_AUTO_S = 2.0
    #: Simulated seconds between progress lines.
    PROGRESS_EVERY_S = 1.0

    def __init__(self, model, model_path, N=32, dt=0.03125, batch_size=1, constant_f_ext=None,
                 track_full_stats=False, plant_type=None, variant=None, pendulum_config=None, params=None,
                 linsys=None, bdsv_threshold=None, reseed_threshold=None, admm_linsys=None, admm_threshold=None,
                 limits=None, limits_kw=None, fe_seed=0, fc_config=None, wrench_id=None, world=None,
                 estimator="fe", *, verbose=None, clamp_torques=True):
        # --- options whose machinery this build lacks: refuse loudly, never degrade silently
        if variant not in (None, "default"):
            raise ValueError(f"variant: {variant!r} solver modules are not available in this build "
                             "(the CPU backend runs the 'default' variant only)")
        if fc_config is not None:
            raise ValueError("fc_config: contact-force decision variables need the 'fc' solver variant, "
                             "which is not available in this build; pass fc_config=None")
        if wrench_id is not None:
            raise ValueError("wrench_id: the B = 1 wrench identifier (OneStepWrenchIdentifier) is not "
                             "available in this build; pass wrench_id=None")
        if estimator is not None and estimator not in _ESTIMATORS:
            raise ValueError(f"estimator: expected one of {_ESTIMATORS} or None, got {estimator!r}")
        if estimator in ("wid", "cem"):
            raise ValueError(f"estimator: {estimator!r} (the {'identified-wrench' if estimator == 'wid' else 'CEM'}"
                             " hypothesis sampler) is not available in this build; use batch_size=1 with "
                             "estimator='fe' (no estimator) or estimator=None")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        if estimator == "fe" and batch_size > 1:
            raise ValueError(f"estimator: 'fe' with batch_size={batch_size} needs the ForceEstimator "
                             "hypothesis sampler, which is not available in this build; use batch_size=1, or "
                             "estimator=None for best-of-batch over identical entries")
        if isinstance(world, str) and world == "mujoco" and constant_f_ext is not None \
                and np.any(np.asarray(constant_f_ext, dtype=np.float64) != 0):
            raise ValueError("constant_f_ext: the MuJoCo world has no constant-wrench support (a PinocchioWorld "
                             "feature); model the disturbance as geometry")
        if isinstance(world, str) and world == "mujoco" and pendulum_config is not None:
            raise ValueError("pendulum_config: the pendulum payload is a PinocchioWorld feature; "
                             "world='mujoco' models disturbances as geometry")
        if verbose not in (None, True, False):
            raise ValueError(f"verbose: expected None, True or False, got {verbose!r}")

        # --- solver + controller
        if params is None:
            params = SolverParams()
        elif isinstance(params, dict):
            params = SolverParams.from_mapping(params)
        elif not isinstance(params, SolverParams):
            raise ValueError(f"params: expected None, a gato.SolverParams or a dict of its fields, "
                             f"got {type(params).__name__}")
        self.solver = BSQP(model_path, int(batch_size), N, dt, params, plant_type=plant_type)
        self.controller = MPCController(self.solver, hypotheses=None, warm_start="shift",
                                        reset_rho_each_step=True, linsys=linsys, bdsv_threshold=bdsv_threshold,
                                        reseed_threshold=reseed_threshold, admm_linsys=admm_linsys,
                                        admm_threshold=admm_threshold, limits=limits, limits_kw=limits_kw)
        s = self.solver
        self.model_path = s.model_path
        self.plant_type = s.plant_type
        self.N, self.dt, self.batch_size = int(s.N), float(s.dt), int(s.batch_size)
        self.nq, self.nv, self.nx, self.nu = int(s.nq), int(s.nv), int(s.nx), int(s.nu)
        self.nu_act = int(s.n_actuated)
        if model is None:
            model = s.model
        elif getattr(model, "nq", None) != self.nq or getattr(model, "nv", None) != self.nv:
            raise ValueError(f"model: expected the pinocchio Model of {model_path} (nq={self.nq}, nv={self.nv}), "
                             f"got nq={getattr(model, 'nq', None)}, nv={getattr(model, 'nv', None)}")
        self.model = model
        self.track_full_stats = bool(track_full_stats)
        self.fe_seed = fe_seed
        self.estimator = estimator
        self.fc_config = None
        self.wrench_id = None
        self.verbose = verbose
        self.clamp_torques = bool(clamp_torques)
        self.u_limit = np.asarray(s.limits["u"], dtype=np.float64).reshape(-1)[:self.nu_act]
        self.pendulum_config = pendulum_config

        # --- world
        self._world_kind = None
        if world is None or world == "pinocchio":
            from .worlds import PinocchioWorld

            self._world_kind = "pinocchio"
            self.world = PinocchioWorld(self.model_path, ee_frame=s.ee_frame, pendulum=pendulum_config)
        elif world == "mujoco":
            if pendulum_config is not None:
                raise ValueError("pendulum_config: the pendulum payload is a PinocchioWorld feature; "
                                 "world='mujoco' models disturbances as geometry")
            from .worlds import MuJoCoWorld

            self._world_kind = "mujoco"
            self.world = MuJoCoWorld(self.model_path, timestep=0.001)
        elif isinstance(world, str):
            raise ValueError(f"world: expected None, 'pinocchio', 'mujoco' or a world object, got {world!r}")
        else:
            if not callable(getattr(world, "step", None)):
                raise ValueError(f"world: expected an object with step(q, dq, u, sim_dt), "
                                 f"got {type(world).__name__}")
            if pendulum_config is not None:
                raise ValueError("pendulum_config: only the built-in pinocchio world carries the pendulum; "
                                 "model the payload in your world object")
            if getattr(world, "nq", self.nq) != self.nq:
                raise ValueError(f"world: its nq {world.nq} differs from the solver's nq {self.nq}")
            self._world_kind = "custom"
            self.world = world
        self.setup_external_forces(constant_f_ext)

    # ------------------------------------------------------------------ properties
    @property
    def force_estimator(self):
        """The hypothesis estimator: None (batch_size == 1, or estimator=None; the
        force-hypothesis samplers are not available in this build)."""
        h = self.controller.hypotheses
        return getattr(h, "estimator", None) if h is not None else None

    @property
    def wrench_identifier(self):
        """The sensor-rate wrench observer fed each substep: None (``wrench_id`` and the
        'wid' sampler are not available in this build)."""
        h = self.controller.hypotheses
        return getattr(h, "identifier", None) if h is not None else None

    @property
    def world_params(self) -> dict:
        """The world's protocol stamp (its ``params``), or {"kind": "custom"}."""
        p = getattr(self.world, "params", None)
        return dict(p) if isinstance(p, dict) else {"kind": self._world_kind}

    # ------------------------------------------------------------------ disturbances
    def setup_external_forces(self, constant_f_ext):
        """Set the ground-truth external wrench of the simulation (None clears it).

        ``constant_f_ext`` = (6,) [force (3) N, torque (3) N*m] in WORLD axes acting at
        the solver's EE frame origin. The pinocchio world re-expresses it into the EE
        parent joint's local frame at every RK4 stage (pin.aba's fext is joint-local,
        so a world-constant force must rotate with the configuration). Worlds without
        ``set_constant_f_ext`` (MuJoCo, custom) accept only None / zeros: ValueError
        otherwise. The solver is never told (it is the unmodelled disturbance).
        """
        if constant_f_ext is None:
            f = np.zeros(6)
        else:
            try:
                f = np.array(constant_f_ext, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"constant_f_ext: expected None or (6,) [force N; torque N*m], "
                                 f"got {type(constant_f_ext).__name__}") from None
            if f.shape != (6,):
                raise ValueError(f"constant_f_ext: expected shape (6,) [force N; torque N*m], got {f.shape}")
            if not np.all(np.isfinite(f)):
                raise ValueError("constant_f_ext: contains NaN or Inf")
        setter = getattr(self.world, "set_constant_f_ext", None)
        if callable(setter):
            setter(f if np.any(f) else None)
        elif np.any(f):
            raise ValueError(f"constant_f_ext: the {self._world_kind} world has no constant-wrench support "
                             "(a PinocchioWorld feature); model the disturbance in the world itself")
        self.constant_f_ext_world = f

    # ------------------------------------------------------------------ machinery
    def _prepare_world(self, sim_dt: float) -> None:
        if self._world_kind == "mujoco" and abs(self.world.timestep - sim_dt) > 1e-12 * sim_dt:
            from .worlds import MuJoCoWorld

            self.world = MuJoCoWorld(self.model_path, timestep=sim_dt)
        reset = getattr(self.world, "reset", None)
        if callable(reset):
            reset()

    def _check_start(self, x_start, sim_dt):
        x = np.array(x_start, dtype=np.float64).reshape(-1) if x_start is not None else None
        if x is None or x.shape != (self.nx,):
            raise ValueError(f"x_start: expected shape ({self.nx},) = [q; dq] (robot only), "
                             f"got {None if x is None else np.shape(x_start)}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x_start: contains NaN or Inf")
        sim_dt = _nonneg(sim_dt, "sim_dt", "s", positive=True)
        if sim_dt > self.dt * (1 + 1e-9):
            raise ValueError(f"sim_dt: {sim_dt} s is longer than the control period dt = {self.dt} s")
        return x, sim_dt

    def _verbose(self, planned_s: float) -> bool:
        return planned_s > self.VERBOSE_AUTO_S if self.verbose is None else bool(self.verbose)

    def _plan_u(self, xu, k: int) -> np.ndarray:
        k = min(max(k, 0), self.N - 2)
        i = self.nx + (self.nx + self.nu) * k
        u = np.asarray(xu[i:i + self.nu_act], dtype=np.float64)
        if self.clamp_torques:
            u = np.clip(u, -self.u_limit, self.u_limit)
        return u

    def _play(self, xu, q, dq, period: float, sim_dt: float, clock: dict):
        """Advance the world by ``period`` [s] (plus the carried remainder) in sim_dt substeps.

        clock: {"t": the task clock [s] = the sum of the periods played (exact multiples of
        dt under fixed pacing), "owed": remainder not yet simulated [s] (< sim_dt),
        "n": substeps taken (the world's own time is n * sim_dt = t - owed)}. Returns
        (q, dq, substeps taken this period)."""
        clock["periods"] += 1
        clock["sum"] += period
        clock["owed"] += period
        n = int(math.floor(clock["owed"] / sim_dt + _EPS))
        clock["owed"] = max(clock["owed"] - n * sim_dt, 0.0)
        per_knot = self.dt / sim_dt
        for i in range(n):
            u = self._plan_u(xu, int(math.floor(i / per_knot + _EPS)))
            q, dq = self.world.step(q, dq, u, sim_dt)
            clock["n"] += 1
        # fixed pacing: t = periods * dt exactly (no float drift, so the window index
        # floor(t / dt) is the tick count); wall-clock pacing: the running sum
        clock["t"] = clock["periods"] * period if clock["fixed"] else clock["sum"]
        return q, dq, n

    def _record_tick(self, stats, t, q, dq, ee, r, wall_s):
        stats["timestamps"].append(t)
        stats["solve_times"].append(r.solve.solve_time_us / 1000.0)
        stats["step_wall_times"].append(wall_s * 1000.0)
        stats["ee_actual"].append(ee)
        stats["joint_positions"].append(q.copy())
        stats["joint_velocities"].append(dq.copy())
        stats["torques"].append(self._plan_u(r.xu_best, 0))
        stats["best_trajectory_id"].append(int(r.best_id))
        if self.track_full_stats:
            st = r.solve.stats
            stats["sqp_iters"].append(int(np.asarray(st.sqp_iters)[r.best_id]))
            pcg = np.asarray(st.pcg_iters)
            stats["pcg_iters"].append(int(pcg[r.best_id].sum()) if pcg.ndim == 2 and pcg.size else 0)
            stats["pred_err"].append(float(r.pred_err))
            stats["linsys"].append(str(st.linsys))
            stats["step_reseeded"].append(bool(r.reseeded))

    def _new_stats(self, extra=()):
        keys = ["timestamps", "solve_times", "step_wall_times", "goal_distances", "goal_distances_knot0",
                "ee_actual", "references", "joint_positions", "joint_velocities", "torques",
                "best_trajectory_id", *extra]
        if self.track_full_stats:
            keys += ["sqp_iters", "pcg_iters", "pred_err", "linsys", "step_reseeded"]
        return {k: [] for k in keys}

    def _finish_stats(self, stats, sim_dt, pace, clock, task):
        shapes = {"ee_actual": (0, 3), "references": (0, 3), "joint_positions": (0, self.nq),
                  "joint_velocities": (0, self.nv), "torques": (0, self.nu_act)}
        for k, v in list(stats.items()):
            if isinstance(v, list) and k not in ("goal_outcomes", "goal_reached_times", "goal_start_times",
                                                 "linsys"):
                stats[k] = np.array(v, dtype=np.float64 if k not in ("best_trajectory_id", "sqp_iters",
                                                                      "pcg_iters", "active_goal",
                                                                      "step_reseeded") else None)
                if not v and k in shapes:
                    stats[k] = np.zeros(shapes[k])
        stats["ee_positions"] = stats["ee_actual"]  # alias
        err = stats["goal_distances_knot0"]
        stats["mean_tracking_error"] = float(np.mean(err)) if err.size else float("nan")
        stats["max_tracking_error"] = float(np.max(err)) if err.size else float("nan")
        gd = stats["goal_distances"]
        stats["mean_goal_distance"] = float(np.mean(gd)) if gd.size else float("nan")
        wall = stats["step_wall_times"]
        stats["deadline_s"] = self.dt
        stats["deadline_misses"] = int(np.sum(wall > self.dt * 1000.0))
        stats["deadline_miss_rate"] = float(stats["deadline_misses"] / wall.size) if wall.size else 0.0
        stats["n_ticks"] = int(wall.size)
        stats["sim_time"] = float(clock["t"])
        stats["config"] = dict(task=task, plant=self.plant_type, N=self.N, dt=self.dt, batch_size=self.batch_size,
                               sim_dt=sim_dt, pace_by_solve_time=bool(pace), clamp_torques=self.clamp_torques,
                               linsys=self.controller.linsys, params=self.solver.params.asdict(),
                               constant_f_ext=self.constant_f_ext_world.tolist(),
                               pendulum=None if self.pendulum_config is None else dict(self.pendulum_config),
                               world=self.world_params)
        return stats

    @staticmethod
    def _say(msg: str) -> None:
        print(msg, file=sys.stdout, flush=True)

    # ------------------------------------------------------------------ figure-8
    def run_mpc_fig8(self, x_start, fig8_traj, sim_dt=0.001, sim_time=5.0, pace_by_solve_time=True):
        """Run MPC tracking a figure-8 (any sampled EE path) trajectory.

        Args:
            x_start: (nx,) initial state [q; dq] (robot only).
            fig8_traj: flat (6T,) (or (T, 6)) reference, [x, y, z, 0, 0, 0] per sample,
                sample j is the EE goal at time j * dt (e.g. ``gato.tasks.fig8_reference``).
                At sim time t the controller sees the N-knot window starting at sample
                floor(t / dt).
            sim_dt: world substep [s].
            sim_time: simulated duration [s]: ticks run while the clock is below it (the
                last period may end up to one period past it). The run stops earlier
                when the next window would run off the end of fig8_traj
                (``stats["stop_reason"]``).
            pace_by_solve_time: True (default, real-time MPC): advance the sim by the
                measured wall-clock time of the previous controller step (a faster solver
                re-plans more often; not reproducible). False: advance a fixed dt per
                solve (deterministic; the CPU baseline harness' per-solve comparison).

        Returns (None, stats). Per-tick arrays (one row per controller step, measured
        AFTER the world advanced, before the step's solve):

        - ``timestamps`` (T,) s: the task clock at the measured state (tick k of a
          fixed-pacing run: (k + 1) * dt; the first tick follows the warm-up plan's period).
        - ``goal_distances`` (T,) m: ||ee - reference knot 1|| (one knot ahead: the
          paper's convention); ``goal_distances_knot0`` (T,) m: ||ee - reference
          knot 0|| (the reference at the measured time; the baseline's convention).
        - ``ee_actual`` (T, 3) m (alias ``ee_positions``); ``references`` (T, 3) m:
          reference knot 0 of each tick's window.
        - ``joint_positions`` (T, nq) rad; ``joint_velocities`` (T, nv) rad/s.
        - ``torques`` (T, nu) N*m: the control the tick commands (plan knot 0, as
          applied: clamped when clamp_torques).
        - ``solve_times`` (T,) ms: the solver's own solve time; ``step_wall_times``
          (T,) ms: wall time of ``MPCController.step`` (what wall-clock pacing uses).
        - ``best_trajectory_id`` (T,) int: the winning batch entry.
        - with track_full_stats: ``sqp_iters`` (T,) int, ``pcg_iters`` (T,) int
          (summed over the winner's iterations), ``pred_err`` (T,) (controller's
          warm-start prediction error), ``linsys`` (list of str), ``step_reseeded`` (T,) bool.

        Scalars: ``mean_tracking_error`` / ``max_tracking_error`` m (over
        goal_distances_knot0), ``mean_goal_distance`` m (over goal_distances),
        ``deadline_s`` (= dt, the control period), ``deadline_misses`` (ticks whose
        step wall time exceeded dt) and ``deadline_miss_rate``, ``n_ticks``,
        ``sim_time`` s (the task clock at the end), ``stop_reason`` ("sim_time" | "reference_end"),
        ``completed`` (stop_reason == "sim_time"), ``config`` (the run's protocol
        stamp: plant, N, dt, sim_dt, pacing, solver params, world params, disturbances).
        """
        x, sim_dt = self._check_start(x_start, sim_dt)
        sim_time = _nonneg(sim_time, "sim_time", "s", positive=True)
        try:
            traj = np.array(fig8_traj, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"fig8_traj: expected a flat (6T,) array, got {type(fig8_traj).__name__}") from None
        if traj.ndim == 2 and traj.shape[1] == 6:
            traj = traj.reshape(-1)
        if traj.ndim != 1 or traj.size % 6 or traj.size < 6 * (self.N + 1):
            raise ValueError(f"fig8_traj: expected a flat (6T,) trajectory with T >= N + 1 = {self.N + 1} "
                             f"samples, got shape {np.shape(fig8_traj)}")
        if not np.all(np.isfinite(traj)):
            raise ValueError("fig8_traj: contains NaN or Inf")
        T = traj.size // 6
        verbose = self._verbose(sim_time)
        self._prepare_world(sim_dt)

        stats = self._new_stats()
        q, dq = x[:self.nq].copy(), x[self.nq:].copy()
        self.controller.reset(x)
        res = self.controller.warmup(x, traj[:6 * self.N])
        xu = np.asarray(res.xu, dtype=np.float64)[0]
        if verbose:
            self._say(f"[MPC_GATO fig8] {self.plant_type} N={self.N} dt={self.dt} B={self.batch_size} "
                      f"sim_time={sim_time:.2f}s pace={'solve' if pace_by_solve_time else 'dt'} "
                      f"world={self._world_kind}")
        clock = {"t": 0.0, "owed": 0.0, "n": 0, "periods": 0, "sum": 0.0, "fixed": not pace_by_solve_time}
        period = self.dt
        stop = "sim_time"
        next_report = self.PROGRESS_EVERY_S
        while clock["t"] < sim_time - _EPS:
            q, dq, n = self._play(xu, q, dq, period if pace_by_solve_time else self.dt, sim_dt, clock)
            t = clock["t"]
            k = int(math.floor(t / self.dt + _EPS))
            if k + self.N > T:
                stop = "reference_end"
                break
            win = traj[6 * k:6 * (k + self.N)]
            x = np.concatenate([q, dq])
            t0 = time.perf_counter()
            r = self.controller.step(x, win, dt_elapsed=max(n, 1) * sim_dt)
            wall = time.perf_counter() - t0
            period = wall
            xu = np.asarray(r.xu_best, dtype=np.float64)
            ee = np.asarray(self.solver.ee_pos(q), dtype=np.float64)
            stats["goal_distances"].append(float(np.linalg.norm(ee - win[6:9])))
            stats["goal_distances_knot0"].append(float(np.linalg.norm(ee - win[0:3])))
            stats["references"].append(win[0:3].copy())
            self._record_tick(stats, t, q, dq, ee, r, wall)
            if verbose and t >= next_report - _EPS:
                next_report += self.PROGRESS_EVERY_S
                recent = stats["goal_distances_knot0"][-max(1, int(self.PROGRESS_EVERY_S / self.dt)):]
                self._say(f"  t={t:6.2f}/{sim_time:.2f}s  err={1000 * np.mean(recent):6.1f} mm  "
                          f"solve={stats['solve_times'][-1]:.2f} ms")
        stats["stop_reason"] = stop
        stats["completed"] = stop == "sim_time"
        stats = self._finish_stats(stats, sim_dt, pace_by_solve_time, clock, "fig8")
        if verbose:
            self._say(f"[MPC_GATO fig8] done: {stats['n_ticks']} ticks, {stats['sim_time']:.2f}s sim, "
                      f"mean err {1000 * stats['mean_tracking_error']:.1f} mm (knot 0), "
                      f"{1000 * stats['mean_goal_distance']:.1f} mm (knot 1), "
                      f"solve {np.mean(stats['solve_times']) if stats['n_ticks'] else float('nan'):.2f} ms")
        return None, stats

    # ------------------------------------------------------------------ goals
    def _goal_window(self, t, goal, start_pos, goal_start, ramp):
        """(6N,) window at time t: knot j targets the minimum-jerk blend at t + j*dt."""
        if ramp > 0:
            tau = t + self.dt * np.arange(self.N)
            a = _min_jerk((tau - goal_start) / ramp)
            pts = start_pos[None, :] + a[:, None] * (goal - start_pos)[None, :]
        else:
            pts = np.repeat(goal[None, :], self.N, axis=0)
        w = np.zeros((self.N, 6))
        w[:, :3] = pts
        return w.reshape(-1)

    def run_mpc_goals(self, x_start, goals, sim_dt=0.001, goal_timeout=5.0, goal_threshold=0.05,
                      velocity_threshold=1.0, velocity_norm=1, pace_by_solve_time=True, settle_time=0.0,
                      goal_ramp=0.0):
        """Run MPC tracking discrete goal positions (pick-place style), one goal after another.

        Args:
            x_start: (nx,) initial state [q; dq] (robot only, no pendulum).
            goals: (G, 3) or a list of (3,) EE goal positions [m], visited in order.
            sim_dt: world substep [s].
            goal_timeout: max time per goal [s] (measured from the goal's switch-in);
                a goal not reached by then is recorded "timeout" and the next one starts.
            goal_threshold: distance gate [m]: ||ee - goal|| < goal_threshold.
            velocity_threshold: settling gate [rad/s]: ||dq||_velocity_norm < it.
            velocity_norm: norm order of the settling gate (np.linalg.norm ``ord``):
                1 = L1 sum over joints (historic default, strictest), 2 = Euclidean,
                np.inf = worst joint.
            pace_by_solve_time: True (default, real-time MPC): the sim advances by the
                measured wall time of each controller step, so the clock (timeouts,
                goal_reached_times, time_to_all_reached) is cumulative WALL time and runs
                are not reproducible. False: a fixed dt per solve; the clock is physical
                task time (deterministic, paper-comparable completion times).
            settle_time: how long [s] the distance AND velocity gates must hold
                continuously (at every tick) before the goal counts as reached; 0 = the
                paper's instantaneous gate. The reach time is the end of the dwell.
            goal_ramp: seconds over which the EE reference travels from the EE position
                at the goal switch to the new goal on a minimum-jerk profile, knot by knot
                along the horizon (knot j of the window at time t targets the profile at
                t + j*dt). 0 = the paper's step reference (every knot targets the goal).
                The gates always test the goal itself.

        The gates are evaluated at every control tick on the measured state (after the
        world advanced); on a reach or a timeout the next goal switches in at that tick
        (its window is what the tick's solve sees) and its timeout clock starts.

        Returns (None, stats). Per-tick arrays as in :meth:`run_mpc_fig8` (one row per
        controller step; the tick that finishes the last goal solves nothing and adds no
        row), except: ``goal_distances`` (T,) m = ||ee - active goal|| (the gate
        distance, to the goal active before any switch at that tick);
        ``goal_distances_knot0`` (T,) m = ||ee - knot 0 of the window the tick solved
        against|| (the ramped reference, after any switch: it equals goal_distances for
        goal_ramp = 0 except on switch ticks); ``references`` (T, 3) m = that knot 0;
        ``velocity_norms`` (T,) rad/s = the settling-gate norm of dq; ``active_goal``
        (T,) int = index of the goal the distance refers to. mean/max_tracking_error are
        over goal_distances_knot0.

        Per-goal results: ``goals`` (G, 3) m; ``goal_outcomes`` list of "reached" |
        "timeout" | "not_reached" (the run ended first); ``goal_reached_times`` list of
        sim times [s] or None; ``goal_start_times`` list [s] (goal i's deadline is
        goal_start_times[i] + goal_timeout); ``goal_durations`` list [s] (reach or
        timeout time minus start; None if never started/finished); ``goals_reached``
        int; ``all_reached`` bool; ``time_to_all_reached`` s = the last reach time when
        every goal was reached, else None; ``goal_timeout`` s. Plus the scalars of
        run_mpc_fig8 (deadline_s, deadline_misses, ..., config) and ``stop_reason``
        ("goals_done" | "time_limit").
        """
        x, sim_dt = self._check_start(x_start, sim_dt)
        try:
            G = np.array(goals, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"goals: expected (G, 3) EE positions [m], got {type(goals).__name__}") from None
        if G.ndim != 2 or G.shape[1] != 3 or G.shape[0] < 1:
            raise ValueError(f"goals: expected (G, 3) EE positions [m] with G >= 1, got shape {G.shape}")
        if not np.all(np.isfinite(G)):
            raise ValueError("goals: contains NaN or Inf")
        goal_timeout = _nonneg(goal_timeout, "goal_timeout", "s", positive=True)
        goal_threshold = _nonneg(goal_threshold, "goal_threshold", "m", positive=True)
        velocity_threshold = _nonneg(velocity_threshold, "velocity_threshold", "rad/s", positive=True)
        settle_time = _nonneg(settle_time, "settle_time", "s")
        goal_ramp = _nonneg(goal_ramp, "goal_ramp", "s")
        try:
            np.linalg.norm(np.ones(2), ord=velocity_norm)
        except (ValueError, TypeError):
            raise ValueError(f"velocity_norm: expected a vector norm order (1, 2, np.inf, ...), "
                             f"got {velocity_norm!r}") from None
        n_goals = len(G)
        time_limit = goal_timeout * n_goals
        verbose = self._verbose(time_limit)
        self._prepare_world(sim_dt)

        stats = self._new_stats(extra=("velocity_norms", "active_goal"))
        outcomes = ["not_reached"] * n_goals
        reached_t = [None] * n_goals
        start_t = [None] * n_goals
        durations = [None] * n_goals

        q, dq = x[:self.nq].copy(), x[self.nq:].copy()
        gi = 0
        goal_start = 0.0
        start_t[0] = 0.0
        ramp_from = np.asarray(self.solver.ee_pos(q), dtype=np.float64)
        win = self._goal_window(0.0, G[0], ramp_from, goal_start, goal_ramp)
        self.controller.reset(x)
        res = self.controller.warmup(x, win)
        xu = np.asarray(res.xu, dtype=np.float64)[0]
        if verbose:
            self._say(f"[MPC_GATO goals] {self.plant_type} N={self.N} dt={self.dt} B={self.batch_size} "
                      f"{n_goals} goals, timeout {goal_timeout:.1f}s each, ramp {goal_ramp:.2f}s, "
                      f"settle {settle_time:.2f}s, pace={'solve' if pace_by_solve_time else 'dt'} "
                      f"world={self._world_kind}")
        clock = {"t": 0.0, "owed": 0.0, "n": 0, "periods": 0, "sum": 0.0, "fixed": not pace_by_solve_time}
        period = self.dt
        dwell_from = None
        stop = "time_limit"
        next_report = self.PROGRESS_EVERY_S
        while clock["t"] < time_limit - _EPS:
            q, dq, n = self._play(xu, q, dq, period if pace_by_solve_time else self.dt, sim_dt, clock)
            t = clock["t"]
            ee = np.asarray(self.solver.ee_pos(q), dtype=np.float64)
            goal = G[gi]
            dist = float(np.linalg.norm(ee - goal))
            vel = float(np.linalg.norm(dq, ord=velocity_norm))
            active = gi
            if dist < goal_threshold and vel < velocity_threshold:
                if dwell_from is None:
                    dwell_from = t
            else:
                dwell_from = None
            reached = dwell_from is not None and t - dwell_from >= settle_time - _EPS
            timeout = t - goal_start >= goal_timeout - _EPS
            if reached or timeout:
                outcomes[gi] = "reached" if reached else "timeout"
                if reached:
                    reached_t[gi] = t
                durations[gi] = t - goal_start
                if verbose:
                    self._say(f"  t={t:6.2f}s  goal {gi + 1}/{n_goals} {outcomes[gi]} "
                              f"(dist {1000 * dist:.1f} mm, |dq| {vel:.2f} rad/s)")
                gi += 1
                dwell_from = None
                if gi >= n_goals:
                    stop = "goals_done"  # the finishing tick needs no solve and records no row
                    break
                goal_start = t
                start_t[gi] = t
                ramp_from = ee.copy()
            win = self._goal_window(t, G[gi], ramp_from, goal_start, goal_ramp)
            x = np.concatenate([q, dq])
            t0 = time.perf_counter()
            r = self.controller.step(x, win, dt_elapsed=max(n, 1) * sim_dt)
            wall = time.perf_counter() - t0
            period = wall
            xu = np.asarray(r.xu_best, dtype=np.float64)
            stats["goal_distances"].append(dist)
            stats["velocity_norms"].append(vel)
            stats["active_goal"].append(active)
            stats["goal_distances_knot0"].append(float(np.linalg.norm(ee - win[0:3])))
            stats["references"].append(win[0:3].copy())
            self._record_tick(stats, t, q, dq, ee, r, wall)
            if verbose and t >= next_report - _EPS:
                next_report += self.PROGRESS_EVERY_S
                self._say(f"  t={t:6.2f}s  goal {gi + 1}/{n_goals}  dist={1000 * dist:6.1f} mm  "
                          f"|dq|={vel:.2f} rad/s  solve={stats['solve_times'][-1]:.2f} ms")
        stats["stop_reason"] = stop
        stats = self._finish_stats(stats, sim_dt, pace_by_solve_time, clock, "goals")
        stats["goals"] = G
        stats["goal_outcomes"] = outcomes
        stats["goal_reached_times"] = reached_t
        stats["goal_start_times"] = start_t
        stats["goal_durations"] = durations
        stats["goal_timeout"] = goal_timeout
        stats["goals_reached"] = sum(o == "reached" for o in outcomes)
        stats["all_reached"] = stats["goals_reached"] == n_goals
        stats["time_to_all_reached"] = float(max(reached_t)) if stats["all_reached"] else None
        if verbose:
            self._say(f"[MPC_GATO goals] done: {stats['goals_reached']}/{n_goals} reached, "
                      f"time to all {stats['time_to_all_reached']}, {stats['n_ticks']} ticks")
        return None, stats
