"""The lean articulated-body algorithm (src/gato_core/cpp/src/lean_aba.hpp) against pinocchio.

The plant's forward dynamics, its derivatives (src/lean_derivs.hpp) and the EE
kinematics run on the lean algorithm for trees of 1-DoF revolute / prismatic
joints; the line search evaluates its trial points, and the KKT stage its knots,
several at a time with the multi-lane kernels, which also give the orientation
term its EE rotation and angular Jacobian. All must agree with pinocchio's
aba and computeABADerivatives to rounding, on the bundled arms and on a
synthetic tree with unaligned, negative and prismatic axes, with and without
external forces.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import gato

ARMS = ["iiwa14", "indy7", "ur5e", "fr3", "gen3"]


def _link(name, mass, com, diag):
    return f"""
  <link name="{name}">
    <inertial>
      <origin xyz="{com[0]} {com[1]} {com[2]}" rpy="0.1 -0.2 0.3"/>
      <mass value="{mass}"/>
      <inertia ixx="{diag[0]}" ixy="0.001" ixz="-0.002" iyy="{diag[1]}" iyz="0.0015" izz="{diag[2]}"/>
    </inertial>
  </link>"""


def _joint(name, kind, parent, child, xyz, rpy, axis):
    lim = '<limit lower="-2" upper="2" effort="100" velocity="3"/>'
    ax = "" if axis is None else f'<axis xyz="{axis[0]} {axis[1]} {axis[2]}"/>'
    return f"""
  <joint name="{name}" type="{kind}">
    <parent link="{parent}"/><child link="{child}"/>
    <origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/>
    {ax}{lim if kind != "fixed" else ""}
  </joint>"""


def synthetic_tree_urdf(path: Path) -> Path:
    """A branching tree: revolute joints about x, -y, an unaligned axis and -z,
    prismatic joints along y and an unaligned axis, fixed joints in between."""
    rng = np.random.default_rng(3)
    links = ["base"] + [f"l{i}" for i in range(8)] + ["tool", "ee_link"]
    body = "".join(_link(n, 1.0 + rng.random(), 0.1 * rng.standard_normal(3), 0.05 + 0.05 * rng.random(3))
                   for n in links)
    joints = [
        ("j0", "revolute", "base", "l0", (0, 0, 0.1), (0, 0, 0.3), (0, 0, 1)),
        ("j1", "revolute", "l0", "l1", (0.05, 0, 0.2), (0.2, 0, 0), (1, 0, 0)),
        ("j2", "prismatic", "l1", "l2", (0, 0.1, 0.3), (0, 0.4, 0), (0, 1, 0)),
        ("j3", "revolute", "l2", "l3", (0.1, 0, 0.2), (0.3, -0.2, 0.1), (0.3, 0.4, 0.866)),
        ("j4", "revolute", "l3", "l4", (0, 0.05, 0.25), (0, 0, 0), (0, -1, 0)),
        ("fx", "fixed", "l4", "tool", (0, 0, 0.1), (0.5, 0, 0), None),
        ("j5", "prismatic", "tool", "l5", (0, 0, 0.05), (0, 0, 0.2), (0.6, -0.64, 0.48)),
        ("j6", "revolute", "l5", "l6", (0.02, 0, 0.1), (0, 0.1, 0), (0, 0, -1)),
        ("fe", "fixed", "l6", "ee_link", (0, 0, 0.08), (0, 0, 0), None),
        # a second branch off l1
        ("j7", "revolute", "l1", "l7", (-0.1, 0.05, 0.1), (0.1, 0.2, 0.3), (0, 1, 0)),
    ]
    text = '<?xml version="1.0"?>\n<robot name="tree">' + body + "".join(_joint(*j) for j in joints) + "\n</robot>\n"
    path.write_text(text)
    return path


def core_solver(urdf, ee_frame):
    """The C++ solver without the registry checks of gato.BSQP (any fixed-base URDF)."""
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 4, 0.01)
    return gato._core.Solver64(str(urdf), ee_frame, 1, 4, 0.01, s._settings(s.params, "bdsv"), 1)


def random_fext(rng, nbodies, scale=5.0):
    return scale * rng.standard_normal(6 * nbodies)


def pin_fext(model, slot):
    """Our per-body [angular; linear] joint-local layout -> pinocchio Forces (linear, angular)."""
    out = [pin.Force.Zero() for _ in range(model.njoints)]
    for b in range(model.njoints - 1):
        f = slot[6 * b:6 * b + 6]
        out[b + 1] = pin.Force(f[3:], f[:3])
    return out


def check_against_pinocchio(core, model, frame, rng, rtol):
    data = model.createData()
    fid = model.getFrameId(frame)
    assert core.lean_dynamics_available and core.lean_dynamics
    for trial in range(12):
        q = rng.uniform(-1.5, 1.5, model.nq)
        v = 2 * rng.standard_normal(model.nv)
        tau = 20 * rng.standard_normal(model.nv)
        fext = random_fext(rng, model.njoints - 1) if trial % 2 else None
        want = pin.aba(model, data, q, v, tau, pin_fext(model, fext)) if fext is not None else pin.aba(model, data, q, v, tau)
        got = core.forward_dynamics(q, v, tau, fext)
        scale = max(1.0, np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale)
        pin.framesForwardKinematics(model, data, q)
        np.testing.assert_allclose(core.frame_position(q), data.oMf[fid].translation, rtol=0, atol=rtol)
        # The pinocchio path of the same plant agrees too.
        core.lean_dynamics = False
        np.testing.assert_allclose(core.forward_dynamics(q, v, tau, fext), want, rtol=0, atol=rtol * scale)
        core.lean_dynamics = True


@pytest.mark.parametrize("robot", ARMS)
def test_lean_aba_matches_pinocchio_on_the_bundled_arms(robot):
    urdf = gato.robot_urdf(robot)
    s = gato.BSQP(urdf, 1, 4, 0.01)
    model = pin.buildModelFromUrdf(str(urdf))
    check_against_pinocchio(s._s, model, s.ee_frame, np.random.default_rng(0), 1e-12)


def test_lean_aba_matches_pinocchio_on_a_tree_with_unaligned_and_prismatic_axes(tmp_path):
    urdf = synthetic_tree_urdf(tmp_path / "tree.urdf")
    model = pin.buildModelFromUrdf(str(urdf))
    kinds = {model.joints[i].shortname() for i in range(1, model.njoints)}
    assert {"JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned", "JointModelPY"} <= kinds
    core = core_solver(urdf, "ee_link")
    check_against_pinocchio(core, model, "ee_link", np.random.default_rng(1), 1e-12)


def test_lean_aba_on_go2_tree():
    """go2's legs (a 12-joint tree, axes x and y) as a fixed-base model."""
    urdf = gato.robot_urdf("go2")
    model = pin.buildModelFromUrdf(str(urdf))
    frame = model.frames[-1].name
    core = core_solver(urdf, frame)
    check_against_pinocchio(core, model, frame, np.random.default_rng(2), 1e-12)


