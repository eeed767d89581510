# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Scenario bags: determinism, real rclpy messages, the embedded default set, replay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Bool

from edge_loop import topics
from edge_loop.bags import read_messages
from edge_loop.cli import main as cli_main
from edge_loop.images import image_to_array
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.record import DEFAULT_SET, parse_scenario, record

DATA = Path(__file__).resolve().parents[2] / 'data' / 'scenarios'


def _depth_bytes(path):
    return [bytes(m.data) for t, _, m in read_messages(path, [topics.DEPTH])]


def test_same_seed_gives_byte_identical_depth(tmp_path):
    record('glare', 7, 2, tmp_path / 'a')
    record('glare', 7, 2, tmp_path / 'b')
    record('glare', 8, 2, tmp_path / 'c')
    a, b, c = (_depth_bytes(tmp_path / n) for n in 'abc')
    assert len(a) == 2 and a == b
    assert a != c


def test_bag_deserialises_into_rclpy_messages(tmp_path):
    summary = record('nominal', 3, 2, tmp_path / 'bag')
    assert summary['frames'] == 2
    msgs = read_messages(tmp_path / 'bag')
    by_topic = {}
    for topic, t_ns, msg in msgs:
        by_topic.setdefault(topic, []).append((t_ns, msg))
    expected = {topics.COLOR: 'sensor_msgs.msg._image', topics.DEPTH: 'sensor_msgs.msg._image',
                topics.CAMERA_INFO: 'sensor_msgs.msg._camera_info',
                topics.JOINT_STATES: 'sensor_msgs.msg._joint_state',
                topics.TCP_POSE: 'geometry_msgs.msg._pose_stamped',
                topics.SIM_OBJECTS: 'geometry_msgs.msg._pose_array',
                topics.SIM_MASK: 'sensor_msgs.msg._image',
                topics.SIM_OCCUPANCY: 'nav_msgs.msg._occupancy_grid',
                topics.CLOCK: 'rosgraph_msgs.msg._clock'}
    for topic, module in expected.items():
        assert topic in by_topic, topic
        assert type(by_topic[topic][0][1]).__module__ == module
    assert len(by_topic[topics.COLOR]) == 2
    assert len(by_topic[topics.JOINT_STATES]) == 17          # 240 Hz between 2 frames at 15 Hz
    for t_ns, msg in by_topic[topics.COLOR] + by_topic[topics.JOINT_STATES]:
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == t_ns
    color = by_topic[topics.COLOR][0][1]
    assert (color.encoding, color.width, color.height) == ('rgb8', 640, 480)
    info = by_topic[topics.CAMERA_INFO][0][1]
    assert list(info.k) == [615.0, 0.0, 320.0, 0.0, 615.0, 240.0, 0.0, 0.0, 1.0]
    occ = by_topic[topics.SIM_OCCUPANCY][0][1]
    assert (occ.info.width, occ.info.height) == (120, 90)
    assert occ.info.resolution == pytest.approx(0.005)  # float32 field
    assert set(np.unique(np.asarray(occ.data))) <= {0, 100}


def test_grasp_scenario_has_a_tactile_trace_and_an_outcome(tmp_path):
    summary = record('grasp_miss_nominal', 900, 1, tmp_path / 'bag', approach='teleport')
    assert summary['reason'] == 'closed_empty'
    msgs = read_messages(tmp_path / 'bag', [topics.JOINT_STATES, topics.SIM_GRASP_OUTCOME])
    opening = [sum(m.position) for t, _, m in msgs if t == topics.JOINT_STATES]
    assert max(opening) > 0.05 and opening[-1] < 0.002
    outcome = [m for t, _, m in msgs if t == topics.SIM_GRASP_OUTCOME]
    assert len(outcome) == 1 and outcome[0].status[0].message == 'closed_empty'


def test_cli_rejects_unknown_scenario(capsys):
    assert cli_main(['record', '--scenario', 'disco', '--output', '/nonexistent/x']) == 2
    assert 'unknown scenario' in capsys.readouterr().err
    with pytest.raises(ValueError):
        parse_scenario('grasp_disco')


def test_embedded_default_set_is_complete_and_small():
    names = {s.name for s in DEFAULT_SET}
    assert set(CONDITION_NAMES) <= names
    assert any(n.startswith('grasp_miss_') for n in names)
    assert any(n.startswith('grasp_') and not n.startswith('grasp_miss_') for n in names)
    total = 0
    for s in DEFAULT_SET:
        folder = DATA / s.name
        assert (folder / 'metadata.yaml').is_file(), f'{folder}: run make record-default'
        total += sum(f.stat().st_size for f in folder.rglob('*') if f.is_file())
    assert total <= 20 * 1024 * 1024
    outcome = read_messages(DATA / 'grasp_nominal', [topics.SIM_GRASP_OUTCOME])
    assert outcome[0][2].status[0].message == 'held'
    forces = [max(m.effort) for _, _, m in read_messages(DATA / 'grasp_nominal',
                                                          [topics.JOINT_STATES])]
    assert forces[-1] > 20.0 and forces[0] < 2.0


@pytest.mark.ros
def test_embedded_bag_replays_through_bag_player(ros_domain, harness, node_procs):
    ros_domain[1]['FASTDDS_BUILTIN_TRANSPORTS'] = 'LARGE_DATA'
    bag = DATA / 'glare'
    color = harness.collect(Image, topics.COLOR)
    info = harness.collect(CameraInfo, topics.CAMERA_INFO)
    done = harness.collect(Bool, '/bag_player/done',
                           QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    node_procs('bag_player', params={'bag': str(bag), 'transport': 'ros',
                                     'wait_topics': [topics.COLOR, topics.CAMERA_INFO]})
    lc = harness.lifecycle('bag_player')
    lc.wait_ready(30.0)
    lc.transition('configure', timeout=30.0)
    harness.wait_for_publishers(topics.COLOR)
    lc.transition('activate', timeout=30.0)
    harness.wait_until(lambda: len(color) >= 2 and len(info) >= 2 and done, 60.0,
                       'two replayed frames')
    recorded = read_messages(bag, [topics.COLOR])
    assert [bytes(m.data) for m in color] == [bytes(m.data) for _, _, m in recorded]
    img = image_to_array(color[0])
    assert img.shape == (480, 640, 3) and (img > 250).all(axis=2).sum() > 1000  # glare
