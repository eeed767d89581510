# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Launch the pick loop with ROS 2 launch.

    ros2 launch edge_loop pick.launch.py [use_sim:=true] [bag:=PATH [loop:=true] [rate:=1.0]
        [start_paused:=false] [bag_clock:=false]] [namespace:=NS] [camera_ns:=camera]
        [transport:=shm|ros] [params_file:=PATH] [use_sim_time:=] [log_level:=info]
        [use_model:=false] [device:=] [extrinsics_source:=params|tf] [rviz:=false]

The nodes, their order, parameters, remaps and the camera's static transforms come from
edge_loop/bringup.py (``bringup.from_arguments``), the same description ``edge-loop up``
and ``edge-loop demo`` start, so they cannot disagree. Every argument is listed in
``bringup.LAUNCH_ARGUMENTS``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from edge_loop import bringup
from edge_loop.dds_profiles import profiles_to_set
from edge_loop.paths import share_dir
from launch import LaunchDescription

TF_PACKAGE = 'tf2_ros'


def has_package(name: str) -> bool:
    """Whether the ament index knows ``name`` (tf2_ros and rviz2 are optional here)."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        get_package_prefix(name)
    except (PackageNotFoundError, ValueError, KeyError, OSError):
        return False
    return True


def _node_action(spec: bringup.NodeSpec, params_files: list[Path]):
    node_cls = LifecycleNode if spec.lifecycle else Node
    ros_arguments = ['--log-level', spec.log_level] if spec.log_level else []
    return node_cls(
        package=bringup.PACKAGE, executable=spec.executable, name=spec.name,
        namespace=spec.namespace or '',
        parameters=[str(f) for f in params_files] + [spec.parameters],
        remappings=list(spec.remappings), ros_arguments=ros_arguments, output='screen')


def tf_actions(plan: bringup.LaunchPlan) -> list:
    """One tf2_ros static_transform_publisher per transform of the plan."""
    if not plan.transforms:
        return [LogInfo(msg='extrinsics_source:=tf: the robot publishes the camera in TF')]
    if not has_package(TF_PACKAGE):
        return [LogInfo(msg=f'{TF_PACKAGE} is not installed: the camera is not published in '
                            'TF (apt install ros-$ROS_DISTRO-tf2-ros)')]
    return [Node(package=TF_PACKAGE, executable='static_transform_publisher',
                 name=f'{t.child}_tf', namespace=plan.namespace or '',
                 arguments=t.arguments(), output='screen',
                 parameters=[{'use_sim_time': plan.use_sim_time}])
            for t in plan.transforms]


def graph_actions(context, *args, **kwargs):
    """Build every action from the evaluated launch arguments."""
    arguments = {name: LaunchConfiguration(name).perform(context)
                 for name, _, _ in bringup.LAUNCH_ARGUMENTS}
    work_dir = Path(tempfile.mkdtemp(prefix='edge_loop_launch_'))
    plan = bringup.from_arguments(arguments, work_dir)
    # The shipped Fast DDS profiles (a lost sample resent within 50 ms, not 3 s) unless the
    # environment names a profile of its own (edge_loop/dds_profiles.py).
    actions = [SetEnvironmentVariable(key, value)
               for key, value in profiles_to_set(os.environ).items()]
    actions += [_node_action(spec, plan.params_files) for spec in plan.nodes]
    actions.append(_node_action(plan.manager, plan.params_files))
    actions += tf_actions(plan)
    if bringup.truthy(arguments['rviz']):
        actions.append(Node(package='rviz2', executable='rviz2', name='rviz2',
                            namespace=plan.namespace or '',
                            arguments=['-d', os.path.join(share_dir(), 'rviz', 'pick.rviz')],
                            # pick.rviz names the contract's topics: the graph's remaps make
                            # RViz follow namespace:= and camera_ns:= as the nodes do.
                            remappings=list(bringup.topic_remappings(
                                plan.namespace, arguments['camera_ns'])),
                            parameters=[{'use_sim_time': plan.use_sim_time}]))
    return actions


def generate_launch_description() -> LaunchDescription:
    """Launch arguments plus the graph."""
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, default, description in bringup.LAUNCH_ARGUMENTS),
        OpaqueFunction(function=graph_actions),
    ])
