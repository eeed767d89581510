# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""CPU placement of a node process: the CPU list syntax of ``taskset -c``, applied per thread.

On a shared machine, where a frame consumer wakes is most of the transport's latency:
measured with ``bench/bench_transport.py --pin`` (docs/transport.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable


def parse_cpu_list(text: str) -> frozenset[int]:
    """CPUs of a list such as ``'2'``, ``'0,2'``, ``'1-3'`` or ``'0,2-3'``; '' is none.

    Raises ValueError with the offending part for anything else.
    """
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(',')):
        if not part and not text.strip():
            continue
        lo, sep, hi = part.partition('-')
        if not (lo.strip().isdigit() and (not sep or hi.strip().isdigit())):
            raise ValueError(f"'{part}' is not a CPU number or range (e.g. '2', '1-3')")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"range '{part}' runs backwards")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """The shortest ``taskset -c`` list of ``cpus`` (ranges joined)."""
    parts: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f'{ordered[i]}-{ordered[j]}')
        i = j + 1
    return ','.join(parts)


def for_each_thread(apply: Callable[[int], None]) -> str:
    """Call ``apply(tid)`` for every thread of this process; '' or the last OSError's text.

    Linux keeps niceness and CPU affinity per thread, and the DDS threads exist before a node
    configures: setting the calling thread alone would miss them. Threads that ended
    meanwhile are skipped.
    """
    failed = ''
    for tid in [int(t) for t in os.listdir('/proc/self/task')] or [0]:
        try:
            apply(tid)
        except ProcessLookupError:
            continue
        except OSError as exc:
            failed = str(exc)
    return failed


def check_cpus(cpus: frozenset[int]) -> None:
    """Raise ValueError unless ``cpus`` is a non-empty set this process may run on."""
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise ValueError(f'CPUs {format_cpu_list(cpus - allowed) or "(none)"} are not '
                         f'available to this process (allowed: {format_cpu_list(allowed)})')


def pin_process(cpus: frozenset[int]) -> None:
    """Run every thread of this process on ``cpus`` (threads started later inherit it).

    Raises ValueError (:func:`check_cpus`) or OSError when the kernel refuses.
    """
    check_cpus(cpus)
    failed = for_each_thread(lambda tid: os.sched_setaffinity(tid, cpus))
    if failed:
        raise OSError(f'CPU affinity {format_cpu_list(cpus)} not applied: {failed}')