def test_lean_aba_and_derivatives_float32():
    urdf = gato.robot_urdf("iiwa14")
    s = gato.BSQP(urdf, 1, 4, 0.01, dtype=np.float32)
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, v, tau = rng.uniform(-1, 1, 7), rng.standard_normal(7), 10 * rng.standard_normal(7)
        q32, v32, tau32 = (a.astype(np.float32) for a in (q, v, tau))
        want = pin.aba(model, data, q, v, tau)
        got = s._s.forward_dynamics(q32, v32, tau32, None)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-4 * max(1.0, np.abs(want).max()))
        pin.computeABADerivatives(model, data, q, v, tau)
        got = s._s.forward_dynamics_derivatives(q32, v32, tau32)
        for g, w in zip(got[1:3], (data.ddq_dq, data.ddq_dv)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-3 * max(1.0, np.abs(w).max()))


def check_derivatives_against_pinocchio(core, model, rng, rtol):
    """Lean dqdd/dq, dqdd/dqd and M^-1 (and with external forces, the whole knot
    linearization) against pinocchio's computeABADerivatives."""
    data = model.createData()
    n = model.nv
    assert core.lean_dynamics
    for trial in range(8):
        q = rng.uniform(-1.5, 1.5, model.nq)
        v = 2 * rng.standard_normal(n)
        tau = 20 * rng.standard_normal(n)
        pin.computeABADerivatives(model, data, q, v, tau)
        minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
        want = (data.ddq, data.ddq_dq, data.ddq_dv, minv)
        got = core.forward_dynamics_derivatives(q, v, tau)
        for name, g, w in zip(("qdd", "dqdd/dq", "dqdd/dqd", "Minv"), got, want):
            np.testing.assert_allclose(g, w, rtol=0, atol=rtol * max(1.0, np.abs(w).max()), err_msg=name)
        # With external forces: the knot linearization (x+, A, B) of the lean path
        # against the pinocchio path of the same plant.
        fext = random_fext(rng, model.njoints - 1)
        x = np.r_[q, v]
        lean = core.linearize(x, tau, fext)
        core.lean_dynamics = False
        ref = core.linearize(x, tau, fext)
        core.lean_dynamics = True
        for name, g, w in zip(("x+", "A", "B"), lean, ref):
            np.testing.assert_allclose(g, w, rtol=0, atol=rtol * max(1.0, np.abs(w).max()), err_msg=name)


