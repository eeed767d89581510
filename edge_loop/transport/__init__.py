# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Zero-copy frame channels: iceoryx2 loans (``shm``) or plain ROS topics (``ros``).

Producers: ``FrameWriter(node, transport, channel).loan(...)`` then ``frame.publish(...)``.
Consumers: ``FrameReader(node, transport, channel, callback=on_frame)``. See docs/transport.md.
"""

from __future__ import annotations

from edge_loop.transport.api import TRANSPORTS, FrameLoan, FrameReader, FrameWriter, image_qos
from edge_loop.transport.frame import RgbdFrame
from edge_loop.transport.shm import available as shm_available
from edge_loop.transport.shm import remove_stale_resources

__all__ = ['TRANSPORTS', 'FrameLoan', 'FrameReader', 'FrameWriter', 'RgbdFrame', 'image_qos',
           'remove_stale_resources', 'shm_available']
