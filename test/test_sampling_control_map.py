"""SimMPCConfig.control_map as RoboKit documents it: ``control_map(sim, clock)`` turns the commands
in ``sim.data.ctrl`` into actuator controls before every step, called the same way in the
planner's rollouts and in ``execute``, and a coarse stage's dt honoured with a map."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import (ControlTask, MjSim, RolloutBatch, SimMPC, SimMPCConfig, SimMPCStage,  # noqa: E402
                           StateTask)

SLIDE = ('<mujoco><option timestep="0.01"/><worldbody><body name="b"><joint name="j" type="slide" axis="0 0 1" '
         'damping="2"/><geom size="0.05" mass="1"/></body></worldbody><actuator><motor joint="j"/></actuator>'
         '<sensor><jointpos name="z" joint="j"/></sensor></mujoco>')


class Recorder:
    """A PD map with a clock-dependent bias: ctrl = cmd - kp qpos - kd qvel + bias(step); it records
    every call's clock, world count and the worlds' time."""

    def __init__(self):
        self.calls = []

    def __call__(self, sim, clock):
        d = sim.data
        self.calls.append((tuple(int(c) for c in clock), sim.nworld, d.time.copy()))
        d.ctrl[:, 0] = d.ctrl[:, 0] - 20.0 * d.qpos[:, 0] - 2.0 * d.qvel[:, 0] + 0.5 * (clock[0] % 3)


def _config(stages, H=20, **kw):
    state = StateTask(np.full((100, 1), 0.2), np.zeros((100, 1)), [10.0], squared=True)
    return SimMPCConfig(num_samples=6, horizon_steps=H, node_steps=5, ctrl_steps=H, stages=stages, ctrl_std=0.5,
                        seed=5, **kw).add(state).add(ControlTask(0.001))


def test_rollouts_call_the_map_before_every_step_with_the_clock():
    """Fine stage: the rollouts call the map once per step, for all draws at once, clock (step, row, 1)."""
    model = mujoco.MjModel.from_xml_string(SLIDE)
    rec = Recorder()
    mpc = SimMPC(_config([SimMPCStage(1)], control_map=rec), MjSim(model, 1), np.zeros((100, 1)))
    d = mujoco.MjData(model)
    d.time = 0.3
    mpc.plan(d, 30)
    clocks = [c for c, n, _ in rec.calls if n == 6]  # the 5 draws with the current plan (num_samples 6)
    assert clocks == [(30 + k, k, 1) for k in range(20)]
    plan_calls = [c for c, n, _ in rec.calls if n == 1]  # the moved plan scored at the timestep
    assert plan_calls == [(30 + k, k, 1) for k in range(20)]
    times = [t for c, n, t in rec.calls if n == 6]
    np.testing.assert_allclose([t[0] for t in times], 0.3 + 0.01 * np.arange(20), atol=1e-12)


def test_coarse_stage_dt_is_honoured_with_a_map():
    """A coarse piece of 4 x timestep: the map is called once per coarse step (clock k = 4) and the
    rollout worlds' time advances 0.04 s between those calls."""
    model = mujoco.MjModel.from_xml_string(SLIDE)
    rec = Recorder()
    stages = [SimMPCStage(1, [(0.5, None), (1.0, 0.04)])]
    mpc = SimMPC(_config(stages, control_map=rec), MjSim(model, 1), np.zeros((100, 1)))
    mpc.plan(mujoco.MjData(model), 0)
    draws = [(c, t[-1]) for c, n, t in rec.calls if n == 6]  # the draws and the plan, coarse
    assert [c for c, _ in draws] == [(k, k, 1) for k in range(10)] + [(10, 10, 4), (14, 11, 4), (18, 12, 4)]
    np.testing.assert_allclose([t for _, t in draws], [0.01 * k for k in range(11)] + [0.14, 0.18], atol=1e-12)
    # the plan and the stage's cheapest draw re-scored at the timestep: fine clocks
    assert [c for c, n, _ in rec.calls if n == 2] == [(k, k, 1) for k in range(20)]


