# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Where the package's data files are, for colcon, pip and editable installs alike."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = 'edge_loop'
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def share_dir() -> Path:
    """Return the directory holding launch/, config/, rviz/ (and data/ in a source tree).

    Tries the ament index (colcon install), then ``sys.prefix/share/edge_loop`` (pip install),
    then the source tree (editable install, running from a checkout).
    """
    try:
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )

        try:
            path = Path(get_package_share_directory(PACKAGE))
            if (path / 'config').is_dir():
                return path
        except (PackageNotFoundError, OSError):  # OSError: AMENT_PREFIX_PATH unset
            pass
    except ImportError:  # pragma: no cover - ament_index is a declared dependency
        pass
    prefix_share = Path(sys.prefix) / 'share' / PACKAGE
    if (prefix_share / 'config').is_dir():
        return prefix_share
    return SOURCE_ROOT


def config_path(name: str) -> Path:
    """Return the path of a file in config/ (``pick.yaml``, ``tolerances.yaml``, ...)."""
    return share_dir() / 'config' / name


def data_dir() -> Path:
    """Return the directory of the embedded scenario bags (source tree or EDGE_LOOP_DATA)."""
    env = os.environ.get('EDGE_LOOP_DATA')
    if env:
        return Path(env)
    for base in (share_dir(), SOURCE_ROOT):
        if (base / 'data').is_dir():
            return base / 'data'
    return SOURCE_ROOT / 'data'
