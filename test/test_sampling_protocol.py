"""gato.sampling's simulator protocol (MjSim: substeps, masked reset, sensors by name, kinematics)
and the control map, applied before every step alike in the planner's rollouts and in execute."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import (CartesianControl, ControlTask, MjSim, RolloutBatch, SimMPC, SimMPCConfig,  # noqa: E402
                           SimMPCStage, StateTask)

SCENE = ('<mujoco><worldbody><body name="ball" pos="0 0 1"><freejoint/><geom size="0.1" mass="1"/></body></worldbody>'
         '<sensor><framepos name="bp" objtype="body" objname="ball"/></sensor></mujoco>')


# ------------------------------------------------------------------ the simulator protocol
def test_reference_sim_example_on_the_cpu_simulator():
    """RoboKit's MjWarpSim example, with MjSim (its per-world model rows and mixed scenes:
    test_sampling_world_rows)."""
    xml = '<mujoco><worldbody><geom type="plane" size="1 1 .1"/>'
    xml += '<body pos="0 0 .5"><freejoint/><geom size=".1"/></body></worldbody></mujoco>'
    sim = MjSim(mujoco.MjModel.from_xml_string(xml), nworld=8, substeps=4)
    sim.opt.iterations = 5  # from the next step on
    sim.step()
    assert bool((np.array([d.qpos[2] for d in sim.data]) < 0.5).all()) and sim.substep_sensordata.shape == (4, 8, 0)
    sim.reset(np.arange(8) < 4)  # the first four worlds back to the start
    z = np.array([d.qpos[2] for d in sim.data])
    assert (float(z[0]), bool(z[7] < 0.5)) == (0.5, True)
    with pytest.raises(ValueError, match="mask"):
        sim.reset(np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="substeps"):
        MjSim(sim.mjm, 1, substeps=0)


def test_sim_sensors_by_name_and_kinematics():
    m = mujoco.MjModel.from_xml_string(SCENE)
    sim = MjSim(m, 2)
    sim.data[1].qpos[:3] = [0.3, 0.2, 0.1]
    sim.kinematics()
    assert np.allclose(sim.data[1].xpos[1], [0.3, 0.2, 0.1])
    sim.com_pos()
    sim.forward()
    bp = sim.get_sensor("bp")
    assert bp.shape == (2, 3) and np.allclose(bp[1], [0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="not a sensor"):
        sim.get_sensor("nope")
    slide = mujoco.MjModel.from_xml_string(SLIDE)
    config = SimMPCConfig(num_samples=4, horizon_steps=10, node_steps=5, ctrl_steps=5).add(ControlTask(1.0))
    with pytest.raises(ValueError, match="substeps"):
        SimMPC(config, MjSim(slide, 1, substeps=2), np.zeros((10, 1)))


SLIDE = ('<mujoco><option timestep="0.01"/><worldbody><body name="b"><joint name="j" type="slide" axis="0 0 1"/>'
         '<geom size="0.05" mass="1"/></body></worldbody><actuator><velocity joint="j" kv="20"/></actuator>'
         '<sensor><jointpos name="z" joint="j"/></sensor></mujoco>')


@pytest.mark.parametrize("stages", [[SimMPCStage(1)], [SimMPCStage(1, [(0.5, None), (1.0, 0.02)])]])
def test_control_map_predicted_cost_is_the_executed_cost(stages):
    """A map with position feedback (its output changes every step with the state): the plan's
    cost the planner predicts (scored at the fine step) is the cost of executing that plan."""
    model = mujoco.MjModel.from_xml_string(SLIDE)
    cc = CartesianControl(model, "b", position_ref=(0, 0, 0.1), position_gain=(0, 0, 8.0))
    H = 20
    state = StateTask(np.tile([0.2], (100, 1)), np.zeros((100, 1)), [10.0], squared=True)
    config = SimMPCConfig(num_samples=16, horizon_steps=H, node_steps=5, ctrl_steps=H, stages=stages, ctrl_std=0.3,
                          control_map=cc, seed=3).add(state).add(ControlTask(0.01))
    mpc = SimMPC(config, MjSim(model, 1), np.zeros((100, 6)))
    (rows,), (plans,) = mpc.execute(MjSim(model, 1), H)
    b = RolloutBatch(model=mpc.model, qpos=rows["qpos"][None], qvel=rows["qvel"][None], ctrl=rows["ctrl"][None],
                     sensordata=rows["sensordata"][None], clock=np.arange(1, H + 1), ctrl_clock=np.arange(H), t0=0)
    w = np.ones(H)
    w[-1] = config.terminal_scale
    executed = sum(float(t.cost(b)[0] @ w) for t, _, _ in config.terms)
    assert plans[0]["plan_cost"] == pytest.approx(executed, rel=1e-9)
    # the feedback does act: the mapped controls differ from the twists' z with the gain off
    assert np.abs(rows["ctrl"][:, 0] - mpc.plan_commands[0, :, 2] / (1 + cc.damping)).max() > 1e-3


def test_early_stop_and_std_range_as_documented():
    """min_improvement / patience stop a plan under a coarse stage too (on that stage's costs);
    std_range carries the refit noise into plans of one iteration only."""
    from gato.sampling import SensorTask

    model = mujoco.MjModel.from_xml_string(SLIDE.replace("velocity joint", "position joint").replace('kv="20"',
                                                                                                      'kp="50"'))
    term = SensorTask(np.full((60, 1), 0.3), {"z": 100.0})
    coarse = [SimMPCStage(12, [(0.25, None), (1.0, 0.04)])]
    cfg = SimMPCConfig(num_samples=16, horizon_steps=20, node_steps=10, ctrl_steps=10, stages=coarse,
                       min_improvement=10.0, patience=2).add(term)
    _, infos = SimMPC(cfg, MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), 0)
    assert infos[0]["iterations"] == 2
    for its, moved in ((1, True), (2, False)):
        cfg = SimMPCConfig(num_samples=16, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=its,
                           stages=[SimMPCStage(its)], std_range=(0.1, 0.5), std_gamma=1.0).add(term)
        _, infos = SimMPC(cfg, MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), 0)
        assert (infos[0]["std_scale"] != 1.0) == moved


def test_reference_get_sensor_example():
    xml = '<mujoco><worldbody><body name="b" pos="0 0 .5"><freejoint/><geom size=".1"/></body></worldbody>'
    xml += '<sensor><framepos name="p" objtype="body" objname="b"/></sensor></mujoco>'
    assert MjSim(mujoco.MjModel.from_xml_string(xml), nworld=2).get_sensor("p").tolist() == [[0.0, 0.0, 0.5],
                                                                                             [0.0, 0.0, 0.5]]
