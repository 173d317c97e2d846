"""Model errors in the simulated worlds: ``mass_scale={URDF link: factor}`` in
gato.worlds.MuJoCoWorld and PinocchioWorld scales that link's mass and rotational
inertia (COM unchanged) in the world's model only.

Checked through the public world API against an independent prediction: pinocchio's
``aba`` on the nominal URDF model with that joint's spatial inertia edited directly
(pin.Inertia(f*m, c, f*I_c)), which is a different mechanism from both worlds' (a
MuJoCo MjSpec body edit; an edited URDF text for the pinocchio world).
"""
import math

import numpy as np
import pytest

import gato
from gato.worlds import MuJoCoWorld, PinocchioWorld

pin = pytest.importorskip("pinocchio")

URDF = str(gato.robot_urdf("iiwa14"))
LINK, FACTOR = "L4", 1.2
Q = np.array([0.3, 0.5, -0.2, -1.2, 0.4, 0.6, 0.1])
DQ = np.array([0.2, -0.3, 0.1, 0.4, -0.2, 0.3, 0.5])


def nominal_model():
    return pin.buildModelFromUrdf(URDF)


def scaled_model(link=LINK, f=FACTOR):
    """The nominal model with ``link``'s spatial inertia multiplied by f (pinocchio, direct edit)."""
    m = nominal_model()
    fid = m.getFrameId(link)
    j = m.frames[fid].parentJoint
    # L4 is the only body on its joint and its frame is the joint frame: the joint inertia is the link's
    assert m.frames[fid].placement.isIdentity()
    I0 = m.inertias[j]
    m.inertias[j] = pin.Inertia(f * I0.mass, I0.lever.copy(), f * I0.inertia)
    return m


def aba(model, q, dq, u):
    return pin.aba(model, model.createData(), q, dq, u).copy()


def gravity(model, q):
    return pin.rnea(model, model.createData(), q, np.zeros(model.nv), np.zeros(model.nv)).copy()


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


@pytest.fixture(scope="module")
def expected():
    nom, sc = nominal_model(), scaled_model()
    u = gravity(nom, Q)                               # the nominal model's holding torque
    return dict(u=u, nom_static=aba(nom, Q, np.zeros(7), u), sc_static=aba(sc, Q, np.zeros(7), u),
                nom_moving=aba(nom, Q, DQ, u), sc_moving=aba(sc, Q, DQ, u), g_sc=gravity(sc, Q))


def test_prediction_is_a_real_difference(expected):
    e = expected
    assert np.max(np.abs(e["nom_static"])) < 1e-9            # nominal gravity torque holds the nominal model
    assert np.max(np.abs(e["sc_static"])) > 1e-2             # a 20 % heavier L4 sags: rad/s^2, not noise
    assert np.max(np.abs(e["g_sc"] - e["u"])) > 0.5          # holding it needs > 0.5 N*m more somewhere


@pytest.mark.parametrize("make", [
    lambda **kw: MuJoCoWorld(URDF, timestep=0.001, **kw),
    lambda **kw: PinocchioWorld(URDF, timestep=0.001, **kw),
], ids=["mujoco", "pinocchio"])
def test_scaled_link_matches_pinocchio_prediction(make, expected):
    e = expected
    nominal, scaled = make(), make(mass_scale={LINK: FACTOR})
    # static pose under the nominal gravity torque: the nominal world holds, the scaled one sags as predicted
    a_nom = nominal.qdd(Q, np.zeros(7), e["u"])
    a_sc = scaled.qdd(Q, np.zeros(7), e["u"])
    assert np.max(np.abs(a_nom)) < 1e-6
    assert rel(a_sc, e["sc_static"]) < 1e-6, (a_sc, e["sc_static"])
    # moving (Coriolis / centrifugal terms scale too)
    assert rel(scaled.qdd(Q, DQ, e["u"]), e["sc_moving"]) < 1e-6
    assert rel(nominal.qdd(Q, DQ, e["u"]), e["nom_moving"]) < 1e-6
    # the scaled model's own gravity torque holds the scaled world
    assert np.max(np.abs(scaled.qdd(Q, np.zeros(7), e["g_sc"]))) < 1e-6
    # one 1 ms step from rest under the nominal holding torque: dq = qdd * dt (to first order)
    q1, dq1 = scaled.step(Q, np.zeros(7), e["u"], 0.001)
    assert rel(dq1 / 0.001, e["sc_static"]) < 1e-2
    _, dq1n = nominal.step(Q, np.zeros(7), e["u"], 0.001)
    assert np.max(np.abs(dq1n)) < 1e-8
    assert scaled.params["mass_scale"] == {LINK: FACTOR} and "mass_scale" not in nominal.params


