# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Pins: a record verified with other library versions is stale; nodes refuse or WARN."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from edge_loop.nodes.stage_base import ConfigError
from edge_loop.nodes.stage_health import ALLOW_STALE_PARAM, check_deployable_or_fail
from edge_loop.verify import run
from edge_loop.verify.gate import (
    StaleVerificationError,
    check_deployable,
    current_environment,
    release_series,
    sha256_file,
    stale_reasons,
)


def _record(tmp_path, environment=None):
    module = tmp_path / 'kernel.py'
    module.write_text('def f(a):\n    return a\n')
    record = tmp_path / 'verified.json'
    result = run.OpResult('toy.op', 'pass', tolerance={'kind': 'exact', 'reason': 'x'},
                          files={str(module): sha256_file(module)},
                          environment=environment or current_environment(('numpy',)))
    run.write_record([result], record)
    return record


def _set_env(record, **changes):
    data = json.loads(record.read_text())
    data['ops']['toy.op']['environment'].update(changes)
    record.write_text(json.dumps(data))


def test_release_series():
    assert release_series('2.4.6') == '2.4'
    assert release_series('5.1.0.95') == '5.1'
    assert release_series('2.13.0+cpu') == '2.13'
    assert release_series(None) is None


def test_record_pins_python_and_the_ops_libraries(tmp_path):
    entry = json.loads(_record(tmp_path).read_text())['ops']['toy.op']
    assert entry['environment']['numpy'] == np.__version__
    assert entry['environment']['python'].count('.') == 2
    env = current_environment(('numpy', 'onnxruntime', 'opencv', 'torch'), device='cuda')
    assert {'python', 'numpy', 'onnxruntime', 'opencv', 'torch', 'accelerator',
            'driver'} <= set(env)


def test_a_patch_release_is_not_stale_a_minor_release_is(tmp_path):
    record = _record(tmp_path)
    major, minor, *_ = np.__version__.split('.')
    _set_env(record, numpy=f'{major}.{minor}.999')        # what pip picks on a fresh CI VM
    assert check_deployable(['toy.op'], record, tmp_path / 'none.yaml') == []
    _set_env(record, numpy=f'{major}.{int(minor) + 1}.0')
    with pytest.raises(StaleVerificationError,
                       match=rf'numpy {major}\.{int(minor) + 1}\.0 -> {np.__version__}.*'
                             'allow_stale_verification'):
        check_deployable(['toy.op'], record, tmp_path / 'none.yaml')
    stale = check_deployable(['toy.op'], record, tmp_path / 'none.yaml', allow_stale=True)
    assert len(stale) == 1 and 'numpy' in stale[0]


def test_missing_library_accelerator_and_driver_changes_are_stale():
    assert stale_reasons({'python': '3.11.7', 'nonexistent-lib': '1.0.0'}) != []
    reasons = stale_reasons({'accelerator': 'no such GPU', 'driver': '1.2.3'})
    assert any(r.startswith('accelerator no such GPU ->') for r in reasons)
    assert any(r.startswith('driver 1.2.3 ->') for r in reasons)
    assert stale_reasons(None) == ['no library versions were recorded with it (verified '
                                   'before pins existed)']


def test_an_unchanged_checkout_does_not_rewrite_the_record(tmp_path):
    record = _record(tmp_path)
    before = record.read_text()
    data = json.loads(before)['ops']['toy.op']
    again = run.OpResult('toy.op', 'pass', tolerance=data['tolerance'], files=data['files'],
                         environment=current_environment(('numpy',)))
    assert run.write_record([again], record) == []
    assert record.read_text() == before


class _Logger:
    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def warning(self, msg: str) -> None:
        self.lines.append((logging.WARNING, msg))

    def info(self, msg: str) -> None:
        self.lines.append((logging.INFO, msg))


class _Node:
    """What the deployment gate uses of a StageNode (no ROS graph needed)."""

    def __init__(self, record, allow: bool) -> None:
        self.params = {'require_verified': True, 'verified_record': str(record)}
        self.activation_checks: list = []
        self.logger = _Logger()
        self._declared = {ALLOW_STALE_PARAM: allow}

    def get_logger(self) -> _Logger:
        return self.logger

    def has_parameter(self, name: str) -> bool:
        return name in self._declared

    def get_parameter(self, name: str):
        return type('P', (), {'value': self._declared[name]})()

    def activate(self) -> None:
        for check in self.activation_checks:
            check()


def test_node_refuses_a_stale_kernel_naming_the_change(tmp_path):
    record = _record(tmp_path)
    _set_env(record, python='2.7.18')
    node = _Node(record, allow=False)
    with pytest.raises(ConfigError, match=r'deployment gate: toy.op: verification is stale: '
                       r'python 2\.7\.18 -> 3\.'):
        check_deployable_or_fail(node, ['toy.op'])


def test_node_allowed_to_run_stale_warns_on_every_activation(tmp_path):
    record = _record(tmp_path)
    _set_env(record, python='2.7.18')
    node = _Node(record, allow=True)
    check_deployable_or_fail(node, ['toy.op'])
    check_deployable_or_fail(node, ['toy.op'])        # a re-configure: still one check
    assert len(node.activation_checks) == 1
    for _ in range(3):
        node.activate()
    warnings = [m for level, m in node.logger.lines if level == logging.WARNING]
    assert len(warnings) == 5          # 2 configures + 3 activations
    assert all('python 2.7.18' in m and ALLOW_STALE_PARAM in m for m in warnings)


def test_node_activation_fails_when_the_record_went_stale_after_configure(tmp_path):
    record = _record(tmp_path)
    node = _Node(record, allow=False)
    check_deployable_or_fail(node, ['toy.op'])
    node.activate()
    _set_env(record, python='2.7.18')
    with pytest.raises(ConfigError, match='stale'):
        node.activate()


def test_the_shipped_record_matches_the_checkout():
    """Every CPU row of config/verified.json pins the files as they are in this checkout.

    The host-independent half of the deployment gate: a kernel edited after its verification
    (here or on the GPU host) makes the node refuse to configure on every robot, so the
    commit that edits it must carry the re-verified row (`make verify`; GPU rows from the
    GPU host) rather than be found by a launch at a customer's.
    """
    from edge_loop.verify.gate import default_record_path, resolve_path

    # CPU rows only: GPU rows are re-pinned on the GPU host (this CI has none); a stale GPU
    # row makes a device:=cuda node refuse to configure with the same message, by design.
    ops = {name: entry for name, entry in
           json.loads(default_record_path().read_text())['ops'].items()
           if 'accelerator' not in entry.get('environment', {})}
    stale = {name: [stored for stored, want in entry['files'].items()
                    if sha256_file(resolve_path(stored)) != want]
             for name, entry in ops.items()}
    stale = {name: files for name, files in stale.items() if files}
    assert not stale, f'rows verified against other file contents (re-run make verify): {stale}'
