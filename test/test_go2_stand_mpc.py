"""go2 stands in MuJoCo under the floating-base contact-force MPC (gato.floating.FloatingMPC, issue 34).

A short closed loop (3 s; the 10 s study is bench/go2_stand.py, figures in docs/floating_solver.md):
from the registry's crouch, perturbed (seed 7, not a tuning seed: the weights were set on seed 0),
landed by 0.3 s of a joint PD, the MPC (N = 20 knots of 20 ms, replanned every 20 ms, 3 SQP
iterations warm-started from the shifted plan, its Riccati gains on the torques at 1 kHz between
solves) brings the base to the standing height and holds it level with the four feet loaded and in place.
"""
import math

import numpy as np
import pytest

import gato
from gato.floating import FloatingMPC
from gato.worlds import MuJoCoWorld

pytest.importorskip("mujoco")

FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
EFFORT = np.array([23.7, 23.7, 45.43] * 4)
SIM_DT, N, DT = 0.001, 20, 0.02


def tilt_deg(quat):
    x, y, _, _ = quat
    return math.degrees(math.acos(min(1.0, 1 - 2 * (x * x + y * y))))


def test_go2_rises_from_crouch_and_stands():
    rng = np.random.default_rng(7)
    world = MuJoCoWorld(str(gato.robot_urdf("go2")), floating=True)
    h_target = world.standing_state("stand")[0][2]
    q, dq = world.reset("crouch")
    q[:2] += rng.uniform(-0.05, 0.05, 2)
    yaw = rng.uniform(-0.3, 0.3)
    q[3:7] = [0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]
    q[7:] += rng.uniform(-0.05, 0.05, 12)
    q[2] += 0.01
    qc = q[7:].copy()
    for _ in range(300):                                    # land on the feet
        q, dq = world.step(q, dq, np.clip(60 * (qc - q[7:]) - 2 * dq[6:], -EFFORT, EFFORT), SIM_DT)
    world.reset()
    mpc = FloatingMPC("go2", N=N, dt=DT, max_iters=3)
    yaw_now = 2 * math.atan2(q[5], q[6])
    x_ref = np.concatenate([[q[0], q[1], h_target, 0, 0, math.sin(yaw_now / 2), math.cos(yaw_now / 2)],
                            world.named_poses()["stand"], np.zeros(18)])
    mpc.set_standing(x_ref, mpc.contact_positions(q))
    feet0 = np.array([world.body_position(q, b) for b in FEET])
    x = np.concatenate([q, dq])
    res = mpc.step(x, max_iters=30)
    assert res.converged
    h_err, tilt, fn_min, slip = [], [], np.inf, 0.0
    for i in range(3000):
        if i % 20 == 0 and i > 0:
            mpc.set_feet(mpc.contact_positions(q))
            res = mpc.step(x)
        s = (i % 20) * SIM_DT / DT
        xp = mpc.plant.integrate(res.X[0], s * mpc.plant.difference(res.X[0], res.X[1]))
        u = np.clip(res.W[0, :12] + res.K[0][:12] @ mpc.plant.difference(xp, x), -EFFORT, EFFORT)
        q, dq = world.step(q, dq, u, SIM_DT)
        q[3:7] /= np.linalg.norm(q[3:7])
        x = np.concatenate([q, dq])
        if i >= 1500:                                       # after 1.5 s: the standing phase
            h_err.append(abs(q[2] - h_target))
            tilt.append(tilt_deg(q[3:7]))
            fn_min = min(fn_min, min(world.last_contact["fn_by_body"].get(b, 0.0) for b in FEET))
        if i % 50 == 0:
            feet = np.array([world.body_position(q, b) for b in FEET])
            slip = max(slip, float(np.max(np.linalg.norm((feet - feet0)[:, :2], axis=1))))
    assert max(h_err) < 0.02            # the 2 cm
    assert max(tilt) < 2.0              # and 2 degrees
    assert fn_min > 10.0                # four loaded feet (m g / 4 = 39 N)
    assert slip < 0.01                  # no foot slips more than 1 cm
