# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""One memory pool: a 7B-class decoder beside the loop, measured (issue 32).

Phases (each writes its part of the JSON as soon as it ends, so a cut run keeps what ran):

1. ``formats``: the decoder in fp16, int8 and int4 alone: bytes per tenant (weights, KV
   cache, CUDA-graph pool), tokens/s from CUDA-graph replay (and eager, fp16), and each packed
   format checked against fp16 on a full-size layer.
2. ``loop_alone``: the loop step's per-stage and end-to-end p50/p99 and allocations per frame.
3. ``interference``: the loop while the decoder generates: in this process (default stream
   priority; loop on a high-priority stream; plus token pacing) and in a second process
   (free-running; paced). Decoder tokens/s alongside.
4. ``fits``: which formats fit the 16 GiB and 8 GiB pools with the loop (a fresh process per
   case, capped with torch.cuda.set_per_process_memory_fraction).
5. ``soak``: frames plus decode requests of varying prompt length, sampling the allocator
   (reserved - allocated, largest free block), with and without expandable_segments.

The loop step (``--loop-step``): ``graphed`` is issue 31's verified kernels as
edge_loop.kernels.gpu.loop.GraphedLoopStep (locator masks, occupancy, grasp table, segnet;
every graph captured before a decoder exists); ``representative`` the stand-in of the first
runs (edge_loop.memory.loop_step), labelled so; ``kernels`` the eager gpu_loop_step.
6. ``audit`` (with ``graphed``): the loop over a bag's frames (``--bag-npz``, made by
   ``bench/placement_replay.py export``): copies per frame (ledger and CUDA profiler),
   allocations per frame, results against the deployed CPU kernels.

    python3 bench/bench_memory.py --out $OUT                   # H200, about 9 min
    python3 bench/bench_memory.py --loop-step graphed --formats fp16 --decode-compile default \
        --attention matmul --window-s 6 --phases loop,interference,audit,soak --soak-s 300 \
        --soak-variants default --out $OUT                     # the real loop, about 9 min
    python3 bench/bench_memory.py --device cpu --preset tiny --context 256 --window-s 1 \
        --soak-s 2 --out /tmp/m                                # CPU check of the script
    python3 bench/plot_memory.py bench/results/memory_h200.json docs/memory   # the plots
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_loop.memory import counters  # noqa: E402
from edge_loop.memory.budget import GIB, load_budget  # noqa: E402
from edge_loop.memory.loop_step import RepresentativeStep  # noqa: E402
from edge_loop.reasoning import quant  # noqa: E402
from edge_loop.reasoning.decoder import (  # noqa: E402
    PREFILL_BLOCK_TOKENS,
    PRESETS,
    DecodeRunner,
    kv_cache_nbytes,
    random_decoder,
    weights_nbytes,
)
from edge_loop.reasoning.gate import FrameGate  # noqa: E402

LOOP_LABEL = ('representative perception+control step (edge_loop.memory.loop_step), '
              'not the verified loop kernels')
SCRIPT = Path(__file__).resolve()
CAPTURE_PRIORITY = [0]   # --capture-priority: the stream priority the loop's graphs keep


def log(*args: Any) -> None:
    print(time.strftime('%H:%M:%S'), *args, flush=True)


def pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {'n': 0}
    a = np.asarray(values)
    return {'n': int(a.size), 'p50': float(np.percentile(a, 50)),
            'p99': float(np.percentile(a, 99)), 'max': float(a.max())}


def sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) if device.type == 'cuda' else 0


def build_decoder(args: argparse.Namespace, fmt: str, device: torch.device,
                  stream: Any = None) -> tuple[Any, DecodeRunner, dict[str, Any]]:
    """Random decoder + captured runner, with the bytes each part took."""
    dtype = torch.float16 if device.type == 'cuda' else torch.float32
    a0 = allocated(device)
    t0 = time.perf_counter()
    dec = random_decoder(PRESETS[args.preset], fmt=fmt, context=args.context, device=device,
                         dtype=dtype)
    dec.attention = args.attention
    sync(device)
    build_s = time.perf_counter() - t0
    a1 = allocated(device)
    fused = quant.enable_fast_kernels(dec.linear_weights()) if fmt != 'fp16' else {}
    gc.collect()
    if device.type == 'cuda':
        torch.cuda.empty_cache()
    a2 = allocated(device)
    # compiled blocks: fp16 only (the packed formats call their own kernels)
    compile_mode = args.decode_compile if fmt == 'fp16' and args.decode_compile else None
    runner = DecodeRunner(dec, stream=stream, compile_mode=compile_mode)
    runner.start(1, 0)
    runner.capture()
    a3 = allocated(device)
    info = {'format': fmt, 'build_s': build_s, 'weights_bytes': dec.weights_nbytes(),
            'weights_bytes_predicted': weights_nbytes(PRESETS[args.preset], fmt,
                                                      torch.empty(0, dtype=dtype).element_size()),
            'kv_cache_bytes': dec.kv_nbytes(),
            'kv_cache_bytes_predicted': kv_cache_nbytes(PRESETS[args.preset], args.context),
            'allocated_after_build': a1 - a0, 'allocated_after_fused_repack': a2 - a0,
            'graph_pool_bytes': a3 - a2, 'fused_kernels': fused,
            'attention': dec.attention, 'compile_mode': compile_mode,
            'meaningful': dec.meaningful}
    return dec, runner, info


