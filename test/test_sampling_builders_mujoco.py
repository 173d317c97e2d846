"""MjSim.compute_rays, build_contact_sensor, build_entity and build_coarse_spec against MuJoCo's own
results (test_sampling_builders.py has the reference's examples and the refusals):

- compute_rays per world and ray against ``mj_multiRay`` / ``mj_ray`` on a separate ``MjData`` of
  each world's scene and pose (two scenes, three worlds, six geom types, groups, exclusions);
- a ContactSensor's ``found`` / ``force`` against the contacts in ``MjData.contact`` and
  ``mj_contactForce``;
- an Entity's root state against MuJoCo's frame sensors (framepos / framequat / framelinvel /
  frameangvel) of a tumbling body;
- a coarse spec simulated against the fine one: pairs dropped along the fine trajectory's
  configurations leave the trajectory bit-identical; a 5x longer step with the solver cut to 4
  iterations stays within the stated tolerances of the fine slide and drop.
"""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import CoarseConfig, MjSim  # noqa: E402

# ------------------------------------------------------------------ compute_rays
CLUTTER = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="3 3 .1"/>
  <geom name="wall" type="box" pos="1.2 0 .5" size=".05 1 .5" group="1"/>
  <body name="ball" pos="0 0 .6"><freejoint/><geom name="ball" type="sphere" size="{r}" group="2"/></body>
  <body name="pill" pos=".4 .3 .4"><freejoint/><geom name="pill" type="capsule" size=".08 .2" euler="30 40 0"/></body>
  <body name="can" pos="-.4 -.2 .3"><freejoint/><geom name="can" type="cylinder" size=".15 .1" group="3"/></body>
  <body name="egg" pos="-.3 .4 .5"><freejoint/><geom name="egg" type="ellipsoid" size=".2 .1 .15"/></body>
  <body name="crate" pos=".2 -.4 .25"><freejoint/><geom name="crate" type="box" size=".12 .2 .1" euler="0 0 25"/></body>
