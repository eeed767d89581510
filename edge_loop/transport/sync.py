# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Pair colour, depth and camera_info messages by stamp (no rclpy import).

Exact matching by default (what the edge_loop producers publish); a small tolerance may be
given for drivers whose aligned depth is stamped a little apart from colour. The queue of
incomplete stamps is bounded: the oldest incomplete set is evicted (and counted) first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

KINDS = ('color', 'depth', 'info')


class StampSynchroniser:
    """Collect one message of each kind per stamp; return the set when complete."""

    def __init__(self, kinds: tuple[str, ...] = KINDS, queue_size: int = 8,
                 tolerance_ns: int = 0) -> None:
        self.kinds = kinds
        self.queue_size = max(1, queue_size)
        self.tolerance_ns = max(0, tolerance_ns)
        self.evicted = 0
        self._pending: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _key_for(self, stamp_ns: int) -> int:
        if stamp_ns in self._pending or self.tolerance_ns == 0:
            return stamp_ns
        best, best_err = stamp_ns, self.tolerance_ns + 1
        for key in self._pending:
            err = abs(key - stamp_ns)
            if err < best_err:
                best, best_err = key, err
        return best

    def add(self, kind: str, stamp_ns: int, msg: Any) -> tuple[int, dict[str, Any]] | None:
        """Add ``msg``; returns (stamp_ns, {kind: msg}) once every kind has this stamp."""
        if kind not in self.kinds:
            raise ValueError(f'unknown kind {kind!r}')
        with self._lock:
            key = self._key_for(stamp_ns)
            entry = self._pending.get(key)
            if entry is None:
                entry = self._pending[key] = {}
                while len(self._pending) > self.queue_size:
                    self._pending.popitem(last=False)
                    self.evicted += 1
            entry[kind] = msg
            if len(entry) < len(self.kinds):
                return None
            del self._pending[key]
            # Anything older than a completed set can no longer complete in order: drop it.
            for old in [k for k in self._pending if k < key]:
                del self._pending[old]
                self.evicted += 1
            return key, entry

    def pending(self) -> int:
        """Number of incomplete stamps held."""
        with self._lock:
            return len(self._pending)
