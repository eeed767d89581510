# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A multi-threaded executor that does not resubmit callbacks its workers have not started.

rclpy's ``MultiThreadedExecutor`` (Jazzy 7.1, Kilted 9.1) hands a ready callback to its
thread pool and waits again; until a worker has *started* that callback, every wake of the
executor (any message, reply, timer or guard) returns it again and it is submitted again
(ros2/rclpy#1452; fixed upstream after these releases). Measured in test_executors.py: with
the only worker busy for 0.4 s and the executor woken at 500 Hz, rclpy submitted one queued
callback 190 times, and every duplicate is a pool item a worker must run for nothing under
the GIL. The test harness, on rclpy's executor behind a 100 Hz subscription, sat at ~100% of
a core and starved its own fake camera (now single-threaded).

:class:`MultiThreadedExecutor` submits each ready callback once. When a wake returns a
callback still queued for a worker, the spinning thread waits for a worker to take it
(at most ``QUEUED_WAIT_S``, GIL released) instead of submitting it again. Used by the nodes
whose service callbacks wait for other nodes (``deadline_monitor``, ``lifecycle_manager``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rclpy import executors

QUEUED_WAIT_S = 0.005   # longest nap before looking again at a callback queued for a worker


class MultiThreadedExecutor(executors.MultiThreadedExecutor):
    """rclpy's MultiThreadedExecutor that submits each ready callback to its pool once."""

    def __init__(self, num_threads: int | None = None, *, context: Any = None) -> None:
        super().__init__(num_threads, context=context)
        self._queued: dict[Any, threading.Event] = {}   # task -> set when a worker starts it
        self.naps = 0   # wakes that returned a queued callback: waited, not resubmitted

    def _spin_once_impl(self, timeout_sec: Any = None,
                        wait_condition: Callable[[], bool] = lambda: False) -> None:
        try:
            task, _entity, _node = self.wait_for_ready_callbacks(timeout_sec, None,
                                                                 wait_condition)
        except (executors.ExternalShutdownException, executors.ShutdownException,
                executors.TimeoutException, executors.ConditionReachedException):
            return
        started = self._queued.get(task)
        if started is not None:
            self.naps += 1
            started.wait(QUEUED_WAIT_S)
            return
        started = self._queued[task] = threading.Event()
        self._executor.submit(self._run, task, started)
        self._futures.append(task)
        for future in self._futures[:]:
            if future.done():
                self._futures.remove(future)
                future.result()   # raise what a callback raised, as rclpy does

    def _run(self, task: Any, started: threading.Event) -> None:
        started.set()
        try:
            task()
        finally:
            # A coroutine callback that awaits is not done: it becomes ready again and must be
            # submitted again to resume.
            self._queued.pop(task, None)
