"""Box pushing with and without StateTask's contact terms, in closed loop (gato.sampling, MuJoCo).

The scenes where the contact terms matter: ``scenes.box_push_task(guide="hold")`` scripts no push
(the EE reference holds behind the box, 3 cm off its face, and the EE cost is off from the push
phase on), so only the box-to-goal cost asks for the push, and it is flat until the tool touches
the box. Each scene runs twice on the same seeded box start and goal: without contact terms, and
with a StateTask whose contact terms want the tool-box contact from the push phase on
(``contact_weight`` per metre of gap) and keep the tool off the table (``penetration_scale``).
``--contact-until push`` wants the contact during the push phase only (``end``: to the end of the
run): wanted through the hold phase, the contact pulls the tool back onto a box already at its
goal and knocks it off again. ``--contact-target face`` wants the contact with a small
non-colliding sphere (``--face-radius``) on the centre of the box face the push starts from (the
face away from the goal, in the box's frame) instead of the whole box, so the wanted contact says
where to push from; with ``box`` a contact anywhere (the box's top, a corner) satisfies it. Both
are ``scenes.box_push_task``'s own (``contact_until``, ``contact_target``, ``face_radius``).
Success: the box's final (x, y) within ``--tol`` of its goal. Prints one table (and writes it to
``--out`` with benchmarks_doc.write_result).
``--where-needed K``: the scenes where the terms matter only: scenes are drawn in seed order
(``--n`` at most), each runs without the terms first, and only where that run fails is it run
with them, until K such scenes have run; the last table row gives k/K reached with the terms.

    source scripts/activate.sh && nice -n 10 python bench/bench_sampling_box_contacts.py --seed 0 --n 10
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def run_scene(sc, *, contact_weight: float, penetration_scale: float, timestep: float, num_samples: int,
              threads: int, standoff: float, ctrl_std: float, push_s=None, guide: str = "hold",
              contact_until: str = "end", contact_target: str = "box", face_radius: float = 0.01,
              iterations: int = 2, contact_geoms: str = "tool"):
    """(final box error [m], wall s, mean plan ms) of one push."""
    import mujoco

    from gato.sampling import MjSim, SimMPC, scenes

    spec, cfg, qs, q0, n = scenes.box_push_task(sc, timestep=timestep, num_samples=num_samples, guide=guide,
                                                iterations=iterations, standoff=standoff, ctrl_std=ctrl_std,
                                                push_s=push_s, contact_weight=contact_weight,
                                                penetration_scale=penetration_scale, contact_until=contact_until,
                                                contact_target=contact_target, face_radius=face_radius,
                                                contact_geoms=contact_geoms)
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=threads), qs)
    ex = MjSim(mpc.model, 1)
    d = ex.data[0]
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    mujoco.mj_forward(mpc.model, d)
    t = time.perf_counter()
    (rows,), (plans,) = mpc.execute(ex, n)
    wall = time.perf_counter() - t
    mpc.close()
    return float(np.linalg.norm(rows["qpos"][-1, 7:9] - sc["goal"])), wall, 1e3 * np.mean([p["wall_s"] for p in plans])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--timestep", type=float, default=0.01)
    p.add_argument("--num-samples", type=int, default=32)
    p.add_argument("--iterations", type=int, default=2, help="MPPI iterations per plan")
    p.add_argument("--contact-weight", type=float, nargs="+", default=[100.0])
    p.add_argument("--penetration-scale", type=float, default=0.0)
    p.add_argument("--standoff", type=float, default=0.10)
    p.add_argument("--ctrl-std", type=float, default=0.01)
    p.add_argument("--push-s", type=float, default=None, help="push phase [s] (default: scenes.PUSH_PHASES')")
    p.add_argument("--contact-until", choices=("end", "push"), default="end",
                   help="the contact wanted to the end of the run or in the push phase only")
    p.add_argument("--contact-target", choices=("box", "face"), default="box",
                   help="the contact wanted with the box or with a marker on the face behind the push")
    p.add_argument("--face-radius", type=float, default=0.01)
    p.add_argument("--contact-geoms", choices=("tool", "hand"), default="tool",
                   help="the contact wanted of the sphere tool or of any hand geom (scenes.HAND_GEOMS)")
    p.add_argument("--tol", type=float, default=0.03)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", type=int, nargs="*", default=None, help="scene indices to run (default: all)")
    p.add_argument("--where-needed", type=int, default=None, metavar="K",
                   help="run the terms only on scenes where the box cost alone fails, until K of them")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if a.where_needed is not None and (a.where_needed < 1 or a.only is not None):
        p.error("--where-needed: expected K >= 1, without --only")
    from gato.sampling import scenes

    scs = scenes.box_push_scenarios(a.n, seed=a.seed)
    idx = a.only if a.only is not None else range(a.n)
    ws = a.contact_weight
    lines = [f"| scene (seed {a.seed}) | start (x, y) [m] | goal (x, y) [m] | no contact terms: final box error [mm] | "
             + " | ".join(f"contact terms (weight {w:g}, {a.contact_geoms}-{a.contact_target}, until {a.contact_until}): final box error [mm]" for w in ws) + " | plan [ms] |",
             "|---|---|---|---|" + "---|" * len(ws) + "---|"]
    ok = np.zeros(1 + len(ws), dtype=int)
    kw = dict(timestep=a.timestep, num_samples=a.num_samples, threads=a.threads, standoff=a.standoff,
              ctrl_std=a.ctrl_std, push_s=a.push_s, contact_until=a.contact_until,
              contact_target=a.contact_target, face_radius=a.face_radius, iterations=a.iterations,
              contact_geoms=a.contact_geoms)
    needed = 0
    for i in idx:
        if a.where_needed is not None and needed == a.where_needed:
            break
        sc = scs[i]
        res = [run_scene(sc, contact_weight=0.0, penetration_scale=0.0, **kw)]
        if a.where_needed is not None and res[0][0] < a.tol:  # the box cost alone reaches the goal: not counted
            lines.append(f"| {i} | ({sc['start'][0]:.3f}, {sc['start'][1]:.3f}) | ({sc['goal'][0]:.3f}, "
                         f"{sc['goal'][1]:.3f}) | {1e3 * res[0][0]:.1f} | " + "- | " * len(ws) + f"{res[0][2]:.0f} |")
            print(lines[-1], flush=True)
            continue
        needed += 1
        res += [run_scene(sc, contact_weight=w, penetration_scale=a.penetration_scale, **kw) for w in ws]
        ok += np.array([e < a.tol for e, _, _ in res])
        lines.append(f"| {i} | ({sc['start'][0]:.3f}, {sc['start'][1]:.3f}) | ({sc['goal'][0]:.3f}, {sc['goal'][1]:.3f}) | "
                     + " | ".join(f"{1e3 * e:.1f}" for e, _, _ in res) + " | "
                     + " / ".join(f"{t:.0f}" for _, _, t in res) + " |")
        print(lines[-1], flush=True)
    ran = needed if a.where_needed is not None else len(idx)
    lines.append(f"| reached (< {1e3 * a.tol:.0f} mm) | | | " + " | ".join(f"{k}/{ran}" for k in ok) + " | |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        import benchmarks_doc

        benchmarks_doc.write_result(a.out, text)
    return ok


if __name__ == "__main__":
    main()
