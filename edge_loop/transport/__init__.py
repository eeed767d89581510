# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Zero-copy frame channels: iceoryx2 loans (``shm``) or plain ROS topics (``ros``).

Producers: ``FrameWriter(node, transport, channel).loan(...)`` then ``frame.publish(...)``.
Consumers: ``FrameReader(node, transport, channel, callback=on_frame)``. See docs/transport.md.

The ROS-facing names load on first use, so the shared-memory data plane
(:mod:`edge_loop.transport.shm`) imports on a machine without rclpy (``bench_transport
--variants shm_core``).
"""

from __future__ import annotations

from typing import Any

from edge_loop.transport.frame import RgbdFrame
from edge_loop.transport.shm import available as shm_available
from edge_loop.transport.shm import remove_stale_resources

_API = ('TRANSPORTS', 'FrameLoan', 'FrameReader', 'FrameWriter', 'image_qos')

__all__ = [*_API, 'RgbdFrame', 'remove_stale_resources', 'shm_available']


def __getattr__(name: str) -> Any:
    if name in _API:
        from edge_loop.transport import api

        return getattr(api, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
