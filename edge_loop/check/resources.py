# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Items 5 and 6: the memory budget and the placement of the stages.

Both rest on modules that a deployment may not have (``edge_loop.memory``: the one memory
budget; ``edge_loop.placement``: where a stage runs). They are imported when the check runs;
without them the item is NOT RUN with the reason, never PASS.

Required or not: item 5 is required when the deployment declares a memory budget
(``config/memory.yaml`` or ``--memory-config``); item 6 when a stage in the graph runs on a
device other than the CPU. A required item that did not run fails the page; one that is not
required is shown NOT RUN and does not (``--require 5,6`` makes them required anyway).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edge_loop.check.items import ItemResult, Status, not_run


def _import(name: str) -> tuple[Any, str]:
    try:
        return importlib.import_module(name), ''
    except Exception as exc:  # noqa: BLE001 - any failure: the item cannot be measured
        return None, f'{name} is not importable here ({type(exc).__name__}: {exc})'


def memory_item(config: Path | None, required: bool) -> ItemResult:
    """Item 5: the declared budget fits the pool, with the headroom it leaves."""
    if config is None or not config.is_file():
        return not_run(5, 'no memory budget declared (config/memory.yaml)', required=required)
    mod, why = _import('edge_loop.memory.budget')
    if mod is None:
        return not_run(5, why, required=True)
    load = getattr(mod, 'load_budget', None)
    if load is None:
        return not_run(5, 'edge_loop.memory.budget has no load_budget(path)', required=True)
    try:
        budget = load(config)
    except Exception as exc:  # noqa: BLE001 - an unreadable budget cannot be judged
        return ItemResult(5, Status.FAIL, f'{type(exc).__name__}: {exc}', 'fits the pool',
                          fix=f'the memory budget {config} cannot be read: {exc}')
    return memory_result(budget, config)


def memory_result(budget: Any, config: Path) -> ItemResult:
    """Item 5 from an edge_loop.memory MemoryBudget: reservations against the pool."""
    pool, reserved = budget.pool_bytes, budget.reserved
    rows = [(f'{t.name} ({t.kind})', _mib(t.nbytes), '-', '')
            for t in sorted(budget.tenants, key=lambda t: -t.nbytes)]
    over = budget.over_reservation()
    rows += [(f'{name} measured', f'{_mib(extra)} over its reservation', '0', 'NO')
             for name, extra in over.items()]
    fits = budget.fits()
    measured = (f'{_mib(reserved)} reserved of pool {budget.pool_name} {_mib(pool)}, '
                f'headroom {_mib(pool - reserved)}')
    rows.append(('total', measured, 'reservations <= pool', 'yes' if fits else 'NO'))
    if not fits:
        return ItemResult(5, Status.FAIL, measured, 'fits the pool', rows=rows,
                          fix=f'the memory budget in {config} is over pool {budget.pool_name} '
                          f'by {_mib(reserved - pool)}: shrink a tenant (decoder format, '
                          'context) or choose a larger pool')
    return ItemResult(5, Status.PASS, measured, 'fits the pool', rows=rows)


def _mib(value: Any) -> str:
    try:
        return f'{float(value) / 2**20:.0f} MiB'
    except (TypeError, ValueError):
        return '?'


def placement_item(devices: Mapping[str, str], handoff: Mapping[str, Any],
                   require: bool, not_measured: Mapping[str, str] | None = None) -> ItemResult:
    """Item 6: which stage runs where (from the running nodes), handoff cost per frame.

    ``devices`` maps stage -> its ``device`` parameter ('cpu' where not declared);
    ``handoff`` stage -> its measured handoff per frame for stages off the CPU (a
    :class:`~edge_loop.check.handoff.HandoffTime`, or ms); ``not_measured`` stage -> why a
    handoff could not be measured.
    """
    accelerated = {s: d for s, d in devices.items() if d != 'cpu'}
    required = require or bool(accelerated)
    mod, why = _import('edge_loop.placement')
    if mod is None:
        return not_run(6, why, required=required)
    rows = []
    bad = []
    for stage, spec in devices.items():
        try:
            placed = mod.resolve_device(spec).device
        except Exception as exc:  # noqa: BLE001 - PlacementError and the like
            rows.append((stage, f'device {spec!r}: {exc}', '-', 'NO'))
            bad.append(f'{stage}: {exc}')
            continue
        if placed == 'cpu':
            rows.append((stage, 'cpu: reads the shared-memory frame in place, no handoff',
                         '-', 'yes'))
        elif stage in handoff:
            cost = handoff[stage]
            text = (cost.describe() if hasattr(cost, 'describe')
                    else f'{placed}: handoff {float(cost):.2f} ms per frame')
            rows.append((stage, text, 'measured', 'yes'))
        else:
            reason = (not_measured or {}).get(stage, 'not measured')
            rows.append((stage, f'{placed}: handoff {reason}', 'measured', 'NO'))
            bad.append(f'{stage} on {placed}: no handoff measurement ({reason})')
    where = ', '.join(f'{s} {d}' for s, d in devices.items())
    if bad:
        item = not_run(6, '; '.join(bad), required=required)
        item.rows = rows
        return item
    return ItemResult(6, Status.PASS, where, 'every stage placed, handoff known', rows=rows,
                      required=required)
