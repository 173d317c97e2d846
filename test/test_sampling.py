"""gato.sampling: the SimMPC planner over MuJoCo rollouts (CPU).

The reference numbers come from the RoboKit SimMPC documentation (the API the planner follows) and
from NumPy / Python-loop re-computations of one planner iteration.
"""
import math

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import (AlignTask, CartesianControl, ContactTask, ControlTask, GraspTask, MjSim,  # noqa: E402
                           RolloutBatch, SensorTask, SimMPC, SimMPCConfig, SimMPCStage, StateTask)
from gato.sampling.mppi import basis_at, elite_update, noise_profile  # noqa: E402

SLIDE_XML = ('<mujoco><option timestep="0.01"/><worldbody><body><joint name="x" type="slide" damping="5"/>'
             '<geom size="0.05" mass="1"/></body></worldbody><actuator><position joint="x" kp="50"/></actuator>'
             '<sensor><jointpos name="x" joint="x"/></sensor></mujoco>')


def slide_model():
    return mujoco.MjModel.from_xml_string(SLIDE_XML)


# ------------------------------------------------------------------ the documented example
def test_doc_example_shapes():
    model = slide_model()
    config = SimMPCConfig(num_samples=32, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2)
    config = config.add(SensorTask(np.full((60, 1), 0.3), {"x": 100.0}))
    mpc = SimMPC(config, MjSim(model, 1), np.zeros((60, 1)))
    commands, infos = mpc.plan(mujoco.MjData(model), 0)
    assert commands.shape == (10, 1, 1)
    assert mpc.sims["rollout"].nworld == 31
    assert len(infos) == 1 and {"t0", "iterations", "plan_cost", "best_cost"} <= set(infos[0])
    assert infos[0]["t0"] == 0 and 1 <= infos[0]["iterations"] <= 2
    assert len(infos[0]["per_iteration"]) == infos[0]["iterations"]
    (rollout,), (plans,) = mpc.execute(MjSim(model, 1), 40)
    assert rollout["qpos"].shape == (40, 1) and len(plans) == 4
    assert [p["t0"] for p in plans] == [0, 10, 20, 30]
    for key, shape in (("time", (40,)), ("qvel", (40, 1)), ("ctrl", (40, 1)), ("sensordata", (40, 1))):
        assert rollout[key].shape == shape
    # the planner drives the slide toward the 0.3 m reference
    assert abs(rollout["qpos"][-1, 0] - 0.3) < abs(0.0 - 0.3) / 2
    assert isinstance(mpc.stages[0], SimMPCStage)


def test_config_doc_defaults_and_stage_iterations():
    config = SimMPCConfig(num_samples=64, horizon_steps=30)
    assert (config.num_samples, config.node_steps) == (64, 50)
    assert SimMPCConfig(num_samples=64, horizon_steps=60, node_steps=10, ctrl_steps=10).node_steps == 10
    stages = [SimMPCStage(3, dt=0.04), SimMPCStage(1)]
    assert SimMPCConfig(stages=stages, horizon_steps=300).max_iterations == 4


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs, field", [
    (dict(ctrl_std=-0.1), "ctrl_std"),
    (dict(ctrl_std=[0.1, -1.0]), "ctrl_std"),
    (dict(qpos_std=-1.0), "qpos_std"),
    (dict(num_samples=1), "num_samples"),
    (dict(planner="lqr"), "planner"),
    (dict(interpolation="quintic"), "interpolation"),
    (dict(elite_ratio=0.0), "elite_ratio"),
    (dict(std_gamma=1.5), "std_gamma"),
    (dict(std_range=(0.5, 0.1)), "std_range"),
    (dict(ctrl_range=[[1.0, -1.0]]), "ctrl_range"),
    (dict(stages=[]), "stages"),
    (dict(terms=[("not a term", 1.0, None)]), "terms"),
])
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SimMPCConfig(**kwargs)


