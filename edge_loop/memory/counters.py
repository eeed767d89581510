# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Allocations per frame and allocator state, on the CPU and on CUDA.

* CUDA: ``torch.cuda.memory_stats()['allocation.all.allocated']`` counts every request the
  caching allocator serves (a block reused from its cache counts too), so the difference over
  N frames, divided by N, is the allocations per frame.
* CPU: torch's profiler with ``profile_memory`` attributes every allocation of torch's CPU
  allocator to the op that made it (``self_cpu_memory_usage > 0``); numpy reports its array
  data to ``tracemalloc`` under its own domain, which counts the arrays a frame leaves alive
  (returned or stored: what the frame's results hold on to; a temporary freed inside the frame
  is not seen there). Both are counted over N frames.

:func:`fragmentation` reads the caching allocator's segments: reserved minus allocated, and
the largest free block (the largest request that can be served without a new segment).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def cuda_allocations(fn: Callable[[], Any], frames: int, device: torch.device) -> float:
    """Caching-allocator requests per call of ``fn`` over ``frames`` calls (synchronised)."""
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_stats(device).get('allocation.all.allocated', 0)
    for _ in range(frames):
        fn()
    torch.cuda.synchronize(device)
    after = torch.cuda.memory_stats(device).get('allocation.all.allocated', 0)
    return (after - before) / frames


def cpu_allocations(fn: Callable[[], Any], frames: int) -> dict[str, Any]:
    """Allocations per call of ``fn`` on the CPU: torch's allocator and numpy's, separately.

    Returns ``{'torch': per_frame, 'numpy': per_frame, 'torch_ops': [names that allocated]}``.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(frames):
            fn()
    allocating = [e for e in prof.events() if e.self_cpu_memory_usage > 0]
    owners = sorted({(e.cpu_parent.name if e.cpu_parent is not None else e.name)
                     for e in allocating})
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        domain = tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)
        snap_before = tracemalloc.take_snapshot().filter_traces([domain])
        kept = [fn() for _ in range(frames)]   # keep the results so their arrays stay traced
        snap_after = tracemalloc.take_snapshot().filter_traces([domain])
        new_blocks = sum(max(0, s.count_diff) for s in
                         snap_after.compare_to(snap_before, 'traceback'))
        del kept
    finally:
        if not started:
            tracemalloc.stop()
    return {'torch': len(allocating) / frames, 'numpy': new_blocks / frames,
            'torch_ops': owners}


def allocations_per_frame(fn: Callable[[], Any], frames: int,
                          device: torch.device | str) -> dict[str, Any]:
    """Allocations per frame of ``fn`` on ``device``'s allocator and on the CPU side."""
    device = torch.device(device)
    out: dict[str, Any] = {}
    if device.type == 'cuda':
        out['cuda'] = cuda_allocations(fn, frames, device)
    out['cpu'] = cpu_allocations(fn, frames)
    return out


def fragmentation(device: torch.device | str) -> dict[str, int]:
    """Caching allocator state: allocated, reserved, their difference, largest free block."""
    device = torch.device(device)
    stats = torch.cuda.memory_stats(device)
    largest_free = 0
    for segment in torch.cuda.memory_snapshot():
        if segment.get('device', device.index or 0) != (device.index or 0):
            continue
        for block in segment['blocks']:
            if block['state'] == 'inactive':
                largest_free = max(largest_free, block['size'])
    allocated = stats.get('allocated_bytes.all.current', 0)
    reserved = stats.get('reserved_bytes.all.current', 0)
    return {'allocated': allocated, 'reserved': reserved, 'reserved_minus_allocated':
            reserved - allocated, 'largest_free_block': largest_free,
            'segments': stats.get('segment.all.current', 0),
            'peak_allocated': stats.get('allocated_bytes.all.peak', 0),
            'peak_reserved': stats.get('reserved_bytes.all.peak', 0),
            'alloc_retries': stats.get('num_alloc_retries', 0),
            'ooms': stats.get('num_ooms', 0)}
