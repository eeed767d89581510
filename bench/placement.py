# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Placement bench: per stage and device, compute p50/p99 and the handoff by method.

For VGA, 720p and 1080p frames (rendered box scenes held in a shared-memory block, as the
transport delivers them) and for each stage with a torch port (occupancy, the locator's
per-pixel masks, grasp-candidate scoring, segnet), it times:

- the deployed CPU kernel (what the node runs today; the locator row is the whole
  ``locate_objects``, of which the GPU port covers the per-pixel part only);
- on each accelerator: the compute with the inputs already on the device (synchronised, the
  small result brought back), and the handoff of the stage's inputs by each method of
  :data:`edge_loop.kernels.gpu.transfer.HANDOFF_METHODS` (pageable, pinned, the shared-memory
  block registered with ``cudaHostRegister``, zero-copy where memory is unified);
- side by side at VGA: CPU and GPU (handoff by the best method included) interleaved in one
  loop, the speed-up being the median of the per-pair ratios.

It recommends a placement per stage (the device with the lower total per frame; a GPU only
where it wins, handoff included) and, with ``--audit``, counts the host/device transfers per
frame of a GPU-placed loop step (:func:`edge_loop.kernels.gpu.loop.gpu_loop_step`), by the
copy ledger and, on CUDA, by the torch profiler's memcpy events.

    python bench/placement.py [--sizes vga,720p,1080p] [--repeats 200] [--audit]
                              [--out bench/results/placement_<host>]

On a host without an accelerator it prints the CPU rows (and the torch kernels on the CPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_loop.kernels import occupancy as occ
from edge_loop.kernels.gpu import grasp as ggrasp
from edge_loop.kernels.gpu import locator as gloc
from edge_loop.kernels.gpu import occupancy as gocc
from edge_loop.kernels.gpu.graphs import GraphCache
from edge_loop.kernels.gpu.loop import gpu_loop_step
from edge_loop.kernels.gpu.segnet import torch_segnet
from edge_loop.kernels.gpu.transfer import HANDOFF_METHODS, CopyLedger, Handoff, unified_memory
from edge_loop.kernels.grasp_planner import plan_grasp
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    color_cut,
    depth_cut,
    height_scene,
    hue_cut,
    locate_objects,
    rank_targets,
)
from edge_loop.models import segnet
from edge_loop.verify.sweeps import scene

DEPLOYED = 'cpu (deployed numpy/ORT)'
SIZES = {'vga': (640, 480), '720p': (1280, 720), '1080p': (1920, 1080)}


class ShmFrame:
    """Colour and depth in one shared-memory block (the transport's loaned sample, emulated)."""

    def __init__(self, color: np.ndarray, depth: np.ndarray) -> None:
        self.shm = shared_memory.SharedMemory(create=True, size=color.nbytes + depth.nbytes)
        self.color = np.ndarray(color.shape, color.dtype, self.shm.buf, 0)
        self.depth = np.ndarray(depth.shape, depth.dtype, self.shm.buf, color.nbytes)
        self.color[...] = color
        self.depth[...] = depth

    def close(self) -> None:
        """Release the block."""
        del self.color, self.depth
        self.shm.close()
        self.shm.unlink()