@pytest.mark.parametrize("kwargs, field", [
    (dict(horizon_steps=20, node_steps=30), "node_steps"),
    (dict(horizon_steps=20, node_steps=10, ctrl_steps=30), "ctrl_steps"),
])
def test_bad_field_relations_name_the_field(kwargs, field):
    config = SimMPCConfig(num_samples=8, **kwargs).add(ControlTask(1.0))  # built in steps: checked on use
    with pytest.raises(ValueError, match=field):
        config.validate()
    with pytest.raises(ValueError, match=field):
        SimMPC(config, MjSim(slide_model(), 1), np.zeros((60, 1)))


def test_bad_config_via_add_and_planner():
    base = SimMPCConfig(num_samples=8, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=1)
    with pytest.raises(ValueError, match="terms"):
        base.add(object())
    with pytest.raises(ValueError, match="running_scale"):
        base.add(ControlTask(1.0), -1.0)
    with pytest.raises(ValueError, match="stages.dt"):
        SimMPCStage(2, dt=[(0.5, None), (0.9, 0.02)])
    model = slide_model()
    with pytest.raises(ValueError, match="terms"):
        SimMPC(base, MjSim(model, 1), np.zeros((60, 1)))
    cfg = base.add(SensorTask(np.zeros((60, 1)), {"missing": 1.0}))
    with pytest.raises(ValueError, match="weight"):
        SimMPC(cfg, MjSim(model, 1), np.zeros((60, 1)))
    cfg = base.add(ControlTask(1.0))
    with pytest.raises(ValueError, match="ctrl_ref"):
        SimMPC(cfg, MjSim(model, 1), np.zeros((60, 2)))
    bad_dt = SimMPCConfig(num_samples=8, horizon_steps=20, node_steps=10, ctrl_steps=10,
                          stages=[SimMPCStage(1, dt=0.025)]).add(ControlTask(1.0))
    with pytest.raises(ValueError, match="stages.dt"):
        SimMPC(bad_dt, MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), 0)
    with pytest.raises(ValueError, match="t0"):
        SimMPC(base.add(ControlTask(1.0)), MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), -1)
    with pytest.raises(ValueError, match="residual"):
        SensorTask(np.zeros((1, 1)), {"x": 1.0}, residual="bearing")


# ------------------------------------------------------------------ MPPI math vs NumPy
def _reference_update(cands, costs, ratio, planner):
    """The elite update written out plainly: sort, keep ceil(ratio * n), weight, average."""
    n = len(costs)
    k = max(1, math.ceil(ratio * n))
    idx = sorted(range(n), key=lambda i: (costs[i], i))[:k]
    lam = costs[idx[-1]] - costs[idx[0]]
    w = np.zeros(n)
    for i in idx:
        w[i] = math.exp(-(costs[i] - costs[idx[0]]) / lam) if planner == "mppi" and lam > 0 else 1.0
    w /= w.sum()
    mean = sum(w[i] * cands[i] for i in range(n))
    return w, mean, lam


@pytest.mark.parametrize("planner", ["mppi", "cem"])
def test_elite_update_matches_numpy_reference(planner):
    rng = np.random.default_rng(7)
    cands = rng.normal(size=(50, 4, 3))
    costs = rng.uniform(0, 10, size=50)
    upd = elite_update(cands, costs, 0.2, planner)
    w, mean, lam = _reference_update(cands, costs, 0.2, planner)
    np.testing.assert_allclose(upd["weights"], w, rtol=0, atol=1e-15)
    np.testing.assert_allclose(upd["mean"], mean, rtol=0, atol=1e-13)
    assert upd["temperature"] == pytest.approx(lam)
    assert np.count_nonzero(upd["weights"]) == 10 and upd["best"] == int(np.argmin(costs))
    if planner == "cem":
        assert np.allclose(upd["weights"][upd["weights"] > 0], 0.1)


