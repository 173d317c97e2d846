"""The operational-space controller (gato.osc) against the NumPy transcription of its law
(test/reference/numpy_osc.py): every feature alone and combined, on iiwa14, ur5e and a
heterogeneous fleet in one call, to 1e-10; Lambda against its definition; the null-space
task against finite differences of the kinematics; the model-based variant against
pinocchio's Python bindings; bad input raising ValueError that names the field."""
import os
import sys
import zlib

import numpy as np
import pinocchio as pin
import pytest

import gato
from gato.osc import FIELDS, ControllerOperationalSpace, ControllerOperationalSpaceModelFree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference.numpy_osc import osc_torque, pinocchio_tool_state, quat_mul, quat_to_R, task_inertia  # noqa: E402

TOL = 1e-10


# ------------------------------------------------------------------ fixtures / helpers
_MODELS = {}


def robot(name):
    """(model, data, tool frame id, q_ready) of a registered robot (pinocchio Python)."""
    if name not in _MODELS:
        info = gato.robot_info(name)
        model = pin.buildModelFromUrdf(str(gato.robot_urdf(name)))
        _MODELS[name] = (model, model.createData(), model.getFrameId(info["ee_frame"]), np.array(info["q_ready"]))
    return _MODELS[name]


def random_quat(rng, angle=None):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    th = rng.uniform(0.2, 2.5) if angle is None else angle
    return np.concatenate([np.sin(th / 2) * axis, [np.cos(th / 2)]])


def states(names, rng):
    """One random, well-conditioned state per robot: q near q_ready, random velocities."""
    out = []
    for n in names:
        model, data, fid, q0 = robot(n)
        q = q0 + rng.uniform(-0.4, 0.4, size=model.nq)
        v = rng.normal(scale=0.5, size=model.nv)
        pose, twist, J, M, g = pinocchio_tool_state(model, data, fid, q, v)
        out.append(dict(q=q, v=v, pose=pose, twist=twist, J=J, M=M, g=g, n=model.nv))
    return out


def pose_inv_mul(a, b):
    """a^-1 * b for (p, quat xyzw) transforms."""
    Ra = quat_to_R(a[3:])
    qa_inv = np.array([-a[3], -a[4], -a[5], a[6]])
    return np.concatenate([Ra.T @ (b[:3] - a[:3]), quat_mul(qa_inv, b[3:])])


def case_params(sts, rng, rotated_op=True, rotated_sel=False):
    """Random per-robot parameters of a step (R robots, T DOFs)."""
    R, T = len(sts), sum(s["n"] for s in sts)
    p = dict(
        kp=rng.uniform(50, 400, size=(R, 6)), kd=rng.uniform(5, 40, size=(R, 6)),
        op=np.array([np.concatenate([rng.normal(scale=0.3, size=3), random_quat(rng) if rotated_op else [0, 0, 0, 1]])
                     for _ in range(R)]),
        lin=np.array([random_quat(rng) if rotated_sel else [0, 0, 0, 1.0] for _ in range(R)]),
        ang=np.array([random_quat(rng) if rotated_sel else [0, 0, 0, 1.0] for _ in range(R)]),
        maxes=np.tile([1.0, 1, 0, 1, 0, 1], (R, 1)), waxes=np.tile([0.0, 0, 1, 0, 1, 0], (R, 1)),
        kw=rng.uniform(0.1, 2.0, size=(R, 6)), fd=rng.normal(scale=10, size=(R, 6)),
        fm=rng.normal(scale=10, size=(R, 6)), kn=rng.uniform(5, 50, size=T), dn=rng.uniform(1, 10, size=T),
        qdes=np.concatenate([s["q"] + rng.normal(scale=0.3, size=s["n"]) for s in sts]),
        qddes=rng.normal(scale=0.2, size=T))
    # Desired poses: the current one moved by ~5 cm / ~0.3 rad, in the operational frame.
    des = []
    for r, s in enumerate(sts):
        pw = s["pose"][:3] + rng.normal(scale=0.05, size=3)
        qw = quat_mul(random_quat(rng, angle=rng.uniform(0.05, 0.5)), s["pose"][3:])
        des.append(pose_inv_mul(p["op"][r], np.concatenate([pw, qw])))
    p["des"] = np.array(des)
    p["dtw"] = rng.normal(scale=0.3, size=(R, 6))
    return p