@pytest.mark.parametrize("stages", [[SimMPCStage(1)], [SimMPCStage(1, [(0.5, None), (1.0, 0.02)])]])
def test_predicted_cost_is_the_executed_cost_with_a_state_and_clock_map(stages):
    """The plan's predicted cost (scored at the timestep) equals the cost of executing it: the map
    sees the same state and the same clock in the rollouts and in execute."""
    model = mujoco.MjModel.from_xml_string(SLIDE)
    rec = Recorder()
    H = 20
    config = _config(stages, H=H, control_map=rec)
    mpc = SimMPC(config, MjSim(model, 1), np.zeros((100, 1)))
    (rows,), (plans,) = mpc.execute(MjSim(model, 1), H, t0=7)
    b = RolloutBatch(model=mpc.model, qpos=rows["qpos"][None], qvel=rows["qvel"][None], ctrl=rows["ctrl"][None],
                     sensordata=rows["sensordata"][None], clock=np.arange(8, H + 8), ctrl_clock=np.arange(7, H + 7),
                     t0=7)
    w = np.ones(H)
    w[-1] = config.terminal_scale
    executed = sum(float(t.cost(b)[0] @ w) for t, _, _ in config.terms)
    assert plans[0]["plan_cost"] == pytest.approx(executed, rel=1e-9)
    exe = [c for c, n, _ in rec.calls[-H:]]
    assert exe == [(7 + k, k, 1) for k in range(H)]
    # the clock term acts: executed controls are not the commands' PD alone
    cmd = mpc.plan_commands[0, :, 0]
    pd = cmd - 20.0 * np.r_[0.0, rows["qpos"][:-1, 0]] - 2.0 * np.r_[0.0, rows["qvel"][:-1, 0]]
    np.testing.assert_allclose(rows["ctrl"][:, 0] - pd, 0.5 * ((7 + np.arange(H)) % 3), atol=1e-9)


def test_num_commands_wider_than_the_actuators():
    """A map with num_commands 2 on one actuator: sim.data.ctrl holds both commands, the map leaves
    the control in column 0 (here their sum)."""
    model = mujoco.MjModel.from_xml_string(SLIDE)

    class Sum:
        num_commands = 2

        def __call__(self, sim, clock):
            assert sim.data.ctrl.shape == (sim.nworld, 2) and sim.nu == 1 and sim.num_commands == 2
            sim.data.ctrl[:, 0] = sim.data.ctrl[:, 0] + sim.data.ctrl[:, 1]

    mpc = SimMPC(_config([SimMPCStage(1)], control_map=Sum()), MjSim(model, 1), np.zeros((100, 2)))
    assert mpc.nu == 2
    (rows,), _ = mpc.execute(MjSim(model, 1), 5)
    np.testing.assert_allclose(rows["ctrl"][:, 0], mpc.plan_commands[0, :5].sum(axis=1), atol=1e-12)


def test_bad_maps_are_refused_by_name():
    model = mujoco.MjModel.from_xml_string(SLIDE)

    def old_style(model, qpos, qvel, commands, clock):
        return commands

    with pytest.raises(ValueError, match="control_map: .*does not take \\(sim, clock\\)"):
        _config([SimMPCStage(1)], control_map=old_style)
    with pytest.raises(ValueError, match="control_map: expected None or a callable"):
        _config([SimMPCStage(1)], control_map=3.0)

    class Wide:
        num_commands = 0

        def __call__(self, sim, clock):
            pass

    with pytest.raises(ValueError, match="control_map: its num_commands"):
        _config([SimMPCStage(1)], control_map=Wide())

    def returns(sim, clock):
        return sim.data.ctrl * 2

    mpc = SimMPC(_config([SimMPCStage(1)], control_map=returns), MjSim(model, 1), np.zeros((100, 1)))
    with pytest.raises(ValueError, match="control_map: must edit sim.data.ctrl in place"):
        mpc.plan(mujoco.MjData(model), 0)

    def nan(sim, clock):
        sim.data.ctrl[:] = np.nan

    mpc = SimMPC(_config([SimMPCStage(1)], control_map=nan), MjSim(model, 1), np.zeros((100, 1)))
    with pytest.raises(ValueError, match="control_map: .*finite controls"):
        mpc.plan(mujoco.MjData(model), 0)
