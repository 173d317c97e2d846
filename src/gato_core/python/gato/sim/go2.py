"""go2 standing and push-recovery tasks in MuJoCo under the floating-base contact-force MPC
(issue 34; docs/floating_solver.md). Re-exported by :mod:`gato.tasks`; the ``gato eval`` study
kinds ``go2_stand`` / ``go2_push`` (gato.eval.go2_studies) run these episodes.

- :class:`Go2Balance`: the controller. :class:`gato.floating.FloatingMPC` (N knots of dt,
  replanned every dt with ``iters`` SQP iterations warm-started from the shifted plan), its
  plan's knot torque plus its Riccati gain on the state error at the world's 1 kHz, torques
  clamped to the URDF effort. Each replan retargets the contact-position penalty to the measured
  feet and (``follow_xy``) the base's horizontal reference to the measured base position while the
  base moves faster than a threshold: after a push the plan damps the base velocity
  (``w_base_vel``) instead of pulling the robot back.
  It knows nothing of the push (no push time, no push force).
  ``hypotheses=B`` (B > 1): the hypothesis batch over the push. Each replan solves B plans, one per
  external base-wrench hypothesis (:class:`BaseWrenchHypotheses`: world horizontal forces on the base,
  in each plan's dynamics for its first ``wrench_knots`` intervals, FloatingMPC.set_base_wrench),
  each warm-started from its own previous plan; the plan applied is the one whose hypothesis best
  predicts the base motion measured since the last replan (the base's world linear velocity one dt
  after the last replan's state under the applied plan's first controls and that wrench,
  FloatingPlant.step), the fixed-base batch's one-step rollout test (gato.wrench.hypotheses).
- :func:`go2_stand_scenarios` / :func:`run_go2_stand`: from the registry's crouch with a seeded
  perturbation (base xy +-5 cm, yaw +-0.3 rad, roll / pitch +-0.05 rad, joints +-0.05 rad; 0.3 s
  of a joint PD lands it) to the stand height, level, for T s (bench/go2_stand.py's protocol).
- :func:`go2_push_scenarios` / :func:`run_go2_push`: from ``reset("stand")``, a horizontal force
  ``impulse / duration`` on the base (the free joint's force rows, MuJoCo ``qfrc_applied``) for
  ``duration`` s from a seeded time in ``window``, in a seeded direction (uniform in the
  horizontal plane, or ``lateral``: the base's +-y +-15 deg). Up = the base height stays above 60 %
  of the start's after the push and no link but the four feet touches the ground (MuJoCo
  contacts, :attr:`MuJoCoWorld.last_contact`), to T s.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["Go2Balance", "BaseWrenchHypotheses", "PUSH_RECOVERY", "go2_stand_scenarios", "go2_push_scenarios",
           "run_go2_stand", "run_go2_push", "GO2_FEET", "stand_start"]

GO2_FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
_EFFORT = np.array([23.7, 23.7, 45.43] * 4)
SIM_DT = 0.001
#: The controller settings of the push-recovery result, tuned on go2_push_scenarios(seed=18) (its
#: 10 uniform and 10 lateral pushes); every other seed is held out (docs/floating_solver.md).
PUSH_RECOVERY = dict(w_base_vel=(1000.0, 1000.0, 30.0), follow_xy=0.2)


def _R(x, y, z, w):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _world():
    from ..robots.registry import robot_urdf
    from .mujoco_world import MuJoCoWorld

    return MuJoCoWorld(str(robot_urdf("go2")), floating=True)


class BaseWrenchHypotheses:
    """B >= 2 hypotheses of a horizontal push on the base (world force, N; no torque), re-sampled after
    every scoring: row 0 zero (the nominal model), row 1 the estimate (the last winner), rows 2.. the
    estimate plus ``radius`` times B - 2 evenly spread horizontal directions turned by a seeded random
    angle after each update. The radius grows x1.5 when a spread row wins (the push may be larger) and
    shrinks x0.7 when row 0 or 1 wins, within [min_radius, max_radius] N; a zero win resets the
    estimate to zero (pushes end abruptly). ``generate_batch()`` (B, 6) world wrenches [F; T] at the
    base origin; ``update(best, errors, batch)`` with the scored batch; ``wins`` counts the winning rows."""

    def __init__(self, batch_size: int = 8, radius: float = 150.0, min_radius: float = 50.0,
                 max_radius: float = 400.0, seed: int = 0):
        self.B = _count(batch_size, "batch_size")
        if self.B < 2:
            raise ValueError(f"batch_size: expected an int >= 2, got {batch_size!r}")
        for name, v in (("radius", radius), ("min_radius", min_radius), ("max_radius", max_radius)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name}: expected a finite number > 0 N, got {v!r}")
        if not min_radius <= radius <= max_radius:
            raise ValueError(f"radius: expected min_radius <= radius <= max_radius, got {min_radius!r}, "
                             f"{radius!r}, {max_radius!r}")
        self.r0, self.rmin, self.rmax, self.seed = float(radius), float(min_radius), float(max_radius), _seed(seed)
        self.reset()

    def reset(self) -> None:
        self.rng = np.random.default_rng([34, self.seed])
        self.estimate, self.radius, self.turn = np.zeros(3), self.r0, 0.0
        self.wins = np.zeros(self.B, dtype=int)

    def generate_batch(self) -> np.ndarray:
        n = self.B - 2
        a = self.turn + 2 * math.pi * np.arange(n) / max(n, 1)
        batch = np.zeros((self.B, 6))
        batch[1, :3] = self.estimate
        batch[2:, :3] = self.estimate + self.radius * np.stack([np.cos(a), np.sin(a), np.zeros(n)], axis=1)
        return batch

    def update(self, best: int, errors, batch) -> None:
        self.wins[best] += 1
        self.estimate = np.array(batch[best, :3], dtype=float)
        self.radius = float(np.clip(self.radius * (1.5 if best >= 2 else 0.7), self.rmin, self.rmax))
        self.turn = float(self.rng.uniform(0, 2 * math.pi))


class Go2Balance:
    """The go2 balance controller (module docstring). ``N``, ``dt`` [s], ``iters`` (SQP iterations
    per replan), ``first_iters`` (the first solve's), ``w_base_vel`` (the base's linear-velocity
    weight of FloatingMPC.set_standing, one number or (x, y, z) in the base frame; 30 is the standing
    study's), ``follow_xy`` (True: retarget the base's x, y reference to the measured base each
    replan; a speed [m/s]: only while the base's horizontal speed exceeds it, so the reference
    stays where a pushed robot came to rest), ``feedback`` (apply the
    plan's Riccati gains between replans), ``standing``: further FloatingMPC.set_standing keywords,
    ``hypotheses`` (B: 1 = the plain MPC; B > 1 the hypothesis batch of the module docstring),
    ``wrench_knots`` (the intervals each hypothesis's wrench acts in), ``hypothesis_options``
    (BaseWrenchHypotheses keywords)."""

    def __init__(self, N: int = 20, dt: float = 0.02, iters: int = 3, first_iters: int = 30,
                 w_base_vel: float = 30.0, follow_xy: bool = False, feedback: bool = True, standing=None,
                 hypotheses: int = 1, wrench_knots: int = 1, hypothesis_options=None):
        from ..core.floating_mpc import FloatingMPC

        for name, v in (("N", N), ("iters", iters), ("first_iters", first_iters)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "N" else 1):
                raise ValueError(f"{name}: expected an int >= {2 if name == 'N' else 1}, got {v!r}")
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
            raise ValueError(f"dt: expected a finite number > 0, got {dt!r}")
        wv = np.array(w_base_vel if isinstance(w_base_vel, (list, tuple, np.ndarray)) else [w_base_vel] * 3,
                      dtype=object)
        if wv.shape != (3,) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                       and v > 0 for v in wv):
            raise ValueError(f"w_base_vel: expected a finite number > 0 or three (base x, y, z), got {w_base_vel!r}")
        k = float(dt) / SIM_DT
        if abs(k - round(k)) > 1e-9:
            raise ValueError(f"dt: expected a multiple of the world's {SIM_DT} s, got {dt!r}")
        self.B = _count(hypotheses, "hypotheses")
        if isinstance(wrench_knots, bool) or not isinstance(wrench_knots, int) or not 1 <= wrench_knots <= N - 1:
            raise ValueError(f"wrench_knots: expected an int in [1, N - 1], got {wrench_knots!r}")
        self.wrench_knots = wrench_knots
        self.mpcs = [FloatingMPC("go2", N=N, dt=float(dt), max_iters=iters) for _ in range(self.B)]
        self.mpc = self.mpcs[0]
        self.hyp = BaseWrenchHypotheses(self.B, **(hypothesis_options or {})) if self.B > 1 else None
        self.best_log, self.errors = [], None
        self.N, self.dt, self.first_iters = N, float(dt), first_iters
        self.replan = int(round(k))
        if not isinstance(follow_xy, (bool, int, float)) or (not isinstance(follow_xy, bool)
                                                              and not (math.isfinite(follow_xy) and follow_xy >= 0)):
            raise ValueError(f"follow_xy: expected a bool or a speed >= 0 m/s, got {follow_xy!r}")
        self.follow_xy = follow_xy if isinstance(follow_xy, bool) else float(follow_xy)
        self.w_base_vel, self.feedback = wv.astype(float), bool(feedback)
        self.res, self._t0, self.iters_log = None, 0, []
        self.standing = dict(standing or {})
        if "w_base_vel" in self.standing:
            raise ValueError("standing: give w_base_vel as Go2Balance's own keyword")

    def begin(self, q, dq, x_ref) -> None:
        """Set the standing reference x_ref (nx,) and the feet where they are; the first solve."""
        self.x_ref = np.array(x_ref, dtype=float)
        feet = self.mpc.contact_positions(q)
        for m in self.mpcs:
            m.set_standing(self.x_ref, feet, w_base_vel=self.w_base_vel, **self.standing)
        x = np.concatenate([q, dq])
        self.res = self.mpc.step(x, max_iters=self.first_iters)
        for m in self.mpcs[1:]:     # the first solve: no push yet, every hypothesis from the same plan
            m._warm = (self.res.X, self.res.W, self.res.K)
        if self.hyp is not None:
            self.hyp.reset()
        self.batch, self._x_prev = np.zeros((self.B, 6)), x
        self._t0 = 0

    def prediction_errors(self, batch, x_prev, w0, x) -> np.ndarray:
        """(B,) |v_pred - v_meas| [m/s] of the base's world linear velocity: x_prev stepped one dt by
        the plant under the controls w0 (u, fc [n; f]) and each row of batch as its base wrench."""
        plant, nu = self.mpc.plant, self.mpc.nu
        f = w0[nu:].reshape(-1, 6)[:, [3, 4, 5, 0, 1, 2]].ravel()   # contract [n; f] -> plant (f; n)
        v_meas = _R(*x[3:7]) @ x[19:22]
        err = np.empty(len(batch))
        for b, w in enumerate(batch):
            plant.set_base_wrench(w)
            xn = plant.step(x_prev, w0[:nu], f, self.dt)
            err[b] = np.linalg.norm(_R(*xn[3:7]) @ xn[19:22] - v_meas)
        plant.set_base_wrench(None)
        return err

    def _batch_step(self, x):
        """One replan of the hypothesis batch (class docstring): score this batch on the last interval,
        feed the sampler, solve every hypothesis's plan, return the winner's."""
        batch = self.hyp.generate_batch()
        err = self.prediction_errors(batch, self._x_prev, self.res.W[0], x)
        best = int(np.argmin(err))
        self.hyp.update(best, err, batch)
        results = []
        for m, w in zip(self.mpcs, batch):
            m.set_base_wrench(w, self.wrench_knots)
            results.append(m.step(x))
        self.mpc, self.batch, self.errors, self._x_prev = self.mpcs[best], batch, err, x
        self.best_log.append((best, float(np.linalg.norm(batch[best, :3]))))
        return results[best]

    def torque(self, i: int, q, dq) -> np.ndarray:
        """The actuated torques (12,) N m at world step i (replans every dt): :meth:`tick` at
        every ``replan``-th step, then :meth:`play` (gato.sim.go2_loop drives the same two)."""
        if i > 0 and i % self.replan == 0:
            self.tick(q, dq)
            self._t0 = i
        return self.play(i - self._t0, q, dq)

    def tick(self, q, dq):
        """One replan from the measured state: the feet retargeted, the xy reference followed
        (``follow_xy``), one warm-started FloatingMPC step (B > 1: the hypothesis batch's B steps,
        :meth:`_batch_step`); returns its result (the winner's)."""
        feet = self.mpc.contact_positions(q)
        follow = self.follow_xy is True or (self.follow_xy is not False
                                            and float(np.hypot(*(_R(*q[3:7]) @ dq[:3])[:2])) > self.follow_xy)
        if follow:
            self.x_ref[:2] = q[:2]
        for m in self.mpcs:
            m.set_feet(feet)
            if follow:
                m.sqp.set_x_ref(self.x_ref)
        x = np.concatenate([q, dq])
        self.res = self.mpc.step(x) if self.hyp is None else self._batch_step(x)
        self.iters_log.append(self.res.iters)
        return self.res

    def play(self, j: int, q, dq) -> np.ndarray:
        """The actuated torques (12,) N m j world steps after the latest plan: its knot torque
        plus (``feedback``) its Riccati gain on the manifold error, clamped to the URDF effort."""
        x = np.concatenate([q, dq])
        res, plant = self.res, self.mpc.plant
        s = j * SIM_DT / self.dt
        kk = min(int(s), self.N - 2)
        u = res.W[kk, :12].copy()
        if self.feedback:
            xp = plant.integrate(res.X[kk], (s - kk) * plant.difference(res.X[kk], res.X[kk + 1]))
            u += res.K[kk][:12] @ plant.difference(xp, x)
        return np.clip(u, -_EFFORT, _EFFORT)


def _count(n, name="n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}: expected an int >= 1, got {n!r}")
    return int(n)


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    return int(seed)


def _duration(T) -> float:
    if isinstance(T, bool) or not isinstance(T, (int, float)) or not math.isfinite(T) or T <= 0:
        raise ValueError(f"T: expected a duration > 0 s, got {T!r}")
    return float(T)


def _ctrl(controller) -> Go2Balance:
    return controller if isinstance(controller, Go2Balance) else Go2Balance(**(controller or {}))


# ------------------------------------------------------------------------------ standing
def go2_stand_scenarios(seed: int = 0, n: int = 1) -> list:
    """n crouched starts of seed (scenario k: numpy default_rng(seed + k), bench/go2_stand.py's
    seeds): {"id", "seed", "dxy" (2,) m, "rpy" (3,) rad, "dq_joints" (12,) rad}."""
    out = []
    for k in range(_count(n)):
        rng = np.random.default_rng(_seed(seed) + k)
        dxy = rng.uniform(-0.05, 0.05, 2)
        rpy = [rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(-0.3, 0.3)]
        out.append(dict(id=f"stand-{int(seed) + k}", seed=int(seed) + k, dxy=dxy.tolist(), rpy=rpy,
                        dq_joints=rng.uniform(-0.05, 0.05, 12).tolist()))
    return out


def _quat(r, p, y):
    cr, sr, cp, sp, cy, sy = math.cos(r / 2), math.sin(r / 2), math.cos(p / 2), math.sin(p / 2), \
        math.cos(y / 2), math.sin(y / 2)
    return [sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy]


def stand_start(world, scenario: dict):
    """The standing episode's start in ``world`` (a go2 MuJoCoWorld(floating=True)): the crouch
    perturbed by ``scenario``, landed by 0.3 s of a joint PD, the world reset. Returns (q, dq,
    x_ref (the stand height, level, the landed yaw and xy), q_stand, yaw rad); gato.sim.go2_loop
    starts the same episode through gato.simloop."""
    q_st, _ = world.standing_state("stand")
    q, dq = world.reset("crouch")
    q[:2] += scenario["dxy"]
    q[3:7] = _quat(*scenario["rpy"])
    q[7:] += scenario["dq_joints"]
    q[2] += 0.01
    qc = q[7:].copy()
    for _ in range(300):
        q, dq = world.step(q, dq, np.clip(60 * (qc - q[7:]) - 2 * dq[6:], -_EFFORT, _EFFORT), SIM_DT)
    world.reset()
    yaw = math.atan2(*_R(*q[3:7])[[1, 0], 0])
    x_ref = np.concatenate([[q[0], q[1], q_st[2], 0, 0, math.sin(yaw / 2), math.cos(yaw / 2)], q_st[7:],
                            np.zeros(18)])
    return q, dq, x_ref, q_st, yaw


def run_go2_stand(scenario: dict, T: float = 10.0, controller=None) -> dict:
    """One standing episode (module docstring); ``controller``: a Go2Balance or its keywords.
    Returns h_err_max_after2s [m], tilt_max_after2s [deg], tilt_max_deg, yaw_err_max_after2s [deg],
    min_foot_fn_after2s [N] (fn_by_body), slip_max_m (foot bodies' horizontal travel), mean_iters,
    t_within_2cm [s]; "after 2 s" is after min(2, T / 2)."""
    T = _duration(T)
    world = _world()
    q, dq, x_ref, q_st, yaw = stand_start(world, scenario)
    ctrl = _ctrl(controller)
    body0 = np.array([world.body_position(q, b) for b in GO2_FEET])
    ctrl.begin(q, dq, x_ref)
    log = dict(t=[], h=[], tilt=[], yaw=[], fn=[], slip=[])
    for i in range(int(round(T / SIM_DT))):
        q, dq = world.step(q, dq, ctrl.torque(i, q, dq), SIM_DT)
        q[3:7] /= np.linalg.norm(q[3:7])
        if i % 10 == 9:
            R, fn = _R(*q[3:7]), world.last_contact["fn_by_body"]
            log["t"].append((i + 1) * SIM_DT)
            log["h"].append(abs(q[2] - q_st[2]))
            log["tilt"].append(math.degrees(math.acos(min(1.0, R[2, 2]))))
            log["yaw"].append(math.degrees(abs(math.atan2(R[1, 0], R[0, 0]) - yaw)))
            log["fn"].append([fn.get(b, 0.0) for b in GO2_FEET])
            pos = np.array([world.body_position(q, b) for b in GO2_FEET])
            log["slip"].append(float(np.max(np.linalg.norm((pos - body0)[:, :2], axis=1))))
    t, h = np.array(log["t"]), np.array(log["h"])
    late = t >= min(2.0, T / 2)
    within = next((tt for tt in t if np.all(h[t >= tt] < 0.02)), math.nan)
    return dict(h_err_max_after2s=float(h[late].max()), tilt_max_after2s=float(np.array(log["tilt"])[late].max()),
                tilt_max_deg=float(max(log["tilt"])), yaw_err_max_after2s=float(np.array(log["yaw"])[late].max()),
                min_foot_fn_after2s=float(np.array(log["fn"])[late].min()), slip_max_m=float(max(log["slip"])),
                mean_iters=float(np.mean(ctrl.iters_log)) if ctrl.iters_log else math.nan,
                t_within_2cm=float(within), sim_time=float(T))


# ------------------------------------------------------------------------------ pushes
def go2_push_scenarios(seed: int = 0, n: int = 10, *, impulse: float = 20.0, duration: float = 0.05,
                       window=(1.0, 1.5), lateral: bool = False) -> list:
    """n pushes of seed (scenario k: numpy default_rng([34, seed, k])): {"id", "seed", "k",
    "angle" rad (world, from x; the robot starts facing x), "t_push" s (uniform in window, on
    the 1 ms grid), "impulse" N s, "duration" s}."""
    for name, v in (("impulse", impulse), ("duration", duration)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: expected a finite number > 0, got {v!r}")
    lo, hi = (float(w) for w in window)
    if not 0 < lo <= hi:
        raise ValueError(f"window: expected (t0, t1) with 0 < t0 <= t1 s, got {window!r}")
    out = []
    for k in range(_count(n)):
        rng = np.random.default_rng([34, _seed(seed), k])
        ang = rng.uniform(0, 2 * math.pi)
        if lateral:
            ang = math.copysign(math.pi / 2, rng.uniform(-1, 1)) + rng.uniform(-math.pi / 12, math.pi / 12)
        t_push = round(rng.uniform(lo, hi) / SIM_DT) * SIM_DT
        out.append(dict(id=f"push-{int(seed)}-{k}", seed=int(seed), k=k, angle=float(ang), t_push=float(t_push),
                        impulse=float(impulse), duration=float(duration)))
    return out


def run_go2_push(scenario: dict, T: float = 3.0, controller=None) -> dict:
    """One push episode (module docstring). Returns up (bool), hmin_rel (lowest base height after
    the push / the start's), body_contact (sorted links other than the feet that touched the
    ground after the push), trunk_contact (those of them above the calves: base, head, hips,
    thighs), contact_fn_max ({link: largest normal force [N] of its ground contact}), drift_m (base
    horizontal travel at T), angle_deg, t_push."""
    T = _duration(T)
    if T <= scenario["t_push"] + scenario["duration"]:
        raise ValueError(f"T: the run must outlast the push ({scenario['t_push']} s + {scenario['duration']} s), got {T!r}")
    world = _world()
    q, dq = world.reset("stand")
    h0 = q[2]
    ctrl = _ctrl(controller)
    ctrl.begin(q, dq, np.concatenate([q, np.zeros(18)]))
    i0 = int(round(scenario["t_push"] / SIM_DT))
    n_push = int(round(scenario["duration"] / SIM_DT))
    F = scenario["impulse"] / (n_push * SIM_DT) * np.array([math.cos(scenario["angle"]), math.sin(scenario["angle"]), 0.0])
    xy0, hmin, contact, peak = q[:2].copy(), math.inf, set(), {}
    for i in range(int(round(T / SIM_DT))):
        u = np.concatenate([np.zeros(6), ctrl.torque(i, q, dq)])
        if i0 <= i < i0 + n_push:
            u[:3] = _R(*q[3:7]).T @ F      # the world rotates the free joint's force rows by R
        q, dq = world.step(q, dq, u, SIM_DT)
        q[3:7] /= np.linalg.norm(q[3:7])
        if i >= i0:
            hmin = min(hmin, q[2])
            for b, fn in world.last_contact["fn_by_body"].items():
                if b not in GO2_FEET:
                    contact.add(b)
                    peak[b] = max(peak.get(b, 0.0), float(fn))
    trunk = sorted(b for b in contact if "calf" not in b)
    return dict(up=bool(hmin > 0.6 * h0 and not contact), hmin_rel=float(hmin / h0), body_contact=sorted(contact),
                trunk_contact=trunk, contact_fn_max=peak, drift_m=float(np.linalg.norm(q[:2] - xy0)),
                angle_deg=float(math.degrees(scenario["angle"])), t_push=float(scenario["t_push"]), sim_time=float(T))
