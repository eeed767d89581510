# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 4: every deployed kernel and model is verified as it is on this host.

Measured twice: each running stage node must have passed its deployment gate at configure
(the ``deployment gate: ... verified`` line in its log, with ``require_verified`` on), and the
pins are checked again now against the files on disk (edge_loop/verify/gate.py: sha256 of the
sources, the model and the tolerance row; a pin that no longer matches is stale = FAIL).
Where the verification record also pins library versions and the host (issue 30), the gate's
staleness check is part of ``check_deployable`` and is judged the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from edge_loop import stages
from edge_loop.check.items import ItemResult, Status

# Stages that run a verified kernel and must gate it at configure (nodes/*.py).
GATED_STAGES = stages.FRAME_STAGES   # the frame-reading stages run the verified kernels
_GATE_LINE = re.compile(r'deployment gate: (.+) verified\s*$')


def logged_ops(log: str) -> tuple[str, ...]:
    """The ops a node's log says its deployment gate passed for (the last such line)."""
    found: tuple[str, ...] = ()
    for line in log.splitlines():
        match = _GATE_LINE.search(line)
        if match:
            found = tuple(op.strip() for op in match.group(1).split(','))
    return found


def pin_problems(ops: list[str], record_path: Path | None = None) -> dict[str, str]:
    """{op: why} for every op whose pins do not hold now (empty when all hold)."""
    from edge_loop.verify.gate import DeploymentGateError, check_deployable

    problems = {}
    for op in ops:
        try:
            check_deployable([op], record_path)
        except DeploymentGateError as exc:
            problems[op] = str(exc)
    return problems


def judge_verification(stages: list[str], require_verified: Mapping[str, bool | None],
                       logs: Mapping[str, str], problems: Mapping[str, str]) -> ItemResult:
    """Item 4 from the nodes' gate results (their logs) and the pins checked now.

    ``require_verified[stage]`` is None when the node did not answer get_parameters: the
    item is then NOT RUN (unknown is neither a pass nor the node's fault).
    """
    rows = []
    bad = []
    unread = [s for s in stages if require_verified.get(s, False) is None]
    all_ops: set[str] = set()
    for stage in stages:
        required = bool(require_verified.get(stage, False))
        ops = logged_ops(logs.get(stage, ''))
        all_ops.update(ops)
        ok = required and bool(ops)
        rows.append((f'{stage} gate at configure', f'require_verified '
                     f'{str(required).lower()}, ' + (f'passed for {", ".join(ops)}' if ops
                                                     else 'no pass logged'),
                     'on, passed', 'yes' if ok else 'NO'))
        if stage in unread:
            continue
        if not required:
            bad.append(f'{stage} runs with require_verified false')
        elif not ops:
            bad.append(f'{stage} logged no passing deployment gate')
    for op in sorted(all_ops | set(problems)):
        why = problems.get(op, '')
        rows.append((f'{op} pin now', why or 'matches the record', 'matches',
                     'NO' if why else 'yes'))
        if why:
            bad.append(f'{op}: {why}')
    ops_text = ', '.join(sorted(all_ops)) or 'none'
    measured = (f'{len(all_ops - set(problems))} of {len(all_ops | set(problems))} ops '
                f'verified as deployed ({ops_text})')
    if unread and not bad:
        return ItemResult(4, Status.NOT_RUN, measured, 'every op pinned, none stale', rows=rows,
                          fix=f'{", ".join(unread)} did not answer get_parameters: run the '
                              'check again on a less loaded host')
    if bad:
        return ItemResult(4, Status.FAIL, measured, 'every op pinned, none stale', rows=rows,
                          fix=bad[0] if 'make verify' in bad[0] else
                          bad[0] + '; run `make verify` on this host and deploy its record')
    return ItemResult(4, Status.PASS, measured, 'every op pinned, none stale', rows=rows)