def build(names, flags, p, baked=True, model_based=False):
    R = len(names)
    kw = dict(use_inertia_decoupling=flags.get("dec", True), use_partial_inertia_decoupling=flags.get("partial", False),
              use_gravity_compensation=flags.get("grav", True), use_wrench_feedforward=flags.get("ff", False),
              use_wrench_feedback=flags.get("fb", False), use_null_space_control=flags.get("ns", False))
    wrench = kw["use_wrench_feedforward"] or kw["use_wrench_feedback"]
    kw["motion_stiffness"] = p["kp"] if baked else None
    kw["motion_damping"] = p["kd"] if baked else None
    kw["operational_frame_pose_world"] = p["op"] if baked else None
    if wrench:
        kw["motion_selection_axes"] = p["maxes"]
        kw["wrench_selection_axes"] = p["waxes"]
        kw["linear_selection_frame_operational"] = p["lin"] if baked else None
        kw["angular_selection_frame_operational"] = p["ang"] if baked else None
        if kw["use_wrench_feedback"]:
            kw["wrench_stiffness"] = p["kw"] if baked else None
    if kw["use_null_space_control"]:
        kw["null_space_stiffness"] = p["kn"] if baked else None
        kw["null_space_damping"] = p["dn"] if baked else None
    if model_based:
        return ControllerOperationalSpace(robots=names, **kw)
    dofs = [robot(n)[0].nv for n in names]
    assert len(dofs) == R
    return ControllerOperationalSpaceModelFree(controlled_dofs_per_robot=dofs, **kw)


def fill(ctrl, inp, sts, p):
    """Write every non-None field of inp from the states and parameters."""
    offs = np.cumsum([0] + [s["n"] for s in sts])
    src = dict(desired_tool_pose_operational=p["des"], desired_twist_operational=p["dtw"],
               desired_wrench_world=p["fd"], measured_wrench_world=p["fm"], operational_frame_pose_world=p["op"],
               motion_stiffness=p["kp"], motion_damping=p["kd"], wrench_stiffness=p["kw"],
               linear_selection_frame_operational=p["lin"], angular_selection_frame_operational=p["ang"],
               joint_q=np.concatenate([s["q"] for s in sts]), joint_qd=np.concatenate([s["v"] for s in sts]),
               joint_q_des_null=p["qdes"], joint_qd_des_null=p["qddes"], null_space_stiffness=p["kn"],
               null_space_damping=p["dn"], gravity_force=np.concatenate([s["g"] for s in sts]),
               tool_pose_world=np.array([s["pose"] for s in sts]), tool_twist_world=np.array([s["twist"] for s in sts]))
    for name in FIELDS:
        a = getattr(inp, name)
        if a is None:
            continue
        if name == "jacobian_tool_world":
            a[:] = np.nan  # the padding must not be read
            for r, s in enumerate(sts):
                a[r, :, :s["n"]] = s["J"]
        elif name == "mass_matrix":
            a[:] = np.nan
            for r, s in enumerate(sts):
                a[r, :s["n"], :s["n"]] = s["M"]
        else:
            a[:] = src[name]
    return offs


def reference(sts, p, flags):
    out = []
    off = 0
    for r, s in enumerate(sts):
        n = s["n"]
        sl = slice(off, off + n)
        off += n
        out.append(osc_torque(
            tool_pose=s["pose"], tool_twist=s["twist"], J=s["J"], M=s["M"], g=s["g"], op_pose=p["op"][r],
            des_pose=p["des"][r], des_twist=p["dtw"][r], kp=p["kp"][r], kd=p["kd"][r],
            decoupling=flags.get("dec", True), partial=flags.get("partial", False), gravity=flags.get("grav", True),
            wrench_ff=flags.get("ff", False), wrench_fb=flags.get("fb", False), motion_axes=p["maxes"][r],
            wrench_axes=p["waxes"][r], wrench_kp=p["kw"][r], lin_sel=p["lin"][r], ang_sel=p["ang"][r],
            des_wrench=p["fd"][r], meas_wrench=p["fm"][r], null_space=flags.get("ns", False), q=s["q"], qd=s["v"],
            q_des=p["qdes"][sl], qd_des=p["qddes"][sl], kn=p["kn"][sl], dn=p["dn"][sl]))
    return np.concatenate(out)


