# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Hybrid polling for a periodic frame source: sleep until just before the next frame, then poll.

Waking a blocked reader thread costs ~100-400 us on a virtual CPU that halted in between (see
``docs/transport.md``). A camera is periodic, so a reader can instead sleep until shortly
before the next frame is due and poll for the sample from there: the frame is then seen
within a few microseconds of its send, for a polling window of CPU per frame. This is the
Linux block layer's hybrid polling idea (sleep for part of the expected completion time, then
poll) applied to frames. Pure arithmetic here; :mod:`edge_loop.transport.shm` does the waiting.
"""

from __future__ import annotations

from collections import deque

MIN_PERIOD_NS = 1_000_000          # above 1 kHz polling is no cheaper than a busy thread
MAX_PERIOD_NS = 1_000_000_000      # below 1 Hz a wake-up's cost does not matter
MIN_INTERVALS = 3                  # intervals seen before predicting
MAX_MISSES = 3                     # polling windows without a frame before going back to waiting


class ArrivalPredictor:
    """Predicts when a periodic producer sends its next frame, from the send times seen.

    The period is the median of the last ``history`` intervals between consecutive send
    times, so a dropped frame (one interval of two periods) or a late one does not move it.
    Send times are the producer's CLOCK_MONOTONIC stamps, not the reader's wake-ups, which
    come late by the very wake-up cost polling avoids.
    """

    def __init__(self, history: int = 8) -> None:
        if history < MIN_INTERVALS:
            raise ValueError(f'history must be >= {MIN_INTERVALS}, got {history}')
        self._sends: deque[int] = deque(maxlen=history + 1)
        self._misses = 0

    def reset(self) -> None:
        self._sends.clear()
        self._misses = 0

    def miss(self) -> None:
        """A polling window passed without a frame; after a few the source has stopped."""
        self._misses += 1
        if self._misses >= MAX_MISSES:
            self.reset()   # plain blocking waits until the frames are periodic again

    def observe(self, send_ns: int) -> None:
        """Record the send time of a received frame (an earlier time restarts the history)."""
        if self._sends and send_ns <= self._sends[-1]:
            if send_ns == self._sends[-1]:
                return
            self._sends.clear()   # a restarted producer or a clock we cannot follow
        self._sends.append(int(send_ns))
        self._misses = 0

    def period_ns(self) -> int | None:
        """Median interval between sends; ``None`` until it is known and plausible."""
        if len(self._sends) <= MIN_INTERVALS:
            return None
        sends = list(self._sends)
        intervals = sorted(b - a for a, b in zip(sends, sends[1:]))
        period = intervals[len(intervals) // 2]
        if not MIN_PERIOD_NS <= period <= MAX_PERIOD_NS:
            return None
        return period

    def next_send_ns(self, now_ns: int, window_ns: int) -> int | None:
        """The first predicted send time not already more than ``window_ns`` in the past."""
        period = self.period_ns()
        if period is None:
            return None
        last = self._sends[-1]
        if now_ns - window_ns <= last + period:
            return last + period
        # Frames were skipped (producer paused or dropped frames): stay on its phase.
        missed = (now_ns - window_ns - last) // period + 1
        return last + missed * period
