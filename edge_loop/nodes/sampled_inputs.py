# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Sampled inputs: the newest message of high-rate topics, taken when a node needs it.

A stage that acts at camera rate (15 Hz) but reads sensor topics published at 200+ Hz (the
gripper's TCP pose and grasp state) only ever uses their newest value. Subscribing through the
node's executor costs rclpy's per-callback overhead (wait-set rebuild, task dispatch) at the
sensor rate, measured here at about a quarter of a core for two 240 Hz topics. These readers
live on a helper node that no executor spins, keep only the newest sample (keep-last 1), and
are taken on demand: one deserialisation per use, no Python work per sensor message.
"""

from __future__ import annotations

from typing import Any

import rclpy
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

# Keep-last 1 best effort: matches reliable and best-effort publishers alike.
NEWEST_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                        reliability=ReliabilityPolicy.BEST_EFFORT)


def _never_called(_msg: Any) -> None:
    """Callback of the helper node's subscriptions: no executor spins that node."""


class SampledInputs:
    """Newest-value readers of ``owner``'s topics on a helper node (see the module doc)."""

    def __init__(self, owner: Any, suffix: str = '_sampled') -> None:
        self._owner = owner
        # The helper ignores the process's global arguments (a __node remap would rename it
        # too); topic names are resolved through the owner, so its remaps still apply.
        self._node = rclpy.create_node(
            f'{owner.get_name()}{suffix}', namespace=owner.get_namespace(),
            context=owner.context, use_global_arguments=False,
            start_parameter_services=False)
        self._subs: dict[str, tuple[Any, Any]] = {}

    def add(self, msg_type: Any, topic: str) -> None:
        """Start keeping the newest message of ``topic``."""
        if topic in self._subs:
            raise ValueError(f'topic {topic!r} sampled twice')
        resolved = self._owner.resolve_topic_name(topic)
        sub = self._node.create_subscription(msg_type, resolved, _never_called, NEWEST_QOS)
        self._subs[topic] = (sub, msg_type)

    def newest(self, topic: str) -> Any | None:
        """The newest message received on ``topic`` since the last call, or None."""
        sub, msg_type = self._subs[topic]
        newest = None
        while True:   # keep-last 1 holds at most one; a loop stays right for any depth
            taken = sub.handle.take_message(msg_type, False)
            if taken is None:
                return newest
            newest = taken[0]

    def destroy(self) -> None:
        """Destroy the readers and the helper node (idempotent)."""
        for sub, _ in self._subs.values():
            self._node.destroy_subscription(sub)
        self._subs = {}
        if self._node is not None:
            self._node.destroy_node()
            self._node = None
