"""gato.sampling.MjSim's per-world model rows (RoboKit's simulator protocol): several scenes with
per-scene world counts, set_random / set_const (randomisation hooks), set_scene (scene switching),
and the planner's rollouts and execute running each world's own rows."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import MjSim, SensorTask, SimMPC, SimMPCConfig, SimMPCStage  # noqa: E402

BALL = '<mujoco><worldbody><body><freejoint/><geom size=".1"/></body></worldbody></mujoco>'
# A 1-D cart pushed by a motor (1 N per unit command), its position as a sensor: a = u / mass.
CART = ('<mujoco><option timestep="0.01"/><worldbody><body name="cart"><joint name="x" type="slide" axis="1 0 0"/>'
        '<geom size="0.05" mass="{mass}"/></body></worldbody><actuator><motor joint="x"/></actuator>'
        '<sensor><jointpos name="x" joint="x"/></sensor></mujoco>')


def cart(mass=1.0):
    return mujoco.MjModel.from_xml_string(CART.format(mass=mass))


# ------------------------------------------------------------------ RoboKit's examples
def test_reference_set_random_example():
    sim = MjSim(mujoco.MjModel.from_xml_string(BALL), nworld=8)
    sim.set_random("geom_friction", (0, 0), 0.5, 1.0)  # sliding friction
    friction = sim.model.geom_friction.numpy()[:, 0, 0]
    assert (bool(((friction >= 0.5) & (friction <= 1.0)).all()), len(set(friction.tolist()))) == (True, 8)
    sim.set_random("body_ipos", (1,), (-0.01, -0.01, 0.0), (0.01, 0.01, 0.0), add=True)  # center of mass
    assert float(abs(sim.model.body_ipos.numpy()[:, 1, 2]).max()) == 0.0


def test_reference_set_scene_example():
    scenes = [mujoco.MjSpec.from_string(BALL), mujoco.MjSpec.from_string(BALL.replace(".1", ".2"))]
    sim = MjSim(scenes, nworld=[2, 2])
    sim.set_scene(np.array([True, False, False, False]), np.array([1, 0, 0, 0], dtype=int))
    assert (sim.model.geom_size.numpy()[:, 0, 0] > 0.15).tolist() == [True, False, True, True]  # world 0: big


def test_reference_mixed_scenes_example():
    xml = '<mujoco><worldbody><geom type="plane" size="1 1 .1"/>'
    xml += '<body pos="0 0 .5"><freejoint/><geom size=".1"/></body></worldbody></mujoco>'
    big = mujoco.MjSpec.from_string(xml.replace('size=".1"', 'size=".2"'))
    mixed = MjSim([mujoco.MjSpec.from_string(xml), big], nworld=[3, 5])  # worlds 3 to 7: the big ball
    assert (mixed.model.geom_size.numpy()[:, 1, 0] > 0.15).tolist() == [False] * 3 + [True] * 5
    pos = mixed.model.geom_pos.numpy()
    pos[0, 0, 2] = -1.0  # world 0's floor, a static geom, a meter lower ...
    mixed.model.geom_pos.assign(pos)
    mixed.reset(np.arange(8) == 0)  # ... from its next reset
    assert [float(d.geom_xpos[0, 2]) for d in mixed.data[:2]] == [-1.0, 0.0]


# ------------------------------------------------------------------ set_random / set_const
def test_set_random_draws_per_world_within_the_ranges_reproducibly_per_seed():
    def drawn(seed, **kw):
        sim = MjSim(mujoco.MjModel.from_xml_string(BALL), nworld=16)
        sim.set_random("geom_friction", (0,), (0.2, 0.01, 1e-4), (0.9, 0.02, 1e-3),
                       rng=None if seed is None else np.random.default_rng(seed), **kw)
        return sim.model.geom_friction.numpy()[:, 0]

    a, b, c = drawn(3), drawn(3), drawn(4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(drawn(None), drawn(None))  # the simulator's own generator: seeded 0
    lo, hi = np.array([0.2, 0.01, 1e-4]), np.array([0.9, 0.02, 1e-3])
    for f in (a, c, drawn(5, log=True)):
        assert np.all((f >= lo) & (f <= hi))
        assert len(np.unique(f[:, 0])) == 16  # one draw per world, each component its own
    # log-uniform: log(draw) uniform, so about half the draws lie below the geometric mean
    lg = drawn(6, log=True)[:, 2]
    assert 3 <= int(np.sum(lg < np.sqrt(1e-4 * 1e-3))) <= 13
    # add: offsets from the model's value, per world
    base = mujoco.MjModel.from_xml_string(BALL).geom_friction[0, 0]
    off = drawn(3, add=True)[:, 0] - base
    assert np.allclose(off, a[:, 0])


def test_set_random_mass_runs_set_const_and_the_worlds_step_with_their_mass():
    sim = MjSim(cart(), nworld=6)
    sim.set_random("body_mass", (1,), 0.5, 4.0, rng=np.random.default_rng(0))
    mass = sim.model.body_mass.numpy()[:, 1]
    assert np.all((mass >= 0.5) & (mass <= 4.0)) and len(set(mass.tolist())) == 6
    # set_const ran: the world body's subtree mass is the cart's drawn mass
    assert np.allclose(sim.model.body_subtreemass.numpy()[:, 0], mass)
    for d in sim.data:
        d.ctrl[:] = 2.0
    sim.step()
    qvel = np.array([d.qvel[0] for d in sim.data])
    assert np.allclose(qvel, 2.0 / mass * 0.01, rtol=1e-9)  # a = F / m in every world


def test_set_const_after_assigning_masses():
    sim = MjSim(cart(), nworld=3)
    m = sim.model.body_mass.numpy()
    m[:, 1] = [1.0, 2.0, 3.0]
    sim.model.body_mass.assign(m)
    sim.set_const()
    assert sim.model.body_subtreemass.numpy()[:, 0].tolist() == [1.0, 2.0, 3.0]
    # each world's copy is its own: the scene's model is untouched
    assert float(sim.mjm.body_mass[1]) == 1.0


# ------------------------------------------------------------------ scenes
def test_scene_world_counts_set_scene_and_resized():
    light, heavy = cart(1.0), cart(5.0)
    sim = MjSim([light, heavy], nworld=[3, 2])
    assert sim.nworld == 5 and sim.scene.tolist() == [0, 0, 0, 1, 1]
    assert sim.model.body_mass.numpy()[:, 1].tolist() == [1, 1, 1, 5, 5]
    for d in sim.data:
        d.qpos[0], d.ctrl[:] = 0.3, 5.0
    sim.set_scene(np.array([1, 0, 0, 0, 1]), np.array([1, 0, 0, 0, 0]))  # world 0 heavy, world 4 light
    assert sim.scene.tolist() == [1, 0, 0, 1, 0]
    assert sim.data[0].qpos[0] == 0.3  # the state carries over
    sim.step()
    assert np.allclose([d.qvel[0] for d in sim.data], np.array([1, 5, 5, 1, 5]) * 0.01)
    r = sim.resized(7)
    assert r.scene.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert MjSim([light, heavy], nworld=[0, 2]).scene.tolist() == [1, 1]


# ------------------------------------------------------------------ bad input
def test_bad_input_names_the_argument():
    sim = MjSim(cart(), nworld=2)
    cases = [
        (lambda: sim.set_random("geom_frictionx", (0,), 0, 1), "field: 'geom_frictionx'"),
        (lambda: sim.set_random("nq", (0,), 0, 1), "field: 'nq'"),
        (lambda: sim.set_random("geom_friction", (5,), 0, 1), "index: "),
        (lambda: sim.set_random("geom_friction", 0, 0, 1), "index: expected a tuple"),
        (lambda: sim.set_random("geom_friction", (0,), (0, 1), 1), "low: "),
        (lambda: sim.set_random("geom_friction", (0,), 0, np.nan), "high: must be finite"),
        (lambda: sim.set_random("geom_friction", (0,), 1, 0.5), "high: must be >= low"),
        (lambda: sim.set_random("geom_friction", (0,), 0, 1, log=True), "low: a log-uniform"),
        (lambda: sim.set_random("geom_friction", (0,), 0, 1, rng=3), "rng: "),
        (lambda: sim.model.no_such_field, "name: 'no_such_field'"),
        (lambda: sim.model.body_mass.assign(np.ones(3)), "values: expected shape"),
        (lambda: sim.set_scene(np.ones(2, bool), np.array([1, 0])), r"scene: \[1\] is not a scene index"),
        (lambda: sim.set_scene(np.ones(3, bool), np.array([0, 0, 0])), "mask: "),
        (lambda: sim.set_scene(np.ones(2, bool), np.array([0.0, 0.0])), "scene: expected"),
        (lambda: MjSim([cart(), cart()], nworld=3), "nworld: expected 2 integers"),
        (lambda: MjSim([cart(), cart()], nworld=[0, 0]), "nworld: "),
        (lambda: MjSim([cart(), mujoco.MjModel.from_xml_string(BALL)], nworld=[1, 1]), r"model\[1\]: its nq"),
        (lambda: MjSim([cart(), "x"], nworld=[1, 1]), r"model\[1\]: expected"),
        (lambda: sim.resized(0), "nworld: "),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()


# ------------------------------------------------------------------ the planner
def _config():
    cfg = SimMPCConfig(num_samples=16, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2, seed=1)
    return cfg.add(SensorTask(np.full((100, 1), 0.3), {"x": 100.0}))


def _plan(mpc, model):
    commands, infos = mpc.plan(mujoco.MjData(model), 0)
    return commands.copy(), infos[0]["plan_cost"]


def test_planner_rollouts_use_the_randomised_rows_and_the_switched_scene():
    """A planner whose replica worlds were given mass 4 (set_random with equal bounds, or a
    switched scene) plans exactly what a planner on a mass-4 model plans."""
    ref = np.full((100, 1), 0.5)
    want = _plan(SimMPC(_config(), MjSim(cart(4.0), 1), ref), cart(4.0))
    light = _plan(SimMPC(_config(), MjSim(cart(1.0), 1), ref), cart(1.0))
    assert not np.array_equal(want[0], light[0]) and abs(want[1] - light[1]) > 1e-3 * light[1]

    mpc = SimMPC(_config(), MjSim(cart(1.0), 1), ref)
    mpc.sims["validation"].set_random("body_mass", (1,), 4.0, 4.0)
    got = _plan(mpc, cart(1.0))
    assert np.array_equal(got[0], want[0]) and got[1] == want[1]

    mpc = SimMPC(_config(), MjSim([cart(1.0), cart(4.0)], [1, 0]), ref)
    assert mpc.sims["validation"].scene.tolist() == [0]
    mpc.sims["validation"].set_scene(np.array([True]), np.array([1]))
    got = _plan(mpc, cart(1.0))
    assert np.array_equal(got[0], want[0]) and got[1] == want[1]

    mpc = SimMPC(_config(), MjSim(cart(1.0), 1), ref)
    mpc.sims["rollout"].set_random("body_mass", (1,), 4.0, 4.0)
    with pytest.raises(ValueError, match=r"sims\['rollout'\]"):
        mpc.plan(mujoco.MjData(cart(1.0)), 0)
    cfg = _config()
    cfg.planner = "ilqr"
    mpc = SimMPC(cfg, MjSim(cart(1.0), 1), ref)
    mpc.sims["validation"].set_random("body_mass", (1,), 4.0, 4.0)
    with pytest.raises(ValueError, match="planner: 'ilqr' linearises"):
        mpc.plan(mujoco.MjData(cart(1.0)), 0)


def test_batch_and_replica_worlds_map_to_their_instances_in_coarse_and_fine_stages():
    """batch 2 x 2 replicas, a coarse then a fine stage: with instance 1's two replica worlds given
    mass 4, instance 0 plans what a mass-1 planner's instance 0 plans and instance 1 what a mass-4
    planner's instance 1 plans, bit for bit (the instances draw alike and do not interact)."""
    def config():
        cfg = SimMPCConfig(batch_size=2, num_replicas=2, num_samples=12, horizon_steps=20, node_steps=10,
                           ctrl_steps=10, max_iterations=2, seed=2,
                           stages=[SimMPCStage(1, dt=0.02), SimMPCStage(1)])
        return cfg.add(SensorTask(np.full((100, 1), 0.3), {"x": 100.0}))

    ref = np.full((100, 1), 0.5)
    data = [mujoco.MjData(cart(1.0)), mujoco.MjData(cart(1.0))]
    plans = {}
    for mass in (1.0, 4.0):
        commands, _ = SimMPC(config(), MjSim(cart(mass), 1), ref).plan(data, 0)
        plans[mass] = commands.copy()
    assert not np.array_equal(plans[1.0][:, 1], plans[4.0][:, 1])
    mpc = SimMPC(config(), MjSim(cart(1.0), 1), ref)
    rows = mpc.sims["validation"].model.body_mass.numpy()
    assert rows.shape[0] == 4  # batch_size x num_replicas worlds
    rows[2:, 1] = 4.0  # instance 1's replicas
    mpc.sims["validation"].model.body_mass.assign(rows)
    mpc.sims["validation"].set_const()
    commands, _ = mpc.plan(data, 0)
    assert np.array_equal(commands[:, 0], plans[1.0][:, 0]) and np.array_equal(commands[:, 1], plans[4.0][:, 1])


