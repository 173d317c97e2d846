"""Start-up of the MuJoCo ros2_control bringup (hardware.launch.xml mujoco:=true).

mujoco_ros2_control starts stepping the physics as soon as its hardware plugin loads,
seconds before the controllers are active: the arm falls with zero torque, the wrist
spins up, every MPC command saturates, ros2_control's limit guard zeroes the efforts and
the loop never recovers. Starting the hardware inactive or pausing from the launch file
comes too late. This node runs the sequence that works, once, then exits 0:

1. wait until every controller in ``controllers`` is loaded and ``inactive``
   (the launch file spawns them with ``--inactive``);
2. ``<mujoco_node>/set_pause`` true, ``<mujoco_node>/reset_world`` to ``keyframe``
   (the robot at rest at the ready pose);
3. ``<controller_manager>/switch_controller``: activate all of them in ONE strict
   switch (``activate_asap``), so the state broadcaster and the command path start in
   the same control cycle. The simulation stays paused: the controller manager runs on
   simulated time and cycles only when the physics steps, so the node steps it
   (``<mujoco_node>/step_simulation``, one physics step per tick) until the switch is done;
4. with ``command_topic`` (the forward controller's commands topic: a controller node
   outside the controller manager closes the loop), it keeps stepping one physics step
   per tick, so the broadcaster publishes joint states, until the first command arrives
   on that topic. A node that discovers the broadcaster late (DDS, a loaded machine)
   costs wall time here, not simulated time: the arm does not fall meanwhile;
5. ``set_pause`` false: the physics runs with the command path closed.

Before this order, the physics resumed first and the controllers were activated a 10 Hz
tick later: 0.1 s of falling at zero torque, the wrist (A6) at ~3 rad/s at the first
command, more when the controller node's first command came late (0.6 s once: A1 at
16 rad/s, the loop diverged; test_launch_hardware's node-mode run).

The state machine runs on a steady-clock timer: with use_sim_time, a ROS timer would
stop while the simulation is paused. A service call without an answer after
``call_retry_s`` (wall clock, default 5 s) is asked again: on a loaded machine the
controller manager can lose a response ("failed to send response to
/controller_manager/list_controllers (timeout)": CI waited the whole 120 s on that one
call). Listing, pausing and resetting are asked again as they are; a lost answer to the
switch is checked by listing the controllers first (all active: the switch was done). A step that fails, or a sequence not done within
``timeout_s`` (wall clock), ends the node with exit code 1 and one error line naming the
step; SIGINT / SIGTERM end it with 0 (gato_ros.node_util.run).
"""
from __future__ import annotations

import sys
import time

from .node_util import run

__all__ = ["make_node", "main"]

#: The switch_controller request's own timeout [s].
SWITCH_TIMEOUT_S = 10



