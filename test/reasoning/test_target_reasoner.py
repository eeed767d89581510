# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""target_reasoner as a real ROS process: lifecycle, a marked answer, refusal over budget."""

from __future__ import annotations

import time

import pytest

pytest.importorskip('torch', reason='torch is not installed in this venv (CI installs it '
                    'for Jazzy only)')

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import PolygonStamped, Pose, PoseArray  # noqa: E402
from nav_msgs.msg import OccupancyGrid  # noqa: E402
from sensor_msgs.msg import CameraInfo  # noqa: E402

from edge_loop.lifecycle_client import LifecycleError  # noqa: E402

pytestmark = pytest.mark.ros

TINY_PARAMS = {'mode': 'random', 'preset': 'tiny', 'weight_format': 'int4', 'context': 256,
               'device': 'cpu', 'rate_hz': 10.0}


def _objects(n: int, stamp_sec: int) -> PoseArray:
    msg = PoseArray()
    msg.header.frame_id = 'world'
    msg.header.stamp.sec = stamp_sec
    for i in range(n):
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = 0.1 * i, -0.05 * i, 0.02
        msg.poses.append(pose)
    return msg


def test_lifecycle_and_a_choice_marked_meaningless(node_procs, harness):
    proc = node_procs('target_reasoner', params=TINY_PARAMS)
    client = harness.lifecycle('target_reasoner')
    client.wait_ready(30.0)
    choices = harness.collect(DiagnosticArray, '/edge_loop/target_choice')
    pub = harness.node.create_publisher(PoseArray, '/edge_loop/objects', 10)
    client.transition('configure', timeout=60.0)
    assert client.get_state() == 'inactive'
    assert proc.wait_for_output('meaningful answers: False', 5.0), proc.output()
    client.transition('activate', timeout=30.0)
    assert client.get_state() == 'active'
    harness.wait_for_subscribers('/edge_loop/objects', timeout=20.0)
    # The loop's frames as the node sees them (gate_on_frames): camera_info, then each stage
    # output with that stamp; the decoder's chunks run between them.
    info = harness.node.create_publisher(CameraInfo, '/camera/color/camera_info', 10)
    grasp = harness.node.create_publisher(PolygonStamped, '/edge_loop/grasp', 10)
    grid = harness.node.create_publisher(OccupancyGrid, '/edge_loop/occupancy', 10)
    harness.wait_for_subscribers('/camera/color/camera_info', timeout=20.0)
    deadline = time.monotonic() + 30.0
    sec = 42
    while not choices and time.monotonic() < deadline:
        for msg in (CameraInfo(), _objects(3, stamp_sec=sec), PolygonStamped(),
                    OccupancyGrid()):
            msg.header.stamp.sec = sec
            {CameraInfo: info, PoseArray: pub, PolygonStamped: grasp,
             OccupancyGrid: grid}[type(msg)].publish(msg)
        sec += 1
        time.sleep(0.05)
    assert choices, proc.output()
    status = choices[0].status[0]
    values = {kv.key: kv.value for kv in status.values}
    assert 42 <= choices[0].header.stamp.sec < sec     # stamped with the objects' frame
    assert values['meaningful'] == 'false' and values['mode'] == 'random'
    assert 0 <= int(values['index']) < 3 and status.message == f'object {values["index"]}'
    # gated: frames were seen, the forwards ran as layer chunks (2 layers: 2 per forward)
    assert int(values['gate_frames']) >= 1 and int(values['gate_runs']) >= 2, values
    assert values['gate_frame_timeouts'] == '0', values
    for transition, state in (('deactivate', 'inactive'), ('cleanup', 'unconfigured'),
                              ('shutdown', 'finalized')):
        client.transition(transition, timeout=30.0)
        assert client.get_state() == state
    assert 'Traceback' not in proc.output()


def test_activation_over_budget_is_refused_every_time(node_procs, harness):
    # Llama-2-7B in fp16 does not fit the 8 GiB pool: nothing is built at configure (the node
    # would otherwise allocate 12.5 GiB here) and every activation is refused with the table.
    params = {**TINY_PARAMS, 'preset': 'llama2_7b', 'weight_format': 'fp16',
              'context': 1024, 'memory_pool': 'soc_8g'}
    proc = node_procs('target_reasoner', params=params)
    client = harness.lifecycle('target_reasoner')
    client.wait_ready(30.0)
    client.transition('configure', timeout=60.0)
    assert client.get_state() == 'inactive'
    for _ in range(2):
        with pytest.raises(LifecycleError, match='activate failed'):
            client.transition('activate', timeout=30.0)
        assert client.get_state() == 'inactive'
    out = proc.output()
    assert 'memory budget refuses activation: reservations exceed pool soc_8g by' in out
    for tenant in ('reasoner', 'frame_ring', 'object_locator', 'grasp_planner',
                   'occupancy_mapper', 'cuda_contexts'):
        assert tenant in out.split('refuses activation', 1)[1]
    assert out.count('refuses activation') == 2
    assert 'Traceback' not in out and proc.alive()
