# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""CPU lists (taskset -c syntax) and pinning every thread of a process."""

import os
import subprocess
import sys

import pytest

from edge_loop.cpu import format_cpu_list, parse_cpu_list, pin_process


@pytest.mark.parametrize(('text', 'cpus', 'canonical'), [
    ('', set(), ''),
    ('2', {2}, '2'),
    ('0,2', {0, 2}, '0,2'),
    ('1-3', {1, 2, 3}, '1-3'),
    (' 3 , 0-1 ', {0, 1, 3}, '0-1,3'),
    ('4,2,3', {2, 3, 4}, '2-4'),
])
def test_cpu_lists_round_trip(text, cpus, canonical):
    assert parse_cpu_list(text) == cpus
    assert format_cpu_list(parse_cpu_list(text)) == canonical


@pytest.mark.parametrize(('text', 'message'), [
    ('a', "'a' is not a CPU number"),
    ('-1', "'-1' is not a CPU number"),
    ('1,', "'' is not a CPU number"),
    ('1--2', "'1--2' is not"),
    ('3-1', 'runs backwards'),
])
def test_bad_cpu_lists_name_the_part(text, message):
    with pytest.raises(ValueError, match=message):
        parse_cpu_list(text)


def test_pin_refuses_cpus_outside_the_allowed_set():
    with pytest.raises(ValueError, match='CPUs 4095 are not available'):
        pin_process(frozenset({4095}))
    with pytest.raises(ValueError, match='none'):
        pin_process(frozenset())


PIN_CHILD = """
import os, sys, threading
from edge_loop.cpu import pin_process
started = threading.Event(); stop = threading.Event()
def idle():
    started.set(); stop.wait()
early = threading.Thread(target=idle); early.start(); started.wait()
cpu = int(sys.argv[1])
pin_process(frozenset({cpu}))
late = threading.Thread(target=stop.wait); late.start()
cpus = set()
for tid in os.listdir('/proc/self/task'):
    cpus.add(frozenset(os.sched_getaffinity(int(tid))))
stop.set(); early.join(); late.join()
print(sorted(map(sorted, cpus)))
"""


def test_pin_moves_threads_started_before_and_after():
    cpu = max(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, '-c', PIN_CHILD, str(cpu)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    assert out == f'[[{cpu}]]'
