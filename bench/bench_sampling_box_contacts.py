"""Box pushing with and without StateTask's contact terms, in closed loop (gato.sampling, MuJoCo).

The scenes where the contact terms matter: ``scenes.box_push_task(guide="hold")`` scripts no push
(the EE reference holds behind the box, 3 cm off its face, and the EE cost is off from the push
phase on), so only the box-to-goal cost asks for the push, and it is flat until the tool touches
the box. Each scene runs twice on the same seeded box start and goal: without contact terms, and
with a StateTask whose contact terms want the tool-box contact from the push phase on
(``contact_weight`` per metre of gap) and keep the tool off the table (``penetration_scale``).
``--contact-until push`` wants the contact during the push phase only (``end``: to the end of the
run, as ``scenes.box_push_task(contact_weight=...)`` builds it): wanted through the hold phase,
the contact pulls the tool back onto a box already at its goal and knocks it off again.
``--contact-target face`` wants the contact with a small non-colliding sphere (``--face-radius``)
on the centre of the box face the push starts from (the face away from the goal, in the box's
frame) instead of the whole box, so the wanted contact says where to push from; with
``box`` a contact anywhere (the box's top, a corner) satisfies it.
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
              iterations: int = 2):
    """(final box error [m], wall s, mean plan ms) of one push."""
    import mujoco

    from gato.sampling import MjSim, SimMPC, scenes

    own = contact_weight > 0 and (contact_until == "push" or contact_target == "face")  # the bench's contact task
    spec, cfg, qs, q0, n = scenes.box_push_task(sc, timestep=timestep, num_samples=num_samples, guide=guide,
                                                iterations=iterations,
                                                standoff=standoff, ctrl_std=ctrl_std, push_s=push_s,
                                                contact_weight=0.0 if own else contact_weight,
                                                penetration_scale=penetration_scale)
    if own:
        target = "box" if contact_target == "box" else add_push_face(spec, sc, face_radius)
        cfg = cfg.add(push_contact_task(spec, len(qs), timestep, push_s, contact_weight, penetration_scale,
                                        contact_until, target))
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


def add_push_face(spec, sc, radius: float) -> str:
    """Add a massless sphere (radius [m]) that collides with nothing at the centre of the box face
    behind the push (away from sc's goal), fixed to the box; its geom name."""
    import mujoco

    from gato.sampling import scenes

    u = (np.asarray(sc["goal"]) - sc["start"]) / np.linalg.norm(np.asarray(sc["goal"]) - sc["start"])
    h = scenes.BOX["half"]
    # conaffinity 8 with no geom of contype 8: it never collides, and the compiler keeps it
    # (discardvisual drops geoms with contype = conaffinity = 0)
    spec.body("box").add_geom(name="push_face", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0],
                              pos=[-u[0] * h, -u[1] * h, 0.0], contype=0, conaffinity=8, density=0, group=3)
    return "push_face"


def push_contact_task(spec, T: int, timestep: float, push_s, weight: float, penetration_scale: float,
                      until: str = "push", target: str = "box"):
    """box_push_task's contact StateTask (zero pose weights): the tool's contact with ``target`` wanted
    from the push phase on, to the end (``until="end"``) or in the push phase only (T rows of the
    reference; weight per metre of gap)."""
    from gato.sampling import StateTask, scenes

    phases = dict(scenes.PUSH_PHASES, **({} if push_s is None else {"push": float(push_s)}))
    steps = {k: int(round(v / timestep)) for k, v in phases.items()}
    push_from = steps["approach"] + steps["descend"]
    wanted = np.zeros(T)
    wanted[push_from:push_from + steps["push"] if until == "push" else T] = 1.0
    m0 = spec.compile()
    return StateTask(np.tile(m0.qpos0, (T, 1)), np.zeros((T, m0.nv)), np.zeros(m0.nv), 0.0,
                     (scenes.TOOL_GEOM, "table") if penetration_scale > 0 else None, penetration_scale, 0.0,
                     [(scenes.TOOL_GEOM, target, wanted, weight)], name="contacts")


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
             + " | ".join(f"contact terms (weight {w:g}, {a.contact_target}, until {a.contact_until}): final box error [mm]" for w in ws) + " | plan [ms] |",
             "|---|---|---|---|" + "---|" * len(ws) + "---|"]
    ok = np.zeros(1 + len(ws), dtype=int)
    kw = dict(timestep=a.timestep, num_samples=a.num_samples, threads=a.threads, standoff=a.standoff,
              ctrl_std=a.ctrl_std, push_s=a.push_s, contact_until=a.contact_until,
              contact_target=a.contact_target, face_radius=a.face_radius, iterations=a.iterations)
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