class KernelsLoopStep:
    """Issue 31's :func:`gpu_loop_step` in the shape :func:`run_loop` times.

    Upload (pinned handoff), perception (locator masks, occupancy, grasp scoring), download
    (grid and mask bits through the handoff); ``control`` is empty (the controller is CPU-side).
    """

    label = 'edge_loop.kernels.gpu.loop.gpu_loop_step (issue 31), VGA scene of 5 boxes'

    def __init__(self, device: torch.device) -> None:
        from edge_loop.kernels.gpu import occupancy as gocc
        from edge_loop.kernels.gpu.transfer import CopyLedger, Handoff
        from edge_loop.kernels.object_locator import locate_objects, rank_targets
        from edge_loop.verify.sweeps import scene

        self.device = device
        base = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
        self.color, self.depth = base.color, base.depth
        self.host_depth = torch.from_numpy(self.depth)   # run_loop perturbs a few pixels
        self.intr, self.ext = base.intrinsics, base.extrinsics
        objs = locate_objects(self.color, self.depth, self.intr, self.ext)
        pts = np.ascontiguousarray(objs[rank_targets(objs)[0]].points, np.float32)
        self.target = torch.from_numpy(pts).to(device)
        self.handoff = Handoff(device, 'pinned' if device.type == 'cuda' else 'pageable',
                               CopyLedger())
        self.mapper = gocc.TorchOccupancyMapper(device=device)
        self.tensors: dict[str, torch.Tensor] = {}
        self.result: Any = None

    def fill_frame(self, generator: torch.Generator) -> None:
        return None

    def nbytes(self) -> dict[str, int]:
        return {'device': int(self.mapper.logodds_t.numel() * 4), 'host': 0}

    def upload(self) -> None:
        self.tensors = {'color': self.handoff.to_device(self.color),
                        'depth': self.handoff.to_device(self.depth)}

    def perceive(self) -> None:
        from edge_loop.kernels.gpu.loop import gpu_loop_step

        self.result = gpu_loop_step(self.tensors, self.intr, self.ext, self.mapper,
                                    target_points=self.target)

    def control(self) -> None:
        return None

    def download(self) -> None:
        for name, t in (('grid', self.result.grid), ('mask bits', self.result.fg_bits),
                        ('mask bits', self.result.cut_bits)):
            self.handoff.to_host(t, name)

    def __call__(self) -> Any:
        with torch.inference_mode():
            self.upload()
            self.perceive()
            self.download()
        return self.result


class GraphedKernelsStep:
    """Issue 31's verified kernels as :class:`~edge_loop.kernels.gpu.loop.GraphedLoopStep`.

    The four GPU stages (locator masks, occupancy update, grasp table, segnet) on a VGA scene
    of 5 boxes, each a CUDA graph captured when this is built (before any decoder exists),
    the locator's target fixed (its CPU tail is not part of the GPU loop).
    """

    label = ('edge_loop.kernels.gpu.loop.GraphedLoopStep (issue 31 kernels: locator masks, '
             'occupancy, grasp table, segnet fp32), VGA scene of 5 boxes, graphs captured '
             'before the decoder starts')

    def __init__(self, device: torch.device) -> None:
        from edge_loop.kernels.gpu.loop import GraphedLoopStep
        from edge_loop.kernels.gpu.segnet import torch_segnet
        from edge_loop.kernels.object_locator import locate_objects, rank_targets
        from edge_loop.verify.sweeps import scene

        self.device = device
        base = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
        objs = locate_objects(base.color, base.depth, base.intrinsics, base.extrinsics)
        self.step = GraphedLoopStep(device, base.intrinsics, base.extrinsics,
                                    segnet_model=torch_segnet(device),
                                    priority=CAPTURE_PRIORITY[0])
        self.step.load(base.color, base.depth, objs[rank_targets(objs)[0]].points)
        self.stage_names = self.step.stage_names
        self.n_events = len(self.stage_names) + 3

    def perturb(self, generator: torch.Generator) -> None:
        """A few depth pixels change per frame (the host slot the transport writes)."""
        k = 1 + int(torch.randint(0, 8, (1,), generator=generator))
        self.step.host_in['depth'][0, :k] = 700 + k

    def timed(self, events: list) -> Any:
        return self.step(events)

    def nbytes(self) -> dict[str, int]:
        return self.step.nbytes()

    def __call__(self) -> Any:
        return self.step()


def make_loop_step(args: argparse.Namespace, device: torch.device) -> Any:
    """The loop step to measure: ours (representative) or issue 31's kernels."""
    if args.loop_step == 'kernels':
        return KernelsLoopStep(device)
    if args.loop_step == 'graphed':
        return GraphedKernelsStep(device)
    step = RepresentativeStep(device=device)
    step.fill_frame(torch.Generator().manual_seed(0))
    return step


def release(*objs: Any) -> None:
    del objs
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def quant_check(device: torch.device) -> dict[str, Any]:
    """Each packed format against fp16 on one full-size MLP weight (11008 x 4096)."""
    dtype = torch.float16 if device.type == 'cuda' else torch.float32
    gen = torch.Generator(device=device).manual_seed(7)
    w = torch.randn(11008, 4096, device=device, dtype=dtype, generator=gen) * 0.02
    x = torch.randn(4, 4096, device=device, dtype=dtype, generator=gen)
    ref = (x.double() @ w.double().T)
    out = {}
    for fmt in ('int8', 'int4'):
        layer = quant.make_weight(w, fmt)
        err_ref = float((layer.reference(x).double() - ref).norm() / ref.norm())
        why = layer.try_fast()
        err_fast = (float((layer.forward(x).double() - ref).norm() / ref.norm())
                    if why is None else None)
        out[fmt] = {'rel_error_vs_fp64_dense': err_ref, 'fused_rel_error': err_fast,
                    'fused_unavailable': why}
    out['fp16_rel_error'] = float((quant.DenseWeight(w).forward(x).double() - ref).norm()
                                  / ref.norm())
    return out


