"""The ROS-free logic of the floating-base world and controller nodes (issue 34; no ROS here):
gato_ros.floating_sim_logic.FloatingSimLogic and gato_ros.floating_controller_logic.FloatingControllerLogic.

Odometry refusals by name, the wait for a tick's odometry, the damped joint hold on stale / missing
odometry and on a non-finite joint state, the MPC's return, re-sent stamps, bad configuration.
"""
import numpy as np
import pytest

pytest.importorskip("mujoco")
from gato_ros.floating_controller_logic import FloatingControllerLogic, Odometry  # noqa: E402
from gato_ros.floating_sim_logic import FloatingSimLogic  # noqa: E402

MS = 1_000_000


@pytest.fixture(scope="module")
def sim():
    return FloatingSimLogic("go2", seed=1)


def odom(sim, stamp_ns, **kw):
    od = sim.odometry()
    d = dict(stamp_ns=stamp_ns, frame_id="odom", child_frame_id="base", position=od["position"],
             quat_xyzw=od["quat_xyzw"], linear=od["linear"], angular=od["angular"])
    d.update(kw)
    return Odometry(**d)


def js(sim):
    names, q, dq, _ = sim.joint_state()
    return names, q, dq


def test_sim_world_publishes_the_landed_crouch_and_refuses_bad_commands(sim):
    names, q, dq, u = sim.joint_state()
    assert len(names) == 12 and names[0] == "FL_hip_joint" and q.shape == dq.shape == (12,)
    od = sim.odometry()
    assert abs(np.linalg.norm(od["quat_xyzw"]) - 1) < 1e-9 and 0.05 < od["position"][2] < sim.stand_height
    with pytest.raises(ValueError, match="joint_names"):
        sim.effort_from(np.zeros(12), names[:11] + ["x"])
    with pytest.raises(ValueError, match="effort"):
        sim.effort_from(np.full(12, np.nan), names)
    rev = sim.effort_from(np.arange(12.0), names[::-1])
    assert np.array_equal(rev, np.arange(12.0)[::-1])
    with pytest.raises(ValueError, match="period_s"):
        FloatingSimLogic("go2", period_s=0.0015)
    with pytest.raises(ValueError, match="robot"):
        FloatingSimLogic("iiwa14")


def test_odometry_refusals_are_counted_by_name(sim):
    c = FloatingControllerLogic({})
    assert c.on_odometry(odom(sim, 10 * MS)) is None
    q = sim.odometry()["quat_xyzw"]
    cases = {"non_finite": odom(sim, 11 * MS, position=np.array([0, 0, np.nan])),
             "non_unit_quaternion": odom(sim, 11 * MS, quat_xyzw=1.5 * q),
             "frame": odom(sim, 11 * MS, frame_id="map"),
             "out_of_order": odom(sim, 9 * MS)}
    for name, od in cases.items():
        assert c.on_odometry(od) == name
    c.on_joint_state(200 * MS, *js(sim))                  # the latest joint state is at 0.2 s
    assert c.on_odometry(odom(sim, 100 * MS)) == "stale"   # 100 ms behind it (> odom_timeout_s 50 ms)
    assert c.on_odometry(odom(sim, 10 * MS)) == "stale"
    assert dict(c.refusals) == {"non_finite": 1, "non_unit_quaternion": 1, "frame": 1, "out_of_order": 1, "stale": 2}
    assert c.odom.stamp_ns == 10 * MS                      # none of them replaced the good one


def test_a_tick_waits_for_its_odometry_then_runs_the_mpc(sim):
    c = FloatingControllerLogic({})
    assert c.on_joint_state(0, *js(sim)) is None           # no odometry yet: wait
    assert c.on_odometry(odom(sim, 0)) is None
    cmd = c.on_odometry_for_pending()
    assert cmd.source == "mpc" and cmd.stamp_ns == 0 and np.all(np.isfinite(cmd.effort))
    assert np.all(np.abs(cmd.effort) <= c.effort_limit)
    assert c.on_joint_state(0, *js(sim)) is cmd            # a re-sent joint state: the same answer
    assert c.on_odometry(odom(sim, 0)) is None and c.refusals == {}   # a re-sent odometry: ignored
    assert c.on_odometry_for_pending() is None
    assert c.solves == 1 and c.ticks == 1
    st = c.status()
    assert st["holds"] == {} and st["refusals"] == {} and len(st["foot_fz"]) == 4
    assert st["base_height_ref"] == pytest.approx(sim.stand_height)


