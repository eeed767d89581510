# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline bookkeeping: frames, misses, stalls and the OK/WARN/ERROR state machine."""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.serialization import serialize_message

from edge_loop.kernels.deadline import (
    NS_PER_MS,
    BatchRate,
    CommandResult,
    FrameTracker,
    Health,
    LatencyWindow,
    Level,
    MonotonicMap,
    ReceiveLatency,
    StallWatch,
    StampOrder,
    frame_report,
    header_stamp_ns,
    next_frame_check_ns,
)

MS = NS_PER_MS
BUDGET = 66 * MS
PERIOD = 66_666_667


def test_latency_window_percentiles_and_size():
    window = LatencyWindow(size=100)
    assert math.isnan(window.percentile_ms(50))
    for i in range(1, 201):
        window.add(i * MS)
    assert len(window) == 100 and window.total == 200
    assert window.percentile_ms(50) == pytest.approx(150.5)
    assert window.percentile_ms(99) == pytest.approx(199.01)
    assert window.max_ms() == 200.0


@pytest.mark.parametrize('size, n', [(1, 1), (2, 5), (300, 17), (300, 300), (1000, 2500)])
def test_latency_window_percentiles_are_numpys(size, n):
    rng = np.random.default_rng(n)
    window = LatencyWindow(size=size)
    values = rng.integers(0, 80 * MS, n)
    for i, value in enumerate(values):
        window.add(int(value))
        if i % 7 == 0 or i == n - 1:       # interleaved: the sorted copy follows new samples
            kept = values[max(0, i + 1 - size):i + 1]
            for q in (0, 1, 50, 90, 99, 99.9, 100):
                assert window.percentile_ms(q) == pytest.approx(
                    float(np.percentile(kept, q)) / MS, rel=1e-12, abs=1e-9)


def test_on_time_command_closes_frame_without_miss():
    tracker = FrameTracker(BUDGET)
    frame = tracker.open(1000 * MS)
    assert frame.deadline_ns == 1066 * MS
    assert tracker.next_deadline() == 1066 * MS
    tracker.stage_done('object_locator', 1000 * MS, 1020 * MS)
    result, closed = tracker.command(1000 * MS, 1066 * MS)   # exactly at the deadline: on time
    assert result is CommandResult.ON_TIME
    assert closed.stages == {'object_locator': 1020 * MS}
    assert tracker.expire(2000 * MS) == []
    assert tracker.next_deadline() is None


def test_missing_command_expires_at_deadline_and_late_command_is_late():
    tracker = FrameTracker(BUDGET)
    tracker.open(1000 * MS)
    tracker.open(1066 * MS)
    assert tracker.expire(1065 * MS) == []
    missed = tracker.expire(1066 * MS)
    assert [f.stamp_ns for f in missed] == [1000 * MS]
    assert tracker.next_deadline() == 1132 * MS
    result, _ = tracker.command(1000 * MS, 1070 * MS)
    assert result is CommandResult.LATE
    result, _ = tracker.command(1000 * MS, 1071 * MS)
    assert result is CommandResult.DUPLICATE


def test_command_after_deadline_before_expire_is_still_a_miss():
    tracker = FrameTracker(BUDGET)
    tracker.open(1000 * MS)
    result, frame = tracker.command(1000 * MS, 1067 * MS)
    assert result is CommandResult.LATE and frame.command_ns == 1067 * MS
    assert [f.stamp_ns for f in tracker.expire(1067 * MS)] == [1000 * MS]


def test_command_before_its_camera_stamp_is_matched_later():
    tracker = FrameTracker(BUDGET)
    tracker.open(900 * MS)
    result, _ = tracker.command(1000 * MS, 1010 * MS)
    assert result is CommandResult.EARLY
    tracker.stage_done('grasp_planner', 1000 * MS, 1005 * MS)
    frame = tracker.open(1000 * MS)
    assert frame.command_ns == 1010 * MS and frame.stages == {'grasp_planner': 1005 * MS}
    assert [f.stamp_ns for f in tracker.expire(5000 * MS)] == [900 * MS]


