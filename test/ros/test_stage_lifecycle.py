# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle of a stage node driven from another process; parameter validation."""

from __future__ import annotations

import pytest
from bag_fixtures import write_camera_bag

from edge_loop.lifecycle_client import LifecycleError

pytestmark = pytest.mark.ros


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


@pytest.mark.parametrize(('param', 'value', 'message'), [
    ('rate', -1.0, "parameter 'rate' = -1.0"),
    ('rate', 'fast', "parameter 'rate' = 'fast': expected a double"),
    ('mode', 'sometimes', "parameter 'mode' = 'sometimes': must be one of timed, lockstep"),
    ('camera_position', [0.0, 1.0], "parameter 'camera_position' = [0.0, 1.0]: expected 3"),
    ('transport', 'carrier_pigeon', "parameter 'transport' = 'carrier_pigeon'"),
    ('loop', 3, "parameter 'loop' = 3: expected a bool"),
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
