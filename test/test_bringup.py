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
    """pick.launch.py declares exactly bringup's arguments and builds from_arguments."""
    tree = ast.parse((ROOT / 'launch' / 'pick.launch.py').read_text())
    calls = {n.func.attr for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert 'from_arguments' in calls
    names = [name for name, _, _ in bringup.LAUNCH_ARGUMENTS]
    assert len(names) == len(set(names))
    assert {'use_sim', 'bag', 'loop', 'rate', 'start_paused', 'bag_clock', 'use_sim_time',
            'namespace', 'camera_ns', 'transport', 'params_file', 'log_level', 'use_model',
            'device', 'extrinsics_source', 'rviz'} == set(names)


def _rotate(q, v):
    """Rotate vector v by unit quaternion q = [x, y, z, w]."""
    qv = (*v, 0.0)
    r = bringup.quaternion_multiply(bringup.quaternion_multiply(q, qv),
                                    bringup.quaternion_conjugate(q))
    return r[:3]


def test_camera_transforms_match_the_extrinsics_parameters(tmp_path):
    """The transforms world -> camera_link -> optical compose to camera_position/orientation."""
    params = tmp_path / 'p.yaml'
    q = (0.9238795, 0.0, 0.3826834, 0.0)   # tilted, not just the default straight-down view
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'camera_position': [0.1, -0.2, 0.8], 'camera_orientation': list(q)}}}))
    link, optical = bringup.camera_transforms([bringup.default_params_file(), params])
    assert (link.parent, link.child) == ('world', 'camera_link')
    assert (optical.parent, optical.child) == ('camera_link', 'camera_color_optical_frame')
    assert link.translation == (0.1, -0.2, 0.8) and optical.translation == (0.0, 0.0, 0.0)
    composed = bringup.quaternion_multiply(link.rotation, optical.rotation)
    for axis in ((1, 0, 0), (0, 1, 0), (0, 0, 1)):
        assert _rotate(composed, axis) == pytest.approx(_rotate(q, axis), abs=1e-6)
    # REP 103: the optical z (viewing direction) is camera_link's x.
    assert _rotate(optical.rotation, (0, 0, 1)) == pytest.approx((1, 0, 0), abs=1e-9)
    args = link.arguments()
    assert args[args.index('--frame-id') + 1] == 'world'
    assert [float(args[args.index(f) + 1]) for f in ('--x', '--y', '--z')] == [0.1, -0.2, 0.8]


def test_shipped_camera_looks_straight_down():
    link, optical = bringup.camera_transforms([bringup.default_params_file()])
    composed = bringup.quaternion_multiply(link.rotation, optical.rotation)
    assert _rotate(composed, (0, 0, 1)) == pytest.approx((0, 0, -1), abs=1e-9)
    assert _rotate(link.rotation, (1, 0, 0)) == pytest.approx((0, 0, -1), abs=1e-9)


def test_sim_settings_live_in_the_description():
    sim = {n.name: n.parameters for n in bringup.graph('sim')}
    assert sim['sim_robot']['lockstep'] is True
    assert all(p['use_sim_time'] for p in sim.values())


def test_bag_replay_options():
    nodes = bringup.graph('bag', bag='/b', replay=bringup.Replay(loop=True, rate=0.5,
                                                                 start_paused=True))
    player = nodes[0].parameters
    assert (player['loop'], player['rate'], player['start_paused']) == (True, 0.5, True)
    assert player['restamp'] is True and player['publish_clock'] is False
    assert player['wait_for_manager'] == 'lifecycle_manager'
    assert not any(n.parameters['use_sim_time'] for n in nodes)
    clocked = bringup.graph('bag', bag='/b', replay=bringup.Replay(clock=True))
    assert clocked[0].parameters['publish_clock'] is True
    assert clocked[0].parameters['restamp'] is False
    assert all(n.parameters['use_sim_time'] for n in clocked)


