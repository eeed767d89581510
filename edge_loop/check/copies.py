# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 3: copies per frame after ingest, and host-device transfers where a device is used.

Copies come from the stages' own copy audit (``copy_audit``: every frame, the arrays handed
to the kernel must be views on the received shared-memory frame), reported on
``/diagnostics``. Transfers are counted only where a stage runs on an accelerator and
reports them; a stage on an accelerator that does not report them leaves the item NOT RUN.
"""

from __future__ import annotations

from collections.abc import Mapping

from edge_loop.check.items import ItemResult, Status, not_run


def judge_copies(copies: Mapping[str, tuple[float, int]], stages: list[str],
                 devices: Mapping[str, str], transfers: Mapping[str, float]) -> ItemResult:
    """Item 3: every frame stage audited some frames with 0 copies; transfers <= 1 per input.

    ``devices`` maps stage -> device it runs on; ``transfers`` stage -> host-device
    transfers per frame where measured.
    """
    rows = []
    bad = []
    for stage in stages:
        value, frames = copies.get(stage, (float('nan'), 0))
        ok = frames > 0 and value == 0.0
        rows.append((f'{stage} copies', f'{value:g} per frame over {frames} audited frames',
                     '0', 'yes' if ok else 'NO'))
        if not frames:
            bad.append(f'{stage} reported no copy audit')
        elif value != 0.0:
            bad.append(f'{stage} copies {value:g} per frame')
    accelerated = {s: d for s, d in devices.items() if d != 'cpu'}
    missing = [s for s in accelerated if s not in transfers]
    for stage, device in accelerated.items():
        if stage in transfers:
            # One upload per input per frame at most (DESIGN.md): colour and depth.
            ok = transfers[stage] <= 2.0
            rows.append((f'{stage} host-device transfers ({device})',
                         f'{transfers[stage]:g} per frame', '<= 2 (one per input)',
                         'yes' if ok else 'NO'))
            if not ok:
                bad.append(f'{stage} {transfers[stage]:g} transfers per frame')
    if not accelerated:
        rows.append(('host-device transfers', 'no device used: every stage on cpu', '-', 'yes'))
    worst = max((copies.get(s, (0.0, 0))[0] for s in stages), default=0.0)
    measured = f'{worst:g} copies per frame after ingest ({len(stages)} stages audited)'
    if bad:
        return ItemResult(3, Status.FAIL, measured, '0 copies', rows=rows,
                          fix='; '.join(bad) + ': a stage copies its frame (a dtype or '
                          'contiguity conversion before the kernel?); see docs/transport.md')
    if missing:
        item = not_run(3, f'{", ".join(missing)} run(s) on a device and report no '
                       'host-device transfer count')
        item.rows = rows
        return item
    return ItemResult(3, Status.PASS, measured, '0 copies', rows=rows)
