# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop check --quick --calibrate`` on the deployed graph, with injected problems.

One bring-up serves every case (CI time): the quick check itself, a slowed stage (the
samples of the check's own fault window, judged as item 1), and a disabled monitor (the
deadline monitor deactivated behind the manager's back, then the same fault injected
again: no safe stop, item 2 fails). The lifecycle item runs after them on the same graph, so
the loop also shows that the manager brings a graph with a failed node back.
"""

from __future__ import annotations

import time
import warnings

import pytest

from edge_loop import bringup
from edge_loop.check import host, latency, monitor
from edge_loop.check.items import Status
from edge_loop.check.runner import CheckOptions, run_check

pytestmark = [pytest.mark.ros, pytest.mark.slow]   # the whole graph, as the replay test


def ask_every_node(session) -> dict[str, object]:
    """Each node's use_sim_time through rclpy's AsyncParameterClient, while frames flow.

    What ``ros2 param get`` does; a node whose executor could not serve its parameter
    services while it processes frames would time out here.
    """
    from rclpy.parameter_client import AsyncParameterClient

    from edge_loop import topics

    frames_before = session.recorder.count(topics.CAMERA_INFO)
    # Its service clients live on the check's own node, destroyed with the session.
    clients = {name: AsyncParameterClient(session.harness.node, name) for name in session.names}
    deadline = time.monotonic() + 3.0
    while True:
        # Rounds of calls until a frame came in during them: on a fast host one round can
        # finish inside one camera period (a fresh clone's CI saw 0 frames in one round).
        answers = {}
        for name, client in clients.items():
            assert client.wait_for_services(timeout_sec=10.0), f'{name}: no parameter services'
            future = client.get_parameters(['use_sim_time'])
            session.harness.wait_until(future.done, 10.0, f'{name}/get_parameters')
            answers[name] = [v.bool_value for v in future.result().values]
        frames = session.recorder.count(topics.CAMERA_INFO) - frames_before
        if frames > 0 or time.monotonic() > deadline:
            break
    answers['frames during the calls'] = frames
    return answers


def test_quick_check_passes_and_injected_faults_fail_the_right_items(ros_domain, tmp_path):
    injected = {}

    def disabled_monitor(session, outcome):
        injected['params'] = ask_every_node(session)
        why = session.set_monitor_active(False)
        assert not why, why
        rec = session.inject_delay('grasp_planner', 2.0 * outcome.budgets.end_to_end_ms
                                   * outcome.scale, 3, recover_frames=5, timeout_s=4.0)
        injected['disabled'] = monitor.judge_monitor(
            rec, outcome.budgets.end_to_end_ms * outcome.scale, 3, outcome.scale)
        injected['reactivate'] = session.set_monitor_active(True)

    # Three latency windows at most, as the replay regression test allows three replays; the
    # page shows every window.
    opts = CheckOptions(params_file=bringup.default_params_file(), out=tmp_path / 'page',
                        quick=True, calibrate=True, latency_windows=3,
                        domain_id=ros_domain[0])
    outcome = run_check(opts, hook=disabled_monitor)
    page = outcome.files['markdown'].read_text()
    print(page)
    by = {i.number: i for i in outcome.items}
    assert set(by) == set(range(1, 11))
    # Every node answers a parameter request while frames flow (issue 33: the check took the
    # empty answer to a request naming an undeclared parameter for silence).
    answered = injected['params']
    assert answered.pop('frames during the calls') > 0
    assert answered == {n: [False] for n in outcome.extra['node_params']}, answered
    assert all(p is not None and 'transport' in p
               for p in outcome.extra['node_params'].values()), outcome.extra['node_params']
    # Slowed stage: the check's own fault window, judged as item 1, fails on grasp_planner.
    assert outcome.fault_samples is not None, 'no fault was injected: ' + by[2].measured
    slowed = latency.judge_latency(outcome.fault_samples, outcome.budgets, outcome.scale, True)
    assert slowed.status is Status.FAIL and slowed.number == 1
    assert 'grasp_planner' in slowed.fix, slowed.fix
    # Disabled monitor: no safe stop, item 2 fails; the monitor came back for the lifecycle.
    assert injected['disabled'].status is Status.FAIL and injected['disabled'].number == 2
    assert 'no safe stop' in injected['disabled'].measured
    assert injected['reactivate'] == ''
    # Calibrated: the header says so, before anything else.
    assert page.splitlines()[2].startswith('**CALIBRATED, NOT THE TARGET: latency budgets x')
    # The graph's items were measured and passed. Latency (1) and the recovery (2) are judged
    # strictly unless other work kept the CPUs busy before the check began (a developer's
    # shared VM; never a CI job between its tests): then a failure is a loud warning naming
    # the load the page measured.
    before, _ = outcome.extra['host_load']
    samples = outcome.extra['latency_samples']
    assert samples.expected_frames >= 140, by[1].measured
    for n in (1, 2, 3, 4, 7, 8, 9):
        if by[n].status is not Status.PASS and n in (1, 2) and host.is_shared(before):
            warnings.warn(f'item {n} failed on a shared host ({before.text()}): {by[n].fix}',
                          stacklevel=1)
            continue
        assert by[n].status is Status.PASS, f'item {n}: {by[n].measured} -> {by[n].fix}'
    # Items 5 and 6 depend on optional modules: never PASS without a measurement.
    for n in (5, 6):
        assert by[n].status is Status.PASS or by[n].measured.startswith('not measured')
    assert outcome.passed == all(i.status is Status.PASS for i in outcome.items if i.required)
