# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Cost of turning a received shared-memory sample into the consumer's frame, warm and cold.

At 30 Hz a consumer's caches go cold between frames (other processes run for 33 ms), so the
~100 us "received -> callback" phase that bench/bench_transport.py reports is mostly cache
misses. This measures the same code path (:meth:`FrameReader._on_sample`: header decode, the
two read-only views, made or lent from the subscriber's cache, the ``RgbdFrame``) in one
process, once back to back (warm) and once after writing a 32 MiB buffer between frames
(cold), and prints p50 / p90 per part.

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

CHANNEL = 'edge_loop/bench_decode'
EVICT_BYTES = 32 * 1024 * 1024


def _reader_stub(frames: list) -> types.SimpleNamespace:
    """The attributes :meth:`FrameReader._on_sample` uses, without a ROS node."""
    stub = types.SimpleNamespace(
        _shm_seen=False, _writer_id=0, _last_seq=0, stats=collections.Counter(), audit=False,
        _shm=types.SimpleNamespace(wake_ns=0, borrow_limit_hits=0, polled=0, poll_misses=0,
                                   views=shm_mod.PlaneViewCache()),
        _count_audit=lambda checked, copies: None, callback=frames.append, _log_error=print)
    stub._deliver = functools.partial(FrameReader._deliver, stub)
    return stub


def _parts(sample, cache: shm_mod.PlaneViewCache) -> dict[str, int]:
    """The steps of ``_on_sample`` timed one by one (ns): made views, then lent ones."""
    pc = time.perf_counter_ns
    t0 = pc()
    fields = shm_mod._FIXED.unpack_from(shm_mod._FixedBytes.from_address(sample.user_header_ptr))
    assert fields[0] == shm_mod.MAGIC
    t1 = pc()
    layout = shm_mod._layout(fields[8:18])
    t2 = pc()
    color, depth = shm_mod._make_views(sample, layout)
    t3 = pc()
    del color, depth
    t4 = pc()
    color, depth = cache.views(sample, fields[8:18], layout)
    t5 = pc()
    frame = RgbdFrame(
        color=color, depth=depth, color_encoding=layout.color_encoding,
        depth_encoding=layout.depth_encoding,
        stamp_ns=fields[4] * 1_000_000_000 + fields[5], frame_id='camera_color_optical_frame',
        seq=fields[3], writer_id=fields[2], send_time_ns=fields[6], receive_time_ns=0,
        transport='shm', info_factory=functools.partial(print, sample), buffers=(color, depth))
    t6 = pc()
    del frame, color, depth
    cache.give_back_idle()
    return {'header': t1 - t0, 'layout': t2 - t1, 'views made': t3 - t2,
            'views lent': t5 - t4, 'frame': t6 - t5}


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
    cache = shm_mod.PlaneViewCache()
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
                stub._shm.views.give_back_idle()   # what the reader thread does next
                if cold:
                    evict += 1
                parts = _parts(sample, cache)
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
