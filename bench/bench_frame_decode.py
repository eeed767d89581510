# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Cost of turning a received shared-memory sample into the consumer's frame, warm and cold.

At 30 Hz a consumer's caches go cold between frames (other processes run for 33 ms), so the
~100 us "received -> callback" phase that bench/bench_transport.py reports is mostly cache
misses. This measures the same code path (:meth:`FrameReader._on_sample`: header decode, the
two read-only views, the ``RgbdFrame``) in one process, once back to back (warm) and once
after writing a 32 MiB buffer between frames (cold), and prints p50 / p90 per part.

    python bench/bench_frame_decode.py [--frames 300]
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
import types

import numpy as np

from edge_loop.transport import shm as shm_mod
from edge_loop.transport.api import FrameReader
from edge_loop.transport.frame import RgbdFrame
from edge_loop.transport.header import FrameHeader

CHANNEL = 'edge_loop/bench_decode'
EVICT_BYTES = 32 * 1024 * 1024


def _reader_stub(frames: list) -> types.SimpleNamespace:
    """The attributes :meth:`FrameReader._on_sample` uses, without a ROS node."""
    stub = types.SimpleNamespace(
        _shm_seen=False, _writer_id=0, _last_seq=0, stats=collections.Counter(), audit=False,
        _shm=types.SimpleNamespace(wake_ns=0, borrow_limit_hits=0, polled=0, poll_misses=0),
        _count_audit=lambda checked, copies: None, callback=frames.append, _log_error=print)
    stub._deliver = functools.partial(FrameReader._deliver, stub)
    return stub


def _parts(sample) -> dict[str, int]:
    """The steps of ``_on_sample`` timed one by one (ns)."""
    pc = time.perf_counter_ns
    t0 = pc()
    header = FrameHeader.from_address(sample.user_header_ptr)
    assert header.magic == shm_mod.MAGIC
    t1 = pc()
    color_geo, depth_geo, _ = shm_mod._layout(header)
    ptr = sample.payload_ptr
    t2 = pc()
    color = shm_mod._view(ptr + color_geo[0], color_geo[1], color_geo[2], True, sample)
    depth = shm_mod._view(ptr + depth_geo[0], depth_geo[1], depth_geo[2], True, sample)
    t3 = pc()
    frame = RgbdFrame(
        color=color, depth=depth, color_encoding=header.color.encoding.decode(),
        depth_encoding=header.depth.encoding.decode(),
        stamp_ns=int(header.stamp_sec) * 1_000_000_000 + int(header.stamp_nanosec),
        frame_id=header.frame_id.decode(), seq=int(header.seq), writer_id=int(header.writer_id),
        send_time_ns=int(header.send_ns), receive_time_ns=0, transport='shm',
        info_factory=functools.partial(print, sample), buffers=(color, depth))
    t4 = pc()
    del frame, color, depth, header
    return {'header': t1 - t0, 'layout': t2 - t1, 'views': t3 - t2, 'frame': t4 - t3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--frames', type=int, default=300)
    args = parser.parse_args()
    publisher = shm_mod.ShmPublisher(CHANNEL, 640, 480)
    node = shm_mod._acquire_node()
    pubsub, _event = shm_mod._open_services(node, CHANNEL)
    subscriber = pubsub.subscriber_builder().buffer_size(1).create()
    evict = np.zeros(EVICT_BYTES, np.uint8)
    frames: list = []
    stub = _reader_stub(frames)
    print('| caches | part | p50 us | p90 us |\n|---|---|---|---|')
    try:
        for cold in (False, True):
            rows = collections.defaultdict(list)
            for i in range(args.frames + 20):
                loan = publisher.loan((480, 640, 3), 'rgb8', (480, 640), '16UC1')
                loan.header.seq = publisher.next_seq()
                loan.header.stamp_sec = i
                loan.header.frame_id = b'camera_color_optical_frame'
                loan.send()
                sample = subscriber.receive()
                if cold:
                    evict += 1
                t0 = time.perf_counter_ns()
                FrameReader._on_sample(stub, sample, time.monotonic_ns())
                total = time.perf_counter_ns() - t0
                frames.clear()
                if cold:
                    evict += 1
                parts = _parts(sample)
                del sample
                if i >= 20:   # warm-up: first allocations, layout cache
                    rows['_on_sample (whole)'].append(total)
                    for name, ns in parts.items():
                        rows[name].append(ns)
            for name, ns in rows.items():
                us = np.asarray(ns) / 1e3
                print(f'| {"cold" if cold else "warm"} | {name} | {np.median(us):.1f} | '
                      f'{np.percentile(us, 90):.1f} |')
    finally:
        subscriber.delete()
        publisher.close()
        shm_mod._release_node()


if __name__ == '__main__':
    main()
