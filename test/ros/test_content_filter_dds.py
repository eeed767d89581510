# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge_loop.content_filter on a real subscription: only the stamp windows arrive."""

from __future__ import annotations

import pytest
import rclpy
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from edge_loop.content_filter import set_content_filter, stamp_passes, stamp_sampling_expression

pytestmark = [pytest.mark.ros, pytest.mark.every_distro]

MS = 1_000_000
EVERY, WINDOW = 40 * MS, 10 * MS
STEP = 2_500_000     # a 400 Hz gripper's stamps


def _sync(harness, pub, take, got: list, sec: int) -> None:
    """Publish marker samples (sec, 0: in a window) until one arrives.

    Setting or removing a filter re-creates the DDS reader underneath, so samples published
    before it matched the writer again are not delivered; the markers span that.
    """
    marker = JointState()
    marker.header.stamp.sec = sec

    def arrived() -> bool:
        pub.publish(marker)
        take()
        return any(s == sec for s, _ in got)
    harness.wait_until(arrived, 10.0, f'marker sample {sec}')


def _send_second(harness, pub, take, sec: int, got: list) -> set[int]:
    """Publish one second of stamps (sec, k * STEP); return the nanosec values received."""
    _sync(harness, pub, take, got, sec + 1000)
    for k in range(1_000_000_000 // STEP):
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, k * STEP
        pub.publish(msg)
    _sync(harness, pub, take, got, sec + 2000)     # reliable, in order: all of sec are in
    return {n for s, n in got if s == sec}


def test_only_stamps_in_the_windows_arrive_and_removal_restores_all(harness):
    # As in the deadline monitor: a node no executor spins, samples taken by the caller.
    # (Setting a filter re-creates the DDS reader; an executor already waiting on the
    # subscription was seen here never to wake for it again.)
    node = rclpy.create_node('filtered_probe', context=harness.context)
    got: list[tuple[int, int]] = []
    qos = QoSProfile(depth=1000)
    sub = node.create_subscription(JointState, '/gripper/joint_states', lambda _: None, qos)

    def take() -> None:
        while (msg := sub.handle.take_message(JointState, False)) is not None:
            got.append((msg[0].header.stamp.sec, msg[0].header.stamp.nanosec))

    pub = harness.node.create_publisher(JointState, '/gripper/joint_states', qos)
    harness.wait_until(lambda: pub.get_subscription_count() >= 1, 10.0, 'matched')
    try:
        assert set_content_filter(sub, stamp_sampling_expression(EVERY, WINDOW)) is True
        filtered = _send_second(harness, pub, take, 1, got)
        expected = {k * STEP for k in range(400) if stamp_passes(k * STEP, EVERY, WINDOW)}
        assert filtered == expected and len(expected) == 100     # 4 of every 16 samples

        assert set_content_filter(sub, '') is False
        assert _send_second(harness, pub, take, 2, got) == {k * STEP for k in range(400)}
    finally:
        node.destroy_node()
