# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A/B: does waking the reader just before a frame is due get the frame to it sooner.

After 33 ms of idle a reader's core is halted and its caches are cold, and most of the ~250 us
from send to consumer view is waking it and running cold Python (``docs/transport.md``). A
camera is periodic, so a reader could wake ``lead`` us before the next frame is due, run the
decode path once on a dummy header (warming the caches) and wait for the frame from there. This
bench tries that on the iceoryx2 data plane alone (no rclpy): one producer at 30 Hz, one or
more consumers; per frame each consumer picks an arm at random, so the arms see the same
machine at the same moment:

- ``plain``: ``Listener.timed_wait`` (what ``ShmSubscriber`` does);
- ``waitset``: an iceoryx2 ``WaitSet`` on the listener and a timerfd, no timer armed (the
  cost of the mechanism the next arm needs: ``time.sleep`` would leave the reader deaf to an
  early frame);
- ``prewake``: the same with the timerfd armed at the predicted send less ``lead``. The
  prediction is the lower envelope of the last 9 sends projected on the median period (a
  paced producer is only ever late).

Prints send -> consumer view p50/p90/p99 per arm, ``prewake`` split into frames whose
pre-wake came before the send (``in time``) and after it, the prediction's error (predicted
less actual send: > 0 is a frame earlier than predicted) and how late the timer woke the
reader, and the reader thread's CPU per frame in each arm (``cpu_*``).

    python bench/bench_prewake.py                       # lead 150, 300, 1000 us; 1 consumer
    python bench/bench_prewake.py --lead-us 300 --consumers 3 --frames 600
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
import time
from collections import deque

import numpy as np
from bench_transport import (
    RATE_HZ,
    WARMUP,
    cleanup_shm,
    emit,
    run_ab_round,
    run_paced,
)

CHANNEL = 'edge_loop/bench_prewake'
ARMS = ('plain', 'waitset', 'prewake')
CLOCK_MONOTONIC, TFD_NONBLOCK, TFD_CLOEXEC, TFD_TIMER_ABSTIME = 1, 0o4000, 0o2000000, 1


class _Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [('it_interval', _Timespec), ('it_value', _Timespec)]


