# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deployment gate: a node runs an op only if its files match a passing verification record.

``edge-loop verify`` writes ``config/verified.json``: per op, the sha256 of the source modules
of its reference and deployed implementations and of the module that declares its sweep, of
its artifact (ONNX model) if any, and the tolerance row it passed under. A node calls
:func:`check_deployable` in ``configure_stage``; any edit to those files or to the tolerance
row since the last passing run makes it refuse, with a message that says what changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from edge_loop.paths import SOURCE_ROOT, config_path


class DeploymentGateError(RuntimeError):
    """The op has no passing verification record, or its files changed since."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def display_path(path: Path) -> str:
    """Path relative to the package root (``edge_loop/...``) when inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return path.relative_to(SOURCE_ROOT).as_posix()
    except ValueError:
        return str(path)


def resolve_path(stored: str) -> Path:
    """Inverse of :func:`display_path` for the current install."""
    p = Path(stored)
    return p if p.is_absolute() else SOURCE_ROOT / p


def _config_file(name: str) -> Path:
    """config/<name> of the source tree (checkout) or of the installed share dir."""
    src = SOURCE_ROOT / 'config' / name
    if src.exists():
        return src
    try:
        return config_path(name)
    except OSError:  # ament_index without AMENT_PREFIX_PATH
        return src


def default_record_path() -> Path:
    """config/verified.json of the source tree (checkout) or the installed share dir."""
    return _config_file('verified.json')


def _tolerance_row(name: str, path: Path | None) -> dict[str, Any] | None:
    path = path or _config_file('tolerances.yaml')
    if not Path(path).exists():
        return None
    data = yaml.safe_load(Path(path).read_text()) or {}
    return (data.get('ops', data) or {}).get(name)


def check_deployable(op_names: Iterable[str], record_path: Path | str | None = None,
                     tolerances_path: Path | str | None = None) -> None:
    """Raise :class:`DeploymentGateError` unless every op in ``op_names`` is verified as is."""
    path = Path(record_path) if record_path else default_record_path()
    fix = 'run `make verify` (edge-loop verify)'
    if not path.exists():
        raise DeploymentGateError(f'no verification record at {path}; {fix}')
    try:
        ops = json.loads(path.read_text()).get('ops', {})
    except (OSError, ValueError) as exc:
        raise DeploymentGateError(f'unreadable verification record {path}: {exc}; {fix}') from exc
    for name in op_names:
        entry = ops.get(name)
        if not entry or not entry.get('files'):
            raise DeploymentGateError(f'{name}: no passing verification record in {path}; {fix}')
        for stored, want in entry['files'].items():
            file = resolve_path(stored)
            if not file.exists():
                raise DeploymentGateError(
                    f'{name}: {stored} (verified) is missing at {file}; {fix}')
            got = sha256_file(file)
            if got != want:
                raise DeploymentGateError(
                    f'{name}: {stored} sha256 {got[:12]}… does not match the verified record '
                    f'({want[:12]}…) in {path}; {fix}')
        row = _tolerance_row(name, Path(tolerances_path) if tolerances_path else None)
        if row is not None and entry.get('tolerance') not in (None, row):
            raise DeploymentGateError(
                f'{name}: its tolerance row in config/tolerances.yaml changed since the '
                f'verified run ({entry.get("tolerance")} -> {row}); {fix}')