def test_namespace_remaps_every_contract_topic_but_global_ones(tmp_path):
    nodes = bringup.graph('sim', namespace='robot1')
    assert {n.namespace for n in nodes} == {'/robot1'}
    remaps = dict(nodes[0].remappings)
    assert remaps['/edge_loop/grasp'] == 'edge_loop/grasp'
    assert remaps['/camera/color/camera_info'] == 'camera/color/camera_info'
    assert '/diagnostics' not in remaps and '/clock' not in remaps
    assert nodes[0].parameters['frame_channel'] == 'robot1/edge_loop/rgbd'
    assert bringup.graph('sim')[0].remappings == ()
    args = nodes[0].ros_args(None)
    assert '__ns:=/robot1' in args
    with pytest.raises(ValueError, match='namespace'):
        bringup.graph('sim', namespace='1robot')
    out = bringup.namespaced_params_file(bringup.default_params_file(), '/robot1', tmp_path)
    sections = yaml.safe_load(out.read_text())
    assert '/**' in sections and '/robot1/object_locator' in sections
    assert 'object_locator' not in sections


def test_realsense_camera_namespace():
    remaps = dict(bringup.topic_remappings('', bringup.REALSENSE_CAMERA_NS))
    assert remaps == {
        '/camera/color/image_raw': '/camera/camera/color/image_raw',
        '/camera/aligned_depth_to_color/image_raw':
            '/camera/camera/aligned_depth_to_color/image_raw',
        '/camera/color/camera_info': '/camera/camera/color/camera_info'}


def test_from_arguments_layers_params_and_passes_settings(tmp_path):
    user = tmp_path / 'mine.yaml'
    user.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'camera_position': [0.0, 0.0, 1.0]}}}))
    plan = bringup.from_arguments(
        {'bag': '/b', 'loop': 'true', 'rate': '2', 'params_file': str(user),
         'log_level': 'debug', 'use_model': 'true', 'namespace': 'r1',
         'camera_ns': '/camera/camera'}, tmp_path / 'work')
    assert [n.name for n in plan.nodes][0] == 'bag_player'
    assert plan.nodes[0].parameters['rate'] == 2.0 and plan.nodes[0].parameters['loop']
    assert len(plan.params_files) == 2 and plan.params_files[1].name.endswith('mine.yaml')
    assert all(n.log_level == 'debug' for n in plan.nodes + [plan.manager])
    locator = next(n for n in plan.nodes if n.name == 'object_locator')
    assert locator.parameters['use_model'] is True
    assert plan.transforms[0].translation == (0.0, 0.0, 1.0), 'the user file wins'
    assert plan.manager.namespace == '/r1'
    default = bringup.from_arguments({}, tmp_path / 'work')
    assert 'use_model' not in next(n for n in default.nodes if n.name == 'object_locator'
                                   ).parameters, 'an unset argument must not mask params_file'
    assert not bringup.from_arguments({'extrinsics_source': 'tf'}, tmp_path).transforms
    for bad, match in (({'rate': 'fast'}, 'rate'), ({'loop': 'maybe'}, 'loop'),
                       ({'log_level': 'loud'}, 'log_level'), ({'nope': '1'}, 'unknown'),
                       ({'params_file': '/missing.yaml'}, 'params_file'),
                       ({'extrinsics_source': 'guess'}, 'extrinsics_source')):
        with pytest.raises(ValueError, match=match):
            bringup.from_arguments(bad, tmp_path)


def test_device_goes_only_to_nodes_that_declare_it(monkeypatch):
    monkeypatch.setattr(bringup, 'declared_parameters',
                        lambda exe: {'device'} if exe == 'object_locator' else set())
    nodes = {n.name: n.parameters for n in bringup.graph('sim', device='cuda:0')}
    assert nodes['object_locator']['device'] == 'cuda:0'
    assert 'device' not in nodes['grasp_planner']
    assert 'device' not in {n.name: n.parameters for n in bringup.graph('sim')}[
        'object_locator']


def test_declared_parameters_reads_the_node_class():
    names = bringup.declared_parameters('object_locator')
    assert {'use_model', 'transport', 'camera_position'} <= names


