# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A committed scenario bag replayed through the loop's kernels, CPU and GPU side by side.

The full loop with ``device:=cuda`` needs ROS and pybullet; the GPU machine has neither. This
replays the camera frames of a scenario bag (``data/scenarios/<name>``) through the stages'
kernels in the loop's order, per frame:

- ``object_locator``: the deployed locator (CPU in both columns: its GPU port covers the
  per-pixel masks only, and the CPU tail that would consume them is not split out yet);
- ``occupancy_mapper``: the deployed numpy mapper | ``TorchOccupancyMapper`` on the device;
- ``grasp_planner``: the deployed planner for the locator's first target | the torch scorer
  (one CUDA graph, optionally ``torch.compile``d) for the same target;

each frame copied first into one shared-memory block (the transport's loaned slot) that the
GPU path page-locks once and reads by DMA. CPU and GPU paths run interleaved frame by frame
(A B B A ...), so both see the same machine. Per stage: p50/p99 of each column; per frame the
camera-to-grasp path (locator + planner) and the copies the GPU path made (the copy ledger:
host-to-device images, device-to-host results, which must contain no image).

    python bench/placement_replay.py export data/scenarios/grasp_nominal .replay/grasp_nominal.npz
        # here, where rclpy reads the bag
    python bench/placement_replay.py run .replay/grasp_nominal.npz --passes 10 \
        [--compile default] [--out DIR]        # on the GPU machine
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COLOR_TOPIC = '/camera/color/image_raw'
DEPTH_TOPIC = '/camera/aligned_depth_to_color/image_raw'


def export(bag: Path, out: Path) -> None:
    """Colour and depth frames of ``bag`` (paired by stamp) into one compressed npz."""
    from edge_loop.bags import read_messages
    from edge_loop.images import image_to_array

    color, depth = {}, {}
    for topic, _t, msg in read_messages(bag, [COLOR_TOPIC, DEPTH_TOPIC]):
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        (color if topic == COLOR_TOPIC else depth)[stamp] = (
            np.array(image_to_array(msg)), msg.encoding)
    stamps = sorted(set(color) & set(depth))
    if not stamps:
        raise SystemExit(f'{bag}: no colour/depth pairs with the same stamp')
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, color=np.stack([color[s][0] for s in stamps]),
                        depth=np.stack([depth[s][0] for s in stamps]),
                        stamps=np.asarray(stamps, np.int64),
                        encodings=np.asarray([color[stamps[0]][1], depth[stamps[0]][1]]),
                        bag=np.asarray(str(bag)))
    print(f'{out}: {len(stamps)} frames, colour {color[stamps[0]][1]}, depth '
          f'{depth[stamps[0]][1]}')


