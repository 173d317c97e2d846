"""The closed loop's runaway guard (issue 32, gato.sim.guard.RunawayGuard): a world that runs
away is caught within one control period, held by the fallback and reported as a failed run
with its reason, never left to diverge silently.

Two ways to lose the arm, both through MPC_GATO's one loop (gato.sim.loop.run_closed_loop):
- a runaway world: a torque kick no model knows (a collision, a drive fault) spins the wrist
  past 3x its velocity limit;
- a deliberately wrong model: joint 2's drive wired with the wrong sign, so every correction the
  MPC predicts makes the error grow (its prediction diverges from the world's); the hold, wired
  the same way, cannot stop it either: the run is still stopped and reported, not left going.
The kick crosses 10x the limit and trips at the first period boundary after it; the wrong sign
stays beyond 3x and trips at the second check in a row (a single period beyond 3x is forgiven:
an unmodelled step push knocks the wrist that far until the next plan knows it). The stats say ``stop_reason == "runaway"``
with the joint and the reason."""
import math

import numpy as np
import pytest

import gato
from gato import tasks
from gato.mpc_gato import MPC_GATO
from gato.sim.guard import RunawayGuard
from gato.worlds import PinocchioWorld

IIWA = gato.robot_urdf("iiwa14")
DT = 0.03125


def _model():
    import pinocchio as pin

    return pin.buildModelFromUrdf(str(IIWA))


class _FaultWorld:
    """The pinocchio world with a fault: ``kick`` (nv,) N*m added from ``t_kick`` for ``kick_s``,
    and / or ``flip`` (a joint whose commanded torque is applied with the wrong sign). Records
    (t, dq) of every physics step."""

    def __init__(self, kick=None, t_kick=0.3, kick_s=0.05, flip=None):
        self.inner = PinocchioWorld(IIWA)
        self.nq = 7
        self.kick, self.t_kick, self.kick_s, self.flip = kick, t_kick, kick_s, flip
        self.t, self.log = 0.0, []

    def step(self, q, dq, u, sim_dt):
        u = np.array(u, dtype=np.float64)
        if self.flip is not None:
            u[self.flip] = -u[self.flip]
        if self.kick is not None and self.t_kick <= self.t < self.t_kick + self.kick_s:
            u = u + self.kick
        q, dq = self.inner.step(q, dq, u, sim_dt)
        self.t += sim_dt
        self.log.append((self.t, np.array(dq)))
        return q, dq


def _first_crossing(world, guard, factor):
    """The first physics step at which a joint was beyond ``factor`` x its velocity limit."""
    for t, dq in world.log:
        if np.any(np.abs(dq) > factor * guard.qd_limit):
            return t
    return None


def _fig8(d, sim_time):
    """A figure-8 (0.1 / 0.05 m half-amplitudes, 4 s period) around the EE at the ready pose."""
    x0 = np.r_[tasks.Q_READY["iiwa14"], np.zeros(7)]
    ee = d.solver.ee_pos(x0[:7])
    xyz = tasks.figure8(DT, 0.1, 0.05, ee, 0.0, 4.0, cycles=(sim_time + 2.0) / 4.0)
    traj = np.concatenate([xyz, np.zeros_like(xyz)], axis=1).reshape(-1)
    return d.run_mpc_fig8(x0, traj, sim_time=sim_time, pace_by_solve_time=False)


