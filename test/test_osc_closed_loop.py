"""The operational-space controller closing the loop in MuJoCoWorld at 1 kHz (world.step):

- iiwa14 tracks the bringup's default figure-8 (gato_ros.params REFERENCE defaults: half-amplitudes
  0.1 m, the y-z plane, 4 s period, centred on the EE position at q_ready) within 5 mm mean error,
  and seeded figure-8 scenarios of gato.tasks it was not tuned on;
- a wrench-controlled axis presses the tool on the (frictionless) table with the commanded normal
  force (within 10 %) while the motion axes track a line on the surface; with friction, a static
  press holds the force.

Gains are fixed in this file (tuned on the default figure-8 and the 20 N press only).
"""
import math

import numpy as np
import pytest

import gato
from gato.osc import ControllerOperationalSpace
from gato.tasks import fig8_scenarios
from gato.worlds import MuJoCoWorld, probe_tip_drop

pytest.importorskip("mujoco")

DT = 0.001
KP = 900.0                 # [1/s^2] task stiffness (inertia decoupling on)
KD = 2.0 * math.sqrt(KP)   # [1/s] critical damping
KN, DN = 25.0, 10.0        # [1/s^2], [1/s] null-space posture gains

# gato_ros.params REFERENCE defaults (fig8_amplitude_x/z, fig8_theta, fig8_period_s), kept in sync
# by test_default_figure8_is_the_bringups below.
DEFAULT_FIG8 = dict(A_x=0.1, A_z=0.1, theta=math.pi / 2, period=4.0)


def fig8_point(t, A_x, A_z, theta, period, offset):
    """Position [m] and velocity [m/s] of gato.tasks.figure8 at time t [s]."""
    w = 2.0 * math.pi / period
    h = np.array([math.cos(theta), math.sin(theta), 0.0])
    z = np.array([0.0, 0.0, 1.0])
    p = offset + A_x * math.sin(w * t) * h + A_z * math.sin(2 * w * t) * z
    v = A_x * w * math.cos(w * t) * h + 2 * w * A_z * math.cos(2 * w * t) * z
    return p, v


def track_fig8(q0, params, periods=2.0):
    """Closed loop from rest at q0; the figure-8 centred on the EE position at q0 unless params has
    'offset'. Returns the EE position errors [m] at every 1 kHz step."""
    ctrl = ControllerOperationalSpace(robots=["iiwa14"], motion_stiffness=KP, motion_damping=KD,
                                      use_null_space_control=True, null_space_stiffness=KN, null_space_damping=DN)
    world = MuJoCoWorld(gato.robot_urdf("iiwa14"), timestep=DT)
    inp, out = ctrl.input(), ctrl.output()
    pose0 = ctrl.kinematics(q0, np.zeros(7))["tool_pose_world"][0]
    offset = np.asarray(params.get("offset", pose0[:3]), dtype=float)
    inp.desired_tool_pose_operational[0, 3:] = pose0[3:]  # hold the start orientation
    inp.joint_q_des_null[:] = q0
    q, dq = np.array(q0, dtype=float), np.zeros(7)
    errs = []
    for k in range(int(round(periods * params["period"] / DT))):
        p, v = fig8_point(k * DT, params["A_x"], params["A_z"], params["theta"], params["period"], offset)
        inp.joint_q[:] = q
        inp.joint_qd[:] = dq
        inp.desired_tool_pose_operational[0, :3] = p
        inp.desired_twist_operational[0, :3] = v
        ctrl.step(inputs=inp, outputs=out, dt=DT)
        errs.append(np.linalg.norm(ctrl.kinematics(q, dq)["tool_pose_world"][0, :3] - p))
        q, dq = world.step(q, dq, out.joint_f, DT)
    return np.array(errs)


def test_default_figure8_is_the_bringups():
    params = pytest.importorskip("gato_ros.params")
    d = {p.name: p.default for p in params.REFERENCE}
    assert (d["fig8_amplitude_x"], d["fig8_amplitude_z"], d["fig8_theta"], d["fig8_period_s"]) == (
        DEFAULT_FIG8["A_x"], DEFAULT_FIG8["A_z"], DEFAULT_FIG8["theta"], DEFAULT_FIG8["period"])


def test_iiwa14_default_figure8_within_5mm():
    q0 = np.array(gato.robot_info("iiwa14")["q_ready"])
    errs = track_fig8(q0, DEFAULT_FIG8)
    assert errs.mean() <= 5e-3, f"mean tracking error {errs.mean() * 1e3:.2f} mm"
    assert errs.max() <= 10e-3, f"max tracking error {errs.max() * 1e3:.2f} mm"


@pytest.mark.parametrize("seed", [101, 202])
def test_iiwa14_seeded_figure8_scenarios_within_5mm(seed):
    """Scenarios drawn by gato.tasks (amplitude, centre, plane, start pose; period at 40-80 % of the
    joint speed limits): not used for tuning."""
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    sc = fig8_scenarios(model, "iiwa14", 1, seed=seed, ratio_range=(0.4, 0.8))[0]
    errs = track_fig8(sc["q0"], sc["params"], periods=1.5)
    assert errs.mean() <= 5e-3, f"{sc['id']}: mean tracking error {errs.mean() * 1e3:.2f} mm"


