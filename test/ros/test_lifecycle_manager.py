# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle manager as a process driving dummy lifecycle node processes."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from dummy_stage import start_dummy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

pytestmark = pytest.mark.ros

NAMES = ['cam_stage', 'mid_stage', 'pick_controller']
_LOG_LINE = re.compile(r'\[(?:INFO|WARN|ERROR)\] \[(\d+\.\d+)\] \[([\w.]+)\]: (.*)')


def log_times(proc, message: str) -> list[float]:
    """Times (s) of the log lines of ``proc`` equal to ``message``."""
    return [float(m.group(1)) for m in map(_LOG_LINE.match, proc.output().splitlines())
            if m and m.group(3).startswith(message)]


@pytest.fixture
def graph(harness, node_procs, ros_domain, tmp_path):
    """Three dummy nodes, a manager factory, ~/active and /diagnostics collectors."""
    dummies = {}

    def start_dummies(params=None):
        for name in NAMES:
            dummies[name] = start_dummy(name, ros_domain[1], tmp_path / 'nodes',
                                        (params or {}).get(name))
        for name in NAMES:
            harness.lifecycle(name).wait_for_state('unconfigured', 30.0)

    active: list[bool] = []
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    harness.node.create_subscription(Bool, '/lifecycle_manager/active',
                                     lambda m: active.append(m.data), latched)
    diags: list[DiagnosticArray] = []
    harness.node.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 10)

    def start_manager(**params):
        return node_procs('lifecycle_manager',
                          params={'node_names': NAMES, **params})

    def call(service: str):
        client = harness.node.create_client(Trigger, f'/lifecycle_manager/{service}')
        assert client.wait_for_service(20.0)
        done = threading.Event()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(90.0), f'{service} did not answer'
        return future.result()

    class Graph:
        pass

    g = Graph()
    g.dummies, g.start_dummies, g.start_manager = dummies, start_dummies, start_manager
    g.active, g.diags, g.call = active, diags, call
    yield g
    for proc in dummies.values():
        proc.stop()


@pytest.mark.every_distro
def test_startup_in_order_and_shutdown_in_reverse(harness, graph):
    graph.start_dummies()
    manager = graph.start_manager(autostart=True)
    harness.wait_until(lambda: graph.active[-1:] == [True], 60.0, '~/active true')
    for name in NAMES:
        assert harness.lifecycle(name).get_state() == 'active'
    configured = [log_times(graph.dummies[n], 'configured')[0] for n in NAMES]
    activated = [log_times(graph.dummies[n], 'activated')[0] for n in NAMES]
    assert configured == sorted(configured) and activated == sorted(activated)
    assert max(configured) < min(activated)          # configure all, then activate all

    answer = graph.call('reset')               # down to unconfigured, then up again
    assert answer.success, answer.message
    for name in NAMES:
        assert harness.lifecycle(name).get_state() == 'unconfigured'
    answer = graph.call('startup')
    assert answer.success, answer.message
    assert graph.active[-1] is True
    answer = graph.call('shutdown')
    assert answer.success, answer.message
    assert graph.active[-1] is False
    for name in NAMES:
        assert harness.lifecycle(name).get_state() == 'finalized'
    deactivated = [log_times(graph.dummies[n], 'deactivated')[-1] for n in NAMES]
    cleaned = [log_times(graph.dummies[n], 'cleaned up')[-1] for n in NAMES]
    # controller first, then reverse bring-up order; cleanup in reverse order
    assert deactivated[2] < deactivated[1] < deactivated[0]
    assert cleaned[2] < cleaned[1] < cleaned[0]
    assert max(deactivated) < min(cleaned)
    assert 'Traceback' not in manager.output()


def test_bad_parameter_aborts_startup_naming_the_node(harness, graph):
    graph.start_dummies({'mid_stage': {'gain': -1.0}})
    manager = graph.start_manager(autostart=True)
    assert manager.wait_for_output("bring-up aborted: configure of 'mid_stage' failed", 60.0), \
        manager.output()
    assert harness.lifecycle('cam_stage').get_state() == 'inactive'
    assert harness.lifecycle('mid_stage').get_state() == 'unconfigured'
    assert harness.lifecycle('pick_controller').get_state() == 'unconfigured'
    assert graph.dummies['mid_stage'].wait_for_output("parameter 'gain' = -1.0", 5.0)
    answer = graph.call('startup')            # the Trigger service reports the same
    assert not answer.success and 'mid_stage' in answer.message and 'configure' in answer.message
    assert True not in graph.active
    harness.wait_until(lambda: any(s.level == b'\x02' and 'mid_stage' in s.message
                                   for d in graph.diags for s in d.status), 5.0,
                       'ERROR naming mid_stage on /diagnostics')