def assert_close(a, b):
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL * scale)


FLEETS = [["iiwa14"], ["ur5e"], ["iiwa14", "ur5e", "iiwa14"]]
CASES = {
    "full": {}, "no_decoupling": dict(dec=False), "partial": dict(partial=True), "no_gravity": dict(grav=False),
    "wrench_ff": dict(ff=True), "wrench_fb": dict(fb=True), "wrench_ff_fb": dict(ff=True, fb=True),
    "no_decoupling_ff_fb": dict(dec=False, ff=True, fb=True), "partial_ff_fb": dict(partial=True, ff=True, fb=True),
    "all_off": dict(dec=False, grav=False),
}
NS_FLEETS = [["iiwa14"], ["iiwa14", "fr3", "iiwa14"]]
NS_CASES = {
    "ns_full": dict(ns=True), "ns_partial": dict(ns=True, partial=True), "ns_no_decoupling": dict(ns=True, dec=False),
    "ns_ff_fb": dict(ns=True, ff=True, fb=True), "ns_partial_ff_fb": dict(ns=True, partial=True, ff=True, fb=True),
}


# ------------------------------------------------------------------ the law
@pytest.mark.parametrize("fleet", FLEETS, ids=["iiwa14", "ur5e", "7-6-7"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("baked", [True, False], ids=["baked", "inputs"])
def test_matches_numpy_reference(fleet, case, baked):
    flags = CASES[case]
    rng = np.random.default_rng(zlib.crc32(repr((fleet, case, baked)).encode()))
    wrench = flags.get("ff") or flags.get("fb")
    for trial in range(3):
        sts = states(fleet, rng)
        p = case_params(sts, rng, rotated_op=True, rotated_sel=bool(wrench))
        ctrl = build(fleet, flags, p, baked=baked)
        inp, out = ctrl.input(), ctrl.output()
        fill(ctrl, inp, sts, p)
        ctrl.step(inputs=inp, outputs=out, dt=0.001)
        assert_close(out.joint_f, reference(sts, p, flags))


@pytest.mark.parametrize("fleet", NS_FLEETS, ids=["iiwa14", "7-7-7"])
@pytest.mark.parametrize("case", sorted(NS_CASES))
@pytest.mark.parametrize("baked", [True, False], ids=["baked", "inputs"])
def test_null_space_matches_numpy_reference(fleet, case, baked):
    flags = NS_CASES[case]
    rng = np.random.default_rng(zlib.crc32(repr((fleet, case, baked, "ns")).encode()))
    for trial in range(3):
        sts = states(fleet, rng)
        p = case_params(sts, rng, rotated_op=True, rotated_sel=True)
        ctrl = build(fleet, flags, p, baked=baked)
        inp, out = ctrl.input(), ctrl.output()
        fill(ctrl, inp, sts, p)
        ctrl.step(inputs=inp, outputs=out)
        assert_close(out.joint_f, reference(sts, p, flags))


def test_heterogeneous_fleet_equals_robots_alone():
    """[7, 6, 7] in one call = each robot in its own controller (compact joint_f, padded J / M)."""
    rng = np.random.default_rng(7)
    fleet = ["iiwa14", "ur5e", "iiwa14"]
    sts = states(fleet, rng)
    p = case_params(sts, rng, rotated_sel=True)
    flags = dict(ff=True, fb=True)
    ctrl = build(fleet, flags, p)
    assert (ctrl.controlled_robot_count, ctrl.total_controlled_dofs, ctrl.max_controlled_dofs) == (3, 20, 7)
    inp, out = ctrl.input(), ctrl.output()
    assert inp.jacobian_tool_world.shape == (3, 6, 7) and inp.mass_matrix.shape == (3, 7, 7)
    assert inp.gravity_force.shape == (20,) and out.joint_f.shape == (20,)
    fill(ctrl, inp, sts, p)
    ctrl.step(inputs=inp, outputs=out)
    off = 0
    for r, name in enumerate(fleet):
        n = sts[r]["n"]
        pr = {k: (v[r:r + 1] if np.ndim(v) == 2 else v[off:off + n]) for k, v in p.items()}
        one = build([name], flags, pr)
        i1, o1 = one.input(), one.output()
        fill(one, i1, [sts[r]], pr)
        one.step(inputs=i1, outputs=o1)
        np.testing.assert_array_equal(out.joint_f[off:off + n], o1.joint_f)
        off += n


def test_wrench_only_axes_pass_the_commanded_wrench():
    """Motion off on every axis, wrench FF on every axis, no gravity: tau = J^T F_des exactly."""
    rng = np.random.default_rng(3)
    sts = states(["ur5e"], rng)
    ctrl = ControllerOperationalSpaceModelFree(
        controlled_dofs_per_robot=[6], motion_stiffness=100.0, motion_damping=10.0, use_gravity_compensation=False,
        use_wrench_feedforward=True, motion_selection_axes=np.zeros(6), wrench_selection_axes=np.ones(6),
        linear_selection_frame_operational=random_quat(rng), angular_selection_frame_operational=random_quat(rng))
    inp, out = ctrl.input(), ctrl.output()
    inp.tool_pose_world[:] = sts[0]["pose"]
    inp.jacobian_tool_world[:] = sts[0]["J"]
    inp.mass_matrix[:] = sts[0]["M"]
    inp.desired_wrench_world[:] = [1.0, -2.0, 3.0, 0.1, 0.2, -0.3]
    ctrl.step(inputs=inp, outputs=out)
    assert_close(out.joint_f, sts[0]["J"].T @ inp.desired_wrench_world[0])


# ------------------------------------------------------------------ Lambda and the null space
@pytest.mark.parametrize("name", ["iiwa14", "ur5e"])
@pytest.mark.parametrize("partial", [False, True])
def test_lambda_equals_its_definition(name, partial):
    """Unit task accelerations through the pose error recover Lambda's columns from tau = J^T Lambda e_k;
    they equal (J M^-1 J^T)^-1 (block-wise for partial decoupling)."""
    rng = np.random.default_rng(11)
    s = states([name], rng)[0]
    J, M = s["J"], s["M"]
    delta = 1e-3
    cols = []
    for k in range(6):
        kp = np.zeros(6)
        kp[k] = 1.0 / delta
        des = s["pose"].copy()
        if k < 3:
            des[k] += delta
        else:
            axis = np.eye(3)[k - 3]
            des[3:] = quat_mul(np.concatenate([np.sin(delta / 2) * axis, [np.cos(delta / 2)]]), s["pose"][3:])
        ctrl = ControllerOperationalSpaceModelFree(controlled_dofs_per_robot=[s["n"]], motion_stiffness=kp,
                                                   motion_damping=0.0, use_gravity_compensation=False,
                                                   use_partial_inertia_decoupling=partial)
        inp, out = ctrl.input(), ctrl.output()
        inp.tool_pose_world[0] = s["pose"]
        inp.jacobian_tool_world[0] = J
        inp.mass_matrix[0] = M
        inp.desired_tool_pose_operational[0] = des
        ctrl.step(inputs=inp, outputs=out)
        cols.append(np.linalg.lstsq(J.T, out.joint_f, rcond=None)[0])
    Lam = np.array(cols).T
    A = J @ np.linalg.solve(M, J.T)
    if partial:
        expect = np.zeros((6, 6))
        expect[:3, :3] = np.linalg.inv(A[:3, :3])
        expect[3:, 3:] = np.linalg.inv(A[3:, 3:])
    else:
        expect = np.linalg.inv(A)
    np.testing.assert_allclose(Lam, expect, rtol=0, atol=1e-8 * np.max(np.abs(expect)))
    np.testing.assert_allclose(expect, task_inertia(J, M, partial), rtol=1e-9, atol=1e-12)


def _tool_placement(model, data, fid, q):
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[fid].copy()


@pytest.mark.parametrize("decoupling", [True, False], ids=["dynamically_consistent", "moore_penrose"])
def test_null_space_motion_does_not_move_the_task_point(decoupling):
    """The null-space torque's motion (acceleration M^-1 N^T tau_0 for the dynamically consistent
    projector, N^T tau_0 itself for the kinematic one) leaves the tool pose unchanged to first
    order: finite differences of the forward kinematics, against a generic joint direction."""
    rng = np.random.default_rng(5)
    model, data, fid, _ = robot("iiwa14")
    for trial in range(3):
        sts = states(["iiwa14"], rng)
        s = sts[0]
        p = case_params(sts, rng)
        with_ns = build(["iiwa14"], dict(ns=True, dec=decoupling, grav=False), p)
        without = build(["iiwa14"], dict(ns=False, dec=decoupling, grav=False), p)
        taus = []
        for ctrl in (with_ns, without):
            inp, out = ctrl.input(), ctrl.output()
            fill(ctrl, inp, sts, p)
            ctrl.step(inputs=inp, outputs=out)
            taus.append(out.joint_f.copy())
        tau_null = taus[0] - taus[1]
        assert np.linalg.norm(tau_null) > 1e-3  # the posture task does act
        d = np.linalg.solve(s["M"], tau_null) if decoupling else tau_null
        d /= np.linalg.norm(d)
        generic = rng.normal(size=7)
        generic /= np.linalg.norm(generic)
        T0 = _tool_placement(model, data, fid, s["q"])
        for eps in (1e-4, 1e-5):
            moved = pin.log6(T0.inverse() * _tool_placement(model, data, fid, s["q"] + eps * d)).vector
            other = pin.log6(T0.inverse() * _tool_placement(model, data, fid, s["q"] + eps * generic)).vector
            # First-order motion would be ~eps (the generic direction); the null space gives O(eps^2).
            assert np.linalg.norm(other) > 0.05 * eps
            assert np.linalg.norm(moved) < 20 * eps * eps, (eps, np.linalg.norm(moved))


# ------------------------------------------------------------------ model-based variant
def test_model_based_equals_model_free_fed_by_pinocchio():
    rng = np.random.default_rng(21)
    fleet = ["iiwa14", "ur5e", "iiwa14"]
    flags = dict(ff=True, fb=True)
    for trial in range(3):
        sts = states(fleet, rng)
        p = case_params(sts, rng, rotated_sel=True)
        mf, mb = build(fleet, flags, p), build(fleet, flags, p, model_based=True)
        i1, o1 = mf.input(), mf.output()
        i2, o2 = mb.input(), mb.output()
        fill(mf, i1, sts, p)
        fill(mb, i2, sts, p)
        for name in ("tool_pose_world", "tool_twist_world", "jacobian_tool_world", "mass_matrix", "gravity_force"):
            assert getattr(i2, name) is None
        mf.step(inputs=i1, outputs=o1)
        mb.step(inputs=i2, outputs=o2)
        assert_close(o2.joint_f, o1.joint_f)
        k = mb.kinematics(i2.joint_q, i2.joint_qd)
        for r, s in enumerate(sts):
            n = s["n"]
            np.testing.assert_allclose(k["tool_pose_world"][r, :3], s["pose"][:3], atol=1e-12)
            np.testing.assert_allclose(quat_to_R(k["tool_pose_world"][r, 3:]), quat_to_R(s["pose"][3:]), atol=1e-12)
            np.testing.assert_allclose(k["tool_twist_world"][r], s["twist"], atol=1e-12)
            np.testing.assert_allclose(k["jacobian_tool_world"][r, :, :n], s["J"], atol=1e-12)
            np.testing.assert_allclose(k["mass_matrix"][r, :n, :n], s["M"], atol=1e-12)
        np.testing.assert_allclose(k["gravity_force"], np.concatenate([s["g"] for s in sts]), atol=1e-10)


def test_model_based_null_space_fleet():
    rng = np.random.default_rng(22)
    fleet = ["iiwa14", "fr3"]
    flags = dict(ns=True, ff=True)
    sts = states(fleet, rng)
    p = case_params(sts, rng, rotated_sel=True)
    mb = build(fleet, flags, p, baked=False, model_based=True)
    inp, out = mb.input(), mb.output()
    fill(mb, inp, sts, p)
    mb.step(inputs=inp, outputs=out)
    assert_close(out.joint_f, reference(sts, p, flags))


# ------------------------------------------------------------------ the structs and bad input
def test_struct_fields_follow_the_features():
    ctrl = ControllerOperationalSpaceModelFree(controlled_dofs_per_robot=[7, 6], motion_stiffness=1.0,
                                               motion_damping=1.0, use_inertia_decoupling=False,
                                               use_gravity_compensation=False)
    inp = ctrl.input()
    present = {f for f in FIELDS if getattr(inp, f) is not None}
    assert present == {"tool_pose_world", "tool_twist_world", "jacobian_tool_world",
                       "desired_tool_pose_operational", "desired_twist_operational"}
    assert inp.tool_pose_world.shape == (2, 7) and np.all(inp.tool_pose_world[:, 6] == 1.0)
    with pytest.raises(AttributeError):
        inp.not_a_field = 1
    assert tuple(gato._core.OscController({"dofs": [6], "inertia_decoupling": False}).field_names) == FIELDS


def _simple(**kw):
    args = dict(controlled_dofs_per_robot=[7, 6], motion_stiffness=100.0, motion_damping=20.0)
    args.update(kw)
    return ControllerOperationalSpaceModelFree(**args)


def _filled(ctrl, names=("iiwa14", "ur5e"), seed=0):
    rng = np.random.default_rng(seed)
    sts = states(list(names), rng)
    p = case_params(sts, rng)
    inp = ctrl.input()
    fill(ctrl, inp, sts, p)
    return inp, ctrl.output()


@pytest.mark.parametrize("field,bad,msg", [
    ("tool_pose_world", np.zeros((2, 6)), r"tool_pose_world: expected shape \(2, 7\), got \(2, 6\)"),
    ("jacobian_tool_world", np.zeros((2, 6, 6)), r"jacobian_tool_world: expected shape \(2, 6, 7\), got \(2, 6, 6\)"),
    ("mass_matrix", np.zeros((2, 6, 6)), r"mass_matrix: expected shape \(2, 7, 7\), got \(2, 6, 6\)"),
    ("gravity_force", np.zeros(14), r"gravity_force: expected shape \(13,\), got \(14,\)"),
    ("tool_twist_world", [[0.0] * 6] * 2, r"tool_twist_world: expected a host numpy.ndarray \(device 'cpu'\), got list"),
    ("desired_twist_operational", np.zeros((2, 6), np.float32),
     r"desired_twist_operational: expected a C-contiguous float64 array, got float32"),
    ("tool_twist_world", np.zeros((6, 2)).T, r"tool_twist_world: expected a C-contiguous float64 array"),
    ("desired_wrench_world", np.zeros((2, 6)), r"desired_wrench_world: must stay None"),
    ("joint_q", np.zeros(13), r"joint_q: must stay None"),
])
def test_bad_field_raises_naming_it(field, bad, msg):
    ctrl = _simple()
    inp, out = _filled(ctrl)
    setattr(inp, field, bad)
    with pytest.raises(ValueError, match=msg):
        ctrl.step(inputs=inp, outputs=out)


@pytest.mark.parametrize("field,index,msg", [
    ("jacobian_tool_world", (1, 2, 3), r"jacobian_tool_world: robot 1: contains NaN or Inf"),
    ("mass_matrix", (0, 6, 6), r"mass_matrix: robot 0: contains NaN or Inf"),
    ("tool_pose_world", (1, 0), r"tool_pose_world: robot 1: contains NaN or Inf"),
    ("gravity_force", (8,), r"gravity_force: robot 1: contains NaN or Inf"),
    ("desired_tool_pose_operational", (0, 4), r"desired_tool_pose_operational: robot 0: contains NaN or Inf"),
    ("tool_twist_world", (0, 5), r"tool_twist_world: robot 0: contains NaN or Inf"),
])
def test_nan_raises_naming_field_and_robot(field, index, msg):
    ctrl = _simple()
    inp, out = _filled(ctrl)
    getattr(inp, field)[index] = np.nan
    with pytest.raises(ValueError, match=msg):
        ctrl.step(inputs=inp, outputs=out)


def test_nan_in_fields_read_from_the_inputs_and_model_inputs():
    ctrl = _simple(motion_stiffness=None, use_wrench_feedback=True, wrench_selection_axes=[0, 0, 1, 0, 0, 0],
                   linear_selection_frame_operational=None)
    inp, out = _filled(ctrl)
    inp.motion_stiffness[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"motion_stiffness: robot 1: contains NaN or Inf"):
        ctrl.step(inputs=inp, outputs=out)
    inp, out = _filled(ctrl)
    inp.measured_wrench_world[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"measured_wrench_world: robot 0: contains NaN or Inf"):
        ctrl.step(inputs=inp, outputs=out)
    inp, out = _filled(ctrl)
    inp.linear_selection_frame_operational[1] = 0.0
    with pytest.raises(ValueError, match=r"linear_selection_frame_operational: robot 1: quaternion of zero norm"):
        ctrl.step(inputs=inp, outputs=out)
    mb = ControllerOperationalSpace(robots=["iiwa14"], motion_stiffness=1.0, motion_damping=1.0)
    inp, out = mb.input(), mb.output()
    inp.joint_qd[3] = np.nan
    with pytest.raises(ValueError, match=r"joint_qd: contains NaN or Inf \(DOF 3\)"):
        mb.step(inputs=inp, outputs=out)
    inp.joint_qd[3] = 0.0
    inp.joint_q = np.zeros(6)
    with pytest.raises(ValueError, match=r"joint_q: expected shape \(7,\), got \(6,\)"):
        mb.step(inputs=inp, outputs=out)


def test_singular_inputs_raise():
    ctrl = _simple()
    inp, out = _filled(ctrl)
    inp.mass_matrix[1, :6, :6] = -np.eye(6)
    with pytest.raises(ValueError, match=r"mass_matrix: robot 1: mass matrix is not positive definite"):
        ctrl.step(inputs=inp, outputs=out)
    inp, out = _filled(ctrl)
    inp.jacobian_tool_world[0, 5, :] = 0.0  # no DOF turns the tool about z: Lambda does not exist
    with pytest.raises(ValueError, match=r"jacobian_tool_world: robot 0: .*singular"):
        ctrl.step(inputs=inp, outputs=out)


def test_bad_output_and_struct_types():
    ctrl = _simple()
    inp, out = _filled(ctrl)
    out.joint_f = np.zeros(12)
    with pytest.raises(ValueError, match=r"joint_f: expected a writable C-contiguous float64 numpy array of shape \(13,\)"):
        ctrl.step(inputs=inp, outputs=out)
    with pytest.raises(ValueError, match=r"inputs: expected the struct from input\(\)"):
        ctrl.step(inputs={"tool_pose_world": None}, outputs=ctrl.output())


@pytest.mark.parametrize("kw,msg", [
    (dict(controlled_dofs_per_robot=[7, 5]), r"controlled_dofs_per_robot: \[7, 5\]: use_inertia_decoupling needs"),
    (dict(controlled_dofs_per_robot=[7, 0], use_inertia_decoupling=False), r"every entry must be positive"),
    (dict(controlled_dofs_per_robot=[7.0, 6.0]), r"controlled_dofs_per_robot: expected a non-empty 1-D sequence of ints"),
    (dict(use_null_space_control=True), r"controlled_dofs_per_robot: \[7, 6\]: use_null_space_control needs every "
                                        r"robot to have more than 6 DOFs"),
    (dict(motion_stiffness=np.ones(5)), r"motion_stiffness: expected a scalar, shape \(6,\) or \(2, 6\), got shape \(5,\)"),
    (dict(motion_damping=np.ones((3, 6))), r"motion_damping: .*got shape \(3, 6\)"),
    (dict(operational_frame_pose_world=np.zeros(7)), r"operational_frame_pose_world: quaternion of zero norm"),
    (dict(wrench_stiffness=1.0), r"wrench_stiffness: only used with wrench control"),
    (dict(motion_selection_axes=np.ones(6)), r"motion_selection_axes: only used with wrench control"),
    (dict(linear_selection_frame_operational=[0, 0, 1, 0]),
     r"linear_selection_frame_operational: must stay at the identity default without wrench control"),
    (dict(use_wrench_feedforward=True), r"wrench_selection_axes: required when wrench control is enabled"),
    (dict(use_wrench_feedforward=True, wrench_selection_axes=np.ones(6), wrench_stiffness=1.0),
     r"wrench_stiffness: only used with use_wrench_feedback=True"),
    (dict(use_partial_inertia_decoupling=True, use_inertia_decoupling=False),
     r"use_partial_inertia_decoupling: only meaningful with use_inertia_decoupling=True"),
    (dict(null_space_stiffness=1.0), r"null_space_stiffness: only used with use_null_space_control=True"),
    (dict(device="cuda:0"), r"device: only the host"),
    (dict(requires_grad=True), r"requires_grad"),
    (dict(motion_stiffness=[np.nan] * 6), r"motion_stiffness: contains NaN or Inf"),
])
def test_bad_construction_raises(kw, msg):
    with pytest.raises(ValueError, match=msg):
        _simple(**kw)


def test_model_based_bad_construction():
    with pytest.raises(ValueError, match=r"robots: 'nope' is neither a registered robot nor a URDF file"):
        ControllerOperationalSpace(robots=["iiwa14", "nope"], motion_stiffness=1.0, motion_damping=1.0)
    with pytest.raises(ValueError, match=r"robots: 'go2' has a floating base"):
        ControllerOperationalSpace(robots=["go2"], motion_stiffness=1.0, motion_damping=1.0)
    with pytest.raises(ValueError, match=r"tool_frames: robot 0: frame 'nope' is not in"):
        ControllerOperationalSpace(robots=["iiwa14"], tool_frames=["nope"], motion_stiffness=1.0, motion_damping=1.0)
    with pytest.raises(ValueError, match=r"use_null_space_control needs every robot to have more than 6 DOFs"):
        ControllerOperationalSpace(robots=["iiwa14", "ur5e"], motion_stiffness=1.0, motion_damping=1.0,
                                   use_null_space_control=True)


# ------------------------------------------------------------------ allocation-free C++ step
def test_cpp_step_allocates_nothing_in_10k_calls(tmp_path):
    """A C++ consumer of find_package(gato_core) runs 10^4 OscKinematics::compute() +
    OscBatch::step() calls ([7, 6, 7] with wrench control; [7, 7] with both null-space projectors;
    NaN-stopped steps) while a malloc hook counts; its control allocation proves the hook counts."""
    import subprocess

    from conftest import build_core_consumer

    exe = build_core_consumer("osc_alloc", tmp_path / "build")
    args = [str(gato.robot_urdf("iiwa14")), gato.robot_info("iiwa14")["ee_frame"],
            str(gato.robot_urdf("ur5e")), gato.robot_info("ur5e")["ee_frame"]]
    run = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    out = dict(line.split("=", 1) for line in run.stdout.split())
    assert int(out["control_allocs"]) >= 1, "the malloc hook does not count: the check would be meaningless"
    assert int(out["steps"]) == 10000 and int(out["nan_stops"]) == 104 and int(out["ok"]) == 9896
    assert int(out["step_allocs"]) == 0 and int(out["step_frees"]) == 0, run.stdout
    assert out["finite"] == "1"