@pytest.mark.parametrize("fault", ["kick", "wrong_sign"])
def test_the_guard_trips_within_one_period_holds_the_arm_and_fails_the_run(fault):
    lim = np.asarray(_model().velocityLimit)
    if fault == "kick":
        kick = np.zeros(7)
        kick[6] = 10.0       # 10 N*m on the light flange for 50 ms: > 100 rad/s before the next plan
        w = _FaultWorld(kick=kick)
    else:
        w = _FaultWorld(flip=1)
    d = MPC_GATO(None, IIWA, N=16, dt=DT, world=w, verbose=False)
    _, st = _fig8(d, 3.0)
    rec = d.last_record
    assert st["stop_reason"] == "runaway", (st["stop_reason"], rec.events[-3:])
    t, kind, data = rec.events[-1]
    assert kind == "runaway" and st["runaway"] == data["reason"]
    # beyond 10x: tripped at the first check after the crossing (the kick); beyond 3x: at the
    # second check in a row at the latest (the wrong sign may also reach 10x first)
    hard = "beyond 10x its limit" in data["reason"]
    assert hard or "beyond 3x its limit" in data["reason"], data
    assert hard or fault == "wrong_sign", data
    t_cross = _first_crossing(w, d.guard, d.guard.hard_factor if hard else d.guard.factor)
    periods = 1 if hard else 2
    assert t_cross is not None and t_cross <= t + 1e-9 and t - t_cross <= periods * DT + 1e-9, (t_cross, t)
    if not hard:
        assert t - _first_crossing(w, d.guard, d.guard.factor) <= 2 * DT + 1e-9
    j = data["joint"]
    assert f"joint {j + 1} velocity" in data["reason"]
    if fault == "kick":
        assert j == 6
    # the fallback held for settle_s: the arm is under its velocity limit again, the world finite
    assert data["settled_t"] == pytest.approx(t + d.guard.settle_s, abs=2e-3)
    if fault == "kick":
        assert data["settled_max_qd"] < lim.max(), data
    assert np.isfinite(data["settled_max_qd"])
    assert d.guard.trips == 1


def test_without_the_guard_the_same_wiring_fault_runs_on_unnoticed():
    """The comparison that makes the guard's point: runaway_factor=None lets the wrong-sign run
    finish 'sim_time' with joint speeds far beyond the limits."""
    w = _FaultWorld(flip=1)
    d = MPC_GATO(None, IIWA, N=16, dt=DT, world=w, verbose=False, runaway_factor=None)
    _, st = _fig8(d, 1.5)
    lim = np.asarray(_model().velocityLimit)
    peak = max(np.max(np.abs(dq) / lim) for _, dq in w.log)
    assert st["stop_reason"] == "sim_time" and d.guard is None
    assert peak > 3.0, peak


def test_a_healthy_run_never_trips():
    d = MPC_GATO(None, IIWA, N=16, dt=DT, verbose=False)
    _, st = _fig8(d, 2.0)
    assert st["stop_reason"] == "sim_time" and d.guard.trips == 0
    assert not any(k == "runaway" for _, k, _ in d.last_record.events)


def test_guard_check_names_velocity_position_and_non_finite_states():
    m = _model()
    g = RunawayGuard(m, factor=2.0, position_margin=0.1)
    q = np.zeros(7)
    dq = np.zeros(7)
    assert g.check(q, dq) is None
    dq[3] = 2.01 * m.velocityLimit[3]
    assert g.check(q, dq) is None                  # one period beyond 2x: a transient
    why, j = g.check(q, dq)                        # the second in a row: a runaway
    assert "joint 4 velocity" in why and "2 checks in a row" in why and j == 3
    g.reset()
    dq[3] = 10.5 * m.velocityLimit[3]
    assert "beyond 10x" in g.check(q, dq)[0]       # beyond hard_factor: at once
    dq[:] = 0.0
    q[1] = m.upperPositionLimit[1] + 0.2
    assert "joint 2 position" in g.check(q, dq)[0]
    q[1] = np.nan
    assert g.check(q, dq) == ("non-finite state", 1)


@pytest.mark.parametrize("kw, name", [(dict(factor=1.0), "factor"), (dict(factor=float("nan")), "factor"),
                                      (dict(hard_factor=2.0), "hard_factor"), (dict(periods=0), "periods"),
                                      (dict(position_margin=-0.1), "position_margin"),
                                      (dict(settle_s=True), "settle_s"),
                                      (dict(hold_frequency_hz=0.0), "hold_frequency_hz")])
def test_guard_arguments_are_checked_by_name(kw, name):
    with pytest.raises(ValueError, match=f"^{name}: "):
        RunawayGuard(_model(), **kw)


def test_mpc_gato_runaway_factor_is_checked():
    for bad in (0.5, "3", float("inf"), True):
        with pytest.raises(ValueError, match="^runaway_factor: "):
            MPC_GATO(None, IIWA, N=8, verbose=False, runaway_factor=bad)
    assert MPC_GATO(None, IIWA, N=8, verbose=False, runaway_factor=None).guard is None
    assert math.isclose(MPC_GATO(None, IIWA, N=8, verbose=False).guard.factor, 3.0)
