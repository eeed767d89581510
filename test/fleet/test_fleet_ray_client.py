# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge-loop regress --address ray://host:port: a driver outside the cluster (Ray Client).

A three-node cluster on this machine with its client server on a free port; the command runs
as a separate process, as a user runs it against a remote cluster. Ray Client has no
streaming generators, so each chunk's items come back when the chunk ends: the report must
still equal a serial run's, bad bags listed, with the bags on the shared file system and
shipped through the object store.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from edge_loop.fleet import cli, merge


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_listening(port: int, timeout_s: float) -> None:
    """Wait until the Ray Client server accepts connections.

    It starts after the head node: a command connecting earlier fails. (A suspected cause of
    one failure on a loaded machine, whose stderr the test did not keep; it does now.)
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f'Ray Client server not listening on {port} after '
                                   f'{timeout_s} s') from None
            time.sleep(0.2)


@pytest.fixture(scope='module')
def client_address():
    port = _free_port()
    c = Cluster(initialize_head=True, head_node_args={
        'num_cpus': 0, 'include_dashboard': False, 'ray_client_server_port': port})
    for _ in range(2):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    _wait_listening(port, 120.0)
    _client_logs.append(Path(c.head_node.get_logs_dir_path()))
    yield f'ray://127.0.0.1:{port}'
    c.shutdown()


_client_logs: list[Path] = []


def _server_logs() -> str:
    """The tails of the head node's Ray Client server logs, for a failure message."""
    parts = []
    for logs in _client_logs:
        for f in sorted(logs.glob('ray_client_server*.err')):
            parts.append(f'--- {f.name}\n{f.read_text(errors="replace")[-1500:]}')
    return '\n'.join(parts)


@pytest.mark.parametrize('ship', [False, True], ids=['shared-files', 'shipped'])
def test_ray_client_report_equals_serial(client_address, bag_set, tmp_path, ship):
    cli.regress([bag_set], out=tmp_path / 'serial', address='serial', progress=False,
                cache_dir=None)
    serial = json.loads((tmp_path / 'serial' / 'report.json').read_text())
    out = tmp_path / 'out'
    cmd = [sys.executable, '-m', 'edge_loop.cli', 'regress', str(bag_set), '--address',
           client_address, '--out', str(out), '--no-cache', '--quiet', *(['--ship'] * ship)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert (out / 'report.json').is_file(), (
        f'rc {done.returncode}: {done.stderr[-2000:]}\n{_server_logs()}')
    report = json.loads((out / 'report.json').read_text())
    assert report['run']['address'] == client_address, done.stderr[-2000:]
    assert report['run']['workers'] == 2        # the cluster's CPUs, not this machine's
    assert report['summary']['bad'] == 2, report['summary']
    assert merge.without_timing(report) == merge.without_timing(serial)
    assert all(b['reason'] for b in report['bad_bags']), report['bad_bags']
    assert (out / 'report.md').is_file() and (out / 'report.html').is_file()
