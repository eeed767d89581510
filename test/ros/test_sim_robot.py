# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""sim_robot as a real process: lifecycle, published topics, commands move the gripper."""

from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseArray, PoseStamped, TwistStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger

from edge_loop import topics
from edge_loop.images import image_to_array

pytestmark = pytest.mark.ros

BEST_EFFORT = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                         reliability=ReliabilityPolicy.BEST_EFFORT)


def _stamp_ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


@pytest.mark.every_distro
def test_sim_robot_publishes_and_answers_an_arm_command(large_data, harness, node_procs):
    node_procs('sim_robot', params={'seed': 3, 'n_objects': 2, 'transport': 'ros',
                                    'max_realtime_factor': 0.0, 'use_sim_time': False})
    lc = harness.lifecycle('sim_robot')
    lc.wait_ready(30.0)
    color = harness.collect(Image, topics.COLOR)
    depth = harness.collect(Image, topics.DEPTH)
    info = harness.collect(CameraInfo, topics.CAMERA_INFO)
    joints = harness.collect(JointState, topics.JOINT_STATES, 100)
    tcp = harness.collect(PoseStamped, topics.TCP_POSE, 100)
    clock = harness.collect(Clock, topics.CLOCK, BEST_EFFORT)
    objects = harness.collect(PoseArray, topics.SIM_OBJECTS)
    mask = harness.collect(Image, topics.SIM_MASK)
    occupancy = harness.collect(OccupancyGrid, topics.SIM_OCCUPANCY)
    lc.transition('configure', timeout=60.0)
    assert not tcp, 'inactive node must not publish'
    lc.transition('activate', timeout=30.0)
    harness.wait_until(lambda: len(color) >= 2 and len(depth) >= 2 and len(info) >= 2
                       and len(mask) >= 1 and len(occupancy) >= 1 and len(objects) >= 1,
                       60.0, 'two camera frames and ground truth')
    harness.wait_until(lambda: len(tcp) > 20 and len(clock) > 5, 30.0, 'tcp poses and clock')
    # camera topics: contract encodings, stamps paired, intrinsics in camera_info (the two
    # collectors may have matched the publishers a frame apart: pair by stamp)
    depth_by_stamp = {_stamp_ns(m.header.stamp): m for m in list(depth)}
    c = next(m for m in list(color) if _stamp_ns(m.header.stamp) in depth_by_stamp)
    d = depth_by_stamp[_stamp_ns(c.header.stamp)]
    assert (c.encoding, d.encoding) == ('rgb8', '16UC1')
    assert (c.width, c.height, c.header.frame_id) == (640, 480, 'camera_color_optical_frame')
    assert _stamp_ns(c.header.stamp) == _stamp_ns(d.header.stamp) > 0
    assert any(_stamp_ns(i.header.stamp) == _stamp_ns(c.header.stamp) for i in info)
    assert info[0].k[0] == pytest.approx(615.0) and info[0].k[2] == pytest.approx(320.0)
    dm = image_to_array(d)
    assert 700 < np.median(dm[dm > 0]) < 760
    m = image_to_array(mask[0])
    assert set(np.unique(m)) <= {0, 1, 2} and (m > 0).any()
    assert occupancy[0].info.width == 120 and occupancy[0].info.height == 90
    assert 0 < len(objects[0].poses) <= 2
    # joint states: contract names (the pads' shear channel after the fingers); 240 Hz
    j = joints[-1]
    assert list(j.name) == ['left_finger', 'right_finger', 'left_finger_shear',
                            'right_finger_shear']
    assert len(j.position) == len(j.velocity) == len(j.effort) == 4
    ts = [_stamp_ns(m.header.stamp) for m in list(tcp)[-20:]]
    assert np.allclose(np.diff(ts), 1e9 / 240, atol=2)
    # an arm command moves the TCP (sim time stamps come from /clock)
    start = np.array([tcp[-1].pose.position.x, tcp[-1].pose.position.y,
                      tcp[-1].pose.position.z])
    pub = harness.node.create_publisher(TwistStamped, topics.ARM_CMD, 10)
    harness.wait_for_subscribers(topics.ARM_CMD)

    def send():
        msg = TwistStamped()
        msg.header.frame_id = 'world'
        msg.header.stamp = color[-1].header.stamp
        msg.twist.linear.y = -0.2
        pub.publish(msg)
        return tcp[-1].pose.position.y < start[1] - 0.02

    harness.wait_until(send, 60.0, 'TCP to move 2 cm along -y')
    # a NaN command is ignored (no crash), counted and reported on /diagnostics
    diags = harness.collect(DiagnosticArray, topics.DIAGNOSTICS)
    bad = TwistStamped()
    bad.twist.linear.x = float('nan')
    pub.publish(bad)

    def degraded():
        return any(s.name == 'sim_robot' and s.level == DiagnosticStatus.WARN
                   for d in diags for s in d.status)
    harness.wait_until(degraded, 60.0, 'sim_robot diagnostics reporting the NaN command')
    # watchdog: without commands the gripper stops within 0.3 s of simulated time
    n = len(tcp)
    harness.wait_until(lambda: len(tcp) > n + 240, 60.0, 'one more simulated second')
    last = [m.pose.position.y for m in list(tcp)[-24:]]
    assert max(last) - min(last) < 0.002
    # reset to the next seed without restarting the process
    client = harness.node.create_client(Trigger, '/sim_robot/reset_scene')
    assert client.wait_for_service(timeout_sec=15.0)
    future = client.call_async(Trigger.Request())
    harness.wait_until(future.done, 60.0, 'reset_scene answer')
    assert future.result().success and future.result().message.startswith('seed 4')
    before = _stamp_ns(clock[-1].clock)
    harness.wait_until(lambda: _stamp_ns(clock[-1].clock) > before, 30.0, 'clock moving on')
    lc.transition('deactivate', timeout=30.0)
    lc.transition('cleanup', timeout=30.0)


