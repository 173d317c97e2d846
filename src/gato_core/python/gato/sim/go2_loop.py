"""The go2 standing and push-recovery episodes through the one simulation loop (issue 34):
:func:`gato.simloop.run_closed_loop` over a :class:`gato.simloop.Simulation` drives the
floating-base contact-force MPC of :class:`gato.sim.go2.Go2Balance` (FloatingMPC) in
MuJoCoWorld(floating=True). :class:`gato.MPC_GATO` on a floating plant
(gato.frontends.mpc_gato_floating) runs these episodes too.

The pieces (each the loop's own kind of part; docs/architecture.md):

- :class:`Go2World`: the go2 MuJoCo world whose step renormalizes the base quaternion (as the
  go2 runners do after each step).
- :class:`Go2Planner`: a :class:`gato.planner.Planner` over a Go2Balance. Its window is the
  state reference x_ref (nx,) schema 2 (the tasks below hand it); ``warmup`` is
  Go2Balance.begin, ``step`` is Go2Balance.tick (one replan per control period dt).
- :class:`Go2Execution`: the loop's ``feedback`` argument: each plan is executed at every 1 ms
  substep by Go2Balance.play (the knot torque plus the Riccati gain on the manifold error,
  clamped to the URDF effort): the same two calls Go2Balance.torque makes in the go2 runners.
  Commands are the generalized force (nv,) with zero base rows.
- :class:`Go2StandTask` / :class:`Go2PushTask`: the runners' episode metrics, recorded at
  every substep (a Simulation observer), and :class:`BasePush` (a Disturbance: the push force
  on the free joint's rows).
- :func:`simloop_go2_stand` / :func:`simloop_go2_push`: one episode from a scenario of
  gato.tasks.go2_stand_scenarios / go2_push_scenarios, returning the runners' result dicts
  (equal to run_go2_stand / run_go2_push bit for bit: test/test_go2_simloop.py).

Lockstep only (the world advances one dt per replan; sim_dt 0.001 s, the world's).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..planners.planner import Capabilities, Plan, Planner, PlannerStats, StepResult
from .disturbances import Disturbance
from .go2 import _ctrl, _duration, _R, _world, GO2_FEET, SIM_DT, stand_start
from .loop import run_closed_loop, Simulation
from .tasks import Task, TaskTick

__all__ = ["Go2World", "Go2Planner", "Go2Execution", "Go2StandTask", "Go2PushTask", "BasePush",
           "go2_simulation", "simloop_go2_stand", "simloop_go2_push"]


class Go2World:
    """A go2 MuJoCoWorld(floating=True) (``world``; None: the registry's go2) whose ``step``
    renormalizes the base quaternion q[3:7]; everything else is the wrapped world's."""

    def __init__(self, world=None):
        self.world = _world() if world is None else world
        if not getattr(self.world, "floating", False):
            raise ValueError("world: expected a go2 MuJoCoWorld(floating=True)")

    def step(self, q, dq, u, sim_dt):
        q, dq = self.world.step(q, dq, u, sim_dt)
        q[3:7] /= np.linalg.norm(q[3:7])
        return q, dq

    def reset(self, pose=None, clearance=0.0):
        return self.world.reset(pose, clearance)

    def __getattr__(self, name):
        return getattr(self.world, name)


class _Play:
    """One plan executed by Go2Balance.play at substep i of the period (the generalized force
    (nv,) with zero base rows)."""

    def __init__(self, ctrl):
        self.ctrl = ctrl

    def torque(self, i, sim_dt, q, dq):
        return np.concatenate([np.zeros(6), self.ctrl.play(i, q, dq)])


class Go2Execution:
    """The run_closed_loop ``feedback`` of a :class:`Go2Planner`: ``command(plan)`` executes the
    controller's latest plan with its Riccati gains (Go2Balance.play)."""

    def __init__(self, planner):
        self.planner = planner

    def command(self, plan):
        return _Play(self.planner.ctrl)


class Go2Planner(Planner):
    """A :class:`gato.planner.Planner` over a :class:`gato.sim.go2.Go2Balance` (``controller``:
    one, or its keywords; None: the defaults). The reference window is the state reference
    x_ref (nx,) (schema 2: base position, quaternion xyzw, joints; zero twist); execute its
    plans with :class:`Go2Execution` (``self.execution``)."""

    capabilities = Capabilities(plan_output=True, warmup=True)

    def __init__(self, controller=None):
        self.ctrl = _ctrl(controller)
        mpc = self.ctrl.mpc
        self.N, self.dt, self.nu_act = self.ctrl.N, self.ctrl.dt, int(mpc.nu)
        self.nv = mpc.plant.nv
        self.nq, self.nx, self.nw = mpc.plant.nq, mpc.plant.nq + mpc.plant.nv, int(mpc.nw)
        self.execution = Go2Execution(self)

    def _x(self, x):
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if x.shape != (self.nx,) or not np.all(np.isfinite(x)):
            raise ValueError(f"x: expected a finite schema-2 state ({self.nx},), got shape {x.shape}")
        return x[:self.nq], x[self.nq:]

    def _plan(self, res):
        return Plan(res.xu, self.nx, self.nw, self.nu_act, self.N, self.dt)

    def reset(self, x0) -> None:
        self._x(x0)
        self.ctrl.mpc.reset()
        self.ctrl.iters_log.clear()

    def warmup(self, x, reference) -> Plan:
        q, dq = self._x(x)
        self.ctrl.begin(q, dq, reference)
        return self._plan(self.ctrl.res)

    def step(self, x_measured, reference=None, dt_elapsed=None, budget_s=None) -> StepResult:
        if budget_s is not None:
            raise ValueError("budget_s: the go2 controller runs a fixed iteration count (no wall-clock budget)")
        q, dq = self._x(x_measured)
        t0 = time.perf_counter()
        res = self.ctrl.tick(q, dq)
        wall = time.perf_counter() - t0
        return StepResult(u=res.u0(), xu_best=res.xu, solve=res, fc=res.fc_at(0), iterations=res.iters,
                          wall_s=wall, plan=self._plan(res),
                          stats=PlannerStats(solve_s=wall, wall_s=wall, iterations=res.iters,
                                             extra=dict(cost=res.cost, converged=res.converged)),
                          diverged=not (np.all(np.isfinite(res.W)) and np.all(np.isfinite(res.X))))


class BasePush(Disturbance):
    """A horizontal world force ``impulse / duration`` [N] on the base for ``duration`` s from
    ``t_push`` s, along ``angle`` rad (world, from x): the free joint's force rows (rotated into
    the base frame: the world rotates them back). A go2_push_scenarios scenario's fields."""

    def __init__(self, scenario: dict):
        self.i0 = int(round(scenario["t_push"] / SIM_DT))
        self.n = int(round(scenario["duration"] / SIM_DT))
        a = scenario["angle"]
        self.F = scenario["impulse"] / (self.n * SIM_DT) * np.array([math.cos(a), math.sin(a), 0.0])
        self.scenario = dict(scenario)

    def torque(self, t, q, dq, kin=None):
        i = int(round(t / SIM_DT))
        if not self.i0 <= i < self.i0 + self.n:
            return None
        u = np.zeros(len(dq))
        u[:3] = _R(*q[3:7]).T @ self.F
        return u

    def describe(self) -> dict:
        return dict(kind="base_push", **self.scenario)


class _Go2Task(Task):
    """Shared: the state reference as the window, the run to ``T`` s (no tick at T), per-tick
    columns base_height [m] and tilt_deg; ``observer`` is the Simulation's per-substep hook."""

    end_reason = "sim_time"
    columns = ("base_height", "tilt_deg")

    def __init__(self, world, x_ref, T):
        self.world, self.x_ref, self.t_end = world, np.array(x_ref, dtype=np.float64), _duration(T)
        self.i = 0

    def begin(self, ee0):
        return self.x_ref

    def observe(self, t, q, dq, ee, events):
        if t >= self.t_end - 1e-9:
            self.stop_reason = "sim_time"
            return None
        R = _R(*q[3:7])
        return TaskTick(self.x_ref, dict(base_height=float(q[2]),
                                         tilt_deg=math.degrees(math.acos(min(1.0, R[2, 2])))))

    def observer(self, q, dq, u, q_next, dq_next, sim_dt):
        self.substep(self.i, q_next)
        self.i += 1


class Go2StandTask(_Go2Task):
    """Stand at ``x_ref`` for T s; results are run_go2_stand's (every 10 ms: height error against
    ``q_stand``, tilt, yaw error against ``yaw``, foot loads, foot travel from the start ``q0``)."""

    def __init__(self, world, x_ref, T, q0, q_stand, yaw, iters_log=None):
        super().__init__(world, x_ref, T)
        self.q_st, self.yaw, self.iters_log = np.asarray(q_stand), float(yaw), iters_log
        self.body0 = np.array([world.body_position(q0, b) for b in GO2_FEET])
        self.log = dict(t=[], h=[], tilt=[], yaw=[], fn=[], slip=[])

    def substep(self, i, q):
        if i % 10 != 9:
            return
        log = self.log
        R, fn = _R(*q[3:7]), self.world.last_contact["fn_by_body"]
        log["t"].append((i + 1) * SIM_DT)
        log["h"].append(abs(q[2] - self.q_st[2]))
        log["tilt"].append(math.degrees(math.acos(min(1.0, R[2, 2]))))
        log["yaw"].append(math.degrees(abs(math.atan2(R[1, 0], R[0, 0]) - self.yaw)))
        log["fn"].append([fn.get(b, 0.0) for b in GO2_FEET])
        pos = np.array([self.world.body_position(q, b) for b in GO2_FEET])
        log["slip"].append(float(np.max(np.linalg.norm((pos - self.body0)[:, :2], axis=1))))

    def results(self) -> dict:
        log, T = self.log, self.t_end
        t, h = np.array(log["t"]), np.array(log["h"])
        late = t >= min(2.0, T / 2)
        within = next((tt for tt in t if np.all(h[t >= tt] < 0.02)), math.nan)
        il = self.iters_log
        return dict(h_err_max_after2s=float(h[late].max()), tilt_max_after2s=float(np.array(log["tilt"])[late].max()),
                    tilt_max_deg=float(max(log["tilt"])), yaw_err_max_after2s=float(np.array(log["yaw"])[late].max()),
                    min_foot_fn_after2s=float(np.array(log["fn"])[late].min()), slip_max_m=float(max(log["slip"])),
                    mean_iters=float(np.mean(il)) if il else math.nan, t_within_2cm=float(within), sim_time=float(T))


class Go2PushTask(_Go2Task):
    """Stand at ``x_ref`` from ``q0`` while ``push`` (a :class:`BasePush`) acts; results are
    run_go2_push's (up, hmin_rel, body_contact, trunk_contact, contact_fn_max, drift_m, ...)."""

    def __init__(self, world, x_ref, T, q0, push: BasePush):
        super().__init__(world, x_ref, T)
        sc = push.scenario
        if self.t_end <= sc["t_push"] + sc["duration"]:
            raise ValueError(f"T: the run must outlast the push ({sc['t_push']} s + {sc['duration']} s), got {T!r}")
        self.push, self.h0, self.xy0 = push, float(q0[2]), np.array(q0[:2])
        self.hmin, self.contact, self.peak, self.q_last = math.inf, set(), {}, np.array(q0)

    def substep(self, i, q):
        self.q_last = q
        if i < self.push.i0:
            return
        self.hmin = min(self.hmin, q[2])
        for b, fn in self.world.last_contact["fn_by_body"].items():
            if b not in GO2_FEET:
                self.contact.add(b)
                self.peak[b] = max(self.peak.get(b, 0.0), float(fn))

    def results(self) -> dict:
        sc, c = self.push.scenario, self.contact
        return dict(up=bool(self.hmin > 0.6 * self.h0 and not c), hmin_rel=float(self.hmin / self.h0),
                    body_contact=sorted(c), trunk_contact=sorted(b for b in c if "calf" not in b),
                    contact_fn_max=self.peak, drift_m=float(np.linalg.norm(self.q_last[:2] - self.xy0)),
                    angle_deg=float(math.degrees(sc["angle"])), t_push=float(sc["t_push"]), sim_time=self.t_end)


def go2_simulation(kind: str, scenario: dict, T: float, world=None, controller=None):
    """The parts of one go2 episode for run_closed_loop: (sim, planner, task). ``kind`` "stand"
    (a go2_stand_scenarios scenario, from the landed crouch) or "push" (a go2_push_scenarios
    scenario, from reset("stand")); ``world``: a :class:`Go2World` (None: a new one)."""
    world = Go2World() if world is None else world
    if not isinstance(world, Go2World):
        raise ValueError(f"world: expected a gato.sim.go2_loop.Go2World, got {type(world).__name__}")
    if kind == "stand":
        q, dq, x_ref, q_st, yaw = stand_start(world.world, scenario)
        planner = Go2Planner(controller)
        task = Go2StandTask(world, x_ref, T, q, q_st, yaw, planner.ctrl.iters_log)
        push = []
    elif kind == "push":
        q, dq = world.world.reset("stand")
        push = [BasePush(scenario)]
        planner = Go2Planner(controller)
        task = Go2PushTask(world, np.concatenate([q, np.zeros(len(dq))]), T, q, push[0])
    else:
        raise ValueError(f"kind: expected 'stand' or 'push', got {kind!r}")
    sim = Simulation(world, q, dq, sim_dt=SIM_DT, ee_pos=lambda qq: np.asarray(qq[:3], dtype=np.float64),
                     kinematics=world if push else None, disturbances=push, observers=[task.observer])
    return sim, planner, task


def _run(kind, scenario, T, controller, world=None, **loop_kw):
    sim, planner, task = go2_simulation(kind, scenario, T, world, controller)
    rec = run_closed_loop(sim, planner, task, feedback=planner.execution, **loop_kw)
    if rec.stop_reason == "diverged":
        raise RuntimeError(f"go2 {kind}: the MuJoCo world diverged at t = {rec.sim_time:.4f} s")
    out = task.results()
    return out, rec


def simloop_go2_stand(scenario: dict, T: float = 10.0, controller=None) -> dict:
    """gato.tasks.run_go2_stand's episode through gato.simloop.run_closed_loop; its result dict."""
    return _run("stand", scenario, T, controller)[0]


def simloop_go2_push(scenario: dict, T: float = 3.0, controller=None) -> dict:
    """gato.tasks.run_go2_push's episode through gato.simloop.run_closed_loop; its result dict."""
    return _run("push", scenario, T, controller)[0]
