"""go2 stands in MuJoCo under the floating-base contact-force MPC (issue 34, docs/floating_solver.md).

From the crouched start (registry q_crouch) with a seeded perturbation (base xy +-5 cm, yaw +-0.3 rad,
roll / pitch +-0.05 rad, joints +-0.05 rad; 0.3 s of a joint PD to land it), the MPC (FloatingMPC,
N knots of dt, replanned every --replan s, its Riccati gains applied at 1 kHz between solves)
holds the standing reference (height of the registry stand pose, level, the start yaw). One JSON
line per seed: height / tilt / yaw errors after 2 s, the smallest foot normal force after 2 s
(fn_by_body), the largest horizontal foot slip from the start, CPU seconds.

usage: python bench/go2_stand.py SEED [SEED ...] [--T 10] [--N 20] [--iters 3] [--replan 0.02] [--push-recovery]
"""
import argparse, json, math, sys, time
import numpy as np
import gato
from gato.floating import FloatingMPC
from gato.worlds import MuJoCoWorld

ap = argparse.ArgumentParser()
ap.add_argument("seeds", type=int, nargs="+")
ap.add_argument("--T", type=float, default=10.0)
ap.add_argument("--N", type=int, default=20)
ap.add_argument("--dt", type=float, default=0.02)
ap.add_argument("--iters", type=int, default=3)
ap.add_argument("--replan", type=float, default=0.02)
ap.add_argument("--nofb", action="store_true")
ap.add_argument("--fixfeet", action="store_true", help="keep the initial foot targets (default: retarget each tick)")
ap.add_argument("--push-recovery", action="store_true",
                help="run gato.sim.go2.run_go2_stand with the push-recovery controller (gato.sim.go2.PUSH_RECOVERY) instead")
args = ap.parse_args()
FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
EFFORT = np.array([23.7, 23.7, 45.43] * 4)
SIM_DT = 0.001


def quat_R(x, y, z, w):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def run(seed):
    rng = np.random.default_rng(seed)
    world = MuJoCoWorld(str(gato.robot_urdf("go2")), floating=True)
    q_st, _ = world.standing_state("stand")
    h_target = q_st[2]
    q, dq = world.reset("crouch")
    # seeded perturbation of the crouched start: base xy, yaw, small roll / pitch, joints
    q[:2] += rng.uniform(-0.05, 0.05, 2)
    rpy = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(-0.3, 0.3)])
    cr, sr, cp, sp, cy, sy = np.cos(rpy[0] / 2), np.sin(rpy[0] / 2), np.cos(rpy[1] / 2), np.sin(rpy[1] / 2), \
        np.cos(rpy[2] / 2), np.sin(rpy[2] / 2)
    q[3:7] = [sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
              cr * cp * cy + sr * sp * sy]
    q[7:] += rng.uniform(-0.05, 0.05, 12)
    q[2] += 0.01
    # settle 0.3 s under a joint PD holding the crouch (lands the perturbed robot on its feet)
    qc = q[7:].copy()
    for _ in range(300):
        q, dq = world.step(q, dq, np.clip(60 * (qc - q[7:]) - 2 * dq[6:], -EFFORT, EFFORT), SIM_DT)
    world.reset()
    mpc = FloatingMPC("go2", N=args.N, dt=args.dt, max_iters=args.iters)
    feet0 = mpc.contact_positions(q)
    body0 = np.array([world.body_position(q, b) for b in FEET])
    # target: standing height, level, yaw and xy of the start, joints at q_stand
    yaw = math.atan2(*quat_R(*q[3:7])[[1, 0], 0])
    xr = np.concatenate([[q[0], q[1], h_target, 0, 0, math.sin(yaw / 2), math.cos(yaw / 2)], q_st[7:], np.zeros(18)])
    mpc.set_standing(xr, feet0)
    x = np.concatenate([q, dq])
    t0 = time.process_time()
    res = mpc.step(x, max_iters=30)
    first = dict(iters=res.iters, cost0=res.cost0, cost=res.cost)
    n_steps = int(round(args.T / SIM_DT))
    replan = int(round(args.replan / SIM_DT))
    log = dict(h=[], tilt=[], yawerr=[], fn=[], slip=[], iters=[], t=[])
    t_plan = 0
    for i in range(n_steps):
        if i % replan == 0 and i > 0:
            if not args.fixfeet:
                mpc.set_feet(mpc.contact_positions(q))
            res = mpc.step(x)
            t_plan = i
        s = (i - t_plan) * SIM_DT / args.dt
        kk = min(int(s), args.N - 2)
        a = s - kk
        xp = mpc.plant.integrate(res.X[kk], a * mpc.plant.difference(res.X[kk], res.X[kk + 1]))
        u = res.W[kk, :12].copy()
        if not args.nofb:
            u += res.K[kk][:12] @ mpc.plant.difference(xp, x)
        u = np.clip(u, -EFFORT, EFFORT)
        q, dq = world.step(q, dq, u, SIM_DT)
        # renormalize the quaternion for the solver's 1e-6 unit check
        q[3:7] /= np.linalg.norm(q[3:7])
        x = np.concatenate([q, dq])
        if i % 10 == 9:
            R = quat_R(*q[3:7])
            fn = world.last_contact["fn_by_body"]
            log["t"].append((i + 1) * SIM_DT)
            log["h"].append(q[2] - h_target)
            log["tilt"].append(math.degrees(math.acos(min(1.0, R[2, 2]))))
            log["yawerr"].append(math.degrees(abs(math.atan2(R[1, 0], R[0, 0]) - yaw)))
            log["fn"].append([fn.get(b, 0.0) for b in FEET])
            pos = np.array([world.body_position(q, b) for b in FEET])
            log["slip"].append(float(np.max(np.linalg.norm((pos - body0)[:, :2], axis=1))))
            log["iters"].append(res.iters)
    cpu = time.process_time() - t0
    t = np.array(log["t"]); late = t >= min(2.0, args.T / 2)  # the standing phase (after 2 s; half the run if shorter)
    h = np.abs(np.array(log["h"])); tilt = np.array(log["tilt"]); fn = np.array(log["fn"])
    out = dict(seed=seed, h_target=h_target, h_err_final=float(h[-1]), h_err_max_after2s=float(h[late].max()),
               tilt_max_deg=float(tilt.max()), tilt_max_after2s=float(tilt[late].max()),
               yaw_err_max_after2s=float(np.array(log["yawerr"])[late].max()),
               min_foot_fn_after2s=float(fn[late].min()), slip_max_m=float(max(log["slip"])),
               mean_iters=float(np.mean(log["iters"])), first=first, cpu_s=cpu,
               t_within_2cm=float(next((tt for tt, hh in zip(t, h) if np.all(h[t >= tt] < 0.02)), float("nan"))))
    print(json.dumps(out), flush=True)
    return out


for s in args.seeds:
    if args.push_recovery:
        from gato.sim.go2 import PUSH_RECOVERY, go2_stand_scenarios, run_go2_stand
        t0 = time.process_time()
        out = run_go2_stand(go2_stand_scenarios(s, 1)[0], T=args.T, controller=dict(PUSH_RECOVERY))
        print(json.dumps(dict(seed=s, controller="push_recovery", cpu_s=time.process_time() - t0, **out)), flush=True)
    else:
        run(s)
