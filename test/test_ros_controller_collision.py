"""Collision clearance rows reached through the controller node's parameters
(collision_spheres / collision_planes / collision_margin / collision_mech), ROS-free: the
controller logic (gato_ros.controller_logic) in lockstep with PinocchioWorld, and the
parameter validation (start-up and run time)."""
import json

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
import gato  # noqa: E402
from gato import controller_setup, tasks  # noqa: E402
from gato.worlds import PinocchioWorld  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow  # noqa: E402
from test_ros_controller_logic import assert_twin_reproduces  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = np.asarray(tasks.Q_READY[ROBOT], dtype=float)
N, DT, TICK = 16, 0.05, 0.02          # horizon, knot spacing [s], control period [s]
MARGIN = 0.02
NS = 1_000_000_000


def make(**cfg):
    return cl.ControllerLogic({"robot": ROBOT, "N": N, "dt": DT, "control_rate_hz": 1.0 / TICK, **cfg})


def obstacle(lg):
    """A sphere (r = 0.06 m) centred 0.2 m along +y from the start pose's EE: on the reference path."""
    return [float(v) for v in lg.solver.ee_pos(Q0) + np.array([0.0, 0.2, 0.0])] + [0.06]


def closed_loop(lg, probe, T=3.0):
    """Lockstep: every TICK the world's joint state and a reference window moving 0.15 m/s along +y
    (0.4 m, then held: straight through the obstacle) go in, the controller's effort drives
    PinocchioWorld (RK4). ``probe``: a BSQP with the obstacle set, for the clearances (not the
    controller's solver: its environment is what is tested). Returns (min clearance over the arm's
    collision spheres per tick [m], final EE error to the path's end [m], sources of the commands)."""
    p0 = lg.solver.ee_pos(Q0)
    path = lambda t: p0 + np.array([0.0, min(0.15 * t, 0.4), 0.0])  # noqa: E731
    world = PinocchioWorld(str(gato.robot_urdf(ROBOT)))
    q, dq, t = Q0.copy(), np.zeros(7), 0.0
    dmin, sources = [], set()
    for k in range(int(round(T / TICK))):
        stamp = NS + k * int(TICK * NS)
        lg.on_reference(ReferenceWindow(stamp, DT, np.array([path(t + i * DT) for i in range(N)])), stamp)
        out = lg.on_joint_state(JointStateSample(stamp, NAMES, q.copy(), dq.copy()), stamp)
        sources.add(out.source)
        q, dq = world.step(q, dq, np.asarray(out.effort), TICK)
        t += TICK
        dmin.append(probe.collision_clearance(q)[0].min())
    return np.array(dmin), float(np.linalg.norm(lg.solver.ee_pos(q) - path(t))), sources


def probe_for(obs):
    s = gato.BSQP(str(gato.robot_urdf(ROBOT)), 1, N, DT)
    s.set_collision_environment(spheres=[obs])
    return s


@pytest.mark.slow
def test_a_sphere_set_by_parameter_keeps_the_arm_clear_and_without_it_the_arm_collides():
    """collision_spheres set: every collision sphere of the arm keeps >= collision_margin - 5 mm
    from the obstacle at every tick and the EE still reaches the path's end (outside the
    obstacle) within 5 cm; the same run without the parameter passes through it (< -2 cm)."""
    free = make()
    obs = obstacle(free)
    probe = probe_for(obs)
    d_free, _, _ = closed_loop(free, probe)
    assert d_free.min() < -0.02, d_free.min()
    lg = make(collision_spheres=obs, collision_margin=MARGIN)
    groups = lg.solver.get_row_groups()
    assert [g["kind_name"] for g in groups][-1] == "collision" and groups[-1]["mech_name"] == "admm"
    d, err, sources = closed_loop(lg, probe)
    assert sources == {"mpc"}, sources
    assert d.min() >= MARGIN - 0.005, d.min()
    assert err < 0.05, err


def test_the_parameters_reach_the_solver_and_read_back():
    obs = [0.5, 0.1, 0.6, 0.05, 0.4, -0.2, 0.3, 0.1]
    lg = make(collision_spheres=obs, collision_planes=[0, 0, 2, 0], collision_margin=0.03, collision_mech="al")
    g = lg.solver.get_row_groups()[-1]
    assert g["kind_name"] == "collision" and g["mech_name"] == "al" and np.allclose(g["lo"], 0.03)
    env = lg.solver.collision_environment
    np.testing.assert_array_equal(env["spheres"], np.reshape(obs, (2, 4)))
    np.testing.assert_array_equal(env["planes"], [[0, 0, 2, 0]])
    pj = json.loads(lg.params_json())
    assert pj["collision_spheres"] == obs and pj["collision_mech"] == "al" and pj["collision_margin"] == 0.03
    assert pj["collision_planes"] == [0, 0, 2, 0]
    # the recorded configuration rebuilds the same rows (gato replay)
    twin = controller_setup.build_controller(json.loads(lg._config_json))
    assert twin.solver.get_row_groups()[-1]["mech_name"] == "al"
    np.testing.assert_array_equal(twin.solver.collision_environment["spheres"], env["spheres"])
    # without the parameters: no collision group
    assert "collision" not in [g["kind_name"] for g in make().solver.get_row_groups()]


def _tick(lg, k):
    stamp = NS + k * int(TICK * NS)
    lg.on_reference(ReferenceWindow(stamp, DT, np.tile(lg.solver.ee_pos(Q0), (N, 1))), stamp)
    return lg.on_joint_state(JointStateSample(stamp, NAMES, Q0.copy(), np.zeros(7)), stamp)


