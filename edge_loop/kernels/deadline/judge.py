# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The loop judge: from the stamps the deadline monitor sees to its verdicts.

Pure logic on integer nanoseconds (no rclpy, no clock): the node feeds it what arrived and
when (camera frames, stage outputs, commands, the time now) and carries out what it returns,
in order:

- :class:`SafeStop`: a frame missed its deadline, or an input stalled: stop now;
- :class:`Note`: a line for the log (level and text);
- :class:`Deactivate`: misses in a row reached the limit: take the controller down.

The parts it uses are in :mod:`edge_loop.kernels.deadline.parts` (:class:`FrameTracker`,
:class:`Health`, :class:`StampOrder`, ...). Stall watches stay with the node (they need its
clocks); it reports a stall with :meth:`LoopJudge.stall`. Tests and tools drive the judge
without ROS (``test/kernels/test_deadline.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge_loop.kernels.deadline.parts import (
    NS_PER_S,
    CommandResult,
    Frame,
    FrameTracker,
    Health,
    LatencyWindow,
    ReceiveLatency,
    StampOrder,
    frame_report,
)


@dataclass(frozen=True)
class SafeStop:
    """Stop now: ``stamp_ns`` is the missed frame's camera stamp (or the time of a stall)."""

    stamp_ns: int
    reason: str          # deadline_miss | camera_stall | gripper_stall
    deadline_ns: int
    detected_ns: int


@dataclass(frozen=True)
class Note:
    """A log line: ``level`` is info, warn, error or miss (a warning the node throttles)."""

    level: str
    text: str


@dataclass(frozen=True)
class Deactivate:
    """Take the controller down (``consecutive`` misses in a row)."""

    consecutive: int


@dataclass
class StageStats:
    """Latency of one stage's output (see :meth:`LoopJudge.stage`)."""

    budget_ns: int
    topic: str
    latency: LatencyWindow
    over_budget: int = 0
    reported_over: int = 0
    last_ns: int | None = None


@dataclass(frozen=True)
class JudgeConfig:
    """What the judge needs of the monitor's parameters (times in ns)."""

    budget_ns: int
    period_ns: int
    stages: tuple[tuple[str, str, int], ...]      # (name, topic, budget ns)
    command_stage: str | None = None              # the stage whose output closes a frame
    sampled_stages: tuple[str, ...] = ()          # on the sensor clock, never in a frame
    misses_to_deactivate: int = 3
    healthy_periods_to_ok: int = 15
    arm_after_on_time: int = 15
    startup_grace_ns: int = 5 * NS_PER_S
    window: int = 300
    controller_node: str = 'pick_controller'


@dataclass
class LoopJudge:
    """Frames, misses and health of the loop; see the module docstring."""

    cfg: JudgeConfig
    start_ns: int
    tracker: FrameTracker = field(init=False)
    health: Health = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.cfg
        self.tracker = FrameTracker(cfg.budget_ns)
        self.health = Health(cfg.misses_to_deactivate, cfg.healthy_periods_to_ok)
        self.camera_interval_ns: int | None = None
        self._in_order = StampOrder()   # frame outcomes into health in frame order
        self.stages = {name: StageStats(budget, topic, LatencyWindow(cfg.window))
                       for name, topic, budget in cfg.stages}
        self.e2e = LatencyWindow(cfg.window)
        self.detect = LatencyWindow(max(cfg.window, 1000))
        # sampled stages: joint-states receive -> output receive, one clock
        self.sampled_latency = ReceiveLatency()
        self.frame_stages: set[str] = set()   # stages seen answering camera frames
        self.controller_enabled = True
        self.deactivation = 'not needed'
        self.armed = False
        self.on_time_streak = 0
        self.grace_end_ns = self.start_ns + self.cfg.startup_grace_ns
        self.late_commands = 0
        self.unarmed_expired = 0
        self.reasons: dict[str, int] = {}
        self.frames_ok = 0

    # --- inputs ---------------------------------------------------------------------------
    def camera(self, stamp: int, now: int) -> list:
        """A camera frame (its camera_info) arrived at ``now``."""
        last = self.tracker.last_stamp_ns
        if last is not None and stamp < last:
            self._in_order.clear()   # time jumped back: the tracker forgets its frames too
        if last is not None and 0 < stamp - last < 2 * self.cfg.period_ns:
            self.camera_interval_ns = stamp - last
        frame = self.tracker.open(stamp)
        if frame is None or frame.command_ns is None:
            return []
        # Its command came before its camera_info did (different topics).
        out: list = []
        if frame.command_ns <= frame.deadline_ns:
            self._frame_on_time(frame.stamp_ns, frame.command_ns, out)
        else:
            self._miss(frame.stamp_ns, 'deadline_miss', frame.deadline_ns, now,
                       self.frame_detail(frame), out)
        return out

    def stage(self, stage: str, stamp: int, now: int, received: int | None = None) -> None:
        """Stage ``stage``'s output for source stamp ``stamp`` arrived at ``now``.

        Its latency is ``now - stamp`` (cumulative from the sensor). A sampled stage (on the
        gripper's clock) is timed from its input instead (:meth:`sampled_input`, ``received``
        on one receive clock): now - stamp mixed two clocks and went negative.
        """
        stats = self.stages[stage]
        stats.last_ns = now
        if stage == self.cfg.command_stage:
            return   # its own time is measured when the command closes the frame
        if stage in self.cfg.sampled_stages:
            # It is no part of any frame either, even when its sensor stamp equals a camera
            # stamp (in simulation every 16th does): else a frame would wait for it, and with
            # the controller off no frame would be healthy.
            if received is not None:
                self._sampled(self.sampled_latency.output(stamp, received))
            return
        latency = now - stamp
        stats.latency.add(latency)
        if latency > stats.budget_ns:
            stats.over_budget += 1
        if self.tracker.last_stamp_ns is not None and stamp >= (
                self.tracker.last_stamp_ns - 4 * self.cfg.budget_ns):
            # It answers camera frames, on time or not: with the controller off, a frame is
            # healthy only when every such stage met its deadline. (Learning this from on-time
            # frames only left a stage that was late from the start out of that judgement.)
            self.frame_stages.add(stage)
            self.tracker.stage_done(stage, stamp, now)

    def sampled_input(self, stamp: int, received: int) -> None:
        """A sampled stage's input (a joint-states sample) was received at ``received``."""
        self._sampled(self.sampled_latency.input(stamp, received))

    def _sampled(self, latency: int | None) -> None:
        if latency is None:
            return
        for stage in self.cfg.sampled_stages:
            stats = self.stages.get(stage)
            if stats is not None:
                stats.latency.add(latency)
                if latency > stats.budget_ns:
                    stats.over_budget += 1

    def command(self, stamp: int, now: int) -> list:
        """The command for frame ``stamp`` arrived at ``now``."""
        result, frame = self.tracker.command(stamp, now)
        out: list = []
        if result is CommandResult.ON_TIME:
            self._frame_on_time(stamp, now, out, frame)
        elif result is CommandResult.LATE:
            self.late_commands += 1
        return out

    def expire(self, now: int) -> list:
        """Declare every frame miss that is due at ``now``."""
        out: list = []
        enforcing = self.armed or now >= self.grace_end_ns
        if enforcing and not self.armed:
            self.armed = True
            out.append(Note('warn', 'no on-time command within startup_grace_s: enforcing'))
        for frame in self.tracker.expire(now):
            if not enforcing:
                self.unarmed_expired += 1
                self.on_time_streak = 0   # the warm-up streak must be consecutive
            elif not self.controller_enabled and self._pipeline_ok(frame):
                self._frame_outcome(frame.stamp_ns, None, out)
            else:
                self._miss(frame.stamp_ns, 'deadline_miss', frame.deadline_ns, now,
                           self.frame_detail(frame), out)
        self._release_outcomes(out)   # held behind frames that expired unenforced
        return out

    def stall(self, reason: str, now: int, due: int, detected: int) -> list:
        """An input stalled (``due``: when it became one, ``detected``: when seen)."""
        out: list = []
        self._miss(now, reason, due, detected, '', out)
        return out

    # --- the controller -------------------------------------------------------------------
    def reactivated(self, now: int) -> None:
        """The controller is back: re-arm as at start (it needs a moment to answer frames)."""
        self.controller_enabled = True
        self.deactivation = 'not needed'
        self.armed = False
        self.on_time_streak = 0
        self.grace_end_ns = now + self.cfg.startup_grace_ns

    # --- verdicts -------------------------------------------------------------------------
    def _frame_on_time(self, stamp: int, now: int, out: list, frame: Frame | None = None
                       ) -> None:
        if not self.armed:
            self.on_time_streak += 1
            self.armed = self.on_time_streak >= self.cfg.arm_after_on_time
        self.frames_ok += 1
        self.e2e.add(now - stamp)
        command = self.cfg.command_stage
        if command is not None:
            upstream = [t for s, t in (frame.stages.items() if frame else ()) if s != command]
            own = now - max(upstream) if upstream else now - stamp
            stats = self.stages[command]
            stats.latency.add(own)
            if own > stats.budget_ns:
                stats.over_budget += 1
        self._frame_outcome(stamp, None, out)

    def _frame_outcome(self, stamp: int, miss: tuple[str, str] | None, out: list) -> None:
        """Count frame ``stamp`` as healthy (``miss`` None) or missed, in frame order.

        The safe stop of a miss is out already; only the consecutive count waits until every
        older frame has its outcome (see :class:`StampOrder`).
        """
        self._in_order.add(stamp, miss)
        self._release_outcomes(out)

    def _release_outcomes(self, out: list) -> None:
        for _, miss in self._in_order.release(self.tracker.oldest_open_stamp()):
            if miss is None:
                if self.health.ok():
                    note = ('' if self.controller_enabled else
                            f"; '{self.cfg.controller_node}' stays inactive until ~/reactivate")
                    out.append(Note('info', f'loop healthy for {self.health.healthy_to_ok} '
                                            f'periods: OK{note}'))
            else:
                self._count_miss(miss, out)

    def _pipeline_ok(self, frame: Frame) -> bool:
        """With the controller off, a frame is healthy when every stage met the deadline."""
        return all(frame.stages.get(s, frame.deadline_ns + 1) <= frame.deadline_ns
                   for s in self.frame_stages)

    def frame_detail(self, frame: Frame) -> str:
        """What the frame got before its deadline (the stages that complete camera frames)."""
        stages = [s for s in self.stages if s in self.frame_stages] or [
            s for s in self.stages
            if s != self.cfg.command_stage and s not in self.cfg.sampled_stages]
        return frame_report(frame, stages)

    def _miss(self, stamp: int, reason: str, deadline: int, detected: int, detail: str,
              out: list) -> None:
        """The safe stop first, then the bookkeeping."""
        out.append(SafeStop(stamp, reason, deadline, detected))
        self.detect.add(max(0, detected - deadline))
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        what = (f'{reason}: frame {stamp / NS_PER_S:.3f}', detail)
        if reason == 'deadline_miss':
            self._frame_outcome(stamp, what, out)
        else:
            self._count_miss(what, out)   # a stall has no frame: counted when declared

    def _count_miss(self, what: tuple[str, str], out: list) -> None:
        """Count a miss; ``what``: (reason and frame, detail) for the log line."""
        to_error = self.health.miss()
        head, detail = what
        out.append(Note('miss', f'{head} ({detail + "; " if detail else ""}consecutive misses '
                                f'{self.health.consecutive}); safe stop published'))
        if to_error and self.controller_enabled:
            self.controller_enabled = False
            self.deactivation = 'requested'
            out.append(Note('error', f'{self.health.consecutive} consecutive misses: '
                                     f"deactivating '{self.cfg.controller_node}' (ERROR)"))
            out.append(Deactivate(self.health.consecutive))