def test_elite_update_skips_diverged_draws():
    cands = np.arange(5.0)[:, None, None] * np.ones((5, 2, 1))
    costs = np.array([np.nan, 3.0, np.inf, 1.0, 2.0])
    upd = elite_update(cands, costs, 0.6, "mppi")
    assert upd["weights"][0] == 0 and upd["weights"][2] == 0 and upd["weights"].sum() == pytest.approx(1.0)


def _python_rollout_cost(model, ctrl_seq, ref, weight, terminal):
    """Cost of one control sequence, stepped with mj_step in Python: sum over rows of
    scale * weight * (sensordata - ref)^2, sensordata as mj_step computes it (row start)."""
    d = mujoco.MjData(model)
    total = 0.0
    H = len(ctrl_seq)
    for k, u in enumerate(ctrl_seq):
        d.ctrl[:] = u
        mujoco.mj_step(model, d)
        scale = terminal if k == H - 1 else 1.0
        total += scale * weight * float((d.sensordata[0] - ref[k, 0]) ** 2)
    return total


@pytest.mark.parametrize("planner", ["mppi", "cem"])
def test_one_iteration_matches_numpy_reference(planner):
    """One fine iteration of SimMPC re-done by hand: the same seeded draws, Python-loop rollouts,
    the reference elite update; the planner's moved plan equals it."""
    model = slide_model()
    S, H, ns, seed = 16, 20, 5, 3
    config = SimMPCConfig(num_samples=S, horizon_steps=H, node_steps=ns, ctrl_steps=ns, max_iterations=1,
                          stages=[SimMPCStage(1)], ctrl_std=0.2, std_growth=2.0, elite_ratio=0.25, seed=seed,
                          planner=planner, best_draw_margin=1e12)
    ref = np.full((60, 1), 0.3)
    config = config.add(SensorTask(ref, {"x": 100.0}))
    ctrl_ref = np.linspace(0, 0.2, 60)[:, None]
    mpc = SimMPC(config, MjSim(model, 1, nthread=2), ctrl_ref)
    mpc.plan(mujoco.MjData(model), 0)

    K = config.num_nodes
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal((1, S - 1, K, 1))[0]
    sigma = noise_profile(config, 1)
    assert sigma[0, 0] == 0 and sigma[1, 0] == pytest.approx(0.2) and sigma[-1, 0] == pytest.approx(0.4)
    draws = eps * np.maximum(config.min_std, sigma) * (sigma > 0)
    cands = np.concatenate([np.zeros((1, K, 1)), draws])  # the plan (zero offsets) first
    B = basis_at("linear", np.arange(H), ns, K)
    costs = np.array([_python_rollout_cost(model, ctrl_ref[:H] + B @ c, ref[:H], 100.0, config.terminal_scale)
                      for c in cands])
    _, mean, _ = _reference_update(cands, costs, config.elite_ratio, planner)
    np.testing.assert_allclose(mpc.nodes[0], mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mpc.plan_commands[0], ctrl_ref[:H] + B @ mean, atol=1e-9)


def test_interpolation_bases():
    s = np.arange(0, 11)
    lin = basis_at("linear", s, 5, 3)
    assert np.allclose(lin.sum(1), 1) and np.allclose(lin[[0, 5, 10]], np.eye(3))
    assert np.allclose(lin[2], [0.6, 0.4, 0.0])
    zero = basis_at("zero", s, 5, 3)
    assert np.allclose(zero[4], [1, 0, 0]) and np.allclose(zero[5], [0, 1, 0])
    cub = basis_at("cubic", s, 5, 3)
    assert np.allclose(cub.sum(1), 1) and np.allclose(cub[[0, 5, 10]], np.eye(3))
    assert np.allclose(basis_at("linear", [40.0], 5, 3), [[0, 0, 1]])  # past the last node: hold