</worldbody></mujoco>"""


def _ray_worlds():
    """Three worlds over two scenes (the second with a larger ball), each posed differently."""
    small, big = (mujoco.MjSpec.from_string(CLUTTER.format(r=r)) for r in (0.15, 0.3))
    sim = MjSim([small, big], nworld=[2, 1])
    rng = np.random.default_rng(3)
    for w, d in enumerate(sim.data):
        for j in range(sim.mjm.njnt):  # every body shifted and turned by its own seeded draw
            a = sim.mjm.jnt_qposadr[j]
            d.qpos[a:a + 3] += rng.uniform(-0.15, 0.15, 3)
            q = d.qpos[a + 3:a + 7] + rng.uniform(-0.4, 0.4, 4)
            d.qpos[a + 3:a + 7] = q / np.linalg.norm(q)
    sim.forward()
    return sim, rng


def _fresh(model, qpos):
    """A separate MjData of model at qpos (what mj_ray reads: geom poses after mj_forward)."""
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_forward(model, d)
    return d


def test_compute_rays_matches_mj_multiray_per_world_and_ray():
    """A fan of 400 rays from one origin per world (random directions, |vec| 0.5-2): dist, geomid
    and normal equal MuJoCo's mj_multiRay of that world's scene at its pose, to 1e-12."""
    sim, rng = _ray_worlds()
    W, nray = sim.nworld, 400
    origins = np.array([[0.0, 0.0, 1.6], [0.1, -0.2, 1.5], [-0.1, 0.1, 1.7]])
    vec = rng.normal(size=(W, nray, 3))
    vec[..., 2] = -np.abs(vec[..., 2]) - 0.3  # mostly downwards, into the clutter
    vec *= rng.uniform(0.5, 2.0, (W, nray, 1)) / np.linalg.norm(vec, axis=2, keepdims=True)
    pnt = np.repeat(origins[:, None], nray, axis=1)
    for group, static in ((-np.ones(6), True), (np.array([1, 1, 0, 1, 1, 1.0]), True), (np.ones(6), False)):
        dist, gid, nrm = np.zeros((W, nray)), np.zeros((W, nray), dtype=np.int32), np.zeros((W, nray, 3))
        sim.compute_rays(None, pnt=pnt, vec=vec, geomgroup=group, flg_static=static,
                         bodyexclude=np.full(nray, -1), dist=dist, geomid=gid, normal=nrm)
        mask = None if np.all(group == -1) else (group != 0).astype(np.uint8)
        hits = 0
        for w in range(W):
            d = _fresh(sim.models[w], sim.data[w].qpos)
            rd, rg, rn = np.zeros(nray), np.zeros(nray, dtype=np.int32), np.zeros(3 * nray)
            mujoco.mj_multiRay(sim.models[w], d, origins[w], vec[w].reshape(-1), mask, static, -1, rg, rd, rn,
                               nray, 1e6)
            np.testing.assert_array_equal(gid[w], rg)
            np.testing.assert_allclose(dist[w], rd, rtol=0, atol=1e-12)
            hit = rg >= 0
            np.testing.assert_allclose(nrm[w][hit], rn.reshape(nray, 3)[hit], rtol=0, atol=1e-12)
            assert np.all(nrm[w][~hit] == 0)
            hits += hit.sum()
        # many rays hit (the comparison is not of misses); without static geoms only the bodies
        assert hits > (W * nray // 2 if static else W * nray // 20), (group, static, hits)
    # the ball is bigger in world 2's scene: a ray straight at its centre stops 0.15 m earlier there
    centre = np.stack([d.xpos[sim.mjm.body("ball").id] for d in sim.data])
    dist = np.zeros((W, 1))
    sim.compute_rays(None, pnt=centre[:, None] + [0, 0, 1.0], vec=np.array([[[0, 0, -1.0]]]), geomgroup=-np.ones(6),
                     flg_static=True, bodyexclude=np.array([-1]), dist=dist,
                     geomid=np.zeros((W, 1), dtype=np.int32), normal=np.zeros((W, 1, 3)))
    np.testing.assert_allclose(dist[:, 0], [0.85, 0.85, 0.7], atol=1e-12)


def test_compute_rays_per_ray_exclusions_and_shared_rays_match_mj_ray():
    """Per-ray bodyexclude (each ray its own body or none) and one (1, nray) set of rays shared by
    the worlds: each ray equals mj_ray's in that world, also after the worlds have stepped."""
    sim, rng = _ray_worlds()
    W, nray = sim.nworld, 60
    pnt = np.array([[0.0, 0.0, 1.5]]) + rng.uniform(-0.5, 0.5, (1, nray, 3))
    vec = np.array([[0.0, 0.0, -1.0]]) + rng.uniform(-0.4, 0.4, (1, nray, 3))
    excl = rng.integers(-1, sim.mjm.nbody, nray)  # -1 none, 0 the world (static geoms), else a body
    for _ in range(2):
        dist, gid, nrm = np.zeros((W, nray)), np.zeros((W, nray), dtype=np.int32), np.zeros((W, nray, 3))
        sim.compute_rays(None, pnt=pnt, vec=vec, geomgroup=-np.ones(6), flg_static=True, bodyexclude=excl,
                         dist=dist, geomid=gid, normal=nrm)
        for w in range(W):
            d = _fresh(sim.models[w], sim.data[w].qpos)
            for r in range(nray):
                g, n = np.zeros(1, dtype=np.int32), np.zeros(3)
                x = mujoco.mj_ray(sim.models[w], d, pnt[0, r], vec[0, r], None, True, int(excl[r]), g, n)
                assert (dist[w, r], gid[w, r]) == (pytest.approx(x, abs=1e-12), (g[0] if x >= 0 else -1)), (w, r)
                if x >= 0:
                    assert sim.mjm.geom_bodyid[gid[w, r]] != excl[r]
                    np.testing.assert_allclose(nrm[w, r], n, atol=1e-12)
        for _ in range(40):  # the bodies fall: the rays must see the new poses
            sim.step()
        sim.forward()


# ------------------------------------------------------------------ build_contact_sensor
STACK = """<mujoco><option timestep="0.002"/><worldbody>
  <geom name="floor" type="plane" size="2 2 .1"/>
  <body pos="0 0 .1"><freejoint/><geom name="box" type="box" size=".1 .1 .1" mass="2"/></body>
  <body pos="{x} 0 .32"><freejoint/><geom name="ball" size=".1" mass="1"/></body>
</worldbody><sensor>
  <contact name="touch_box_found" geom1="box" data="found"/>
  <contact name="touch_box_force" geom1="box" data="force"/>
  <contact name="touch_floor_found" geom1="floor" data="found"/>
  <contact name="touch_floor_force" geom1="floor" data="force"/>
  <contact name="touch_ball_force" geom1="ball" data="force"/>
</sensor></mujoco>"""


