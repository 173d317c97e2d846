"""MjSim.build_coarse_spec (CoarseConfig), build_entity (Entity), build_contact_sensor (ContactSensor)
and compute_rays: RoboKit's examples with only the imports changed (MjWarpSim -> gato's MjSim),
then what they do beyond the examples, and bad input refused by name."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import CoarseConfig, MjSim, build_coarse_spec  # noqa: E402
from gato.sampling import MjSim as MjWarpSim  # noqa: E402  (the reference examples' name)

PAIRS = ('<mujoco><worldbody><body name="d"><freejoint/><geom name="a" size="0.1"/><geom size="0.1"/></body>'
         '<geom name="b" size="0.1" pos="1 0 0"/><geom name="c" size="0.1" pos="0 0 -0.21"/></worldbody>'
         '<contact><pair geom1="a" geom2="b"/><pair geom1="a" geom2="c"/></contact></mujoco>')


# ------------------------------------------------------------------ build_coarse_spec
def test_reference_build_coarse_spec_example():
    spec = mujoco.MjSpec.from_string(PAIRS)
    coarse = MjWarpSim.build_coarse_spec(spec, CoarseConfig(qpos_ref=np.array([[0, 0, 0, 1, 0, 0, 0]])))
    assert coarse.compile().npair == 1  # only a-c comes near
    config = CoarseConfig(collide="a|c|d", condim=1, condim_geoms="d", timestep=0.01, pyramidal=True)
    model = MjWarpSim.build_coarse_spec(spec, config).compile()
    assert (model.geom_contype.tolist(), model.geom_condim.tolist()) == ([0, 1, 1, 1], [3, 3, 3, 1])
    assert (model.opt.timestep, model.opt.cone) == (0.01, 0)
    config = CoarseConfig(min_timeconst=0.01, min_impedance_width=0.002)
    model = MjWarpSim.build_coarse_spec(spec, config).compile()
    assert (model.geom_solref[:, 0].tolist(), model.geom_solimp[:, 2].tolist()) == (
        [0.02, 0.02, 0.02, 0.02], [0.002, 0.002, 0.002, 0.002])
    config = CoarseConfig(iterations=2, ls_iterations=4, integrator="implicitfast")
    opt = MjWarpSim.build_coarse_spec(spec, config).option
    assert (opt.iterations, opt.ls_iterations, opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST) == (2, 4, True)


def test_coarse_spec_pairs_softening_and_the_original_untouched():
    spec = mujoco.MjSpec.from_string(PAIRS)
    # a second configuration with the body next to b keeps a-b; a-c stays near in the first row
    both = build_coarse_spec(spec, CoarseConfig(qpos_ref=[[0, 0, 0, 1, 0, 0, 0], [0.75, 0, 0, 1, 0, 0, 0]]))
    assert both.compile().npair == 2
    far = build_coarse_spec(spec, CoarseConfig(qpos_ref=[[0, 0, 0.5, 1, 0, 0, 0]], pair_distance=0.1))
    assert far.compile().npair == 0  # lifted 0.5 m: a-c 0.51 m apart, a-b 0.92 m
    near = build_coarse_spec(spec, CoarseConfig(qpos_ref=[[0, 0, 0.5, 1, 0, 0, 0]], pair_distance=0.6))
    assert near.compile().npair == 1
    # a geom that no longer collides takes its pairs with it
    kept = build_coarse_spec(spec, CoarseConfig(collide="a|b|d")).compile()  # c off: a-c goes
    assert kept.npair == 1 and {int(kept.pair_geom1[0]), int(kept.pair_geom2[0])} == {0, 2}  # b, a
    # a direct-stiffness solref (negative) is left alone; larger time constants too
    s2 = mujoco.MjSpec.from_string(PAIRS)
    s2.geoms[0].solref = [-1000.0, -10.0]
    s2.geoms[1].solref = [0.05, 1.0]
    m = build_coarse_spec(s2, CoarseConfig(min_timeconst=0.03)).compile()
    assert m.geom_solref[:, 0].tolist() == [-1000.0, 0.05, 0.03, 0.03]
    m0 = spec.compile()  # the input spec is unchanged
    assert m0.npair == 2 and m0.opt.timestep == 0.002 and m0.geom_contype.tolist() == [1, 1, 1, 1]


def test_coarse_config_refuses_bad_fields_by_name():
    for kw, field in ((dict(timestep=0), "timestep"), (dict(condim=2), "condim"), (dict(iterations=1.5), "iterations"),
                      (dict(collide="("), "collide"), (dict(integrator="rk2"), "integrator"),
                      (dict(pyramidal=1), "pyramidal"), (dict(qpos_ref=[[np.nan]]), "qpos_ref"),
                      (dict(condim_geoms="a"), "condim_geoms"), (dict(pair_distance=-1.0), "pair_distance"),
                      (dict(min_impedance_width=-0.1), "min_impedance_width")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            CoarseConfig(**kw)
    spec = mujoco.MjSpec.from_string(PAIRS)
    with pytest.raises(ValueError, match="^qpos_ref: expected \\(R, 7\\)"):
        build_coarse_spec(spec, CoarseConfig(qpos_ref=[[0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="^spec:"):
        build_coarse_spec(spec.compile(), CoarseConfig())
    with pytest.raises(ValueError, match="^config:"):
        build_coarse_spec(spec, {"timestep": 0.01})


# ------------------------------------------------------------------ build_entity
ROBOT = ('<mujoco><worldbody><body name="r/base" pos="0 0 .5"><freejoint name="r/root"/><geom size=".1"/>'
         '<body><joint name="r/a"/><geom size=".1"/></body></body></worldbody></mujoco>')


def test_reference_build_entity_example():
    xml = '<mujoco><worldbody><body name="r/base" pos="0 0 .5"><freejoint name="r/root"/><geom size=".1"/>'
    xml += '<body><joint name="r/a"/><geom size=".1"/></body></body></worldbody></mujoco>'
    robot = MjWarpSim(mujoco.MjModel.from_xml_string(xml), nworld=2).build_entity("r/")
    assert (robot.joint_names, robot.data.default_root_state[:3].tolist()) == (["a"], [0.0, 0.0, 0.5])


def test_entity_state_limits_and_writes():
    xml = ROBOT.replace('<joint name="r/a"/>', '<joint name="r/a" range="-1 0.6"/><joint name="r/b" type="slide"/>') \
        .replace("</worldbody>", '<body name="other"><joint name="j"/><geom size=".1"/></body></worldbody>')
    model = mujoco.MjModel.from_xml_string(xml.replace("<mujoco>", '<mujoco><compiler angle="radian"/>'))
    sim = MjSim(model, nworld=3)
    robot = sim.build_entity("r/", soft_joint_pos_limit_factor=0.5)
    assert robot.joint_names == ["a", "b"] and robot.body_names == ["base"] and not robot.is_fixed_base
    assert robot.root_joint_name == "root" and robot.num_joints == 2
    np.testing.assert_allclose(robot.data.joint_pos_limits, [[-1, 0.6], [-np.inf, np.inf]])
    np.testing.assert_allclose(robot.data.soft_joint_pos_limits, [[-0.6, 0.2], [-np.inf, np.inf]])
    np.testing.assert_allclose(robot.data.default_root_state, [0, 0, 0.5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    # writes land in the chosen worlds' MjData; reads come back from there
    state = np.array([0.1, 0.2, 0.7, np.cos(0.25), 0, 0, np.sin(0.25), 0.3, 0, 0, 0, 0, 1.5])
    robot.write_root_state_to_sim(state, mask=np.array([False, True, False]))
    robot.write_joint_state_to_sim(np.array([0.4, -0.2]), np.array([1.0, 2.0]))
    rs = robot.data.root_state_w
    np.testing.assert_allclose(rs[1], state, atol=1e-12)  # angular velocity in the world frame, as written
    np.testing.assert_allclose(rs[0], robot.data.default_root_state, atol=1e-12)
    np.testing.assert_allclose(robot.data.joint_pos, np.tile([0.4, -0.2], (3, 1)))
    np.testing.assert_allclose(robot.data.joint_vel, np.tile([1.0, 2.0], (3, 1)))
    np.testing.assert_allclose(robot.data.body_pos_w[1, 0], [0.1, 0.2, 0.7])
    assert sim.data[1].qpos[sim.mjm.jnt_qposadr[3]] == 0.0  # the other entity's joint untouched
    fixed = sim.build_entity("oth")
    assert fixed.is_fixed_base and fixed.joint_names == [] and fixed.body_names == ["er"]
    with pytest.raises(ValueError, match="^root_state: .*fixed base"):
        fixed.write_root_state_to_sim(np.zeros(13))
    with pytest.raises(ValueError, match="^prefix:"):
        sim.build_entity("nope/")
    with pytest.raises(ValueError, match="^soft_joint_pos_limit_factor:"):
        sim.build_entity("r/", soft_joint_pos_limit_factor=0.0)
    with pytest.raises(ValueError, match="^position:"):
        robot.write_joint_state_to_sim(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="^mask:"):
        robot.write_joint_state_to_sim(np.zeros(2), np.zeros(2), mask=np.ones(2))


# ------------------------------------------------------------------ build_contact_sensor
def test_reference_build_contact_sensor_example():
    xml = '<mujoco><worldbody><body><freejoint/><geom name="ball" size=".1"/></body></worldbody><sensor>'
    xml += '<contact name="touch_ball_found" geom1="ball" data="found"/></sensor></mujoco>'
    assert MjWarpSim(mujoco.MjModel.from_xml_string(xml), nworld=2).build_contact_sensor("touch").primary_names == ["ball"]


def test_contact_sensor_found_force_and_air_time():
    """Two balls dropped onto a floor from 0.2 m and 0.5 m: found / force once they land, air and
    contact times tracked per world with track_air_time."""
    xml = ('<mujoco><option timestep="0.005"/><worldbody><geom name="floor" type="plane" size="2 2 .1"/>'
           '<body pos="0 0 0.2"><freejoint/><geom name="ball" size=".05" mass="1"/></body></worldbody><sensor>'
           '<contact name="touch_ball_found" geom1="ball" data="found"/>'
           '<contact name="touch_ball_force" geom1="ball" data="force"/>'
           '<contact name="touch_floor_found" geom1="floor" data="found"/>'
           '<contact name="other_ball_found" geom1="ball" data="found"/></sensor></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    sim = MjSim(model, nworld=2)
    sim.data[1].qpos[2] = 0.5
    sim.forward()
    touch = sim.build_contact_sensor("touch", track_air_time=True)
    assert touch.primary_names == ["ball", "floor"] and touch.force is not None
    dt = model.opt.timestep
    landed = [None, None]
    for k in range(120):
        sim.step()
        sim.forward()
        touch.update(dt)
        first = touch.compute_first_contact(dt)
        for w in range(2):
            if first[w, 0] and landed[w] is None:
                landed[w] = (k + 1) * dt
    # free fall to the floor: sqrt(2 h / g), h = drop height less the radius
    for w, h in ((0, 0.15), (1, 0.45)):
        assert landed[w] == pytest.approx(np.sqrt(2 * h / 9.81), abs=3 * dt)
    assert touch.in_contact[0].tolist() == [True, True]
    assert touch.last_air_time[0, 0] == pytest.approx(landed[0], abs=2 * dt)
    assert touch.current_contact_time[0, 0] == pytest.approx(120 * dt - landed[0], abs=2 * dt)
    # resting: the normal force (contact frame x) carries the weight
    assert touch.force[0, 0, 0] == pytest.approx(9.81, rel=0.05)
    touch.reset(np.array([True, False]))
    assert touch.current_contact_time[0, 0] == 0 and touch.current_contact_time[1, 0] > 0
    plain = sim.build_contact_sensor("touch")
    with pytest.raises(ValueError, match="^track_air_time:"):
        plain.update(dt)
    assert plain.found.shape == (2, 2) and plain.found[0, 0] >= 1
    with pytest.raises(ValueError, match="^name:"):
        sim.build_contact_sensor("nothing")
    with pytest.raises(ValueError, match="^track_air_time:"):
        sim.build_contact_sensor("touch", track_air_time="yes")


# ------------------------------------------------------------------ compute_rays
def test_reference_compute_rays_example():
    """RoboKit's example verbatim (a mujoco_warp render context and Warp arrays on Warp's CPU device)."""
    mjw = pytest.importorskip("mujoco_warp")
    wp = pytest.importorskip("warp")
    mjm = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom type="box" pos="0 0 -.5" size="1 1 .5"/>'
                                         '</worldbody></mujoco>')
    rc = mjw.create_render_context(mjm, 2, cam_res=[], render_rgb=[], render_depth=[], render_seg=[])
    dist, down = wp.zeros((2, 1), dtype=float), wp.array([[[0, 0, -1]]] * 2, dtype=wp.vec3)  # from z = 1 m
    MjWarpSim(mjm, nworld=2).compute_rays(rc, pnt=wp.array([[[0, 0, 1]]] * 2, dtype=wp.vec3), vec=down,
                                          geomgroup=wp.types.vector(6, wp.float32)(-1, -1, -1, -1, -1, -1),
                                          flg_static=True, bodyexclude=wp.array([-1], dtype=int), dist=dist,
                                          geomid=wp.zeros((2, 1), dtype=int), normal=wp.zeros((2, 1), dtype=wp.vec3))
    assert dist.numpy().tolist() == [[1.0], [1.0]]


def test_compute_rays_per_world_poses_groups_and_exclusions():
    """NumPy arrays: a ball at a different height in each world, a static floor; rays down from 2 m."""
    xml = ('<mujoco><worldbody><geom name="floor" type="plane" size="2 2 .1"/>'
           '<body name="ball" pos="0 0 1"><freejoint/><geom name="ball" size=".1" group="2"/></body>'
           '</worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    sim = MjSim(model, nworld=2)
    sim.data[1].qpos[2] = 0.5
    sim.forward()
    pnt = np.array([[[0, 0, 2.0], [0.5, 0, 2.0]]])
    vec = np.array([[[0, 0, -1.0], [0, 0, -2.0]]])
    dist, gid, nrm = np.zeros((2, 2)), np.zeros((2, 2), dtype=np.int32), np.zeros((2, 2, 3))
    args = dict(pnt=pnt, vec=vec, geomgroup=-np.ones(6), flg_static=True, bodyexclude=np.array([-1, -1]),
                dist=dist, geomid=gid, normal=nrm)
    sim.compute_rays(None, **args)
    np.testing.assert_allclose(dist, [[0.9, 1.0], [1.4, 1.0]])  # the second ray: |vec| 2, floor 2 m below
    assert gid.tolist() == [[1, 0], [1, 0]]
    np.testing.assert_allclose(nrm, np.tile([0, 0, 1.0], (2, 2, 1)), atol=1e-12)
    sim.compute_rays(None, **{**args, "bodyexclude": np.array([1, -1])})  # the ball's body excluded
    assert gid[:, 0].tolist() == [0, 0] and dist[:, 0].tolist() == [2.0, 2.0]
    sim.compute_rays(None, **{**args, "geomgroup": np.array([1, 1, 0, 1, 1, 1])})  # group 2 (the ball) off
    assert gid[:, 0].tolist() == [0, 0]
    sim.compute_rays(None, **{**args, "flg_static": False})  # no floor: the second ray misses
    assert dist[:, 1].tolist() == [-1.0, -1.0] and gid[:, 1].tolist() == [-1, -1]
    with pytest.raises(ValueError, match="^rays: missing"):
        sim.compute_rays(None, pnt=pnt)
    with pytest.raises(ValueError, match="^rays: unknown"):
        sim.compute_rays(None, **args, cutoff=3.0)
    with pytest.raises(ValueError, match="^vec:"):
        sim.compute_rays(None, **{**args, "vec": vec[:, :1]})
