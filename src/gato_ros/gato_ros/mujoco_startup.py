"""Start-up of the MuJoCo ros2_control bringup (hardware.launch.xml mujoco:=true).

mujoco_ros2_control starts stepping the physics as soon as its hardware plugin loads,
seconds before the controllers are active: the arm falls with zero torque, the wrist
spins up, every MPC command saturates, ros2_control's limit guard zeroes the efforts and
the loop never recovers. Starting the hardware inactive or pausing from the launch file
comes too late. This node runs the sequence that works, once, then exits 0:

1. wait until every controller in ``controllers`` is loaded and ``inactive``
   (the launch file spawns them with ``--inactive``);
2. ``<mujoco_node>/set_pause`` true, ``<mujoco_node>/reset_world`` to ``keyframe``
   (the robot at rest at the ready pose), ``set_pause`` false;
3. ``<controller_manager>/switch_controller``: activate all of them in ONE strict
   switch (``activate_asap``), so the state broadcaster and the command path start in
   the same control cycle.

The state machine runs on a steady-clock timer: with use_sim_time, a ROS timer would
stop while the simulation is paused. A step that fails, or a sequence not done within
``timeout_s`` (wall clock), ends the node with exit code 1 and one error line naming the
step; SIGINT / SIGTERM end it with 0 (gato_ros.node_util.run).
"""
from __future__ import annotations

import sys
import time

from .node_util import run

__all__ = ["make_node", "main"]



def make_node():
    """Build the start-up node (an rclpy Node driven by gato_ros.node_util.run; see the module
    docstring).

    Parameters: ``controllers`` (string[]: controllers to activate, at least one),
    ``keyframe`` (string: MJCF keyframe, default ``home``), ``controller_manager``
    (default ``/controller_manager``), ``mujoco_node`` (namespace of the simulation
    services, default ``/mujoco_ros2_control_node``), ``timeout_s`` (double > 0, wall
    clock for the whole sequence, default 120 s). ValueError naming the parameter for a
    bad value."""
    from controller_manager_msgs.srv import ListControllers, SwitchController
    from mujoco_ros2_control_msgs.srv import ResetWorld, SetPause
    from rclpy.clock import Clock, ClockType
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    node = Node("gato_mujoco_startup")
    controllers = list(node.declare_parameter("controllers", Parameter.Type.STRING_ARRAY).value or [])
    keyframe = node.declare_parameter("keyframe", "home").value
    cm = node.declare_parameter("controller_manager", "/controller_manager").value
    mj = node.declare_parameter("mujoco_node", "/mujoco_ros2_control_node").value
    timeout_s = float(node.declare_parameter("timeout_s", 120.0).value)
    if not controllers or not all(isinstance(c, str) and c for c in controllers):
        raise ValueError(f"parameter controllers: expected a non-empty list of controller names, got {controllers}")
    if not isinstance(keyframe, str) or not keyframe:
        raise ValueError(f"parameter keyframe: expected a non-empty MJCF keyframe name, got {keyframe!r}")
    if not timeout_s > 0:
        raise ValueError(f"parameter timeout_s: expected > 0 s, got {timeout_s}")
    for name, v in (("controller_manager", cm), ("mujoco_node", mj)):
        if not isinstance(v, str) or not v.startswith("/"):
            raise ValueError(f"parameter {name}: expected an absolute node name (/...), got {v!r}")
    seq = _Sequence(node, controllers, keyframe, timeout_s,
                    list_srv=node.create_client(ListControllers, f"{cm}/list_controllers"),
                    switch_srv=node.create_client(SwitchController, f"{cm}/switch_controller"),
                    pause_srv=node.create_client(SetPause, f"{mj}/set_pause"),
                    reset_srv=node.create_client(ResetWorld, f"{mj}/reset_world"),
                    types=dict(ListControllers=ListControllers, SwitchController=SwitchController,
                               ResetWorld=ResetWorld, SetPause=SetPause))
    # Steady clock: the simulation (and /clock) is paused during part of the sequence.
    node.create_timer(0.1, seq.tick, clock=Clock(clock_type=ClockType.STEADY_TIME))
    return node


