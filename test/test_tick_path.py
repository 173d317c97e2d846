"""The path of a joint state from the controller logic to the C++ solver (issue 29): a tracing
hook (sys.setprofile) sees the native solve call and counts the Python frames between it and
the logic's entry, and counts the calls of the state checks on the way.

What it pins (docs/architecture.md, "The tick path"): the node's joint-state callback hands the
message to ControllerLogic.on_joint_state_msg -> _tick -> BSQPPlanner.step -> MPCController.step ->
BSQP.solve -> gato._core: five Python frames below the callback (on_joint_state, the entry for
arrays, the same five). The message's structure is checked
once (gato.core.messages.joint_state_arrays), the names / finiteness / plausible range once
(ControllerLogic.on_joint_state); the core's public entry points keep their own cheap shape and
finiteness guards (MPCController._state, gato.core.arrays.batch_array of the state): one each.
"""
import sys
from types import SimpleNamespace

import numpy as np

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato import tasks  # noqa: E402
from gato_ros.types import ReferenceWindow  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]
Q0 = np.asarray(tasks.Q_READY[ROBOT], dtype=np.float64)
S = 1_000_000_000
#: The state checks on the path, by (module file name, function name).
CHECKS = {("messages.py", "joint_state_arrays"), ("controller.py", "_state"), ("arrays.py", "batch_array")}


def _msg(stamp_ns):
    """A sensor_msgs/JointState stand-in (the fields the logic reads)."""
    stamp = SimpleNamespace(sec=stamp_ns // S, nanosec=stamp_ns % S)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp, frame_id=""), name=list(NAMES),
                           position=list(Q0), velocity=[0.0] * 7, effort=[])


def _trace(lg, call):
    """Run ``call()`` under a profile hook; returns (the Python frames on the stack at the native
    solve, innermost first, as (file, function)), {check: calls}). The native solve: the ``solve``
    of the compiled core (a pybind11 builtin of ``gato._core*`` / ``gato._cuda``, seen as a c_call) called by this
    controller's solver."""
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
            if key in CHECKS and (key[1] != "batch_array" or frame.f_locals.get("name") == "xcur_B"):
                counts[key] = counts.get(key, 0) + 1

    sys.setprofile(hook)
    try:
        out = call()
    finally:
        sys.setprofile(None)
    assert out is not None and out.source == "mpc"
    return at_solve, counts


def _depth(stack, entry):
    """Python frames from ``entry`` (a function name of the logic) to the native call, inclusive."""
    names = [fn for _, fn in stack]
    assert entry in names, f"{entry} not on the stack at the native solve: {stack}"
    return names.index(entry) + 1


def test_a_joint_state_reaches_the_solver_in_five_python_frames_and_is_checked_once_per_layer():
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16})
    p = lg.solver.ee_pos(Q0) + 0.05
    for k in range(3):                   # a cold start first, then warm ticks (the steady path)
        t = S + k * 10_000_000
        lg.on_reference(ReferenceWindow(t, lg.cfg["dt"], np.tile(p, (16, 1))), t)
        if k < 2:
            assert lg.on_joint_state_msg(_msg(t), t).source == "mpc"
    stack, counts = _trace(lg, lambda: lg.on_joint_state_msg(_msg(t), t))
    path = [fn for _, fn in stack[:_depth(stack, "on_joint_state_msg")]]
    assert path == ["solve", "step", "step", "_tick", "on_joint_state_msg"], path
    assert _depth(stack, "on_joint_state_msg") <= 5
    from gato_ros import inputs      # the arrays' entry (tests, replay drivers): the same five frames
    t2 = t + 10_000_000
    stack2, _ = _trace(lg, lambda: lg.on_joint_state(inputs.joint_state(_msg(t2), t2), t2))
    assert [fn for _, fn in stack2[:_depth(stack2, "on_joint_state")]] == ["solve", "step", "step", "_tick",
                                                                           "on_joint_state"], stack2
    # the message structure once, the core's two guards once each (names / range: on_joint_state, inline)
    assert counts == {("messages.py", "joint_state_arrays"): 1, ("controller.py", "_state"): 1,
                      ("arrays.py", "batch_array"): 1}, counts


def test_the_tick_hands_the_planner_a_window_and_records_its_flat_layout():
    """The reference travels as a ReferenceWindow to the planner; SolveInput records the solver's
    flat (6N,) layout of that window (what gato replay re-solves)."""
    lg = cl.ControllerLogic({"robot": ROBOT, "N": 16})
    seen = []
    step = lg.planner.step

    def spy(x, ref, *a, **k):
        seen.append(ref)
        return step(x, ref, *a, **k)
    lg.planner.step = spy
    p = lg.solver.ee_pos(Q0) + np.array([0.0, 0.05, 0.05])
    lg.on_reference(ReferenceWindow(S, lg.cfg["dt"], np.tile(p, (16, 1))), S)
    out = lg.on_joint_state_msg(_msg(S), S)
    assert isinstance(seen[0], ReferenceWindow) and seen[0].n_knots == 16 and seen[0].stamp_ns == S
    np.testing.assert_array_equal(out.solve_input.reference, seen[0].solver_layout())
    assert out.plan is out.planner_step.plan and out.plan.seq == 1 and out.plan.joint_names == NAMES
