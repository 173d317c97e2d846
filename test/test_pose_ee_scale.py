"""The EE position weight of pose windows (issue 30): MPCController ``pose_ee_weight_scale``
multiplies q_cost / N_cost on the solves whose ReferenceWindow carries orientations and gives
position-only solves the configured weights back; controller_setup builds it from the
configuration (absent: 1, a bag from before it), reports the configured weights (not a pose
tick's) in the tunables that gato replay rebuilds from, and applies run-time changes."""
import json

import numpy as np
import pytest

import gato
from gato.planners import controller_setup as setup
from gato.planners.controller import MPCController
from gato.planners.shipped_weights import POSE_EE_WEIGHT_SCALE, pose_ee_weight_scale, shipped_weights
from gato.references import ReferenceWindow

ROBOT, N, DT = "iiwa14", 16, 0.01
Q0 = np.array([0.1, 0.5, -0.2, -1.2, 0.1, 0.6, 0.0])


def _config(**over):
    cfg = dict(robot=ROBOT, N=N, dt=DT, batch_size=1, warm_start="shift", linsys="bdsv", reseed_threshold=0.0,
               limits="admm", **shipped_weights(ROBOT))
    cfg.update(over)
    return cfg


def _windows(ctrl, stamp_ns=10**9):
    x = np.concatenate([Q0, np.zeros(7)])
    p0 = np.asarray(ctrl.solver.ee_pos(Q0), dtype=np.float64)
    pos = p0 + np.linspace(0.0, 0.03, N)[:, None] * np.array([1.0, 0.5, -0.5])
    rot = np.tile([0.05, -0.1, 0.02], (N, 1)) + np.linspace(0.0, 0.1, N)[:, None]
    return x, ReferenceWindow(stamp_ns, DT, pos, orientations=rot), ReferenceWindow(stamp_ns, DT, pos)


def test_a_pose_window_solves_with_the_scaled_ee_weights_and_a_position_window_with_the_configured():
    scaled = setup.build_controller(_config(pose_ee_weight_scale=2.0))
    stiff = setup.build_controller(_config(q_cost=40.0, N_cost=26.0, pose_ee_weight_scale=1.0))
    x, pose, flat = _windows(scaled)
    scaled.reset(x)
    stiff.reset(x)
    u_a = scaled.step(x, pose).u
    u_b = stiff.step(x, pose).u
    np.testing.assert_array_equal(u_a, u_b)            # x2 on a pose window = the stiffer weights, bit for bit
    assert (scaled.solver.params.q_cost, scaled.solver.params.N_cost) == (40.0, 26.0)
    assert scaled.configured_ee_weights() == (20.0, 13.0)
    assert setup.tunables(scaled)["q_cost"] == 20.0 and setup.tunables(scaled)["pose_ee_weight_scale"] == 2.0
    scaled.step(x, flat)                                # position only: the configured weights, exactly
    assert (scaled.solver.params.q_cost, scaled.solver.params.N_cost) == (20.0, 13.0)
    scaled.step(x, pose)
    scaled.step(x, pose.solver_layout())                # a flat reference: the configured ones too
    assert (scaled.solver.params.q_cost, scaled.solver.params.N_cost) == (20.0, 13.0)


def test_position_only_windows_solve_bit_for_bit_as_without_the_scale():
    a = setup.build_controller(_config(pose_ee_weight_scale=3.0))
    b = setup.build_controller(_config())               # no key: a configuration from before it, 1
    assert b.pose_ee_weight_scale == 1.0
    x, _, flat = _windows(a)
    a.reset(x)
    b.reset(x)
    for _ in range(3):
        np.testing.assert_array_equal(a.step(x, flat).u, b.step(x, flat).u)


