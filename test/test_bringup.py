# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The graph description, and that pick.launch.py and setup.py are built from it."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from edge_loop import bringup

ROOT = Path(__file__).resolve().parent.parent


def test_order_sources_and_monitor():
    names = [n.name for n in bringup.graph('sim')]
    assert names[0] == 'sim_robot' and names[-1] == 'deadline_monitor'
    assert names[1:-1] == list(bringup.STAGES)
    assert bringup.graph('bag', bag='/x')[0].parameters['bag'] == '/x'
    assert bringup.graph('driver', transport='shm')[0].name == 'frame_ingest'
    assert bringup.graph('driver', transport='ros')[0].name == 'object_locator'


def test_sim_runs_on_sim_time_and_bag_does_not():
    assert all(n.parameters['use_sim_time'] for n in bringup.graph('sim'))
    assert not any(n.parameters['use_sim_time'] for n in bringup.graph('bag', bag='/b'))


@pytest.mark.parametrize(('kwargs', 'message'), [
    ({'source': 'camera'}, "source 'camera'"),
    ({'source': 'bag'}, 'needs a bag path'),
    ({'source': 'sim', 'transport': 'udp'}, "transport 'udp'"),
    ({'source': 'sim', 'stages': ('teleport',)}, 'unknown stage'),
])
def test_bad_graph_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bringup.graph(**kwargs)


def test_overrides_go_to_a_node_section_file(tmp_path):
    spec = bringup.NodeSpec('a', 'object_locator', {'x': 1.5, 'l': (1.0, 2.0), 's': 'on'})
    args = spec.ros_args(Path('/p.yaml'), tmp_path)
    files = [args[i + 1] for i, a in enumerate(args) if a == '--params-file']
    assert files[0] == '/p.yaml', 'the shared file first, overrides after it'
    assert yaml.safe_load(Path(files[1]).read_text()) == {
        'a': {'ros__parameters': {'x': 1.5, 'l': [1.0, 2.0], 's': 'on'}}}
    assert '-p' not in args


def test_ros_args_carry_name_params_and_remaps():
    spec = bringup.NodeSpec('a', 'object_locator', {'x': 1.5, 'f': True, 'l': [1.0, 2.0],
                                                   's': 'shm'}, (('/in', '/out'),))
    args = spec.ros_args(Path('/p.yaml'))
    assert args[:3] == ['--ros-args', '-r', '__node:=a']
    assert '--params-file' in args and '/p.yaml' in args
    for literal in ('x:=1.5', 'f:=true', 'l:=[1.0,2.0]', "s:='shm'", '/in:=/out'):
        assert literal in args


def test_manager_gets_the_order():
    nodes = bringup.graph('sim')
    manager = bringup.manager_spec(nodes, autostart=True)
    assert manager.parameters['node_names'] == [n.name for n in nodes]
    assert manager.parameters['use_sim_time'] is True


def test_every_executable_has_an_entry_point_and_a_main():
    setup_src = (ROOT / 'setup.py').read_text()
    nodes = ast.literal_eval(re.search(r'NODES = (\[.*?\])', setup_src, re.S).group(1))
    used = {n.executable for src in bringup.SOURCES
            for n in bringup.graph(src, bag='/b')} | {'lifecycle_manager'}
    assert used <= set(nodes)
    for name in nodes:
        module = ROOT / 'edge_loop' / 'nodes' / f'{name}.py'
        assert module.is_file(), f'entry point {name} has no module'
        assert 'def main(' in module.read_text(), f'{module} has no main()'


def test_launch_file_uses_the_description():
    """Launch is not installable here: check that the file builds from bringup.graph."""
    tree = ast.parse((ROOT / 'launch' / 'pick.launch.py').read_text())
    calls = {n.func.attr for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert {'graph', 'manager_spec'} <= calls
    args = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, 'id', '') == 'DeclareLaunchArgument'}
    assert args == {'use_sim', 'bag', 'rviz', 'transport', 'params_file'}


def test_params_file_sections_name_real_nodes():
    params = yaml.safe_load((ROOT / 'config' / 'pick.yaml').read_text())
    known = {n.name for src in bringup.SOURCES for n in bringup.graph(src, bag='/b')}
    known |= {'lifecycle_manager', '/**'}
    assert set(params) <= known, set(params) - known
    for section in params.values():
        assert 'ros__parameters' in section


def test_grasp_state_node_declares_every_estimator_threshold():
    # The node builds GraspStateParams from its parameters of the same names.
    from edge_loop.kernels.grasp_state import GraspStateParams
    from edge_loop.nodes.grasp_state import GraspStateNode
    declared = {p.name for p in GraspStateNode.PARAMS}
    assert {f.name for f in dataclasses.fields(GraspStateParams)} <= declared