def sync(device: torch.device) -> None:
    """Wait for the device (no-op on the CPU)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], repeats: int, device: torch.device) -> list[float]:
    """Milliseconds per call (synchronised), after 3 warm-up calls."""
    for _ in range(3):
        fn()
    sync(device)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync(device)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def p50_p99(ms: list[float]) -> tuple[float, float]:
    """Median and 99th percentile."""
    a = np.asarray(ms)
    return float(np.median(a)), float(np.percentile(a, 99))


def environment() -> dict[str, object]:
    """Host, device, driver and library versions."""
    env: dict[str, object] = {'host': platform.node(), 'python': platform.python_version(),
                              'numpy': np.__version__, 'torch': torch.__version__,
                              'cpu': platform.processor() or platform.machine()}
    try:
        import onnxruntime

        env['onnxruntime'] = onnxruntime.__version__
        env['ort_providers'] = onnxruntime.get_available_providers()
    except ImportError:
        env['onnxruntime'] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env['gpu'] = props.name
        env['gpu_memory_gib'] = round(props.total_memory / 2 ** 30, 1)
        env['cuda_runtime'] = torch.version.cuda
        env['hip'] = torch.version.hip
        env['unified_memory'] = unified_memory(torch.device('cuda:0'))
        try:
            import subprocess

            env['driver'] = subprocess.run(
                ['nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader'],
                capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env['driver'] = None
    return env


def cpu_pixel_part(color: np.ndarray, depth: np.ndarray, intr, ext) -> object:
    """The deployed locator's per-pixel work, done as the locator does it.

    Height and candidates on the whole frame, the three cuts on the foreground's bounding box
    (plus the bridge margin).

    Subtracted from ``locate_objects`` this estimates the CPU tail a GPU placement keeps.
    """
    p = DEFAULT_PARAMS
    sc = height_scene(depth, intr, ext)
    with np.errstate(invalid='ignore'):
        cand = np.flatnonzero((sc.height > p.min_height) & (sc.height < p.max_height))
    if cand.size == 0:
        return None
    pts = sc.points(cand)
    keep = ((pts[:, 0] > p.roi_x[0]) & (pts[:, 0] < p.roi_x[1]) & (pts[:, 1] > p.roi_y[0])
            & (pts[:, 1] < p.roi_y[1]))
    rows, cols = np.divmod(cand[keep], intr.width)
    b = p.bridge_px
    r0, r1 = max(int(rows.min()) - b, 0), min(int(rows.max()) + 1 + b, intr.height)
    c0, c1 = max(int(cols.min()) - b, 0), min(int(cols.max()) + 1 + b, intr.width)
    mask = np.zeros((r1 - r0, c1 - c0), np.uint8)
    mask[rows - r0, cols - c0] = 1
    return (color_cut(color, mask, r0, c0, p.color_step) | hue_cut(color, mask, r0, c0, p)
            | depth_cut(sc.height[r0:r1, c0:c1], mask, p.depth_step))


def stage_inputs(frame: ShmFrame, w: int, h: int) -> dict[str, object]:
    """The per-stage host inputs and CPU callables of one frame size."""
    f = scene(w, h, seed=7, n_boxes=5, depth_encoding='16UC1')
    objs = locate_objects(frame.color, frame.depth, f.intrinsics, f.extrinsics)
    target = objs[rank_targets(objs)[0]]
    x = segnet.prepare_inputs(frame.color, height_scene(frame.depth, f.intrinsics,
                                                        f.extrinsics).height)
    return {'scene': f, 'target': target, 'segnet_input': x}


def bench_size(name: str, w: int, h: int, devices: list[torch.device], repeats: int,
               rows: list[dict]) -> None:
    """Every stage at one size: CPU rows, and per accelerator compute + handoff rows."""
    base = scene(w, h, seed=7, n_boxes=5, depth_encoding='16UC1')
    frame = ShmFrame(base.color, base.depth)
    try:
        inp = stage_inputs(frame, w, h)
        intr, ext, target = base.intrinsics, base.extrinsics, inp['target']
        x = inp['segnet_input']
        mapper = occ.OccupancyMapper()
        cpu_fns = {
            'occupancy': lambda: mapper.update(frame.depth, intr, ext),
            'object_locator': lambda: locate_objects(frame.color, frame.depth, intr, ext),
            'object_locator (per-pixel part)': lambda: cpu_pixel_part(
                frame.color, frame.depth, intr, ext),
            'grasp_planner': lambda: plan_grasp(frame.depth, intr, ext, target=target),
            'segnet': lambda: segnet.load_segnet().logits(x),
        }
        cpu = torch.device('cpu')
        for stage, fn in cpu_fns.items():
            p50, p99 = p50_p99(timed(fn, repeats, cpu))
            rows.append({'size': name, 'stage': stage, 'device': DEPLOYED,
                         'compute_p50_ms': p50, 'compute_p99_ms': p99, 'handoff': {}})
        for dev in devices:
            bench_device(name, frame, intr, ext, target, x, dev, repeats, rows)
    finally:
        frame.close()


def gpu_stage_fns(dev: torch.device, intr, ext, target, compile_mode: str | None = None
                  ) -> dict[str, Callable[..., object]]:
    """Per stage: host-or-device tensors in, the small result on the host out (CUDA graphs).

    What a GPU-placed node would run per frame: one graph replay per stage, the inputs copied
    into the graph's buffers (from registered/pinned host memory that is a plain DMA) and
    only the small result brought back (grid, packed masks, candidate numbers, logits).
    """
    tm = gocc.TorchOccupancyMapper(device=dev, compile_mode=compile_mode)
    caches = {name: GraphCache(dev, compile_mode=compile_mode if name != 'segnet' else None)
              for name in ('masks', 'grasp', 'segnet')}
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes())
    block, centroid = ggrasp.target_block(target.points)
    block_t, centroid_t = torch.from_numpy(block), torch.from_numpy(centroid)
    models = {dt: torch_segnet(dev, dt) for dt in (torch.float32, torch.float16)}

    def masks(depth_t, color_t):
        def make():
            def step(d, c):
                r = gloc.pixel_masks(c, d, intr, ext)
                return gloc.pack_mask(r.fg), gloc.pack_mask(r.cut)
            return step
        fg, cut = caches['masks'].run(key, make, depth_t, color_t)
        return fg.cpu(), cut.cpu()

    def grasp(depth_t):
        def make():
            rays, origin = gloc.world_rays_t(intr, ext, dev)   # looked up outside the trace
            offs = ggrasp.offsets_on(ggrasp.DEFAULT_GRASP_PARAMS.offsets, dev)

            def step(d, pts, c):
                obstacles = ggrasp.obstacle_points_on(d, rays, origin)
                return ggrasp.candidate_table(pts, c, obstacles, offsets=offs)
            return step
        table = caches['grasp'].run(key, make, depth_t, block_t, centroid_t)
        return ggrasp.grasps_from_table(table.cpu().numpy(), centroid)

    def seg(x_t, dtype=torch.float32):
        model = models[dtype]
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return caches['segnet'].run((dtype,), lambda: (lambda t: model(t.to(dtype)).float()),
                                        x_t).cpu()

    return {'occupancy': lambda depth_t: tm.update_tensor(depth_t, intr, ext).cpu(),
            'mapper': lambda: tm,
            'masks': masks, 'grasp': grasp, 'segnet': seg,
            'segnet fp16': lambda x_t: seg(x_t, torch.float16)}


def bench_device(name: str, frame: ShmFrame, intr, ext, target, x: np.ndarray,
                 dev: torch.device, repeats: int, rows: list[dict]) -> None:
    """Compute (inputs on the device) and handoff per method for each stage on ``dev``."""
    handoff = Handoff(dev, 'pageable')
    color_t, depth_t = handoff.to_device(frame.color), handoff.to_device(frame.depth)
    x_t = torch.from_numpy(x).to(dev)
    fns = gpu_stage_fns(dev, intr, ext, target)
    stages: dict[str, tuple[Callable[[], object], list[np.ndarray]]] = {
        'occupancy': (lambda: fns['occupancy'](depth_t), [frame.depth]),
        'object_locator (per-pixel part)': (lambda: fns['masks'](depth_t, color_t),
                                            [frame.color, frame.depth]),
        'grasp_planner': (lambda: fns['grasp'](depth_t), [frame.depth]),
        'segnet': (lambda: fns['segnet'](x_t), [x]),
    }
    if dev.type == 'cuda':
        stages['segnet fp16'] = (lambda: fns['segnet fp16'](x_t), [x])
    with torch.inference_mode():
        for stage, (fn, host_inputs) in stages.items():
            p50, p99 = p50_p99(timed(fn, repeats, dev))
            rows.append({'size': name, 'stage': stage,
                         'device': str(dev) if dev.type != 'cpu' else 'cpu (torch)',
                         'compute_p50_ms': p50, 'compute_p99_ms': p99,
                         'handoff': handoff_times(host_inputs, dev, repeats)})


def handoff_times(arrays: list[np.ndarray], dev: torch.device, repeats: int
                  ) -> dict[str, dict[str, float] | str]:
    """p50/p99 ms to put ``arrays`` on ``dev`` by each method (or why it does not apply)."""
    out: dict[str, dict[str, float] | str] = {}
    if dev.type == 'cpu':
        return {'view': {'p50_ms': 0.0, 'p99_ms': 0.0}}
    for method in HANDOFF_METHODS:
        try:
            h = Handoff(dev, method)
        except ValueError as exc:
            out[method] = str(exc)
            continue
        try:
            p50, p99 = p50_p99(timed(lambda h=h: [h.to_device(a) for a in arrays], repeats,
                                     dev))
            out[method] = {'p50_ms': p50, 'p99_ms': p99}
        except RuntimeError as exc:
            out[method] = f'failed: {exc}'
        finally:
            h.close()
    return out


def best_handoff(row: dict) -> tuple[str, float]:
    """(method, p50 ms) of the cheapest handoff of a row."""
    timed_methods = {m: v['p50_ms'] for m, v in row['handoff'].items() if isinstance(v, dict)}
    if not timed_methods:
        return 'view', 0.0
    m = min(timed_methods, key=timed_methods.get)
    return m, timed_methods[m]


CPU_STAGE = {'occupancy': 'occupancy', 'object_locator (per-pixel part)':
             'object_locator (per-pixel part)', 'grasp_planner': 'grasp_planner',
             'segnet': 'segnet', 'segnet fp16': 'segnet'}


# The whole locator as the node runs it with device:=cuda, against the deployed CPU locator.
NODE_LOCATOR = 'object_locator (node: device masks + CPU tail)'


def side_by_side(dev: torch.device, repeats: int, compile_modes: tuple[str, ...] = ()
                 ) -> list[dict]:
    """At VGA, CPU and GPU (best handoff: registered) interleaved; per-pair ratio medians.

    Each ``compile_modes`` entry adds a GPU variant (the stage compiled by ``torch.compile``,
    then graphed) timed in the same rotation, and checked against the graphed eager kernel:
    the same occupancy grid, the same ranked grasps, the same mask bits.
    """
    base = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    frame = ShmFrame(base.color, base.depth)
    out = []
    try:
        intr, ext = base.intrinsics, base.extrinsics
        inp = stage_inputs(frame, 640, 480)
        method = 'registered' if dev.type == 'cuda' else 'pageable'
        h = Handoff(dev, method)
        # page-lock the shared-memory block once; the graphs then DMA straight from it
        color_h, depth_h = h.host_view(frame.color), h.host_view(frame.depth)
        mapper = occ.OccupancyMapper()
        variants = {'graph': gpu_stage_fns(dev, intr, ext, inp['target'])}
        for mode in compile_modes:
            variants[f'compile {mode} + graph'] = gpu_stage_fns(dev, intr, ext, inp['target'],
                                                                mode)
        x = {segnet.SEGNET_INPUT: inp['segnet_input']}
        x_h = torch.from_numpy(inp['segnet_input'])
        seg_name = 'segnet fp16' if dev.type == 'cuda' else 'segnet'

        node_masks = gloc.LocatorMasks(dev)

        def node_locator() -> object:
            # object_locator with device:=cuda: masks on the device (pageable copies in, the
            # packed masks back), labelling and moments on the CPU
            masks = node_masks(frame.color, frame.depth, intr, ext)
            return locate_objects(frame.color, frame.depth, intr, ext, masks=masks)

        def gpu_fns(stage: str) -> dict[str, Callable[[], object]]:
            if stage == NODE_LOCATOR:
                return {'graph': node_locator}
            call = {'occupancy': lambda f: f['occupancy'](depth_h),
                    'object_locator (per-pixel part)': lambda f: f['masks'](depth_h, color_h),
                    'grasp_planner': lambda f: f['grasp'](depth_h),
                    'segnet': lambda f: f[seg_name](x_h)}[stage]
            names = ['graph'] if stage == 'segnet' else list(variants)
            return {n: (lambda f=variants[n]: call(f)) for n in names}

        cpu_fns = {
            'occupancy': lambda: mapper.update(frame.depth, intr, ext),
            'object_locator (per-pixel part)': lambda: cpu_pixel_part(
                frame.color, frame.depth, intr, ext),
            'grasp_planner': lambda: plan_grasp(frame.depth, intr, ext, target=inp['target']),
            'segnet': lambda: segnet.load_segnet().logits(x[segnet.SEGNET_INPUT]),
            NODE_LOCATOR: lambda: locate_objects(frame.color, frame.depth, intr, ext),
        }
        with torch.inference_mode():
            for stage, cpu_fn in cpu_fns.items():
                fns = {'cpu': cpu_fn, **gpu_fns(stage)}
                results: dict[str, object] = {}
                for name, fn in list(fns.items()):
                    t = time.perf_counter()
                    try:
                        for _ in range(3):   # warm-up: graph capture, compilation
                            results[name] = fn()
                    except Exception as exc:  # noqa: BLE001 - a variant that fails to compile
                        if name in ('cpu', 'graph'):
                            raise
                        del fns[name]
                        out.append({'stage': stage, 'variant': name,
                                    'error': f'{type(exc).__name__}: {str(exc)[:300]}'})
                        print(f'  {stage} / {name} failed: {out[-1]["error"]}', flush=True)
                        continue
                    log_warmup(stage, name, time.perf_counter() - t)
                times: dict[str, list[float]] = {name: [] for name in fns}
                order = list(fns)
                for i in range(repeats):
                    for name in order[i % len(order):] + order[:i % len(order)]:
                        t = time.perf_counter()
                        fns[name]()
                        sync(dev)
                        times[name].append((time.perf_counter() - t) * 1e3)
                for name in fns:
                    if name == 'cpu':
                        continue
                    ratios = [c / g for c, g in zip(times['cpu'], times[name], strict=True)]
                    q = np.percentile(ratios, [2.5, 97.5])
                    row = {'stage': stage, 'gpu_handoff': method, 'variant': name,
                           'cpu_p50_ms': statistics.median(times['cpu']),
                           'cpu_p99_ms': float(np.percentile(times['cpu'], 99)),
                           'gpu_p50_ms': statistics.median(times[name]),
                           'gpu_p99_ms': float(np.percentile(times[name], 99)),
                           'speedup_median': statistics.median(ratios),
                           'speedup_p2.5': float(q[0]), 'speedup_p97.5': float(q[1])}
                    if name != 'graph':
                        row['same_result_as_graph'] = same_result(
                            stage, results['graph'], results[name],
                            variants['graph'], variants[name])
                    out.append(row)
        h.close()
    finally:
        frame.close()
    return out


def log_warmup(stage: str, variant: str, seconds: float) -> None:
    """Warm-ups that took long (compilation) are worth a line: they are a node's start-up."""
    if seconds > 1.0:
        print(f'  warm-up {stage} / {variant}: {seconds:.1f} s', flush=True)


