# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests and benchmarks that run real ROS processes.

- :func:`domain_env` gives each test its own ``ROS_DOMAIN_ID`` (parallel tests stay apart).
- :func:`start_node` (edge_loop/process.py) starts one node process that always stops.
- :class:`RosHarness` is an in-test rclpy context + node + executor thread with helpers that
  wait on events (matched subscriptions, messages, lifecycle states), never on fixed sleeps.
- :func:`monitor_loop_status` reads the deadline monitor's loop status from ``/diagnostics``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from edge_loop.dds_profiles import with_default_profiles
from edge_loop.process import NodeProcess, start_node

__all__ = ['NodeProcess', 'RosHarness', 'claim_domain_id', 'domain_env', 'next_domain_id',
           'ros_harness', 'shm_entries', 'start_node']

_domain_counter = itertools.count()


def claim_domain_id() -> tuple[int, Any]:
    """A ROS_DOMAIN_ID (1..100) no other test process holds; release with the returned lock.

    Concurrent pytest runs on one machine would otherwise share domains and see each other's
    nodes; each claim holds an flock on /tmp/edge_loop_domain_<id>.lock.
    """
    import fcntl

    start = (os.getpid() + next(_domain_counter)) % 100
    for i in range(100):
        domain = 1 + (start + i) % 100
        lock = open(Path(tempfile.gettempdir()) / f'edge_loop_domain_{domain}.lock', 'w')  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        return domain, lock
    raise RuntimeError('all ROS domain ids 1..100 are claimed by other test processes')


def next_domain_id() -> int:
    """A ROS_DOMAIN_ID for a helper process that does not need the lock."""
    return 1 + (os.getpid() + next(_domain_counter)) % 100


def domain_env(domain_id: int, log_dir: Path | None = None) -> dict[str, str]:
    """Environment for child processes on ``domain_id`` (inherits the parent's)."""
    env = dict(os.environ)
    env['ROS_DOMAIN_ID'] = str(domain_id)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env['PYTHONUNBUFFERED'] = '1'
    env['RCUTILS_COLORIZED_OUTPUT'] = '0'
    with_default_profiles(env)
    if log_dir is not None:
        env['ROS_LOG_DIR'] = str(log_dir)
    env.setdefault('ROS_LOG_DIR', str(Path(tempfile.gettempdir()) / 'edge_loop_ros_log'))
    return env


class RosHarness:
    """An rclpy context, a node and an executor thread living inside a test."""

    def __init__(self, domain_id: int, name: str = 'test_harness') -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        # Single-threaded: rclpy's MultiThreadedExecutor spins while its workers have not yet
        # taken a ready message, and with 100 Hz fakes it held this process's GIL so much
        # that a fake loop thread here went silent for up to 0.95 s (py-spy, CI flakes).
        self.executor = SingleThreadedExecutor(context=self.context)
        self.matched: dict[str, int] = {}
        self._tracked: set[str] = set()
        self.error: BaseException | None = None   # what stopped the executor thread, if any
        self._probes: list[ReceiveProbe] = []
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception as exc:  # noqa: BLE001 - a callback raised: every wait reports it
            if self.context.ok():
                self.error = exc

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        for probe in self._probes:
            probe.close()
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(timeout=3.0)

    def subscribe(self, msg_type: Any, topic: str, callback: Callable[[Any], None],
                  qos: Any = 10) -> Any:
        """Subscribe and track this reader's matched-publisher count (for waits)."""
        from rclpy.event_handler import SubscriptionEventCallbacks

        def on_matched(info: Any) -> None:
            self.matched[topic] = int(info.current_count)

        self._tracked.add(topic)
        return self.node.create_subscription(
            msg_type, topic, callback, qos,
            event_callbacks=SubscriptionEventCallbacks(matched=on_matched))

    def receive_probe(self, msg_type: Any, topic: str, qos: Any = 100) -> ReceiveProbe:
        """A :class:`ReceiveProbe` of ``topic`` on this harness's context (closed with it)."""
        probe = ReceiveProbe(self.context, msg_type, topic, qos)
        self._probes.append(probe)
        return probe

    def collect(self, msg_type: Any, topic: str, qos: Any = 10) -> list[Any]:
        """Subscribe and return the (growing) list of received messages."""
        received: list[Any] = []
        self.subscribe(msg_type, topic, received.append, qos)
        return received

    def wait_until(self, predicate: Callable[[], bool], timeout: float,
                   what: str = 'condition') -> None:
        """Poll ``predicate`` until true; AssertionError naming ``what`` on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.error is not None:   # no callback runs any more: waiting is pointless
                raise AssertionError(f'the test harness executor stopped while waiting for '
                                     f'{what}: {self.error!r}') from self.error
            time.sleep(0.01)
        raise AssertionError(f'timed out after {timeout:.1f} s waiting for {what}')

    def wait_for_publishers(self, topic: str, count: int = 1, timeout: float = 15.0) -> None:
        """Wait until ``topic`` has ``count`` publishers (discovery finished)."""
        # Our reader's matched event when we subscribed through subscribe(): the graph can
        # show a publisher before the reader has matched it, and then drops its first data.
        def ready() -> bool:
            if topic in self.matched or topic in self._tracked:
                return self.matched.get(topic, 0) >= count
            return self.node.count_publishers(topic) >= count
        self.wait_until(ready, timeout, f'{count} publisher(s) on {topic}')

    def wait_for_subscribers(self, topic: str, count: int = 1, timeout: float = 15.0) -> None:
        """Wait until ``topic`` has ``count`` subscribers."""
        self.wait_until(lambda: self.node.count_subscribers(topic) >= count, timeout,
                        f'{count} subscriber(s) on {topic}')

    def lifecycle(self, target: str):
        """A LifecycleClient for ``target`` on this harness's node."""
        from edge_loop.lifecycle_client import LifecycleClient

        return LifecycleClient(self.node, target)


