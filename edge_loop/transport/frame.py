# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The frame a consumer receives, whichever transport carried it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


class RgbdFrame:
    """One RGB-D frame as a consumer sees it.

    ``color`` and ``depth`` are read-only numpy views: on the shared-memory sample (``shm``) or
    on the received message's bytes (``ros``). A frame keeps its sample borrowed for as long as
    the frame or any view on it is referenced; hand it off or drop it quickly (a subscriber may
    borrow only a few samples at once; frames beyond that are dropped and counted).
    """

    __slots__ = ('color', 'depth', 'color_encoding', 'depth_encoding', 'stamp_ns', 'frame_id',
                 'seq', 'writer_id', 'send_time_ns', 'receive_time_ns', 'transport',
                 '_stage_times', '_stage_factory', '_info_factory', '_info', '_buffers',
                 '_on_audit', '__weakref__')

    def __init__(self, *, color: np.ndarray | None, depth: np.ndarray | None,
                 color_encoding: str, depth_encoding: str, stamp_ns: int, frame_id: str,
                 seq: int, writer_id: int, send_time_ns: int, receive_time_ns: int,
                 transport: str, info_factory: Callable[[], Any],
                 buffers: tuple[np.ndarray, ...] = (),
                 stage_times: dict[str, int] | None = None,
                 stage_factory: Callable[[], dict[str, int]] | None = None,
                 on_audit: Callable[[int, int], None] | None = None) -> None:
        self.color = color
        self.depth = depth
        self.color_encoding = color_encoding
        self.depth_encoding = depth_encoding
        self.stamp_ns = stamp_ns
        self.frame_id = frame_id
        self.seq = seq
        self.writer_id = writer_id
        self.send_time_ns = send_time_ns
        self.receive_time_ns = receive_time_ns
        self.transport = transport
        self._stage_times = None if stage_factory is not None else dict(stage_times or {})
        self._stage_factory = stage_factory
        self._info_factory = info_factory
        self._info: Any = None
        self._buffers = buffers
        self._on_audit = on_audit

    @property
    def stamp(self) -> Any:
        """The camera frame's ``builtin_interfaces/Time``."""
        from builtin_interfaces.msg import Time

        return Time(sec=self.stamp_ns // 1_000_000_000, nanosec=self.stamp_ns % 1_000_000_000)

    @property
    def stage_times(self) -> dict[str, int]:
        """Named CLOCK_MONOTONIC ns timestamps: the producer's, 'wake', 'receive', then marks."""
        if self._stage_times is None:
            self._stage_times = self._stage_factory()
            self._stage_factory = None
        return self._stage_times

    @property
    def camera_info(self) -> Any:
        """``sensor_msgs/CameraInfo`` of the frame (header = stamp/frame_id; built lazily)."""
        if self._info_factory is not None:
            self._info = self._info_factory()
            self._info_factory = None   # also lets go of the sample it held
        return self._info

    @property
    def latency_ns(self) -> int | None:
        """Send (producer) to receive (this consumer's view) in ns; None over ROS topics."""
        if not self.send_time_ns:
            return None
        return self.receive_time_ns - self.send_time_ns

    def mark(self, stage: str) -> int:
        """Record that ``stage`` finished with this frame now (CLOCK_MONOTONIC ns)."""
        now = time.monotonic_ns()
        self.stage_times[stage] = now
        return now

    def shares_memory(self, array: np.ndarray) -> bool:
        """True when ``array`` lies in this frame's received memory (no copy was made)."""
        return any(np.shares_memory(array, b) for b in self._buffers)

    def audit(self, *arrays: np.ndarray) -> int:
        """Copy audit: count the ``arrays`` (what a kernel receives) that are copies.

        The result goes into the reader's ``stats['copies']``; returns this call's count.
        """
        copies = sum(0 if self.shares_memory(a) else 1 for a in arrays)
        if self._on_audit is not None:
            self._on_audit(len(arrays), copies)
        return copies

    def __repr__(self) -> str:
        shapes = (None if self.color is None else self.color.shape,
                  None if self.depth is None else self.depth.shape)
        return (f'RgbdFrame(seq={self.seq}, stamp_ns={self.stamp_ns}, frame_id={self.frame_id!r},'
                f' color={shapes[0]} {self.color_encoding}, depth={shapes[1]} '
                f'{self.depth_encoding}, transport={self.transport})')