def test_repeated_stamp_ignored_and_time_jump_back_resets():
    tracker = FrameTracker(BUDGET)
    assert tracker.open(1000 * MS) is not None
    assert tracker.open(1000 * MS) is None
    assert tracker.open(10 * MS) is not None          # bag restarted
    assert tracker.open_count == 1
    assert tracker.next_deadline() == 76 * MS


def test_unknown_command_for_old_stamp():
    tracker = FrameTracker(BUDGET)
    tracker.open(1000 * MS)
    result, _ = tracker.command(500 * MS, 1001 * MS)
    assert result is CommandResult.UNKNOWN


def test_open_frames_are_bounded():
    tracker = FrameTracker(BUDGET, max_open=4)
    for i in range(10):
        tracker.open((i + 1) * MS)
    assert tracker.open_count == 4 and tracker.dropped == 6


def test_stall_watch_fixed_period():
    watch = StallWatch(periods=5, period_ns=PERIOD)
    assert not watch.check(10**12)                      # never seen: nothing expected yet
    watch.seen(0)
    assert not watch.check(5 * PERIOD - 1)
    assert watch.check(5 * PERIOD)
    assert not watch.check(5 * PERIOD + 1)             # once per period
    assert watch.check(6 * PERIOD)
    watch.seen(7 * PERIOD)
    assert watch.stall_count == 0 and watch.stalls == 2
    assert not watch.check(11 * PERIOD)


def test_stall_watch_estimates_rate_with_floor():
    watch = StallWatch(periods=5, min_timeout_ns=50 * MS)
    watch.seen(0)
    assert watch.timeout_ns() is None
    for i in range(1, 50):
        watch.seen(i * 5 * MS)                          # 200 Hz
    assert watch.period_ns() == pytest.approx(5 * MS)
    assert watch.timeout_ns() == 50 * MS               # 5 periods = 25 ms, floor wins
    last = 49 * 5 * MS
    assert not watch.check(last + 49 * MS)
    assert watch.check(last + 50 * MS)
    assert not watch.check(last + 51 * MS)
    watch.repeat_ns = PERIOD                          # repeats once per control period
    assert not watch.check(last + 50 * MS + PERIOD - 1)
    assert watch.check(last + 50 * MS + PERIOD)
    # several messages taken in one poll count as several periods
    watch2 = StallWatch(periods=5)
    watch2.seen(0)
    watch2.seen(100 * MS, count=10)
    assert watch2.period_ns() == pytest.approx(10 * MS)


def test_a_system_clock_step_is_no_silence():
    """A 15 s forward step of the system clock between two receive stamps: no stall."""
    S = 1_000_000_000
    clocks = MonotonicMap(step_threshold_ns=20 * MS)
    watch = StallWatch(periods=5, period_ns=PERIOD, forward_only=True)
    wall0, mono0 = 1_700_000_000 * S, 50 * S
    assert clocks.update(wall0, mono0) == 0
    watch.seen(clocks.to_mono(wall0 - 5 * MS))
    # 100 ms later the system clock is 15 s ahead; a stamp from before the step is drained
    # only now (mapped 15 s too early) and one from after it comes too.
    assert clocks.update(wall0 + 15 * S + 100 * MS, mono0 + 100 * MS) == 15 * S
    assert clocks.steps == 1
    watch.seen(clocks.to_mono(wall0 + 40 * MS))                  # pre-step: never moves back
    assert watch.last_ns == mono0 - 5 * MS
    assert not watch.check(mono0 + 100 * MS)
    watch.seen(clocks.to_mono(wall0 + 15 * S + 90 * MS))         # post-step: on time
    assert watch.last_ns == mono0 + 90 * MS
    assert watch.next_check_ns() == mono0 + 90 * MS + 5 * PERIOD
    assert clocks.to_wall(watch.next_check_ns()) == wall0 + 15 * S + 90 * MS + 5 * PERIOD
    # Backwards: a stamp from before the step would map into the future, capped at now, so
    # a stall after it is still found in time (not |step| later).
    assert clocks.update(wall0 + 200 * MS, mono0 + 200 * MS) == -15 * S
    watch.seen(clocks.to_mono(wall0 + 15 * S + 150 * MS))
    assert watch.last_ns == mono0 + 200 * MS
    assert watch.check(mono0 + 200 * MS + 5 * PERIOD)
    # NTP slewing (0.5 ms/s) and read jitter are no step
    assert clocks.update(wall0 + 1200 * MS + 500_000, mono0 + 1200 * MS) == 0
    assert clocks.steps == 2