@pytest.mark.parametrize("robot", ARMS)
def test_lean_derivatives_match_pinocchio_on_the_bundled_arms(robot):
    urdf = gato.robot_urdf(robot)
    s = gato.BSQP(urdf, 1, 4, 0.01)
    check_derivatives_against_pinocchio(s._s, pin.buildModelFromUrdf(str(urdf)), np.random.default_rng(6), 1e-11)


def test_lean_derivatives_match_pinocchio_on_trees(tmp_path):
    urdf = synthetic_tree_urdf(tmp_path / "tree.urdf")
    core = core_solver(urdf, "ee_link")
    check_derivatives_against_pinocchio(core, pin.buildModelFromUrdf(str(urdf)), np.random.default_rng(7), 1e-11)
    go2 = gato.robot_urdf("go2")
    model = pin.buildModelFromUrdf(str(go2))
    core = core_solver(go2, model.frames[-1].name)
    check_derivatives_against_pinocchio(core, model, np.random.default_rng(8), 1e-11)


LINE_SEARCH_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import gato
    out = {}
    for integ in ["euler", "semi_implicit", "rk4"]:
        res = []
        for lean in (True, False):
            rng = np.random.default_rng(5)
            s = gato.BSQP(gato.robot_urdf("iiwa14"), 2, 12, 0.02, integrator=integ, max_sqp_iters=3)
            s._s.lean_dynamics = lean
            q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])
            x = np.stack([np.r_[q0 + 0.05 * rng.standard_normal(7), 0.3 * rng.standard_normal(7)] for _ in range(2)])
            ref = np.tile(np.r_[s.ee_pos(q0) + [0.6, -0.1, 0.1], 0, 0, 0], (2, 12))
            xu = s.hold_trajectory(x)
            xu += 0.05 * rng.standard_normal(xu.shape)
            f = np.zeros((2, 12, 6 * s.n_bodies)); f[:, :, 36:42] = 3 * rng.standard_normal((2, 12, 6))
            s.set_f_ext_B(f)
            r = s.solve(x, ref, xu)
            res.append(dict(xu=np.asarray(r.xu).tolist(), step=r.stats.step_size.tolist(),
                            min_merit=r.stats.min_merit.tolist()))
        out[integ] = res
    print(json.dumps(out))
