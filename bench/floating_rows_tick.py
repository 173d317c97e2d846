"""MPC ticks of the floating-base fc solver with HARD rows (issue 34, docs/floating_solver.md,
"Hard rows in an MPC tick"): go2 in the model (no simulator: each tick starts from knot 1 of the
previous plan), N = 20 x 20 ms, a 3 cm low start with a 0.5 m/s lateral base velocity; rows:
the point feet's moments pinned (add_fc_box), a friction cone mu = 0.3 per foot (add_fc_cone)
and the feet pinned to their standing positions (add_contact_pos_rows). Prints per tick the SQP
iterations, AL updates, each row group's max violation and the tick's CPU time.

    python bench/floating_rows_tick.py --iters 3 --al 3 --rho-cone 1 --rho-pos 1
"""
import argparse
import time

import numpy as np

import gato
from gato.floating import FloatingController


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=3, help="SQP iterations per AL update (max_sqp_iters)")
    ap.add_argument("--al", type=int, default=3, help="AL multiplier updates per tick (al_iters)")
    ap.add_argument("--rho-cone", type=float, default=1.0)
    ap.add_argument("--rho-pos", type=float, default=1.0)
    ap.add_argument("--ticks", type=int, default=6)
    a = ap.parse_args(argv)
    s = gato.BSQP(gato.robot_urdf("go2"), 1, 20, 0.02, plant_type="go2", variant="fc", max_sqp_iters=a.iters,
                  al_iters=a.al)
    xr = np.concatenate([[0, 0, 0.3, 0, 0, 0, 1.0], [0.0, 0.9, -1.8] * 4, np.zeros(18)])
    w = np.r_[[1e3, 1e3, 3e3], [3e3] * 3, [10.0] * 12, [30.0] * 6, [0.1] * 12]
    s.set_state_weights(w, 5 * w)
    s.set_x_ref(xr)
    s.set_u_cost(1e-3)
    ref = np.zeros((4, 6))
    ref[:, 5] = s.plant.total_mass * 9.81 / 4
    s.set_fc_ref(ref)
    feet = s.contact_positions(xr[:19])
    s.add_fc_box(0, 0, slots=[i for c in range(4) for i in s.fc_slots(c, "n")])
    for f in s.contact_frames:
        s.add_fc_cone(f, 0.3, rho=a.rho_cone)
    s.add_contact_pos_rows(feet, rho=a.rho_pos)
    ctl = FloatingController(s)
    x = xr.copy()
    x[2] -= 0.03
    x[20] = 0.5
    print("tick sqp_iters al_updates | max violation: moment box, 4 cones (N), feet (m) | CPU ms")
    for k in range(a.ticks):
        t = time.process_time()
        st = ctl.step(x)
        dt = time.process_time() - t
        print(k, st.iterations, st.solve.stats["al_iters"], "|", " ".join(f"{v:.1e}" for v in st.row_viol),
              f"| {dt * 1e3:.0f}")
        x = st.solve.X[1].copy()


if __name__ == "__main__":
    main()
