"""A hypothesis that blows up (issue 32), through the one closed loop (gato.sim.loop.run_closed_loop
with the bsqp planner over an MPCController and its ForceHypothesisBatch, the runaway guard on):

- one row of a B = 4 batch whose prediction grows without bound (x100 per tick, then Inf) and
  one that turns NaN: each is dropped the tick it blows up (programmed as the nominal model,
  scored +inf, counted in the batch's stats), never applied; the healthy rows keep commanding
  and the arm holds its target under the true payload weight;
- a deliberately wrong B = 1 hypothesis whose predicted wrist torque grows each tick: the MPC
  plans against a torque the world does not have and spins the wrist; the runaway guard switches
  to its joint hold within one control period of the crossing and the run is reported failed
  with the reason."""
import numpy as np

import gato
from gato import tasks
from gato.core import references as R
from gato.core.bsqp import BSQP
from gato.planners.bsqp_planner import BSQPPlanner
from gato.planners.controller import MPCController
from gato.sim import loop as S
from gato.sim.tasks import TrackingTask
from gato.sim.guard import RunawayGuard
from gato.sim.pinocchio_world import PinocchioWorld
from gato.wrench.hypotheses import ForceHypothesisBatch

IIWA = gato.robot_urdf("iiwa14")
Q0 = tasks.Q_READY["iiwa14"]
DT = 0.03125
N = 16
WEIGHT = np.array([0.0, 0.0, -49.05, 0.0, 0.0, 0.0])      # a 5 kg payload at the EE [N; N*m], world axes


class ScriptedBatch:
    """A duck-typed sampler whose tick-k batch is ``rows(k)`` (B, 6); records its feedback."""

    def __init__(self, rows, B):
        self.rows, self.batch_size, self.k, self.feedback = rows, B, 0, []

    def generate_batch(self):
        b = self.rows(self.k)
        self.k += 1
        return b

    def update(self, best, errors, batch_used):
        self.feedback.append((best, np.array(errors), np.array(batch_used)))

    def reset(self):
        self.k = 0

    def get_stats(self):
        return {}


class LoggedWorld:
    """The pinocchio world under the true payload weight; (t, dq) of every physics step."""

    def __init__(self):
        self.inner, self.t, self.log = PinocchioWorld(IIWA, constant_f_ext=WEIGHT), 0.0, []

    def step(self, q, dq, u, sim_dt):
        q, dq = self.inner.step(q, dq, u, sim_dt)
        self.t += sim_dt
        self.log.append((self.t, np.array(dq)))
        return q, dq


def run(sampler, sim_time):
    s = BSQP(IIWA, sampler.batch_size, N, DT)
    hyp = ForceHypothesisBatch(sampler, s.model, s.ee_frame)
    planner = BSQPPlanner.from_controller(MPCController(s, hypotheses=hyp, warm_start="shift"))
    world = LoggedWorld()
    sim = S.Simulation(world, Q0, sim_dt=0.001, ee_pos=s.ee_pos, effort_limit=s.limits["u"])
    guard = RunawayGuard(s.model)
    ee0 = s.ee_pos(Q0)
    picks = []
    rec = S.run_closed_loop(sim, planner, TrackingTask(R.Hold(ee0), N, DT, sim_time), guard=guard,
                            on_tick=lambda r: picks.append((hyp.dropped.copy(), int(r.columns["best_trajectory_id"][-1]))))
    return rec, hyp, world, guard, picks


def test_a_row_that_blows_up_is_dropped_and_the_healthy_rows_keep_commanding():
    def rows(k):
        b = np.array([np.zeros(6), WEIGHT, WEIGHT * 0.5, WEIGHT * 1.5])
        with np.errstate(over="ignore"):
            b[2] = WEIGHT * 0.5 * 100.0 ** min(k, 400)          # diverges: 1e6 N by tick 3, Inf from tick 154
        if k >= 5:
            b[3] = np.nan                                        # an identification gone NaN
        return b

    sampler = ScriptedBatch(rows, 4)
    rec, hyp, _, guard, picks = run(sampler, 1.0)
    st = rec.stats()
    assert rec.stop_reason == "sim_time" and guard.trips == 0, (rec.stop_reason, rec.events[-2:])
    n = st["n_ticks"]
    # the rows were dropped from the tick they blew up (row 2 beyond 1e6 N from its 4th batch),
    # scored +inf there and never picked there
    for dropped, best in picks:
        assert not dropped[best], (dropped, best)
    assert hyp.get_stats()["dropped"] == 2 and np.all(np.isinf(hyp.last_errors[2:]))
    assert hyp.dropped_total == sum(int(d.sum()) for d, _ in picks) >= 2 * (n - 5)
    assert all(np.all(np.isfinite(b)) for _, _, b in sampler.feedback)  # the estimator sees them zeroed
    # the weight row explains the world: it wins, and the arm holds its target
    assert [b for _, b in picks[-10:]] == [1] * 10, picks[-10:]
    assert np.all(np.isfinite(st["torques"])) and st["max_tracking_error"] < 0.02, st["max_tracking_error"]


def test_a_wrong_diverging_hypothesis_runs_the_world_away_and_the_guard_fails_the_run():
    def rows(k, gain=1.5):
        w = np.zeros((1, 6))
        w[0, 5] = 0.05 * gain ** k                    # a wrist torque [N*m] the world does not have, growing
        return w

    # the same run under the nominal hypothesis (zero wrench) keeps the arm: no trip
    nominal, _, _, g0, _ = run(ScriptedBatch(lambda k: rows(k, 0.0) * 0.0, 1), 1.0)
    assert nominal.stop_reason == "sim_time" and g0.trips == 0
    rec, hyp, world, guard, _ = run(ScriptedBatch(rows, 1), 2.0)
    assert rec.stop_reason == "runaway", (rec.stop_reason, rec.events[-2:])
    t, kind, data = rec.events[-1]
    assert kind == "runaway" and rec.results["runaway"] == data["reason"]
    assert f"joint {data['joint'] + 1} velocity" in data["reason"]
    hard = "beyond 10x its limit" in data["reason"]
    factor = guard.hard_factor if hard else guard.factor
    crossed = next(tc for tc, dq in world.log if np.any(np.abs(dq) > factor * guard.qd_limit))
    assert 0.0 <= t - crossed <= (1 if hard else 2) * DT + 1e-9, (crossed, t, data["reason"])
    assert np.isfinite(data["settled_max_qd"]) and guard.trips == 1