def test_execute_steps_each_world_with_its_own_rows():
    """execute on a two-world sim whose second world was given mass 4: each world's executed motion
    is its commands replayed on a model of its own mass, not the other's."""
    cfg = SimMPCConfig(batch_size=2, num_samples=8, horizon_steps=20, node_steps=10, ctrl_steps=10,
                       max_iterations=1)
    cfg = cfg.add(SensorTask(np.full((100, 1), 0.3), {"x": 100.0}))
    sim = MjSim(cart(1.0), 2)
    m = sim.model.body_mass.numpy()
    m[1, 1] = 4.0
    sim.model.body_mass.assign(m)
    sim.set_const()
    rows, _ = SimMPC(cfg, MjSim(cart(1.0), 1), np.full((100, 1), 0.5)).execute(sim, 20)

    def replay(model, ctrl):
        d, q = mujoco.MjData(model), []
        for u in ctrl:
            d.ctrl[:] = u
            mujoco.mj_step(model, d)
            q.append(d.qpos[0])
        return np.array(q)

    for r, mass in zip(rows, (1.0, 4.0)):
        assert np.allclose(r["qpos"][:, 0], replay(cart(mass), r["ctrl"]), rtol=0, atol=1e-12)
        assert not np.allclose(r["qpos"][:, 0], replay(cart(5.0 - mass), r["ctrl"]), rtol=0, atol=1e-6)
