# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A/B: does the producer's ``sched_yield()`` after a send get its consumers frames sooner.

The kernel wakes a consumer on the CPU that notified it; if the producer keeps that CPU
(building the ROS announcement, the next physics step), the consumer waits. ``ShmLoan.send``
therefore yields. This A/B runs the iceoryx2 data plane alone (no rclpy, so it runs on any
machine with iceoryx2): one producer at 30 Hz that busy-works ``work_us`` after each send, and
1 or 3 consumer processes. Each frame yields or not at random, tagged in the header, so both
arms see the same machine at the same time (this VM's speed drifts 2x within minutes).
Prints send -> consumer view latency p50/p90/p99 per arm.

    python bench/bench_wake_yield.py                  # work 0, 150, 1000 us; 1 and 3 consumers
    python bench/bench_wake_yield.py --frames 600 --work-us 150 --consumers 3
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

import numpy as np
from bench_transport import (
    RATE_HZ,
    TAIL,
    WARMUP,
    cleanup_shm,
    emit,
    run_ab_round,
    run_paced,
)

CHANNEL = 'edge_loop/bench_yield'


def run_producer(work_us: float, frames: int) -> None:
    from edge_loop.transport.shm import ShmPublisher

    publisher = ShmPublisher(CHANNEL, max_width=640, max_height=480)
    src = np.random.default_rng(0).integers(0, 255, (480, 640, 3)).astype(np.uint8)
    arms = np.random.default_rng(1).integers(0, 2, WARMUP + frames + TAIL + 1)

    def send(seq: int) -> None:
        loan = publisher.loan(src.shape, 'rgb8', None, None)
        np.copyto(loan.color, src)
        loan.header.seq = publisher.next_seq()
        loan.header.stamp_sec, loan.header.stamp_nanosec = seq, int(arms[seq])
        loan.send(yield_cpu=bool(arms[seq]))
        t0 = time.perf_counter()
        while (time.perf_counter() - t0) * 1e6 < work_us:   # the producer's next work
            pass

    run_paced(frames, send)
    publisher.close()


def run_consumer() -> None:
    from edge_loop.transport.shm import ShmSubscriber, decode

    latencies: dict[int, list[int]] = {0: [], 1: []}

    def on_sample(sample, receive_ns: int) -> None:
        header, color, _ = decode(sample)
        now = time.monotonic_ns()
        if header.stamp_sec > WARMUP and color is not None:
            latencies[int(header.stamp_nanosec)].append(now - header.send_ns)

    subscriber = ShmSubscriber(CHANNEL, on_sample)
    emit(event='ready')
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    stop.wait()
    subscriber.close()
    emit(event='consumer', plain=latencies[0], yielded=latencies[1])


def measure(work_us: float, consumers: int, frames: int) -> dict[str, np.ndarray]:
    return run_ab_round(__file__, [], ['--work-us', str(work_us)], consumers, frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--frames', type=int, default=400, help='frames per configuration')
    parser.add_argument('--work-us', default='0,150,1000',
                        help='producer busy work after each send, comma-separated')
    parser.add_argument('--consumers', default='1,3', help='consumer counts, comma-separated')
    parser.add_argument('--role', choices=('producer', 'consumer'), default=None)
    args = parser.parse_args()
    if args.role == 'producer':
        run_producer(float(args.work_us), args.frames)
        return 0
    if args.role == 'consumer':
        run_consumer()
        return 0
    print(f'sched_yield after send, A/B per frame: {args.frames} VGA rgb8 frames at '
          f'{RATE_HZ:.0f} Hz per row, {os.cpu_count()} CPUs; send -> consumer view, us\n')
    print(f'{"work us":>8} {"consumers":>9} | {"plain p50":>9} {"p90":>6} {"p99":>6} | '
          f'{"yield p50":>9} {"p90":>6} {"p99":>6}')
    try:
        for work in (float(w) for w in args.work_us.split(',')):
            for consumers in (int(c) for c in args.consumers.split(',')):
                arms = measure(work, consumers, args.frames)
                cells = []
                for arm in ('plain', 'yielded'):
                    lat = arms.get(arm, np.zeros(0))
                    cells.append(' '.join(f'{np.percentile(lat, q):{w}.0f}' if lat.size else
                                          f'{"-":>{w}}' for q, w in ((50, 9), (90, 6), (99, 6))))
                print(f'{work:8.0f} {consumers:9d} | {cells[0]} | {cells[1]}', flush=True)
    finally:
        cleanup_shm()
    return 0


if __name__ == '__main__':
    sys.exit(main())
