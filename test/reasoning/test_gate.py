# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The frame gate: background work only between a periodic loop's frames."""

from __future__ import annotations

import threading
import time

import pytest

from edge_loop.reasoning.gate import FrameGate, window_allows


@pytest.mark.parametrize('now, in_frame, next_t, work, ok, wait', [
    (0.0, True, None, 0.001, False, None),      # a frame in flight: wait for its end
    (0.0, False, None, 0.001, True, 0.0),       # no frame seen yet: nothing to protect
    (0.0, False, 0.010, 0.005, True, 0.0),      # fits with the guard to spare
    (0.0, False, 0.010, 0.0099, False, 0.012),  # would run into the next frame
    (0.0125, False, 0.010, 0.005, True, 0.0),   # the frame is overdue by > late: idle loop
    (0.011, False, 0.010, 0.005, False, 0.001),  # overdue, not yet by late_s: still wait
])
def test_window_rule(now, in_frame, next_t, work, ok, wait):
    got_ok, got_wait = window_allows(now, in_frame, next_t, work, guard_s=3e-4, late_s=2e-3)
    assert got_ok is ok
    assert got_wait == (pytest.approx(wait) if wait is not None else None)


def test_gate_keeps_background_work_out_of_frames_and_lets_it_run_between_them():
    # A 50 Hz loop whose frames take 6 ms; background pieces of 2 ms. Ungated, a piece would
    # be running at about half of the frames' starts; gated, almost none, and the pieces still
    # fill most of the 14 ms between frames.
    gate = FrameGate(guard_s=1e-3, late_s=5e-3)
    frames: list[tuple[float, float]] = []
    pieces: list[tuple[float, float]] = []
    stop = threading.Event()

    def piece() -> None:
        t0 = time.perf_counter()
        time.sleep(0.002)
        pieces.append((t0, time.perf_counter()))

    def background() -> None:
        while not stop.is_set():
            gate.run(piece, 'chunk')

    worker = threading.Thread(target=background, daemon=True)
    worker.start()
    period, next_t = 0.020, time.perf_counter()
    for _ in range(50):
        gate.frame_begin()
        t0 = time.perf_counter()
        time.sleep(0.006)
        frames.append((t0, time.perf_counter()))
        next_t += period
        gate.frame_end(next_t)
        time.sleep(max(0.0, next_t - time.perf_counter()))
    stop.set()
    # the loop is gone: the gate lets the worker's last piece through once the frame is late
    worker.join(timeout=1.0)
    assert not worker.is_alive()
    st = gate.stats
    assert st.frames == 50
    assert st.overlapped_frames <= 10, st          # ungated: ~25 of 50
    inside = sum(1 for s, _ in pieces for f0, f1 in frames if f0 < s < f1)
    assert inside <= st.overlapped_frames + 2
    busy = sum(e - s for s, e in pieces)
    assert busy > 0.3 * 50 * (period - 0.006), f'background ran only {busy:.3f} s'
    assert gate.expected_s('chunk') >= 0.002


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class _RecordingGate:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def frame_begin(self) -> None:
        self.calls.append(('begin',))

    def frame_end(self, next_frame_t) -> None:
        self.calls.append(('end', next_frame_t))


def test_loop_frames_begin_on_camera_info_and_end_on_the_last_output_of_that_stamp():
    from edge_loop.reasoning.loop_frames import LoopFrames

    clock, gate = _Clock(), _RecordingGate()
    frames = LoopFrames(gate, ['objects', 'grasp'], timeout_s=0.05, clock=clock)
    frames.frame(1)
    clock.t = 0.004
    frames.output('objects', 1)
    frames.output('grasp', 0)         # another frame's: not this one's end
    frames.output('unrelated', 1)
    assert gate.calls == [('begin',)]
    frames.output('grasp', 1)
    assert gate.calls[-1] == ('end', None)        # one arrival: no period known yet
    for k in range(2, 6):             # a camera at 10 ms
        clock.t = (k - 1) * 0.010
        frames.frame(k)
        clock.t += 0.003
        frames.output('grasp', k)
        frames.output('objects', k)
    assert frames.period_s() == pytest.approx(0.010)
    assert gate.calls[-1] == ('end', pytest.approx(0.040 + 0.010))   # began + period
    frames.output('grasp', 5)         # a repeat ends nothing twice
    assert sum(c[0] == 'end' for c in gate.calls) == 5


