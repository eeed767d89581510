# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The shipped Fast DDS profiles: set for our processes, never over the user's own."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from edge_loop.dds_profiles import PROFILE_FILES, default_profiles, profiles_to_set
from edge_loop.testing import domain_env


def test_both_versions_get_their_profile_when_none_is_set():
    env = {'ROS_DOMAIN_ID': '7'}
    assert profiles_to_set(env) == default_profiles()
    assert set(default_profiles()) == set(PROFILE_FILES)
    for path in default_profiles().values():
        assert Path(path).is_file()


def test_a_profile_of_the_users_own_is_left_alone():
    for key in PROFILE_FILES:
        assert profiles_to_set({key: '/etc/my_profile.xml'}) == {}
    assert profiles_to_set({'FASTDDS_DEFAULT_PROFILES_FILE': ''}) == default_profiles()


def test_node_processes_of_the_tests_get_the_profiles(monkeypatch):
    for key in PROFILE_FILES:
        monkeypatch.delenv(key, raising=False)
    env = domain_env(3)
    assert {key: env[key] for key in PROFILE_FILES} == default_profiles()
    monkeypatch.setenv('FASTRTPS_DEFAULT_PROFILES_FILE', '/etc/my_profile.xml')
    env = domain_env(3)
    assert env['FASTRTPS_DEFAULT_PROFILES_FILE'] == '/etc/my_profile.xml'
    assert 'FASTDDS_DEFAULT_PROFILES_FILE' not in env


def test_each_profile_sets_a_50_ms_heartbeat_in_its_versions_tag():
    # Fast DDS 2.x reads heartbeatPeriod, 3.x heartbeat_period: each ignores the other's
    # tag (measured: the wrong one left the 3 s stalls in place).
    tags = {'FASTRTPS_DEFAULT_PROFILES_FILE': 'heartbeatPeriod',
            'FASTDDS_DEFAULT_PROFILES_FILE': 'heartbeat_period'}
    for key, path in default_profiles().items():
        root = ET.parse(path).getroot()
        found = [el for el in root.iter() if el.tag.rsplit('}', 1)[-1] == tags[key]]
        assert len(found) == 1, (path, tags[key])
        values = {el.tag.rsplit('}', 1)[-1]: el.text for el in found[0]}
        assert values == {'sec': '0', 'nanosec': '50000000'}
