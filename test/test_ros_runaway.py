"""The controller logic's runaway guard (issue 32, gato_ros.controller_runaway): a plausible but
lost state (a joint beyond runaway_factor x its velocity limit at two ticks in a row, beyond 10x
at one, or 0.5 rad beyond its position limits) switches to a damped joint hold at the positions
of the trip within the tick that sees it, reported (state runaway with the reason, fallback_reason
runaway, an error logged); after runaway_hold_s, once every joint is under its limit, the planner
restarts cold. ROS-free, synthetic time; the closed-loop case steps a pinocchio world under the
logic's commands with an unmodelled torque kick on the wrist."""
import json

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato import tasks  # noqa: E402
from gato.worlds import PinocchioWorld  # noqa: E402
from gato_ros.types import JointStateSample, ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = tasks.Q_READY[ROBOT]
S = 1_000_000_000
TICK = 10_000_000  # 100 Hz


def make(**cfg):
    logs = []
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16, **cfg}, log=lambda level, text: logs.append((level, text)))
    return lg, logs


def tick(lg, k, q=Q0, qd=None):
    """Tick k (100 Hz from 1 s): a fixed EE target window, then the joint state (q, qd)."""
    t = S + k * TICK
    p = lg.ee_position(Q0) + np.array([0.0, 0.03, 0.03])
    lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (lg.cfg["N"], 1))), t)
    qd = np.zeros(7) if qd is None else np.asarray(qd, float)
    return lg.on_joint_state(JointStateSample(t, list(NAMES), np.asarray(q, float), qd), t)


def wrist(speed):
    qd = np.zeros(7)
    qd[6] = speed
    return qd


def test_beyond_3x_at_two_ticks_trips_holds_and_reports_then_the_planner_restarts_cold():
    lg, logs = make(runaway_hold_s=0.05)
    lim = lg._guard.qd_limit[6]
    assert tick(lg, 0).source == "mpc"
    # one tick beyond 3x is forgiven (an unmodelled push until the next plan knows it)
    assert tick(lg, 1, qd=wrist(4 * lim)).source == "mpc"
    assert tick(lg, 2).source == "mpc"
    assert tick(lg, 3, qd=wrist(4 * lim)).source == "mpc"
    out = tick(lg, 4, qd=wrist(-4 * lim))                        # the second tick in a row beyond 3x
    st = lg.status
    assert out.source == "runaway_hold" and out.planner == "" and out.solve_input is None
    assert (st.state, st.fallback_reason, st.fallback_switches, st.active_planner) == ("runaway", "runaway", 1, "")
    assert "joint 7 velocity" in st.reason and "beyond 3x its limit" in st.reason, st.reason
    assert ("error", f"runaway: {st.reason}") in logs
    # the hold brakes the spinning wrist (torque against its motion), within the effort limits
    assert out.effort[6] > 0 and np.all(np.abs(out.effort) <= lg.effort_limit)
    # held: for runaway_hold_s, and while a joint is beyond its limit
    assert [tick(lg, k, qd=wrist(-0.5 * lim)).source for k in (5, 6, 7, 8)] == ["runaway_hold"] * 4
    assert tick(lg, 9, qd=wrist(-1.5 * lim)).source == "runaway_hold"     # 0.05 s on, still too fast
    back = tick(lg, 10)
    assert back.source == "mpc" and back.solve_input.reset                 # a cold start at the measured state
    assert (lg.status.state, lg.status.fallback_reason) == ("running", "")
    assert lg.status.fallbacks == 6 and lg.status.fallback_switches == 1 and lg._guard.trips == 1
    assert any(level == "info" and "runaway hold released" in text for level, text in logs)


def test_beyond_10x_or_far_beyond_a_position_limit_trips_at_once():
    lg, _ = make()
    lim = lg._guard.qd_limit[6]
    tick(lg, 0)
    assert tick(lg, 1, qd=wrist(11 * lim)).source == "runaway_hold"       # still a plausible state (< 100x)
    assert "beyond 10x its limit" in lg.status.reason and lg.status.rejected_range == 0
    lg2, _ = make()
    tick(lg2, 0)
    q = Q0.copy()
    q[3] = lg2._guard.q_lo[3] - 0.1                                      # 0.6 rad below joint 4's limit
    out = tick(lg2, 1, q=q)
    assert out.source == "runaway_hold" and "joint 4 position" in lg2.status.reason
    # the hold holds the positions of the trip: gravity compensated there, no velocity to damp
    hold = out.effort
    assert np.all(np.isfinite(hold)) and np.all(np.abs(hold) <= lg2.effort_limit)