def test_stale_or_missing_odometry_gets_the_damped_joint_hold_and_the_mpc_resumes(sim):
    c = FloatingControllerLogic({"hold_kp": 50.0, "hold_kd": 3.0})
    names, q, dq = js(sim)
    c.on_odometry(odom(sim, 0))
    assert c.on_joint_state(0, names, q, dq).source == "mpc"
    assert c.on_joint_state(30 * MS, names, q, dq) is None          # 30 ms behind: still waits
    h = c.on_joint_state(60 * MS, names, q + 0.01, dq + 0.1)        # 60 ms behind: stale -> hold
    assert (h.source, h.reason) == ("hold", "stale_odometry")
    assert np.allclose(h.effort, np.clip(-3.0 * (dq + 0.1), -c.effort_limit, c.effort_limit))  # holds where it began
    h2 = c.on_joint_state(61 * MS, names, q + 0.02, dq)             # the hold keeps its first target
    assert np.allclose(h2.effort, np.clip(50.0 * -0.01 - 3.0 * dq, -c.effort_limit, c.effort_limit))
    c.on_odometry(odom(sim, 62 * MS))
    assert c.on_joint_state(62 * MS, names, q, dq).source == "mpc"  # good odometry: the MPC, cold-started
    assert c.holds == {"stale_odometry": 2} and c.solves == 2
    z = c.on_joint_state(63 * MS, names, np.full(12, np.nan), dq)
    assert (z.source, z.reason) == ("hold", "non_finite_joint_state") and np.all(z.effort == 0)


def test_a_wait_that_times_out_holds_and_later_ticks_do_not_wait(sim):
    c = FloatingControllerLogic({})
    names, q, dq = js(sim)
    assert c.on_joint_state(0, names, q, dq) is None
    assert c.hold_for(1) is None                                     # not the waiting stamp
    h = c.hold_for(0)
    assert (h.source, h.reason) == ("hold", "no_odometry")
    h = c.on_joint_state(1 * MS, names, q, dq)                       # odometry lost: no more waiting
    assert (h.source, h.reason) == ("hold", "no_odometry") and c.holds == {"no_odometry": 2}
    c.on_odometry(odom(sim, 2 * MS))
    assert c.on_joint_state(2 * MS, names, q, dq).source == "mpc"


def test_bad_configuration_and_reference_are_refused_by_name(sim):
    for cfg, name in [({"nope": 1}, "unknown"), ({"odom_timeout_s": 0.0}, "odom_timeout_s"),
                      ({"hold_kd": -1.0}, "hold_kd"), ({"base_rpy": [0.0, float("nan"), 0.0]}, "base_rpy"),
                      ({"robot": "iiwa14"}, "robot")]:
        with pytest.raises(ValueError, match=name):
            FloatingControllerLogic(cfg)
    c = FloatingControllerLogic({"base_height": 0.3, "yaw_from_odometry": False, "base_rpy": [0.0, 0.0, 0.5]})
    with pytest.raises(ValueError, match="unit"):
        c.set_reference([0, 0, 0.3], [0, 0, 0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        c.set_reference([0, np.nan, 0.3], [0, 0, 0, 1.0])
    c.on_odometry(odom(sim, 0))
    c.on_joint_state(0, *js(sim))
    p, qq = c._ref_pose
    assert p[2] == 0.3 and np.allclose(qq, [0, 0, np.sin(0.25), np.cos(0.25)])
    c.set_reference([0.1, 0.0, 0.27], [0, 0, 0, 1.0])
    c.on_odometry(odom(sim, 1 * MS))
    assert c.on_joint_state(1 * MS, *js(sim)).source == "mpc" and c.status()["base_height_ref"] == 0.27
    assert c.solves == 2                                   # the new reference: a new standing task, solved at once
    c.set_reference([0.1, 0.0, 0.27], [0, 0, 0, 1.0])      # the same pose again: the plan stays
    c.on_odometry(odom(sim, 2 * MS))
    c.on_joint_state(2 * MS, *js(sim))
    assert c.solves == 2


def test_the_floating_nodes_parameters_are_groups_of_the_one_schema():
    """gato_floating_controller / gato_floating_sim declare the schema's groups (docs/parameters.md lists
    them); the logic's defaults are the schema's, so a node started without parameters runs the logic's
    defaults."""
    from gato_ros import params
    from gato_ros.floating_controller_logic import DEFAULTS
    from gato_ros.floating_controller_node import NODE_PARAMETERS
    from gato_ros.param_floating import FLOATING_CONTROLLER, FLOATING_SCHEMAS, FLOATING_SIM

    ctl = params.defaults(FLOATING_CONTROLLER, "go2")
    assert {k: v for k, v in ctl.items() if k not in NODE_PARAMETERS} == DEFAULTS
    assert set(ctl) - set(DEFAULTS) == set(NODE_PARAMETERS)
    assert params.defaults(FLOATING_SIM, "go2")["robot"] == "go2"
    md = params.markdown()
    for node, schema in FLOATING_SCHEMAS.items():
        assert f"## `{node}`" in md and all(f"| `{p.name}` |" in md for p in schema)
    assert params.validate(FLOATING_CONTROLLER, "base_rpy", [0.0, 0.1], allow_read_only=True)  # 2 of 3 refused