def make_node():
    """Build the start-up node (an rclpy Node driven by gato_ros.node_util.run; see the module
    docstring).

    Parameters: ``controllers`` (string[]: controllers to activate, at least one),
    ``keyframe`` (string: MJCF keyframe, default ``home``), ``controller_manager``
    (default ``/controller_manager``), ``mujoco_node`` (namespace of the simulation
    services, default ``/mujoco_ros2_control_node``), ``command_topic`` (string: a
    std_msgs/Float64MultiArray commands topic whose first message, after the activation,
    resumes the physics; "" (default): resume right after the activation), ``timeout_s``
    (double > 0, wall clock for the whole sequence, default 120 s), ``call_retry_s`` (double > 0,
    wall clock before an unanswered service call is asked again, default 5 s). ValueError
    naming the parameter for a bad value."""
    from controller_manager_msgs.srv import ListControllers, SwitchController
    from mujoco_ros2_control_msgs.srv import ResetWorld, SetPause, StepSimulation
    from rclpy.clock import Clock, ClockType
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from .node_util import qos

    node = Node("gato_mujoco_startup")
    controllers = list(node.declare_parameter("controllers", Parameter.Type.STRING_ARRAY).value or [])
    keyframe = node.declare_parameter("keyframe", "home").value
    cm = node.declare_parameter("controller_manager", "/controller_manager").value
    mj = node.declare_parameter("mujoco_node", "/mujoco_ros2_control_node").value
    command_topic = node.declare_parameter("command_topic", "").value
    timeout_s = float(node.declare_parameter("timeout_s", 120.0).value)
    call_retry_s = float(node.declare_parameter("call_retry_s", 5.0).value)
    if not controllers or not all(isinstance(c, str) and c for c in controllers):
        raise ValueError(f"parameter controllers: expected a non-empty list of controller names, got {controllers}")
    if not isinstance(keyframe, str) or not keyframe:
        raise ValueError(f"parameter keyframe: expected a non-empty MJCF keyframe name, got {keyframe!r}")
    if not timeout_s > 0:
        raise ValueError(f"parameter timeout_s: expected > 0 s, got {timeout_s}")
    if not call_retry_s > 0:
        raise ValueError(f"parameter call_retry_s: expected > 0 s, got {call_retry_s}")
    for name, v in (("controller_manager", cm), ("mujoco_node", mj)):
        if not isinstance(v, str) or not v.startswith("/"):
            raise ValueError(f"parameter {name}: expected an absolute node name (/...), got {v!r}")
    if not isinstance(command_topic, str) or (command_topic and not command_topic.startswith("/")):
        raise ValueError(f"parameter command_topic: expected an absolute topic name (/...) or \"\", "
                         f"got {command_topic!r}")
    seq = _Sequence(node, controllers, keyframe, timeout_s, command_topic, call_retry_s=call_retry_s,
                    list_srv=node.create_client(ListControllers, f"{cm}/list_controllers"),
                    switch_srv=node.create_client(SwitchController, f"{cm}/switch_controller"),
                    pause_srv=node.create_client(SetPause, f"{mj}/set_pause"),
                    reset_srv=node.create_client(ResetWorld, f"{mj}/reset_world"),
                    step_srv=node.create_client(StepSimulation, f"{mj}/step_simulation"),
                    types=dict(ListControllers=ListControllers, SwitchController=SwitchController,
                               ResetWorld=ResetWorld, SetPause=SetPause, StepSimulation=StepSimulation))
    if command_topic:
        node.create_subscription(Float64MultiArray, command_topic, seq.on_command, qos())
    # Steady clock: the simulation (and /clock) is paused during part of the sequence.
    node.create_timer(0.1, seq.tick, clock=Clock(clock_type=ClockType.STEADY_TIME))
    return node


