"""Waiting for a recorder before a bringup starts commanding (issue 32).

``ros2 bag record`` subscribes to a topic only once it has discovered the topic's publisher. Its
first subscriptions therefore match after the publishers exist, and what they publish before
(the controller's first, volatile, commands) is not in the bag: in loaded lockstep bringups the
first 60-140 commands in 3 of 5 runs. The lockstep world (sim node ``start_recorder``) and the
controller node of the hardware bringup (its parameter ``start_recorder``,
hardware.launch.xml ``record:=true`` with ``ros2 bag record``) wait until the recorder node has
subscribed to the recorded topics that have a publisher, then :data:`START_RECORDER_SETTLE_S`
for the other publishers to match it, or at most a timeout, after which they start anyway with an
error line naming the topics.
"""
from __future__ import annotations

import re
import time

__all__ = ["START_RECORDER_SETTLE_S", "RecorderGate", "recorder_missing", "recorder_subscribes"]

#: after the recorder's subscriptions appear in this node's graph: time for the other publishers
#: (the controller's) to discover and match them too (wall clock)
START_RECORDER_SETTLE_S = 0.5


def _fq(namespace: str, name: str) -> str:
    return "/" + "/".join(p for p in (namespace.strip("/"), name.strip("/")) if p)


def recorder_subscribes(node, recorder: str, topic: str) -> bool:
    """True when the node ``recorder`` ("ns/name": that full name; "name": a node of that name) has
    a subscription on ``topic`` in ``node``'s view of the graph."""
    want = recorder.strip("/")

    def is_recorder(info) -> bool:
        return (_fq(info.node_namespace, info.node_name) == "/" + want if "/" in want
                else info.node_name == want)

    return any(is_recorder(i) for i in node.get_subscriptions_info_by_topic(topic))


def recorder_missing(node, recorder: str, topics) -> list:
    """The topics of ``topics`` that have a publisher but no subscription of the node ``recorder``."""
    return [t for t in topics if node.count_publishers(t) > 0 and not recorder_subscribes(node, recorder, t)]


class RecorderGate:
    """Polls :func:`recorder_missing` (``ready()``): True once the recorder has subscribed to every
    topic that has a publisher and :data:`START_RECORDER_SETTLE_S` has passed since, or once
    ``timeout_s`` has passed (then once an error through ``log_error`` naming the topics)."""

    def __init__(self, node, recorder: str, topics, timeout_s: float, log_info, log_error):
        # recorder: one node name, or several separated by commas or spaces ("gato_recorder rosbag2_recorder")
        self.recorders = [r for r in re.split(r"[,\s]+", recorder) if r]
        self.node, self.topics, self.timeout_s = node, list(topics), float(timeout_s)
        self._info, self._error = log_info, log_error
        self._t0 = time.monotonic()
        self._seen = None
        self._told = set()
        self.over = not self.recorders

    def ready(self) -> bool:
        if self.over:
            return True
        now = time.monotonic()
        missing = {r: recorder_missing(self.node, r, self.topics) for r in self.recorders}
        for r in self.recorders:
            if not missing[r] and r not in self._told:
                self._told.add(r)
                self._info(f"recorder {r} subscribed to the recorded topics")
        if not any(missing.values()):
            if self._seen is None:
                self._seen = now
            self.over = now - self._seen >= START_RECORDER_SETTLE_S
            return self.over
        self._seen = None
        if now - self._t0 < self.timeout_s:
            return False
        for r, m in missing.items():
            if m:
                self._error(f"recorder {r} has not subscribed to {', '.join(m)} after {self.timeout_s:g} s: "
                            "starting without it; its bag misses the start of the run")
        self.over = True
        return True
