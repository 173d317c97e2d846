"""What exact replay from any cut costs the controller: the solver state carried in every
gato_msgs/SolveInput (docs/replay.md).

Measures, on the ROS-free controller logic (gato_ros.controller_logic) driven by a crude
plant along a figure-8 (iiwa14 by default, the shipped parameters: N=32, ADMM joint-limit
rows), per tick:

- the serialized size of SolveInput with and without the solver state (rclpy's CDR
  serializer, what DDS and a bag carry) [bytes];
- the tick time (ControllerLogic.on_joint_state: solve, safety rules, message building)
  with and without capturing the state, and the conversion of SolveInput to its message
  with and without the state [us]; interleaved in rounds so both see the same machine load.

Usage: python bench/bench_replay_state.py [--robot iiwa14] [--ticks 300] [--rounds 5]
Prints a Markdown section (the figures of docs/benchmarks_recording.md, "Exact replay").
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from run_info import short_commit


def _ticks(robot: str, n: int, capture: bool):
    """(tick times [s], SolveInput objects) of n ticks of a fresh ControllerLogic."""
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.types import JointStateSample, ReferenceWindow

    logic = ControllerLogic({"robot": robot, "reference_sync": False})
    ctrl = logic.controller
    if not capture:
        ctrl.carried_state = lambda: None     # what the controller did before the state was carried
    from gato.references import Figure8
    from gato.tasks import Q_READY

    q0 = np.asarray(Q_READY[robot], dtype=np.float64)
    ee0 = ctrl.solver.ee_pos(q0)
    fig8 = Figure8(ee0, 0.1, 0.1, theta=np.pi / 2, period=4.0)   # in the y-z plane through the ready pose
    N, dt = int(ctrl.solver.N), float(ctrl.solver.dt)
    x = np.r_[q0, np.zeros(logic.nv)]
    times, inputs = [], []
    for i in range(n):
        t_ns = (i + 1) * 10_000_000
        logic.on_reference(ReferenceWindow(t_ns, dt, fig8.positions(i * 0.01 + np.arange(N) * dt)), t_ns)
        js = JointStateSample(t_ns, list(logic.joint_names), x[:logic.nq].copy(), x[logic.nq:].copy())
        t0 = time.perf_counter()
        out = logic.on_joint_state(js, t_ns)
        times.append(time.perf_counter() - t0)
        inputs.append(out.solve_input)
        x = x + 0.01 * np.r_[x[logic.nq:], np.clip(out.effort, -20, 20) * 0.05]
    return np.array(times), inputs


def _capture_times(robot: str, n: int):
    """Times of MPCController.carried_state() alone (what the tick adds besides the message)."""
    from gato_ros.controller_logic import ControllerLogic

    logic = ControllerLogic({"robot": robot})
    ctrl = logic.controller
    from gato.tasks import Q_READY

    x = np.r_[np.asarray(Q_READY[robot], dtype=np.float64), np.zeros(logic.nv)]
    ctrl.reset(x)
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        ctrl.carried_state()
        ts.append(time.perf_counter() - t0)
    return np.array(ts)


def _convert_times(inputs):
    from gato_ros import conversions as cv

    ts = []
    for si in inputs:
        t0 = time.perf_counter()
        cv.solve_input_to_msg(si)
        ts.append(time.perf_counter() - t0)
    return np.array(ts)


def _sizes(inputs):
    """(serialized sizes [bytes], serialization times [s]) of the SolveInput messages (rclpy's
    CDR serializer: the work rclpy's publish does before handing the bytes to DDS)."""
    from rclpy.serialization import serialize_message

    from gato_ros import conversions as cv

    sizes, ts = [], []
    for si in inputs:
        m = cv.solve_input_to_msg(si)
        t0 = time.perf_counter()
        b = serialize_message(m)
        ts.append(time.perf_counter() - t0)
        sizes.append(len(b))
    return np.array(sizes), np.array(ts)


def _row(name, a, scale=1e6, unit="us"):
    a = np.asarray(a) * scale
    return (f"| {name} | {a.size} | {np.median(a):.1f} {unit} | {np.percentile(a, 90):.1f} {unit} | "
            f"{np.percentile(a, 99):.1f} {unit} | {a.max():.1f} {unit} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--ticks", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    with_t, without_t, conv_with, conv_without = [], [], [], []
    sizes_with = sizes_without = None
    state_len = 0
    for _ in range(a.rounds):
        t1, in1 = _ticks(a.robot, a.ticks, True)
        t0, in0 = _ticks(a.robot, a.ticks, False)
        with_t.append(t1[10:])          # the first ticks build caches
        without_t.append(t0[10:])
        conv_with.append(_convert_times(in1[10:]))
        conv_without.append(_convert_times(in0[10:]))
        if sizes_with is None:
            (sizes_with, ser_with), (sizes_without, ser_without) = _sizes(in1[10:]), _sizes(in0[10:])
            state_len = in1[-1].solver_state.size
    load1 = os.getloadavg()[0]
    rev = short_commit()
    per_round = [float(np.median(w) - np.median(o)) * 1e6 for w, o in zip(with_t, without_t)]
    print(f"## Exact replay: what the solver state costs per tick ({time.strftime('%Y-%m-%d')}, {rev})\n")
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {load0:.1f} before / {load1:.1f} after (shared machine).")
    print(f"Command: `python bench/bench_replay_state.py --robot {a.robot} --ticks {a.ticks} --rounds {a.rounds}` "
          "(ControllerLogic with the shipped parameters: N=32, B=1, 1 SQP iteration, ADMM joint-limit rows; "
          "figure-8 reference; with and without capturing the state, interleaved per round).\n")
    print(f"Solver state: {state_len} float64 per tick "
          f"({state_len * 8} bytes: Schur duals N*nx, rho, its factor, ADMM rho scale, per row group 2 flags + "
          "4 x N x rows).\n")
    print("| SolveInput, serialized (CDR) | median | max |\n|---|---|---|")
    print(f"| without the solver state | {int(np.median(sizes_without))} B | {int(sizes_without.max())} B |")
    print(f"| with the solver state | {int(np.median(sizes_with))} B | {int(sizes_with.max())} B |\n")
    print("| measure | n | median | p90 | p99 | max |\n|---|---|---|---|---|---|")
    print(_row("tick (on_joint_state), state captured", np.concatenate(with_t)))
    print(_row("tick (on_joint_state), not captured", np.concatenate(without_t)))
    print(_row("MPCController.carried_state() (the capture)", _capture_times(a.robot, 2000)))
    print(_row("SolveInput -> message, with the state", np.concatenate(conv_with)))
    print(_row("SolveInput -> message, without", np.concatenate(conv_without)))
    print(_row("message serialization (rclpy), with the state", ser_with))
    print(_row("message serialization (rclpy), without", ser_without))
    print(f"\nMedian tick difference per round (captured - not): "
          f"{', '.join(f'{d:+.1f}' for d in per_round)} us.")


if __name__ == "__main__":
    main()
