"""gato.sampling's Task / residual interface (RoboKit's SimResidualTask) and StateTask's contact terms.

Residual Jacobians (analytic, chained with MuJoCo's sensor derivatives) against central differences
through the simulator; JᵀJ / Jᵀr against a dense NumPy assembly; the reference's code examples of
the terms with only their import lines changed (they use Warp CPU arrays, as RoboKit's do); the
reference's positional order of StateTask.
"""
import copy

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import (AlignTask, ContactTask, Context, ControlTask, GraspTask, MjSim, SensorTask,  # noqa: E402
                           SimContext, SimMPC, SimMPCConfig, StateTask, Task, sim_context)

SCENE = '''<mujoco><option timestep="0.01"/><worldbody>
<body name="ball" pos="0 0 1"><freejoint/><geom size="0.1" mass="1"/></body>
<body name="arm" pos="0.5 0 0.5"><joint name="h" type="hinge" axis="0 1 0" damping="1"/>
 <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
 <body name="hand" pos="0.3 0 0"><joint name="h2" type="ball"/><geom size="0.04"/></body></body></worldbody>
<actuator><motor joint="h" gear="2"/></actuator>
<sensor><framepos name="bp" objtype="body" objname="ball"/><framequat name="bq" objtype="body" objname="ball"/>
<framepos name="hp" objtype="body" objname="hand"/><jointvel name="hv" joint="h"/>
<framepos name="ap" objtype="body" objname="arm"/></sensor></mujoco>'''


def _worlds(nworld=2, seed=0):
    """A free ball, a hinge arm with a ball-jointed hand, at seeded random states (nworld worlds)."""
    m = mujoco.MjModel.from_xml_string(SCENE)
    rng = np.random.default_rng(seed)
    sim = MjSim(m, nworld)
    for d in sim.data:
        d.qpos[:] = m.qpos0
        d.qpos[:3] += rng.normal(size=3) * 0.1
        for a in (3, 8):
            q = rng.normal(size=4)
            d.qpos[a:a + 4] = q / np.linalg.norm(q)
        d.qpos[7] = rng.uniform(-1, 1)
        d.qvel[:] = rng.normal(size=m.nv)
        d.ctrl[:] = rng.uniform(-1, 1)
        mujoco.mj_forward(m, d)
    ctx = sim_context(sim) | {SimContext.CLOCK: np.array([3, 0, 1]), SimContext.NUM_INSTANCES: nworld,
                              SimContext.WORLDS_PER_INSTANCE: 1}
    return m, ctx, rng


def _terms(m, rng):
    qref = np.tile(m.qpos0, (5, 1))
    q = rng.normal(size=4)
    qref[:, 3:7] = qref[:, 8:12] = q / np.linalg.norm(q)
    w = rng.uniform(0.5, 2, m.nv)
    return [StateTask(qref, np.zeros((5, m.nv)), w, 0.3, squared=True),
            StateTask(qref, np.zeros((5, m.nv)), w, 0.3, pose_tolerance=0.05),
            ControlTask([3.0], np.ones((5, 1)) * 0.2),
            ControlTask([3.0], norm=True),
            SensorTask(np.zeros((5, 3)), {"bp": [1.0, 2.0, 3.0]}),
            SensorTask(np.zeros((5, 1)), {"hv": 2.0}, residual="angle", hinge=0.1),
            SensorTask(np.tile([1, 0, 0, 0.0], (5, 1)), {"bq": 2.0}, residual="quaternion"),
            SensorTask(np.tile([1, 0, 0, 0.0], (5, 1)), {"bq": 2.0}, residual="yaw"),
            SensorTask(np.full((5, 1), 2 * np.pi + 0.3), {"bq": 2.0}, residual="yaw_unwrapped"),
            SensorTask(np.tile([0.8, 0, 0, 0.6], (5, 1)), {"bq": 2.0}, residual="heading"),
            SensorTask(np.zeros((5, 3)), {"hp": 1.0}, relative="ap"),
            AlignTask("ap", "hp", np.tile([0.2, 0.5, 0.1], (5, 1)), 2.0),
            GraspTask("hand", "ball", np.tile([0.05, 0.0, 0.1], (5, 1)), np.ones(5), 0.01)]


