"""Operational-space controller step time per robot: the C++ core (gato.osc) against per-robot
NumPy loops, for fleets of 1, 16 and 128 iiwa14 arms (7 DOFs each).

Workload per robot (every feature on: inertia decoupling, gravity compensation, wrench
feedforward + feedback with rotated selection frames, null-space posture control; seeded random
states near q_ready):

* ``model-free``: gato.osc.ControllerOperationalSpaceModelFree.step (inputs filled beforehand;
  the Python call with its per-field validation included) against
  - ``numpy ref``: test/reference/numpy_osc.osc_torque per robot (the test reference:
    np.linalg.inv for every inverse), and
  - ``numpy lean``: the same law per robot written for speed in NumPy (one Cholesky of M,
    solves instead of inverses, shared Minv J^T);
* ``model-based``: gato.osc.ControllerOperationalSpace.step (pinocchio kinematics, mass matrix
  and gravity in C++) against pinocchio's Python bindings + the lean NumPy law per robot.

Timing: ``--repeats`` repeats of ``--steps`` steps each (after a warm-up); the figures are the
median per-robot step time over the repeats with the [min, max] spread. Wall-clock numbers from a
shared 2-core machine: the report records the load average.

    source scripts/activate.sh && python bench/bench_osc.py [--repeats 7] [--out result.md]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

import gato
from gato.osc import ControllerOperationalSpace, ControllerOperationalSpaceModelFree
from run_info import stamp
from benchmarks_doc import write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))
from reference.numpy_osc import osc_torque, pinocchio_tool_state, rotation_error, selection  # noqa: E402

ROBOT = "iiwa14"
FLEETS = (1, 16, 128)


def fleet_problem(R, rng):
    model = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    data = model.createData()
    fid = model.getFrameId(gato.robot_info(ROBOT)["ee_frame"])
    q0 = np.array(gato.robot_info(ROBOT)["q_ready"])
    sts = []
    for _ in range(R):
        q = q0 + rng.uniform(-0.3, 0.3, 7)
        v = rng.normal(scale=0.3, size=7)
        pose, twist, J, M, g = pinocchio_tool_state(model, data, fid, q, v)
        des = pose.copy()
        des[:3] += rng.normal(scale=0.02, size=3)
        sts.append(dict(q=q, v=v, pose=pose, twist=twist, J=J, M=M, g=g, des=des))
    par = dict(kp=np.array([400.0] * 6), kd=np.array([40.0] * 6), maxes=np.array([1.0, 1, 0, 1, 1, 1]),
               waxes=np.array([0.0, 0, 1, 0, 0, 0]), kw=np.full(6, 0.5), lin=np.array([0.0, 0.1, 0, 1]),
               ang=np.array([0.1, 0.0, 0, 1]), fd=np.array([0, 0, -10.0, 0, 0, 0]),
               fm=np.array([0, 0, -9.0, 0, 0, 0]), kn=np.full(7, 25.0), dn=np.full(7, 10.0), q_des=q0)
    for k in ("lin", "ang"):
        par[k] = par[k] / np.linalg.norm(par[k])
    return (model, data, fid), sts, par


def controller_kwargs(par):
    return dict(motion_stiffness=par["kp"], motion_damping=par["kd"], use_wrench_feedforward=True,
                use_wrench_feedback=True, motion_selection_axes=par["maxes"], wrench_selection_axes=par["waxes"],
                wrench_stiffness=par["kw"], linear_selection_frame_operational=par["lin"],
                angular_selection_frame_operational=par["ang"], use_null_space_control=True,
                null_space_stiffness=par["kn"][0], null_space_damping=par["dn"][0])


def fill_common(inp, sts, par):
    R = len(sts)
    inp.desired_tool_pose_operational[:] = [s["des"] for s in sts]
    inp.desired_wrench_world[:] = par["fd"]
    inp.measured_wrench_world[:] = par["fm"]
    inp.joint_q[:] = np.concatenate([s["q"] for s in sts])
    inp.joint_qd[:] = np.concatenate([s["v"] for s in sts])
    inp.joint_q_des_null[:] = np.tile(par["q_des"], R)


def lean_numpy(s, par):
    """The law for one robot, written for speed (identity operational frame)."""
    J, M = s["J"], s["M"]
    L = np.linalg.cholesky(M)
    MinvJt = np.linalg.solve(L.T, np.linalg.solve(L, J.T))
    Lam = np.linalg.inv(J @ MinvJt)
    e = np.concatenate([s["des"][:3] - s["pose"][:3], rotation_error(s["des"][3:], s["pose"][3:])])
    a = par["kp"] * e - par["kd"] * s["twist"]
    Om = selection(np.eye(3), par["lin"], par["ang"], par["maxes"])
    Ow = selection(np.eye(3), par["lin"], par["ang"], par["waxes"])
    F = Lam @ (Om @ a) + Ow @ (par["fd"] + par["kw"] * (par["fd"] - par["fm"]))
    tau0 = M @ (par["kn"] * (par["q_des"] - s["q"]) - par["dn"] * s["v"])
    y = np.linalg.solve(L.T, np.linalg.solve(L, tau0))
    return J.T @ F + s["g"] + tau0 - J.T @ (Lam @ (J @ y))


def ref_numpy(s, par):
    return osc_torque(tool_pose=s["pose"], tool_twist=s["twist"], J=s["J"], M=s["M"], g=s["g"],
                      op_pose=np.array([0, 0, 0, 0, 0, 0, 1.0]), des_pose=s["des"], des_twist=np.zeros(6),
                      kp=par["kp"], kd=par["kd"], wrench_ff=True, wrench_fb=True, motion_axes=par["maxes"],
                      wrench_axes=par["waxes"], wrench_kp=par["kw"], lin_sel=par["lin"], ang_sel=par["ang"],
                      des_wrench=par["fd"], meas_wrench=par["fm"], null_space=True, q=s["q"], qd=s["v"],
                      q_des=par["q_des"], qd_des=np.zeros(7), kn=par["kn"], dn=par["dn"])


def timed(fn, steps, repeats):
    fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        out.append((time.perf_counter() - t0) / steps)
    return np.array(out)


def run(repeats, rng_seed=0):
    rows = []
    for R in FLEETS:
        rng = np.random.default_rng(rng_seed + R)
        (model, data, fid), sts, par = fleet_problem(R, rng)
        kw = controller_kwargs(par)
        # Model-free: the C++ step and both NumPy loops must agree before they are timed.
        mf = ControllerOperationalSpaceModelFree(controlled_dofs_per_robot=[7] * R, **kw)
        i1, o1 = mf.input(), mf.output()
        fill_common(i1, sts, par)
        i1.tool_pose_world[:] = [s["pose"] for s in sts]
        i1.tool_twist_world[:] = [s["twist"] for s in sts]
        i1.jacobian_tool_world[:] = [s["J"] for s in sts]
        i1.mass_matrix[:] = [s["M"] for s in sts]
        i1.gravity_force[:] = np.concatenate([s["g"] for s in sts])
        mf.step(inputs=i1, outputs=o1)
        ref = np.concatenate([ref_numpy(s, par) for s in sts])
        lean = np.concatenate([lean_numpy(s, par) for s in sts])
        assert np.allclose(o1.joint_f, ref, atol=1e-8) and np.allclose(lean, ref, atol=1e-8)
        mb = ControllerOperationalSpace(robots=[ROBOT] * R, **kw)
        i2, o2 = mb.input(), mb.output()
        fill_common(i2, sts, par)
        mb.step(inputs=i2, outputs=o2)
        assert np.allclose(o2.joint_f, o1.joint_f, atol=1e-8)

        def pin_loop():
            for s in sts:
                pinocchio_tool_state(model, data, fid, s["q"], s["v"])
                lean_numpy(s, par)

        steps_cpp = max(20, 4000 // R)
        steps_np = max(3, 400 // R)
        t = dict(
            cpp_mf=timed(lambda: mf.step(inputs=i1, outputs=o1), steps_cpp, repeats),
            np_ref=timed(lambda: [ref_numpy(s, par) for s in sts], steps_np, repeats),
            np_lean=timed(lambda: [lean_numpy(s, par) for s in sts], steps_np, repeats),
            cpp_mb=timed(lambda: mb.step(inputs=i2, outputs=o2), steps_cpp, repeats),
            np_pin=timed(pin_loop, steps_np, repeats))
        rows.append((R, {k: v / R for k, v in t.items()}))
        print(R, {k: f"{np.median(v) / R * 1e6:.2f} us" for k, v in t.items()}, flush=True)
    return rows


def fmt(v):
    return f"{np.median(v) * 1e6:.2f} [{v.min() * 1e6:.2f}, {v.max() * 1e6:.2f}]"


def report(rows, repeats, load0, load1):
    lines = [f"## Operational-space controller step time (issue 17; {stamp()})", "",
             "Per-robot step time [us], median [min, max] over "
             f"{repeats} repeats, iiwa14 fleets, every feature on (decoupling, gravity, wrench FF + FB with "
             "rotated selection frames, null space). C++ = the gato.osc Python call (validation included) on "
             f"the `{gato._core.__name__}` core ({gato._core.ISA}), single thread. Load average {load0:.2f} at start, {load1:.2f} at the end (2 shared cores).", "",
             "| arms | C++ model-free | NumPy ref loop | NumPy lean loop | speed-up vs lean | "
             "C++ model-based | pinocchio-py + lean loop | speed-up |",
             "|---|---|---|---|---|---|---|---|"]
    for R, t in rows:
        su = np.median(t["np_lean"]) / np.median(t["cpp_mf"])
        su2 = np.median(t["np_pin"]) / np.median(t["cpp_mb"])
        lines.append(f"| {R} | {fmt(t['cpp_mf'])} | {fmt(t['np_ref'])} | {fmt(t['np_lean'])} | {su:.0f}x | "
                     f"{fmt(t['cpp_mb'])} | {fmt(t['np_pin'])} | {su2:.0f}x |")
    lines += ["", "Command: `source scripts/activate.sh && python bench/bench_osc.py --repeats "
              f"{repeats}`", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=None, help="write the Markdown report to this file (not in docs/)")
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    rows = run(a.repeats)
    text = report(rows, a.repeats, load0, os.getloadavg()[0])
    print(text)
    if a.out:
        write_result(a.out, "\n" + text)


if __name__ == "__main__":
    main()
