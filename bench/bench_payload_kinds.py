"""Payload kinds under the payload study's runs, step references only (issue 32's protocol): success
per hypothesis configuration for one payload kind, one run per scenario.

Each run is gato.eval.wrench_studies.run_payload (MPC_GATO, N = 32, dt = 31.25 ms, PinocchioWorld at
1 ms, torques clamped, 5 s per goal, the runaway guard on) on gato.sim.scenarios.pickplace_scenarios
(iiwa14, 3 goals, ``ramps=(0.0,)``: steps), solver ``vel_lim_cost=0.1`` (the payload figures' barrier);
the payload: ``--load pendulum`` (``--mass`` kg on a ``--length`` m rod, ``--damping`` N*m*s/rad),
``--load constant`` (its weight alone, a constant world force at the EE: the payload bench's
``--rigid``) or ``--load rigid`` (a grasped object that does not swing: a solid sphere of ``--mass`` kg
fixed to the EE at ``--offset X Y Z`` m in EE axes, weight, inertia and lever arm in the world:
PinocchioWorld's ``rigid_payload``).

    python bench/bench_payload_kinds.py --load constant --configs swing:1 swing:8 --n 10 --seed 7
    python bench/bench_payload_kinds.py --load rigid --offset 0.1 0 0 --configs swing:1 swing:8 swing:32 --seed 20

``--attach T0 T1`` attaches the payload mid-run (issue 32's "payload attached mid-run" kind): the arm
runs bare until a time drawn uniformly from [T0, T1] s per scenario (numpy default_rng([seed, scenario])),
then carries the payload (gato.sim.pinocchio_world.AttachedAt; a pendulum starts hanging at rest).

    python bench/bench_payload_kinds.py --load rigid --offset 0.1 0 0 --attach 0.3 1.0 --configs swing:1 --seed 7

``--limit-check step`` judges the joint limits after every 1 ms physics step instead of at the control
ticks (each run's line prints both velocity peaks, and when the limits were exceeded at the 1 ms steps).

``--feedback riccati+pd`` executes each plan with feedback at every 1 ms substep until the next plan
(MPC_GATO's ``feedback``: the plan's Riccati gains plus a joint PD with damping
gato.wrench.options.PAYLOAD_FEEDBACK_KD x the effort), as the payload study's specs
(bench/specs/payload_kinds_*.yaml) do; the default ``none`` plays the plans open loop, as every payload
figure before 2026-12-07. ``--feedback-kd / -kp / -limit FRAC`` set the PD damping, stiffness and
saturation as fractions of each joint's URDF effort.

    python bench/bench_payload_kinds.py --load constant --attach 0.3 1.0 --configs swing:1 swing:32 --seed 223 --limit-check step --feedback riccati+pd

Prints one line per run (success, stop reason, why it failed) and a total per configuration.
"""
import argparse
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", choices=("pendulum", "constant", "rigid"), default="constant")
    ap.add_argument("--configs", nargs="+", default=["swing:1", "swing:8"], help="ESTIMATOR:B entries")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--mass", type=float, default=15.0)
    ap.add_argument("--length", type=float, default=0.5)
    ap.add_argument("--damping", type=float, default=0.0, help="pendulum joint damping [N*m*s/rad]")
    ap.add_argument("--offset", type=float, nargs=3, default=[0.0, 0.0, 0.0], help="rigid: EE-axes offset [m]")
    ap.add_argument("--first", type=int, default=0, help="first scenario index of the seed to run")
    ap.add_argument("--attach", type=float, nargs=2, default=None, metavar=("T0", "T1"),
                    help="attach the payload at a seeded time in [T0, T1] s (default: from t = 0)")
    ap.add_argument("--limit-check", choices=("tick", "step"), default="tick",
                    help="judge the joint limits at control ticks (default) or after every 1 ms physics step")
    ap.add_argument("--feedback", choices=("none", "pd", "riccati", "riccati+pd"), default="none",
                    help="how each plan is executed over the 1 ms substeps until the next one (MPC_GATO's feedback; "
                         "none, the default: the plan's torques open loop; the payload study's specs: riccati+pd)")
    ap.add_argument("--feedback-limit", type=float, default=None, metavar="FRAC",
                    help="saturation of the feedback term as a fraction of each joint's URDF effort (default 0.25)")
    ap.add_argument("--feedback-kp", type=float, default=None, metavar="FRAC",
                    help="PD stiffness [N*m/rad] as a fraction of each joint's URDF effort (default 0.1)")
    ap.add_argument("--feedback-kd", type=float, default=None, metavar="FRAC",
                    help="PD damping [N*m*s/rad] as a fraction of each joint's URDF effort (default "
                         "gato.wrench.options.PAYLOAD_FEEDBACK_KD, 0.03)")
    a = ap.parse_args(argv)
    import pinocchio as pin

    import gato
    from gato.eval.wrench_studies import run_payload
    from gato.sim.scenarios import pickplace_scenarios

    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    from gato.sim.pinocchio_world import PinocchioWorld

    scenarios = pickplace_scenarios(model, "iiwa14", a.first + a.n, seed=a.seed, ramps=(0.0,))[a.first:]

    import numpy as np

    from gato.sim.pinocchio_world import AttachedAt

    urdf = gato.robot_urdf("iiwa14")
    if a.attach is not None and not 0.0 <= a.attach[0] <= a.attach[1]:
        raise SystemExit(f"--attach: expected 0 <= T0 <= T1 s, got {a.attach}")

    def attach_t(k):
        return float(np.random.default_rng([a.seed, k]).uniform(*a.attach))

    fb = {} if a.feedback == "none" else {"feedback": a.feedback}
    if fb and a.feedback_kd is None:  # the payload study's PD damping (gato.wrench.options.PAYLOAD_FEEDBACK_KD)
        from gato.wrench.options import payload_feedback

        fb = payload_feedback(a.feedback, model.effortLimit)
    for name in ("limit", "kp", "kd"):
        frac = getattr(a, "feedback_" + name)
        if frac is None:
            continue
        if not fb:
            raise SystemExit(f"--feedback-{name}: needs --feedback pd | riccati | riccati+pd")
        fb["feedback_" + name] = frac * np.asarray(model.effortLimit, dtype=np.float64)

    def load(k):  # a fresh world per run: MPC_GATO keywords (the payload, the executor's feedback)
        return {**_payload(k), **fb}

    def _payload(k):
        if a.attach is not None:
            after = {"constant": dict(constant_f_ext=[0.0, 0.0, -9.81 * a.mass, 0.0, 0.0, 0.0]),
                     "rigid": dict(rigid_payload={"mass": a.mass, "offset": list(a.offset)}),
                     "pendulum": dict(pendulum={"mass": a.mass, "length": a.length, "damping": a.damping})}[a.load]
            return {"world": AttachedAt(PinocchioWorld(urdf), PinocchioWorld(urdf, **after), attach_t(k))}
        if a.load == "constant":
            return {"constant_f_ext": [0.0, 0.0, -9.81 * a.mass, 0.0, 0.0, 0.0]}
        if a.load == "rigid":
            return {"world": PinocchioWorld(gato.robot_urdf("iiwa14"),
                                            rigid_payload={"mass": a.mass, "offset": list(a.offset)})}
        return {"pendulum_config": {"mass": a.mass, "length": a.length, "damping": a.damping}}
    totals = []
    for entry in a.configs:
        try:
            est, B = entry.split(":")
            B = int(B)
        except ValueError:
            raise SystemExit(f"--configs: expected ESTIMATOR:B entries (swing:8), got {entry!r}") from None
        cfg = {"hypotheses": {"estimator": est, "batch_size": B}, "solver": {"vel_lim_cost": 0.1}}
        ok = early = 0
        for k, sc in enumerate(scenarios, start=a.first):
            t0 = time.perf_counter()
            r = run_payload(sc, cfg, load(k), k, limit_check=a.limit_check)
            ok += int(r["success"])
            before = a.attach is not None and not r["sim_time"] > attach_t(k)
            early += int(before)
            first, last = ((r.get("step_first_violation_t"), r.get("step_last_violation_t")) if a.limit_check == "step"
                           else (r.get("first_violation_t"), r.get("last_violation_t")))
            when = "" if first is None else f" (limits exceeded t = {first:.3f}-{last:.3f} s)"
            peaks = "" if r.get("step_qd_ratio") is None else \
                f" qd peak {r['tick_qd_ratio']:.2f}x at ticks / {r['step_qd_ratio']:.2f}x at 1 ms"
            att = "" if a.attach is None else f" attached t = {attach_t(k):.3f} s" + (
                " (the run ended before the attachment)" if before else "")
            print(f"{a.load}{att} {entry} scenario {k}: success {r['success']} ({r['stop_reason']}) "
                  f"{r['reason'][:100]}{when}{peaks}, {r['sim_time']:.2f} s simulated [{time.perf_counter() - t0:.1f} s]", flush=True)
        totals.append((entry, ok, early))
    kd = fb.get("feedback_kd")
    fracs = dict(limit=a.feedback_limit, kp=a.feedback_kp,
                 kd=None if kd is None else float(kd[0] / model.effortLimit[0]))
    what = ("" if a.feedback == "none" else f"feedback {a.feedback}"
            + "".join(f", {n} {v:g} x effort" for n, v in fracs.items() if v is not None) + ", ")
    what += {"pendulum": f"pendulum {a.length:g} m, damping {a.damping:g}", "constant": "constant weight",
             "rigid": f"rigid, offset {list(a.offset)} m"}[a.load]
    if a.attach is not None:
        what += f", attached mid-run at a seeded t in [{a.attach[0]:g}, {a.attach[1]:g}] s"
    print(f"\n{what}, {a.mass:g} kg, seed {a.seed}, scenarios {a.first}-{a.first + a.n - 1}, step references, "
          f"limits judged {'every 1 ms physics step' if a.limit_check == 'step' else 'at control ticks'}:")
    for entry, ok, early in totals:
        print(f"  {entry:>10}: {ok} / {a.n}" + (f" ({early} ended before the attachment)" if early else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