@pytest.mark.parametrize("index", range(13))
def test_residual_jacobians_match_finite_differences(index):
    """Analytic (or input-FD chained with mjd_transitionFD) Jacobians vs central differences of the
    residual through mj_forward, in MuJoCo's tangent layout [dqpos, dqvel, dact, dctrl], 2 worlds."""
    m, ctx, rng = _worlds()
    term = _terms(m, rng)[index]
    term.resolve(None, ctx)
    Ja = term.compute_weighted_jacobian_analytic(None)
    Jf = term.compute_weighted_jacobian(None)
    assert Ja.shape == (2, term.residual_dim, 2 * m.nv + m.na + m.nu)
    assert np.abs(Jf).max() > 1e-3  # the residual does move with the state
    np.testing.assert_allclose(Ja, Jf, atol=2e-7 * max(1.0, np.abs(Jf).max()))


def test_squared_costs_are_the_residual_norms():
    m, ctx, rng = _worlds()
    for term in _terms(m, rng):
        term.resolve(None, ctx)
        cost = np.zeros(2)
        term.compute_weighted_cost(None, cost)
        r = term.compute_weighted_residual(None, np.zeros((2, term.residual_dim)))
        squared = (isinstance(term, SensorTask) and not term.norm and term.hinge is None) or \
            (isinstance(term, ControlTask) and not term.norm) or (isinstance(term, StateTask) and term.squared) or \
            isinstance(term, AlignTask)
        if squared:
            np.testing.assert_allclose(cost, np.sum(r * r, axis=1), rtol=1e-10)


def test_normal_equations_match_dense_numpy_assembly():
    m, ctx, rng = _worlds(nworld=3, seed=4)
    terms = _terms(m, rng)
    n = 2 * m.nv + m.na + m.nu
    costs, JtJ, Jtr = np.zeros(3), np.zeros((3, n, n)), np.zeros((3, n))
    for t in terms:
        t.resolve(None, ctx)
        t.residual_weight = 0.5 if isinstance(t, SensorTask) else None
        t.accumulate_normal_equations(None, costs, JtJ, Jtr)
    # dense: stack every term's residual rows and finite-difference Jacobian rows, one matrix per world
    dim = sum(t.residual_dim for t in terms)
    R, J, c = np.zeros((3, dim)), np.zeros((3, dim, n)), np.zeros(3)
    row = 0
    for t in terms:
        t.compute_weighted_residual(None, R, row_offset=row)
        J[:, row:row + t.residual_dim] = t.compute_weighted_jacobian(None)
        t.compute_weighted_cost(None, c)
        row += t.residual_dim
    for w in range(3):
        np.testing.assert_allclose(JtJ[w], J[w].T @ J[w], atol=1e-6 * np.abs(JtJ[w]).max())
        np.testing.assert_allclose(Jtr[w], J[w].T @ R[w], atol=1e-6 * np.abs(Jtr[w]).max())
    np.testing.assert_allclose(costs, c)
    # cost-only: JtJ / Jtr omitted
    c2 = np.zeros(3)
    terms[0].accumulate_normal_equations(None, c2)
    assert np.all(c2 > 0)


def test_var_values_replace_the_context_state():
    m, ctx, rng = _worlds()
    term = SensorTask(np.zeros((5, 3)), {"bp": 1.0})
    term.resolve(None, ctx)
    q = np.array(ctx[SimContext.QPOS])
    q[:, :3] = [[0.1, 0.2, 0.3], [0.0, 0.0, 0.5]]
    cost = np.zeros(2)
    term.compute_weighted_cost({"qpos": q}, cost)
    np.testing.assert_allclose(cost, [0.14, 0.25])
    with pytest.raises(ValueError, match="var_values"):
        term.compute_weighted_cost([1, 2], cost)


def test_unresolved_and_bad_device():
    term = ControlTask(1.0)
    with pytest.raises(ValueError, match="residual_dim"):
        term.residual_dim
    with pytest.raises(ValueError, match="resolve"):
        term.compute_weighted_cost(None, np.zeros(1))
    with pytest.raises(ValueError, match="device"):
        term.init_buffers("cuda:0")
    term.init_buffers("cpu")
    assert term.device == "cpu"


# ------------------------------------------------------------------ the reference's examples
def test_reference_task_examples():
    class Inputs(Context):
        STEP = 0

    class Step(Task):
        def __init__(self, dt):
            self.dt = dt

    task = Step(dt=(Inputs.STEP, 2.0))
    task.resolve(None, {Inputs.STEP: 0.5})  # the base swaps placeholders only
    assert task.dt == (0.5, 2.0)
    assert Step(dt=(Inputs.STEP, 2.0)).needs() == {Inputs.STEP}


def test_task_members():
    t = SensorTask(np.zeros((1, 1)), {"x": 0.0})
    assert not t.active and ControlTask(1.0).active
    assert t.var_key.name == "ROBOT" and t.robot is None and t.parallel_safe and t.initial_vars(4, None) == {}
    assert t.dense_task is t and t.cost_name == "sensor_task" and t.needs() == set()
    assert not t.SUPPORTS_CUDA_GRAPH and not t.SUPPORTS_AUTODIFF
    t.precompute(None)


