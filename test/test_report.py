# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The demo report's link to the deployment checklist (issue 33: the demo's report links it)."""

from __future__ import annotations

from types import SimpleNamespace

from edge_loop.check.items import ItemResult, Status
from edge_loop.check.page import PageHeader, write_page
from edge_loop.report import check_page_line, write_report


def _page(folder, status: Status, calibration: str = '') -> None:
    header = PageHeader(host='robot', when='2026-12-05 02:40 UTC', mode='quick',
                        source='bag', revision='abc1234', calibration=calibration)
    items = [ItemResult(1, status, 'end-to-end p99 30 ms', 'budgets'),
             ItemResult(9, Status.PASS, 'versions', 'installed')]
    write_page(items, header, folder)


def test_report_without_a_check_page_says_how_to_make_one(tmp_path):
    line = check_page_line(tmp_path / 'reports' / 'demo', tmp_path / 'reports' / 'check')
    assert line.startswith('No deployment checklist yet: run `make check` on the target')
    assert str(tmp_path / 'reports' / 'check' / 'check.md') in line


def test_report_links_the_last_check_page_with_its_verdict(tmp_path):
    check = tmp_path / 'reports' / 'check'
    _page(check, Status.PASS)
    line = check_page_line(tmp_path / 'reports' / 'demo', check)
    assert line == ('[Last `make check` page](../check/check.md): **PASS** (every required '
                    'item passed), 2026-12-05 02:40 UTC, edge_loop abc1234.')
    _page(check, Status.FAIL, calibration='latency budgets x1.20')
    line = check_page_line(tmp_path / 'elsewhere' / 'bench-pick', check)
    assert line.startswith('[Last `make check` page](../../reports/check/check.md): **FAIL** '
                           '(item 1 (latency budget) FAIL)')
    assert line.endswith(', calibrated on a machine that is not the target.')


def test_demo_report_carries_the_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _page(tmp_path / 'reports' / 'check', Status.PASS)
    obs = SimpleNamespace(latencies_ms={}, examples={}, tactile=[], grasp_states=[])
    readme = write_report(tmp_path / 'reports' / 'demo', 'table', [], obs, 66.0, {})
    text = readme.read_text()
    assert '## Deployment checklist\n\n[Last `make check` page](../check/check.md): **PASS**' \
        in text
