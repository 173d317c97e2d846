"""SensorTask's heading residuals "yaw_unwrapped" and "heading" (RoboKit names them without defining
them; our reading in docs/sampling.md) against NumPy formulas, and a planner turning a body twice
round, which only the unwrapped residual can ask for."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import MjSim, SensorTask, SimMPC, SimMPCConfig  # noqa: E402
from gato.sampling.batch import RolloutBatch  # noqa: E402

# A turntable: a hinge about z driven by a velocity servo, its frame quaternion as a sensor.
TABLE = ('<mujoco><option timestep="0.01" integrator="implicitfast"/><worldbody><body name="t">'
         '<joint name="yaw" type="hinge" axis="0 0 1" damping="0.1"/><geom type="box" size="0.2 0.05 0.02" mass="1"/></body></worldbody>'
         '<actuator><velocity joint="yaw" kv="5" ctrlrange="-20 20"/></actuator>'
         '<sensor><jointpos name="q" joint="yaw"/><framequat name="tq" objtype="body" objname="t"/></sensor></mujoco>')


def quat(yaw):
    yaw = np.asarray(yaw, dtype=np.float64)
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=-1)


def batch(model, yaws):
    """A RolloutBatch of W x T rows whose sensor "tq" reads the yaws (W, T), "q" the angle."""
    W, T = yaws.shape
    sens = np.concatenate([yaws[..., None], quat(yaws)], axis=-1)
    z = np.zeros((W, T, 1))
    return RolloutBatch(model=model, qpos=z, qvel=z, ctrl=z, sensordata=sens,
                        clock=np.arange(1, T + 1), ctrl_clock=np.arange(T), t0=0)


def test_yaw_unwrapped_counts_whole_turns_and_reads_angle_references():
    m = mujoco.MjModel.from_xml_string(TABLE)
    T = 40
    two_turns = np.linspace(0, 4 * np.pi, T)  # rows turning twice round, 0.32 rad per row
    b = batch(m, np.stack([two_turns, np.zeros(T)]))
    ref = two_turns[:, None]  # (T, 1): one angle per sensor, unwrapped
    term = SensorTask(ref, {"tq": 2.0}, residual="yaw_unwrapped")
    term.resolve(m)
    cost = term.cost(b)
    # world 0 follows the reference exactly; world 1 stood still: 2 * (0 - ref)^2, no wrapping
    np.testing.assert_allclose(cost[0], 0.0, atol=1e-18)
    np.testing.assert_allclose(cost[1], 2 * two_turns ** 2, rtol=1e-12)
    # "yaw" sees nothing wrong at the whole turns the unwrapped residual counts
    wrapped = SensorTask(quat(two_turns), {"tq": 2.0}, residual="yaw")
    wrapped.resolve(m)
    assert wrapped.cost(b)[1, -1] < 1e-20 and cost[1, -1] > 300
    # the model's layout (T, nsensordata): the angle in the sensor's first column
    full = np.zeros((T, m.nsensordata))
    full[:, 1] = two_turns
    term2 = SensorTask(full, {"tq": 2.0}, residual="yaw_unwrapped")
    term2.resolve(m)
    np.testing.assert_array_equal(term2.cost(b), cost)
    # the first row on the 2 pi branch nearest its reference: a reference 2 pi + 0.1 ahead of yaw 0.1
    b2 = batch(m, np.full((1, 3), 0.1))
    t3 = SensorTask(np.full((3, 1), 2 * np.pi + 0.1), {"tq": 1.0}, residual="yaw_unwrapped")
    t3.resolve(m)
    np.testing.assert_allclose(t3.cost(b2), 0.0, atol=1e-20)
    with pytest.raises(ValueError, match=r"sensor_ref: expected \(T, 5\) .* or \(T, 1\)"):
        SensorTask(quat(two_turns), {"tq": 2.0}, residual="yaw_unwrapped").resolve(m)
    with pytest.raises(ValueError, match="residual: 'yaw_unwrapped' needs 4-D quaternion sensors"):
        SensorTask(np.zeros((T, 1)), {"q": 2.0}, residual="yaw_unwrapped").resolve(m)


def test_heading_is_the_chord_between_the_yaws():
    m = mujoco.MjModel.from_xml_string(TABLE)
    rng = np.random.default_rng(0)
    yaws, refs = rng.uniform(-4, 4, (3, 25)), rng.uniform(-4, 4, 25)
    b = batch(m, yaws)
    term = SensorTask(quat(refs), {"tq": 1.5}, residual="heading")
    term.resolve(m)
    d = yaws - refs
    np.testing.assert_allclose(term.cost(b), 1.5 * 4 * np.sin(d / 2) ** 2, rtol=1e-12, atol=1e-15)
    assert term.residual_dim == 2
    normed = SensorTask(quat(refs), {"tq": 1.5}, residual="heading", norm=True)
    normed.resolve(m)
    np.testing.assert_allclose(normed.cost(b), 1.5 * 2 * np.abs(np.sin(d / 2)), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="residual: expected one of"):
        SensorTask(quat(refs), {"tq": 1.0}, residual="headings")


def test_planner_turns_twice_round_with_the_unwrapped_residual():
    """Turn the table 4 pi in 1 s (12.6 rad/s: 6.3 rad, more than pi, over a 0.5 s horizon). With
    "yaw_unwrapped" the closed loop follows and ends at 4 pi; with "yaw" (the same targets as
    quaternions) the horizon's later rows alias by whole turns and the table ends a turn short
    (seeds 0-3 alike: ends 12.50-12.62 vs 6.18-6.40 rad)."""
    m = mujoco.MjModel.from_xml_string(TABLE)
    T = 400
    target = np.minimum(np.arange(T) / 100, 1.0) * 4 * np.pi
    runs = {}
    for residual, ref in (("yaw_unwrapped", target[:, None]), ("yaw", quat(target))):
        cfg = SimMPCConfig(num_samples=32, horizon_steps=50, node_steps=10, ctrl_steps=10, max_iterations=2,
                           ctrl_std=4.0, seed=0).add(SensorTask(ref, {"tq": 10.0}, residual=residual))
        (rows,), _ = SimMPC(cfg, MjSim(m, 1), np.zeros((T, 1))).execute(MjSim(m, 1), 200)
        runs[residual] = rows["qpos"][:, 0]
    unwrapped, wrapped = runs["yaw_unwrapped"], runs["yaw"]
    assert abs(unwrapped[-1] - 4 * np.pi) < 0.3 and np.abs(unwrapped - target[1:201]).mean() < 0.6
    assert abs(wrapped[-1] - 4 * np.pi) > 3.0
