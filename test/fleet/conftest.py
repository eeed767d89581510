# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A small bag set for the fleet tests: embedded scenario bags, a corrupt one, a wrong one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sensor_msgs.msg import JointState

from edge_loop import topics
from edge_loop.bags import BagWriter
from edge_loop.paths import data_dir

# Short embedded bags (2-3 frames each), named as edge-loop record names its outputs.
GOOD = ('nominal', 'dim', 'glare', 'flicker', 'color_cast', 'overexposed')


def copy_good(folder: Path, names: tuple[str, ...] = GOOD) -> list[Path]:
    """The embedded scenario bags ``names`` copied into ``folder`` as <name>_s<seed>."""
    scenarios = data_dir() / 'scenarios'
    out = []
    for i, name in enumerate(names):
        dest = folder / f'{name}_s{800 + i}'
        shutil.copytree(scenarios / name, dest)
        out.append(dest)
    return out


def write_corrupt(dest: Path) -> Path:
    """A copy of the nominal bag with its storage file cut in half."""
    shutil.copytree(data_dir() / 'scenarios' / 'nominal', dest)
    mcap = next(dest.glob('*.mcap'))
    mcap.write_bytes(mcap.read_bytes()[:mcap.stat().st_size // 2])
    return dest


def write_joint_only(dest: Path) -> Path:
    """A valid bag of another schema: joint states only, no camera."""
    with BagWriter(dest) as writer:
        for i in range(3):
            msg = JointState(name=['left_finger'], position=[0.01 * i])
            msg.header.stamp.sec = 1 + i
            writer.write(topics.JOINT_STATES, (1 + i) * 1_000_000_000, msg)
    return dest


@pytest.fixture(scope='session')
def bag_set(tmp_path_factory) -> Path:
    """A folder: the six short scenario bags, one corrupt and one joint-states-only bag."""
    root = tmp_path_factory.mktemp('fleet_bags')
    copy_good(root)
    write_corrupt(root / 'broken' / 'nominal_s999')
    write_joint_only(root / 'broken' / 'joints_only')
    return root