def test_launch_actions_carry_the_plan(tmp_path, monkeypatch):
    """The launch file's actions, evaluated: TF arguments from the parameters, namespace."""
    pytest.importorskip('launch_ros', reason='the launch stack is not installed')
    import importlib.util

    from launch.utilities import perform_substitutions

    from launch import LaunchContext

    spec = importlib.util.spec_from_file_location('pick_launch',
                                                  ROOT / 'launch' / 'pick.launch.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, 'has_package', lambda name: True)
    context = LaunchContext()
    for name, default, _ in bringup.LAUNCH_ARGUMENTS:
        context.launch_configurations[name] = default
    context.launch_configurations.update({'namespace': 'r1', 'log_level': 'warn'})
    actions = module.graph_actions(context)
    tf = [a for a in actions if getattr(a, 'node_executable', None) == 'static_transform_publisher']
    expected = bringup.camera_transforms([bringup.default_params_file()])
    assert len(tf) == 2
    for action, transform in zip(tf, expected):
        # cmd[0] is the executable (resolved through the ament index at run time), the
        # arguments follow it; the ROS-specific ones after them are filled in at execution.
        n = len(transform.arguments())
        cmd = [perform_substitutions(context, part) for part in action.cmd[1:1 + n]]
        assert cmd == transform.arguments(), cmd
    graph = [a for a in actions if getattr(a, 'node_package', None) == bringup.PACKAGE]
    assert len(graph) == len(bringup.graph('sim')) + 1
    monkeypatch.setattr(module, 'has_package', lambda name: False)
    assert not [a for a in module.graph_actions(context)
                if getattr(a, 'node_executable', None) == 'static_transform_publisher']


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


# --- the one stage table (edge_loop/stages.py) -------------------------------------------------
def _stage_name_literals(path: Path, names: set[str]) -> list[int]:
    """Lines of literal lists/tuples/sets/dict keys naming three or more stages."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            elts = node.keys if isinstance(node, ast.Dict) else node.elts
            found = [e for e in elts if isinstance(e, ast.Constant) and e.value in names]
            if len(found) >= 3:
                lines.append(node.lineno)
    return lines


def test_no_second_stage_table_in_the_package():
    """Stage names are listed once: a literal list of three or more elsewhere is a copy."""
    from edge_loop import stages

    copies = {str(p.relative_to(ROOT)): lines
              for p in sorted((ROOT / 'edge_loop').rglob('*.py')) if p.name != 'stages.py'
              for lines in [_stage_name_literals(p, set(stages.NAMES))] if lines}
    assert not copies, f'stage lists outside edge_loop/stages.py (derive them from it): {copies}'


def test_pick_yaml_does_not_repeat_the_stage_table():
    from edge_loop import stages

    monitor = yaml.safe_load((ROOT / 'config' / 'pick.yaml').read_text())[
        'deadline_monitor']['ros__parameters']
    repeated = sorted(set(stages.TABLE_KEYS) & set(monitor))
    assert not repeated, f'config/pick.yaml repeats the stage table: {repeated}'


def test_monitor_defaults_bringup_and_check_come_from_the_table(tmp_path):
    from edge_loop import stages
    from edge_loop.check import session, verification
    from edge_loop.nodes.deadline_monitor import DeadlineMonitor

    declared = {p.name: p.default for p in DeadlineMonitor.PARAMS}
    assert {k: declared[k] for k in stages.TABLE_KEYS} == stages.monitor_defaults()
    assert bringup.STAGES == stages.NAMES
    assert list(session.FRAME_STAGES) == list(verification.GATED_STAGES) == list(
        stages.FRAME_STAGES)
    # A robot's params file overrides a budget; the rest of the table stays.
    user = tmp_path / 'robot.yaml'
    user.write_text(yaml.safe_dump({'deadline_monitor': {'ros__parameters': {
        'stage_budgets_ms': [40.0, 60.0, 40.0, 10.0, 10.0]}}}))
    applied = stages.monitor_parameters([bringup.default_params_file(), user])
    e2e, budgets = stages.budgets_ms(applied)
    assert e2e == stages.END_TO_END_BUDGET_MS and budgets['grasp_planner'] == 60.0
    assert applied['stall_periods'] == 5, 'pick.yaml keys come through'
