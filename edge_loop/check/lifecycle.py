# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 7: lifecycle of every node, clean, twice in a row; nothing left behind.

Through the lifecycle manager (the way the robot brings the loop up and down): ``reset``
(deactivate, cleanup in reverse order) and ``startup`` (configure, activate in order) twice,
each step's state read back from every node, then ``shutdown`` (every node finalized). Then
each process gets SIGINT: one that has not exited cleanly (code 0) within the timeout did not
shut down. Afterwards no file of the session's iceoryx2 prefix may remain in /dev/shm or
/tmp/iceoryx2 (a leftover shared-memory segment).
"""

from __future__ import annotations

from edge_loop.check.items import ItemResult, Status
from edge_loop.check.session import ExitRecord, StepRecord


def judge_lifecycle(steps: list[StepRecord], cycles: int, exits: list[ExitRecord],
                    leftovers: list[str], exit_timeout_s: float) -> ItemResult:
    """Item 7 from the manager's steps, the processes' exits and the files left."""
    rows = []
    bad = []
    want = 2 * cycles + 1
    for i, step in enumerate(steps):
        wrong = {n: s for n, s in step.states.items()
                 if s != {'reset': 'unconfigured', 'startup': 'active',
                          'shutdown': 'finalized'}[step.step]}
        rows.append((f'{i + 1}. {step.step}', f'{step.seconds:.1f} s; ' + (
            'every node ' + next(iter(step.states.values()), '?') if not wrong else
            ', '.join(f'{n} {s}' for n, s in wrong.items())), 'all nodes',
            'yes' if step.ok else 'NO'))
        if not step.ok:
            bad.append(f'{step.step} failed ({step.message}; '
                       + ', '.join(f'{n} {s}' for n, s in wrong.items()) + ')')
    if len(steps) < want and not bad:
        bad.append(f'only {len(steps)} of {want} lifecycle steps ran')
    for e in exits:
        clean = e.signal_needed == 'SIGINT' and e.code == 0
        rows.append((f'{e.name} exit', f'code {e.code} after {e.seconds:.1f} s '
                     f'({e.signal_needed})', f'0 on SIGINT within {exit_timeout_s:.0f} s',
                     'yes' if clean else 'NO'))
        if e.signal_needed != 'SIGINT':
            bad.append(f'{e.name} did not shut down on SIGINT within {exit_timeout_s:.0f} s '
                       f'({e.signal_needed} needed)')
        elif e.code != 0:
            bad.append(f'{e.name} exited with code {e.code}')
    rows.append(('shared memory left', ', '.join(leftovers) or 'none', 'none',
                 'NO' if leftovers else 'yes'))
    if leftovers:
        bad.append(f'{len(leftovers)} shared-memory file(s) left behind: {leftovers[0]}')
    total = sum(s.seconds for s in steps)
    measured = (f'{len(steps)} of {want} manager steps clean ({total:.1f} s), '
                f'{sum(e.signal_needed == "SIGINT" and e.code == 0 for e in exits)} of '
                f'{len(exits)} processes exited on SIGINT, {len(leftovers)} segments left')
    plot = {'kind': 'lifecycle', 'steps': [(s.step, s.seconds, s.ok) for s in steps]}
    limit = f'{cycles} x reset+startup, shutdown; clean exits; nothing left'
    if bad:
        return ItemResult(7, Status.FAIL, measured, limit, rows=rows, plot=plot,
                          fix=bad[0] + ': fix its on_cleanup/on_shutdown (release every '
                          'handle; close the frame channel) and check its log')
    return ItemResult(7, Status.PASS, measured, limit, rows=rows, plot=plot)