def test_contact_sensor_matches_mujoco_contacts():
    """A box on the floor, a ball dropped on it (world 1) or beside it onto the floor (world 0):
    ``found`` counts the MjData.contact rows that involve the primary geom, ``force`` is
    mj_contactForce of the first such row (its normal component exactly; the whole vector where
    the primary is the row's geom1, the same magnitude where MuJoCo's sensor flips the frame),
    ``in_contact`` is found > 0 (the ball's: its force sensor's norm > 0)."""
    beside, on = (mujoco.MjSpec.from_string(STACK.format(x=x)) for x in (0.4, 0.03))
    sim = MjSim([beside, on], nworld=[1, 1])
    touch = sim.build_contact_sensor("touch")
    assert touch.primary_names == ["box", "floor", "ball"]
    for k in range(250):
        sim.step()
        if k in (60, 249):  # mid-fall / bouncing and at rest
            sim.forward()
            found, force = touch.found, touch.force
            for w, d in enumerate(sim.data):
                m = sim.models[w]
                for j, name in enumerate(touch.primary_names):
                    gid = m.geom(name).id
                    rows = [i for i in range(d.ncon) if gid in (d.contact[i].geom1, d.contact[i].geom2)]
                    if name != "ball":  # a found sensor: MuJoCo's count
                        assert found[w, j] == len(rows), (k, w, name)
                    else:
                        assert found[w, j] == float(len(rows) > 0), (k, w, name)
                    if not rows:
                        assert not np.any(force[w, j]), (k, w, name)
                        continue
                    f = np.zeros(6)
                    mujoco.mj_contactForce(m, d, rows[0], f)
                    assert force[w, j, 0] == pytest.approx(f[0], rel=1e-12, abs=1e-12)
                    assert np.linalg.norm(force[w, j]) == pytest.approx(np.linalg.norm(f[:3]), rel=1e-12)
                    if d.contact[rows[0]].geom1 == gid:
                        np.testing.assert_allclose(force[w, j], f[:3], rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(touch.in_contact, found > 0)
    # at rest: the ball on the box (world 1) and on the floor (world 0); the floor carries 3 kg
    assert touch.in_contact[:, 2].tolist() == [True, True]
    floor_normal = sum(_normal_forces(sim, w, "floor") for w in (0, 1)) / 2
    assert floor_normal == pytest.approx(3 * 9.81, rel=0.02)


def _normal_forces(sim, w, name):
    m, d = sim.models[w], sim.data[w]
    gid, f, total = m.geom(name).id, np.zeros(6), 0.0
    for i in range(d.ncon):
        if gid in (d.contact[i].geom1, d.contact[i].geom2):
            mujoco.mj_contactForce(m, d, i, f)
            total += f[0]
    return total


# ------------------------------------------------------------------ build_entity
TUMBLER = """<mujoco><option gravity="0 0 -3"/><worldbody>
  <body name="r/base" pos="0 0 1"><freejoint name="r/root"/><geom type="box" size=".2 .1 .05" pos=".05 0 0"/>
    <body name="r/arm" pos=".2 0 0"><joint name="r/a" axis="0 1 0"/><geom type="capsule" size=".03 .1" pos=".1 0 0"/></body>
  </body>
</worldbody><sensor>
  <framepos objtype="xbody" objname="r/base"/><framequat objtype="xbody" objname="r/base"/>
  <framelinvel objtype="xbody" objname="r/base"/><frameangvel objtype="xbody" objname="r/base"/>
  <framepos objtype="xbody" objname="r/arm"/>
</sensor></mujoco>"""


def test_entity_root_state_matches_mujoco_frame_sensors():
    """A free body with a hinged arm, spun about a tilted axis (different per world) and stepped:
    root_state_w = [framepos, framequat, framelinvel, frameangvel] of the root body (world frame),
    body_pos_w of the arm = its framepos, joint_pos / joint_vel = qpos / qvel of the hinge."""
    model = mujoco.MjModel.from_xml_string(TUMBLER)
    sim = MjSim(model, nworld=2)
    robot = sim.build_entity("r/")
    spins = np.array([[0.3, -0.2, 1.0, 2.0, 1.0, -3.0, 1.5], [0.0, 0.5, 0.2, -1.0, 4.0, 0.5, -2.0]])
    for w, d in enumerate(sim.data):
        d.qvel[:] = spins[w]
    for _ in range(150):
        sim.step()
    sim.forward()
    sens = np.stack([d.sensordata.copy() for d in sim.data])
    expected = sens[:, :13]
    # quaternions: a sign flip is the same rotation
    sign = np.sign(np.sum(expected[:, 3:7] * robot.data.root_state_w[:, 3:7], axis=1))
    got = robot.data.root_state_w
    got[:, 3:7] *= sign[:, None]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.abs(expected[:, 10:13]).max() > 1.0  # it does tumble
    np.testing.assert_allclose(robot.data.body_pos_w[:, 1], sens[:, 13:16], atol=1e-12)
    np.testing.assert_allclose(robot.data.joint_pos[:, 0], [d.qpos[7] for d in sim.data], atol=0)
    np.testing.assert_allclose(robot.data.joint_vel[:, 0], [d.qvel[6] for d in sim.data], atol=0)


# ------------------------------------------------------------------ build_coarse_spec
PAIRED = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="2 2 .1" contype="0" conaffinity="0"/>
  <geom name="far" type="box" size=".1 .1 .1" pos="1.5 0 .1" contype="0" conaffinity="0"/>
  <body name="puck" pos="0 0 .3"><freejoint/>
    <geom name="puck" type="cylinder" size=".1 .03" contype="0" conaffinity="0"/></body>
</worldbody><contact>
  <pair geom1="puck" geom2="floor"/><pair geom1="puck" geom2="far"/>
</contact></mujoco>"""


def _run(model, qpos0, qvel0, steps):
    sim = MjSim(model, nworld=1)
    d = sim.data[0]
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    sim.forward()
    out = []
    for _ in range(steps):
        sim.step()
        out.append(d.qpos.copy())
    return np.array(out)


def test_coarse_spec_pair_pruning_along_the_trajectory_leaves_it_unchanged():
    """A puck dropped and sliding: the fine trajectory's configurations as qpos_ref drop the
    puck-far pair (never within 5 cm) and keep puck-floor; the coarse scene's trajectory is
    bit-identical to the fine one."""
    spec = mujoco.MjSpec.from_string(PAIRED)
    fine = spec.compile()
    q0, v0 = fine.qpos0.copy(), np.array([0.8, 0.1, 0, 0, 0, 2.0])
    traj = _run(fine, q0, v0, 400)
    coarse = MjSim.build_coarse_spec(spec, CoarseConfig(qpos_ref=traj[::10])).compile()
    assert (fine.npair, coarse.npair) == (2, 1)
    assert {coarse.geom(int(coarse.pair_geom1[0])).name, coarse.geom(int(coarse.pair_geom2[0])).name} == {"puck", "floor"}
    np.testing.assert_array_equal(_run(coarse, q0, v0, 400), traj)
    assert traj[-1, 0] > 0.15 and abs(traj[-1, 2] - 0.03) < 1e-3  # it did land and slide


SLIDE = """<mujoco><option timestep="0.002"/><worldbody>
  <geom name="floor" type="plane" size="3 3 .1" friction=".5"/>
  <body name="crate" pos="0 0 .05"><freejoint/><geom name="crate" type="box" size=".1 .1 .05" mass="1" friction=".5"/></body>
  <body name="ball" pos="1 0 .6"><freejoint/><geom name="ball" size=".05" mass=".2"/></body>
</worldbody></mujoco>"""


def test_coarse_spec_simulation_within_tolerance_of_the_fine_one():
    """timestep 2 ms -> 10 ms (5x fewer steps), 4 solver iterations, 2 line-search iterations,
    the elliptic cone, contacts' time constant >= 2 x the new step: a crate pushed at 1 m/s on a
    mu = 0.5 floor slides v0^2 / (2 mu g) = 102 mm in both (fine 101 mm, coarse 96 mm: within
    8 mm of each other and 10 mm of the formula); a ball dropped from 0.55 m lands at
    sqrt(2 h / g) = 0.335 s in both (within one coarse step) and rests at its radius (within 2 mm).
    (Measured when written: the step alone gives 97 mm, the pyramidal cone with 4 iterations
    86 mm: the cut solver is what costs, the elliptic cone converges closer in 4 iterations.)"""
    spec = mujoco.MjSpec.from_string(SLIDE)
    fine = spec.compile()
    cfg = CoarseConfig(timestep=0.01, iterations=4, ls_iterations=2, pyramidal=False, min_timeconst=0.02)
    coarse = MjSim.build_coarse_spec(spec, cfg).compile()
    assert (coarse.opt.timestep, coarse.opt.iterations, coarse.opt.ls_iterations) == (0.01, 4, 2)
    assert (fine.opt.cone, coarse.opt.cone) == (mujoco.mjtCone.mjCONE_PYRAMIDAL, mujoco.mjtCone.mjCONE_ELLIPTIC)
    q0, v0 = fine.qpos0.copy(), np.zeros(fine.nv)
    v0[0] = 1.0
    T = 0.8
    tf, tc = _run(fine, q0, v0, int(round(T / 0.002))), _run(coarse, q0, v0, int(round(T / 0.01)))
    slide = 1.0 / (2 * 0.5 * 9.81)
    assert tf[-1, 0] == pytest.approx(slide, abs=0.01) and tc[-1, 0] == pytest.approx(slide, abs=0.01)
    assert abs(tf[-1, 0] - tc[-1, 0]) < 0.008, (tf[-1, 0], tc[-1, 0])
    land = np.sqrt(2 * 0.55 / 9.81)
    t_f = 0.002 * (np.argmax(tf[:, 9] < 0.0505) + 1)
    t_c = 0.01 * (np.argmax(tc[:, 9] < 0.0505) + 1)
    assert abs(t_f - land) < 0.01 and abs(t_c - land) < 0.01, (t_f, t_c, land)
    assert abs(tf[-1, 9] - 0.05) < 0.002 and abs(tc[-1, 9] - 0.05) < 0.002, (tf[-1, 9], tc[-1, 9])