# ------------------------------------------------------------------ determinism
def _contact_planner(nthread, seed=5):
    from gato.sampling import scenes

    spec = scenes.box_push_spec(timestep=0.01)
    q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
    H = 20
    config = SimMPCConfig(num_samples=12, horizon_steps=H, node_steps=5, ctrl_steps=5, max_iterations=2,
                          stages=[SimMPCStage(1, [(0.5, None), (1.0, 0.02)]), SimMPCStage(1)], ctrl_std=0.1,
                          num_replicas=2, qvel_std=0.01, seed=seed)
    goal = np.tile([0.6, 0.1, 0.19], (200, 1))
    config = config.add(SensorTask(goal, {"box_pos": 10.0}))
    config = config.add(GraspTask("contact", "box", np.array([0.0, -0.07, 0.0]), 5.0, object_frame=False))
    mpc = SimMPC(config, MjSim(spec, 1, nthread=nthread), np.tile(q0, (200, 1)))
    d = mujoco.MjData(mpc.model)
    d.qpos[:7] = q0
    d.qpos[7:10] = [0.6, 0.0, 0.19]
    d.qpos[10] = 1.0
    mujoco.mj_forward(mpc.model, d)
    return mpc, d


def test_plans_bit_identical_for_seed_and_threads():
    out = {}
    for nthread in (2, 2, 1):
        mpc, d = _contact_planner(nthread)
        seq = []
        for t0 in (0, 5, 10):
            cmd, infos = mpc.plan(d, t0)
            seq.append((cmd.copy(), infos[0]["plan_cost"]))
        out.setdefault(nthread, []).append(seq)
    a, b = out[2]
    c = out[1][0]
    for (ca, pa), (cb, pb), (cc, pc) in zip(a, b, c):
        assert np.array_equal(ca, cb) and pa == pb  # same seed, same threads: bit-identical
        assert np.array_equal(ca, cc) and pa == pc  # and the thread count does not matter
    mpc, d = _contact_planner(2, seed=6)
    other = mpc.plan(d, 0)[0]
    assert not np.array_equal(other, a[0][0])  # a different seed draws differently


# ------------------------------------------------------------------ cost terms (RoboKit's documented values)
def _batch(model=None, sensordata=None, ctrl=None, qpos=None, qvel=None, clock=1):
    W, T = 1, 1
    return RolloutBatch(model=model, qpos=np.zeros((W, T, 0)) if qpos is None else qpos,
                        qvel=np.zeros((W, T, 0)) if qvel is None else qvel,
                        ctrl=np.zeros((W, T, 0)) if ctrl is None else ctrl,
                        sensordata=np.zeros((W, T, 0)) if sensordata is None else sensordata,
                        clock=np.array([clock]), ctrl_clock=np.array([clock - 1]), t0=0)


class _Model:
    """The bits of an MjModel the sensor lookups read."""

    def __init__(self, sensors, nu=0):
        self.nsensor = len(sensors)
        self._names = [s[0] for s in sensors]
        self.sensor_adr = np.array([s[1] for s in sensors])
        self.sensor_dim = np.array([s[2] for s in sensors])
        self.nsensordata = int(sum(s[2] for s in sensors))
        self.nu = nu

    def sensor(self, i):
        return type("S", (), {"name": self._names[i]})()


def test_sensor_task_documented_values():
    m = _Model([("x", 0, 1), ("p", 1, 3)])
    sd = np.array([[[0.5, 0.5, 0.0, 0.0]]])
    ref, weight = np.zeros((10, 4)), {"x": 2.0, "p": [1.0, 0.0, 0.0]}
    out = []
    for norm in (False, True):
        term = SensorTask(ref, weight, norm=norm)
        term.resolve(m)
        out.append(term.cost(_batch(sensordata=sd))[0, 0])
    assert np.allclose(out, [2 * 0.5 ** 2 + 1 * 0.5 ** 2, 2 * 0.5 + 1 * 0.5])
    hinge = SensorTask(ref, {"x": 1.0}, norm=True, hinge=0.2)
    hinge.resolve(m)
    assert hinge.cost(_batch(sensordata=sd))[0, 0] == pytest.approx(0.3)