# ------------------------------------------------------------------ pressing on the table
def press_and_slide(force, *, axis=0, amplitude=0.05, period=2.0, wrench_stiffness=0.5, friction=0.0,
                    duration=4.0):
    """iiwa14 presses its tool sphere on a table 1 cm below it with `force` [N] (world -z wrench
    axis: feedforward + feedback on the measured contact force), while the motion axes (x, y, all
    rotations) hold the start orientation and track a line of +-amplitude [m] along world `axis`
    (period [s], starting after 1 s). The table (and the tool) have sliding friction `friction`.

    Returns (normal force on the robot [N] per step, tangential tracking error [m] per step)."""
    name = "iiwa14"
    urdf = gato.robot_urdf(name)
    q0 = np.array(gato.robot_info(name)["q_ready"])
    # z is wrench-controlled; it keeps a velocity damping term (stiffness 0 on z) so the tool does
    # not bounce on the surface: motion and wrench selections need not partition the axes.
    ctrl = ControllerOperationalSpace(
        robots=[name], motion_stiffness=[KP, KP, 0.0, KP, KP, KP], motion_damping=[KD, KD, 40.0, KD, KD, KD],
        use_wrench_feedforward=True, use_wrench_feedback=True, motion_selection_axes=[1, 1, 1, 1, 1, 1],
        wrench_selection_axes=[0, 0, 1, 0, 0, 0], wrench_stiffness=wrench_stiffness, use_null_space_control=True,
        null_space_stiffness=KN, null_space_damping=DN)
    pose0 = ctrl.kinematics(q0, np.zeros(7))["tool_pose_world"][0]
    c = pose0[:3]
    table_z = c[2] - probe_tip_drop(urdf, q0, c) - 0.01
    world = MuJoCoWorld(urdf, plane=dict(z=table_z, pos_xy=tuple(c[:2]), size_xy=(0.3, 0.3), friction=friction),
                        timestep=DT)
    # MuJoCo uses the larger friction of the two geoms: the robot's geoms get the same coefficient.
    world.model.geom_friction[:, 0] = friction
    inp, out = ctrl.input(), ctrl.output()
    inp.joint_q_des_null[:] = q0
    inp.desired_wrench_world[0] = [0.0, 0.0, -force, 0.0, 0.0, 0.0]  # the tool pushes down on the table
    inp.desired_tool_pose_operational[0, 3:] = pose0[3:]
    e = np.eye(3)[axis]
    w = 2.0 * math.pi / period
    q, dq = q0.copy(), np.zeros(7)
    fn, err = [], []
    for k in range(int(round(duration / DT))):
        t = max(k * DT - 1.0, 0.0)
        p = c + amplitude * math.sin(w * t) * e
        inp.joint_q[:] = q
        inp.joint_qd[:] = dq
        inp.desired_tool_pose_operational[0, :3] = p
        inp.desired_twist_operational[0, :3] = (amplitude * w * math.cos(w * t) if k * DT > 1.0 else 0.0) * e
        # The contact wrench the tool applies on the table (world): minus the table's force on it.
        inp.measured_wrench_world[0] = [0.0, 0.0, -world.last_contact["fn"], 0.0, 0.0, 0.0]
        ctrl.step(inputs=inp, outputs=out, dt=DT)
        tool = ctrl.kinematics(q, dq)["tool_pose_world"][0, :3]
        err.append(np.linalg.norm((tool - p)[:2]))
        q, dq = world.step(q, dq, out.joint_f, DT)
        fn.append(world.last_contact["fn"])
    return np.array(fn), np.array(err)


def _window_means(x, n=10):
    return np.convolve(x, np.ones(n) / n, mode="valid")


@pytest.mark.parametrize("force,axis,amplitude,period,wrench_stiffness", [
    (20.0, 0, 0.05, 2.0, 0.5), (10.0, 1, 0.05, 2.0, 0.5), (30.0, 1, 0.05, 2.0, 0.3), (20.0, 0, 0.03, 1.0, 0.5)],
    ids=["20N-x", "10N-y", "30N-y-kw0.3", "20N-x-fast"])
def test_wrench_axis_holds_the_normal_force_while_the_motion_axes_track(force, axis, amplitude, period,
                                                                        wrench_stiffness):
    """Frictionless surface. While the line is tracked (from 1 s on; contact is made and settles
    before): every 50 ms average of the normal force within 10 % of the command and the mean within
    2 %; the tangential error under 2 mm mean. 20N-x is the tuned case; the others were not tuned
    on. (wrench_stiffness stays below 1: against a stiff contact sampled at the control rate the
    force loop has a pole at -wrench_stiffness; docs/osc.md.)"""
    fn, err = press_and_slide(force, axis=axis, amplitude=amplitude, period=period,
                              wrench_stiffness=wrench_stiffness)
    s = slice(1000, None)
    dev = np.abs(_window_means(fn[s], 50) - force) / force
    assert dev.max() <= 0.10, f"50 ms normal-force average off by {dev.max() * 100:.1f} %"
    assert abs(fn[s].mean() - force) <= 0.02 * force
    assert err[s].mean() <= 2e-3, f"tangential tracking error {err[s].mean() * 1e3:.2f} mm"


def test_static_press_with_friction_holds_the_normal_force():
    """With friction (mu = 1) and the motion axes holding their pose, the normal force settles at the
    command: every 10 ms average within 10 % after 0.5 s. (Sliding with friction is not covered:
    at mu >= 0.05 the sliding tool chatters on the surface in this world; docs/osc.md.)"""
    fn, err = press_and_slide(20.0, amplitude=0.0, friction=1.0, duration=2.0)
    dev = np.abs(_window_means(fn[500:], 10) - 20.0) / 20.0
    assert dev.max() <= 0.10, f"10 ms normal-force average off by {dev.max() * 100:.1f} %"
    assert err[500:].mean() <= 2e-3