def pct(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {'n': int(a.size), 'p50': float(np.percentile(a, 50)),
            'p99': float(np.percentile(a, 99)), 'max': float(a.max())}


def run(npz: Path, passes: int, compile_mode: str | None, out_dir: Path | None) -> dict:
    """Replay ``passes`` times; per stage and column p50/p99 ms, copies per frame."""
    import torch
    from placement import ShmFrame, environment  # bench/placement.py

    from edge_loop.kernels import occupancy as occ
    from edge_loop.kernels.camera import D435_VGA, Extrinsics
    from edge_loop.kernels.gpu import grasp as ggrasp
    from edge_loop.kernels.gpu.occupancy import TorchOccupancyMapper
    from edge_loop.kernels.gpu.transfer import CopyLedger, Handoff
    from edge_loop.kernels.grasp_planner import plan_grasp
    from edge_loop.kernels.object_locator import locate_objects, rank_targets

    data = np.load(npz)
    colors, depths = data['color'], data['depth']
    dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    torch.set_num_threads(1)   # the CPU column is per core, as a node runs
    intr = D435_VGA.scaled(colors.shape[2], colors.shape[1])
    ext = Extrinsics.from_params([0.0, 0.0, 0.75], [1.0, 0.0, 0.0, 0.0])   # the nodes' default
    frame = ShmFrame(colors[0], depths[0])
    ledger = CopyLedger()
    handoff = Handoff(dev, 'registered' if dev.type == 'cuda' else 'pageable', ledger)
    depth_h = handoff.host_view(frame.depth)   # page-locked once; the graphs DMA from it
    cpu_mapper = occ.OccupancyMapper()
    gpu_mapper = TorchOccupancyMapper(device=dev, compile_mode=compile_mode)
    scorer = ggrasp.plan_grasp_on(dev, torch.float32, compile_mode)
    times: dict[str, list[float]] = {k: [] for k in (
        'object_locator', 'occupancy_mapper cpu', 'occupancy_mapper gpu', 'grasp_planner cpu',
        'grasp_planner gpu', 'path cpu', 'path gpu')}
    agree = {'grid': 0, 'grasp': 0, 'frames': 0}

    def clock(fn, key: str):
        t = time.perf_counter()
        r = fn()
        if dev.type == 'cuda':
            torch.cuda.synchronize(dev)
        times[key].append((time.perf_counter() - t) * 1e3)
        return r

    def frame_step(i: int, gpu_first: bool) -> None:
        frame.color[...] = colors[i]     # the transport writes the slot; not timed
        frame.depth[...] = depths[i]
        objs = clock(lambda: locate_objects(frame.color, frame.depth, intr, ext),
                     'object_locator')
        target = objs[rank_targets(objs)[0]] if objs else None
        order = ('gpu', 'cpu') if gpu_first else ('cpu', 'gpu')
        res: dict[str, object] = {}
        for col in order:
            if col == 'cpu':
                res['grid cpu'] = clock(lambda: cpu_mapper.update(frame.depth, intr, ext),
                                        'occupancy_mapper cpu')
                res['grasp cpu'] = clock(lambda: plan_grasp(
                    frame.depth, intr, ext, target=target) if target else [],
                    'grasp_planner cpu')
            else:
                res['grid gpu'] = clock(lambda: handoff.to_host(
                    gpu_mapper.update_tensor(depth_h, intr, ext), 'grid'),
                    'occupancy_mapper gpu')
                res['grasp gpu'] = clock(lambda: scorer(
                    depth_h.numpy(), intr, ext, target) if target else [],
                    'grasp_planner gpu')
                if dev.type == 'cuda':
                    # what the graphs copied in and out (they bypass the handoff's ledger):
                    # each stage's graph DMAs the depth from the registered slot itself
                    ledger.note('h2d', depth_h.nbytes, 'depth image (occupancy graph)')
                    if target:
                        ledger.note('h2d', depth_h.nbytes, 'depth image (grasp graph)')
                        ledger.note('h2d', 1500 * 12 + 16, 'target points')
                        ledger.note('d2h', 5 * 24 * 3 * 8, 'grasp numbers')
        times['path cpu'].append(times['object_locator'][-1] + times['grasp_planner cpu'][-1])
        times['path gpu'].append(times['object_locator'][-1] + times['grasp_planner gpu'][-1])
        agree['frames'] += 1
        agree['grid'] += int(np.array_equal(res['grid cpu'], res['grid gpu']))
        gc, gg = res['grasp cpu'], res['grasp gpu']
        agree['grasp'] += int((not gc and not gg) or (
            bool(gc) and bool(gg) and np.allclose(gc[0].center, gg[0].center, atol=2e-3)))

    with torch.inference_mode():
        t0 = time.perf_counter()
        for i in range(min(3, len(colors))):   # warm-up: graphs, compilation
            frame_step(i, False)
        warmup_s = time.perf_counter() - t0
        for k in times:
            times[k].clear()
        agree = dict.fromkeys(agree, 0)
        ledger.reset()
        n = 0
        for _ in range(passes):
            for i in range(len(colors)):
                frame_step(i, n % 2 == 1)
                n += 1
    handoff.close()
    frame.close()
    result = {'bag': str(data['bag']), 'frames': n, 'passes': passes,
              'device': str(dev), 'compile_mode': compile_mode, 'warmup_s': warmup_s,
              'environment': environment(),
              'stages_ms': {k: pct(v) for k, v in times.items()},
              'agreement': agree,
              'copies_per_frame': ledger.per_frame(n),
              'copy_bytes_per_frame': {f'{d} {k}': b / n for (d, k), b in ledger.nbytes.items()}}
    text = report(result)
    print(text)
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / 'replay.json').write_text(json.dumps(result, indent=1, default=str))
        (out_dir / 'replay.txt').write_text(text + '\n')
    return result


def report(r: dict) -> str:
    s = r['stages_ms']
    lines = [f'replay of {r["bag"]}: {r["frames"]} frames ({r["passes"]} passes), GPU column on '
             f'{r["device"]}, compile {r["compile_mode"]}, warm-up {r["warmup_s"]:.1f} s',
             f'{"stage":20s} {"cpu p50":>8s} {"cpu p99":>8s} {"gpu p50":>8s} {"gpu p99":>8s} '
             f'{"x p50":>6s}']
    for stage in ('object_locator', 'occupancy_mapper', 'grasp_planner', 'path'):
        if stage == 'object_locator':
            c = g = s[stage]
        else:
            c, g = s[f'{stage} cpu'], s[f'{stage} gpu']
        name = 'locator + planner' if stage == 'path' else stage
        lines.append(f'{name:20s} {c["p50"]:8.3f} {c["p99"]:8.3f} {g["p50"]:8.3f} '
                     f'{g["p99"]:8.3f} {c["p50"] / g["p50"]:6.2f}')
    a = r['agreement']
    lines.append(f'same grid on {a["grid"]}/{a["frames"]} frames, same best grasp (2 mm) on '
                 f'{a["grasp"]}/{a["frames"]}')
    lines.append('copies per frame (GPU column): ' + ', '.join(
        f'{k} {v:g}' for k, v in r['copies_per_frame'].items()))
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    ex = sub.add_parser('export', help='bag -> npz of its colour/depth frames (needs rclpy)')
    ex.add_argument('bag', type=Path)
    ex.add_argument('npz', type=Path)
    rp = sub.add_parser('run', help='replay the npz through the kernels, CPU and GPU')
    rp.add_argument('npz', type=Path)
    rp.add_argument('--passes', type=int, default=10)
    rp.add_argument('--compile', default='', help='torch.compile mode of the GPU kernels')
    rp.add_argument('--out', type=Path, default=None)
    args = ap.parse_args(argv)
    if args.cmd == 'export':
        export(args.bag, args.npz)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        run(args.npz, args.passes, args.compile or None, args.out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