def test_stall_watch_follows_simulated_time_back():
    watch = StallWatch(periods=5, period_ns=PERIOD)        # forward_only off: sim reset
    watch.seen(100 * PERIOD)
    watch.seen(2 * PERIOD)
    assert watch.last_ns == 2 * PERIOD and watch.check(7 * PERIOD)
    with pytest.raises(RuntimeError, match='update'):
        MonotonicMap(MS).to_mono(0)


def test_health_state_machine():
    health = Health(misses_to_error=3, healthy_to_ok=4)
    assert health.level is Level.OK
    assert not health.miss()
    assert health.level is Level.WARN
    for _ in range(4):
        health.ok()
    assert health.level is Level.OK
    assert not health.miss() and not health.miss()
    assert health.miss()                                # third in a row: ERROR, deactivate once
    assert health.level is Level.ERROR
    assert not health.miss()                            # still ERROR, no second deactivation
    for _ in range(3):
        assert not health.ok()
    assert health.level is Level.ERROR
    assert not health.miss()                            # a miss restarts the healthy count
    for _ in range(3):
        health.ok()
    assert health.level is Level.ERROR
    assert health.ok()
    assert health.level is Level.OK
    assert health.misses == 6 and health.consecutive == 0


def _judge(events, in_order: bool, budget=200 * MS):
    """Feed (kind, stamp, time) events the way the monitor node does; return the Health.

    'cam' opens a frame, 'cmd' is its command, 'wake' declares every miss due by then.
    """
    tracker, health, held = FrameTracker(budget), Health(3, 15), StampOrder()

    def count(released):
        for _, ok in released:
            health.ok() if ok else health.miss()

    def outcome(stamp, ok):
        if not in_order:
            count([(stamp, ok)])
            return
        held.add(stamp, ok)
        count(held.release(tracker.oldest_open_stamp()))

    for kind, stamp, now in events:
        if kind == 'cam':
            tracker.open(stamp)
        elif kind == 'cmd':
            result, _ = tracker.command(stamp, now)
            if result is CommandResult.ON_TIME:
                outcome(stamp, True)
        else:
            for frame in tracker.expire(now):
                outcome(frame.stamp_ns, False)
            count(held.release(tracker.oldest_open_stamp()))
    return health


def _burst(burst: int, late_wake: bool):
    """Events at 10 Hz, 200 ms budget: ``burst`` frames from frame 3 get no command.

    The others get one 10 ms after their stamp; the thread wakes 2 ms after each frame (where
    misses fall due).
    """
    P = 100 * MS
    events = []
    for k in range(12):
        events.append(('cam', k * P, k * P + MS))
        if not 3 <= k < 3 + burst:
            events.append(('cmd', k * P, k * P + 10 * MS))
        events.append(('wake', None, k * P + 2 * MS))
    if late_wake:   # the thread slept through 0.702 s, then took the batch (cmd 7) first
        events = [e for e in events if e[2] != 702 * MS] + [('wake', None, 720 * MS)]
    return sorted(events, key=lambda e: e[2])


@pytest.mark.parametrize('late_wake', [False, True])
@pytest.mark.parametrize('burst', [3, 4])
def test_missed_frames_in_a_row_are_consecutive_misses_whenever_the_thread_wakes(burst,
                                                                                late_wake):
    # A budget of two periods: frame k + 3's command is on time before frame k + 2's
    # deadline. Counted as events happen, it split a burst of 3 into 2 + 1 misses, and one
    # of 4 too when the thread woke 18 ms late and took the next command before the miss due.
    health = _judge(_burst(burst, late_wake), in_order=True)
    assert health.misses == burst and health.level is Level.ERROR
    old = _judge(_burst(burst, late_wake), in_order=False)
    assert old.level is (Level.ERROR if burst == 4 and not late_wake else Level.WARN)


def test_stamp_order_holds_an_outcome_until_older_frames_are_settled():
    held = StampOrder()
    held.add(300, 'b')
    held.add(100, 'a')
    assert held.release(100) == [] and len(held) == 2      # frame 100 still open
    assert held.release(200) == [(100, 'a')]
    held.add(200, 'c')
    assert held.release(None) == [(200, 'c'), (300, 'b')]  # nothing open: all, oldest first
    held.add(400, 'd')
    held.clear()
    assert held.release(None) == []