def test_control_task_documented_values():
    m = _Model([], nu=2)
    ctrl = np.array([[[1.0, 2.0]]])
    out = []
    for term in (ControlTask([0.5, 1.0]), ControlTask(2.0, np.ones((10, 2)), norm=True)):
        term.resolve(m)
        out.append(term.cost(_batch(ctrl=ctrl))[0, 0])
    assert out == [4.5, 2.0]


def test_align_task_documented_value():
    m = _Model([("o", 0, 3), ("s", 3, 3)])
    term = AlignTask("o", "s", np.tile([0.0, 1.0, 0.0], (10, 1)), weight=2.0)
    term.resolve(m)
    assert term.cost(_batch(sensordata=np.array([[[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]]])))[0, 0] == pytest.approx(2.0)


def test_grasp_task_documented_values():
    # the hand at (0.1, 0, 0.2), a box at the origin turned 90 degrees about z (quaternion wxyz)
    m = _Model([("sampling/hand/pos", 0, 3), ("sampling/box/pos", 3, 3), ("sampling/box/quat", 6, 4)])
    c = math.sqrt(0.5)
    sd = np.array([[[0.1, 0, 0.2, 0, 0, 0, c, 0, 0, c]]])
    offset = np.tile([0.0, -0.1, 0.2], (2, 1))
    out = []
    for term in (GraspTask("hand", "box", offset, np.ones(2)), GraspTask("hand", "box", offset, np.ones(2), 0.01,
                                                                          False)):
        term.resolve(m)
        out.append(term.cost(_batch(sensordata=sd))[0, 0])
    assert np.allclose(out, [0.0, np.hypot(0.1, 0.1) - 0.01], atol=1e-9)


def test_contact_task_documented_values():
    # one contact of the foot at (0, 0), 0.25 apart: found, dist, pos
    m = _Model([("sampling/contact/foot", 0, 5)])
    sd = np.array([[[1.0, 0.25, 0.0, 0.0, 0.0]]])
    far, allowed = np.ones((1, 1, 2)), np.array([[[[0.0, 0.0, 0.1]]]])
    terms = [
        ContactTask(["foot"], np.zeros((1, 1, 2)), np.full((1, 1), 0.1), weight=2.0),
        ContactTask(["foot"], far, np.zeros((1, 1)), penalty=0.5, margin=0.3),
        ContactTask(["foot"], far, np.zeros((1, 1)), allowed, penalty=0.5, margin=0.3),
        ContactTask(["foot"], far, np.zeros((1, 1)), weight=2.0, box=(1.0, 1.0)),
        ContactTask(["foot"], far, np.zeros((1, 1)), weight=2.0, box=(1.0, 1.0), height=(0.1, 1.0)),
    ]
    out = []
    for term in terms:
        term.resolve(m)
        out.append(term.cost(_batch(sensordata=sd))[0, 0])
    assert np.allclose(out, [-2.0 * 0.75, 0.5, 0.0, -2.0 * 0.75, 0.0])


def test_contact_task_reads_mujoco_contacts():
    """The contact sensor the term adds sees a ball resting on the floor."""
    spec = mujoco.MjSpec.from_string('<mujoco><worldbody><geom name="floor" type="plane" size="1 1 .1"/>'
                                     '<body pos="0.2 0 0.1"><freejoint/><geom name="ball" size="0.1"/></body>'
                                     '</worldbody></mujoco>')
    term = ContactTask(["ball"], np.array([[0.2, 0.0]]), 0.05, weight=1.0)
    term.require(spec)
    model = spec.compile()
    term.resolve(model)
    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    b = _batch(sensordata=d.sensordata[None, None].copy())
    assert term.cost(b)[0, 0] == pytest.approx(-1.0, abs=1e-3)


def test_state_task_documented_values():
    model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body>'
                                           '</worldbody></mujoco>')
    qpos = model.qpos0.copy()
    qpos[0] = 0.05  # 5 cm off the reference in x
    out = []
    for tol in (0.0, 0.01):
        term = StateTask(np.tile(model.qpos0, (2, 1)), np.zeros((2, model.nv)), np.ones(model.nv), pose_tolerance=tol)
        term.resolve(model)
        out.append(term.cost(_batch(qpos=qpos[None, None], qvel=np.zeros((1, 1, 6))))[0, 0])
    assert np.allclose(out, [0.05, 0.04])


