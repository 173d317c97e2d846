"""The path of a joint state from the node's callback to the C++ solver (issue 29): a tracing
hook (sys.setprofile) sees the native solve call and counts the Python frames between it and
the callback, and counts the state checks on the way.

What it pins (docs/architecture.md, "The tick path"): the node subscribes
ControllerLogic.on_joint_state_msg itself (reading the node clock, handing its output to the
node's sink), and it calls _tick -> BSQPPlanner.step -> MPCController.step -> BSQP.solve ->
gato._core: five Python frames from the callback, inclusive (on_joint_state, the entry for
arrays, the same five). Each check runs once per tick: the message's structure
(gato.core.messages.joint_state_arrays), then shape / finiteness / plausible range of the
controlled joints' state, the one validator gato.core.state.MeasuredState, whose instance the
planner, MPCController and BSQP.solve take as it is (no MPCController._state check, no
batch_array of the state). Raw arrays at the core's public entry points are still checked.
"""
import ast
import importlib.util
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato import tasks  # noqa: E402
from gato.core.state import MeasuredState, StateError  # noqa: E402
from gato_ros.types import ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = np.asarray(tasks.Q_READY[ROBOT], dtype=np.float64)
S = 1_000_000_000
#: The names under which the core's array checks would see the state (none of them may run on a tick).
STATE_ARGS = {"x_measured", "x0", "xcur_B"}


def _msg(stamp_ns):
    """A sensor_msgs/JointState stand-in (the fields the logic reads)."""
    stamp = SimpleNamespace(sec=stamp_ns // S, nanosec=stamp_ns % S)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp, frame_id=""), name=list(NAMES),
                           position=list(Q0), velocity=[0.0] * 7, effort=[])


def _trace(lg, call):
    """Run ``call()`` under a profile hook; returns (the Python frames on the stack at the first native
    solve, innermost first, as (file, function)), {check: calls}, the output). The native solve: the
    ``solve`` of the compiled core (a pybind11 builtin of ``gato._core*`` / ``gato._cuda``, seen as a
    c_call) called by this controller's solver. Checks: the message's structure, MeasuredState's
    constructor, and the core's array checks when they see the state (``batch_array`` /
    ``to_numpy`` under a name of STATE_ARGS)."""
    at_solve, counts = [], {}

    def native_solve(frame, arg) -> bool:
        return getattr(arg, "__name__", "") == "solve" and str(getattr(arg, "__module__", "")).startswith(
            ("gato._core", "gato._cuda")) and frame.f_locals.get("self") is lg.solver

    def hook(frame, event, arg):
        if event == "c_call" and not at_solve and native_solve(frame, arg):
            f = frame
            while f is not None:
                at_solve.append((f.f_code.co_filename.rsplit("/", 1)[-1], f.f_code.co_name))
                f = f.f_back
        elif event == "call":
            key = (frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name)
            if key in {("messages.py", "joint_state_arrays"), ("state.py", "__init__"), ("controller.py", "_state")} \
                    or (key[1] in ("batch_array", "to_numpy") and frame.f_locals.get("name") in STATE_ARGS):
                counts[key] = counts.get(key, 0) + 1

    sys.setprofile(hook)
    try:
        out = call()
    finally:
        sys.setprofile(None)
    assert out is not None and out.source == "mpc"
    return at_solve, counts, out


def _depth(stack, entry):
    """Python frames from ``entry`` (a function name of the logic) to the native call, inclusive."""
    names = [fn for _, fn in stack]
    assert entry in names, f"{entry} not on the stack at the native solve: {stack}"
    return names.index(entry) + 1


#: Per tick, warm or cold: the message structure once, the state's one validator once; the
#: controller's _state is a pass-through for it (one call, no check), the array checks never see it.
ONCE = {("messages.py", "joint_state_arrays"): 1, ("state.py", "__init__"): 1}


def test_the_node_subscribes_the_logic_entry_itself():
    """controller_node's joint_states subscription: its callback is ``self.logic.on_joint_state_msg``
    (no node method between rclpy and the logic), and the logic gets the node's clock and sink."""
    src = open(importlib.util.find_spec("gato_ros.controller_node").origin).read()
    calls = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)]
    subs = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "create_subscription"
            and len(c.args) >= 3 and isinstance(c.args[1], ast.Constant) and c.args[1].value == "joint_states"]
    assert len(subs) == 1
    assert ast.unparse(subs[0].args[2]) == "self.logic.on_joint_state_msg"
    make = [c for c in calls if ast.unparse(c.func) == "ControllerLogic"]
    assert len(make) == 1 and {k.arg for k in make[0].keywords} >= {"clock", "sink"}