wp = pytest.importorskip("warp")


def test_reference_state_task_example():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody></mujoco>'
    )
    data = mujoco.MjData(model)
    data.qpos[0] = 0.05  # 5 cm off the reference in x
    context = sim_context(MjSim(model, 1, data)) | {
        SimContext.CLOCK: wp.array([0, 0, 1], dtype=int),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
    }
    qpos_ref, qvel_ref, out = np.tile(model.qpos0, (2, 1)), np.zeros((2, model.nv)), wp.zeros(2, dtype=float)
    for i, tolerance in enumerate([0.0, 0.01]):
        term = copy.copy(StateTask(qpos_ref, qvel_ref, np.ones(model.nv), pose_tolerance=tolerance))
        term.resolve(None, context)
        term.compute_weighted_cost(None, out_cost=out[i : i + 1])
    assert np.allclose(out.numpy(), [0.05, 0.04])


def test_reference_sensor_task_example():
    context = {  # what SimMPC gives one world at sim step 0
        SimContext.CLOCK: wp.array([0, 0, 1], dtype=int, device="cpu"),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
        SimContext.SENSORDATA: wp.array([[0.5, 0.5, 0.0, 0.0]], dtype=float, device="cpu"),
        SimContext.SENSORS: [("x", 0, 1), ("p", 1, 3)],
    }
    ref, weight = np.zeros((10, 4)), {"x": 2.0, "p": [1.0, 0.0, 0.0]}
    out = wp.zeros(2, dtype=float, device="cpu")
    for i, norm in enumerate([False, True]):
        term = SensorTask(ref, weight, norm=norm)
        term.resolve(None, context)
        term.compute_weighted_cost(None, out_cost=out[i : i + 1])
    assert np.allclose(out.numpy(), [2 * 0.5**2 + 1 * 0.5**2, 2 * 0.5 + 1 * 0.5])


def test_reference_control_task_example():
    context = {
        SimContext.CLOCK: wp.array([0, 0, 1], dtype=int, device="cpu"),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
        SimContext.CTRL: wp.array([[1.0, 2.0]], dtype=float, device="cpu"),
    }
    out = wp.zeros(2, dtype=float, device="cpu")
    for i, term in enumerate([ControlTask([0.5, 1.0]), ControlTask(2.0, np.ones((10, 2)), norm=True)]):
        term.resolve(None, context)
        term.compute_weighted_cost(None, out_cost=out[i : i + 1])
    assert out.numpy().tolist() == [4.5, 2.0]


