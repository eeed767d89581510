# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The main job, ``edge-loop demo``: closed-loop picks through the whole graph in the simulator.

A few episodes of ``make bench-pick`` in CI: every stage in its own process, frames over
shared memory, the deadline monitor and the lifecycle manager in charge. In the middle of
the run the controller is taken down (as the deadline monitor does after missed deadlines):
that episode must end as failed with the reason, the loop must come back through the
monitor's explicit ``~/reactivate``, and the run must go on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_demo_picks_and_survives_a_deactivated_controller(ros_domain, harness, tmp_path):
    env = dict(ros_domain[1])
    prefix = f'demo{os.getpid() % 100000}_'
    env['EDGE_LOOP_IOX2_PREFIX'] = prefix
    report = tmp_path / 'report'
    cmd = [sys.executable, '-m', 'edge_loop.cli', 'demo', '--episodes', '3', '--objects', '2',
           '--report', str(report), '--log-dir', str(tmp_path / 'logs')]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output: list[str] = []

    def read() -> None:   # raw chunks: the progress bar ends its updates with \r, not \n
        while chunk := os.read(proc.stdout.fileno(), 4096):
            output.append(chunk.decode(errors='replace'))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # the second episode starts once the first is reported: then take the controller down
        harness.wait_until(lambda: re.search(r'1/3 picks', ''.join(output)), 420.0,
                           'the first episode')
        time.sleep(3.0)
        harness.lifecycle('pick_controller').transition('deactivate', timeout=30.0)
        assert proc.wait(timeout=600) == 0, ''.join(output)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        reader.join(timeout=5.0)
        # iceoryx2 keeps one small management file per prefix: ours is this test's alone
        for leftover in Path('/dev/shm').glob(f'{prefix}*'):
            leftover.unlink(missing_ok=True)
    text = ''.join(output).replace('\r', '\n')
    match = re.search(r'pick success: (\d)/3', text)
    assert match, text
    lines = [line for line in text.splitlines() if 'safety interventions' in line]
    assert lines == ['safety interventions that ended an episode: 1'], text
    assert ('episode 1 (dim): pick_controller deactivated (safe state); back by deadline '
            'monitor ~/reactivate') in text
    # episodes 0 and 2 run undisturbed: at least one of them picks (about 98% each)
    assert int(match.group(1)) >= 1, text
    assert 'copies per frame after ingest: grasp_planner 0, object_locator 0, ' \
           'occupancy_mapper 0' in text
    assert (report / 'README.md').exists()
    assert list(Path(report).glob('*.png')), list(report.iterdir())
    assert 'Traceback' not in text
