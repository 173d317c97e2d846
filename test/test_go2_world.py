"""MuJoCoWorld(floating=True) on go2 (issue 34, the simulation side): the quadruped on the ground.

What is checked: the model MuJoCo builds from the unchanged go2 URDF (its repeated material
names stripped by the loader) is pinocchio's free-flyer model (sizes, joint order, masses,
forward dynamics); the state convention at the boundary (the contract's schema 2: quaternion
xyzw and base-frame twist here, MuJoCo's wxyz and world-frame linear velocity inside); the
ground contacts (a drop onto the ground: four loaded feet carrying m g); a joint PD holding the
standing pose (a world test, not the MPC acceptance); bad input refused by field name.
"""
import hashlib
import math

import numpy as np
import pytest

import gato
from gato.robots.mjcf import repeated_materials
from gato.worlds import MuJoCoWorld

mujoco = pytest.importorskip("mujoco")
pin = pytest.importorskip("pinocchio")

FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
DT = 0.001
# Joint PD of the standing tests: stiff enough that the static sag under m g / 4 per foot is a few mm.
KP, KD = 150.0, 2.0


def go2_urdf():
    return str(gato.robot_urdf("go2"))


@pytest.fixture(scope="module")
def world():
    return MuJoCoWorld(go2_urdf(), floating=True)


@pytest.fixture(scope="module")
def pin_go2():
    model = pin.buildModelFromUrdf(go2_urdf(), pin.JointModelFreeFlyer())
    return model, model.createData()


def total_mass(world):
    return float(np.sum(world.model.body_mass))


def rotated_q(model, rng, rpy=(0.4, -0.3, 1.1)):
    q = pin.neutral(model)
    q[:3] = [0.1, -0.2, 0.8]
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rpy)).coeffs()  # pinocchio's coeffs(): x, y, z, w
    q[7:] = np.array(gato.robot_info("go2")["q_stand"]) + rng.uniform(-0.2, 0.2, 12)
    return q


def pd_run(world, q, dq, seconds, q_ref, observe=None):
    """Joint PD on the actuated joints (torques clamped to the URDF effort), base unactuated."""
    effort = np.array([23.7, 23.7, 45.43] * 4)
    for k in range(int(round(seconds / DT))):
        u = np.clip(KP * (q_ref - q[7:]) - KD * dq[6:], -effort, effort)
        q, dq = world.step(q, dq, u, DT)
        if observe is not None:
            observe(k, q, dq)
    return q, dq


