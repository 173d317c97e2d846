"""The controller node's outputs for RViz / Foxglove / rqt_robot_monitor without ROS:
gato_ros.plan_view (the plan's EE path by forward kinematics of its knots, the batch rows, the
reference window; the rate limit) and gato_ros.health (OK / WARN / ERROR with reasons, the
stalled-solver sequence OK -> WARN -> ERROR -> OK). Synthetic clocks, no wall time."""
from types import SimpleNamespace

import numpy as np
import pytest

from gato_ros.health import ERROR, OK, WARN, Health
from gato_ros.plan_view import RateLimiter, plan_view
from gato_ros.types import Plan, SolveInput

MS = 1_000_000
NQ, N = 2, 4


def _ee1(q):
    """A planar 2-link arm (links 1 m): the EE of joint positions q."""
    return np.array([np.cos(q[0]) + np.cos(q[0] + q[1]), np.sin(q[0]) + np.sin(q[0] + q[1]), 0.0])


def _ee(qs):
    """The EE path of many configurations (plan_view's ee_path)."""
    return np.array([_ee1(q) for q in qs])


def _row(qs):
    """A flat plan row [x_0, u_0, ..., x_{N-1}] with x = [q; 0], u = 0."""
    out = []
    for k, q in enumerate(qs):
        out += list(q) + [0.0] * NQ
        if k < len(qs) - 1:
            out += [0.0] * NQ
    return np.array(out)


def _tick(rows, best, ref=None):
    qs = [np.array([[0.1 * k + b, -0.2 * k] for k in range(N)]) for b in range(rows)]
    xu = np.stack([_row(q) for q in qs])
    plan = Plan(stamp_ns=5 * MS, knot_dt=0.03, nx=2 * NQ, nu=NQ, n_knots=N, joint_names=["a", "b"], xu=xu[best])
    step = SimpleNamespace(best_id=best, solve=SimpleNamespace(xu=xu))
    si = None
    if ref is not None:
        si = SolveInput(stamp_ns=5 * MS, tick=1, joint_names=["a", "b"], x_measured=np.zeros(4),
                        reference=np.c_[ref, np.zeros((N, 3))].ravel(), xu_warm=xu[0])
    return SimpleNamespace(plan=plan, step=step, solve_input=si), qs


def test_plan_view_is_the_forward_kinematics_of_the_plan_knots_and_the_reference_window():
    ref = np.arange(3 * N, dtype=float).reshape(N, 3)
    out, qs = _tick(1, 0, ref)
    v = plan_view(out, _ee, NQ)
    assert v.stamp_ns == 5 * MS and v.knot_dt == 0.03 and v.best == 0
    assert np.allclose(v.ee, [_ee1(q) for q in qs[0]])
    assert v.rows.shape == (1, N, 3) and np.allclose(v.reference, ref)


def test_plan_view_batch_rows_with_the_winner_and_no_view_without_a_plan():
    out, qs = _tick(3, 2)
    v = plan_view(out, _ee, NQ, batch_rows=8)
    assert v.rows.shape == (3, N, 3) and v.best == 2
    for b in range(3):
        assert np.allclose(v.rows[b], [_ee1(q) for q in qs[b]])
    assert np.allclose(v.ee, v.rows[2])                  # the published plan is the winner's
    assert plan_view(out, _ee, NQ, batch_rows=2).rows.shape == (2, N, 3)
    assert plan_view(out, _ee, NQ).rows.shape == (1, N, 3)
    assert plan_view(SimpleNamespace(plan=None), _ee, NQ) is None     # hold / fallback ticks


def test_rate_limiter_lets_one_event_per_period_through_and_follows_clock_jumps():
    r = RateLimiter(10.0)
    ticks = [k * 10 * MS for k in range(101)]           # 1 s of 100 Hz ticks
    assert sum(r.due(t) for t in ticks) == 11           # t = 0, 0.1, ..., 1.0
    assert r.due(50_000 * MS)                           # after a gap: at once, then on the new schedule
    assert not r.due(50_050 * MS) and r.due(50_100 * MS)
    assert not RateLimiter(0.0).due(0)
    every = RateLimiter(1000.0)
    assert all(every.due(t) for t in ticks)             # above the tick rate: every tick


def _status(**kw):
    base = dict(state="running", reason="", ticks=0, deadline_misses=0, fallback_switches=0, fallbacks=0, holds=0,
                stale_events=0, rejected_nonfinite=0, rejected_names=0, solve_us=0.0, latency_us=0.0,
                active_planner="bsqp", fallback_reason="")
    base.update(kw)
    return SimpleNamespace(**base)


