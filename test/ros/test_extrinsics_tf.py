# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``extrinsics_source: tf`` (issue 35): the camera pose read from TF, or configure refused.

The lookup is tested as a pure function over a stand-in for tf2's ``Buffer.lookup_transform``;
the refusal where tf2_ros does not import, in-process and on a real node process.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from geometry_msgs.msg import TransformStamped

from edge_loop.kernels.camera import Extrinsics
from edge_loop.nodes.stage_base import ConfigError
from edge_loop.nodes.vision_common import (
    extrinsics_from,
    extrinsics_from_transform,
    lookup_extrinsics,
)

TF2_IMPORTS = importlib.util.find_spec('tf2_ros') is not None
PARAMS = {'extrinsics_source': 'tf', 'world_frame': 'world',
          'camera_frame': 'camera_color_optical_frame', 'tf_timeout_s': 0.1,
          'camera_position': [0.0, 0.0, 0.75], 'camera_orientation': [1.0, 0.0, 0.0, 0.0]}


class TfLookupError(Exception):
    """Stands for tf2_ros.LookupException (not importable here)."""


def _stamped(position, quat) -> TransformStamped:
    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = 'world', 'camera_color_optical_frame'
    t, q = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = position
    q.x, q.y, q.z, q.w = quat
    return msg


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_lookup_retries_until_tf_has_the_camera_and_returns_its_pose():
    # An oblique camera: 30 deg about x, 0.55 m from the tray; not yet in TF twice.
    half = np.radians(150.0) / 2
    quat = [float(np.sin(half)), 0.0, 0.0, float(np.cos(half))]
    asked = []

    def lookup(target: str, source: str) -> TransformStamped:
        asked.append((target, source))
        if len(asked) < 3:
            raise TfLookupError('"world" passed to lookupTransform argument target_frame does '
                               'not exist')
        return _stamped([0.1, -0.2, 0.5], quat)

    clock = FakeClock()
    ext = lookup_extrinsics(lookup, 'world', 'camera_color_optical_frame', 2.0,
                            clock=clock, sleep=clock.sleep)
    want = Extrinsics.from_params([0.1, -0.2, 0.5], quat)
    assert asked == [('world', 'camera_color_optical_frame')] * 3
    assert np.allclose(ext.translation, want.translation)
    assert np.allclose(ext.rotation, want.rotation)


def test_lookup_gives_up_naming_the_frames_and_tf2s_reason():
    def lookup(target: str, source: str) -> TransformStamped:
        raise TfLookupError('frame camera_color_optical_frame does not exist')

    clock = FakeClock()
    with pytest.raises(ConfigError, match=r'no transform world -> camera_color_optical_frame in '
                       r'TF after 1 s \(TfLookupError: frame camera_color_optical_frame'):
        lookup_extrinsics(lookup, 'world', 'camera_color_optical_frame', 1.0, clock=clock,
                          sleep=clock.sleep)
    assert 0.99 <= clock.now <= 1.1


def test_a_tf_pose_is_normalised_and_a_broken_one_refused():
    ext = extrinsics_from_transform(_stamped([0, 0, 1], [2.0, 0, 0, 0]).transform)
    assert np.allclose(ext.rotation, np.diag([1.0, -1.0, -1.0]))
    with pytest.raises(ConfigError, match='not usable'):
        extrinsics_from_transform(_stamped([0, 0, 1], [0, 0, 0, 0]).transform)
    with pytest.raises(ConfigError, match='not usable'):
        extrinsics_from_transform(_stamped([float('nan'), 0, 1], [1, 0, 0, 0]).transform)


def test_without_tf2_ros_tf_is_refused_with_the_fix_never_the_params(monkeypatch):
    monkeypatch.setitem(sys.modules, 'tf2_ros', None)   # import tf2_ros -> ImportError
    with pytest.raises(ConfigError) as err:
        extrinsics_from(PARAMS, node=object())
    text = str(err.value)
    assert "extrinsics_source 'tf' needs tf2_ros" in text
    assert 'ros-jazzy-tf2-ros' in text and 'extrinsics_source: params' in text
    # params stays what it was
    ext = extrinsics_from({**PARAMS, 'extrinsics_source': 'params'})
    assert np.allclose(ext.translation, [0.0, 0.0, 0.75])


@pytest.mark.ros
@pytest.mark.every_distro
@pytest.mark.skipif(TF2_IMPORTS, reason='tf2_ros imports here: the refusal cannot happen')
def test_a_node_asked_for_tf_fails_configure_with_the_reason(harness, node_procs):
    from edge_loop.lifecycle_client import LifecycleError

    proc = node_procs('pick_controller', params={'extrinsics_source': 'tf'})
    client = harness.lifecycle('pick_controller')
    with pytest.raises(LifecycleError, match='configure failed'):
        client.transition('configure', timeout=30.0)
    assert proc.wait_for_output("extrinsics_source 'tf' needs tf2_ros", 5.0), proc.output()


def test_the_launch_argument_reaches_every_node(tmp_path):
    from edge_loop import bringup

    plan = bringup.from_arguments({'extrinsics_source': 'tf'}, tmp_path / 'tf')
    assert not plan.transforms, 'the robot publishes the camera: no static publisher'
    users = {'object_locator', 'grasp_planner', 'occupancy_mapper', 'pick_controller'}
    assert users <= {n.name for n in plan.nodes}
    assert all(n.parameters.get('extrinsics_source') == 'tf' for n in plan.nodes)
    default = bringup.from_arguments({}, tmp_path / 'params')
    assert all('extrinsics_source' not in n.parameters for n in default.nodes)


@pytest.mark.ros
@pytest.mark.every_distro
def test_the_node_glue_looks_up_through_a_private_listener_node(monkeypatch, ros_domain):
    """extrinsics_from_tf with a stand-in tf2_ros (the real one does not install here).

    A private listener node, spun by its own thread while the lookup runs, then torn down.
    """
    import threading
    import types

    import rclpy

    from edge_loop.nodes.vision_common import extrinsics_from_tf

    def spinning() -> bool:
        return any(t.name == 'tf-lookup' and t.is_alive() for t in threading.enumerate())

    made = {}

    class Buffer:
        def lookup_transform(self, target, source, time):
            made['spun during the lookup'] = spinning()
            return _stamped([0.2, 0.0, 0.6], [1.0, 0.0, 0.0, 0.0])

    class TransformListener:
        def __init__(self, buffer, node, *, spin_thread):
            made['listener node'], made['spin_thread'] = node.get_name(), spin_thread

        def unregister(self):
            made['unregistered'] = True

    monkeypatch.setitem(sys.modules, 'tf2_ros', types.SimpleNamespace(
        Buffer=Buffer, TransformListener=TransformListener))
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain[0])
    stage = rclpy.create_node('object_locator', context=context)
    try:
        ext = extrinsics_from_tf(stage, 'world', 'camera_color_optical_frame', 1.0)
        assert np.allclose(ext.translation, [0.2, 0.0, 0.6])
        assert made == {'listener node': 'object_locator_tf_lookup', 'spin_thread': False,
                        'spun during the lookup': True, 'unregistered': True}
        assert not spinning()
    finally:
        stage.destroy_node()
        context.try_shutdown()
