"""ROS-free logic of the simulation-world and reference nodes: the lockstep rule, command
mapping, determinism, external loads; reference curves against gato.tasks."""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
sl = import_or_skip("gato_ros.sim_logic", _HINT)
rl = import_or_skip("gato_ros.reference_logic", _HINT)
import gato  # noqa: E402
import pinocchio as pin  # noqa: E402
from gato import tasks  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
PERIOD_NS = 10_000_000


@pytest.fixture(scope="module")
def model():
    return pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))


def gravity(model, q):
    z = np.zeros(model.nv)
    return pin.rnea(model, model.createData(), q, z, z).copy()


def test_lockstep_accepts_only_the_current_tick_and_advances_one_period():
    sim = sl.SimWorldLogic({"robot": ROBOT, "duration_s": 0.03})
    js = sim.joint_state()
    assert js.stamp_ns == 0 and js.names == NAMES
    np.testing.assert_array_equal(js.position, tasks.Q_READY[ROBOT])
    assert not sim.lockstep_accepts(PERIOD_NS) and sim.ignored_commands == 1
    assert sim.lockstep_accepts(0)
    for k in range(3):
        assert not sim.done
        sim.advance(np.zeros(7))
        assert sim.joint_state().stamp_ns == (k + 1) * PERIOD_NS
    assert sim.done


def test_commands_are_mapped_by_name_and_bad_ones_rejected():
    sim = sl.SimWorldLogic({"robot": ROBOT})
    e = np.arange(7.0)
    np.testing.assert_array_equal(sim.effort_from(e[::-1], NAMES[::-1]), e)
    np.testing.assert_array_equal(sim.effort_from(e), e)                    # Float64MultiArray: joint_names order
    with pytest.raises(ValueError, match="7 joints"):
        sim.effort_from(e[:6])
    with pytest.raises(ValueError, match="lacks"):
        sim.effort_from(e, NAMES[:6] + ["X"])
    with pytest.raises(ValueError, match="NaN"):
        sim.effort_from(np.r_[e[:6], np.nan])


def test_joint_order_maps_both_ways_with_a_permuted_joint_names():
    """gato_ros.joint_order.JointOrder (the sim and the controller logic map through it): a
    permuted joint_names reports states in its order and reads commands by name."""
    from gato_ros.joint_order import JointOrder

    names = NAMES[3:] + NAMES[:3]
    jo = JointOrder(names, NAMES, ROBOT)
    v = np.arange(7.0)                                        # model (URDF) order
    np.testing.assert_array_equal(v[jo.to_names], [3, 4, 5, 6, 0, 1, 2])
    np.testing.assert_array_equal(v[jo.to_names][jo.index(names)], v)
    assert jo.index(NAMES[:6]) is None and jo.missing(NAMES[:6]) == ["A7"]
    with pytest.raises(ValueError, match="joint_names"):
        JointOrder(NAMES[:6] + ["X"], NAMES, ROBOT)
    sim = sl.SimWorldLogic({"robot": ROBOT, "joint_names": names})
    sim.advance(sim.effort_from(np.arange(7.0)))              # joint_names order -> URDF order
    np.testing.assert_array_equal(sim.u, [4, 5, 6, 0, 1, 2, 3])
    np.testing.assert_array_equal(sim.joint_state().effort, np.arange(7.0))
    assert sim.joint_state().names == names


@pytest.mark.parametrize("world", ["mujoco", "pinocchio"])
def test_same_commands_give_the_same_run_bit_for_bit(world, model):
    runs = []
    for _ in range(2):
        sim = sl.SimWorldLogic({"robot": ROBOT, "world": world})
        for k in range(20):
            q = sim.joint_state().position
            sim.advance(gravity(model, q) + 0.5 * np.sin(k) * np.ones(7))
        js = sim.joint_state()
        runs.append(np.r_[js.position, js.velocity])
    assert runs[0].tobytes() == runs[1].tobytes()


@pytest.mark.parametrize("world", ["mujoco", "pinocchio"])
def test_gravity_compensation_holds_and_a_payload_pulls_the_ee_down(world, model):
    drops = {}
    for mass in (0.0, 3.0):
        sim = sl.SimWorldLogic({"robot": ROBOT, "world": world, "payload_mass_kg": mass})
        z0 = sim.ee_position()[2]
        for _ in range(10):
            sim.advance(gravity(model, sim.joint_state().position))
        drops[mass] = z0 - sim.ee_position()[2]
    assert abs(drops[0.0]) < 1e-3 and drops[3.0] > 5e-3