def test_a_joint_state_reaches_the_solver_in_five_python_frames_from_the_callback_checked_once():
    now, sunk = [S], []
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16}, clock=lambda: now[0],
                            sink=lambda out, t_recv: sunk.append((out, t_recv)))
    p = lg.solver.ee_pos(Q0) + 0.05

    def tick(k):
        """Tick k as the node's executor runs it: the subscription callback with the message only."""
        t = now[0] = S + k * 10_000_000
        lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (16, 1))), t)
        return lg.on_joint_state_msg(_msg(t))

    _, cold_counts, out = _trace(lg, lambda: tick(0))        # a cold start: reset, warmup, step
    assert cold_counts == {**ONCE, ("controller.py", "_state"): 3}, cold_counts
    assert sunk[-1][0] is out and isinstance(sunk[-1][1], float)
    assert tick(1).source == "mpc"
    stack, counts, out = _trace(lg, lambda: tick(2))         # the steady path
    path = [fn for _, fn in stack[:_depth(stack, "on_joint_state_msg")]]
    assert path == ["solve", "step", "step", "_tick", "on_joint_state_msg"], path
    assert _depth(stack, "on_joint_state_msg") <= 5
    assert counts == {**ONCE, ("controller.py", "_state"): 1}, counts
    assert sunk[-1][0] is out and len(sunk) == 3
    from gato_ros import inputs      # the arrays' entry (tests, replay drivers): the same five frames
    t2 = now[0] = S + 30_000_000
    stack2, counts2, _ = _trace(lg, lambda: lg.on_joint_state(inputs.joint_state(_msg(t2), t2), t2))
    assert [fn for _, fn in stack2[:_depth(stack2, "on_joint_state")]] == ["solve", "step", "step", "_tick",
                                                                           "on_joint_state"], stack2
    assert counts2 == {**ONCE, ("controller.py", "_state"): 1}, counts2


@pytest.fixture(scope="module")
def fresh_logic():
    """One logic, not yet ticked, for the two tests below (the first only sees refusals, which
    change nothing: one construction instead of two)."""
    return cl.ControllerLogic({"robot": ROBOT, "N": 16})


def test_the_one_validator_and_the_raw_entry_points_refuse_bad_states_by_name(fresh_logic):
    """MeasuredState names the field and the first bad entry; its array is read-only. The core's
    public entry points still check raw arrays (and a MeasuredState of another size)."""
    bad = np.r_[Q0, np.zeros(7)]
    bad[3] = np.nan
    with pytest.raises(StateError, match=r"x_measured: contains NaN or Inf \(first at index 3\)") as e:
        MeasuredState(bad, 14, name="x_measured")
    assert (e.value.reason, e.value.index) == ("nonfinite", 3)
    with pytest.raises(ValueError, match=r"x0: expected shape \(14,\)"):
        MeasuredState(np.zeros(13), 14, name="x0")
    lo, hi = -np.ones(14), np.ones(14)
    with pytest.raises(StateError, match=r"q: index 2 = 5 is beyond the plausible \[-1, 1\]") as e:
        MeasuredState(np.r_[0.0, 0.0, 5.0, np.zeros(11)], 14, name="q", bounds=(lo, hi))
    assert e.value.reason == "range"
    st = MeasuredState(np.r_[Q0, np.zeros(7)], 14)
    with pytest.raises(ValueError):
        st.x[0] = np.nan                 # read-only: the check holds for the instance's life
    np.testing.assert_array_equal(np.asarray(st), st.x)
    lg = fresh_logic
    ref = np.tile(np.r_[lg.solver.ee_pos(Q0), np.zeros(3)], 16)
    with pytest.raises(ValueError, match=r"x_measured: contains NaN or Inf \(first at index 3\)"):
        lg.controller.step(bad, ref)
    with pytest.raises(ValueError, match=r"x_measured: expected shape \(14,\)"):
        lg.controller.step(MeasuredState(np.zeros(7), 7), ref)
    with pytest.raises(ValueError, match=r"xcur_B: contains NaN or Inf"):
        lg.solver.solve(bad, ref)


def test_the_tick_hands_the_planner_a_window_and_records_its_flat_layout(fresh_logic):
    """The reference travels as a ReferenceWindow to the planner, the state as the MeasuredState of
    its one check; SolveInput records the solver's flat (6N,) layout of that window (what gato
    replay re-solves) and the state's array."""
    lg = fresh_logic
    seen, states = [], []
    step = lg.planner.step

    def spy(x, ref, *a, **k):
        seen.append(ref)
        states.append(x)
        return step(x, ref, *a, **k)
    lg.planner.step = spy
    p = lg.solver.ee_pos(Q0) + np.array([0.0, 0.05, 0.05])
    lg.on_reference(ReferenceWindow(S, lg.cfg["dt"], np.tile(p, (16, 1))), S)
    out = lg.on_joint_state_msg(_msg(S), S)
    assert isinstance(seen[0], ReferenceWindow) and seen[0].n_knots == 16 and seen[0].stamp_ns == S
    np.testing.assert_array_equal(out.solve_input.reference, seen[0].solver_layout())
    assert type(states[0]) is MeasuredState
    np.testing.assert_array_equal(states[0].x, np.r_[Q0, np.zeros(7)])
    np.testing.assert_array_equal(out.solve_input.x_measured, states[0].x)
    assert out.plan is out.planner_step.plan and out.plan.seq == 1 and out.plan.joint_names == NAMES