@pytest.mark.parametrize("cls", [MuJoCoWorld, PinocchioWorld], ids=["mujoco", "pinocchio"])
def test_factor_one_and_empty_are_the_nominal_world(cls):
    kw = dict(timestep=0.001)
    u = np.array([1.0, -2.0, 3.0, -1.0, 0.5, 0.2, -0.1])
    ref = cls(URDF, **kw).qdd(Q, DQ, u)
    assert np.array_equal(cls(URDF, mass_scale={LINK: 1.0}, **kw).qdd(Q, DQ, u), ref)
    assert np.array_equal(cls(URDF, mass_scale={}, **kw).qdd(Q, DQ, u), ref)


@pytest.mark.parametrize("cls", [MuJoCoWorld, PinocchioWorld], ids=["mujoco", "pinocchio"])
def test_two_links_scaled_at_once(cls):
    m = nominal_model()
    for link, f in (("L2", 0.8), ("L6", 1.5)):
        j = m.frames[m.getFrameId(link)].parentJoint
        I0 = m.inertias[j]
        m.inertias[j] = pin.Inertia(f * I0.mass, I0.lever.copy(), f * I0.inertia)
    u = gravity(nominal_model(), Q)
    w = cls(URDF, timestep=0.001, mass_scale={"L2": 0.8, "L6": 1.5})
    assert rel(w.qdd(Q, DQ, u), aba(m, Q, DQ, u)) < 1e-6


@pytest.mark.parametrize("cls", [MuJoCoWorld, PinocchioWorld], ids=["mujoco", "pinocchio"])
def test_bad_mass_scale_errors(cls):
    links = "world, iiwa_base, L1, L2, L3, L4, L5, L6, L7, contact"
    with pytest.raises(ValueError) as ei:
        cls(URDF, mass_scale={"nope": 1.2})
    assert str(ei.value) == f"mass_scale: link 'nope' is not in iiwa14.urdf; its links are {links}"
    with pytest.raises(ValueError) as ei:
        cls(URDF, mass_scale={"world": 1.2})
    assert str(ei.value).startswith("mass_scale: link 'world' has no <inertial> mass in iiwa14.urdf")
    for bad in (0.0, -1.0, math.inf, math.nan, "1.2", True):
        with pytest.raises(ValueError) as ei:
            cls(URDF, mass_scale={LINK: bad})
        assert str(ei.value) == f"mass_scale: factor for link 'L4' must be a finite number > 0, got {bad!r}"
    with pytest.raises(ValueError, match=r"mass_scale: expected None or a dict"):
        cls(URDF, mass_scale=[("L4", 1.2)])


# ---------------------------------------------------------------- the simulation-world node's logic
@pytest.mark.parametrize("world", ["mujoco", "pinocchio"])
def test_sim_logic_passes_link_mass_scale_to_the_world(world):
    sl = pytest.importorskip("gato_ros.sim_logic", reason="gato_ros not importable (source install/setup.bash)")
    nom = sl.SimWorldLogic({"robot": "iiwa14", "world": world})
    sc = sl.SimWorldLogic({"robot": "iiwa14", "world": world, "link_mass_scale": " L4:1.2 , L6:0.9"})
    assert sc.mass_scale == {"L4": 1.2, "L6": 0.9} and sc.world.mass_scale == {"L4": 1.2, "L6": 0.9}
    assert nom.world.mass_scale == {}
    u = gravity(nominal_model(), nom.q)        # the nominal holding torque, URDF order
    nom.advance(u)
    sc.advance(u)
    assert np.max(np.abs(nom.dq)) < 1e-6                     # the nominal world holds
    assert np.max(np.abs(sc.dq)) > 1e-4                      # the heavier L4 sags within one 10 ms period
    assert not np.array_equal(nom.joint_state().position, sc.joint_state().position)


def test_sim_logic_rejects_bad_link_mass_scale():
    sl = pytest.importorskip("gato_ros.sim_logic", reason="gato_ros not importable (source install/setup.bash)")
    links = "world, iiwa_base, L1, L2, L3, L4, L5, L6, L7, contact"
    cases = {
        "nope:1.2": f"link_mass_scale: link 'nope' is not in iiwa14.urdf; its links are {links}",
        "L4:x": "link_mass_scale: entry 'L4:x': factor 'x' is not a number",
        "L4:-1": "link_mass_scale: entry 'L4:-1': factor must be a finite number > 0, got -1",
        "L4:0": "link_mass_scale: entry 'L4:0': factor must be a finite number > 0, got 0",
        "L4:nan": "link_mass_scale: entry 'L4:nan': factor must be a finite number > 0, got nan",
        "L4": "link_mass_scale: entry 'L4' is not LINK:FACTOR (e.g. L4:1.2)",
        "L4:1.2,L4:1.1": "link_mass_scale: link 'L4' is given twice",
    }
    for world in ("mujoco", "pinocchio"):
        for text, msg in cases.items():
            with pytest.raises(ValueError) as ei:
                sl.SimWorldLogic({"robot": "iiwa14", "world": world, "link_mass_scale": text})
            assert str(ei.value) == msg, (world, text)
    assert sl.parse_link_mass_scale("") == {} and sl.parse_link_mass_scale(" , ") == {}
