# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge_loop.executors.MultiThreadedExecutor against rclpy's, in this process."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy
from rclpy import executors as rclpy_executors
from rclpy.callback_groups import ReentrantCallbackGroup

from edge_loop.executors import MultiThreadedExecutor

pytestmark = [pytest.mark.ros, pytest.mark.every_distro, pytest.mark.filterwarnings(
    'ignore:MultiThreadedExecutor is used with a single thread')]   # one worker on purpose


def _queued_while_busy(executor_cls, domain_id: int) -> tuple[int, int, list[str]]:
    """Two ready timers, one worker busy 0.4 s with the first: how the second waits.

    Meanwhile the executor is woken at ~500 Hz, as other traffic (a 100 Hz gripper, service
    replies) wakes a node's executor. Returns (submissions to the pool, times the spinning
    thread waited for a worker instead of resubmitting, the order the callbacks ran in).
    """
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    node = rclpy.create_node('executor_probe', context=context)
    executor = executor_cls(num_threads=1, context=context)
    executor.add_node(node)
    ran: list[str] = []
    done = threading.Event()
    group = ReentrantCallbackGroup()
    timers = {}

    def busy() -> None:
        timers['busy'].cancel()
        ran.append('busy')
        time.sleep(0.4)            # the only worker is taken

    def queued() -> None:
        timers['queued'].cancel()
        ran.append('queued')
        done.set()

    submissions = 0
    submit = executor._executor.submit

    def counting_submit(*args, **kwargs):
        nonlocal submissions
        submissions += 1
        return submit(*args, **kwargs)

    executor._executor.submit = counting_submit
    def spin() -> None:
        while not done.is_set() and context.ok():
            executor.spin_once(timeout_sec=0.1)

    def traffic() -> None:
        while not done.wait(0.002):
            executor.wake()

    try:
        timers['busy'] = node.create_timer(0.01, busy, callback_group=group)
        timers['queued'] = node.create_timer(0.011, queued, callback_group=group)
        spinner = threading.Thread(target=spin)
        waker = threading.Thread(target=traffic)
        spinner.start()
        waker.start()
        assert done.wait(5.0), 'the queued callback never ran'
        spinner.join(5.0)
        waker.join(5.0)
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        context.try_shutdown()
    return submissions, getattr(executor, 'naps', 0), ran


def test_a_queued_callback_is_submitted_once_and_the_spinner_naps(ros_domain):
    submissions, naps, ran = _queued_while_busy(MultiThreadedExecutor, ros_domain[0])
    print(f'edge_loop executor: {submissions} submissions, {naps} naps')
    assert ran == ['busy', 'queued']
    assert submissions == 2
    assert naps > 0   # the wakes did return the queued callback: the nap path ran


def test_rclpys_executor_spins_on_a_queued_callback(ros_domain):
    # What the class above avoids (ros2/rclpy#1452); if a future rclpy fixes it, this test
    # says so and edge_loop.executors can go.
    submissions, _naps, _ran = _queued_while_busy(rclpy_executors.MultiThreadedExecutor,
                                                  ros_domain[0])
    print(f'rclpy executor: {submissions} submissions')
    assert submissions > 20
