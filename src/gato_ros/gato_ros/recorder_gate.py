"""Waiting for a recorder before a bringup starts commanding (issue 32).

``ros2 bag record`` subscribes to a topic only once it has discovered the topic's publisher. Its
first subscriptions therefore match after the publishers exist, and what they publish before
(the controller's first, volatile, commands) is not in the bag: in loaded lockstep bringups the
first 60-140 commands in 3 of 5 runs. The lockstep world (sim node ``start_recorder``) and the
controller node of the hardware bringup (``GATO_START_RECORDER`` in its environment,
hardware.launch.xml ``record:=true`` with ``ros2 bag record``) wait until the recorder node has
subscribed to the recorded topics that have a publisher, then :data:`START_RECORDER_SETTLE_S`
for the other publishers to match it, or at most a timeout, after which they start anyway with an
error line naming the topics.
"""
from __future__ import annotations

import time

__all__ = ["START_RECORDER_SETTLE_S", "RecorderGate", "recorder_missing"]

#: after the recorder's subscriptions appear in this node's graph: time for the other publishers
#: (the controller's) to discover and match them too (wall clock)
START_RECORDER_SETTLE_S = 0.5


def _fq(namespace: str, name: str) -> str:
    return "/" + "/".join(p for p in (namespace.strip("/"), name.strip("/")) if p)


def recorder_missing(node, recorder: str, topics) -> list:
    """The topics of ``topics`` that have a publisher but no subscription of the node ``recorder``
    in ``node``'s view of the graph ("ns/name": that full name; "name": a node of that name)."""
    want = recorder.strip("/")

    def is_recorder(info) -> bool:
        return (_fq(info.node_namespace, info.node_name) == "/" + want if "/" in want
                else info.node_name == want)

    return [t for t in topics if node.count_publishers(t) > 0
            and not any(is_recorder(i) for i in node.get_subscriptions_info_by_topic(t))]


class RecorderGate:
    """Polls :func:`recorder_missing` (``ready()``): True once the recorder has subscribed to every
    topic that has a publisher and :data:`START_RECORDER_SETTLE_S` has passed since, or once
    ``timeout_s`` has passed (then once an error through ``log_error`` naming the topics)."""

    def __init__(self, node, recorder: str, topics, timeout_s: float, log_info, log_error):
        self.node, self.recorder, self.topics, self.timeout_s = node, recorder, list(topics), float(timeout_s)
        self._info, self._error = log_info, log_error
        self._t0 = time.monotonic()
        self._seen = None
        self.over = not recorder

    def ready(self) -> bool:
        if self.over:
            return True
        now = time.monotonic()
        missing = recorder_missing(self.node, self.recorder, self.topics)
        if not missing:
            if self._seen is None:
                self._seen = now
                self._info(f"recorder {self.recorder} subscribed to the recorded topics")
            self.over = now - self._seen >= START_RECORDER_SETTLE_S
            return self.over
        self._seen = None
        if now - self._t0 < self.timeout_s:
            return False
        self._error(f"recorder {self.recorder} has not subscribed to {', '.join(missing)} after {self.timeout_s:g} s: "
                    "starting without it; its bag misses the start of the run")
        self.over = True
        return True
