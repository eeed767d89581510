# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Bag reading and writing, and the precise errors for bad bags."""

from __future__ import annotations

import shutil

import pytest
from bag_fixtures import write_camera_bag

from edge_loop.bags import BagError, BagReader, BagWriter, read_messages


def test_round_trip_keeps_order_stamps_and_bytes(tmp_path):
    sent = write_camera_bag(tmp_path / 'bag', frames=3)
    got = read_messages(tmp_path / 'bag')
    assert [(t, ts) for t, ts, _ in got] == [(t, ts) for t, ts, _ in sent]
    for (_, _, msg), (_, _, data) in zip(got, sent):
        if data:
            assert bytes(msg.data) == data


def test_nonexistent_bag(tmp_path):
    with pytest.raises(BagError, match='does not exist'):
        BagReader(tmp_path / 'missing').open()


def test_folder_without_metadata(tmp_path):
    (tmp_path / 'empty').mkdir()
    with pytest.raises(BagError, match='no metadata.yaml'):
        BagReader(tmp_path / 'empty').open()


def test_truncated_bag(tmp_path):
    write_camera_bag(tmp_path / 'bag', frames=4)
    mcap = next((tmp_path / 'bag').glob('*.mcap'))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])
    with pytest.raises(BagError, match='truncated or corrupt'):
        read_messages(tmp_path / 'bag')


def test_unknown_message_type(tmp_path):
    with BagWriter(tmp_path / 'bag') as writer:
        writer.write_raw('/weird', 'no_such_pkg/msg/Thing', 1, b'\x00\x01\x00\x00\x05\x00\x00\x00',
                         msgdef=('int32 data', 'RIHS01_' + '0' * 64))
    with pytest.raises(BagError, match="topic '/weird'.*unknown message type"):
        BagReader(tmp_path / 'bag').open()


def test_writer_refuses_existing_path(tmp_path):
    (tmp_path / 'bag').mkdir()
    with pytest.raises(BagError, match='already exists'):
        BagWriter(tmp_path / 'bag')


def test_copied_bag_reads_the_same(tmp_path):
    write_camera_bag(tmp_path / 'bag', frames=2)
    shutil.copytree(tmp_path / 'bag', tmp_path / 'copy')
    with BagReader(tmp_path / 'copy') as reader:
        assert reader.message_count == 8
        assert reader.topics['/camera/color/image_raw'] == 'sensor_msgs/msg/Image'


def test_header_stamp_is_read_and_rewritten_in_serialized_messages():
    from geometry_msgs.msg import PoseStamped
    from rclpy.serialization import deserialize_message, serialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from edge_loop.bags import cdr_stamp_ns, cdr_with_stamp, header_first

    assert header_first(JointState) and header_first(PoseStamped) and not header_first(Clock)
    msg = JointState(name=['left_finger', 'right_finger'], position=[0.01, 0.02],
                     velocity=[0.0, 0.0], effort=[1.5, 2.5])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_123, 456_789
    msg.header.frame_id = 'gripper'
    data = serialize_message(msg)
    assert cdr_stamp_ns(data) == 1_700_000_123 * 10**9 + 456_789
    out = deserialize_message(cdr_with_stamp(data, 1_800_000_000 * 10**9 + 7), JointState)
    assert (out.header.stamp.sec, out.header.stamp.nanosec) == (1_800_000_000, 7)
    # everything else is untouched
    assert out.header.frame_id == 'gripper' and list(out.effort) == [1.5, 2.5]
    with pytest.raises(ValueError, match='not a plain CDR'):
        cdr_stamp_ns(b'\x01\x07' + data[2:])


def test_camera_topics_found_under_a_realsense_namespace():
    from edge_loop.bags import find_camera_topics

    image, info = 'sensor_msgs/msg/Image', 'sensor_msgs/msg/CameraInfo'
    realsense = {'/camera/camera/color/image_raw': image,
                 '/camera/camera/aligned_depth_to_color/image_raw': image,
                 '/camera/camera/color/camera_info': info,
                 '/camera/camera/depth/image_rect_raw': image,
                 '/tf_static': 'tf2_msgs/msg/TFMessage'}
    assert find_camera_topics(realsense) == {
        'color': '/camera/camera/color/image_raw',
        'depth': '/camera/camera/aligned_depth_to_color/image_raw',
        'info': '/camera/camera/color/camera_info'}
    ours = {'/camera/color/image_raw': image, '/camera/color/camera_info': info,
            '/camera/aligned_depth_to_color/image_raw': image}
    assert find_camera_topics(ours)['color'] == '/camera/color/image_raw'
    # No aligned depth: not a camera set this loop can use.
    assert find_camera_topics({'/camera/color/image_raw': image,
                               '/camera/color/camera_info': info}) == {}


def test_compressed_camera_pair_is_found_and_other_compressed_sets_are_a_clear_error():
    from edge_loop.bags import find_camera_topics

    compressed = {'/camera/camera/color/image_raw/compressed': 'sensor_msgs/msg/CompressedImage',
                  '/camera/camera/aligned_depth_to_color/image_raw/compressedDepth':
                      'sensor_msgs/msg/CompressedImage',
                  '/camera/camera/color/camera_info': 'sensor_msgs/msg/CameraInfo'}
    # image_transport's pair: decoded at replay (test/ros/test_compressed_images.py)
    assert find_camera_topics(compressed) == {
        'color': '/camera/camera/color/image_raw/compressed',
        'depth': '/camera/camera/aligned_depth_to_color/image_raw/compressedDepth',
        'info': '/camera/camera/color/camera_info'}
    no_depth = {k: v for k, v in compressed.items() if 'compressedDepth' not in k}
    with pytest.raises(BagError, match='compressed only.*record the raw topics'):
        find_camera_topics(no_depth)


def test_transient_local_topics_from_the_offered_qos():
    from types import SimpleNamespace

    from edge_loop.bags import transient_local_topics

    def conn(topic, profiles):
        return SimpleNamespace(topic=topic, ext=SimpleNamespace(offered_qos_profiles=profiles))
    reader = SimpleNamespace(_check_open=lambda: SimpleNamespace(connections=[
        conn('/tf_static', [{'history': 3, 'depth': 0, 'reliability': 1, 'durability': 1}]),
        conn('/tf', [{'durability': 2}]),
        conn('/map', '- durability: transient_local\n  reliability: reliable\n'),
        conn('/camera/color/image_raw', [])]))
    assert transient_local_topics(reader) == {'/tf_static', '/map'}
