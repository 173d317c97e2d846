"""The go2 tasks (issue 34) run three ways on the same seeded scenarios: the go2 runners
(gato.tasks.run_go2_stand / run_go2_push), gato.simloop (gato.sim.go2_loop) and gato.MPC_GATO
on the floating plant; prints each run's figures and whether the three result dicts are equal.

    python bench/go2_simloop_parity.py --stand-seeds 0-10 --T 10
    python bench/go2_simloop_parity.py --push-seeds 0,1 --T 3
"""
from __future__ import annotations

import argparse
import json
import time

import gato
from gato.robots.registry import robot_urdf
from gato.simloop import simloop_go2_push, simloop_go2_stand
from gato.tasks import go2_push_scenarios, go2_stand_scenarios, PUSH_RECOVERY, run_go2_push, run_go2_stand


def _seeds(s):
    out = []
    for part in filter(None, s.split(",")):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stand-seeds", default="")
    ap.add_argument("--push-seeds", default="")
    ap.add_argument("--T", type=float, default=None, help="s (default 10 standing, 3 pushed)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    m_stand = gato.MPC_GATO(None, str(robot_urdf("go2")), N=20, dt=0.02, plant_type="go2", variant="fc",
                            verbose=False)
    m_push = gato.MPC_GATO(None, str(robot_urdf("go2")), N=20, dt=0.02, plant_type="go2", variant="fc",
                           verbose=False, controller=PUSH_RECOVERY)
    rows = []
    for seed in _seeds(a.stand_seeds):
        T = a.T or 10.0
        sc = go2_stand_scenarios(seed, 1)[0]
        c = [time.process_time()]
        r = run_go2_stand(sc, T)
        c.append(time.process_time())
        s = simloop_go2_stand(sc, T)
        c.append(time.process_time())
        st = m_stand.run_mpc_stand(sc, sim_time=T)[1]
        c.append(time.process_time())
        g = {k: st[k] for k in r}
        rows.append(dict(kind="stand", seed=seed, equal=r == s == g, h_mm=1e3 * r["h_err_max_after2s"],
                         tilt_deg=r["tilt_max_after2s"], slip_mm=1e3 * r["slip_max_m"],
                         fn_min=r["min_foot_fn_after2s"], cpu_s=[round(c[i + 1] - c[i], 2) for i in range(3)]))
        print(json.dumps(rows[-1]), flush=True)
    for seed in _seeds(a.push_seeds):
        T = a.T or 3.0
        for sc in go2_push_scenarios(seed, 10):
            r = run_go2_push(sc, T, PUSH_RECOVERY)
            s = simloop_go2_push(sc, T, PUSH_RECOVERY)
            st = m_push.run_mpc_push(sc, sim_time=T)[1]
            g = {k: st[k] for k in r}
            rows.append(dict(kind="push", seed=seed, k=sc["k"], equal=r == s == g, up=r["up"],
                             hmin_rel=r["hmin_rel"], drift_m=r["drift_m"]))
            print(json.dumps(rows[-1]), flush=True)
    n_eq = sum(r["equal"] for r in rows)
    print(f"equal (runner == simloop == MPC_GATO): {n_eq} / {len(rows)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
