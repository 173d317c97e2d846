"""go2 standing under FloatingMPC, pushed: a horizontal impulse on the robot (issue 34, exploratory).

From reset("stand"), the standing MPC of bench/go2_stand.py (N = 20 x 20 ms, replanned at 50 Hz, 3
SQP iterations, the Riccati gains at 1 kHz; a 10-iteration re-solve at the push) holds the pose; at a
seeded time in [1.0, 1.5] s the base velocity jumps by impulse / m (20 N s / 16.09 kg = 1.24 m/s,
the whole robot's momentum: a rigid translation) in a seeded direction: uniform in the horizontal
plane, or --lateral (the base's +-y, +-15 deg). Run to 3 s. One JSON line per seed: the lowest base
height after the push relative to the start, the links other than the four feet that touched the
ground, up = (height > 60 % and no such contact), the issue's criterion. Seeds feed
default_rng(1000 + seed); none was used for tuning.

usage: python bench/go2_push.py SEED [SEED ...] [--impulse 20] [--lateral]
"""
import argparse, json, math, time
import numpy as np
import gato
from gato.floating import FloatingMPC
from gato.worlds import MuJoCoWorld

ap = argparse.ArgumentParser()
ap.add_argument("seeds", type=int, nargs="+")
ap.add_argument("--impulse", type=float, default=20.0)
ap.add_argument("--iters", type=int, default=3)
ap.add_argument("--lateral", action="store_true", help="base-lateral directions: +-90 deg +- 15 deg")
args = ap.parse_args()
FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
EFFORT = np.array([23.7, 23.7, 45.43] * 4)
SIM_DT, N, DT = 0.001, 20, 0.02


def R_of(x, y, z, w):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


for seed in args.seeds:
    rng = np.random.default_rng(1000 + seed)
    world = MuJoCoWorld(str(gato.robot_urdf("go2")), floating=True)
    q, dq = world.reset("stand")
    h0 = q[2]
    mpc = FloatingMPC("go2", N=N, dt=DT, max_iters=args.iters)
    xr = np.concatenate([q, np.zeros(18)])
    mpc.set_standing(xr, mpc.contact_positions(q))
    x = np.concatenate([q, dq])
    res = mpc.step(x, max_iters=30)
    ang = rng.uniform(0, 2 * math.pi)          # direction in the horizontal plane
    if args.lateral:
        ang = math.copysign(math.pi / 2, rng.uniform(-1, 1)) + rng.uniform(-math.pi / 12, math.pi / 12)
    t_push = int(round(rng.uniform(1.0, 1.5) / SIM_DT))
    mass = mpc.plant.total_mass
    hmin, body_contact, t0 = np.inf, set(), 0
    for i in range(3000):
        if i % 20 == 0 and i > 0:
            mpc.set_feet(mpc.contact_positions(q))
            res = mpc.step(x)
            t0 = i
        if i == t_push:
            dv_world = args.impulse / mass * np.array([math.cos(ang), math.sin(ang), 0.0])
            dq = dq.copy()
            dq[:3] += R_of(*q[3:7]).T @ dv_world
            x = np.concatenate([q, dq])
            res = mpc.step(x, max_iters=10)
            t0 = i
        s = (i - t0) * SIM_DT / DT
        kk = min(int(s), N - 2)
        xp = mpc.plant.integrate(res.X[kk], (s - kk) * mpc.plant.difference(res.X[kk], res.X[kk + 1]))
        u = np.clip(res.W[kk, :12] + res.K[kk][:12] @ mpc.plant.difference(xp, x), -EFFORT, EFFORT)
        q, dq = world.step(q, dq, u, SIM_DT)
        q[3:7] /= np.linalg.norm(q[3:7])
        x = np.concatenate([q, dq])
        if i > t_push:
            hmin = min(hmin, q[2])
            body_contact |= {b for b in world.last_contact["fn_by_body"] if b not in FEET}
    up = hmin > 0.6 * h0 and not body_contact
    print(json.dumps(dict(seed=seed, angle_deg=round(math.degrees(ang)), t_push=t_push * SIM_DT, hmin_rel=hmin / h0,
                          body_contact=sorted(body_contact), up=bool(up), h_end=q[2])), flush=True)
