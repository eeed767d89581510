# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the transport tests."""

import contextlib
import os

import pytest


@pytest.fixture
def shm(monkeypatch):
    """edge_loop.transport.shm with a private iceoryx2 prefix, its files removed after."""
    from edge_loop.transport import shm

    if not shm.available()[0]:
        pytest.skip(shm.available()[1])
    prefix = f'elt{os.getpid() % 100000}_'
    monkeypatch.setenv(shm.PREFIX_ENV, prefix)
    yield shm
    for name in os.listdir('/dev/shm'):
        if name.startswith(prefix):   # iceoryx2's 16-byte global file of the prefix
            with contextlib.suppress(OSError):
                os.unlink(os.path.join('/dev/shm', name))
