"""Generate ``gato/robots/dynamics_fingerprint.json`` (schema 2) from pinocchio's aba.

Run from the checkout (the default output is the file next to this script's
package, i.e. the source tree when run by path)::

    .venv/bin/python src/gato_core/python/gato/tools/make_fingerprint.py          # write
    .venv/bin/python src/gato_core/python/gato/tools/make_fingerprint.py --check  # compare only

then ``scripts/setup.sh`` to install the new table. (``python -m
gato.tools.make_fingerprint`` runs the INSTALLED copy, whose default output is
the installed table: pass ``--out`` to write the checkout's.) The table is a pure
function of the URDFs (``gato.robot_urdf(name)``) and the seeds below:

- per plant, ``rng = np.random.default_rng([SEED, crc32(plant)])``;
- configurations are drawn uniformly inside the URDF position limits, each
  side shrunk by 10 % of the range (ranges wider than [-pi, pi] are first
  clipped to it);
- N_GRAVITY "gravity" probes: q drawn, qd = 0, u = 0;
- one more q for the nv "inertia_j" probes: u = torque * e_j, qd = 0, with
  torque = 10 rad/s^2 * M_jj(q) rounded to 3 significant figures (so the
  driven joint's response is ~10 rad/s^2, the order of the gravity response,
  and a float32 model's difference of two qdd keeps ~6 digits);
- N_CORIOLIS "coriolis" probes: q drawn, qd uniform in +-0.5 * the URDF
  velocity limit, u uniform in +-0.1 * the URDF effort limit.

A floating-base plant (registry ``floating_base``: go2) is built with pinocchio's free flyer
(schema-2 state: base position, quaternion x y z w, joints; base-frame twist, joint rates): the
base at (0, 0, 0.3) m plus uniform +-0.05 m, a random unit quaternion within about 0.3 rad of
upright (rounded to 9 decimals, norm 1 to ~1e-9), the joints as above; u is the full generalized
force with ZERO base rows (the contract's convention: the base is unactuated), so the inertia_j
probes drive the actuated joints only (nv - 6 of them) and a coriolis probe's base twist is
uniform in +-0.5 m/s, rad/s.

Gravity is pinocchio's default (0, 0, -9.81); no external wrench. Probe
inputs are rounded to 6 decimals before evaluation so the JSON holds exactly
the numbers the reference was computed at.
"""
from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

import numpy as np

SEED = 20261001
PLANTS = ("iiwa14", "indy7", "fr3", "gen3", "ur5e", "go2")  # fixed-base arms, then the floating go2
N_GRAVITY = 4
N_CORIOLIS = 3
INERTIA_ACC = 10.0  # rad/s^2 target response of the driven joint on its inertia_j probe
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "robots" / "dynamics_fingerprint.json"


def _sig(x: float, digits: int = 3) -> float:
    return float(f"{x:.{digits - 1}e}")