def _step(iters=1, kkt=True):
    stats = SimpleNamespace(kkt_converged=np.array([kkt]))
    return SimpleNamespace(iterations=iters, best_id=0, solve=SimpleNamespace(stats=stats))


def _run(h, st, t0_ms, t1_ms, miss=False, source="mpc"):
    """Ticks every 10 ms in [t0, t1): each a miss (deadline_misses + 1) when ``miss``."""
    for t in range(t0_ms, t1_ms, 10):
        st.ticks += 1
        st.deadline_misses += int(miss)
        h.on_tick(t * MS, st, SimpleNamespace(source=source, step=_step() if source == "mpc" else None))


def test_health_goes_ok_warn_error_and_back_to_ok_for_a_stalled_solver():
    h, st = Health(error_after_s=2.0, recover_s=1.0), _status()
    _run(h, st, 0, 1000)
    r = h.report(1000 * MS, st)
    assert r.level == OK and "planner bsqp in control" in r.message
    vals = dict(r.values)
    assert vals["sqp_iterations_mean"] == "1.00" and vals["kkt_converged_fraction"] == "1.00"
    assert vals["ticks_since_last_report"] == "100"
    # the solver stalls: misses, then the OSC fallback commands
    _run(h, st, 1000, 1030, miss=True)
    st.state, st.fallback_reason, st.active_planner = "fallback", "deadline", "osc"
    _run(h, st, 1030, 2000, source="osc_fallback")
    r = h.report(2000 * MS, st)
    assert r.level == WARN and "planner degraded for 1.0 s" in r.message and "OSC fallback in control (deadline)" \
        in r.message, r.message
    _run(h, st, 2000, 3100, source="osc_fallback")
    r = h.report(3100 * MS, st)
    assert r.level == ERROR and "planner degraded for 2.1 s" in r.message
    # the stall is lifted: BSQP back, healthy ticks; OK once recover_s passed without a bad tick
    st.state, st.fallback_reason, st.active_planner = "running", "", "bsqp"
    _run(h, st, 3100, 3600)
    assert h.report(3600 * MS, st).level == ERROR         # 0.5 s since the last bad tick: still degraded
    _run(h, st, 3600, 4200)
    r = h.report(4200 * MS, st)
    assert r.level == OK, r.message


def test_health_errors_on_hold_and_warns_on_stale_reference_waiting_and_refused_inputs():
    h = Health()
    st = _status(state="hold", reason="stale joint states: last good one received 0.2 s ago")
    r = h.report(0, st)
    assert r.level == ERROR and r.message.startswith("hold: stale joint states")
    st = _status(reason="EE reference stale: following the last window to its end")
    assert h.report(MS, st).level == WARN
    assert h.report(2 * MS, _status(state="waiting", reason="no joint state received yet")).level == WARN
    h2 = Health()
    assert h2.report(0, _status(), {"goals_rejected": 0}).level == OK
    r = h2.report(MS, _status(), {"goals_rejected": 2, "unknown_frame": 1})
    assert r.level == WARN and "goals_rejected +2" in r.message and "unknown_frame +1" in r.message
    assert h2.report(2 * MS, _status(), {"goals_rejected": 2, "unknown_frame": 1}).level == OK


def test_health_in_lockstep_counts_deadline_misses_without_degrading():
    h, st = Health(misses_degrade=False), _status()
    _run(h, st, 0, 3000, miss=True)                     # every tick late: the lockstep world waited
    r = h.report(3000 * MS, st)
    assert r.level == OK and dict(r.values)["deadline_misses_since_last_report"] == "300"


def test_ee_path_is_the_solvers_ee_at_every_row():
    gato = pytest.importorskip("gato")
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.plan_view import EEPath

    lg = ControllerLogic({"robot": "iiwa14", "N": 8})
    fk = EEPath(lg.urdf, gato.robot_info("iiwa14")["ee_frame"], lg.solver_joint_names)
    qs = np.random.default_rng(3).uniform(-1.0, 1.0, (20, 7))
    assert np.allclose(fk(qs), [lg.ee_position(q) for q in qs], atol=1e-12)
    with pytest.raises(ValueError, match="no frame 'nope'"):
        EEPath(lg.urdf, "nope", lg.solver_joint_names)


