# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Small bags written in tmp_path for the replay tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sensor_msgs.msg import CameraInfo, Image, JointState

from edge_loop import topics
from edge_loop.bags import BagWriter
from edge_loop.images import fill_image


def write_camera_bag(path: Path, frames: int = 6, period_ns: int = 66_666_667,
                     width: int = 64, height: int = 48) -> list[tuple[str, int, bytes]]:
    """Write color/depth/camera_info frames plus joint states; return (topic, stamp, data)."""
    rng = np.random.default_rng(7)
    sent = []
    t0 = 1_700_000_000_000_000_000
    with BagWriter(path) as writer:
        for i in range(frames):
            t = t0 + i * period_ns
            sec, nsec = divmod(t, 10**9)
            color = Image()
            fill_image(color, rng.integers(0, 255, (height, width, 3), dtype=np.uint8), 'rgb8')
            depth = Image()
            fill_image(depth, rng.integers(300, 900, (height, width), dtype=np.uint16), '16UC1')
            info = CameraInfo(width=width, height=height)
            info.k = [60.0, 0.0, width / 2, 0.0, 60.0, height / 2, 0.0, 0.0, 1.0]
            joints = JointState(name=['left_finger', 'right_finger'], position=[0.04, 0.04],
                                effort=[0.0, float(i)])
            for topic, msg in ((topics.COLOR, color), (topics.DEPTH, depth),
                               (topics.CAMERA_INFO, info), (topics.JOINT_STATES, joints)):
                msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nsec
                msg.header.frame_id = 'camera_color_optical_frame'
                writer.write(topic, t, msg)
                sent.append((topic, t, bytes(msg.data) if hasattr(msg, 'data') else b''))
    return sent