def same_result(stage: str, ref: object, out: object, ref_fns: dict, out_fns: dict) -> bool:
    """Whether a compiled variant computed what the graphed eager kernel did."""
    if stage == 'occupancy':
        # both mappers saw the same frames: their log-odds must agree (float64 sums, so
        # bit-identical up to the order of the atomic adds)
        a, b = ref_fns['mapper']().logodds, out_fns['mapper']().logodds
        return bool(np.allclose(a, b, atol=1e-5) and torch.equal(ref, out))
    if stage == 'grasp_planner':
        if len(ref) != len(out):
            return False
        return all(abs(g.quality - k.quality) < 1e-5 and np.allclose(g.center, k.center,
                                                                      atol=1e-5)
                   for g, k in zip(ref, out, strict=True))
    if stage == 'object_locator (per-pixel part)':
        return all(torch.equal(a, b) for a, b in zip(ref, out, strict=True))
    return True


def copy_audit(dev: torch.device, frames: int = 50) -> dict[str, object]:
    """Transfers per frame of a GPU-placed loop step: the ledger, and the profiler on CUDA."""
    base = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    frame = ShmFrame(base.color, base.depth)
    try:
        intr, ext = base.intrinsics, base.extrinsics
        objs = locate_objects(frame.color, frame.depth, intr, ext)
        method = 'registered' if dev.type == 'cuda' else 'pageable'
        ledger = CopyLedger()
        h = Handoff(dev, method, ledger)
        mapper = gocc.TorchOccupancyMapper(device=dev)
        # the target's points come from the locator's CPU tail: one small upload per frame
        pts = np.ascontiguousarray(objs[rank_targets(objs)[0]].points, np.float32)

        def step() -> None:
            tensors = {'color': h.to_device(frame.color), 'depth': h.to_device(frame.depth)}
            if dev.type != 'cpu':
                ledger.note('h2d', pts.nbytes, 'target points')
            gpu_loop_step(tensors, intr, ext, mapper, target_points=torch.from_numpy(pts).to(
                dev), handoff=h)

        with torch.inference_mode():
            for _ in range(3):
                step()
            sync(dev)
            ledger.reset()
            result: dict[str, object] = {'device': str(dev), 'handoff': method,
                                         'frames': frames}
            if dev.type == 'cuda':
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for _ in range(frames):
                        step()
                    sync(dev)
                memcpy: dict[str, int] = {}
                for ev in prof.events():
                    if 'Memcpy' in ev.name and ev.device_type.name == 'CUDA':
                        memcpy[ev.name] = memcpy.get(ev.name, 0) + 1
                result['profiler_memcpy_per_frame'] = {k: v / frames for k, v in memcpy.items()}
            else:
                for _ in range(frames):
                    step()
            result['ledger_per_frame'] = ledger.per_frame(frames)
            result['ledger_bytes_per_frame'] = {f'{d} {k}': n / frames
                                                for (d, k), n in ledger.nbytes.items()}
        h.close()
        return result
    finally:
        frame.close()


