# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline bookkeeping parts of the pick loop: frames, latency windows, misses, health state.

Pure logic on integer nanoseconds (no clock, no rclpy): the deadline monitor node feeds it
receive times from its clock, so the same code runs on real and simulated time and the unit
tests drive it with made-up times.

- :class:`LatencyWindow`: the last ``size`` samples, p50/p99.
- :class:`FrameTracker`: one open frame per camera stamp with its absolute deadline
  (stamp + end-to-end budget); stage completions and the command close it, :meth:`expire`
  returns the frames whose command did not come by the deadline.
- :class:`StallWatch`: an input that must keep arriving (camera, gripper joint states).
- :class:`MonotonicMap`: system-clock receive stamps onto the monotonic clock, which a step
  of the system clock does not move (silence is elapsed time), and the steps themselves.
- :func:`next_frame_check_ns`: when to look for a frame whose command has not come.
- :class:`BatchRate`: an input's sample period over batches of samples.
- :class:`StampOrder`: frame outcomes released in camera-stamp order.
- :class:`Health`: OK / WARN / ERROR from consecutive misses and healthy periods.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import Enum

from edge_loop.stats import percentile_of_sorted

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class LatencyWindow:
    """The last ``size`` samples (ns) with percentiles in milliseconds."""

    def __init__(self, size: int = 300) -> None:
        if size < 1:
            raise ValueError('window size must be >= 1')
        self._samples: deque[int] = deque(maxlen=size)
        self.total = 0
        self._sorted: list[int] = []
        self._sorted_at = 0          # self.total when _sorted was made

    def add(self, value_ns: int) -> None:
        """Record one sample."""
        self._samples.append(int(value_ns))
        self.total += 1

    def __len__(self) -> int:
        return len(self._samples)

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th percentile (0..100) in ms; NaN when empty.

        numpy's definition; the window is sorted once per batch of new samples, not once per
        percentile (the monitor reports ~20 of them a second).
        """
        if not self._samples:
            return float('nan')
        if self._sorted_at != self.total:
            self._sorted = sorted(self._samples)
            self._sorted_at = self.total
        return percentile_of_sorted(self._sorted, q) / NS_PER_MS

    def max_ms(self) -> float:
        """Largest sample in the window (ms); NaN when empty."""
        return max(self._samples) / NS_PER_MS if self._samples else float('nan')

    def values_ms(self) -> list[float]:
        """All samples of the window in ms (oldest first)."""
        return [v / NS_PER_MS for v in self._samples]


@dataclass
class Frame:
    """One camera frame in flight: its stamp, its deadline, what is done so far."""

    stamp_ns: int
    deadline_ns: int
    stages: dict[str, int] = field(default_factory=dict)  # stage -> receive time (ns)
    command_ns: int | None = None


def frame_report(frame: Frame, stages: list[str] | tuple[str, ...]) -> str:
    """What a missed frame got before its deadline: names the stage that held it up.

    E.g. ``object_locator 21.0 ms, grasp_planner none, command none``.
    """
    parts = [f'{stage} {(frame.stages[stage] - frame.stamp_ns) / NS_PER_MS:.1f} ms'
             if stage in frame.stages else f'{stage} none' for stage in stages]
    parts.append('command none' if frame.command_ns is None else
                 f'command {(frame.command_ns - frame.stamp_ns) / NS_PER_MS:.1f} ms')
    return ', '.join(parts)


class CommandResult(Enum):
    """What a command (or other frame-closing output) meant for its frame."""

    ON_TIME = 'on_time'      # closed an open frame before its deadline
    LATE = 'late'            # for a frame already declared missed
    EARLY = 'early'          # arrived before the frame's camera stamp did (kept, matched later)
    DUPLICATE = 'duplicate'  # a second command for a closed frame
    UNKNOWN = 'unknown'      # for a stamp older than anything tracked (e.g. after a restart)


class FrameTracker:
    """Open frames keyed by camera stamp, each with an absolute deadline."""

    def __init__(self, budget_ns: int, max_open: int = 256, memory: int = 512) -> None:
        if budget_ns <= 0:
            raise ValueError('budget must be > 0')
        self.budget_ns = int(budget_ns)
        self.max_open = max_open
        self._open: OrderedDict[int, Frame] = OrderedDict()   # stamp order = deadline order
        self._closed: OrderedDict[int, str] = OrderedDict()   # stamp -> 'done' | 'missed'
        self._early: OrderedDict[int, tuple[int, dict[str, int]]] = OrderedDict()
        self._memory = memory
        self.last_stamp_ns: int | None = None
        self.opened = 0
        self.dropped = 0          # frames pushed out by max_open (counted as misses by caller)

    def reset(self) -> None:
        """Forget every frame (time jumped back, monitor re-activated)."""
        self._open.clear()
        self._closed.clear()
        self._early.clear()
        self.last_stamp_ns = None

    def _remember(self, stamp_ns: int, outcome: str) -> None:
        self._closed[stamp_ns] = outcome
        while len(self._closed) > self._memory:
            self._closed.popitem(last=False)

    def open(self, stamp_ns: int) -> Frame | None:
        """Open the frame of a new camera stamp; None for a repeated or older stamp.

        A stamp older than the last one means time jumped back (bag restart, sim reset):
        everything is forgotten and tracking restarts from this frame.
        """
        if self.last_stamp_ns is not None:
            if stamp_ns == self.last_stamp_ns or stamp_ns in self._closed:
                return None
            if stamp_ns < self.last_stamp_ns:
                self.reset()
        frame = Frame(stamp_ns, stamp_ns + self.budget_ns)
        self.last_stamp_ns = stamp_ns
        self.opened += 1
        early = self._early.pop(stamp_ns, None)
        if early is not None:
            command_ns, stages = early
            frame.stages.update(stages)
            if command_ns >= 0:
                frame.command_ns = command_ns
                self._remember(stamp_ns, 'done' if command_ns <= frame.deadline_ns
                               else 'missed')
                return frame
        self._open[stamp_ns] = frame
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)
            self.dropped += 1
        return frame

    def stage_done(self, stage: str, stamp_ns: int, now_ns: int) -> None:
        """Note that ``stage`` published its output for the frame ``stamp_ns``."""
        frame = self._open.get(stamp_ns)
        if frame is not None:
            frame.stages.setdefault(stage, now_ns)
        elif self._is_future(stamp_ns):
            self._early_entry(stamp_ns)[1].setdefault(stage, now_ns)

    def command(self, stamp_ns: int, now_ns: int) -> tuple[CommandResult, Frame | None]:
        """The command for ``stamp_ns`` went out at ``now_ns``."""
        frame = self._open.pop(stamp_ns, None)
        if frame is not None:
            frame.command_ns = now_ns
            if now_ns <= frame.deadline_ns:
                self._remember(stamp_ns, 'done')
                return CommandResult.ON_TIME, frame
            # The deadline passed but expire() has not run yet: still a miss.
            self._open[stamp_ns] = frame
            self._open.move_to_end(stamp_ns, last=False)
            return CommandResult.LATE, frame
        outcome = self._closed.get(stamp_ns)
        if outcome == 'missed':
            self._remember(stamp_ns, 'missed-late')
            return CommandResult.LATE, None
        if outcome is not None:
            return CommandResult.DUPLICATE, None
        if self._is_future(stamp_ns):
            entry = self._early_entry(stamp_ns)
            self._early[stamp_ns] = (now_ns, entry[1])
            return CommandResult.EARLY, None
        return CommandResult.UNKNOWN, None

    def _is_future(self, stamp_ns: int) -> bool:
        return self.last_stamp_ns is None or stamp_ns > self.last_stamp_ns

    def _early_entry(self, stamp_ns: int) -> tuple[int, dict[str, int]]:
        entry = self._early.get(stamp_ns)
        if entry is None:
            entry = (-1, {})
            self._early[stamp_ns] = entry
            while len(self._early) > self._memory:
                self._early.popitem(last=False)
        return entry

    def expire(self, now_ns: int) -> list[Frame]:
        """Remove and return the open frames whose deadline is <= ``now_ns``."""
        missed = []
        while self._open:
            stamp, frame = next(iter(self._open.items()))
            if frame.deadline_ns > now_ns:
                break
            del self._open[stamp]
            self._remember(stamp, 'missed')
            missed.append(frame)
        return missed

    def next_deadline(self) -> int | None:
        """The earliest open deadline (ns), or None."""
        for frame in self._open.values():
            return frame.deadline_ns
        return None

    @property
    def open_count(self) -> int:
        """Number of frames waiting for their command."""
        return len(self._open)

    def oldest_open_stamp(self) -> int | None:
        """Stamp of the oldest frame still waiting for its command, or None."""
        return min(self._open, default=None)


def next_frame_check_ns(last_stamp_ns: int, period_ns: int, interval_ns: int | None,
                        budget_ns: int) -> int:
    """When to look for the next frame's camera_info if its command has not come.

    A quarter of a camera interval before that frame's deadline, were it stamped one interval
    (the shorter of the control period and the last interval seen) after ``last_stamp_ns``:
    early enough to take its camera_info and still wake at the deadline itself, for a camera
    up to a quarter interval early.
    """
    interval = min(period_ns, interval_ns or period_ns)
    return last_stamp_ns + interval + budget_ns - interval // 4


class BatchRate:
    """An input's sample period, judged over batches of ``batch`` samples.

    Samples are counted (by the publisher's sequence numbers, so ones a filter held back
    count too) against the time since the batch began: the ratio of sums, which quantised
    receive times (simulated time) and bursts of samples do not bias as a running mean of
    per-poll ratios is. A batch during which the input stalled (a pause) gives no answer.
    """

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self._t0: int | None = None
        self._count = 0
        self._stalls = 0

    def add(self, now_ns: int, count: int, stalls: int) -> float | None:
        """``count`` samples by ``now_ns``; the period (ns) when a batch completes."""
        if self._t0 is None:
            self._t0, self._stalls = now_ns, stalls
            return None
        self._count += count
        if self._count < self.batch or now_ns <= self._t0:
            return None
        period = (now_ns - self._t0) / self._count
        paused = stalls != self._stalls
        self._t0, self._count, self._stalls = now_ns, 0, stalls
        return None if paused else period


class StallWatch:
    """An input that must keep coming: stalled after ``periods`` of its period without one.

    The period is fixed (camera: the control period) or estimated from the arrivals (gripper
    joint states: "at its own rate"), with ``min_timeout_ns`` as a floor against jitter.
    """

    def __init__(self, periods: int, period_ns: int | None = None,
                 min_timeout_ns: int = 0, repeat_ns: int | None = None,
                 forward_only: bool = False) -> None:
        self.periods = periods
        # On the monotonic clock an arrival never moves the watch back: one stamped before a
        # system-clock step and mapped after it (see MonotonicMap) would fake a silence.
        # Simulated time may jump back (a reset), and the watch must follow it.
        self.forward_only = forward_only
        self.fixed_period_ns = period_ns
        self.min_timeout_ns = min_timeout_ns
        # a stall that goes on is one more miss per repeat_ns (the control period), not per
        # period of a 200 Hz input
        self.repeat_ns = repeat_ns
        self.est_period_ns: float | None = None
        self.last_ns: int | None = None
        self.stall_count = 0           # stall misses declared since the last arrival
        self.stalls = 0                # total stall misses

    def reset(self) -> None:
        """Forget the input (not expected until it arrives again)."""
        self.last_ns = None
        self.stall_count = 0

    def seen(self, now_ns: int, count: int = 1) -> None:
        """``count`` messages arrived since the last call (now_ns = time of the latest)."""
        if count <= 0:
            return
        if self.last_ns is not None and now_ns > self.last_ns and self.fixed_period_ns is None:
            sample = (now_ns - self.last_ns) / count
            self.est_period_ns = (sample if self.est_period_ns is None
                                  else 0.9 * self.est_period_ns + 0.1 * sample)
        if not (self.forward_only and self.last_ns is not None and now_ns < self.last_ns):
            self.last_ns = now_ns
        self.stall_count = 0

    def period_ns(self) -> float | None:
        """The period the timeout is based on."""
        return self.fixed_period_ns if self.fixed_period_ns is not None else self.est_period_ns

    def timeout_ns(self) -> int | None:
        """Silence that counts as a stall, or None while unknown."""
        period = self.period_ns()
        if period is None:
            return None
        return max(int(self.periods * period), self.min_timeout_ns)

    def next_check_ns(self) -> int | None:
        """When the next stall miss would be declared (absolute ns), or None."""
        timeout = self.timeout_ns()
        if self.last_ns is None or timeout is None:
            return None
        # After the first stall miss, one more per repeat_ns (default: its period) of silence.
        step = int(self.repeat_ns or self.period_ns() or timeout)
        return self.last_ns + timeout + self.stall_count * max(step, 1)

    def check(self, now_ns: int) -> bool:
        """True once per new stall period (a miss to report)."""
        due = self.next_check_ns()
        if due is None or now_ns < due:
            return False
        self.stall_count += 1
        self.stalls += 1
        return True


class MonotonicMap:
    """System-clock times onto the monotonic clock; notices steps of the system clock.

    Frame deadlines are sensor stamps plus the budget, so they live on the system clock, but
    a stall is elapsed time. Measured on the system clock, a step of it (NTP or chrony at
    boot on a board without a real-time clock, a VM restored from a snapshot) looked like a
    silence as long as the step (a CI run once reported a stall found 15 s after it was due,
    which is what a step does). DDS gives receive stamps on the system clock only, so each is
    mapped with the offset between the clocks at the last :meth:`update`. One received before a
    step and mapped after it is off by the step: mapped times are capped at the last update
    (nothing arrives in the future), and a watch with ``forward_only`` never moves back.
    """

    def __init__(self, step_threshold_ns: int) -> None:
        # A slewing NTP changes the offset by at most 0.5 ms/s: a change above the threshold
        # between two updates is a step.
        self.step_threshold_ns = step_threshold_ns
        self.offset_ns: int | None = None     # system - monotonic at the last update
        self.mono_ns = 0                      # monotonic time of the last update
        self.steps = 0

    def update(self, wall_ns: int, mono_ns: int) -> int:
        """Read both clocks (in that order, back to back); the step since the last call, or 0."""
        offset = wall_ns - mono_ns
        step = 0 if self.offset_ns is None else offset - self.offset_ns
        self.offset_ns, self.mono_ns = offset, mono_ns
        if abs(step) < self.step_threshold_ns:
            return 0
        self.steps += 1
        return step

    def to_mono(self, wall_ns: int) -> int:
        """A system-clock time (a DDS receive stamp) on the monotonic clock."""
        if self.offset_ns is None:
            raise RuntimeError('MonotonicMap.update() was never called')
        return min(wall_ns - self.offset_ns, self.mono_ns)

    def to_wall(self, mono_ns: int) -> int:
        """A monotonic time (a stall watch's due time) on the system clock."""
        if self.offset_ns is None:
            raise RuntimeError('MonotonicMap.update() was never called')
        return mono_ns + self.offset_ns


class StampOrder:
    """Frame outcomes (on time, missed) released in camera-stamp order.

    With a budget longer than the control period, frame k + 1's command can be on time before
    frame k's deadline has passed. Counted as they happen, that on-time frame would end a run
    of missed frames k - 1, k, ... in the middle, so N missed frames in a row would not be N
    consecutive misses, and whether they were would depend on how late the deadline thread
    woke (it takes a batch of messages in receive order, then declares what fell due). An
    outcome is held here until no older frame is still open: misses then count per frame, in
    frame order, whatever the budget and the wake-up delay.
    """

    def __init__(self) -> None:
        self._held: list[tuple[int, int, object]] = []   # heap of (stamp, seq, outcome)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._held)

    def add(self, stamp_ns: int, outcome: object) -> None:
        """Hold ``outcome`` of frame ``stamp_ns`` until :meth:`release` lets it go."""
        heapq.heappush(self._held, (stamp_ns, next(self._seq), outcome))

    def release(self, oldest_open_ns: int | None) -> list[tuple[int, object]]:
        """Outcomes of frames older than every open frame (all of them if none is open)."""
        out = []
        while self._held and (oldest_open_ns is None or self._held[0][0] < oldest_open_ns):
            stamp, _, outcome = heapq.heappop(self._held)
            out.append((stamp, outcome))
        return out

    def clear(self) -> None:
        """Forget what is held (time jumped back, monitor re-activated)."""
        self._held.clear()


class ReceiveLatency:
    """Latency of a sensor-rate stage on one clock: output receive time - input receive time.

    A stage on the gripper's clock (grasp_state) stamps its output with its input's stamp. Its
    latency cannot be "receive time - stamp": the stamp is on the gripper's clock (simulated
    time at 240 Hz, or a driver's clock) and the monitor's time on another (the last /clock
    tick, 60 Hz, or this host's system clock), so that difference was negative by up to a
    /clock period in simulation. Here both ends are receive times of this process (the DDS
    receive stamps, one system clock), paired by the stamp the output shares with its input:
    the stage's processing plus one delivery.
    """

    def __init__(self, memory: int = 64) -> None:
        self._inputs: dict[int, int] = {}
        self._outputs: dict[int, int] = {}
        self._memory = memory

    def _keep(self, table: dict[int, int], stamp_ns: int, received_ns: int) -> None:
        table[stamp_ns] = received_ns
        while len(table) > self._memory:
            del table[next(iter(table))]

    def input(self, stamp_ns: int, received_ns: int) -> int | None:
        """An input sample arrived; the latency when its output was already seen."""
        out = self._outputs.pop(stamp_ns, None)
        if out is not None:
            return out - received_ns
        self._keep(self._inputs, stamp_ns, received_ns)
        return None

    def output(self, stamp_ns: int, received_ns: int) -> int | None:
        """An output arrived; its latency when the input of the same stamp was seen."""
        start = self._inputs.pop(stamp_ns, None)
        if start is not None:
            return received_ns - start
        self._keep(self._outputs, stamp_ns, received_ns)
        return None

    def clear(self) -> None:
        """Forget every sample."""
        self._inputs.clear()
        self._outputs.clear()


class Level(Enum):
    """Loop health as reported on /diagnostics."""

    OK = 0
    WARN = 1
    ERROR = 2


class Health:
    """OK / WARN / ERROR from misses.

    A miss makes an OK loop WARN; ``misses_to_error`` consecutive misses make it ERROR (and
    ask for the controller to be deactivated once); ``healthy_to_ok`` consecutive healthy
    periods bring WARN or ERROR back to OK. Going back to OK never re-activates anything.
    """

    def __init__(self, misses_to_error: int, healthy_to_ok: int) -> None:
        if misses_to_error < 1 or healthy_to_ok < 1:
            raise ValueError('misses_to_error and healthy_to_ok must be >= 1')
        self.misses_to_error = misses_to_error
        self.healthy_to_ok = healthy_to_ok
        self.level = Level.OK
        self.consecutive = 0
        self.healthy_run = 0
        self.misses = 0
        self.healthy = 0

    def miss(self) -> bool:
        """Record a miss; True when this miss turned the loop to ERROR."""
        self.misses += 1
        self.consecutive += 1
        self.healthy_run = 0
        if self.consecutive >= self.misses_to_error and self.level is not Level.ERROR:
            self.level = Level.ERROR
            return True
        if self.level is Level.OK:
            self.level = Level.WARN
        return False

    def ok(self) -> bool:
        """Record a healthy period; True when this one brought the loop back to OK."""
        self.healthy += 1
        self.consecutive = 0
        self.healthy_run += 1
        if self.level is not Level.OK and self.healthy_run >= self.healthy_to_ok:
            self.level = Level.OK
            return True
        return False


def header_stamp_ns(cdr: bytes | memoryview) -> int:
    """``header.stamp`` (ns) of a serialized message whose first field is a std_msgs/Header.

    Reads 8 bytes after the 4-byte CDR encapsulation instead of deserializing the message
    (an OccupancyGrid or DiagnosticArray costs far more to convert than its stamp).
    """
    if len(cdr) < 12:
        raise ValueError('serialized message too short for a header')
    order = 'little' if cdr[1] & 1 else 'big'
    sec = int.from_bytes(cdr[4:8], order, signed=True)
    nanosec = int.from_bytes(cdr[8:12], order, signed=False)
    return sec * NS_PER_S + nanosec
