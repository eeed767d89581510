# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""CPU time of processes and threads from /proc (Linux), for the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf('SC_CLK_TCK')


def stat_fields(stat: Path) -> list[str]:
    """Fields of a /proc/.../stat file after the command name (field 3 on is index 0)."""
    return stat.read_text().rsplit(')', 1)[1].split()


def cpu_of(fields: list[str]) -> float:
    """CPU seconds (user + system) in parsed stat fields."""
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, all threads) of a process."""
    return cpu_of(stat_fields(Path(f'/proc/{pid}/stat')))