def test_runaway_factor_0_turns_it_off_and_bad_values_are_refused_by_name():
    lg, _ = make(runaway_factor=0.0)
    lim = lg.solver.model.velocityLimit[6]
    assert [tick(lg, k, qd=wrist(5 * lim)).source for k in range(3)] == ["mpc"] * 3
    assert lg._guard is None and lg.status.state == "running"
    with pytest.raises(ValueError, match="runaway_factor"):
        make(runaway_factor=0.5)
    with pytest.raises(ValueError, match="runaway_factor"):
        make(runaway_factor=-1.0)
    on, _ = make()
    assert "runaway_factor" in on.validate_changes({"runaway_factor": 1.0})
    assert json.loads(on.status.params_json)["runaway_factor"] == 3.0
    # live: a stricter factor governs from the next tick
    on.request_changes({"runaway_factor": 1.5})
    lim = on._guard.qd_limit[6]
    assert tick(on, 0, qd=wrist(2 * lim)).source == "mpc"
    assert tick(on, 1, qd=wrist(2 * lim)).source == "runaway_hold"
    assert json.loads(on.status.params_json)["runaway_factor"] == 1.5


def test_closed_loop_kick_on_the_wrist_trips_within_one_tick_and_the_hold_recovers_it():
    """The logic's commands drive a pinocchio world (1 ms physics, 100 Hz ticks, zero-order
    hold); a 10 N*m kick no model knows on joint 7 for 50 ms spins it past 10x its limit. The
    guard trips at the first tick after the crossing, the hold stops the wrist, and the planner
    takes over again."""
    lg, _ = make(runaway_hold_s=0.2)
    world = PinocchioWorld(lg.urdf)
    q, dq = Q0.copy(), np.zeros(7)
    lim = lg._guard.qd_limit
    crossed = tripped = released = None
    peak_after = 0.0
    for k in range(80):
        t = k * 0.01
        out = tick(lg, k, q=q, qd=dq)
        if out.source == "runaway_hold" and tripped is None:
            tripped = t
        if tripped is not None and released is None and out.source == "mpc":
            released = t
        for _ in range(10):
            u = out.effort.copy()
            if 0.1 <= t < 0.15:
                u[6] += 10.0
            q, dq = world.step(q, dq, u, 0.001)
            t += 0.001
            if crossed is None and abs(dq[6]) > 10 * lim[6]:
                crossed = t
            if released is not None:
                peak_after = max(peak_after, float(np.max(np.abs(dq) / lim)))
    assert crossed is not None and tripped is not None, (crossed, tripped)
    assert 0.0 <= tripped - crossed <= 0.01 + 1e-9, (crossed, tripped)    # within one control period
    assert released is not None and released >= tripped + 0.2 - 1e-9
    assert peak_after < 1.0 and np.all(np.isfinite(q)), peak_after     # back under the limits with the planner
    assert lg.status.fallback_switches == 1 and lg.status.state == "running"


def test_every_controller_state_is_documented_in_the_status_message():
    """ControllerStatus.msg's comment above ``state`` lists every state the controller logic sets
    (the runaway guard's "runaway" among them), and ``fallback_reason``'s lists "runaway"."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src"
    msg = (root / "gato_msgs" / "msg" / "ControllerStatus.msg").read_text()
    state_doc = msg.split("string state")[0].split("std_msgs/Header header")[1]
    reason_doc = msg.split("string fallback_reason")[0].rsplit("string active_planner", 1)[1]
    set_states = set()
    for src in sorted((root / "gato_ros" / "gato_ros").glob("controller_*.py")):
        set_states |= set(re.findall(r'_set_state\(\s*"(\w+)"', src.read_text()))
    assert {"running", "hold", "runaway"} <= set_states, set_states   # the scan sees the logic's states
    documented = set(re.findall(r'"(\w+)"', state_doc))
    assert set_states <= documented, sorted(set_states - documented)
    assert '"runaway"' in reason_doc