# ------------------------------------------------------------------ CartesianControl
def _map_once(cc, model, qpos, commands):
    """The actuator controls ``cc(sim, clock)`` makes of one world's commands at qpos."""
    from gato.sampling.control_map import clock_of, map_commands

    return map_commands(cc, model, model, [0.0], np.asarray(qpos)[None], np.zeros((1, model.nv)),
                        np.zeros((1, model.na)), np.asarray(commands)[None], clock_of(0, 0, 1))[0]


def test_cartesian_control_documented_and_dls():
    model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body name="b"><joint name="j" type="slide"/>'
                                           '<geom size="0.1"/></body></worldbody><actuator><velocity joint="j"/>'
                                           '</actuator></mujoco>')
    control = CartesianControl(model, "b", position_gain=[0, 0, 1])
    assert control.dofs.shape == (1,) and control.num_commands == 6
    from gato.sampling import scenes

    spec = scenes.robot_spec("iiwa14", timestep=0.01)
    m = spec.compile()
    cc = CartesianControl(m, "contact", damping=1e-8)
    q = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
    twist = np.array([0.05, -0.02, 0.03, 0.0, 0.0, 0.1])
    qd = _map_once(cc, m, q, twist)
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_forward(m, d)
    jp, jr = np.zeros((3, 7)), np.zeros((3, 7))
    mujoco.mj_jacBody(m, d, jp, jr, m.body("contact").id)
    np.testing.assert_allclose(np.concatenate([jp @ qd, jr @ qd]), twist, atol=1e-6)
    with pytest.raises(ValueError, match="body"):
        CartesianControl(m, "nope")