class TimerFd:
    """A CLOCK_MONOTONIC timerfd (os.timerfd_* needs Python 3.13)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int,
                                               ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
        self.fd = self._libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), 'timerfd_create failed')
        self._spec = _Itimerspec()

    def _set(self, ns: int, flags: int) -> None:
        self._spec.it_value.tv_sec, self._spec.it_value.tv_nsec = divmod(ns, 1_000_000_000)
        if self._libc.timerfd_settime(self.fd, flags, ctypes.byref(self._spec), None):
            raise OSError(ctypes.get_errno(), 'timerfd_settime failed')

    def arm_at(self, monotonic_ns: int) -> None:
        self._set(max(int(monotonic_ns), 1), TFD_TIMER_ABSTIME)

    def disarm(self) -> None:
        self._set(0, 0)

    def expired(self) -> bool:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return False
        return True


def predict_send(sends: deque) -> int | None:
    """Lower envelope of the recent sends projected one median period ahead."""
    if len(sends) < 5:
        return None
    seq = list(sends)
    period = sorted(b - a for a, b in zip(seq, seq[1:]))[(len(seq) - 1) // 2]
    n = len(seq)
    return min(t + (n - 1 - k) * period for k, t in enumerate(seq)) + period


def run_producer(frames: int) -> None:
    from edge_loop.transport.shm import ShmPublisher

    publisher = ShmPublisher(CHANNEL, max_width=640, max_height=480)
    src = np.random.default_rng(0).integers(0, 255, (480, 640, 3)).astype(np.uint8)

    def send(seq: int) -> None:
        loan = publisher.loan(src.shape, 'rgb8', None, None)
        np.copyto(loan.color, src)
        loan.header.seq = publisher.next_seq()
        loan.header.stamp_sec = seq
        loan.send()

    run_paced(frames, send)
    publisher.close()


def run_consumer(lead_us: int) -> None:
    import iceoryx2 as iox

    from edge_loop.transport import shm
    from edge_loop.transport.header import FrameHeader

    rng = np.random.default_rng(os.getpid())
    out: dict[str, list[int]] = {}
    state = {'arm': 'plain', 'woke': None, 'due': None}
    dummy = FrameHeader()                       # the last header seen, for the warm-up
    dummy_payload = np.zeros(480 * 640 * 3 // 8 + 8, np.uint64)

    class _Header:
        number_of_elements = dummy_payload.size

    class _DummySample:
        user_header_ptr = ctypes.addressof(dummy)
        payload_ptr = dummy_payload.ctypes.data
        header = _Header()

    def warm_up(subscriber) -> None:
        if dummy.magic == shm.MAGIC:
            subscriber.has_samples()
            shm.decode(_DummySample())

    class Reader(shm.ShmSubscriber):
        def _run(self) -> None:
            wake = iox.Duration.from_secs_f64(1.0)
            timer = TimerFd()
            waitset = (iox.WaitSetBuilder.new()
                       .signal_handling_mode(iox.SignalHandlingMode.Disabled)
                       .create(iox.ServiceType.Ipc))
            guards = (waitset.attach_notification(self._listener),
                      waitset.attach_notification_fd(
                          iox.FileDescriptor.non_owning_new(timer.fd)))
            timer_id = iox.WaitSetAttachmentId.from_guard(guards[1])
            sends: deque[int] = deque(maxlen=9)
            while not self._stop.is_set():
                cpu0 = time.thread_time_ns()
                arm = ARMS[int(rng.integers(0, len(ARMS)))]
                due = predict_send(sends)
                state.update(arm=arm, woke=None, due=due)
                if arm == 'plain' or due is None:
                    state['arm'] = 'plain'
                    self._listener.timed_wait(wake)
                else:
                    if arm == 'prewake':
                        timer.arm_at(due - lead_us * 1000)
                    while not self._stop.is_set():
                        ids, _ = waitset.wait_and_process_with_timeout(wake)
                        if any(i == timer_id for i in ids) and timer.expired():
                            state['woke'] = time.monotonic_ns()
                            warm_up(self._subscriber)
                            if not self._subscriber.has_samples():
                                continue
                        break
                    timer.disarm()
                    while self._listener.try_wait():
                        pass
                if self._stop.is_set():
                    break
                sample = self._subscriber.receive()
                if sample is None:
                    continue
                sends.append(FrameHeader.from_address(sample.user_header_ptr).send_ns)
                self._on_sample(sample, time.monotonic_ns())
                del sample
                if state.get('measured'):   # the reader thread's CPU for this frame
                    out.setdefault('cpu_' + state['measured'], []).append(
                        time.thread_time_ns() - cpu0)
            del guards
            os.close(timer.fd)

    def on_sample(sample, receive_ns: int) -> None:
        header, color, _ = shm.decode(sample)
        now = time.monotonic_ns()
        if dummy.magic != shm.MAGIC:
            ctypes.memmove(ctypes.addressof(dummy), sample.user_header_ptr,
                           ctypes.sizeof(dummy))
        state['measured'] = None
        if header.stamp_sec <= WARMUP or color is None:
            return
        arm, woke = state['arm'], state['woke']
        state['measured'] = arm
        if arm == 'prewake':
            arm += '_in_time' if woke is not None and woke < header.send_ns else '_late'
            out.setdefault('prediction_error', []).append(state['due'] - header.send_ns)
            if woke is not None:   # how late the timer woke the reader
                out.setdefault('timer_late', []).append(woke - state['due'] + lead_us * 1000)
        out.setdefault(arm, []).append(now - header.send_ns)

    reader = Reader(CHANNEL, on_sample)
    emit(event='ready')
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    stop.wait()
    reader.close()
    emit(event='consumer', **out)


def measure(lead_us: int, consumers: int, frames: int) -> dict[str, np.ndarray]:
    return run_ab_round(__file__, ['--lead-us', str(lead_us)], [], consumers, frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--frames', type=int, default=450, help='frames per configuration')
    parser.add_argument('--lead-us', default='150,300,1000',
                        help='pre-wake lead before the predicted send, comma-separated')
    parser.add_argument('--consumers', default='1', help='consumer counts, comma-separated')
    parser.add_argument('--role', choices=('producer', 'consumer'), default=None)
    args = parser.parse_args()
    if args.role == 'producer':
        run_producer(args.frames)
        return 0
    if args.role == 'consumer':
        run_consumer(int(args.lead_us))
        return 0
    print(f'pre-wake A/B per frame: {args.frames} VGA rgb8 frames at {RATE_HZ:.0f} Hz per row, '
          f'{os.cpu_count()} CPUs; send -> consumer view, us (n = frames in the arm)\n')
    print(f'{"lead us":>7} {"cons":>4} {"arm":>16} {"n":>4} {"p10":>6} {"p50":>6} {"p90":>6} '
          f'{"p99":>6}')
    rows = ('plain', 'waitset', 'prewake_in_time', 'prewake_late', 'prediction_error',
            'timer_late', 'cpu_plain', 'cpu_waitset', 'cpu_prewake')
    try:
        for lead in (int(v) for v in args.lead_us.split(',')):
            for consumers in (int(c) for c in args.consumers.split(',')):
                result = measure(lead, consumers, args.frames)
                for arm in rows:
                    lat = result.get(arm, np.zeros(0))
                    cells = ' '.join(f'{np.percentile(lat, q):6.0f}' if lat.size else f'{"-":>6}'
                                     for q in (10, 50, 90, 99))
                    print(f'{lead:7d} {consumers:4d} {arm:>16} {lat.size:4d} {cells}',
                          flush=True)
    finally:
        cleanup_shm()
    return 0


if __name__ == '__main__':
    sys.exit(main())
