# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deployment gate: a node runs an op only if its files match a passing verification record.

``edge-loop verify`` writes ``config/verified.json``: per op, the sha256 of the source modules
of its reference and deployed implementations and of the module that declares its sweep, of
its artifact (ONNX model) if any, the tolerance row it passed under, and the environment it
passed in (``environment``: Python and the versions of the libraries the op declares, plus
the accelerator and its driver for a GPU op). A node calls :func:`check_deployable` in
``configure_stage`` and again on every activation; any edit to those files or to the
tolerance row since the last passing run makes it refuse, with a message that says what
changed.

A changed environment makes the entry *stale* (:func:`stale_reasons`): a different
major.minor version of Python or of a pinned library, a pinned library missing, another
accelerator, or another driver major version. A patch release is not a change: it is what
``pip install`` picks on a fresh machine any day, and the libraries keep numerics within a
release series (docs/verification.md gives the reasoning). A stale entry is refused
(:class:`StaleVerificationError`, naming each change) unless the caller allows stale
verification, and then it comes back as warnings.
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


class StaleVerificationError(DeploymentGateError):
    """The op's files match, but it was verified with other library versions or hardware."""


def release_series(version: str | None) -> str | None:
    """``'2.4'`` of ``'2.4.6'`` (``'5.1'`` of ``'5.1.0.95'``, ``'2.13'`` of ``'2.13.0+cpu'``)."""
    if version is None:
        return None
    parts = version.split('+', 1)[0].split('.')
    return '.'.join(parts[:2])


def current_environment(libraries: Iterable[str], device: str = 'cpu') -> dict[str, Any]:
    """Python, the versions of ``libraries`` and, off the CPU, the accelerator and driver."""
    from edge_loop.verify import host

    env = host.library_versions(tuple(libraries))
    if device != 'cpu':
        acc = host.accelerator()
        env['accelerator'] = acc['name'] if acc else None
        env['driver'] = acc['driver'] if acc else None
    return env


def stale_reasons(recorded: dict[str, Any] | None) -> list[str]:
    """What differs between the environment ``recorded`` with an entry and this one."""
    if not recorded:
        return ['no library versions were recorded with it (verified before pins existed)']
    libraries = [k for k in recorded if k not in ('python', 'accelerator', 'driver')]
    device = 'cuda' if 'accelerator' in recorded else 'cpu'
    now = current_environment(libraries, device)
    reasons = []
    for key, was in recorded.items():
        here = now.get(key)
        if key == 'accelerator':
            changed = was != here
        elif key == 'driver':
            changed = (was or '').split('.')[0] != (here or '').split('.')[0]
        else:
            changed = release_series(was) != release_series(here)
        if changed:
            reasons.append(f'{key} {was or "absent"} -> {here or "absent"}')
    return reasons


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
                     tolerances_path: Path | str | None = None, *,
                     allow_stale: bool = False) -> list[str]:
    """Raise :class:`DeploymentGateError` unless every op in ``op_names`` is verified as is.

    Returns the stale entries' messages when ``allow_stale`` lets them through (else a stale
    entry raises :class:`StaleVerificationError`); an empty list when all are current.
    """
    path = Path(record_path) if record_path else default_record_path()
    fix = 'run `make verify` (edge-loop verify)'
    if not path.exists():
        raise DeploymentGateError(f'no verification record at {path}; {fix}')
    try:
        ops = json.loads(path.read_text()).get('ops', {})
    except (OSError, ValueError) as exc:
        raise DeploymentGateError(f'unreadable verification record {path}: {exc}; {fix}') from exc
    stale: list[str] = []
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
        changed = stale_reasons(entry.get('environment'))
        if changed:
            message = (f'{name}: verification is stale: {"; ".join(changed)} since it was '
                       f'verified ({entry.get("verified_at", "?")}); {fix} on this machine')
            if not allow_stale:
                raise StaleVerificationError(
                    message + ', or set allow_stale_verification to run it anyway')
            stale.append(message)
    return stale