@pytest.mark.every_distro
def test_killed_node_detected_and_controller_deactivated(harness, graph):
    graph.start_dummies()
    manager = graph.start_manager()
    answer = graph.call('startup')
    assert answer.success, answer.message
    harness.wait_until(lambda: graph.active[-1:] == [True], 10.0, '~/active true')
    time.sleep(0.5)                            # a few heartbeats while healthy
    assert 'failure' not in manager.output()
    killed_at = time.time()
    graph.dummies['cam_stage'].signal(signal.SIGKILL)
    assert manager.wait_for_output("failure detected: node 'cam_stage'", 10.0)
    detected_at = log_times(manager, "failure detected: node 'cam_stage'")[0]
    delay = detected_at - killed_at
    print(f'killed process detected after {delay * 1000:.0f} ms')
    # The exited pid is seen at the next heartbeat (0.1 s), long before the 3 s hang timeout.
    assert 0.0 < delay < 0.5, f'killed process noticed after {delay * 1000:.0f} ms'
    assert 'process' in manager.output() and 'exited' in manager.output()
    harness.lifecycle('pick_controller').wait_for_state('inactive', 10.0)
    harness.wait_until(lambda: graph.active[-1:] == [False], 10.0, '~/active false')
    assert harness.lifecycle('mid_stage').get_state() == 'active'   # only the controller
    harness.wait_until(lambda: any(s.level == b'\x02' and 'cam_stage' in s.message
                                   for d in graph.diags for s in d.status), 5.0,
                       'ERROR naming cam_stage on /diagnostics')


def test_controller_in_its_safe_state_stays_watched_not_failed(harness, graph):
    # The deadline monitor deactivates the controller (here: a lifecycle client does): the
    # manager reports the safe state but keeps its heartbeat going, so it must not declare
    # the controller hung once heartbeat_timeout_s has passed.
    graph.start_dummies()
    manager = graph.start_manager(heartbeat_timeout_s=0.5)
    answer = graph.call('startup')
    assert answer.success, answer.message
    harness.wait_until(lambda: graph.active[-1:] == [True], 10.0, '~/active true')
    harness.lifecycle('pick_controller').transition('deactivate', timeout=10.0)
    assert manager.wait_for_output("'pick_controller' is inactive", 10.0)
    time.sleep(2.0)                            # four heartbeat timeouts
    assert 'failure' not in manager.output(), manager.output()[-2000:]
    assert harness.lifecycle('pick_controller').get_state() == 'inactive'


def test_a_node_that_answers_late_but_steadily_is_not_hung(harness, graph):
    # mid_stage's executor gets the GIL only every 0.7 s (a starved executor):
    # its get_state answers come 0.7-2 s after the request, later than the 0.1 s heartbeat
    # period. Those answers are signs of life; only silence for heartbeat_timeout_s is a hang.
    graph.start_dummies({'mid_stage': {'gil_hog_s': 0.7}})
    manager = graph.start_manager(heartbeat_timeout_s=2.5, diagnostics_period_s=0.5)
    answer = graph.call('startup')
    assert answer.success, answer.message
    harness.wait_until(lambda: graph.active[-1:] == [True], 10.0, '~/active true')
    graph.diags.clear()
    time.sleep(8.0)                            # over three heartbeat timeouts
    assert 'failure' not in manager.output(), manager.output()[-2000:]
    slowest = [float(v.value) for d in graph.diags for s in d.status for v in s.values
               if v.key == 'heartbeat mid_stage max ms']
    print(f'mid_stage get_state round trips, slowest per diagnostics period: {slowest}')
    assert slowest and max(slowest) > 500.0, 'the hog did not delay the answers: no test'
    # A stopped process answers nothing: that is still a hang, within the timeout.
    graph.dummies['mid_stage'].signal(signal.SIGSTOP)
    try:
        assert manager.wait_for_output("failure detected: node 'mid_stage'", 10.0)
        assert 'no get_state answer' in manager.output()
    finally:
        graph.dummies['mid_stage'].signal(signal.SIGCONT)


def test_missing_node_names_is_a_clear_error(node_procs):
    manager = node_procs('lifecycle_manager', params={'autostart': True})
    assert manager.proc.wait(30.0) == 2
    assert "parameter 'node_names' is required" in manager.output()