# ------------------------------------------------------------------ the model
def test_go2_loads_as_pinocchio_free_flyer_model(world, pin_go2):
    model, _ = pin_go2
    assert (world.nq, world.nv, world.n_actuated) == (19, 18, 12) == (model.nq, model.nv, model.nv - 6)
    assert world.joint_names == list(model.names)[2:]               # after universe and the free-flyer root
    assert abs(total_mass(world) - pin.computeTotalMass(model)) < 1e-9
    assert {"FL_foot", "RR_foot", "base"} <= set(world.bodies)
    # the loader's fix: the URDF repeats material names (MuJoCo refuses those); the file is the registered one
    assert repeated_materials(go2_urdf())
    with open(go2_urdf(), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == gato.robot_info("go2")["urdf_sha256"]
    assert world.params["ground"] == {"z": 0.0, "friction": 0.8}
    assert "ground" not in MuJoCoWorld(str(gato.robot_urdf("indy7"))).params  # arm stamps unchanged


def test_go2_forward_dynamics_equal_pinocchio_aba(pin_go2):
    """Contact-free (ground=False), base at rest, rotated: MuJoCo's qdd = pinocchio's aba (schema 2)."""
    model, data = pin_go2
    w = MuJoCoWorld(go2_urdf(), floating=True, ground=False)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = rotated_q(model, rng, rpy=rng.uniform(-1, 1, 3))
        v = np.concatenate([np.zeros(6), rng.normal(size=12)])
        u = np.concatenate([np.zeros(6), rng.normal(size=12) * 5])
        a = pin.aba(model, data, q, v, u)
        np.testing.assert_allclose(w.qdd(q, v, u), a, rtol=0, atol=1e-8 * np.max(np.abs(a)))
        np.testing.assert_allclose(w.qdd(q, v, u[6:]), a, rtol=0, atol=1e-8 * np.max(np.abs(a)))  # actuated u


def test_go2_forward_dynamics_equal_pinocchio_aba_with_the_base_moving(pin_go2):
    """Contact-free, the base translating and turning: MuJoCo's free-joint acceleration (world frame, of
    the origin) converted to pinocchio's (d/dt of the base-axes velocity: R^T p'' - w x v); without the
    w x v term the error was 5e-4 to 1e-3 relative (measured)."""
    model, data = pin_go2
    w = MuJoCoWorld(go2_urdf(), floating=True, ground=False)
    rng = np.random.default_rng(11)
    for _ in range(3):
        q = rotated_q(model, rng, rpy=rng.uniform(-1, 1, 3))
        v = rng.uniform(-1.5, 1.5, 18)                                   # base rows moving too
        u = np.concatenate([np.zeros(6), rng.normal(size=12) * 5])
        a = pin.aba(model, data, q, v, u)
        np.testing.assert_allclose(w.qdd(q, v, u), a, rtol=0, atol=1e-10 * np.max(np.abs(a)))


# ---------------------------------------------------------- state convention
def test_quaternion_xyzw_round_trips_through_mujoco_wxyz(pin_go2):
    model, data = pin_go2
    w = MuJoCoWorld(go2_urdf(), floating=True, ground=False)
    rng = np.random.default_rng(4)
    q = rotated_q(model, rng)
    R = pin.rpy.rpyToMatrix(0.4, -0.3, 1.1)
    # MuJoCo's qpos holds w, x, y, z; its base body has the rotation the xyzw quaternion means
    qm, _, _ = w._to_mj(q, np.zeros(18), np.zeros(18))
    np.testing.assert_array_equal(qm[3:7], [q[6], q[3], q[4], q[5]])
    w.qdd(q, np.zeros(18), np.zeros(18))
    np.testing.assert_allclose(w.data.xmat[w.model.body("base").id].reshape(3, 3), R, atol=1e-12)
    pin.forwardKinematics(model, data, q)
    np.testing.assert_allclose(data.oMi[1].rotation, R, atol=1e-12)
    # at rest in free fall nothing rotates: the quaternion comes back as given (x, y, z, w)
    q1, v1 = w.step(q, np.zeros(18), np.zeros(12), DT)
    np.testing.assert_allclose(q1[3:7], q[3:7], rtol=0, atol=1e-12)
    np.testing.assert_allclose(q1[7:], q[7:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(v1[:3], R.T @ [0, 0, -9.81 * DT], atol=1e-12)   # gravity, in the base frame
    # a spinning, moving base: the twist is the base frame's (pinocchio's), so one step moves the base
    # as pin.integrate(q, dt v) to O(dt^2) (a wrong quaternion order or twist frame is O(dt |v|) = 1e-3)
    v = np.concatenate([[0.5, -0.3, 0.2], [1.0, -0.7, 0.4], np.zeros(12)])
    q2, _ = w.step(q, v, np.zeros(12), DT)
    dx = pin.difference(model, pin.integrate(model, q, DT * v), q2)
    assert np.max(np.abs(dx[:6])) < 2e-5                            # measured 8.7e-6
    b = w.base_state(q, v)
    np.testing.assert_allclose(b["linear_world"], R @ v[:3], atol=1e-14)
    np.testing.assert_allclose(b["angular_world"], R @ v[3:6], atol=1e-14)
    np.testing.assert_array_equal(b["quat_xyzw"], q[3:7])
    np.testing.assert_allclose(b["R"], R, atol=1e-12)
    assert abs(b["tilt"] - math.acos(R[2, 2])) < 1e-12
    # the world frame velocity is what MuJoCo holds
    _, vm, _ = w._to_mj(q, v, np.zeros(18))
    np.testing.assert_allclose(vm[:3], R @ v[:3], atol=1e-14)
    np.testing.assert_allclose(vm[3:6], v[3:6], atol=0)             # MuJoCo's free-joint omega is local too


# ------------------------------------------------------------------ contacts
def test_standing_and_crouched_poses_touch_the_ground(world):
    qs, dqs = world.reset("stand")
    qc, _ = world.reset("crouch")
    assert dqs.shape == (18,) and not dqs.any() and world.time == 0.0
    np.testing.assert_array_equal(qs[3:7], [0, 0, 0, 1])
    assert 0.25 < qs[2] < 0.32 and 0.15 < qc[2] < qs[2] - 0.05      # base heights [m]
    m, d = world.model, mujoco.MjData(world.model)
    ground = m.geom("ground").id
    foot_geoms = {g for g in range(m.ngeom) if m.body(int(m.geom_bodyid[g])).name in FEET}
    for q in (qs, qc):
        d.qpos[:] = world._to_mj(q, dqs, dqs)[0]
        mujoco.mj_kinematics(m, d)
        gap = {g: mujoco.mj_geomDistance(m, d, ground, g, 10.0, None) for g in range(m.ngeom) if g != ground}
        assert len(foot_geoms) == 4 and max(gap[g] for g in foot_geoms) < 1e-9   # the four feet touch
        assert min(gap[g] for g in gap if g not in foot_geoms) > 0.01            # nothing else is near
        heights = [world.body_position(q, f)[2] for f in FEET]
        assert max(heights) - min(heights) < 1e-12 and abs(heights[0] - 0.022) < 0.002  # sphere r 22 mm
    q_up, _ = world.reset("stand", clearance=0.05)
    assert abs(q_up[2] - qs[2] - 0.05) < 1e-12
    np.testing.assert_array_equal(world.reset(np.array(gato.robot_info("go2")["q_stand"]))[0], qs)


def test_passive_drop_the_ground_carries_the_weight(world):
    """Gravity only, no torque: go2 folds onto its belly; at rest the ground's normal forces on the
    bodies in contact (the four feet among them) sum to m g."""
    q, dq = world.reset("crouch", clearance=0.02)
    for _ in range(2500):
        q, dq = world.step(q, dq, np.zeros(12), DT)
    mg = total_mass(world) * 9.81
    by_body = world.last_contact["fn_by_body"]
    assert abs(sum(by_body.values()) - mg) < 0.01 * mg              # measured 1e-7 relative
    assert all(world.normal_force(f) > 0 for f in FEET) and by_body["base"] > 0.2 * mg
    assert q[2] < 0.1 and np.max(np.abs(dq)) < 0.01                 # lying, at rest


def test_drop_onto_the_ground_loads_all_four_feet_with_the_weight(world):
    """Dropped from 3 cm with the joints held by the PD (the base free): at rest the ground carries
    m g, all of it on the four feet."""
    q_ref = np.array(gato.robot_info("go2")["q_stand"])
    q, dq = world.reset("stand", clearance=0.03)
    fn_sum = []
    q, dq = pd_run(world, q, dq, 1.5, q_ref,
                   observe=lambda k, q, dq: fn_sum.append(sum(world.last_contact["fn_by_body"].values())))
    mg = total_mass(world) * 9.81
    assert fn_sum[0] == 0.0                                         # in the air at first
    assert set(world.last_contact["fn_by_body"]) == set(FEET)       # nothing but the feet touches
    loads = [world.normal_force(f) for f in FEET]
    assert min(loads) > 0.15 * mg                                   # each foot carries a share
    assert abs(sum(loads) - mg) < 0.03 * mg
    assert abs(np.mean(fn_sum[-200:]) - mg) < 0.01 * mg             # the last 0.2 s, averaged
    assert abs(world.last_contact["fn"] - sum(loads)) < 1e-9
    assert np.max(np.abs(dq)) < 0.05                                # at rest


def test_joint_pd_holds_the_standing_height_for_two_seconds(world):
    q_ref = np.array(gato.robot_info("go2")["q_stand"])
    q0, dq = world.reset("stand")
    feet0 = {f: world.body_position(q0, f) for f in FEET}
    heights, tilts = [], []

    def observe(k, q, dq):
        b = world.base_state(q, dq)
        heights.append(b["position"][2])
        tilts.append(b["tilt"])

    q, dq = pd_run(world, q0, dq, 2.0, q_ref, observe=observe)
    assert len(heights) == 2000 and abs(world.time - 2.0) < 1e-9
    assert np.max(np.abs(np.array(heights) - q0[2])) < 0.02         # every step within 2 cm
    assert np.max(tilts) < math.radians(2.0)
    assert all(world.normal_force(f) > 0 for f in FEET)
    for f in FEET:                                                  # no foot slides
        assert np.linalg.norm(world.body_position(q, f)[:2] - feet0[f][:2]) < 0.01


# ----------------------------------------------------------------- bad input
def test_bad_input_is_refused_with_the_field_named(world):
    q, dq = world.reset("stand")
    u = np.zeros(12)
    for args, field in (((q[:18], dq, u), "q"), ((q, dq[:17], u), "dq"), ((q, dq, np.zeros(11)), "u"),
                        ((np.r_[np.nan, q[1:]], dq, u), "q"), ((q, np.r_[dq[:-1], np.inf], u), "dq"),
                        ((q, dq, np.r_[u[:-1], np.nan]), "u"), ((np.r_[q[:6], 2.0, q[7:]], dq, u), "q")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            world.step(*args, DT)
    for call, field in ((lambda: world.normal_force("paw"), "body"), (lambda: world.body_position(q, "paw"), "body"),
                        (lambda: world.body_position(q[:18], "FL_foot"), "q"),
                        (lambda: world.reset("sit"), "pose"), (lambda: world.reset(np.zeros(11)), "pose"),
                        (lambda: world.reset(np.full(12, np.nan)), "pose"),
                        (lambda: world.standing_state("stand", clearance=-0.1), "clearance"),
                        (lambda: world.base_state(q, dq[:6]), "dq"),
                        (lambda: MuJoCoWorld(go2_urdf(), floating=True, ground={"mu": 1.0}), "ground"),
                        (lambda: MuJoCoWorld(go2_urdf(), floating=True, ground={"friction": -1}), "ground"),
                        (lambda: MuJoCoWorld(go2_urdf(), floating=True, ground=False).reset("stand"), "pose"),
                        (lambda: MuJoCoWorld(str(gato.robot_urdf("indy7"))).reset("stand"), "pose")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            call()


def test_the_solver_still_refuses_a_floating_base(tmp_path, monkeypatch):
    """The world is ready; the solver side of issue 34 is not: gato.build keeps its clear error."""
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="floating_base"):
        gato.build(go2_urdf(), floating_base=True)
