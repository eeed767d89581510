# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the launch tests: an ament prefix for this checkout, an isolated ROS domain.

launch_ros finds ``edge_loop``'s executables in ``<prefix>/lib/edge_loop/`` of a prefix on
AMENT_PREFIX_PATH that has the package's ament index marker; ``colcon build`` makes one on a
robot. Here the package is an editable pip install (executables in the venv's bin/), so the
fixture lays out the same prefix with links into this checkout and the venv, which is what
``colcon build --symlink-install`` would give.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from edge_loop.testing import claim_domain_id

ROOT = Path(__file__).resolve().parents[2]
NODE_EXECUTABLES = ('object_locator', 'grasp_planner', 'occupancy_mapper', 'grasp_state',
                    'pick_controller', 'deadline_monitor', 'lifecycle_manager', 'bag_player',
                    'sim_robot', 'frame_ingest')


def make_ament_prefix(prefix: Path) -> Path:
    """A colcon-like install prefix of edge_loop made of links into the checkout and venv."""
    index = prefix / 'share' / 'ament_index' / 'resource_index' / 'packages'
    index.mkdir(parents=True, exist_ok=True)
    (index / 'edge_loop').write_text('')
    share = prefix / 'share' / 'edge_loop'
    share.mkdir(parents=True, exist_ok=True)
    for name in ('launch', 'config', 'rviz', 'package.xml'):
        if not (share / name).exists():
            (share / name).symlink_to(ROOT / name)
    lib = prefix / 'lib' / 'edge_loop'
    lib.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    for exe in NODE_EXECUTABLES:
        script = bin_dir / exe
        if not script.exists():
            found = shutil.which(exe)
            if found is None:
                raise FileNotFoundError(f'{exe} is not installed (pip install -e .)')
            script = Path(found)
        if not (lib / exe).exists():
            (lib / exe).symlink_to(script)
    return prefix


@pytest.fixture(scope='module')
def ament_prefix(tmp_path_factory):
    """AMENT_PREFIX_PATH with edge_loop's prefix and the venv (launch's own grammar files)."""
    prefix = make_ament_prefix(tmp_path_factory.mktemp('ament') / 'install')
    old = os.environ.get('AMENT_PREFIX_PATH')
    os.environ['AMENT_PREFIX_PATH'] = os.pathsep.join(
        [str(prefix), sys.prefix] + ([old] if old else []))
    try:
        yield prefix
    finally:
        if old is None:
            os.environ.pop('AMENT_PREFIX_PATH', None)
        else:
            os.environ['AMENT_PREFIX_PATH'] = old


@pytest.fixture(scope='module')
def launch_domain():
    """A ROS_DOMAIN_ID held for the module's launch (children inherit it through launch)."""
    domain_id, lock = claim_domain_id()
    try:
        yield domain_id
    finally:
        lock.close()