class _Sequence:
    """The steps of the start-up, advanced from a 10 Hz steady timer; one request in flight
    (and, while paused, one physics step request beside the switch)."""

    def __init__(self, node, controllers, keyframe, timeout_s, command_topic, *, list_srv, switch_srv, pause_srv,
                 reset_srv, step_srv, types, call_retry_s=5.0):
        self.node, self.controllers, self.keyframe = node, controllers, keyframe
        self.command_topic = command_topic
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.call_retry_s = call_retry_s
        self.retries = 0             # service calls asked again after call_retry_s without an answer
        self.list_srv, self.switch_srv, self.pause_srv, self.reset_srv = list_srv, switch_srv, pause_srv, reset_srv
        self.step_srv = step_srv
        self.t = types
        self.step = "wait_controllers"
        self.pending = None          # (future, handler, client, monotonic time of the request)
        self.stepping = None         # the step_simulation future in flight
        self.steps = 0               # physics steps taken while paused
        self.commands = 0            # messages on command_topic since the activation
        self.last_states = {}
        node.done = False
        node.exit_code = 0
        self.log = node.get_logger()
        then = f", wait for the first command on {command_topic}" if command_topic else ""
        self.log.info(f"waiting for {controllers} to be loaded and inactive, then: pause, reset to keyframe "
                      f"'{keyframe}', activate all at once{then}, resume")

    def _fail(self, what: str):
        self.log.error(f"start-up failed at step '{self.step}': {what}")
        print(f"[gato_mujoco_startup] error: start-up failed at step '{self.step}': {what}", file=sys.stderr,
              flush=True)
        self.node.exit_code = 1
        self.node.done = True

    def _call(self, client, request, handler):
        if not client.service_is_ready():
            return
        self.pending = (client.call_async(request), handler, client, time.monotonic())

    def on_command(self, _msg):
        if self.step in ("activate", "first_command"):
            self.commands += 1

    def _step_done(self) -> bool:
        """Collect a finished physics step request; False (the node failed) if it failed."""
        if self.stepping is not None and self.stepping.done():
            fut, self.stepping = self.stepping, None
            if fut.exception() is not None or not fut.result().success:
                why = repr(fut.exception()) if fut.exception() is not None else fut.result().message
                self._fail(f"step_simulation failed: {why}")
                return False
            self.steps += 1
        return True

    def _step_physics(self) -> bool:
        """One physics step of the paused simulation (the controller manager cycles once, the
        broadcaster publishes at its own rate); False when a step request failed."""
        if not self._step_done():
            return False
        if self.stepping is None and self.step_srv.service_is_ready():
            self.stepping = self.step_srv.call_async(self.t["StepSimulation"].Request(steps=1))
        return True

    def tick(self):
        if self.node.done:
            return
        if self.pending is not None:
            fut, handler, client, t_req = self.pending
            if not fut.done():
                if time.monotonic() > self.deadline:
                    self._fail(f"no answer within timeout_s={self.timeout_s} s")
                    return
                # the switch itself may take up to its request's timeout (10 s) at the controller manager
                retry_s = max(self.call_retry_s, SWITCH_TIMEOUT_S + 5.0) if self.step == "activate" else \
                    self.call_retry_s
                if time.monotonic() - t_req > retry_s:
                    self._ask_again(fut, client)
                elif self.step == "activate":
                    self._step_physics()   # the switch happens in a control cycle: step the paused physics
                    return
                else:
                    return
            else:
                self.pending = None
                if fut.exception() is not None:
                    self._fail(f"service call raised {fut.exception()!r}")
                    return
                handler(fut.result())
                if self.node.done:
                    return
        if self.pending is not None:
            return
        if time.monotonic() > self.deadline:
            detail = f"; controller states {self.last_states}" if self.step == "wait_controllers" else ""
            if self.step == "first_command":
                detail = f"; no message on {self.command_topic} after {self.steps} physics steps while paused"
            self._fail(f"not done within timeout_s={self.timeout_s} s{detail}")
            return
        t = self.t
        if self.step == "wait_controllers":
            self._call(self.list_srv, t["ListControllers"].Request(), self._on_list)
        elif self.step == "verify_activate":
            self._call(self.list_srv, t["ListControllers"].Request(), self._on_verify_activate)
        elif self.step == "pause":
            self._call(self.pause_srv, t["SetPause"].Request(paused=True), self._expect("reset"))
        elif self.step == "reset":
            self._call(self.reset_srv, t["ResetWorld"].Request(keyframe=self.keyframe), self._expect("activate"))
        elif self.step == "activate":
            if not self.step_srv.service_is_ready():
                return                  # the switch would wait for a physics step nobody can take
            req = t["SwitchController"].Request(activate_controllers=list(self.controllers), deactivate_controllers=[],
                                                strictness=t["SwitchController"].Request.STRICT,
                                                activate_asap=True)
            req.timeout.sec = SWITCH_TIMEOUT_S
            self._call(self.switch_srv, req, self._on_switch)
        elif self.step == "first_command":
            if self.commands == 0:
                self._step_physics()
                return
            self.log.info(f"first command on {self.command_topic} after {self.steps} physics steps while paused")
            self.step = "resume"
        if self.step == "resume":
            if not self._step_done() or self.stepping is not None:
                return                  # a step still in flight: resume after it
            self._call(self.pause_srv, t["SetPause"].Request(paused=False), self._on_resume)

    def _ask_again(self, fut, client):
        """Give up on an unanswered request and let the step ask again (a switch: list first)."""
        client.remove_pending_request(fut)
        self.pending = None
        self.retries += 1
        self.log.warning(f"step '{self.step}': no answer from {client.srv_name} within call_retry_s="
                         f"{self.call_retry_s:g} s: asking again")
        if self.step == "activate":
            self.step = "verify_activate"

    def _on_verify_activate(self, res):
        states = {c.name: c.state for c in res.controller}
        self.last_states = states
        if all(states.get(c) == "active" for c in self.controllers):
            self.log.info(f"{self.controllers} active (the switch's answer was lost; paused, {self.steps} "
                          "physics steps)")
            self.step = "first_command" if self.command_topic else "resume"
        else:
            self.step = "activate"

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
        self.log.info(f"{self.controllers} active (paused, {self.steps} physics steps)")
        self.step = "first_command" if self.command_topic else "resume"

    def _on_resume(self, res):
        if not res.success:
            self._fail(res.message or "the service reported failure")
            return
        self.log.info(f"simulation reset to keyframe '{self.keyframe}', {self.controllers} active, resumed after "
                      f"{self.steps} physics steps while paused")
        self.step = "done"
        self.node.done = True


def main(argv=None) -> int:
    return run(make_node, argv)


if __name__ == "__main__":
    sys.exit(main())