def test_external_wrench_is_jacobian_transpose_at_the_ee(model):
    w = np.array([0.0, 10.0, 0.0, 0.0, 0.0, 1.0])
    sim = sl.SimWorldLogic({"robot": ROBOT, "world": "pinocchio", "external_wrench": list(w)})
    data = model.createData()
    J = pin.computeFrameJacobian(model, data, sim.q, model.getFrameId("EE"), pin.LOCAL_WORLD_ALIGNED)
    np.testing.assert_allclose(sim.load_torque(), J.T @ w, atol=1e-12)


def test_sim_configuration_errors():
    with pytest.raises(ValueError, match="pinocchio"):
        sl.SimWorldLogic({"robot": ROBOT, "world": "mujoco", "pendulum_mass_kg": 1.0})
    with pytest.raises(ValueError, match="divide"):
        sl.SimWorldLogic({"robot": ROBOT, "physics_dt": 0.003})
    with pytest.raises(ValueError, match="q0"):
        sl.SimWorldLogic({"robot": ROBOT, "q0": [0.0] * 6})
    with pytest.raises(ValueError, match="external_wrench"):
        sl.SimWorldLogic({"robot": ROBOT, "external_wrench": [1.0, 2.0]})
    sim = sl.SimWorldLogic({"robot": ROBOT, "world": "pinocchio", "pendulum_mass_kg": 1.0})
    sim.advance(np.zeros(7))
    assert sim.world.pendulum_state is not None


def test_fig8_window_matches_gato_tasks_figure8(model):
    ref = rl.ReferenceLogic({"robot": ROBOT, "mode": "fig8", "fig8_period_s": 4.0, "n_knots": 40,
                             "knot_dt": 0.03125})
    start = ref.start
    data = model.createData()
    pin.forwardKinematics(model, data, tasks.Q_READY[ROBOT])
    np.testing.assert_allclose(start, pin.updateFramePlacement(model, data, model.getFrameId("EE")).translation)
    expected = tasks.figure8(0.03125, 0.1, 0.1, start, np.pi / 2, 4.0, cycles=1)   # 128 samples from t = 0
    w = ref.window(0)
    np.testing.assert_allclose(w.positions, expected[:40], atol=1e-12)
    w = ref.window(int(round(0.03125 * 7 * 1e9)))
    assert w.stamp_ns == 218_750_000 and w.knot_dt == 0.03125
    np.testing.assert_allclose(w.positions, expected[7:47], atol=1e-12)
    # a y-z figure: x constant, 0.2 m wide, 0.2 m tall
    full = ref.positions(np.linspace(0, 4, 401))
    assert np.ptp(full[:, 0]) < 1e-12 and np.ptp(full[:, 1]) == pytest.approx(0.2, abs=1e-3)


def test_goal_sequence_ramps_holds_and_repeats():
    goals = [0.6, 0.1, 0.5, 0.6, -0.1, 0.4]
    ref = rl.ReferenceLogic({"robot": ROBOT, "mode": "goals", "goals": goals, "goal_hold_s": 2.0,
                             "goal_ramp_s": 0.5})
    g = np.array(goals).reshape(2, 3)
    p = ref.positions([0.0, 0.25, 0.5, 1.9, 2.0, 2.5, 4.5])
    np.testing.assert_allclose(p[0], ref.start)
    np.testing.assert_allclose(p[1], 0.5 * (ref.start + g[0]))     # min-jerk midpoint
    np.testing.assert_allclose(p[2:4], [g[0], g[0]])
    np.testing.assert_allclose(p[4], g[0])                          # the next ramp starts at the previous goal
    np.testing.assert_allclose(p[5], g[1])
    np.testing.assert_allclose(p[6], g[0])                          # the sequence repeats
    with pytest.raises(ValueError, match="triples"):
        rl.ReferenceLogic({"robot": ROBOT, "mode": "goals", "goals": [0.1, 0.2]})


def test_goals_from_gato_tasks_and_hold_mode(model):
    ref = rl.ReferenceLogic({"robot": ROBOT, "mode": "goals", "goal_seed": 3})
    expected = tasks.pickplace_scenarios(model, ROBOT, 1, seed=3)[0]["goals"]
    np.testing.assert_allclose(ref.goals, expected)
    hold = rl.ReferenceLogic({"robot": ROBOT, "mode": "hold"})
    w = hold.window(5_000_000_000)
    np.testing.assert_allclose(w.positions, np.tile(hold.start, (32, 1)))
