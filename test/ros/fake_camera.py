# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A fake camera driver for node tests: colour, aligned depth and camera_info from the test."""

from __future__ import annotations

import itertools

import numpy as np
from sensor_msgs.msg import CameraInfo, Image

from edge_loop import topics
from edge_loop.images import fill_image

# One counter per test process, so two cameras in one run never reuse a stamp.
_stamps = itertools.count(1)


def stamp_ns_of(stamp) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class FakeCamera:
    """Publishes colour + aligned depth + camera_info from the test, like a driver."""

    def __init__(self, harness):
        self.h = harness
        node = harness.node
        self.color = node.create_publisher(Image, topics.COLOR, 10)
        self.depth = node.create_publisher(Image, topics.DEPTH, 10)
        self.info = node.create_publisher(CameraInfo, topics.CAMERA_INFO, 10)

    def send(self, frame, *, color=None, depth=None, color_encoding='rgb8',
             depth_encoding=None, info=True):
        """Publish one frame with a fresh stamp; returns the stamp in ns."""
        stamp_ns = next(_stamps) * 10_000_000 + 1_000_000_000
        color = frame.color if color is None else color
        depth = frame.depth if depth is None else depth
        depth_encoding = depth_encoding or frame.depth_encoding
        msgs = []
        for arr, enc in ((color, color_encoding), (depth, depth_encoding)):
            msg = Image()
            fill_image(msg, np.ascontiguousarray(arr), enc)
            msgs.append(msg)
        cam = CameraInfo(width=frame.intrinsics.width, height=frame.intrinsics.height,
                         k=[float(v) for v in frame.intrinsics.k().reshape(-1)])
        for msg in msgs + [cam]:
            msg.header.stamp.sec = stamp_ns // 1_000_000_000
            msg.header.stamp.nanosec = stamp_ns % 1_000_000_000
            msg.header.frame_id = 'camera_color_optical_frame'
        self.color.publish(msgs[0])
        self.depth.publish(msgs[1])
        if info:
            self.info.publish(cam)
        return stamp_ns

    def send_until(self, frame, received, timeout=30.0, **kwargs):
        """Re-send (new stamps) until a message with one of the sent stamps arrives."""
        sent = []

        def got():
            return any(stamp_ns_of(m.header.stamp) in sent for m in list(received))

        for _ in range(int(timeout)):
            sent.append(self.send(frame, **kwargs))
            try:
                self.h.wait_until(got, 1.0, 'output')
                return next(m for m in list(received)
                            if stamp_ns_of(m.header.stamp) in sent)
            except AssertionError:
                continue
        raise AssertionError(f'no output for any of {len(sent)} frames')
