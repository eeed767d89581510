# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle of a stage node driven from another process; parameter validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bag_fixtures import write_camera_bag

from edge_loop.lifecycle_client import LifecycleError

pytestmark = pytest.mark.ros


@pytest.mark.every_distro
def test_full_cycle_through_services(node_procs, harness, tmp_path):
    write_camera_bag(tmp_path / 'bag', frames=2)
    proc = node_procs('bag_player', params={'bag': str(tmp_path / 'bag'),
                                            'wait_topics': ['/nobody'], 'wait_timeout_s': 0.0})
    client = harness.lifecycle('bag_player')
    client.wait_ready(20.0)
    assert client.get_state() == 'unconfigured'
    for transition, state in (('configure', 'inactive'), ('activate', 'active'),
                              ('deactivate', 'inactive'), ('cleanup', 'unconfigured'),
                              ('configure', 'inactive'), ('shutdown', 'finalized')):
        client.transition(transition, timeout=10.0)
        assert client.get_state() == state
    assert 'Traceback' not in proc.output()


def _thread_niceness(pid: int) -> set[int]:
    out = set()
    for task in Path(f'/proc/{pid}/task').iterdir():
        # field 19 of stat (nice), counted after the command name's closing parenthesis
        out.add(int((task / 'stat').read_text().rsplit(')', 1)[1].split()[16]))
    return out


def _thread_cpus(pid: int) -> set[str]:
    out = set()
    for task in Path(f'/proc/{pid}/task').iterdir():
        for line in (task / 'status').read_text().splitlines():
            if line.startswith('Cpus_allowed_list:'):
                out.add(line.split(':', 1)[1].strip())
    return out


def test_nice_and_cpu_affinity_apply_to_every_thread_at_configure(node_procs, harness,
                                                                  tmp_path):
    write_camera_bag(tmp_path / 'bag', frames=1)
    cpu = str(max(os.sched_getaffinity(0)))
    # relative to ours (the suite may itself run under nice); raising it needs no privilege
    start = os.getpriority(os.PRIO_PROCESS, 0)
    nice = min(start + 3, 19)
    proc = node_procs('bag_player', params={'bag': str(tmp_path / 'bag'), 'nice': nice,
                                            'cpu_affinity': cpu,
                                            'wait_topics': ['/nobody'], 'wait_timeout_s': 0.0})
    client = harness.lifecycle('bag_player')
    client.wait_ready(20.0)
    assert _thread_niceness(proc.pid) == {start}
    before = _thread_cpus(proc.pid)
    client.transition('configure', timeout=30.0)
    assert _thread_niceness(proc.pid) == {nice}   # the middleware's threads too
    assert _thread_cpus(proc.pid) == {cpu}, before
    client.transition('activate', timeout=10.0)   # the playback thread inherits both
    assert _thread_niceness(proc.pid) == {nice}
    assert _thread_cpus(proc.pid) == {cpu}
    assert proc.wait_for_output(f'process niceness {nice}', 5.0), proc.output()
    assert proc.wait_for_output(f'process pinned to CPUs {cpu}', 5.0), proc.output()


@pytest.mark.parametrize(('param', 'value', 'message'), [
    ('rate', -1.0, "parameter 'rate' = -1.0"),
    ('rate', 'fast', "parameter 'rate' = 'fast': expected a double"),
    ('mode', 'sometimes', "parameter 'mode' = 'sometimes': must be one of timed, lockstep"),
    ('camera_position', [0.0, 1.0], "parameter 'camera_position' = [0.0, 1.0]: expected 3"),
    ('transport', 'carrier_pigeon', "parameter 'transport' = 'carrier_pigeon'"),
    ('loop', 3, "parameter 'loop' = 3: expected a bool"),
    ('nice', 25, "parameter 'nice' = 25"),
    ('cpu_affinity', '1-0', "parameter 'cpu_affinity' = '1-0': range '1-0' runs backwards"),
    ('cpu_affinity', '4095', "parameter 'cpu_affinity' = '4095': CPUs 4095 are not available"),
])
def test_bad_parameter_fails_configure_naming_it(node_procs, harness, tmp_path, param, value,
                                                 message):
    write_camera_bag(tmp_path / 'bag', frames=1)
    proc = node_procs('bag_player', params={'bag': str(tmp_path / 'bag'), param: value})
    client = harness.lifecycle('bag_player')
    with pytest.raises(LifecycleError, match='configure failed'):
        client.transition('configure', timeout=60.0)
    assert client.get_state() == 'unconfigured'
    assert proc.wait_for_output(message, 5.0), proc.output()
    assert 'Traceback' not in proc.output()
    assert proc.alive()