def test_sim_robot_bad_parameter_fails_configure(ros_domain, harness, node_procs):
    proc = node_procs('sim_robot', params={'lighting': 'disco'})
    lc = harness.lifecycle('sim_robot')
    lc.wait_ready(30.0)
    with pytest.raises(Exception):  # noqa: B017 - LifecycleError or a transition failure
        lc.transition('configure', timeout=30.0)
    assert proc.wait_for_output('lighting', 10.0)


def test_lockstep_waits_for_the_answer_to_each_frame(large_data, harness, node_procs):
    # On simulated time, at a /clock rate below the physics rate (as the demo runs it).
    node_procs('sim_robot', params={'seed': 1, 'n_objects': 1, 'lockstep': True,
                                    'lockstep_timeout_s': 600.0, 'publish_ground_truth': False,
                                    'max_realtime_factor': 0.0, 'use_sim_time': True,
                                    'clock_rate_hz': 40.0})
    lc = harness.lifecycle('sim_robot')
    lc.wait_ready(30.0)
    info = harness.collect(CameraInfo, topics.CAMERA_INFO)
    tcp = harness.collect(PoseStamped, topics.TCP_POSE, 100)
    clock = harness.collect(Clock, topics.CLOCK, QoSProfile(depth=100))
    pub = harness.node.create_publisher(TwistStamped, topics.ARM_CMD, 10)
    lc.transition('configure', timeout=60.0)
    lc.transition('activate', timeout=30.0)
    harness.wait_until(lambda: len(info) >= 1, 60.0, 'first frame')
    harness.wait_for_subscribers(topics.ARM_CMD)
    # without an answer the simulation does not step on (no state after the frame)
    n_tcp = len(tcp)
    with pytest.raises(AssertionError):
        harness.wait_until(lambda: len(info) >= 2 or len(tcp) > n_tcp, 1.5, 'nothing')
    for expected in (2, 3):
        answer = TwistStamped()
        answer.header.stamp = info[-1].header.stamp
        pub.publish(answer)
        harness.wait_until(lambda e=expected: len(info) >= e, 60.0, f'frame {expected}')
    stamps = [_stamp_ns(m.header.stamp) for m in info]
    assert np.allclose(np.diff(stamps), 1e9 / 15, atol=1e6)
    # /clock: every 6th physics step (40 Hz) and at each frame's stamp, before the frame;
    # while the simulator waits for the answer the clock reads the frame's stamp
    harness.wait_until(lambda: _stamp_ns(clock[-1].clock) == stamps[-1], 10.0,
                       'clock at the last frame')
    ticks = [_stamp_ns(m.clock) for m in clock if _stamp_ns(m.clock) <= stamps[-1]]
    assert set(stamps[1:]) <= set(ticks)   # (the first may precede the collector's match)
    assert np.all(np.diff(ticks) > 0) and np.all(np.diff(ticks) <= 6 * 1e9 / 240 + 2)
    # frames at steps 16 and 32: in between only steps 18, 24 and 30 (multiples of 6)
    assert len([t for t in ticks if stamps[1] < t < stamps[2]]) == 3
    # its own clock is set by the simulation thread: sim_robot does not subscribe to /clock
    readers = harness.node.get_subscriptions_info_by_topic(topics.CLOCK)
    assert readers and 'sim_robot' not in {r.node_name for r in readers}
    # A restart (as the lifecycle manager's ~/reset + ~/startup does it) starts the clock
    # over: commands stamped on the old clock, however late, answer no new frame.
    late = TwistStamped()
    late.header.stamp.sec = 10_000
    pub.publish(late)
    harness.wait_until(lambda: len(info) >= 4, 60.0, 'frame 4 (answered by the late stamp)')
    for transition in ('deactivate', 'cleanup', 'configure', 'activate'):
        lc.transition(transition, timeout=60.0)
    restarted = len(info)
    harness.wait_until(lambda: len(info) > restarted, 60.0, 'first frame after the restart')
    n_tcp = len(tcp)
    with pytest.raises(AssertionError):
        harness.wait_until(lambda: len(info) > restarted + 1 or len(tcp) > n_tcp, 1.5,
                           'nothing after the restart')
    assert _stamp_ns(info[-1].header.stamp) < stamps[0] + 1_000_000_000   # clock started over


