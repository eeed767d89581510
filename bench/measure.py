# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""What the benchmarks measure with: CPU time of processes (/proc, Linux), wall time of calls."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

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


def call_times_ms(fn: Callable[..., object], args: Sequence[object], repeats: int) -> np.ndarray:
    """Wall time (ms) of ``repeats`` calls ``fn(*args)``, after one untimed warm-up call."""
    fn(*args)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return np.array(times)
