# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""`edge-loop`: a subcommand whose dependency is missing does not take the others down.

A GPU box often has torch and no pybullet: `edge-loop verify` must still run there, and
`edge-loop record` must say what it needs instead of a traceback.
"""

from __future__ import annotations

import subprocess
import sys

# Run the CLI with pybullet made unimportable (a None entry in sys.modules raises
# ModuleNotFoundError on import, as a missing package does).
WITHOUT_PYBULLET = ("import sys; sys.modules['pybullet'] = None; "
                    "from edge_loop.cli import main; sys.exit(main(sys.argv[1:]))")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', WITHOUT_PYBULLET, *args],
                          capture_output=True, text=True, timeout=120)


def test_verify_runs_without_pybullet_and_record_says_what_it_needs():
    listed = _cli('verify', '--list')
    assert listed.returncode == 0, listed.stderr
    assert 'occupancy.integrate' in listed.stdout

    record = _cli('record')
    assert record.returncode == 2, (record.stdout, record.stderr)
    assert "needs the Python module 'pybullet'" in record.stderr, record.stderr
    assert 'Traceback' not in record.stderr
