# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The check's recorder: the header stamp and receive time of every output, taken raw.

One thread takes the serialized samples of a few topics (only the header is read), so the
check's own process adds as little as it can to the graph's load.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import Any

from edge_loop import topics


def _msg_classes() -> dict[str, Any]:
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PolygonStamped, PoseArray, TwistStamped
    from nav_msgs.msg import OccupancyGrid
    from sensor_msgs.msg import CameraInfo

    return {topics.OBJECTS: PoseArray, topics.GRASP: PolygonStamped,
            topics.OCCUPANCY: OccupancyGrid, topics.ARM_CMD: TwistStamped,
            topics.CAMERA_INFO: CameraInfo, topics.GRASP_STATE: DiagnosticArray}


def header_stamp_of_cdr(data: bytes) -> int:
    """Header stamp (ns) of a serialized message that starts with a std_msgs/Header."""
    little = data[1] == 1          # CDR encapsulation: 0x0001 little, 0x0000 big endian
    sec, nsec = struct.unpack_from('<iI' if little else '>iI', data, 4)
    return sec * 1_000_000_000 + nsec


class StampRecorder:
    """(stamp ns, receive ns) of every message on a few topics, taken raw by one thread."""

    def __init__(self, context: Any, topic_names: list[str], period_s: float = 0.01) -> None:
        import rclpy
        from rclpy.qos import QoSProfile

        classes = _msg_classes()
        self._node = rclpy.create_node(f'edge_loop_check_recorder_{os.getpid()}',
                                       context=context, start_parameter_services=False)
        self._subs = [(t, classes[t], self._node.create_subscription(
            classes[t], t, lambda _m: None, QoSProfile(depth=500), raw=True))
            for t in topic_names]
        self.arrivals: dict[str, list[tuple[int, int]]] = {t: [] for t in topic_names}
        self.last_raw: dict[str, bytes] = {}   # the latest serialized message per topic
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for topic, cls, sub in self._subs:
                while True:
                    try:
                        taken = sub.handle.take_message(cls, True)
                    except Exception:  # noqa: BLE001 - the context is shutting down
                        return
                    if taken is None:
                        break
                    data, info = taken
                    self.last_raw[topic] = data
                    received = info.get('received_timestamp') if isinstance(info, dict) else 0
                    self.arrivals[topic].append((header_stamp_of_cdr(data),
                                                 int(received or time.time_ns())))
            self._stop.wait(self._period_s)

    def last(self, topic: str) -> Any:
        """The latest message received on ``topic``, deserialized (None before the first)."""
        from rclpy.serialization import deserialize_message

        data = self.last_raw.get(topic)
        return None if data is None else deserialize_message(data, _msg_classes()[topic])

    def count(self, topic: str) -> int:
        """Messages received on ``topic`` so far."""
        return len(self.arrivals[topic])

    def first_arrivals(self, topic: str, since_ns: int = 0) -> dict[int, int]:
        """{stamp: first receive time} of messages received at or after ``since_ns``."""
        out: dict[int, int] = {}
        for stamp, received in list(self.arrivals[topic]):
            if received >= since_ns and stamp not in out:
                out[stamp] = received
        return out

    def close(self) -> None:
        """Stop the thread and destroy the node (idempotent)."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self._node is not None:
            self._node.destroy_node()
            self._node = None
