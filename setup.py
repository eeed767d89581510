# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""ament_python package definition for edge_loop."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'edge_loop'

# One executable per node, named as in edge_loop/bringup.py.
NODES = [
    'object_locator',
    'grasp_planner',
    'occupancy_mapper',
    'grasp_state',
    'pick_controller',
    'deadline_monitor',
    'lifecycle_manager',
    'bag_player',
    'sim_robot',
    'frame_ingest',
    'target_reasoner',
]

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={'edge_loop.models': ['*.onnx', '*.json']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.py')),
        ('share/' + package_name + '/config',
         glob('config/*.yaml') + glob('config/*.json') + glob('config/*.xml')),
        ('share/' + package_name + '/rviz', glob('rviz/*.rviz')),
    ] + [
        # The embedded scenario bags (make demo, replay regression), one entry per bag folder.
        ('share/' + package_name + '/' + folder, glob(folder + '/*'))
        for folder in sorted(glob('data/scenarios/*'))
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='edge_loop developers',
    maintainer_email='dev@edge-loop.invalid',
    description='A verified Physical-AI pick loop as ROS 2 lifecycle nodes.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            f'{name} = edge_loop.nodes.{name}:main' for name in NODES
        ] + ['edge-loop = edge_loop.cli:main'],
    },
)