""")


@pytest.mark.parametrize("no_avx2", ["0", "1"])
def test_multi_lane_line_search_matches_the_sequential_one(no_avx2):
    """The multi-lane line search ('best': all 8 step sizes) picks the same step as the
    sequential pinocchio one, with merits equal to rounding, and the multi-lane KKT
    linearization (Euler, semi-implicit; RK4 runs the scalar lean derivatives) gives the
    same iterates; GATO_LEAN_NO_AVX2=1 runs the SSE2 kernels instead of the AVX2 ones."""
    import json
    env = dict(os.environ, GATO_LEAN_NO_AVX2=no_avx2)
    out = subprocess.run([sys.executable, "-c", LINE_SEARCH_SCRIPT], env=env, capture_output=True,
                         text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for integ, (lean, ref) in res.items():
        step = np.asarray(lean["step"])
        np.testing.assert_array_equal(step, ref["step"], err_msg=integ)
        assert (step == 0.5).any(), integ  # the problem exercises a step below 1
        # Merits agree to rounding on the scale of the largest one (later iterations sum
        # terms of that size to small totals), plus the iterates' gap (<= 7e-11 here) through the
        # merit's slope. Measured |diff| / scale, worst integrator, over the AVX2 / baseline core
        # x AVX2 / SSE2 lean kernels: 3.9e-12, 3.1e-12, 2.7e-12, 2.7e-12 (semi-implicit; OpenBLAS
        # plays no part). 5e-11 is 13x above the worst (the old 1e-11 left 2.5x); a lean merit
        # missing a term is off by >= 1e-6 of the scale, and the steps must match exactly.
        scale = np.abs(ref["min_merit"]).max()
        np.testing.assert_allclose(lean["min_merit"], ref["min_merit"], rtol=0, atol=5e-11 * scale, err_msg=integ)
        np.testing.assert_allclose(lean["xu"], ref["xu"], rtol=0, atol=1e-9, err_msg=integ)


LANE_WIDTH_SCRIPT = textwrap.dedent("""
    import hashlib, json
    import numpy as np
    import gato
    out = {}
    # q_lim_cost 0: the stage cost in one pass over the lanes (stage_cost_lanes); the default
    # barrier and the orientation term: per lane through the cost terms.
    plain = dict(q_lim_cost=0.0)
    cases = [("euler", plain), ("semi_implicit", plain), ("semi_implicit", {}),
             ("semi_implicit", dict(rot_cost=0.5, N_rot_cost=2.0)), ("rk4", plain)]
    for i, (integ, kw) in enumerate(cases):
        rng = np.random.default_rng(11)
        N = 13  # not a multiple of 4 or 8: the last lane group of the KKT stage is partial
        s = gato.BSQP(gato.robot_urdf("iiwa14"), 2, N, 0.02, integrator=integ, max_sqp_iters=3,
                      q_cost=2.0, qd_cost=0.01, u_cost=2e-6, N_cost=50.0, **kw)
        q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])
        x = np.stack([np.r_[q0 + 0.05 * rng.standard_normal(7), 0.3 * rng.standard_normal(7)] for _ in range(2)])
        ref = np.tile(np.r_[s.ee_pos(q0) + [0.3, -0.1, 0.1], 0.1, -0.2, 0.3], (2, N))
        xu = s.hold_trajectory(x)
        xu += 0.05 * rng.standard_normal(xu.shape)
        h = hashlib.sha256()
        for _ in range(3):
            r = s.solve(x, ref, xu)
            xu = np.array(r.xu)
            for a in (xu, r.stats.step_size, r.stats.min_merit, r.stats.final_merit):
                h.update(np.ascontiguousarray(a).tobytes())
        out[f"{i}:{integ}:{sorted(kw)}"] = h.hexdigest()
    print(json.dumps(out))