def recommend(rows: list[dict]) -> list[dict]:
    """Per size and stage: the placement with the lowest total p50 per frame.

    A GPU option costs its compute plus its cheapest handoff; for the locator, whose GPU port
    covers the per-pixel part only, plus the CPU tail it keeps (the deployed locator's p50
    less its per-pixel part's, both timed here).
    """
    out = []
    for size in dict.fromkeys(r['size'] for r in rows):
        cpu = {r['stage']: r['compute_p50_ms'] for r in rows
               if r['size'] == size and r['device'] == DEPLOYED}
        tail = max(cpu['object_locator'] - cpu['object_locator (per-pixel part)'], 0.0)
        for stage in ('occupancy', 'object_locator', 'grasp_planner', 'segnet'):
            options = [('cpu', cpu[stage], 'view', 0.0)]
            for r in rows:
                if r['size'] != size or r['device'] == DEPLOYED:
                    continue
                base = CPU_STAGE.get(r['stage'])
                extra = tail if base == 'object_locator (per-pixel part)' else 0.0
                if base == stage or (stage == 'object_locator' and extra):
                    method, ms = best_handoff(r)
                    options.append((f'{r["device"]} ({r["stage"]})',
                                    r['compute_p50_ms'] + ms + extra, method, extra))
            best = min(options, key=lambda o: o[1])
            out.append({'size': size, 'stage': stage, 'cpu_ms': cpu[stage],
                        'placement': best[0], 'total_ms': best[1], 'handoff': best[2],
                        'cpu_tail_ms': best[3],
                        'speedup': cpu[stage] / best[1] if best[1] > 0 else float('inf')})
    return out