def test_run_time_changes_apply_to_the_configured_weights_not_a_pose_ticks():
    ctrl = setup.build_controller(_config(pose_ee_weight_scale=2.0))
    x, pose, flat = _windows(ctrl)
    ctrl.reset(x)
    ctrl.step(x, pose)
    setup.apply_tunables(ctrl, {"q_cost": 30.0})        # while the pose tick's 40 / 26 are on the solver
    assert ctrl.configured_ee_weights() == (30.0, 13.0)
    ctrl.step(x, pose)
    assert (ctrl.solver.params.q_cost, ctrl.solver.params.N_cost) == (60.0, 26.0)
    setup.apply_tunables(ctrl, {"pose_ee_weight_scale": 1.5})
    ctrl.step(x, pose)
    assert (ctrl.solver.params.q_cost, ctrl.solver.params.N_cost) == (45.0, 19.5)
    ctrl.step(x, flat)
    assert (ctrl.solver.params.q_cost, ctrl.solver.params.N_cost) == (30.0, 13.0)
    cfg = json.loads(setup.config_json(_config(), ctrl, gato.robot_urdf(ROBOT)))
    assert cfg["q_cost"] == 30.0 and cfg["pose_ee_weight_scale"] == 1.5     # what gato replay rebuilds


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), True, "2"])
def test_a_bad_scale_is_refused_by_name(bad):
    solver = gato.BSQP(str(gato.robot_urdf(ROBOT)), 1, N, DT, gato.SolverParams(), plant_type=ROBOT)
    with pytest.raises(ValueError, match="pose_ee_weight_scale"):
        MPCController(solver, pose_ee_weight_scale=bad)


def test_the_shipped_scale_and_the_node_parameter_default_agree():
    from gato_ros.param_controller import CONTROLLER
    from gato_ros.param_plugin import PLUGIN

    p = next(p for p in CONTROLLER if p.name == "pose_ee_weight_scale")
    for robot in ("iiwa14", "fr3", "indy7", "gen3", "ur5e"):
        assert p.default(robot) == pose_ee_weight_scale(robot) == POSE_EE_WEIGHT_SCALE.get(robot, 1.0)
    assert POSE_EE_WEIGHT_SCALE["iiwa14"] == POSE_EE_WEIGHT_SCALE["fr3"] == 2.0
    assert next(p for p in PLUGIN if p.name == "pose_ee_weight_scale").default == 1.0


def test_the_node_scales_its_pose_ticks_and_records_the_configured_weights_for_replay():
    """The controller node (iiwa14 defaults: pose_ee_weight_scale 2): a sweep window's tick solves
    with q_cost / N_cost x2, its SolveInput's config_json holds the configured weights and the scale
    (what gato replay rebuilds from), ~/params the same; a run-time change applies to the next tick."""
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.reference_logic import ReferenceLogic
    from gato_ros.sim_logic import SimWorldLogic

    ctrl = ControllerLogic({"robot": ROBOT, "reference_sync": True})
    world = SimWorldLogic({"robot": ROBOT})
    ref = ReferenceLogic({"robot": ROBOT, "orientation": "sweep"})
    q, n = ctrl.cfg["q_cost"], ctrl.cfg["N_cost"]
    assert ctrl.cfg["pose_ee_weight_scale"] == 2.0 and ctrl.controller.pose_ee_weight_scale == 2.0
    for _ in range(2):
        t = world.t_ns
        ctrl.on_reference(ref.window(t), t)
        out = ctrl.on_joint_state(world.joint_state(), t)
        world.advance(world.effort_from(out.effort))
    assert (ctrl.solver.params.q_cost, ctrl.solver.params.N_cost) == (2.0 * q, 2.0 * n)
    cfg = json.loads(out.solve_input.config_json)
    assert (cfg["q_cost"], cfg["N_cost"], cfg["pose_ee_weight_scale"]) == (q, n, 2.0)
    assert json.loads(ctrl.params_json())["pose_ee_weight_scale"] == 2.0
    ctrl.request_changes({"pose_ee_weight_scale": 1.0})
    t = world.t_ns
    ctrl.on_reference(ref.window(t), t)
    out = ctrl.on_joint_state(world.joint_state(), t)
    assert (ctrl.solver.params.q_cost, ctrl.solver.params.N_cost) == (q, n)
    assert json.loads(out.solve_input.config_json)["pose_ee_weight_scale"] == 1.0