@pytest.mark.parametrize("frame", ["world", "base", "w", "a_longer_frame"])
def test_path_cdr_bytes_deserialize_to_the_path_rclpy_would_send(frame):
    pytest.importorskip("rclpy")
    Path = pytest.importorskip("nav_msgs.msg").Path
    from rclpy.serialization import deserialize_message, serialize_message

    from gato_ros.path_cdr import PathCDR

    pts = np.random.default_rng(5).normal(size=(32, 3))
    b = PathCDR(frame, 32)(5_123_456_789, 31_250_000, pts)
    m = deserialize_message(b, Path)
    assert m.header.frame_id == frame and (m.header.stamp.sec, m.header.stamp.nanosec) == (5, 123456789)
    assert len(m.poses) == 32
    for k, ps in enumerate(m.poses):
        assert (ps.header.stamp.sec, ps.header.stamp.nanosec) == divmod(5_123_456_789 + k * 31_250_000, 10**9)
        assert ps.header.frame_id == frame and ps.pose.orientation.w == 1.0
        assert (ps.pose.position.x, ps.pose.position.y, ps.pose.position.z) == tuple(pts[k])
    assert len(serialize_message(m)) == len(b)      # same layout (Fast CDR leaves padding bytes unset)


def test_health_single_late_ticks_are_counted_not_degraded():
    h, st = Health(miss_run=3), _status()
    for k in range(300):                                 # every 5th tick late, never 3 in a row
        st.ticks += 1
        st.deadline_misses += int(k % 5 == 0)
        h.on_tick(k * 10 * MS, st, SimpleNamespace(source="mpc", step=_step()))
    r = h.report(3000 * MS, st)
    assert r.level == OK and dict(r.values)["deadline_misses_since_last_report"] == "60"
    _run(h, st, 3000, 3030, miss=True)                   # three in a row: degraded
    assert h.report(3030 * MS, st).level == WARN


def test_plan_markers_show_the_plan_reference_batch_rows_with_the_winner_and_the_target():
    from gato_ros import plan_markers as pm

    ref = np.arange(3 * N, dtype=float).reshape(N, 3)
    out, _ = _tick(3, 1, ref)
    v = plan_view(out, _ee, NQ, batch_rows=8)
    ms = {(m.ns, m.id): m for m in pm.plan_markers(v)}
    assert sorted(ms) == [("batch", 0), ("batch", 1), ("batch", 2), ("plan", 0), ("plan_knots", 0),
                          ("reference", 0), ("target", 0)]
    assert ms["plan", 0].type == pm.LINE_STRIP and np.array_equal(ms["plan", 0].points, v.ee)
    assert ms["plan_knots", 0].type == pm.SPHERE_LIST and np.array_equal(ms["plan_knots", 0].points, v.ee)
    assert ms["reference", 0].action == pm.ADD and np.array_equal(ms["reference", 0].points, ref)
    for b in range(3):
        assert np.array_equal(ms["batch", b].points, v.rows[b])
    # the winner (row 1, the published plan) highlighted: opaque orange and wider than the others
    assert ms["batch", 1].color == pm.ORANGE and ms["batch", 1].scale[0] > ms["batch", 0].scale[0]
    assert ms["batch", 0].color == ms["batch", 2].color == pm.GREY
    assert np.array_equal(ms["batch", 1].points, ms["plan", 0].points)
    assert ms["target", 0].type == pm.SPHERE and np.array_equal(ms["target", 0].points, ref[:1])

    # no batch rows: no batch markers; no reference: the reference and the target are deleted
    out, _ = _tick(1, 0)
    ms = {(m.ns, m.id): m for m in pm.plan_markers(plan_view(out, _ee, NQ))}
    assert sorted(ms) == [("plan", 0), ("plan_knots", 0), ("reference", 0), ("target", 0)]
    assert ms["reference", 0].action == ms["target", 0].action == pm.DELETE


def test_plan_marker_constants_are_visualization_msgs_values():
    Marker = pytest.importorskip("visualization_msgs.msg", reason="visualization_msgs not built "
                                 "(scripts/setup.sh builds src/vendor/visualization_msgs)").Marker
    from gato_ros import plan_markers as pm

    assert (pm.LINE_STRIP, pm.SPHERE, pm.SPHERE_LIST, pm.ADD, pm.DELETE) == (
        Marker.LINE_STRIP, Marker.SPHERE, Marker.SPHERE_LIST, Marker.ADD, Marker.DELETE)
