# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Launch the pick loop on a robot that has ROS 2 launch.

    ros2 launch edge_loop pick.launch.py [use_sim:=true] [bag:=PATH] [rviz:=false]
        [transport:=shm|ros] [params_file:=PATH]

The nodes, their order, parameters and remaps come from edge_loop/bringup.py, the same
description ``edge-loop up`` starts in CI, so the two cannot drift apart.
"""

from __future__ import annotations

import os

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from edge_loop import bringup
from edge_loop.paths import share_dir
from launch import LaunchDescription


def _truthy(text: str) -> bool:
    return text.strip().lower() in ('1', 'true', 'yes', 'on')


def graph_actions(context, *args, **kwargs):
    """Build the node actions from the evaluated launch arguments."""
    use_sim = _truthy(LaunchConfiguration('use_sim').perform(context))
    bag = LaunchConfiguration('bag').perform(context)
    transport = LaunchConfiguration('transport').perform(context)
    params_file = LaunchConfiguration('params_file').perform(context)
    source = 'bag' if bag else ('sim' if use_sim else 'driver')
    nodes = bringup.graph(source, bag=bag or None, transport=transport)
    actions = []
    for spec in nodes:
        node_cls = LifecycleNode if spec.lifecycle else Node
        actions.append(node_cls(
            package=bringup.PACKAGE, executable=spec.executable, name=spec.name, namespace='',
            parameters=[params_file, spec.parameters], remappings=list(spec.remappings),
            output='screen'))
    manager = bringup.manager_spec(nodes, autostart=True)
    actions.append(Node(package=bringup.PACKAGE, executable=manager.executable,
                        name=manager.name, parameters=[params_file, manager.parameters],
                        output='screen'))
    if _truthy(LaunchConfiguration('rviz').perform(context)):
        actions.append(Node(package='rviz2', executable='rviz2', name='rviz2',
                            arguments=['-d', os.path.join(share_dir(), 'rviz', 'pick.rviz')]))
    return actions


def generate_launch_description() -> LaunchDescription:
    """Launch arguments plus the graph."""
    return LaunchDescription([
        DeclareLaunchArgument('use_sim', default_value='true',
                              description='run against the pybullet sim_robot'),
        DeclareLaunchArgument('bag', default_value='',
                              description='replay this rosbag2 folder instead of sim/driver'),
        DeclareLaunchArgument('rviz', default_value='false', description='start RViz'),
        DeclareLaunchArgument('transport', default_value='shm',
                              description='shm (iceoryx2 loans) or ros (Image topics)'),
        DeclareLaunchArgument('params_file',
                              default_value=str(bringup.default_params_file()),
                              description='ROS params file'),
        OpaqueFunction(function=graph_actions),
    ])