def test_reference_align_task_example():
    context = {
        SimContext.CLOCK: wp.array([0, 0, 1], dtype=int, device="cpu"),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
        SimContext.SENSORDATA: wp.array([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=float, device="cpu"),
        SimContext.SENSORS: [("o", 0, 3), ("s", 3, 3)],
    }
    term, out = AlignTask("o", "s", np.tile([0.0, 1.0, 0.0], (10, 1)), weight=2.0), wp.zeros(1, device="cpu")
    term.resolve(None, context)
    term.compute_weighted_cost(None, out_cost=out)
    assert np.isclose(out.numpy()[0], 2.0)  # u = (1, 0) is perpendicular to v = (0, 1)


def test_reference_contact_task_example():
    context = {  # one contact of geom 1 at (0, 0), 0.25 apart, at sim step 1
        SimContext.CLOCK: wp.array([1, 0, 1], dtype=int, device="cpu"),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
        SimContext.GEOMS: ["floor", "foot"],
        SimContext.CONTACTS: tuple(
            wp.array(x, dtype=t, device="cpu")
            for x, t in [([1], int), ([0], int), ([[0, 1]], wp.vec2i), ([0.25], float), ([[0, 0, 0]], wp.vec3)]
        ),
    }
    far, allowed = np.ones((1, 1, 2)), np.array([[[[0.0, 0.0, 0.1]]]])  # a disc (x, y, r) around the foot
    terms = [
        ContactTask(["foot"], np.zeros((1, 1, 2)), np.full((1, 2, 1), 0.1), weight=2.0),  # radius over time
        ContactTask(["foot"], far, np.zeros((1, 1)), penalty=0.5, margin=0.3),
        ContactTask(["foot"], far, np.zeros((1, 1)), allowed, penalty=0.5, margin=0.3),
        ContactTask(["foot"], far, np.zeros((1, 1)), weight=2.0, box=(1.0, 1.0)),  # (0, 0) is in the box
        ContactTask(["foot"], far, np.zeros((1, 1)), weight=2.0, box=(1.0, 1.0), height=(0.1, 1.0)),  # too low
    ]
    out = wp.zeros(5, dtype=float, device="cpu")
    for i, term in enumerate(terms):
        term.resolve(None, context)
        term.compute_weighted_cost(None, out_cost=out[i : i + 1])
    assert np.allclose(out.numpy(), [-2.0 * 0.75, 0.5, 0.0, -2.0 * 0.75, 0.0])


def test_reference_grasp_task_example():
    context = {  # the hand at (0.1, 0, 0.2), a box at the origin turned 90 degrees about z
        SimContext.CLOCK: wp.array([0, 0, 1], dtype=int, device="cpu"),
        SimContext.NUM_INSTANCES: 1,
        SimContext.WORLDS_PER_INSTANCE: 1,
        SimContext.BODIES: ["world", "hand", "box"],
        SimContext.BODY_POSITION: wp.array([[[0, 0, 0], [0.1, 0, 0.2], [0, 0, 0]]], dtype=wp.vec3, device="cpu"),
        SimContext.BODY_ROTATION: wp.array(
            [[np.eye(3), np.eye(3), [[0, -1, 0], [1, 0, 0], [0, 0, 1]]]], dtype=wp.mat33, device="cpu"
        ),
    }
    offset, out = np.tile([0.0, -0.1, 0.2], (2, 1)), wp.zeros(2, dtype=float, device="cpu")
    terms = [GraspTask("hand", "box", offset, np.ones(2)), GraspTask(1, 2, offset, np.ones(2), 0.01, False)]
    for i, term in enumerate(terms):  # in the box's frame the hand is on target
        term.resolve(None, context)
        term.compute_weighted_cost(None, out_cost=out[i : i + 1])
    assert np.allclose(out.numpy(), [0.0, np.hypot(0.1, 0.1) - 0.01], atol=1e-6)


# ------------------------------------------------------------------ StateTask's order and contact terms
BOX = '''<mujoco><option timestep="0.01"/><worldbody><geom name="floor" type="plane" size="1 1 .1"/>
<body name="box" pos="0 0 0.3"><freejoint/><geom name="cube" type="box" size="0.05 0.05 0.05" mass="0.2"/></body>
<body name="pusher" pos="0.3 0 0.05"><joint name="px" type="slide" axis="1 0 0"/><geom name="tip" size="0.02" mass="0.5"/>
</body></worldbody><actuator><position joint="px" kp="100"/></actuator></mujoco>'''


def test_state_task_positional_order_is_the_references():
    m = mujoco.MjModel.from_xml_string(BOX)
    qref, vref, w = np.tile(m.qpos0, (3, 1)), np.zeros((3, m.nv)), np.ones(m.nv)
    groups = (np.array(["tip"]), np.array(["cube"]))
    t = StateTask(qref, vref, w, 0.1, groups, 2.0, 0.03, [(["tip"], ["cube"], np.ones(3), 5.0)], True, True, 0.01)
    assert t.penetration_groups is groups and t.penetration_scale == 2.0 and t.margin == 0.03
    assert len(t.contacts) == 1 and t.squared and t.freeze_reference and t.pose_tolerance == 0.01
    with pytest.raises(ValueError, match="squared"):  # a call in the old order no longer binds silently
        StateTask(qref, vref, w, 0.1, None, 0.0, 0.0, (), 1)
    with pytest.raises(ValueError, match="penetration_groups"):
        StateTask(qref, vref, w, 0.1, "tip")
    with pytest.raises(ValueError, match="penetration_scale"):
        StateTask(qref, vref, w, 0.1, groups, -1.0)
    with pytest.raises(ValueError, match=r"contacts\[0\]"):
        StateTask(qref, vref, w, 0.1, None, 0.0, 0.0, [(["tip"], ["cube"], np.ones(3))])


def test_state_task_contact_terms_are_cost_only():
    """Penetration and missing-contact costs from MuJoCo distance sensors the term adds; the
    residuals (what the iLQR sees) do not change with them."""
    spec = mujoco.MjSpec.from_string(BOX)
    m0 = spec.compile()
    qref, vref, w = np.tile(m0.qpos0, (3, 1)), np.zeros((3, m0.nv)), np.ones(m0.nv)
    plain = StateTask(qref, vref, w)
    pen = StateTask(qref, vref, w, 0.0, (["tip"], ["cube"]), 10.0, 0.05)
    want = StateTask(qref, vref, w, 0.0, None, 0.0, 0.0, [(["tip"], ["cube"], np.array([0.0, 1.0]), 4.0)])
    for t in (pen, want):
        t.require(spec)
    model = spec.compile()
    for t in (plain, pen, want):
        t.resolve(model)
    d = mujoco.MjData(model)
    from gato.sampling import RolloutBatch

    def batch(tip_x, step):
        d.qpos[:] = model.qpos0
        d.qpos[:3] = [0.0, 0.0, 0.05]   # the cube resting at the origin
        d.qpos[7] = tip_x - 0.3         # the pusher's slide
        mujoco.mj_forward(model, d)
        return RolloutBatch(model=model, qpos=d.qpos[None, None].copy(), qvel=d.qvel[None, None].copy(),
                            ctrl=np.zeros((1, 1, 1)), sensordata=d.sensordata[None, None].copy(),
                            clock=np.array([step]), ctrl_clock=np.array([step]), t0=0)
    far, near = batch(0.3, 1), batch(0.06, 1)     # gap 0.3 - 0.05 - 0.02 = 0.23 m; 0.06 - 0.07 = -0.01 m
    base_far, base_near = plain.cost(far)[0, 0], plain.cost(near)[0, 0]
    assert pen.cost(far)[0, 0] == pytest.approx(base_far)
    assert pen.cost(near)[0, 0] - base_near == pytest.approx(10.0 * (0.05 + 0.01), abs=1e-6)
    assert want.cost(far)[0, 0] - base_far == pytest.approx(4.0 * 0.23, abs=1e-6)
    assert want.cost(batch(0.3, 0))[0, 0] == pytest.approx(plain.cost(batch(0.3, 0))[0, 0])  # not wanted at step 0
    np.testing.assert_allclose(pen.residuals(near), plain.residuals(near))
    assert pen.residual_cost(near)[0, 0] == pytest.approx(base_near)


def test_sim_mpc_is_a_task():
    """SimMPC nested as a cost term: resolve takes the worlds' states from a context, and
    compute_weighted_cost adds each instance's planned cost-to-go from there."""
    xml = ('<mujoco><option timestep="0.01"/><worldbody><body><joint name="x" type="slide" damping="5"/>'
           '<geom size="0.05" mass="1"/></body></worldbody><actuator><position joint="x" kp="50"/></actuator>'
           '<sensor><jointpos name="x" joint="x"/></sensor></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    config = SimMPCConfig(num_samples=16, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2,
                          batch_size=2).add(SensorTask(np.full((60, 1), 0.3), {"x": 100.0}))
    mpc = SimMPC(config, MjSim(model, 1), np.full((60, 1), 0.3))   # the servo's target: 0.3
    assert isinstance(mpc, Task) and mpc.needs() == set()
    sim = MjSim(model, 2)
    sim.data[1].qpos[0] = 0.3
    ctx = sim_context(sim) | {SimContext.CLOCK: np.array([0, 0, 1]), SimContext.NUM_INSTANCES: 2,
                              SimContext.WORLDS_PER_INSTANCE: 1}
    mpc.resolve(None, ctx)
    out = np.zeros(2)
    mpc.compute_weighted_cost(None, out)
    assert out[0] > 10 * out[1] > 0   # the world already at the target costs far less



def test_grasp_task_body_ids_with_a_spec_and_a_tolerance_per_row():
    from gato.sampling import RolloutBatch

    spec = mujoco.MjSpec.from_string(SCENE)   # bodies: world, ball, arm, hand
    term = GraspTask(3, 1, np.zeros((2, 3)), np.ones(2), tolerance=np.array([0.0, 10.0]), object_frame=False)
    term.require(spec)
    model = spec.compile()
    term.resolve(model)
    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    sd = np.repeat(d.sensordata[None, None], 2, axis=1)
    b = RolloutBatch(model=model, qpos=np.zeros((1, 2, model.nq)), qvel=np.zeros((1, 2, model.nv)),
                     ctrl=np.zeros((1, 2, 1)), sensordata=sd, clock=np.arange(2), ctrl_clock=np.arange(2), t0=0)
    gap = np.linalg.norm(d.xpos[3] - d.xpos[1])
    np.testing.assert_allclose(term.cost(b)[0], [gap, 0.0])
    with pytest.raises(ValueError, match="tolerance"):
        GraspTask("hand", "ball", np.zeros(3), 1.0, tolerance=[-1.0])
    with pytest.raises(ValueError, match="body"):
        GraspTask(9, 1, np.zeros(3), 1.0).require(mujoco.MjSpec.from_string(SCENE))
