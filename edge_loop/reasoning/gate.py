# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Background GPU work only between a periodic control loop's frames.

On the H200 the decoder's kernels, launched freely beside the loop, stretched every GPU stage
of the loop 2.0-2.9x whatever the stream priority (docs/memory.md): the two share the SMs and
the memory bandwidth kernel by kernel, and a GPU cannot preempt a kernel for a frame. What can
be controlled is *when* the decoder launches. :class:`FrameGate` lets a piece of background
work (a decode step's chunk of layers, a fraction of a millisecond) start only when

- no frame is in flight (between the loop's :meth:`~FrameGate.frame_begin` and
  :meth:`~FrameGate.frame_end`), and
- it is expected to end, with ``guard_s`` to spare, before the next frame is due (the loop
  says when at :meth:`~FrameGate.frame_end`); the expected length is the longest of the
  last runs of that piece, measured here, its first run dropped when the second comes (the
  first pays one-time costs: kernels loaded, workspaces allocated; on an H100 a prompt's
  first layer chunk took 23 ms once and under 6 ms after). A negative ``guard_s`` lets a
  piece run that far into the next frame: a bounded overlap traded for the background
  work's throughput.

A loop that stops sending frames does not starve the work: once the expected frame is
``late_s`` overdue the gate treats the loop as idle. Neither does a piece longer than any
window: once it has waited ``max_wait_s`` it starts at the beginning of the next window (at
most ``window_start_s`` after a frame ended), the most room a frame period offers, and is
counted (``forced_runs``). Without this, one slow run recorded for a piece kept it, and the
work behind it, waiting for as long as the loop ran. The decision itself is the pure function
:func:`window_allows`; the gate adds the waiting and the bookkeeping. The loop's side is
called by the loop itself in one process (``bench/bench_memory.py --phases gated``), or, for a
decoder in a process of its own (the ``target_reasoner`` node), from the loop's messages as
that process sees them (:class:`edge_loop.reasoning.loop_frames.LoopFrames`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


def window_allows(now: float, in_frame: bool, next_frame_t: float | None, work_s: float,
                  guard_s: float, late_s: float, starved: bool = False,
                  since_frame_end_s: float | None = None, window_start_s: float = 2e-3
                  ) -> tuple[bool, float | None]:
    """(may start now, how long to wait before asking again; None: until a frame ends).

    ``next_frame_t`` is when the next frame is due (None: no frame seen yet, nothing to
    protect), ``work_s`` the expected length of the work. ``starved``: the work has waited
    its longest; it may then start within ``window_start_s`` after a frame ended
    (``since_frame_end_s`` ago), whatever its length.
    """
    if in_frame:
        return False, None
    if next_frame_t is None or now + work_s + guard_s <= next_frame_t:
        return True, 0.0
    if now > next_frame_t + late_s:   # the frame is overdue: the loop is idle or stalled
        return True, 0.0
    if starved and since_frame_end_s is not None and since_frame_end_s <= window_start_s:
        return True, 0.0
    return False, next_frame_t + late_s - now


@dataclass
class GateStats:
    """What the gate did: pieces run, time they waited, pieces a frame found in flight."""

    runs: int = 0
    waited_s: float = 0.0
    frames: int = 0
    overlapped_frames: int = 0     # frames that began while a piece was running
    idle_runs: int = 0             # pieces run because the expected frame was overdue
    forced_runs: int = 0           # pieces run at a window's start after max_wait_s
    run_s: dict = field(default_factory=dict)   # per kind: total seconds
    longest_s: dict = field(default_factory=dict)   # per kind: the longest run, first included


class FrameGate:
    """Schedules background work between a periodic loop's frames (see the module doc)."""

    def __init__(self, guard_s: float = 3e-4, late_s: float = 2e-3, history: int = 32,
                 clock: Callable[[], float] = time.perf_counter, max_wait_s: float = 0.5,
                 window_start_s: float = 2e-3) -> None:
        # guard_s < 0 lets a piece run up to -guard_s into the next frame (a bounded
        # overlap traded for throughput); late_s >= 0.
        if late_s < 0 or history < 1 or max_wait_s <= 0 or window_start_s < 0:
            raise ValueError('late_s and window_start_s must be >= 0, max_wait_s > 0 and '
                             'history >= 1')
        self.guard_s, self.late_s, self.clock = guard_s, late_s, clock
        self.max_wait_s, self.window_start_s = max_wait_s, window_start_s
        self._frame_end_t: float | None = None
        self._cold: set = set()     # kinds run once: that run is dropped when the second comes
        self._cv = threading.Condition()
        self._in_frame = False
        self._running = False
        self._next_frame_t: float | None = None
        self._history = history
        self._lengths: dict[object, deque] = {}
        self.stats = GateStats()

    # --- the loop's side ----------------------------------------------------------------------
    def frame_begin(self) -> None:
        """A frame's work starts now: no new background piece until :meth:`frame_end`."""
        with self._cv:
            self._in_frame = True
            self.stats.frames += 1
            if self._running:
                self.stats.overlapped_frames += 1

    def frame_end(self, next_frame_t: float | None) -> None:
        """The frame's device work is done; the next one is due at ``next_frame_t``."""
        with self._cv:
            self._in_frame = False
            self._next_frame_t = next_frame_t
            self._frame_end_t = self.clock()
            self._cv.notify_all()

    # --- the background side ------------------------------------------------------------------
    def expected_s(self, kind: object) -> float:
        """The longest of the last runs of ``kind`` (0 before the first; see the module doc)."""
        runs = self._lengths.get(kind)
        return max(runs) if runs else 0.0

    def run(self, fn: Callable[[], object], kind: object = None) -> object:
        """Wait for a window that fits ``kind``'s expected length, then run ``fn``.

        ``fn`` must return only once its device work is done (it is what gets timed).
        """
        t_wait = self.clock()
        with self._cv:
            while True:
                now = self.clock()
                starved = now - t_wait >= self.max_wait_s
                since_end = None if self._frame_end_t is None else now - self._frame_end_t
                work_s = self.expected_s(kind)
                ok, wait = window_allows(now, self._in_frame, self._next_frame_t, work_s,
                                         self.guard_s, self.late_s, starved, since_end,
                                         self.window_start_s)
                if ok:
                    break
                if starved:     # wake at the next frame's end, the start of a window
                    wait = None
                self._cv.wait(timeout=wait if wait is not None else 0.05)
            if self._next_frame_t is not None and now > self._next_frame_t + self.late_s:
                self.stats.idle_runs += 1
            elif self._next_frame_t is not None and now + work_s + self.guard_s > \
                    self._next_frame_t:
                self.stats.forced_runs += 1
            self._running = True
        t0 = self.clock()
        try:
            return fn()
        finally:
            t1 = self.clock()
            with self._cv:
                self._running = False
                runs = self._lengths.setdefault(kind, deque(maxlen=self._history))
                if kind in self._cold:      # the second run: drop the first (one-time costs)
                    runs.clear()
                    self._cold.discard(kind)
                elif not runs:
                    self._cold.add(kind)
                runs.append(t1 - t0)
                st = self.stats
                st.runs += 1
                st.waited_s += t0 - t_wait
                st.run_s[kind] = st.run_s.get(kind, 0.0) + (t1 - t0)
                st.longest_s[kind] = max(st.longest_s.get(kind, 0.0), t1 - t0)