def phase_formats(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    out: dict[str, Any] = {'quant_check': quant_check(device)}
    for fmt in args.formats:
        dec, runner, info = build_decoder(args, fmt, device)
        runner.tokens_per_second(8)
        info['tokens_per_s_graph'] = runner.tokens_per_second(args.tokens)
        if fmt == 'fp16':
            runner.graph, eager = None, DecodeRunner(dec)
            eager.start(1, 0)
            eager.tokens_per_second(2)
            info['tokens_per_s_eager'] = eager.tokens_per_second(max(8, args.tokens // 10))
        info['memory'] = counters.fragmentation(device) if device.type == 'cuda' else None
        log(f'decoder {fmt}: {info["weights_bytes"] / GIB:.2f} GiB weights, '
            f'{info["tokens_per_s_graph"]:.1f} tok/s graph', info.get('tokens_per_s_eager', ''))
        out[fmt] = info
        release(dec, runner)
        del dec, runner
        release()
    return out


class DecoderThread(threading.Thread):
    """Generates continuously in this process, one synchronised token at a time."""

    def __init__(self, runner: DecodeRunner, pace_tps: float, gate: FrameGate | None = None
                 ) -> None:
        super().__init__(daemon=True)
        self.runner, self.pace_tps, self.gate = runner, pace_tps, gate
        self.stop_flag = threading.Event()
        self.tokens = 0
        self.seconds = 0.0

    def run(self) -> None:
        dev = self.runner.decoder.device
        done = torch.cuda.Event() if dev.type == 'cuda' else None
        interval = 1.0 / self.pace_tps if self.pace_tps > 0 else 0.0
        t0 = time.perf_counter()
        next_t = t0
        while not self.stop_flag.is_set():
            if self.gate is not None:   # chunk by chunk, between the loop's frames
                self.runner.step_between_frames(self.gate, done)
                self.tokens += 1
                continue
            self.runner.step()
            if done is not None:
                done.record(self.runner.stream)
                done.synchronize()   # read each token, as a real generation loop does
            self.tokens += 1
            if interval:
                next_t += interval
                delay = next_t - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                else:
                    next_t = time.perf_counter()
        self.seconds = time.perf_counter() - t0


def run_loop(step: RepresentativeStep, seconds: float, hz: float, deadline_ms: float,
             stream: Any = None, samples: list[float] | None = None,
             gate: FrameGate | None = None) -> dict[str, Any]:
    """Frames at ``hz`` for ``seconds``: per-stage (device events) and end-to-end latency."""
    dev = step.device
    cuda = dev.type == 'cuda'
    stages: dict[str, list[float]] = {'upload': [], 'perception': [], 'control': [],
                                      'download': []}
    e2e: list[float] = []
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(5)] if cuda else None
    gen = torch.Generator().manual_seed(3)
    period = 1.0 / hz
    t_end = time.perf_counter() + seconds
    next_t = time.perf_counter()
    ctx = torch.cuda.stream(stream) if cuda and stream is not None else None
    if hasattr(step, 'stage_names'):
        return run_graphed_loop(step, seconds, hz, deadline_ms, stream, samples, gate)
    if gate is not None:
        raise ValueError('the frame gate is wired into the graphed loop step only')
    while time.perf_counter() < t_end:
        step.host_depth[0, : 1 + int(torch.randint(0, 8, (1,), generator=gen))] = 0.7
        t0 = time.perf_counter()
        if ctx is not None:
            ctx.__enter__()
        try:
            if cuda:
                ev[0].record()
                step.upload()
                ev[1].record()
                step.perceive()
                ev[2].record()
                step.control()
                ev[3].record()
                step.download()
                ev[4].record()
                ev[4].synchronize()
            else:
                step()
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        e2e.append((time.perf_counter() - t0) * 1e3)
        if samples is not None:
            samples.append(e2e[-1])
        if cuda:
            for name, a, b in (('upload', 0, 1), ('perception', 1, 2), ('control', 2, 3),
                               ('download', 3, 4)):
                stages[name].append(ev[a].elapsed_time(ev[b]))
        next_t += period
        delay = next_t - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        else:
            next_t = time.perf_counter()
    return {'stages_ms': {k: pct(v) for k, v in stages.items()}, 'end_to_end_ms': pct(e2e),
            'deadline_ms': deadline_ms, 'deadline_misses': int(sum(x > deadline_ms for x in e2e)),
            'frames': len(e2e)}


def run_graphed_loop(step: GraphedKernelsStep, seconds: float, hz: float, deadline_ms: float,
                     stream: Any = None, samples: list[float] | None = None,
                     gate: FrameGate | None = None) -> dict[str, Any]:
    """:func:`run_loop` for a step of CUDA-graphed stages: each stage timed by device events.

    End to end = host wall time from the frame's start (the slot written) to the ranked
    grasps on the host (upload, every stage, download, the host's ranking). With ``gate``,
    the frame is announced to it at its start and released, with the next frame's due time,
    once its results are on the host.
    """
    dev = step.device
    cuda = dev.type == 'cuda'
    names = ('upload', *step.stage_names, 'download')
    stages: dict[str, list[float]] = {k: [] for k in names}
    e2e: list[float] = []
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(step.n_events)] if cuda else None
    gen = torch.Generator().manual_seed(3)
    period = 1.0 / hz
    t_end = time.perf_counter() + seconds
    next_t = time.perf_counter()
    ctx = torch.cuda.stream(stream) if cuda and stream is not None else contextlib.nullcontext()
    with ctx:
        while time.perf_counter() < t_end:
            step.perturb(gen)
            if gate is not None:
                gate.frame_begin()
            t0 = time.perf_counter()
            step.timed(ev) if cuda else step()
            e2e.append((time.perf_counter() - t0) * 1e3)
            next_t += period
            if gate is not None:
                gate.frame_end(max(next_t, time.perf_counter()))
            if samples is not None:
                samples.append(e2e[-1])
            if cuda:
                for i, name in enumerate(names):
                    stages[name].append(ev[i].elapsed_time(ev[i + 1]))
            delay = next_t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.perf_counter()
    gpu = [sum(v) for v in zip(*(stages[n] for n in step.stage_names), strict=True)]
    return {'stages_ms': {k: pct(v) for k, v in stages.items()},
            'gpu_stages_total_ms': pct(gpu), 'end_to_end_ms': pct(e2e),
            'deadline_ms': deadline_ms, 'deadline_misses': int(sum(x > deadline_ms for x in e2e)),
            'frames': len(e2e)}


def make_stream(device: torch.device, high: bool) -> Any:
    if device.type != 'cuda':
        return None
    # CUDA: lower numbers are higher priorities; -1 is the highest torch exposes on Hopper
    return torch.cuda.Stream(device=device, priority=-1 if high else 0)


def phase_loop_alone(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    a0 = allocated(device)
    step = make_loop_step(args, device)
    sync(device)
    out: dict[str, Any] = {'label': getattr(step, 'label', LOOP_LABEL),
                           'resident_bytes': step.nbytes(),
                           'allocated_bytes': allocated(device) - a0}
    warm, frames = (20, 50) if device.type == 'cuda' else (2, 5)   # the CPU is slow
    for _ in range(warm):
        step()
    sync(device)
    out['allocations_per_frame'] = counters.allocations_per_frame(step, frames, device)
    for name, high in (('default_stream', False), ('high_priority_stream', True)):
        out[name] = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms,
                             make_stream(device, high))
        log(f'loop alone {name}:', json.dumps(out[name]['end_to_end_ms']))
    return out


def worker_command(args: argparse.Namespace, fmt: str, seconds: float, pace: float) -> list[str]:
    return [sys.executable, str(SCRIPT), 'worker', '--device', args.device, '--preset',
            args.preset, '--context', str(args.context), '--formats', fmt,
            '--window-s', str(seconds), '--pace-tps', str(pace), *decoder_flags(args)]


def decoder_flags(args: argparse.Namespace) -> list[str]:
    """The decode-step variant's flags, for the subprocesses."""
    return ['--attention', args.attention, '--decode-compile', args.decode_compile]


def decoder_window(step: Any, runner: DecodeRunner, args: argparse.Namespace, hz: float,
                   stream: Any, pace: float = 0.0, gate: FrameGate | None = None
                   ) -> dict[str, Any]:
    """One window of the loop at ``hz`` with ``runner`` generating in this process beside it.

    The decoder starts half a second before the loop's window and stops after it (paced to
    ``pace`` tokens/s, or chunk by chunk between frames through ``gate``); the loop's
    statistics come back with the decoder's tokens/s over its whole run.
    """
    thread = DecoderThread(runner, pace, gate)
    thread.start()
    time.sleep(0.5)
    res = run_loop(step, args.window_s, hz, args.deadline_ms, stream, gate=gate)
    thread.stop_flag.set()
    if gate is not None:
        gate.frame_end(None)   # no more frames: let the last chunk through
    thread.join()
    res['decoder_tokens_per_s'] = thread.tokens / max(thread.seconds, 1e-9)
    return res


def phase_interference(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The loop alone and beside a decoder generating continuously, side by side in one run.

    Order: the loop step is built first (a graphed step captures all its graphs here, before
    any decoder exists), warmed, then: decoder alone; loop alone; the decoder in this process
    (loop on a default / high-priority stream; token pacing); loop alone again (drift); the
    decoder freed and one second process generating (free-running; paced) while the loop runs;
    loop alone at the end.
    """
    step = make_loop_step(args, device)
    for _ in range(50 if device.type == 'cuda' else 2):
        step()
    sync(device)
    out: dict[str, Any] = {'label': getattr(step, 'label', LOOP_LABEL),
                           'decoder_format': args.formats[0],
                           'switch_interval_s': sys.getswitchinterval()}
    hi, lo = make_stream(device, True), make_stream(device, False)
    dec, runner, info = build_decoder(args, args.formats[0], device, stream=lo)
    runner.tokens_per_second(8)
    out['decoder'] = {k: info[k] for k in ('weights_bytes', 'kv_cache_bytes', 'graph_pool_bytes',
                                           'compile_mode', 'attention')}
    out['decoder_alone_tokens_per_s_graph'] = runner.tokens_per_second(args.tokens)
    thread = DecoderThread(runner, 0.0)
    thread.start()
    time.sleep(3.0)
    thread.stop_flag.set()
    thread.join()
    out['decoder_alone_thread_tokens_per_s'] = thread.tokens / max(thread.seconds, 1e-9)
    log('decoder alone: graph', f'{out["decoder_alone_tokens_per_s_graph"]:.1f}',
        'thread', f'{out["decoder_alone_thread_tokens_per_s"]:.1f} tok/s')
    out['loop_alone_before'] = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms, hi)
    log('loop alone (high priority):', json.dumps(out['loop_alone_before']['end_to_end_ms']))
    for name, loop_stream, pace in (('same_process_default_priority', make_stream(device, False),
                                     0.0),
                                    ('same_process_high_priority', hi, 0.0),
                                    ('same_process_high_priority_paced', hi, args.pace_tps)):
        res = decoder_window(step, runner, args, args.loop_hz, loop_stream, pace)
        res['pace_tps'] = pace
        out[name] = res
        log(f'{name}: e2e', json.dumps(res['end_to_end_ms']),
            f'tok/s {res["decoder_tokens_per_s"]:.1f}')
    out['loop_alone_after'] = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms, hi)
    release(dec, runner)
    del dec, runner, thread
    release()
    proc = subprocess.Popen(worker_command(args, args.formats[0], 0.0, 0.0),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith('READY'):
            line = proc.stdout.readline()
        for name, pace in (('second_process', 0.0), ('second_process_paced', args.pace_tps)):
            proc.stdin.write(f'start {pace}\n')
            proc.stdin.flush()
            time.sleep(0.5)
            res = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms, hi)
            proc.stdin.write('stop\n')
            proc.stdin.flush()
            worker_res = json.loads(proc.stdout.readline())
            res['decoder_tokens_per_s'] = worker_res['tokens_per_s']
            res['pace_tps'] = pace
            out[name] = res
            log(f'{name}: e2e', json.dumps(res['end_to_end_ms']),
                f'tok/s {res["decoder_tokens_per_s"]:.1f}')
        proc.stdin.write('quit\n')
        proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out['loop_alone_end'] = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms, hi)
    out['ratios_vs_alone_before'] = ratios(out)
    log('ratios:', json.dumps(out['ratios_vs_alone_before']))
    return out


def phase_gated(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The decoder scheduled between the loop's frames (edge_loop.reasoning.gate), side by side.

    Same process, loop on a high-priority stream. Windows in one run: the loop alone at each
    rate used; the decoder free-running beside the loop (one graph per token, the last
    sessions' best arrangement); then each ``--gate-cases`` entry ``chunks:guard_ms:hz``: the
    decode step captured as that many graphs of consecutive layers, a chunk launched only
    when it is expected to end ``guard_ms`` before the next frame (negative: it may run that
    far into it), the loop at ``hz``; the loop alone again at the end. Per case: stages and
    end-to-end p50/p99, misses, tokens/s, the gate's counters, p99 ratios to the loop alone
    at the same rate (the first window).
    """
    cases = []
    for spec in args.gate_cases:
        chunks, guard_ms, hz = spec.split(':')
        cases.append((int(chunks), float(guard_ms), float(hz)))
    step = make_loop_step(args, device)
    for _ in range(50 if device.type == 'cuda' else 2):
        step()
    sync(device)
    out: dict[str, Any] = {'label': getattr(step, 'label', LOOP_LABEL),
                           'decoder_format': args.formats[0], 'cases': args.gate_cases}
    hi, lo = make_stream(device, True), make_stream(device, False)
    dec, runner, info = build_decoder(args, args.formats[0], device, stream=lo)
    out['decoder'] = {k: info[k] for k in ('weights_bytes', 'kv_cache_bytes', 'graph_pool_bytes',
                                           'compile_mode', 'attention')}
    chunked = {}
    for k in sorted({c for c, _, _ in cases}):
        # shares the decoder: weights, KV cache and its compiled block
        r = DecodeRunner(dec, stream=lo, chunks=k)
        r.start(1, 0)
        r.capture()
        chunked[k] = r
        out[f'decoder_alone_tokens_per_s_chunks_{k}'] = r.tokens_per_second(args.tokens)
    out['decoder_alone_tokens_per_s_graph'] = runner.tokens_per_second(args.tokens)
    log('decoder alone tok/s:', out['decoder_alone_tokens_per_s_graph'],
        {k: round(out[f'decoder_alone_tokens_per_s_chunks_{k}'], 1) for k in chunked})
    alone: dict[float, dict[str, Any]] = {}
    for hz in sorted({args.loop_hz, *(h for _, _, h in cases)}, reverse=True):
        alone[hz] = run_loop(step, args.window_s, hz, args.deadline_ms, hi)
        out[f'loop_alone_{hz:g}hz'] = alone[hz]
        log(f'loop alone {hz:g} Hz:', json.dumps(alone[hz]['end_to_end_ms']))
    windows = [('same_process_free', runner, None, args.loop_hz)] + [
        (f'gated_chunks_{k}_guard_{g:g}ms_{hz:g}hz', chunked[k], FrameGate(guard_s=g / 1e3), hz)
        for k, g, hz in cases]
    ratios_out = {}
    for name, r, gate, hz in windows:
        res = decoder_window(step, r, args, hz, hi, gate=gate)
        res['loop_hz'] = hz
        if gate is not None:
            res['gate'] = gate_summary(gate)
        out[name] = res
        ratios_out[name] = ratios({'loop_alone_before': alone[hz], name: res})[name]
        log(f'{name}: e2e', json.dumps(res['end_to_end_ms']),
            f'tok/s {res["decoder_tokens_per_s"]:.1f}', json.dumps(ratios_out[name]))
    out['loop_alone_end'] = run_loop(step, args.window_s, args.loop_hz, args.deadline_ms, hi)
    ratios_out['loop_alone_end'] = ratios({'loop_alone_before': alone[args.loop_hz],
                                           'end': out['loop_alone_end']})['end']
    out['ratios_vs_alone_same_rate'] = ratios_out
    release(dec, runner, *chunked.values())
    return out


def gate_summary(gate: FrameGate) -> dict[str, Any]:
    """The gate's counters and the longest recent run per kind of piece (ms)."""
    st = gate.stats
    return {'guard_ms': gate.guard_s * 1e3, 'runs': st.runs, 'waited_s': st.waited_s,
            'frames': st.frames, 'overlapped_frames': st.overlapped_frames,
            'idle_runs': st.idle_runs, 'forced_runs': st.forced_runs,
            'chunk_ms_max': {str(k): v * 1e3 for k, v in st.longest_s.items()},
            'chunk_ms_expected': {str(k): gate.expected_s(k) * 1e3 for k in st.run_s}}


def ratios(out: dict[str, Any]) -> dict[str, Any]:
    """p99 with the decoder / p99 alone, per stage and end to end, for every case."""
    base = out['loop_alone_before']
    res = {}
    for name, case in out.items():
        if not (isinstance(case, dict) and 'stages_ms' in case) or case is base:
            continue
        r = {k: case['stages_ms'][k]['p99'] / v['p99']
             for k, v in base['stages_ms'].items()
             if v.get('p99') and case['stages_ms'][k].get('p99')}
        if base.get('gpu_stages_total_ms', {}).get('p99'):
            r['gpu_stages_total'] = (case['gpu_stages_total_ms']['p99']
                                     / base['gpu_stages_total_ms']['p99'])
        r['end_to_end'] = case['end_to_end_ms']['p99'] / base['end_to_end_ms']['p99']
        r['deadline_misses'] = case['deadline_misses']
        r['decoder_tokens_per_s'] = case.get('decoder_tokens_per_s')
        res[name] = r
    return res


def worker(args: argparse.Namespace) -> None:
    """Second process: build, say READY, then generate between 'start PACE' and 'stop'.

    Each 'stop' prints the tokens/s of that run as JSON; 'quit' ends the process.
    """
    device = torch.device(args.device)
    dec, runner, _ = build_decoder(args, args.formats[0], device,
                                   stream=make_stream(device, False))
    runner.tokens_per_second(8)
    print('READY', flush=True)
    thread = None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == 'start':
            thread = DecoderThread(runner, float(cmd[1]))
            thread.start()
        elif cmd[0] == 'stop' and thread is not None:
            thread.stop_flag.set()
            thread.join()
            print(json.dumps({'tokens_per_s': thread.tokens / thread.seconds}), flush=True)
        elif cmd[0] == 'quit':
            break


def phase_audit(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The graphed loop over a bag's frames, checked and audited.

    Copies per frame (the step's ledger, and CUDA's own count through the profiler),
    allocations per frame, and the results against the deployed CPU kernels.
    """
    from edge_loop.kernels import occupancy as occ
    from edge_loop.kernels.camera import D435_VGA, Extrinsics
    from edge_loop.kernels.gpu.locator import pixel_masks_reference, unpack_mask
    from edge_loop.kernels.gpu.loop import GraphedLoopStep
    from edge_loop.kernels.gpu.segnet import torch_segnet
    from edge_loop.kernels.grasp_planner import plan_grasp
    from edge_loop.kernels.object_locator import locate_objects, rank_targets

    data = np.load(args.bag_npz)
    colors, depths = data['color'], data['depth']
    if str(data['encodings'][0]) == 'bgr8':
        colors = colors[..., ::-1]
    h, w = depths.shape[1:]
    intr = D435_VGA.scaled(w, h)
    ext = Extrinsics.from_params([0.0, 0.0, 0.75], [1.0, 0.0, 0.0, 0.0])   # the nodes' default
    step = GraphedLoopStep(device, intr, ext, segnet_model=torch_segnet(device))
    cpu_mapper = occ.OccupancyMapper()
    targets = []
    for c, d in zip(colors, depths, strict=True):   # the locator's CPU tail, not timed
        objs = locate_objects(c, d, intr, ext)
        targets.append(objs[rank_targets(objs)[0]] if objs else None)
    agree = {'grid': 0, 'fg': 0, 'cut': 0, 'grasp': 0, 'frames': 0}
    e2e = []
    step.ledger.reset()
    cuda = device.type == 'cuda'
    a0 = torch.cuda.memory_stats(device).get('allocation.all.allocated', 0) if cuda else 0
    for _ in range(args.audit_passes):
        for i in range(len(colors)):
            step.load(colors[i], depths[i],
                      targets[i].points if targets[i] is not None else None)
            t0 = time.perf_counter()
            grasps = step()
            e2e.append((time.perf_counter() - t0) * 1e3)
            agree['frames'] += 1
            agree['grid'] += int(np.array_equal(step.host_out['grid'].numpy(),
                                                cpu_mapper.update(depths[i], intr, ext)))
            if agree['frames'] <= len(colors):   # masks and grasps: the first pass
                ref = pixel_masks_reference(colors[i], depths[i], intr, ext)
                agree['fg'] += int(np.array_equal(
                    unpack_mask(step.host_out['fg_bits'].numpy(), (h, w)), ref.fg))
                agree['cut'] += int(np.array_equal(
                    unpack_mask(step.host_out['cut_bits'].numpy(), (h, w)), ref.cut))
                best = (plan_grasp(depths[i], intr, ext, target=targets[i])
                        if targets[i] is not None else [])
                agree['grasp'] += int((not best and not grasps) or (
                    bool(best) and bool(grasps)
                    and np.allclose(best[0].center, grasps[0].center, atol=2e-3)))
    frames = agree['frames']
    out: dict[str, Any] = {
        'bag': str(data['bag']) if 'bag' in data else args.bag_npz, 'frames': frames,
        'agreement': agree, 'agreement_note': 'grid on every frame; masks and best grasp '
        '(2 mm) on the first pass', 'step_ms': pct(e2e),
        'copies_per_frame_ledger': step.ledger.per_frame(frames),
        'cuda_allocations_per_frame': ((torch.cuda.memory_stats(device).get(
            'allocation.all.allocated', 0) - a0) / frames) if cuda else None}
    if cuda:
        out['copies_per_frame_profiler'] = profiler_copies(step, colors, depths, targets)
    log('audit:', json.dumps({k: out[k] for k in ('agreement', 'copies_per_frame_ledger',
                                                   'cuda_allocations_per_frame')}))
    return out


def profiler_copies(step: Any, colors: np.ndarray, depths: np.ndarray,
                    targets: list) -> dict[str, Any]:
    """Host<->device copies per frame as CUDA itself reports them (torch profiler, CUPTI)."""
    from torch.profiler import ProfilerActivity, profile

    n = min(20, len(colors))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            step.load(colors[i], depths[i],
                      targets[i].points if targets[i] is not None else None)
            step()
    counts: dict[str, float] = {}
    for ev in prof.events():
        if ev.name.startswith(('Memcpy', 'Memset')):
            counts[ev.name] = counts.get(ev.name, 0) + 1 / n
    return {'per_frame': counts, 'frames': n}


def fit_case(args: argparse.Namespace) -> None:
    """Fresh process: cap at the pool, build decoder + loop, run both; print JSON."""
    device = torch.device(args.device)
    pool = args.pool_gib * GIB
    result: dict[str, Any] = {'pool_gib': args.pool_gib, 'format': args.formats[0]}
    if device.type == 'cuda':
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(
            min(1.0, pool / total), device.index or torch.cuda.current_device())
    try:
        step = make_loop_step(args, device)
        dec, runner, info = build_decoder(args, args.formats[0], device,
                                          stream=make_stream(device, False))
        runner.tokens_per_second(16)
        for _ in range(20):
            step()
        sync(device)
        result.update(fits=True, weights_bytes=info['weights_bytes'])
    except torch.OutOfMemoryError as exc:
        result.update(fits=False, error=str(exc).splitlines()[0][:200])
    if device.type == 'cuda':
        result['memory'] = counters.fragmentation(device)
    print(json.dumps(result), flush=True)


def phase_fits(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {'note': 'torch allocator capped per process; the CUDA context '
                           '(driver memory) is outside the cap'}
    for pool_gib in (16, 8):
        for fmt in args.formats:
            cmd = [sys.executable, str(SCRIPT), 'fit', '--device', args.device, '--preset',
                   args.preset, '--context', str(args.context), '--formats', fmt,
                   '--pool-gib', str(pool_gib), '--loop-step', args.loop_step,
                   *decoder_flags(args)]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            try:
                case = json.loads(res.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                case = {'fits': None, 'error': res.stderr[-400:]}
            budget = load_budget(Path(__file__).resolve().parents[1] / 'config' / 'memory.yaml',
                                 overrides={'reasoner': {'format': fmt, 'context': args.context}})
            budget = budget.with_pool(f'{pool_gib} GiB', pool_gib * GIB)
            case['budget_admits'] = budget.fits()
            case['budget_reserved_bytes'] = budget.reserved
            out[f'{fmt}_{pool_gib}GiB'] = case
            log(f'fit {fmt} in {pool_gib} GiB: measured {case.get("fits")}, '
                f'budget {case["budget_admits"]}')
    return out


def soak(args: argparse.Namespace) -> None:
    """Frames + decode requests with prompts of varying length; allocator sampled each second."""
    device = torch.device(args.device)
    cuda = device.type == 'cuda'
    pool = args.pool_gib * GIB
    if cuda:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(
            min(1.0, pool / total), device.index or torch.cuda.current_device())
    step = make_loop_step(args, device)
    lo = make_stream(device, False)
    dec, runner, _ = build_decoder(args, args.formats[0], device, stream=lo)
    gate = None
    if args.soak_gate:
        # prompts and tokens in layer chunks, each only between the loop's frames
        chunks, guard_ms = args.soak_gate.split(':')
        # the one-graph runner is not used: its graph pool goes back before the chunks'
        # capture, or it would stay reserved and count as fragmentation
        runner = None
        release()
        runner = DecodeRunner(dec, stream=lo, chunks=int(chunks))
        runner.start(1, 0)
        runner.capture()
        gate = FrameGate(guard_s=float(guard_ms) / 1e3)
    done = torch.cuda.Event() if cuda else None
    stop = threading.Event()
    counts = {'requests': 0, 'tokens': 0, 'prefill_tokens': 0}
    rng = np.random.default_rng(5)

    def requests() -> None:
        while not stop.is_set():
            n_prompt = int(rng.integers(16, min(512, args.context // 2)))
            tokens = torch.from_numpy(rng.integers(0, dec.cfg.vocab_size, n_prompt)).to(device)
            if gate is not None:
                runner.prefill_between_frames(tokens, gate, done, args.prefill_block)
                for _ in range(args.tokens_per_request):
                    if stop.is_set():
                        break
                    runner.step_between_frames(gate, done)
                    counts['tokens'] += 1
            else:
                with torch.cuda.stream(lo) if cuda else contextlib.nullcontext():
                    logits = dec.forward(tokens, torch.arange(n_prompt, device=device),
                                         last_only=True)
                    first = int(logits[-1].argmax())
                runner.start(first, n_prompt)
                for _ in range(args.tokens_per_request):
                    runner.step()
                    counts['tokens'] += 1
                del logits
            if cuda:
                lo.synchronize()
            counts['requests'] += 1
            counts['prefill_tokens'] += n_prompt
            del tokens

    thread = threading.Thread(target=requests, daemon=True)
    thread.start()
    samples = []
    t0 = time.perf_counter()
    loop_stats: list[dict[str, Any]] = []
    hi_stream = make_stream(device, True)
    e2e_all: list[float] = []
    while time.perf_counter() - t0 < args.window_s:
        loop_stats.append(run_loop(step, 1.0, args.loop_hz, args.deadline_ms, hi_stream,
                                   e2e_all, gate=gate))
        if cuda:
            samples.append({'t': time.perf_counter() - t0, **counters.fragmentation(device)})
    stop.set()
    if gate is not None:
        gate.frame_end(None)   # no more frames: let the last piece through
    thread.join()
    e2e_p99 = [s['end_to_end_ms'].get('p99', 0.0) for s in loop_stats]
    result = {'expandable_segments': 'expandable_segments:True' in os.environ.get(
        'PYTORCH_CUDA_ALLOC_CONF', ''), 'pool_gib': args.pool_gib, 'format': args.formats[0],
        'seconds': time.perf_counter() - t0, 'frames': sum(s['frames'] for s in loop_stats),
        'deadline_misses': sum(s['deadline_misses'] for s in loop_stats),
        'loop_end_to_end_ms': pct(e2e_all),
        'loop_p99_ms_per_second': {'max': max(e2e_p99, default=0.0),
                                   'median': float(np.median(e2e_p99)) if e2e_p99 else 0.0},
        **counts, 'samples': samples,
        'gate': gate_summary(gate) if gate is not None else None}
    if samples:
        result['final'] = samples[-1]
        result['reserved_minus_allocated_over_pool_final'] = (
            samples[-1]['reserved_minus_allocated'] / pool)
        result['reserved_minus_allocated_over_pool_max'] = max(
            s['reserved_minus_allocated'] for s in samples) / pool
    Path(args.result).write_text(json.dumps(result))


def phase_soak(args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {'label': LOOP_LABEL if args.loop_step == 'representative'
                           else KernelsLoopStep.label}
    variants = args.soak_variants.split(',')
    for expandable in [v == 'expandable' for v in variants]:
        env = dict(os.environ)
        env['PYTORCH_CUDA_ALLOC_CONF'] = f'expandable_segments:{expandable}'
        tag = '_gated' if args.soak_gate else ''
        path = out_dir / f'soak_{"expandable" if expandable else "default"}{tag}.json'
        cmd = [sys.executable, str(SCRIPT), 'soak', '--device', args.device, '--preset',
               args.preset, '--context', str(args.context), '--formats', args.soak_format,
               '--pool-gib', str(args.soak_pool_gib), '--window-s', str(args.soak_s),
               '--result', str(path), '--loop-hz', str(args.loop_hz),
               '--loop-step', args.loop_step, '--capture-priority', str(args.capture_priority),
               '--soak-gate', args.soak_gate, '--prefill-block', str(args.prefill_block),
               *decoder_flags(args)]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=args.soak_s + 240)
        if res.returncode != 0:
            out[str(expandable)] = {'error': res.stderr[-800:]}
            continue
        data = json.loads(path.read_text())   # kept beside the main JSON: a cut run keeps it
        key = 'expandable_segments' if expandable else 'default_segments'
        out[key] = data
        final = data.get('final', {})
        log(f'soak {key}: {data["frames"]} frames, {data["tokens"]} tokens, '
            f'{data["requests"]} requests, reserved-allocated '
            f'{final.get("reserved_minus_allocated", 0) / 2**20:.1f} MiB, largest free '
            f'{final.get("largest_free_block", 0) / 2**20:.1f} MiB')
    return out


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {'torch': torch.__version__, 'python': sys.version.split()[0],
                           'device': str(device)}
    if device.type == 'cuda':
        props = torch.cuda.get_device_properties(device)
        env.update(name=props.name, total_memory=props.total_memory,
                   cuda=torch.version.cuda,
                   stream_priority_range=list(torch.cuda.Stream.priority_range())
                   if hasattr(torch.cuda.Stream, 'priority_range') else None)
        try:
            env['driver'] = subprocess.run(
                ['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except OSError:
            env['driver'] = None
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('mode', nargs='?', default='all',
                        choices=('all', 'worker', 'fit', 'soak'))
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--preset', default='llama2_7b', choices=sorted(PRESETS))
    parser.add_argument('--context', type=int, default=1024)
    parser.add_argument('--formats', type=lambda s: s.split(','), default=['fp16', 'int8',
                                                                            'int4'])
    parser.add_argument('--tokens', type=int, default=256)
    parser.add_argument('--loop-hz', type=float, default=100.0)
    parser.add_argument('--deadline-ms', type=float, default=10.0)
    parser.add_argument('--window-s', type=float, default=8.0)
    parser.add_argument('--pace-tps', type=float, default=150.0)
    parser.add_argument('--pool-gib', type=float, default=16.0)
    parser.add_argument('--soak-s', type=float, default=100.0)
    parser.add_argument('--soak-format', default='fp16')
    parser.add_argument('--soak-pool-gib', type=float, default=16.0)
    parser.add_argument('--tokens-per-request', type=int, default=64)
    parser.add_argument('--loop-step', default='representative',
                        choices=('representative', 'kernels', 'graphed'),
                        help="the loop step: ours (labelled representative), issue 31's "
                        'gpu_loop_step (eager) or its stages as CUDA graphs (graphed)')
    parser.add_argument('--attention', default='sdpa', choices=('sdpa', 'matmul'),
                        help='decoder attention (see edge_loop.reasoning.decoder)')
    parser.add_argument('--decode-compile', default='',
                        help='torch.compile mode of the fp16 decode blocks ("" = eager blocks)')
    parser.add_argument('--soak-gate', default='',
                        help="chunks:guard_ms: the soak's decoder (prompts and tokens) in that "
                             "many layer chunks, each only between the loop's frames "
                             '(edge_loop.reasoning.gate); empty: free-running')
    parser.add_argument('--prefill-block', type=int, default=PREFILL_BLOCK_TOKENS,
                        help="gated soak: a prompt's prefill in blocks of this many tokens "
                        '(0: the whole prompt in each layer chunk, as before)')
    parser.add_argument('--soak-variants', default='default,expandable',
                        help='allocator settings of the soak, one run each')
    parser.add_argument('--phases', default='formats,loop,interference,fits,soak',
                        help='any of formats,loop,interference,gated,fits,audit,soak')
    parser.add_argument('--bag-npz', default='.replay/grasp_nominal.npz',
                        help='frames of a bag (bench/placement_replay.py export) for the audit')
    parser.add_argument('--audit-passes', type=int, default=5)
    parser.add_argument('--switch-interval-ms', type=float, default=0.5,
                        help="Python's thread switch interval (default 5 ms: a thread "
                        'running Python, e.g. an eager prefill, holds the loop off that long)')
    parser.add_argument('--capture-priority', type=int, default=0,
                        help='stream priority of the graphed loop step capture (-1..-3: high)')
    parser.add_argument('--gate-cases', type=lambda s: s.split(','),
                        default=['8:0.3:100', '16:0.3:100', '16:-0.3:100', '16:0.3:30'],
                        help='phase gated: windows as chunks:guard_ms:loop_hz (a chunk must '
                        'end guard_ms before the next frame; negative: may run into it)')
    parser.add_argument('--result', default='')
    parser.add_argument('--out', default=os.environ.get('OUT', 'bench/results'))
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval_ms / 1000)
    CAPTURE_PRIORITY[0] = args.capture_priority
    if args.mode == 'worker':
        return worker(args)
    if args.mode == 'fit':
        return fit_case(args)
    if args.mode == 'soak':
        return soak(args)
    device = torch.device(args.device)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f'memory_{"h200" if device.type == "cuda" else "cpu"}.json'
    result: dict[str, Any] = {'command': ' '.join(sys.argv), 'environment': environment(device),
                              'args': vars(args)}
    log(json.dumps(result['environment']))
    phases = args.phases.split(',')
    for name, fn in (('formats', lambda: phase_formats(args, device)),
                     ('loop', lambda: phase_loop_alone(args, device)),
                     ('interference', lambda: phase_interference(args, device)),
                     ('gated', lambda: phase_gated(args, device)),
                     ('fits', lambda: phase_fits(args)),
                     ('audit', lambda: phase_audit(args, device)),
                     ('soak', lambda: phase_soak(args, out_dir))):
        if name not in phases:
            continue
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception as exc:  # noqa: BLE001 - keep the other phases' results
            import traceback

            traceback.print_exc()
            result[name] = {'error': f'{type(exc).__name__}: {exc}'}
        result.setdefault('phase_seconds', {})[name] = time.perf_counter() - t0
        path.write_text(json.dumps(result, indent=1))
        log(f'phase {name} done in {time.perf_counter() - t0:.1f} s')
    log('wrote', path)


if __name__ == '__main__':
    main()
