# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""launch_pytest test of pick.launch.py, for machines that have ROS 2 launch installed.

Here (PyPI ROS wheels) launch, launch_ros and launch_pytest cannot be installed, so this
module is skipped; CI exercises the same graph description through ``edge-loop up``
(test/ros/test_up.py).
"""

from __future__ import annotations

import pytest

launch_pytest = pytest.importorskip(
    'launch_pytest', reason='launch_pytest is not installable from PyPI; see test/ros/test_up.py')
launch = pytest.importorskip('launch')
launch_ros = pytest.importorskip('launch_ros')

from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

from edge_loop.paths import share_dir  # noqa: E402


@launch_pytest.fixture
def pick_launch():
    """The pick graph against the simulator, shared-memory transport."""
    path = str(share_dir() / 'launch' / 'pick.launch.py')
    return launch.LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(path),
                                 launch_arguments={'use_sim': 'true', 'rviz': 'false'}.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


@pytest.mark.launch(fixture=pick_launch)
def test_manager_brings_everything_up(launch_context):
    """The lifecycle manager logs that the graph is active."""
    import time

    import rclpy
    from lifecycle_msgs.srv import GetState

    rclpy.init()
    node = rclpy.create_node('pick_launch_probe')
    try:
        from edge_loop import bringup
        for name in bringup.managed_node_names(bringup.graph('sim')):
            client = node.create_client(GetState, f'/{name}/get_state')
            assert client.wait_for_service(timeout_sec=60.0), name
            deadline = time.monotonic() + 60.0
            label = ''
            while time.monotonic() < deadline and label != 'active':
                future = client.call_async(GetState.Request())
                rclpy.spin_until_future_complete(node, future, timeout_sec=2.0)
                label = future.result().current_state.label if future.result() else ''
            assert label == 'active', f'{name} is {label}'
    finally:
        node.destroy_node()
        rclpy.shutdown()
