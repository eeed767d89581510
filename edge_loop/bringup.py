# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The one description of the node graph: executables, order, parameters, remaps.

``edge-loop up`` (edge_loop/launcher.py) starts it as processes here; launch/pick.launch.py
turns the same list into launch_ros LifecycleNode actions on robots that have launch.
The list order is the bring-up order; shutdown walks it backwards (as Nav2's manager does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_loop.paths import config_path

PACKAGE = 'edge_loop'
SOURCES = ('sim', 'bag', 'driver')
TRANSPORTS = ('shm', 'ros')
STAGES = ('object_locator', 'grasp_planner', 'occupancy_mapper', 'grasp_state', 'pick_controller')


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph, as launch_ros would describe it."""

    name: str
    executable: str
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    lifecycle: bool = True
    managed: bool = True      # brought up by the lifecycle manager

    def ros_args(self, params_file: Path | None, overrides_dir: Path | None = None
                 ) -> list[str]:
        """Command-line ROS arguments for this node (what launch_ros would pass).

        With ``overrides_dir`` the per-node parameters go into a second params file under the
        node's name, read after ``params_file``: rcl stores ``-p`` overrides under ``/**``,
        where they lose to a key in the node's own section of the first file.
        """
        args = ['--ros-args', '-r', f'__node:={self.name}']
        if params_file is not None:
            args += ['--params-file', str(params_file)]
        if overrides_dir is not None and self.parameters:
            import yaml

            overrides_dir.mkdir(parents=True, exist_ok=True)
            path = overrides_dir / f'{self.name}.params.yaml'
            path.write_text(yaml.safe_dump({self.name: {'ros__parameters': dict(
                (k, list(v) if isinstance(v, tuple) else v)
                for k, v in self.parameters.items())}}))
            args += ['--params-file', str(path)]
        else:
            for key, value in self.parameters.items():
                args += ['-p', f'{key}:={_param_literal(value)}']
        for src, dst in self.remappings:
            args += ['-r', f'{src}:={dst}']
        return args


def _param_literal(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, tuple)):
        return '[' + ','.join(_param_literal(v) for v in value) + ']'
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def default_params_file() -> Path:
    """config/pick.yaml from the installed share directory or the source tree."""
    return config_path('pick.yaml')


def graph(source: str = 'sim', *, bag: str | None = None, transport: str = 'shm',
          use_sim_time: bool | None = None, stages: tuple[str, ...] = STAGES,
          monitor: bool = True, extra: dict[str, dict[str, Any]] | None = None,
          ) -> list[NodeSpec]:
    """Return the nodes of the pick loop in bring-up order.

    Args:
        source: where the camera and gripper come from: ``sim`` (sim_robot), ``bag``
            (bag_player replaying ``bag``) or ``driver`` (a real camera driver; frame_ingest
            copies its images into shared memory once).
        bag: rosbag2 folder for ``source='bag'``.
        transport: ``shm`` (iceoryx2 loans) or ``ros`` (plain Image topics).
        use_sim_time: run on /clock; defaults to True with the simulator.
        stages: which processing stages to start (a subset for tests and partial graphs).
        monitor: start the deadline monitor.
        extra: per-node parameter overrides {node_name: {param: value}}.

    """
    if source not in SOURCES:
        raise ValueError(f'source {source!r} not one of {", ".join(SOURCES)}')
    if transport not in TRANSPORTS:
        raise ValueError(f'transport {transport!r} not one of {", ".join(TRANSPORTS)}')
    if source == 'bag' and not bag:
        raise ValueError("source 'bag' needs a bag path")
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise ValueError(f'unknown stage(s) {sorted(unknown)}; known: {", ".join(STAGES)}')
    sim_time = (source == 'sim') if use_sim_time is None else use_sim_time
    common = {'transport': transport, 'use_sim_time': sim_time}
    extra = extra or {}

    def spec(name: str, executable: str | None = None, **params: Any) -> NodeSpec:
        merged = {**common, **params, **extra.get(name, {})}
        return NodeSpec(name=name, executable=executable or name, parameters=merged)

    nodes: list[NodeSpec] = []
    if source == 'sim':
        nodes.append(spec('sim_robot'))
    elif source == 'bag':
        nodes.append(spec('bag_player', bag=str(bag)))
    elif transport == 'shm':
        nodes.append(spec('frame_ingest'))
    nodes += [spec(s) for s in STAGES if s in stages]
    if monitor:
        nodes.append(spec('deadline_monitor'))
    return nodes


def managed_node_names(nodes: list[NodeSpec]) -> list[str]:
    """Names the lifecycle manager brings up, in order."""
    return [n.name for n in nodes if n.lifecycle and n.managed]


def manager_spec(nodes: list[NodeSpec], **params: Any) -> NodeSpec:
    """The lifecycle manager for ``nodes`` (itself a plain node, started last)."""
    use_sim_time = any(n.parameters.get('use_sim_time') for n in nodes)
    return NodeSpec(name='lifecycle_manager', executable='lifecycle_manager',
                    parameters={'node_names': managed_node_names(nodes),
                                'use_sim_time': use_sim_time, **params},
                    lifecycle=False, managed=False)