def test_run_time_changes_move_the_obstacles_and_switch_the_rows():
    """Like limits the collision parameters are tunable between ticks: obstacles that move keep the
    group (and its duals), a new mechanism / margin is in force at the next tick, clearing the
    obstacles removes the group, a new limits mechanism keeps the collision group after it."""
    lg = make()
    _tick(lg, 0)
    obs = [0.5, 0.3, 0.5, 0.05]
    lg.request_changes({"collision_spheres": obs})
    assert "collision" not in [g["kind_name"] for g in lg.solver.get_row_groups()]  # not inside a tick
    _tick(lg, 1)
    kinds = [g["kind_name"] for g in lg.solver.get_row_groups()]
    assert kinds[-1] == "collision" and kinds.count("collision") == 1
    lg.request_changes({"collision_spheres": [0.5, 0.35, 0.5, 0.05], "collision_margin": 0.05})
    _tick(lg, 2)
    g = lg.solver.get_row_groups()[-1]
    assert np.allclose(g["lo"], 0.05) and g["mech_name"] == "admm"
    np.testing.assert_array_equal(lg.solver.collision_environment["spheres"], [[0.5, 0.35, 0.5, 0.05]])
    lg.request_changes({"collision_mech": "barrier", "limits": "al"})
    _tick(lg, 3)
    groups = lg.solver.get_row_groups()
    assert groups[0]["mech_name"] == "al" and groups[-1]["kind_name"] == "collision"
    assert groups[-1]["mech_name"] == "barrier" and np.allclose(groups[-1]["lo"], 0.05)
    assert json.loads(lg.params_json())["collision_mech"] == "barrier"
    lg.request_changes({"collision_spheres": []})
    out = _tick(lg, 4)
    assert out.source == "mpc" and np.all(np.isfinite(out.effort))
    assert "collision" not in [g["kind_name"] for g in lg.solver.get_row_groups()]
    pj = json.loads(lg.params_json())
    assert pj["collision_spheres"] == [] and pj["collision_mech"] == "barrier" and pj["limits"] == "al"


@pytest.mark.parametrize("value, match", [
    ([0.5, 0.0, 0.5], r"collision_spheres: length 3 is not a multiple of 4"),
    ([0.5, 0.0, 0.5, 0.0], r"collision_spheres: radius must be > 0 \[m\] \(obstacle 0: 0.0\)"),
    ([0.5, 0.0, 0.5, 0.1, 0.5, 0.0, 0.5, -0.1], r"collision_spheres: radius must be > 0 \[m\] \(obstacle 1"),
    ([0.5, float("nan"), 0.5, 0.1], r"collision_spheres: contains NaN or Inf"),
])
def test_bad_spheres_raise_value_errors_naming_the_parameter(value, match):
    with pytest.raises(ValueError, match=match):
        make(collision_spheres=value)
    lg = make()
    with pytest.raises(ValueError, match=match):
        lg.request_changes({"collision_spheres": value})
    with pytest.raises(ValueError, match=match):   # the replay path (gato.controller_setup) checks alike
        controller_setup.apply_tunables(lg.controller, {"collision_spheres": value})


def test_bad_collision_settings_raise_value_errors_naming_the_parameter():
    for kw, match in ((dict(collision_planes=[0, 0, 0, 1]), r"collision_planes: zero normal \(plane 0\)"),
                      (dict(collision_planes=[0, 0, 1]), "collision_planes: length 3 is not a multiple of 4"),
                      (dict(collision_margin=-0.01), r"collision_margin: -0.01 is out of range"),
                      (dict(collision_mech="pcg"), "collision_mech: 'pcg' is not one of"),
                      (dict(collision_spheres=[0.5, 0, 0.5, 0.1], limits="off"),
                       "collision_spheres: the collision rows need a limit mechanism"),
                      (dict(collision_spheres=[0.5, 0, 0.5, 0.1], planner="osc"),
                       "collision_spheres: the collision rows are planner bsqp's")):
        with pytest.raises(ValueError, match=match):
            make(**kw)
    lg = make(collision_spheres=[0.5, 0, 0.5, 0.1])
    with pytest.raises(ValueError, match="collision_spheres: the collision rows need a limit mechanism"):
        lg.request_changes({"limits": "off"})
    lg.request_changes({"limits": "off", "collision_spheres": []})   # both at once: allowed
    _tick(lg, 0)
    assert lg.solver.get_row_groups() == []


def test_a_twin_built_from_the_recorded_configuration_reproduces_the_ticks_with_the_rows():
    """gato replay's path: SolveInput.config_json carries the collision settings, and a controller
    built from it (gato.controller_setup) fed the recorded inputs gives the same commands bit for
    bit, the rows active (the obstacle is on the way of the reference)."""
    obs = obstacle(make())
    lg = make(collision_spheres=obs, collision_margin=0.03)
    outs = []
    p0 = lg.solver.ee_pos(Q0)
    for k in range(4):
        stamp = NS + k * int(TICK * NS)
        lg.on_reference(ReferenceWindow(stamp, DT, np.array([p0 + [0.0, 0.05 * i, 0.0] for i in range(N)])), stamp)
        outs.append(lg.on_joint_state(JointStateSample(stamp, NAMES, Q0.copy(), np.full(7, 0.01 * k)), stamp))
    cfg = json.loads(outs[-1].solve_input.config_json)
    assert cfg["collision_spheres"] == obs and cfg["collision_margin"] == 0.03
    assert np.any(lg.solver.get_collision_admm_state()["y"] < 0)          # the rows bind somewhere
    assert_twin_reproduces(cfg, outs, lg.effort_limit)
