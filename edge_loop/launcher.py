# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop up``: what ``ros2 launch edge_loop pick.launch.py`` does, without launch.

Starts every node of the graph description (edge_loop/bringup.py) in its own process, then
the lifecycle manager, which configures and activates them in order. SIGINT/SIGTERM bring
the nodes down in reverse order and stop every child; nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from edge_loop import bringup
from edge_loop.dds_profiles import with_default_profiles
from edge_loop.process import NodeProcess


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop up`` (the launch arguments of pick.launch.py, same names)."""
    parser.add_argument('--source', choices=bringup.SOURCES, default='sim',
                        help='camera/gripper source: simulator, bag replay or a real driver')
    parser.add_argument('--bag', help='rosbag2 folder for --source bag')
    parser.add_argument('--transport', choices=bringup.TRANSPORTS, default='shm')
    parser.add_argument('--params-file', type=Path, default=None,
                        help='ROS params file layered over config/pick.yaml')
    for name, default, description in bringup.LAUNCH_ARGUMENTS:
        if name in _SOURCE_ARGUMENTS:
            continue
        parser.add_argument('--' + name.replace('_', '-'), dest=name, default=default,
                            help=f'{description} (launch argument {name}:=, default '
                                 f'{default!r})')
    parser.add_argument('--stages', nargs='*', default=list(bringup.STAGES),
                        help='subset of stages to start')
    parser.add_argument('--no-monitor', action='store_true', help='without deadline_monitor')
    parser.add_argument('--set', action='append', default=[], metavar='NODE.PARAM=VALUE',
                        help='override a parameter (YAML value), e.g. bag_player.rate=2.0')
    parser.add_argument('--log-dir', type=Path, default=None, help='node logs (default: tmp)')
    parser.add_argument('--duration', type=float, default=0.0,
                        help='stop by itself after this many seconds (0: until Ctrl-C)')
    parser.add_argument('--startup-timeout', type=float, default=60.0)


# Launch arguments that ``edge-loop up`` spells its own way (--source, --bag, ...).
_SOURCE_ARGUMENTS = {'use_sim', 'bag', 'transport', 'params_file', 'rviz'}


def parse_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """['node.param=value', ...] -> {node: {param: value}} (values parsed as YAML)."""
    import yaml

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition('=')
        node, dot, param = key.partition('.')
        if not sep or not dot or not node or not param:
            raise ValueError(f'--set {item!r}: expected NODE.PARAM=VALUE')
        out.setdefault(node, {})[param] = yaml.safe_load(value)
    return out


class Graph:
    """A running graph: node processes plus the lifecycle manager."""

    def __init__(self, nodes: list[bringup.NodeSpec], params_file: Path | list[Path],
                 log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.nodes = nodes
        self.params_file = params_file
        self.log_dir = log_dir
        self.env = with_default_profiles(dict(env if env is not None else os.environ))
        self.procs: list[NodeProcess] = []

    def start(self) -> None:
        """Start every node process, then the manager (autostart)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.nodes:
            self.procs.append(self._start(spec))
        self.procs.append(self._start(bringup.manager_spec(self.nodes, autostart=True)))

    def _start(self, spec: bringup.NodeSpec) -> NodeProcess:
        # The spec's own ros_args: name, namespace, log level, remaps and the params files
        # layered in order, then its per-node settings (what launch_ros passes).
        return NodeProcess(f'edge_loop.nodes.{spec.executable}',
                           spec.ros_args(self.params_file, self.log_dir / 'params'), self.env,
                           self.log_dir / f'{spec.name}.log', name=spec.name)

    def wait_active(self, timeout: float) -> None:
        """Wait until the lifecycle manager has brought every managed node to ``active``.

        The manager's own report is the judge: once up, a node may leave ``active`` again by
        design (the deadline monitor deactivates the controller after missed deadlines), so
        polling the nodes afterwards could wait for a state that is not coming back.
        """
        names = bringup.managed_node_names(self.nodes)
        done = f'all {len(names)} nodes active'
        deadline = time.monotonic() + timeout
        while True:
            manager_log = self.procs[-1].output()
            if done in manager_log:
                return
            if 'bring-up aborted' in manager_log:
                raise RuntimeError('bring-up aborted:\n' + _tail(manager_log, 8))
            dead = self.dead()
            if dead:
                raise RuntimeError(
                    f'process(es) exited during bring-up: {dead}\n' + '\n'.join(
                        f'--- {p.name}\n{_tail(p.output())}' for p in self.procs
                        if p.name in dead))
            if time.monotonic() > deadline:
                raise RuntimeError(f'{names} not all active after {timeout:.0f} s; manager '
                                   f'log:\n' + _tail(manager_log))
            time.sleep(0.05)

    def dead(self) -> list[str]:
        """Names of node processes that exited."""
        return [p.name for p in self.procs if not p.alive()]

    def stop(self) -> dict[str, int | None]:
        """Manager first (it shuts the nodes down in reverse order), then every process."""
        codes: dict[str, int | None] = {}
        if self.procs:
            manager = self.procs[-1]
            codes[manager.name] = manager.stop(timeout=15.0)
        for proc in reversed(self.procs[:-1]):
            codes[proc.name] = proc.stop(timeout=10.0)
        return codes