""")


def test_line_search_lane_width_leaves_every_bit():
    """The 8-lane AVX-512 lean kernels (CPUs with AVX-512F and DQ) give the plans, steps and
    merits of the 4-lane AVX2 ones bit for bit (GATO_LEAN_NO_AVX512=1): each lane runs the same
    operations; on a CPU without AVX-512 both runs take the AVX2 kernels."""
    import json
    runs = []
    for off in ("0", "1"):
        env = dict(os.environ, GATO_LEAN_NO_AVX512=off)
        out = subprocess.run([sys.executable, "-c", LANE_WIDTH_SCRIPT], env=env, capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]


def check_ee_pose_against_pinocchio(core, model, frame, rng, atol, M=9):
    """The orientation term's kinematics from the multi-lane lean kernels (the EE world
    rotation and angular Jacobian, core.debug_ee_pose) against pinocchio's frame placement
    and LOCAL_WORLD_ALIGNED frame Jacobian, at M random configurations (M not a multiple of
    the lane count: the last pass repeats a lane)."""
    data = model.createData()
    fid = model.getFrameId(frame)
    q = rng.uniform(-2.5, 2.5, (M, model.nq))
    R, Jw = core.debug_ee_pose(q)
    assert R.shape == (M, 3, 3) and Jw.shape == (M, 3, model.nv)
    for m in range(M):
        qm = q[m].astype(np.float64)
        pin.computeJointJacobians(model, data, qm)
        pin.updateFramePlacements(model, data)
        J6 = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(R[m], data.oMf[fid].rotation, rtol=0, atol=atol, err_msg=f"R, q {m}")
        np.testing.assert_allclose(Jw[m], J6[3:], rtol=0, atol=atol, err_msg=f"Jw, q {m}")


@pytest.mark.parametrize("robot", ARMS)
def test_lean_ee_rotation_matches_pinocchio_on_the_bundled_arms(robot):
    urdf = gato.robot_urdf(robot)
    s = gato.BSQP(urdf, 1, 4, 0.01)
    check_ee_pose_against_pinocchio(s._s, pin.buildModelFromUrdf(str(urdf)), s.ee_frame,
                                    np.random.default_rng(10), 1e-12)


def test_lean_ee_rotation_matches_pinocchio_on_a_tree_and_in_float32(tmp_path):
    """Unaligned, negative and prismatic axes and fixed joints before the EE frame (its axes
    differ from its body's canonical frame); float32 on iiwa14 to its rounding."""
    urdf = synthetic_tree_urdf(tmp_path / "tree.urdf")
    check_ee_pose_against_pinocchio(core_solver(urdf, "ee_link"), pin.buildModelFromUrdf(str(urdf)), "ee_link",
                                    np.random.default_rng(11), 1e-12)
    urdf = gato.robot_urdf("iiwa14")
    s = gato.BSQP(urdf, 1, 4, 0.01, dtype=np.float32)
    check_ee_pose_against_pinocchio(s._s, pin.buildModelFromUrdf(str(urdf)), s.ee_frame,
                                    np.random.default_rng(12), 1e-5, M=17)
    with pytest.raises(ValueError, match="q"):
        s._s.debug_ee_pose(np.zeros((3, 6), np.float32))


@pytest.mark.parametrize("integ", ["euler", "rk4"])
def test_orientation_term_lean_path_matches_pinocchio(integ):
    """With the orientation term on, the lean kernels' EE rotations (the multi-lane line search
    and KKT stage, the scalar kernel in the sequential line search) give the KKT blocks and the
    iterates of the pinocchio path (lean dynamics off) to rounding, and the same steps."""
    out = {}
    for lean in (True, False):
        for ls in ("best", "first"):
            rng = np.random.default_rng(13)
            s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 10, 0.02, integrator=integ, max_sqp_iters=3,
                          rot_cost=5.0, N_rot_cost=50.0, line_search=ls)
            s._s.lean_dynamics = lean
            q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4])
            x = np.r_[q0 + 0.05 * rng.standard_normal(7), 0.3 * rng.standard_normal(7)][None]
            ref = np.tile(np.r_[s.ee_pos(q0) + [0.1, -0.05, 0.05], np.pi * 0.9, 0.2, -0.1], (1, 10))
            xu = s.hold_trajectory(x) + 0.05 * rng.standard_normal((1, s.xu_size))
            kkt = s._s.debug_setup_kkt(xu, x, ref)
            r = s.solve(x, ref, xu)
            out[lean, ls] = (kkt, np.asarray(r.xu), r.stats.step_size.copy())
    for ls in ("best", "first"):
        (kl, xl, sl), (kp, xp, sp) = out[True, ls], out[False, ls]
        for name in ("Q", "q"):
            np.testing.assert_allclose(kl[name], kp[name], rtol=0, atol=1e-9 * np.abs(kp[name]).max(), err_msg=name)
        np.testing.assert_array_equal(sl, sp, err_msg=ls)
        # Iterates to rounding on their scale (torques ~550 N*m here): measured 1.4e-11 of it with
        # the AVX2 core and 1.8e-11 with the baseline core (bench/blas_kernel_spread.py, issue 28;
        # OpenBLAS plays no part). 2e-10 is 11x above; a wrong orientation term moves the plan by
        # far more than 1e-6 of its scale after 3 iterations (and the KKT blocks are checked above).
        np.testing.assert_allclose(xl, xp, rtol=0, atol=2e-10 * np.abs(xp).max(), err_msg=ls)
