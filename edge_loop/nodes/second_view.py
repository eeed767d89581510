# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A second fixed depth camera's newest view, for a stage that fuses it with the main frames.

The occupancy grid is top-down: one camera leaves the floor behind each object unknown (its
shadow). A second camera looking from elsewhere sees into that shadow, and
:func:`edge_loop.kernels.occupancy.integrate_views` adds both views' evidence in one update.
The second camera arrives on plain ROS topics (an aligned depth ``Image`` and its
``CameraInfo``), not through the shared-memory frame ring: :class:`SecondView` keeps its newest
decoded depth image, and the stage asks, per main frame, for the view taken within
``max_age_s`` of that frame's stamp (:func:`fresh_view`). An older one (or none yet) is not
fused (the objects may have moved since): the frame is mapped from the main camera alone and
counted ``not_fused``. A second image that cannot be read (encoding, size, camera_info missing or of
another size, no valid pixel) is dropped with its reason, counted ``bad``; it never stops
the main camera's grid.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from edge_loop.images import ImageFormatError, image_to_array
from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.nodes.vision_common import BadFrameError, depth_inputs


@dataclass(frozen=True)
class DepthView:
    """One decoded depth image of the second camera."""

    stamp_ns: int
    depth: np.ndarray           # (H, W) uint16 mm or float32 m, as the message carried it
    intrinsics: Intrinsics


def depth_view(depth_msg: Any, info_msg: Any, stamp_ns: int) -> DepthView:
    """The depth image of a ``sensor_msgs/Image`` with its ``CameraInfo``, or BadFrameError."""
    try:
        depth = image_to_array(depth_msg)
    except ImageFormatError as exc:
        raise BadFrameError(f'second camera: {exc}') from exc
    frame = SimpleNamespace(depth=depth, depth_encoding=depth_msg.encoding,
                            camera_info=info_msg)
    try:
        depth, intr = depth_inputs(frame)
    except BadFrameError as exc:
        raise BadFrameError(f'second camera: {exc}') from exc
    return DepthView(stamp_ns, depth, intr)


def fresh_view(view: DepthView | None, stamp_ns: int, max_age_ns: int) -> DepthView | None:
    """``view`` when it was taken within ``max_age_ns`` of ``stamp_ns`` (either side), else None."""
    if view is None or abs(stamp_ns - view.stamp_ns) > max_age_ns:
        return None
    return view


class SecondView:
    """Newest view of the second camera (thread-safe: messages and frames on other threads)."""

    def __init__(self, extrinsics: Extrinsics, max_age_s: float) -> None:
        self.extrinsics = extrinsics
        self.max_age_ns = int(round(max_age_s * 1e9))
        self._lock = threading.Lock()
        self._info: Any = None
        self._view: DepthView | None = None
        self.received = 0
        self.fused = 0
        self.not_fused = 0
        self.bad = 0
        self.last_error = ''

    def on_camera_info(self, msg: Any) -> None:
        """Keep the newest camera_info (a fixed camera's intrinsics do not change)."""
        with self._lock:
            self._info = msg

    def on_depth(self, msg: Any, stamp_ns: int) -> None:
        """Decode and keep the newest depth image; BadFrameError (counted) when unreadable."""
        with self._lock:
            info = self._info
            self.received += 1
        try:
            view = depth_view(msg, info, stamp_ns)
        except BadFrameError as exc:
            with self._lock:
                self.bad += 1
                self.last_error = str(exc)
            raise
        with self._lock:
            if self._view is None or view.stamp_ns >= self._view.stamp_ns:
                self._view = view

    def views_for(self, stamp_ns: int) -> list[tuple[np.ndarray, Intrinsics, Extrinsics]]:
        """[(depth, intrinsics, extrinsics)] of the view to fuse with a main frame, or []."""
        with self._lock:
            view = fresh_view(self._view, stamp_ns, self.max_age_ns)
            if view is None:
                self.not_fused += 1
                return []
            self.fused += 1
        return [(view.depth, view.intrinsics, self.extrinsics)]

    def values(self) -> dict[str, Any]:
        """Counters for the stage's /diagnostics summary."""
        with self._lock:
            out = {'second_received': self.received, 'second_fused': self.fused,
                   'second_not_fused': self.not_fused, 'second_bad': self.bad}
            if self.last_error:
                out['second_last_error'] = self.last_error
        return out