def test_closed_loop_cube_grasp_is_judged_held(large_data, harness, node_procs):
    node_procs('sim_robot', params={'seed': 2, 'objects': 'cube', 'camera_rate_hz': 2.0})
    lc = harness.lifecycle('sim_robot')
    lc.wait_ready(30.0)
    objects = harness.collect(PoseArray, topics.SIM_OBJECTS)
    tcp = harness.collect(PoseStamped, topics.TCP_POSE, 100)
    joints = harness.collect(JointState, topics.JOINT_STATES, 100)
    outcome = harness.collect(DiagnosticArray, topics.SIM_GRASP_OUTCOME,
                              QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    arm = harness.node.create_publisher(TwistStamped, topics.ARM_CMD, 10)
    grip = harness.node.create_publisher(JointState, topics.GRIPPER_CMD, 10)
    lc.transition('configure', timeout=60.0)
    lc.transition('activate', timeout=30.0)
    harness.wait_until(lambda: objects and tcp, 60.0, 'object ground truth')
    harness.wait_for_subscribers(topics.ARM_CMD)
    harness.wait_for_subscribers(topics.GRIPPER_CMD)
    obj = objects[-1].poses[0]
    yaw = 2 * np.arctan2(obj.orientation.z, obj.orientation.w) + np.pi / 2
    z_close = max(obj.position.z - 0.015, 0.022)

    def gripper(opening):
        grip.publish(JointState(name=['gripper'], position=[opening], effort=[40.0]))

    def drive_to(target, tol=0.003, timeout=60.0):
        def step():
            p = tcp[-1].pose
            pos = np.array([p.position.x, p.position.y, p.position.z])
            cur_yaw = 2 * np.arctan2(p.orientation.z, p.orientation.w)
            err = np.asarray(target) - pos
            dyaw = np.arctan2(np.sin(yaw - cur_yaw), np.cos(yaw - cur_yaw))
            v = 3.0 * err
            v *= min(1.0, 0.3 / max(np.linalg.norm(v), 1e-9))
            msg = TwistStamped()
            msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(x) for x in v)
            msg.twist.angular.z = float(np.clip(3.0 * dyaw, -2.0, 2.0))
            arm.publish(msg)
            return np.linalg.norm(err) < tol and abs(dyaw) < 0.02
        harness.wait_until(step, timeout, f'TCP at {np.round(target, 3)}')

    gripper(0.085)
    drive_to([obj.position.x, obj.position.y, 0.15])
    drive_to([obj.position.x, obj.position.y, z_close])
    gripper(0.0)
    harness.wait_until(lambda: max(joints[-1].effort[:2]) > 20.0, 30.0, 'grip force')
    drive_to([obj.position.x, obj.position.y, z_close + 0.12], tol=0.01)
    harness.wait_until(lambda: outcome, 30.0, 'grasp outcome')
    status = outcome[-1].status[0]
    assert (status.name, status.message) == ('grasp_outcome', 'held'), status
    # Held and lifted: both pads feel shear, below the friction limit (pad friction 1.2, and
    # grasp_state's slip threshold 0.97 x normal), so the grasp does not read as slipping.
    normal, shear = np.array(joints[-1].effort[:2]), np.array(joints[-1].effort[2:])
    assert np.all(shear > 0.0) and np.all(shear < 0.97 * normal), (normal, shear)
