# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests and benchmarks that run real ROS processes.

- :func:`domain_env` gives each test its own ``ROS_DOMAIN_ID`` (parallel tests stay apart).
- :class:`NodeProcess` starts one node in its own process with the venv's Python and the
  parent's environment (the wheels' bootstrap needs both), logs to a file, and always stops.
- :class:`RosHarness` is an in-test rclpy context + node + executor thread with helpers that
  wait on events (matched subscriptions, messages, lifecycle states), never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_domain_counter = itertools.count()


def next_domain_id() -> int:
    """A ROS_DOMAIN_ID not used by another test of this run (1..100, per xdist worker)."""
    worker = os.environ.get('PYTEST_XDIST_WORKER', 'gw0')
    offset = int(worker[2:] or 0) * 20 if worker.startswith('gw') else 0
    return 1 + (offset + os.getpid() + next(_domain_counter)) % 100


def domain_env(domain_id: int, log_dir: Path | None = None) -> dict[str, str]:
    """Environment for child processes on ``domain_id`` (inherits the parent's)."""
    env = dict(os.environ)
    env['ROS_DOMAIN_ID'] = str(domain_id)
    env['ROS_LOCALHOST_ONLY'] = '0'
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env['PYTHONUNBUFFERED'] = '1'
    env['RCUTILS_COLORIZED_OUTPUT'] = '0'
    if log_dir is not None:
        env['ROS_LOG_DIR'] = str(log_dir)
    env.setdefault('ROS_LOG_DIR', str(Path(tempfile.gettempdir()) / 'edge_loop_ros_log'))
    return env


class NodeProcess:
    """One node executable in its own process (``python -m edge_loop.nodes.<module>``)."""

    def __init__(self, module: str, ros_args: list[str], env: dict[str, str],
                 log_path: Path, name: str | None = None) -> None:
        self.module = module
        self.name = name or module.rsplit('.', 1)[-1]
        self.log_path = log_path
        self._log = open(log_path, 'wb')  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, '-m', module, *ros_args]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    @property
    def pid(self) -> int:
        """Process id."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def output(self) -> str:
        """Everything the process printed so far."""
        self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait_for_output(self, text: str, timeout: float) -> bool:
        """Wait until ``text`` appears in the process output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return True
            if not self.alive():
                return text in self.output()
            time.sleep(0.05)
        return False

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process."""
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL; returns the exit code."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0),
                          (signal.SIGKILL, 3.0)):
            if not self.alive():
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)
        self._log.close()
        return self.proc.poll()


def start_node(executable: str, env: dict[str, str], log_dir: Path, name: str | None = None,
               params: dict[str, Any] | None = None, params_file: Path | None = None,
               remaps: tuple[tuple[str, str], ...] = ()) -> NodeProcess:
    """Start the node ``executable`` (an entry in setup.py) as ``name``."""
    from edge_loop.bringup import NodeSpec

    spec = NodeSpec(name=name or executable, executable=executable, parameters=params or {},
                    remappings=remaps)
    log_dir.mkdir(parents=True, exist_ok=True)
    return NodeProcess(f'edge_loop.nodes.{executable}', spec.ros_args(params_file), env,
                       log_dir / f'{spec.name}.log', name=spec.name)


class RosHarness:
    """An rclpy context, a node and an executor thread living inside a test."""

    def __init__(self, domain_id: int, name: str = 'test_harness') -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.spin()

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(timeout=3.0)

    def collect(self, msg_type: Any, topic: str, qos: Any = 10) -> list[Any]:
        """Subscribe and return the (growing) list of received messages."""
        received: list[Any] = []
        self.node.create_subscription(msg_type, topic, received.append, qos)
        return received

    def wait_until(self, predicate: Callable[[], bool], timeout: float,
                   what: str = 'condition') -> None:
        """Poll ``predicate`` until true; AssertionError naming ``what`` on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.01)
        raise AssertionError(f'timed out after {timeout:.1f} s waiting for {what}')

    def wait_for_publishers(self, topic: str, count: int = 1, timeout: float = 15.0) -> None:
        """Wait until ``topic`` has ``count`` publishers (discovery finished)."""
        self.wait_until(lambda: self.node.count_publishers(topic) >= count, timeout,
                        f'{count} publisher(s) on {topic}')

    def wait_for_subscribers(self, topic: str, count: int = 1, timeout: float = 15.0) -> None:
        """Wait until ``topic`` has ``count`` subscribers."""
        self.wait_until(lambda: self.node.count_subscribers(topic) >= count, timeout,
                        f'{count} subscriber(s) on {topic}')

    def lifecycle(self, target: str):
        """A LifecycleClient for ``target`` on this harness's node."""
        from edge_loop.lifecycle_client import LifecycleClient

        return LifecycleClient(self.node, target)


@contextlib.contextmanager
def ros_harness(domain_id: int, name: str = 'test_harness') -> Iterator[RosHarness]:
    """Context-managed :class:`RosHarness`."""
    h = RosHarness(domain_id, name)
    try:
        yield h
    finally:
        h.close()


def shm_entries() -> set[str]:
    """Names in /dev/shm (to check that nothing is left behind)."""
    try:
        return set(os.listdir('/dev/shm'))
    except FileNotFoundError:
        return set()
