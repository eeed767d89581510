# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The control loop's frames as another process sees them, feeding a :class:`FrameGate`.

The loop's stages run in processes of their own; a decoder in yet another process (the
``target_reasoner`` node) cannot be told by them when a frame's GPU work starts and ends, but
it can watch the same topics: a frame begins when its ``camera_info`` arrives (every stage
starts on that frame then) and its work is done when each stage's output for that stamp has
arrived. :class:`LoopFrames` turns those arrivals into ``frame_begin`` / ``frame_end`` calls;
the next frame is expected one camera period after this one began (the median of the last
arrival intervals). A frame whose outputs do not all come (a stage published nothing for it,
or died) ends ``timeout_s`` after it began, so the decoder is delayed, never stopped.

What this cannot see: the time between a stage's GPU work ending and its message arriving
(DDS, ~0.1-1 ms) is counted as frame time, which only makes the gate more careful. Pure
Python, no ROS: the node forwards the messages' stamps.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any


class LoopFrames:
    """Frame begin / end for ``gate`` from the arrival of camera_info and the stage outputs."""

    def __init__(self, gate: Any, outputs: Iterable[str], timeout_s: float,
                 history: int = 16, clock: Callable[[], float] = time.perf_counter) -> None:
        self.gate = gate
        self.outputs = frozenset(outputs)
        if not self.outputs:
            raise ValueError('at least one stage output marks the end of a frame')
        if timeout_s <= 0:
            raise ValueError('timeout_s must be > 0')
        self.timeout_s, self.clock = timeout_s, clock
        self._lock = threading.Lock()
        self._arrivals: deque[float] = deque(maxlen=history + 1)
        self._stamp: int | None = None      # the frame in flight (None: between frames)
        self._began = 0.0
        self._pending: set[str] = set()
        self.timeouts = 0

    def period_s(self) -> float | None:
        """Median interval between the last camera_info arrivals (None before two)."""
        a = list(self._arrivals)
        if len(a) < 2:
            return None
        return statistics.median(b - c for b, c in zip(a[1:], a[:-1], strict=False))

    def frame(self, stamp_ns: int) -> None:
        """A camera_info arrived: its frame begins (a frame still in flight is superseded)."""
        with self._lock:
            now = self.clock()
            self._arrivals.append(now)
            self._stamp, self._began, self._pending = stamp_ns, now, set(self.outputs)
            self.gate.frame_begin()

    def output(self, name: str, stamp_ns: int) -> None:
        """A stage's output for ``stamp_ns`` arrived; the last one ends the frame."""
        with self._lock:
            if stamp_ns != self._stamp or name not in self._pending:
                return
            self._pending.discard(name)
            if not self._pending:
                self._end()

    def poll(self) -> None:
        """End a frame whose outputs did not all come within ``timeout_s`` (call it often)."""
        with self._lock:
            if self._stamp is not None and self.clock() - self._began > self.timeout_s:
                self.timeouts += 1
                self._end()

    def _end(self) -> None:
        period = self.period_s()
        self._stamp = None
        self.gate.frame_end(self._began + period if period is not None else None)
