# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Reproducers: every failing case of a verify run as one small ``.npz`` file.

A reproducer holds the op's and the case's names, the category, what the run saw, and the
call's arguments (pickled, when they pickle and are under :data:`MAX_PAYLOAD_BYTES`; the array
arguments also as plain arrays for a look with numpy) with their memory layout (negative
strides, non-contiguous, read-only), which pickling would lose and loading restores.
``edge-loop verify --repro FILE`` runs reference and deployed on it again with the op's
current tolerance row and prints the comparison: exit 0 when it passes now, 1 when it still
fails. A case too large to store (a
3840x2160 frame) is found again by name in the op's sweep, which is deterministic.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop.verify.spec import Case, OpSpec

MAX_PAYLOAD_BYTES = 4 << 20


def _slug(text: str) -> str:
    return re.sub(r'[^A-Za-z0-9._-]+', '_', text).strip('_')[:80]


def _layout(value: Any) -> Any:
    """How an array argument was laid out (pickling makes every array C-contiguous)."""
    if isinstance(value, dict):
        return {k: _layout(v) for k, v in value.items()}
    if not isinstance(value, np.ndarray):
        return None
    tags = []
    if any(s < 0 for s in value.strides):
        tags.append('negative')
    elif not value.flags.c_contiguous and value.size > 1:
        tags.append('noncontiguous')
    if not value.flags.writeable:
        tags.append('readonly')
    return tags


def _restore(value: Any, tags: Any) -> Any:
    """``value`` with the layout ``tags`` (from :func:`_layout`) again."""
    if isinstance(value, dict) and isinstance(tags, dict):
        return {k: _restore(v, tags.get(k)) for k, v in value.items()}
    if not isinstance(value, np.ndarray) or not tags:
        return value
    if 'negative' in tags:
        value = np.flip(np.ascontiguousarray(np.flip(value)))
    elif 'noncontiguous' in tags and value.ndim:
        wide = np.zeros(value.shape[:-1] + (2 * value.shape[-1],), value.dtype)
        wide[..., ::2] = value
        value = wide[..., ::2]
    if 'readonly' in tags:
        value = value.view()
        value.flags.writeable = False
    return value


def save(directory: Path, op: OpSpec, case: Case, result: Any) -> Path:
    """Write the reproducer of ``case`` (failed as ``result``) under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f'{_slug(op.name)}__{_slug(case.name)}.npz'
    meta = {'op': op.name, 'case': case.name, 'category': case.report_category,
            'detail': result.detail, 'worst_error': result.worst_error,
            'layout': {'args': [_layout(a) for a in case.args],
                       'kwargs': {k: _layout(v) for k, v in case.kwargs.items()}}}
    arrays: dict[str, np.ndarray] = {}
    for i, arg in enumerate(case.args):
        if isinstance(arg, np.ndarray) and arg.nbytes <= MAX_PAYLOAD_BYTES:
            arrays[f'arg{i}'] = arg
    try:
        payload = pickle.dumps((case.args, case.kwargs, case.category))
    except Exception as exc:  # noqa: BLE001 - e.g. an ONNX Runtime session in the kwargs
        payload, meta['payload'] = b'', f'not stored ({type(exc).__name__}): found by name'
    if len(payload) > MAX_PAYLOAD_BYTES:
        payload, meta['payload'] = b'', f'not stored ({len(payload)} bytes): found by name'
    np.savez_compressed(path, meta=np.array(json.dumps(meta, default=str)),
                        payload=np.frombuffer(payload, np.uint8), **arrays)
    return path


def load(path: Path) -> tuple[dict[str, Any], Case | None]:
    """(metadata, the stored case or None when it must be found by name)."""
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data['meta']))
        payload = data['payload'].tobytes()
    if not payload:
        return meta, None
    args, kwargs, category = pickle.loads(payload)  # noqa: S301 - our own file
    layout = meta.get('layout', {})
    args = [_restore(a, t) for a, t in zip(args, layout.get('args', [None] * len(args)))]
    kwargs = {k: _restore(v, layout.get('kwargs', {}).get(k)) for k, v in kwargs.items()}
    return meta, Case(meta['case'], tuple(args), dict(kwargs), category)


def rerun(path: Path, tolerances_path: Path | None = None) -> int:
    """``edge-loop verify --repro FILE``: 0 when the case passes now, 1 when it fails."""
    from edge_loop.verify import run

    meta, case = load(Path(path))
    ops = {op.name: op for op in run.discover_ops()}
    op = ops.get(meta['op'])
    if op is None:
        print(f'{path}: op {meta["op"]!r} is not registered (have {", ".join(ops)})')
        return 2
    if case is None:
        case = next((c for c in op.cases() if c.name == meta['case']), None)
        if case is None:
            print(f'{path}: case {meta["case"]!r} is no longer in the sweep of {op.name}')
            return 2
    tol = run.load_tolerances(tolerances_path or run.default_config_file('tolerances.yaml'))
    row = tol.get(op.name)
    if row is None:
        print(f'{op.name}: no tolerance row')
        return 1
    result = run.compare_case(op, case, row)
    print(f'{op.name} [{result.category}] {case.name}')
    print(f'  when saved: {meta["detail"]}')
    print(f'  now:        {"PASS" if result.ok else "FAIL"}: {result.detail}')
    if result.ok:
        return 0
    print(f'  max abs error {result.max_abs:.4g} (tolerance {result.abs_tol:.4g}), max rel '
          f'error {result.max_rel:.4g} (tolerance {result.rel_tol:.4g})')
    return 1