def _tail(text: str, lines: int = 30) -> str:
    return '\n'.join(text.splitlines()[-lines:])


def build_graph(args: argparse.Namespace) -> tuple[list[bringup.NodeSpec], list[Path]]:
    """Graph description and params files (in layering order) from parsed arguments."""
    extra = parse_overrides(args.set)
    if args.source == 'bag' and not args.bag:
        raise ValueError("source 'bag' needs a bag path")
    arguments = {name: str(getattr(args, name)) for name, _, _ in bringup.LAUNCH_ARGUMENTS
                 if name not in _SOURCE_ARGUMENTS and hasattr(args, name)}
    arguments.update({'use_sim': str(args.source == 'sim').lower(),
                      'bag': args.bag if args.source == 'bag' else '',
                      'transport': args.transport,
                      'params_file': str(args.params_file) if args.params_file else ''})
    if args.params_file is not None and not Path(args.params_file).is_file():
        raise FileNotFoundError(f'params file {args.params_file} not found')
    work_dir = Path(tempfile.mkdtemp(prefix='edge_loop_up_params_'))
    plan = bringup.from_arguments(arguments, work_dir, extra=extra,
                                  stages=tuple(args.stages), monitor=not args.no_monitor)
    return plan.nodes, plan.params_files


def run(args: argparse.Namespace) -> int:
    """Run the graph until Ctrl-C / SIGTERM / --duration; return 0 on a clean stop."""
    try:
        nodes, params_files = build_graph(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f'edge-loop up: {exc}', file=sys.stderr)
        return 2
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix='edge_loop_up_'))
    graph = Graph(nodes, params_files, log_dir)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    rc = 0
    try:
        graph.start()
        print(f'edge-loop up: started {len(graph.procs)} processes; logs in {log_dir}',
              flush=True)
        graph.wait_active(args.startup_timeout)
        print('edge-loop up: graph active: ' + ', '.join(n.name for n in nodes), flush=True)
        deadline = time.monotonic() + args.duration if args.duration > 0 else None
        while not stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                break
            dead = graph.dead()
            if dead:
                print(f'edge-loop up: process(es) exited: {dead}', file=sys.stderr, flush=True)
                rc = 1
                break
            stop.wait(0.2)
    except RuntimeError as exc:
        print(f'edge-loop up: {exc}', file=sys.stderr, flush=True)
        rc = 1
    finally:
        codes = graph.stop()
        for s, handler in old.items():
            signal.signal(s, handler)
        print('edge-loop up: stopped: ' + ', '.join(f'{k}={v}' for k, v in codes.items()),
              flush=True)
    return rc