def print_tables(env: dict, rows: list[dict], rec: list[dict], sbs: list[dict],
                 audit: dict | None) -> str:
    """The tables as text (printed and written to the results)."""
    lines = ['environment: ' + ', '.join(f'{k}={v}' for k, v in env.items()), '',
             f'{"size":6s} {"stage":34s} {"device":26s} {"p50 ms":>8s} {"p99 ms":>8s}  '
             'handoff p50/p99 ms by method']
    for r in rows:
        ho = ' '.join(f'{m}={v["p50_ms"]:.3f}/{v["p99_ms"]:.3f}' if isinstance(v, dict)
                      else f'{m}=n/a' for m, v in r['handoff'].items())
        lines.append(f'{r["size"]:6s} {r["stage"]:34s} {r["device"]:26s} '
                     f'{r["compute_p50_ms"]:8.3f} {r["compute_p99_ms"]:8.3f}  {ho}')
    lines += ['', 'recommended placement (lowest p50 of compute + best handoff per frame)',
              f'{"size":6s} {"stage":34s} {"cpu ms":>8s} {"total ms":>9s} {"x cpu":>7s}  '
              'placement (handoff)']
    for r in rec:
        tail = f', + CPU tail {r["cpu_tail_ms"]:.2f} ms' if r['cpu_tail_ms'] else ''
        lines.append(f'{r["size"]:6s} {r["stage"]:34s} {r["cpu_ms"]:8.3f} {r["total_ms"]:9.3f} '
                     f'{r["speedup"]:7.1f}  {r["placement"]} ({r["handoff"]}{tail})')
    if sbs:
        lines += ['', 'side by side at VGA (interleaved in one loop; GPU includes its handoff '
                  'and the result back)',
                  f'{"stage":34s} {"cpu p50":>8s} {"cpu p99":>8s} {"gpu p50":>8s} '
                  f'{"gpu p99":>8s} {"speed-up":>9s} {"95% range":>14s}  gpu variant']
        for r in sbs:
            if 'error' in r:
                lines.append(f'{r["stage"]:34s} {r["variant"]}: {r["error"]}')
                continue
            same = r.get('same_result_as_graph')
            check = '' if same is None else (' (same result)' if same else ' (DIFFERS)')
            lines.append(f'{r["stage"]:34s} {r["cpu_p50_ms"]:8.3f} {r["cpu_p99_ms"]:8.3f} '
                         f'{r["gpu_p50_ms"]:8.3f} {r["gpu_p99_ms"]:8.3f} '
                         f'{r["speedup_median"]:8.1f}x {r["speedup_p2.5"]:6.1f}-'
                         f'{r["speedup_p97.5"]:.1f}x  {r.get("variant", "graph")}{check}')
    if audit:
        lines += ['', f'copy audit ({audit["device"]}, handoff {audit["handoff"]}, '
                  f'{audit["frames"]} frames): transfers per frame']
        lines += [f'  ledger   {k}: {v:g}' for k, v in audit['ledger_per_frame'].items()]
        lines += [f'  profiler {k}: {v:g}' for k, v in
                  audit.get('profiler_memcpy_per_frame', {}).items()]
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the tables; write them (and JSON) to --out when given."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--sizes', default='vga,720p,1080p')
    ap.add_argument('--repeats', type=int, default=100)
    ap.add_argument('--cpu-torch', action='store_true',
                    help='also time the torch kernels on the CPU (the device rows for "cpu")')
    ap.add_argument('--audit', action='store_true', help='run the copy audit')
    ap.add_argument('--compile', default='',
                    help='comma-separated torch.compile modes to add to the side-by-side run '
                    '(default, max-autotune-no-cudagraphs)')
    ap.add_argument('--side-by-side-only', action='store_true',
                    help='skip the per-size rows (the side-by-side run and audit only)')
    ap.add_argument('--out', type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)   # the CPU rows are per core, as the nodes run
    devices = [torch.device(f'cuda:{i}') for i in range(torch.cuda.device_count())][:1]
    if args.cpu_torch:
        devices.append(torch.device('cpu'))
    env = environment()
    rows: list[dict] = []
    for name in ([] if args.side_by_side_only else args.sizes.split(',')):
        w, h = SIZES[name]
        bench_size(name, w, h, devices, args.repeats, rows)
    gpus = [d for d in devices if d.type == 'cuda']
    modes = tuple(m for m in args.compile.split(',') if m)
    sbs = side_by_side(gpus[0], args.repeats, modes) if gpus else []
    audit = copy_audit(gpus[0] if gpus else torch.device('cpu')) if args.audit else None
    rec = recommend(rows) if rows else []
    text = print_tables(env, rows, rec, sbs, audit)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / 'placement.txt').write_text(text + '\n')
        (args.out / 'placement.json').write_text(json.dumps(
            {'environment': env, 'rows': rows, 'recommended': rec, 'side_by_side': sbs,
             'copy_audit': audit}, indent=2, default=str))
    return 0


if __name__ == '__main__':
    sys.exit(main())