def test_loop_frames_end_a_frame_whose_outputs_never_come_after_the_timeout():
    from edge_loop.reasoning.loop_frames import LoopFrames

    clock, gate = _Clock(), _RecordingGate()
    frames = LoopFrames(gate, ['objects'], timeout_s=0.05, clock=clock)
    frames.frame(1)
    clock.t = 0.049
    frames.poll()
    assert gate.calls == [('begin',)] and frames.timeouts == 0
    clock.t = 0.051
    frames.poll()
    assert gate.calls[-1][0] == 'end' and frames.timeouts == 1
    frames.poll()                     # nothing in flight any more
    assert frames.timeouts == 1
    with pytest.raises(ValueError):
        LoopFrames(gate, [], timeout_s=0.05)
    with pytest.raises(ValueError):
        LoopFrames(gate, ['objects'], timeout_s=0.0)


def test_loop_frames_keep_a_real_gate_closed_while_a_frame_is_in_flight():
    from edge_loop.reasoning.loop_frames import LoopFrames

    clock = _Clock()
    gate = FrameGate(guard_s=0.0, late_s=0.002, clock=clock)
    frames = LoopFrames(gate, ['objects'], timeout_s=0.05, clock=clock)
    frames.frame(1)
    assert not window_allows(clock(), gate._in_frame, gate._next_frame_t, 0.0, 0.0, 0.002)[0]
    frames.output('objects', 1)
    assert not gate._in_frame


def test_a_starved_piece_starts_at_a_windows_start_and_only_there():
    # A piece longer than any window (12 ms against an 8 ms gap) waits until max_wait_s,
    # then starts just after a frame ended, never in the middle of a window.
    late = dict(guard_s=3e-4, late_s=2e-3)
    assert window_allows(0.0, False, 0.008, 0.012, **late) == (False, pytest.approx(0.010))
    assert window_allows(0.0, False, 0.008, 0.012, **late, starved=True,
                         since_frame_end_s=0.0005)[0]
    assert not window_allows(0.004, False, 0.008, 0.012, **late, starved=True,
                             since_frame_end_s=0.004)[0]
    assert not window_allows(0.0, True, 0.008, 0.012, **late, starved=True,
                             since_frame_end_s=0.0)[0]


def _run_loop(gate: FrameGate, piece, frames: int, period: float = 0.010,
              busy: float = 0.002) -> list[float]:
    """A periodic loop on the gate with a background worker running ``piece``; frame ends."""
    stop = threading.Event()

    def background() -> None:
        while not stop.is_set():
            gate.run(piece, 'chunk')

    worker = threading.Thread(target=background, daemon=True)
    worker.start()
    ends, next_t = [], time.perf_counter()
    for _ in range(frames):
        gate.frame_begin()
        time.sleep(busy)
        next_t += period
        gate.frame_end(next_t)
        ends.append(time.perf_counter())
        time.sleep(max(0.0, next_t - time.perf_counter()))
    stop.set()
    worker.join(timeout=2.0)
    assert not worker.is_alive()
    return ends


def test_one_slow_first_run_does_not_keep_a_piece_out_of_a_running_loop():
    # A 100 Hz loop whose frames take 2 ms; the piece's first run takes 30 ms (one-time costs),
    # later ones 1 ms. The old rule (the longest of the last 32 runs) kept it out of every 8 ms
    # window while the loop ran; now it runs again after at most max_wait_s, and from its
    # second run its expected length is the warm one, so it fits the windows again.
    gate = FrameGate(guard_s=3e-4, late_s=2e-3, max_wait_s=0.05)
    calls = []

    def piece() -> None:
        time.sleep(0.030 if not calls else 0.001)
        calls.append(time.perf_counter())

    gate.run(piece, 'chunk')                  # no frame seen yet: runs at once, 30 ms
    assert gate.expected_s('chunk') >= 0.030
    _run_loop(gate, piece, frames=60)
    assert gate.expected_s('chunk') < 0.008   # the cold run dropped
    assert gate.stats.longest_s['chunk'] >= 0.030
    assert len(calls) > 30, (len(calls), gate.stats)   # it kept running beside the loop


def test_a_piece_longer_than_any_window_runs_at_a_windows_start_after_max_wait():
    # 12 ms pieces against 8 ms windows: never expected to fit, so each waits max_wait_s and
    # then starts just after a frame ends (forced_runs), instead of never while the loop runs.
    gate = FrameGate(guard_s=3e-4, late_s=2e-3, max_wait_s=0.05)
    starts = []

    def piece() -> None:
        starts.append(time.perf_counter())
        time.sleep(0.012)

    gate.run(piece, 'chunk')
    gate.run(piece, 'chunk')                  # two runs: the expected length is 12 ms
    n0 = len(starts)
    _run_loop(gate, piece, frames=60)
    forced = len(starts) - n0
    assert gate.stats.forced_runs >= 3, gate.stats
    assert forced <= 60 * 0.010 / 0.05 + 2, forced   # about one per max_wait_s, no more
