# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop up``: starts the graph description, reaches active, stops clean on SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bag_fixtures import write_camera_bag

from edge_loop.testing import shm_entries

pytestmark = [pytest.mark.ros, pytest.mark.every_distro]


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / 'stat').read_text()
            except OSError:
                continue
            if int(stat.rsplit(')', 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f'/proc/{pid}/stat')
    return stat.exists() and stat.read_text().rsplit(')', 1)[1].split()[0] != 'Z'


def _wait_line(proc: subprocess.Popen, text: str, timeout: float) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if text in line:
            return ''.join(seen)
    raise AssertionError(f'no {text!r} within {timeout} s:\n' + ''.join(seen))


def test_up_reaches_active_and_sigint_leaves_nothing(ros_domain, tmp_path):
    write_camera_bag(tmp_path / 'bag', frames=3)
    before = shm_entries()
    proc = subprocess.Popen(
        [sys.executable, '-m', 'edge_loop.cli', 'up', '--source', 'bag', '--bag',
         str(tmp_path / 'bag'), '--stages', '--no-monitor', '--transport', 'ros',
         '--set', 'bag_player.loop=true', '--log-dir', str(tmp_path / 'logs')],
        env=ros_domain[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_line(proc, 'graph active', 90.0)
        children = _children(proc.pid)
        assert len(children) == 2, children  # bag_player + lifecycle_manager
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.05)
    assert not [p for p in children if _alive(p)], 'orphan node processes left running'
    assert shm_entries() - before == set(), 'new /dev/shm entries left behind'


def test_up_reports_a_node_that_cannot_configure(ros_domain, tmp_path):
    proc = subprocess.run(
        [sys.executable, '-m', 'edge_loop.cli', 'up', '--source', 'bag', '--bag',
         str(tmp_path / 'missing'), '--stages', '--no-monitor', '--transport', 'ros',
         '--startup-timeout', '60', '--log-dir', str(tmp_path / 'logs')],
        env=ros_domain[1], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert 'bag_player' in proc.stderr
