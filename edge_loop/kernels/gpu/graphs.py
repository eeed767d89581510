# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""One frame's kernels as one CUDA graph: a launch per frame instead of ~60.

At camera resolutions the torch kernels are launch-bound: the first H200 run
(``bench/results/placement_h200_eager``) spent ~1.4 ms per stage whatever the frame size,
against 0.1-0.3 ms of actual GPU work. :class:`GraphedStep` captures a stage's function once
per input shape (``torch.cuda.CUDAGraph``) into static device buffers; per frame it copies the
host inputs straight into those buffers (the handoff: pinned or registered host memory makes
it a plain DMA) and replays the graph.

The captured functions must not synchronise with the host (no ``.cpu()``, no boolean
indexing), which is how the kernels in this package are written. On a device without graphs
(the CPU) :func:`graphed` returns the plain function.

A graph still launches each of the stage's dozens of small kernels one after another.
``GraphCache(device, compile_mode=...)`` first hands the stage's function to
``torch.compile`` (Inductor: elementwise chains and their reductions fused into a few
generated kernels), then captures the compiled function in the same graph: fewer, larger
kernels per replay. Only modes without Inductor's own CUDA graphs are accepted
(:data:`COMPILE_MODES`): the capture here is ours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

# Module caches of device tensors that captured functions read (ray tables, LUTs, ...).
# A graph replays raw addresses: every tensor it read must outlive it, and torch.cuda.graph
# empties the allocator's cache when it starts a capture, so a table dropped from its cache
# after one capture is unmapped by the next one (the H200 run's "illegal memory access").
# Each GraphedStep keeps a snapshot of these caches, i.e. a reference to every such tensor.
_KEEPALIVE: list[dict] = []

# torch.compile modes that leave graph capture to GraphedStep ('reduce-overhead' and
# 'max-autotune' capture their own CUDA graphs, which cannot be nested in ours).
COMPILE_MODES = ('default', 'max-autotune-no-cudagraphs')


def compiled(fn: Callable[..., object], mode: str | None) -> Callable[..., object]:
    """``fn`` through ``torch.compile`` in ``mode`` (None: ``fn`` itself).

    ``dynamic=False``: a stage sees one frame size, and a graph is captured per shape anyway.
    """
    if mode is None:
        return fn
    if mode not in COMPILE_MODES:
        raise ValueError(f'compile mode {mode!r}: use one of {", ".join(COMPILE_MODES)}')
    return torch.compile(fn, mode=mode, dynamic=False)


def keep_alive_cache(cache: dict) -> dict:
    """Register a module-level cache of device tensors whose entries graphs may capture."""
    _KEEPALIVE.append(cache)
    return cache


class GraphedStep:
    """``fn(*tensors) -> tensor or tuple of tensors`` captured for fixed input shapes."""

    def __init__(self, fn: Callable[..., object], example: Sequence[torch.Tensor],
                 warmup: int = 3) -> None:
        self.fn = fn
        self.static_in = [t.detach().clone() for t in example]
        stream = torch.cuda.Stream(device=self.static_in[0].device)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):   # warm-up off the default stream, as torch advises
            for _ in range(warmup):
                fn(*self.static_in)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = fn(*self.static_in)
        self._held = [dict(cache) for cache in _KEEPALIVE]

        # The device tensors last copied in, per input: a camera's ray table passed as an
        # input (so that one graph serves any camera of that size) is copied into the graph's
        # buffer when another table comes, not every frame.
        self._last: list[torch.Tensor | None] = [None] * len(self.static_in)

    def __call__(self, *inputs: torch.Tensor) -> object:
        """Copy ``inputs`` (host or device tensors) into the static buffers and replay.

        A device tensor that is the very one copied in last time is not copied again: pass
        constant inputs as cached tensors that nothing writes to (the ray tables are).
        """
        last = self._last
        for i, (buf, x) in enumerate(zip(self.static_in, inputs, strict=True)):
            if x is last[i]:
                continue
            buf.copy_(x, non_blocking=True)
            last[i] = x if x.device == buf.device else None
        self.graph.replay()
        return self.static_out


class GraphCache:
    """Graphs per (key, input shapes and dtypes), captured on first use, on one device.

    ``key`` names what the captured function closes over (camera, grid, parameters, dtype):
    a graph replays exactly what was captured, so anything that changes the work must be in
    the key. On the CPU there is nothing to capture and :meth:`run` calls the function.
    """

    def __init__(self, device: str | torch.device, max_graphs: int = 16,
                 compile_mode: str | None = None) -> None:
        self.device = torch.device(device)
        self.max_graphs = max_graphs
        if compile_mode is not None and compile_mode not in COMPILE_MODES:
            raise ValueError(f'compile mode {compile_mode!r}: use one of '
                             f'{", ".join(COMPILE_MODES)}')
        self.compile_mode = compile_mode
        self._cpu_fns: dict[tuple, Callable[..., object]] = {}
        self._graphs: dict[tuple, GraphedStep] = {}

    def run(self, key: tuple, make_fn: Callable[[], Callable[..., object]],
            *inputs: torch.Tensor) -> object:
        """``make_fn()(*inputs)`` on the device, through its graph on CUDA."""
        if self.device.type != 'cuda':
            fn = make_fn() if self.compile_mode is None else self._compiled_cpu(key, make_fn)
            return fn(*(t.to(self.device) for t in inputs))
        sig = (key, tuple((tuple(t.shape), t.dtype) for t in inputs))
        step = self._graphs.get(sig)
        if step is None:
            if len(self._graphs) >= self.max_graphs:
                self._graphs.clear()
            example = [t.to(self.device) for t in inputs]
            fn = compiled(make_fn(), self.compile_mode)
            step = self._graphs[sig] = GraphedStep(fn, example)
        return step(*inputs)

    def _compiled_cpu(self, key: tuple, make_fn: Callable[[], Callable[..., object]]
                      ) -> Callable[..., object]:
        """The compiled function for ``key`` on a device without graphs (kept per key)."""
        cache = self._cpu_fns
        if key not in cache:
            if len(cache) >= self.max_graphs:
                cache.clear()
            cache[key] = compiled(make_fn(), self.compile_mode)
        return cache[key]