def test_control_map_plans_twists():
    """With a CartesianControl map the planner's commands are body twists; the rollouts and execute
    map them to joint velocities, and the planner drives the slide to its target."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><option timestep="0.01"/><worldbody><body name="b"><joint name="j" type="slide" axis="0 0 1"/>'
        '<geom size="0.05" mass="1"/></body></worldbody><actuator><velocity joint="j" kv="20"/></actuator>'
        '<sensor><jointpos name="z" joint="j"/></sensor></mujoco>')
    cc = CartesianControl(model, "b")
    config = SimMPCConfig(num_samples=24, horizon_steps=20, node_steps=5, ctrl_steps=5, max_iterations=2,
                          stages=[SimMPCStage(2)], ctrl_std=0.5, control_map=cc, seed=1)
    config = config.add(SensorTask(np.full((200, 1), 0.2), {"z": 100.0})).add(ControlTask(0.01))
    mpc = SimMPC(config, MjSim(model, 1, nthread=2), np.zeros((200, 6)))
    assert mpc.nu == 6
    (rows,), plans = mpc.execute(MjSim(model, 1), 150)
    assert abs(rows["qpos"][-1, 0] - 0.2) < 0.03
    # the executed controls are joint velocities the map made of the planned twists
    assert np.abs(rows["ctrl"][:, 0]).max() > 0.1 and len(plans[0]) == 30
    # the map, applied to one planned twist, is that twist's z component (the slide's axis)
    twist = mpc.plan_commands[0, 0]
    assert _map_once(cc, model, rows["qpos"][-1], twist)[0] == pytest.approx(twist[2] / (1 + cc.damping), rel=1e-9)


def test_batch_instances_plan_independently():
    """batch_size 2: commands (ctrl_steps, 2, nu); with one fine iteration, instance 0 of the batch
    plans exactly as a single planner from the same state (its draws come first in the stream)."""
    model = slide_model()
    kw = dict(num_samples=16, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=1,
              stages=[SimMPCStage(1)], seed=4)
    term = SensorTask(np.full((60, 1), 0.3), {"x": 100.0})
    single = SimMPC(SimMPCConfig(**kw).add(term), MjSim(model, 1, nthread=2), np.zeros((60, 1)))
    batch = SimMPC(SimMPCConfig(batch_size=2, **kw).add(term), MjSim(model, 1, nthread=2), np.zeros((60, 1)))
    d0, d1 = mujoco.MjData(model), mujoco.MjData(model)
    d1.qpos[0] = 0.25
    c1, _ = single.plan(d0, 0)
    c2, infos = batch.plan([d0, d1], 0)
    assert c2.shape == (10, 2, 1) and len(infos) == 2
    assert np.array_equal(c2[:, 0], c1[:, 0])
    assert infos[1]["plan_cost"] < infos[0]["plan_cost"]  # instance 1 starts near the target
    rows, plans = batch.execute(MjSim(model, 2), 20)
    assert len(rows) == 2 and rows[1]["qpos"].shape == (20, 1) and len(plans[1]) == 2
    with pytest.raises(ValueError, match="data"):
        batch.plan(d0, 0)


@pytest.mark.parametrize("extra", [
    dict(interpolation="cubic"), dict(interpolation="zero"), dict(planner="cem", draw_first_node=True),
    dict(settle_steps=3, wide_ratio=0.25, noise_decay=0.8, init_iterations=3),
    dict(std_range=(0.5, 1.5), std_gamma=1.0),
    dict(interpolation=basis_at("linear", np.arange(20), 10, 3)),
])
def test_knobs_plan_finite_commands(extra):
    """Every knob runs through plan (and the next, shifted plan) to finite, bounded commands."""
    model = slide_model()
    cfg = SimMPCConfig(num_samples=12, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2,
                       ctrl_range=[[-0.5, 0.5]], **extra).add(SensorTask(np.full((60, 1), 0.3), {"x": 100.0}))
    mpc = SimMPC(cfg, MjSim(model, 1, nthread=1), np.zeros((60, 1)))
    d = mujoco.MjData(model)
    for t0 in (0, 10):
        cmd, infos = mpc.plan(d, t0)
        assert np.all(np.isfinite(cmd)) and np.all(np.abs(cmd) <= 0.5)
        assert np.isfinite(infos[0]["plan_cost"]) and infos[0]["iterations"] >= 1
    if "std_range" in extra:
        assert 0.5 <= infos[0]["std_scale"] <= 1.5
    if "init_iterations" in extra:
        assert infos[0]["iterations"] <= 2


def test_any_mjcf_file_as_a_scene(tmp_path):
    """An MJCF file through scenes.mjcf_spec: a GraspTask adds the frame sensors it reads to the
    planner's copy of the spec (the file's own model keeps none), and the plans pull the hand to
    the ball."""
    from gato.sampling import scenes

    f = tmp_path / "reach.xml"
    f.write_text('<mujoco><option timestep="0.01"/><worldbody>'
                 '<body name="hand"><joint name="hx" type="slide" axis="1 0 0" damping="2"/>'
                 '<geom size="0.03" mass="0.5"/></body>'
                 '<body name="ball" pos="0.3 0 0"><geom size="0.05" contype="0" conaffinity="0"/></body>'
                 '</worldbody><actuator><position joint="hx" kp="30" ctrlrange="-1 1"/></actuator></mujoco>')
    spec = scenes.mjcf_spec(f)
    cfg = SimMPCConfig(num_samples=16, horizon_steps=30, node_steps=10, ctrl_steps=10, max_iterations=2,
                       ctrl_std=0.2).add(GraspTask("hand", "ball", np.zeros(3), 10.0, object_frame=False))
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=2), np.zeros((1, 1)))
    assert spec.compile().nsensor == 0 and mpc.model.nsensor == 2
    (rows,), _ = mpc.execute(MjSim(mpc.model, 1), 100)
    assert abs(rows["qpos"][-1, 0] - 0.3) < 0.05
    with pytest.raises(ValueError, match="path"):
        scenes.mjcf_spec(tmp_path / "missing.xml")