class ReceiveProbe:
    """Messages of one topic with the middleware's receive time, taken by a polling thread.

    Latency measured in a test callback includes the test process's own executor delay (one
    Python thread serving every subscription of the harness); the receive timestamp that DDS
    records when the sample arrives does not. The reader lives on a node that no executor
    spins, and a thread drains it every ``period_s``.
    """

    def __init__(self, context: Any, msg_type: Any, topic: str, qos: Any = 100,
                 period_s: float = 0.01) -> None:
        import rclpy

        self._node = rclpy.create_node(f'receive_probe_{next(_probe_ids)}', context=context,
                                       start_parameter_services=False)
        self._type = msg_type
        self._sub = self._node.create_subscription(msg_type, topic, lambda _msg: None, qos)
        self.samples: list[tuple[Any, int]] = []   # (message, receive time ns, system clock)
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                taken = self._sub.handle.take_message(self._type, False)
            except Exception:  # noqa: BLE001 - the context is shutting down
                return
            if taken is None:
                self._stop.wait(self._period_s)
                continue
            msg, info = taken
            received = info.get('received_timestamp') if isinstance(info, dict) else None
            self.samples.append((msg, int(received or time.time_ns())))

    def close(self) -> None:
        """Stop the thread and destroy the node (idempotent)."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self._node is not None:
            self._node.destroy_node()
            self._node = None


_probe_ids = itertools.count()


@contextlib.contextmanager
def ros_harness(domain_id: int, name: str = 'test_harness') -> Iterator[RosHarness]:
    """Context-managed :class:`RosHarness`."""
    h = RosHarness(domain_id, name)
    try:
        yield h
    finally:
        h.close()


def monitor_loop_status(diagnostics: Iterable[Any]) -> tuple[int | None, dict[str, str]]:
    """The deadline monitor's newest loop status in DiagnosticArray messages.

    ``(level, {key: value})``; ``(None, {})`` before the first. ``diagnostics`` may be a list
    that a subscription still appends to: it is copied first.
    """
    for msg in reversed(list(diagnostics)):
        for status in msg.status:
            if status.name.endswith(': loop'):
                return status.level, {kv.key: kv.value for kv in status.values}
    return None, {}


def shm_entries() -> set[str]:
    """Names in /dev/shm (to check that nothing is left behind)."""
    try:
        return set(os.listdir('/dev/shm'))
    except FileNotFoundError:
        return set()