def plant_entry(plant: str) -> dict:
    """The schema-2 table entry (dict) of one registered plant (fixed-base, or floating: go2)."""
    import pinocchio as pin

    from gato.robots.registry import robot_urdf, sha256_file

    from gato.robots.registry import robot_info

    urdf = robot_urdf(plant)
    floating = bool(robot_info(plant).get("floating_base", False))
    model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer()) if floating \
        else pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    nq, nv = model.nq, model.nv
    nb = 6 if floating else 0  # unactuated base rows of u
    if nq != nv + (1 if floating else 0):
        raise ValueError(f"{plant}: nq {nq}, nv {nv}; this generator covers revolute joints (and a free flyer)")
    rng = np.random.default_rng([SEED, zlib.crc32(plant.encode())])
    lo = np.maximum(model.lowerPositionLimit[nq - nv + nb:], -np.pi)
    hi = np.minimum(model.upperPositionLimit[nq - nv + nb:], np.pi)
    pad = 0.1 * (hi - lo)
    qd_lim, u_lim = np.asarray(model.velocityLimit)[nb:], np.asarray(model.effortLimit)[nb:]
    if floating:
        qd_lim = np.r_[np.ones(6), qd_lim]
        u_lim = np.r_[np.zeros(6), u_lim]

    def draw_q():
        joints = np.round(rng.uniform(lo + pad, hi - pad), 6)
        if not floating:
            return joints
        base = np.round(np.r_[0.0, 0.0, 0.3] + rng.uniform(-0.05, 0.05, 3), 6)
        quat = np.r_[rng.uniform(-0.15, 0.15, 3), 1.0]
        quat = np.round(quat / np.linalg.norm(quat), 9)
        return np.r_[base, quat, joints]

    def aba(q, qd, u):
        return np.asarray(pin.aba(model, data, q, qd, u), dtype=np.float64).copy()

    zeros = np.zeros(nv)
    probes = []
    for i in range(N_GRAVITY):
        q = draw_q()
        probes.append(dict(name=f"gravity_{i}", kind="gravity", q=q, qd=zeros, u=zeros, qdd=aba(q, zeros, zeros)))
    q = draw_q()
    g = aba(q, zeros, zeros)
    M = pin.crba(model, data, q)
    for j in range(nb, nv):
        tau = _sig(INERTIA_ACC * M[j, j])
        u = zeros.copy()
        u[j] = tau
        a = aba(q, zeros, u)
        probes.append(dict(name=f"inertia_{j}", kind="inertia_j", joint=j, torque=tau, q=q, qd=zeros, u=u,
                           qdd=a, qdd_gravity=g, response=a - g))
    for i in range(N_CORIOLIS):
        q = draw_q()
        qd = np.round(rng.uniform(-0.5, 0.5, nv) * qd_lim, 6)
        u = np.round(rng.uniform(-0.1, 0.1, nv) * u_lim, 6)
        probes.append(dict(name=f"coriolis_{i}", kind="coriolis", q=q, qd=qd, u=u, qdd=aba(q, qd, u)))
    for p in probes:
        for k, v in p.items():
            if isinstance(v, np.ndarray):
                p[k] = [float(x) for x in v]
    return dict(urdf=urdf.name, urdf_sha256=sha256_file(urdf), nq=nq, nv=nv, floating_base=floating,
                joints=list(model.names)[1 + (1 if floating else 0):], probes=probes)


def build_table(plants=PLANTS) -> dict:
    """The whole schema-2 table (dict) for ``plants``."""
    import pinocchio as pin

    return {
        "schema": 2,
        "generator": "gato/tools/make_fingerprint.py (pinocchio aba)",
        "pinocchio": pin.__version__,
        "seed": SEED,
        "gravity": [0.0, 0.0, -9.81],
        "units": {"q": "rad", "qd": "rad/s", "u": "N*m (generalized force, nv)", "qdd": "rad/s^2"},
        "plants": {p: plant_entry(p) for p in plants},
    }


def _max_rel_diff(a: dict, b: dict) -> float:
    """Largest relative difference between the qdd/response numbers of two tables (inf on structure change)."""
    if a["plants"].keys() != b["plants"].keys():
        return float("inf")
    worst = 0.0
    for name, ea in a["plants"].items():
        eb = b["plants"][name]
        if ea["urdf_sha256"] != eb["urdf_sha256"] or len(ea["probes"]) != len(eb["probes"]):
            return float("inf")
        for pa, pb in zip(ea["probes"], eb["probes"]):
            for k in ("q", "qd", "u"):
                if pa[k] != pb[k]:
                    return float("inf")
            for k in ("qdd", "response"):
                if k in pa:
                    x, y = np.asarray(pa[k]), np.asarray(pb[k])
                    worst = max(worst, float(np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-12)))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("--plants", nargs="+", default=list(PLANTS))
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if the file at --out differs from a fresh build (rel > 1e-12)")
    args = ap.parse_args(argv)
    table = build_table(args.plants)
    if args.check:
        with open(args.out) as f:
            old = json.load(f)
        diff = _max_rel_diff(old, table)
        print(f"{args.out}: max relative difference vs a fresh build {diff:.3g}")
        return 0 if diff <= 1e-12 else 1
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out} ({', '.join(args.plants)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
