"""Issue 30 acceptance, "orientation weight 0 gives byte-identical plans to today's": position-only
BSQP plans (rot_cost 0 and u_ref "zero", the SolverParams() defaults) from whichever gato is first on
sys.path, saved to an npz; run it once with a core built before the orientation term (2d06ab6 =
3f95ecc^, built as bench/bench_solver_ab.py's docstring says, its folder first on PYTHONPATH) and once
with this checkout's, then compare byte for byte:

    PYTHONPATH=/tmp/site_old python bench/weight0_identity.py /tmp/old.npz
    python bench/weight0_identity.py /tmp/head.npz --garbage      # random rotation vectors in slots [3:6]
    python bench/weight0_identity.py --compare /tmp/old.npz /tmp/head.npz

iiwa14, indy7, fr3 x euler / semi_implicit / rk4 x bdsv / pcg; B 2, N 32, dt 0.01, 3 SQP iterations,
6 consecutive solves each (a moving figure-8-like reference, warm started), seeded.
"""
import sys

import numpy as np


def plans(garbage: bool) -> dict:
    import pinocchio as pin

    import gato
    from gato.robots.registry import robot_info

    res = {}
    for robot in ("iiwa14", "indy7", "fr3"):
        info = robot_info(robot)
        model = pin.buildModelFromUrdf(info["urdf"])
        data = model.createData()
        fid = model.getFrameId(info["ee_frame"])
        for integrator in ("euler", "semi_implicit", "rk4"):
            for linsys in ("bdsv", "pcg"):
                rng = np.random.default_rng(7)
                N, B = 32, 2
                s = gato.BSQP(info["urdf"], B, N, 0.01, plant_type=robot, integrator=integrator, linsys=linsys,
                              max_sqp_iters=3, ee_frame=info["ee_frame"])
                q0 = np.clip(pin.neutral(model) + rng.uniform(-0.3, 0.3, model.nq),
                             model.lowerPositionLimit + 0.2, model.upperPositionLimit - 0.2)
                x = np.concatenate([q0, np.zeros(model.nv)])
                pin.forwardKinematics(model, data, q0)
                p0 = pin.updateFramePlacement(model, data, fid).translation.copy()
                out = []
                for t in range(6):
                    ref = np.zeros((B, 6 * N))
                    for b in range(B):
                        for k in range(N):
                            ph = 2 * np.pi * (t + k) * 0.01 / 2.0
                            ref[b, 6 * k:6 * k + 3] = p0 + (0.05 + 0.01 * b) * np.array(
                                [0.0, np.sin(ph), np.sin(2 * ph) / 2])
                            if garbage:
                                v = rng.normal(size=3)
                                ref[b, 6 * k + 3:6 * k + 6] = v / np.linalg.norm(v) * rng.uniform(0, 3.0)
                    out.append(np.array(s.solve(np.stack([x, x + 1e-3]), ref).xu, copy=True))
                res[f"{robot}_{integrator}_{linsys}"] = np.array(out)
    return res


def main(argv) -> int:
    if argv[:1] == ["--compare"]:
        a, b = np.load(argv[1]), np.load(argv[2])
        same = [k for k in a.files if k in b.files and a[k].tobytes() == b[k].tobytes()]
        print(f"byte-identical: {len(same)} of {len(a.files)}")
        for k in a.files:
            if k not in same:
                print(f"  {k}: differs, max abs {np.abs(a[k] - b[k]).max():.3g}")
        return 0 if len(same) == len(a.files) else 1
    np.savez(argv[0], **plans("--garbage" in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