class _Sequence:
    """The steps of the start-up, advanced from a 10 Hz steady timer; one request in flight."""

    def __init__(self, node, controllers, keyframe, timeout_s, *, list_srv, switch_srv, pause_srv, reset_srv,
                 types):
        self.node, self.controllers, self.keyframe = node, controllers, keyframe
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.list_srv, self.switch_srv, self.pause_srv, self.reset_srv = list_srv, switch_srv, pause_srv, reset_srv
        self.t = types
        self.step = "wait_controllers"
        self.pending = None          # (future, handler)
        self.last_states = {}
        node.done = False
        node.exit_code = 0
        self.log = node.get_logger()
        self.log.info(f"waiting for {controllers} to be loaded and inactive, then: pause, reset to keyframe "
                      f"'{keyframe}', resume, activate all at once")

    def _fail(self, what: str):
        self.log.error(f"start-up failed at step '{self.step}': {what}")
        print(f"[gato_mujoco_startup] error: start-up failed at step '{self.step}': {what}", file=sys.stderr,
              flush=True)
        self.node.exit_code = 1
        self.node.done = True

    def _call(self, client, request, handler):
        if not client.service_is_ready():
            return
        self.pending = (client.call_async(request), handler)

    def tick(self):
        if self.node.done:
            return
        if self.pending is not None:
            fut, handler = self.pending
            if not fut.done():
                if time.monotonic() > self.deadline:
                    self._fail(f"no answer within timeout_s={self.timeout_s} s")
                return
            self.pending = None
            if fut.exception() is not None:
                self._fail(f"service call raised {fut.exception()!r}")
                return
            handler(fut.result())
            if self.node.done:
                return
        if time.monotonic() > self.deadline:
            detail = f"; controller states {self.last_states}" if self.step == "wait_controllers" else ""
            self._fail(f"not done within timeout_s={self.timeout_s} s{detail}")
            return
        t = self.t
        if self.step == "wait_controllers":
            self._call(self.list_srv, t["ListControllers"].Request(), self._on_list)
        elif self.step == "pause":
            self._call(self.pause_srv, t["SetPause"].Request(paused=True), self._expect("reset"))
        elif self.step == "reset":
            self._call(self.reset_srv, t["ResetWorld"].Request(keyframe=self.keyframe), self._expect("resume"))
        elif self.step == "resume":
            self._call(self.pause_srv, t["SetPause"].Request(paused=False), self._expect("activate"))
        elif self.step == "activate":
            req = t["SwitchController"].Request(activate_controllers=list(self.controllers), deactivate_controllers=[],
                                                strictness=t["SwitchController"].Request.STRICT,
                                                activate_asap=True)
            req.timeout.sec = 10
            self._call(self.switch_srv, req, self._on_switch)

    def _on_list(self, res):
        self.last_states = {c.name: c.state for c in res.controller}
        missing = [c for c in self.controllers if c not in self.last_states]
        if missing:
            return                      # the spawners have not loaded them yet
        active = [c for c in self.controllers if self.last_states[c] == "active"]
        if active:
            self._fail(f"{active} already active: spawn them with --inactive so the simulation can be reset "
                       "before they start")
            return
        if all(self.last_states[c] == "inactive" for c in self.controllers):
            self.log.info(f"{self.controllers} inactive; pausing the simulation")
            self.step = "pause"

    def _expect(self, next_step):
        def handler(res):
            if not res.success:
                self._fail(res.message or "the service reported failure")
                return
            self.log.info(f"{self.step}: ok{(' (' + res.message + ')') if res.message else ''}")
            self.step = next_step
        return handler

    def _on_switch(self, res):
        if not res.ok:
            self._fail(f"switch_controller refused to activate {self.controllers} (see the controller manager log)")
            return
        self.log.info(f"simulation reset to keyframe '{self.keyframe}' and {self.controllers} active")
        self.step = "done"
        self.node.done = True


def main(argv=None) -> int:
    return run(make_node, argv)


if __name__ == "__main__":
    sys.exit(main())
