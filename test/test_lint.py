# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The ament linters' checks, through ruff: flake8 (E/F/W), pep257 (D), copyright (CPY)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ['edge_loop', 'test', 'bench', 'tools', 'launch', 'setup.py']

pytestmark = pytest.mark.linter


@pytest.fixture(scope='module')
def ruff_findings() -> list[dict]:
    """Every ruff finding (config in pyproject.toml), as ruff's JSON records."""
    cmd = [sys.executable, '-m', 'ruff', 'check', '--no-cache', '--output-format', 'json',
           '--no-fix']
    result = subprocess.run(cmd + [s for s in SOURCES if (ROOT / s).exists()], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout or '[]')


@pytest.mark.parametrize('prefixes', [('E', 'F', 'W', 'I', 'N', 'B', 'UP', 'Q'), ('D',),
                                      ('CPY',)], ids=['flake8', 'pep257', 'copyright'])
def test_ruff(ruff_findings, prefixes):
    bad = [f"{f['filename']}:{f['location']['row']}: {f['code']} {f['message']}"
           for f in ruff_findings if re.match('(' + '|'.join(prefixes) + r')\d', f['code'] or '')]
    assert not bad, '\n'.join(bad)


def test_package_xml_is_format_3_with_license():
    root = ET.parse(ROOT / 'package.xml').getroot()
    assert root.get('format') == '3'
    assert root.findtext('name') == 'edge_loop'
    assert root.findtext('license') == 'Apache-2.0'
    assert root.find('export/build_type').text == 'ament_python'
    deps = {e.text for e in root.findall('exec_depend')}
    assert {'rclpy', 'sensor_msgs', 'geometry_msgs', 'nav_msgs', 'lifecycle_msgs'} <= deps


def test_license_file():
    assert 'Apache License' in (ROOT / 'LICENSE').read_text()