def test_health_rejects_bad_limits():
    with pytest.raises(ValueError):
        Health(0, 1)


@pytest.mark.parametrize('msg', [TwistStamped(), OccupancyGrid()])
def test_header_stamp_from_serialized_message(msg):
    msg.header.stamp.sec = 1_796_000_000
    msg.header.stamp.nanosec = 123_456_789
    msg.header.frame_id = 'world'
    assert header_stamp_ns(serialize_message(msg)) == 1_796_000_000_123_456_789


def test_header_stamp_too_short():
    with pytest.raises(ValueError):
        header_stamp_ns(b'\x00\x01\x00\x00')


def test_frame_report_names_what_a_missed_frame_got():
    tracker = FrameTracker(budget_ns=66 * MS)
    tracker.open(1000 * MS)
    tracker.stage_done('object_locator', 1000 * MS, 1021 * MS)
    (frame,) = tracker.expire(1066 * MS)
    assert frame_report(frame, ['object_locator', 'grasp_planner']) == (
        'object_locator 21.0 ms, grasp_planner none, command none')


def test_next_frame_check_is_a_quarter_interval_before_the_expected_deadline():
    period = 66_666_667
    # the next frame expected one period on: checked 16.7 ms before its deadline
    assert next_frame_check_ns(1000 * MS, period, None, BUDGET) == \
        1000 * MS + period + BUDGET - period // 4
    # a camera faster than the control rate: its own interval
    assert next_frame_check_ns(1000 * MS, period, 33 * MS, BUDGET) == \
        1000 * MS + 33 * MS + BUDGET - 33 * MS // 4


def test_batch_rate_is_the_ratio_of_sums_and_skips_a_batch_with_a_stall():
    rate = BatchRate(batch=10)
    assert rate.add(0, 1, stalls=0) is None              # the first sample starts the batch
    # bursts: 4 samples seen 12 ms apart, then 6 seen 38 ms later (4 ms per sample on average)
    assert rate.add(12 * MS, 4, stalls=0) is None
    assert rate.add(40 * MS, 6, stalls=0) == pytest.approx(4 * MS)
    assert rate.add(60 * MS, 5, stalls=0) is None
    assert rate.add(200 * MS, 5, stalls=1) is None       # a stall in the batch: no answer
    assert rate.add(240 * MS, 10, stalls=1) == pytest.approx(4 * MS)


def test_receive_latency_pairs_input_and_output_by_stamp_on_one_clock():
    # grasp_state's output carries its joint-states input's stamp (the gripper's clock); its
    # latency is output receive - input receive, whichever of the two arrives first.
    lat = ReceiveLatency(memory=4)
    assert lat.input(stamp_ns=1000 * MS, received_ns=5_000 * MS) is None
    assert lat.output(stamp_ns=1000 * MS, received_ns=5_003 * MS) == 3 * MS
    assert lat.output(stamp_ns=1004 * MS, received_ns=5_010 * MS) is None   # input not polled yet
    assert lat.input(stamp_ns=1004 * MS, received_ns=5_008 * MS) == 2 * MS
    # each sample is used once, and an output without its input gives nothing
    assert lat.output(stamp_ns=1000 * MS, received_ns=5_020 * MS) is None
    assert lat.output(stamp_ns=2000 * MS, received_ns=5_030 * MS) is None
    # bounded: the oldest unmatched samples are forgotten
    for k in range(10):
        lat.input(stamp_ns=(3000 + k) * MS, received_ns=6_000 * MS)
    assert lat.output(stamp_ns=3000 * MS, received_ns=6_001 * MS) is None
    assert lat.output(stamp_ns=3009 * MS, received_ns=6_001 * MS) == 1 * MS
    lat.clear()
    assert lat.output(stamp_ns=3008 * MS, received_ns=6_001 * MS) is None


