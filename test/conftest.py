# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: an isolated ROS domain per test, node processes that always stop."""

from __future__ import annotations

import os

import pytest

from edge_loop.dds_profiles import with_default_profiles
from edge_loop.testing import claim_domain_id, domain_env, ros_harness, start_node

# This process's own participants (the test harness) with the profiles its node processes get
# (domain_env): a lost image is resent within 50 ms, not at Fast DDS's 3 s heartbeat.
with_default_profiles(os.environ)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    """Collect each test module as pytest itself does, before launch_testing's hook can.

    launch_testing's hook imports every module to look for ``generate_test_description``
    (none here: the launch tests use launch_pytest). A module that skips itself at import
    (``pytest.importorskip('torch')``) then raises outside pytest's module collection and
    the whole directory is skipped: without torch, test/kernels, test/check and
    test/reasoning collected nothing and said nothing. Here such a module is one skip.
    """
    if module_path.name == '__init__.py':
        return None
    return pytest.Module.from_parent(parent, path=module_path)


@pytest.fixture
def ros_domain(tmp_path):
    """(domain_id, env) for one test; child processes inherit env."""
    domain_id, lock = claim_domain_id()
    try:
        yield domain_id, domain_env(domain_id, tmp_path / 'ros_log')
    finally:
        lock.close()


@pytest.fixture
def large_data(ros_domain, monkeypatch):
    """Fast DDS's LARGE_DATA transports for this test's node processes and its own participant.

    A VGA image does not fit the default transports' 512 KB shared-memory segment
    (DESIGN.md, docs/transport.md); what is still lost is resent at the shipped profiles'
    50 ms heartbeat (edge_loop/dds_profiles.py). Request it before ``harness``, so that the
    test's participant is created with it.
    """
    ros_domain[1]['FASTDDS_BUILTIN_TRANSPORTS'] = 'LARGE_DATA'
    monkeypatch.setenv('FASTDDS_BUILTIN_TRANSPORTS', 'LARGE_DATA')
    # A LARGE_DATA participant finds only participants with the same discovery range.
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE',
                       ros_domain[1]['ROS_AUTOMATIC_DISCOVERY_RANGE'])
    return ros_domain


@pytest.fixture
def harness(ros_domain):
    """An rclpy node spinning in this test process on the test's domain."""
    with ros_harness(ros_domain[0]) as h:
        yield h


@pytest.fixture
def node_procs(ros_domain, tmp_path):
    """Start node processes with ``node_procs(executable, name=..., params=...)``; all stop."""
    procs = []

    def start(executable, **kwargs):
        proc = start_node(executable, ros_domain[1], tmp_path / 'nodes', **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in reversed(procs):
        proc.stop()