def _loop_judge(**kw):
    from edge_loop.kernels.deadline import JudgeConfig, LoopJudge

    cfg = JudgeConfig(budget_ns=BUDGET, period_ns=PERIOD,
                      stages=(('object_locator', '/edge_loop/objects', 30 * MS),
                              ('grasp_state', '/edge_loop/grasp_state', 10 * MS),
                              ('pick_controller', '/edge_loop/cmd/arm', 10 * MS)),
                      command_stage='pick_controller', sampled_stages=('grasp_state',),
                      misses_to_deactivate=2, healthy_periods_to_ok=3, arm_after_on_time=2,
                      startup_grace_ns=1_000 * MS, **kw)
    return LoopJudge(cfg, start_ns=0)


def test_loop_judge_without_ros_stops_missed_frames_and_deactivates_after_misses_in_a_row():
    from edge_loop.kernels.deadline import Deactivate, Note, SafeStop

    judge = _loop_judge()
    t = 10_000 * MS
    for k in range(2):   # two on-time frames arm it (arm_after_on_time) before the grace ends
        stamp = t + k * PERIOD
        assert judge.camera(stamp, stamp + 1 * MS) == []
        judge.stage('object_locator', stamp, stamp + 20 * MS)
        assert judge.command(stamp, stamp + 30 * MS) == []
    assert judge.armed and judge.frames_ok == 2
    assert judge.stages['object_locator'].latency.percentile_ms(50) == 20.0
    assert judge.stages['pick_controller'].latency.percentile_ms(50) == 10.0   # its own time
    # two frames without a command: a safe stop each at expiry, then the deactivation
    verdicts = []
    for k in (2, 3):
        stamp = t + k * PERIOD
        judge.camera(stamp, stamp + 1 * MS)
        judge.stage('object_locator', stamp, stamp + 20 * MS)
        assert judge.expire(stamp + BUDGET - 1) == []            # not due yet
        verdicts += judge.expire(stamp + BUDGET + 1 * MS)
    stops = [v for v in verdicts if isinstance(v, SafeStop)]
    assert [(v.stamp_ns, v.reason) for v in stops] == [(t + 2 * PERIOD, 'deadline_miss'),
                                                       (t + 3 * PERIOD, 'deadline_miss')]
    assert all(v.detected_ns - v.deadline_ns == 1 * MS for v in stops)
    assert [v for v in verdicts if isinstance(v, Deactivate)] == [Deactivate(2)]
    assert any(isinstance(v, Note) and 'object_locator 20.0 ms' in v.text for v in verdicts)
    assert not judge.controller_enabled and judge.health.level.name == 'ERROR'
    # a late command for a missed frame is counted, not a second stop
    assert judge.command(t + 3 * PERIOD, t + 3 * PERIOD + BUDGET + 5 * MS) == []
    assert judge.late_commands == 1
    # a stall is a miss without a frame
    (stop, *rest) = judge.stall('camera_stall', t + 5_000 * MS, t + 4_900 * MS, t + 5_000 * MS)
    assert stop == SafeStop(t + 5_000 * MS, 'camera_stall', t + 4_900 * MS, t + 5_000 * MS)
    assert judge.reasons == {'deadline_miss': 2, 'camera_stall': 1}
    # with the controller off, frames whose stages met the deadline are healthy: back to OK
    notes = []
    for k in range(10, 13):
        stamp = t + k * PERIOD
        judge.camera(stamp, stamp + 1 * MS)
        judge.stage('object_locator', stamp, stamp + 20 * MS)
        notes += judge.expire(stamp + BUDGET + 1 * MS)
    assert judge.health.level.name == 'OK'
    assert any(isinstance(n, Note) and 'stays inactive until ~/reactivate' in n.text
               for n in notes)
    judge.reactivated(t + 20_000 * MS)
    assert judge.controller_enabled and not judge.armed
    assert judge.grace_end_ns == t + 21_000 * MS


def test_loop_judge_times_a_sampled_stage_from_its_input_on_one_clock():
    judge = _loop_judge()
    # grasp_state's stamp is ahead of the frame clock: only receive times count
    judge.stage('grasp_state', stamp=5_000 * MS, now=4_990 * MS, received=7_003 * MS)
    judge.sampled_input(stamp=5_000 * MS, received=7_001 * MS)
    assert judge.stages['grasp_state'].latency.values_ms() == [2.0]
    assert 'grasp_state' not in judge.frame_stages
