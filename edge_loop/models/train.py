# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Train segnet on simulated training scenes and export it to ONNX (``make train``).

    python -m edge_loop.models.train [--scenes 150] [--val-scenes 20] [--minutes 6]

1. Data: scenes of TRAIN objects only (000-799, ``SimWorld(seed, split='train')``; seeds
   ``--seed0`` .. and a disjoint validation range), each rendered under every lighting
   condition; inputs via :func:`edge_loop.models.segnet.prepare_inputs` (the runtime's own
   pre-processing); targets per 8x8 output cell: fraction with ``frame.label > 0``, and
   "contact" = some pixel of the cell is within 2 px of a different object's pixel.
   Cached in ``build/segnet_data_<hash>.npz``.
2. Augmentation (per sample, seeded): exposure gain, per-channel colour gain, gamma, noise,
   flips, synthetic glare discs (saturated colour, no depth in the core) and depth drop-outs
   at random places, so the net learns to extend objects into holes anywhere.
3. Training: fixed seed, Adam + cosine schedule, soft-target BCE, a wall-clock budget.
4. Export: ``edge_loop/models/segnet.onnx`` (opset 17, fixed 1x5x120x160 input) and
   ``segnet.json`` (seed, data sizes, input size, normalisation, metrics, sha256).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

from edge_loop.models.segnet import (
    HEIGHT_CLIP,
    HEIGHT_SCALE,
    INPUT_H,
    INPUT_W,
    META_PATH,
    ONNX_PATH,
    OUTPUT_H,
    OUTPUT_W,
    SEGNET_INPUT,
    SEGNET_OUTPUT,
    build_torch_model,
    prepare_inputs,
    sha256_file,
)

SEED = 20261130
CACHE_DIR = Path(__file__).resolve().parents[2] / 'build'


def contact_cells(label: np.ndarray) -> np.ndarray:
    """(60, 80) uint8 0/255: cells holding a pixel within 2 px of a different object."""
    import cv2

    contact = np.zeros(label.shape, bool)
    kernel = np.ones((5, 5), np.uint8)
    for k in np.unique(label[label > 0]):
        near = cv2.dilate((label == k).astype(np.uint8), kernel) > 0
        contact |= near & (label > 0) & (label != k)
    h, w = label.shape
    cells = contact[:h - h % OUTPUT_H, :w - w % OUTPUT_W]
    cells = cells.reshape(OUTPUT_H, h // OUTPUT_H, OUTPUT_W, w // OUTPUT_W).any(axis=(1, 3))
    return cells.astype(np.uint8) * 255


def render_scene(seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Inputs (8, 5, 120, 160) float16 and targets (8, 2, 60, 80) uint8 of one scene."""
    import cv2

    from edge_loop.kernels.object_locator import height_scene
    from edge_loop.sim.lighting import CONDITION_NAMES
    from edge_loop.sim.world import SimWorld

    xs, ys = [], []
    with SimWorld(seed, split='train') as world:
        for cond in CONDITION_NAMES:
            world.set_lighting(cond)
            frame = world.render()
            scene = height_scene(frame.depth_mm, frame.intrinsics, world.extrinsics)
            xs.append(prepare_inputs(frame.color, scene.height)[0].astype(np.float16))
            fg = (frame.label > 0).astype(np.float32)
            fg_cells = np.rint(cv2.resize(fg, (OUTPUT_W, OUTPUT_H),
                                          interpolation=cv2.INTER_AREA) * 255).astype(np.uint8)
            ys.append(np.stack([fg_cells, contact_cells(frame.label)]))
    return np.stack(xs), np.stack(ys), list(CONDITION_NAMES)


def build_dataset(seeds: list[int], workers: int) -> dict[str, np.ndarray]:
    """Render (or load from the cache) the scenes of ``seeds``."""
    key = hashlib.sha256(f'{seeds[0]}-{seeds[-1]}-{len(seeds)}-v2'.encode()).hexdigest()[:12]
    cache = CACHE_DIR / f'segnet_data_{key}.npz'
    if cache.exists():
        data = np.load(cache)
        return {k: data[k] for k in data.files}
    t0 = time.time()
    with multiprocessing.get_context('spawn').Pool(workers) as pool:
        results = pool.map(render_scene, seeds, chunksize=4)
    conds = results[0][2]
    data = {
        'x': np.concatenate([r[0] for r in results]),
        'y': np.concatenate([r[1] for r in results]),
        'lighting': np.array([c for _ in results for c in conds]),
        'seed': np.repeat(np.array(seeds), len(conds)),
    }
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(cache, **data)
    print(f'rendered {len(seeds)} scenes x {len(conds)} lightings in {time.time() - t0:.0f} s',
          flush=True)
    return data


def pack(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Compact form of a dataset, to carry it to another machine.

    Colour as uint8 and validity in 1/16 steps (lossless), height in steps of 0.02 units
    (1 mm).
    """
    x = data['x'].astype(np.float32)
    return {'x_rgb': np.rint((x[:, :3] + 0.5) * 255).astype(np.uint8),
            'x_height': np.rint((x[:, 3] - HEIGHT_CLIP[0]) * 50).astype(np.uint8),
            'x_valid': np.rint(x[:, 4] * 16).astype(np.uint8),
            'y': data['y'], 'lighting': data['lighting'], 'seed': data['seed']}


def unpack(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inverse of :func:`pack` (datasets that are not packed pass through)."""
    if 'x' in data:
        return data
    x = np.empty((len(data['y']), 5, INPUT_H, INPUT_W), np.float32)
    x[:, :3] = data['x_rgb'].astype(np.float32) / 255.0 - 0.5
    x[:, 3] = data['x_height'].astype(np.float32) / 50 + HEIGHT_CLIP[0]
    x[:, 4] = data['x_valid'].astype(np.float32) / 16.0
    return {'x': x, **{k: data[k] for k in ('y', 'lighting', 'seed')}}


def augment(x, y, gen):
    """Photometric and geometric augmentation of a batch (torch tensors, in place on copies)."""
    import torch

    b = x.shape[0]
    x = x.clone()
    y = y.clone()
    rgb = x[:, :3] + 0.5                                    # back to [0, 1]
    lin = rgb.clamp(0, 1) ** 2.2
    gain = torch.exp(torch.empty(b, 1, 1, 1).uniform_(-1.6, 1.2, generator=gen))
    chan = torch.exp(torch.empty(b, 3, 1, 1).uniform_(-0.35, 0.35, generator=gen))
    lin = lin * gain * chan
    rgb = lin.clamp(0, 1) ** (1 / 2.2)
    gamma = torch.exp(torch.empty(b, 1, 1, 1).uniform_(-0.4, 0.4, generator=gen))
    rgb = rgb.clamp(1e-4, 1) ** gamma
    noise = torch.empty(b, 1, 1, 1).uniform_(0, 0.04, generator=gen)
    rgb = rgb + noise * torch.randn(rgb.shape, generator=gen)
    x[:, :3] = rgb.clamp(0, 1) - 0.5
    # Synthetic glare discs: saturated colour around, no depth in the core.
    vv = torch.arange(INPUT_H).view(1, -1, 1).float()
    uu = torch.arange(INPUT_W).view(1, 1, -1).float()
    has = torch.rand(b, generator=gen) < 0.35
    cu = torch.rand(b, generator=gen) * INPUT_W
    cv = torch.rand(b, generator=gen) * INPUT_H
    rad = 8 + torch.rand(b, generator=gen) * 22
    r2 = (uu - cu.view(-1, 1, 1)) ** 2 + (vv - cv.view(-1, 1, 1)) ** 2
    sat = (r2 < (1.12 * rad.view(-1, 1, 1)) ** 2) & has.view(-1, 1, 1)
    core = (r2 < rad.view(-1, 1, 1) ** 2) & has.view(-1, 1, 1)
    x[:, :3] = torch.where(sat.unsqueeze(1), torch.full_like(x[:, :3], 0.49), x[:, :3])
    x[:, 3] = torch.where(core, torch.zeros_like(x[:, 3]), x[:, 3])
    x[:, 4] = torch.where(core, torch.zeros_like(x[:, 4]), x[:, 4])
    # Rectangular depth drop-outs.
    drop = torch.rand(b, generator=gen) < 0.3
    for i in torch.nonzero(drop).flatten().tolist():
        w = int(torch.randint(5, 40, (1,), generator=gen))
        h = int(torch.randint(5, 30, (1,), generator=gen))
        u0 = int(torch.randint(0, INPUT_W - w, (1,), generator=gen))
        v0 = int(torch.randint(0, INPUT_H - h, (1,), generator=gen))
        x[i, 3:5, v0:v0 + h, u0:u0 + w] = 0
    flip_u = torch.rand(b, generator=gen) < 0.5
    x[flip_u] = x[flip_u].flip(-1)
    y[flip_u] = y[flip_u].flip(-1)
    flip_v = torch.rand(b, generator=gen) < 0.5
    x[flip_v] = x[flip_v].flip(-2)
    y[flip_v] = y[flip_v].flip(-2)
    return x, y


def evaluate(model, x, y, lighting) -> dict[str, dict[str, float]]:
    """Cell metrics at 80x60 per lighting.

    Foreground IoU (and recall where depth is missing), contact precision / recall at p 0.5.
    """
    import torch
    import torch.nn.functional as nnf

    model.eval()
    out: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        probs = torch.cat([torch.sigmoid(model(x[i:i + 64])) for i in range(0, len(x), 64)])
    pred = probs[:, 0] > 0.5
    truth = y[:, 0] > 0.5
    cpred, ctruth = probs[:, 1] > 0.5, y[:, 1] > 0.5
    hole = nnf.avg_pool2d(x[:, 4:5], 2)[:, 0] < 0.5
    for cond in sorted(set(lighting.tolist())):
        m = torch.from_numpy(lighting == cond)
        p, t, h = pred[m], truth[m], hole[m]
        inter, union = (p & t).sum().item(), (p | t).sum().item()
        th = (t & h).sum().item()
        cp, ct = cpred[m], ctruth[m]
        out[cond] = {'iou': inter / max(union, 1),
                     'contact_precision': (cp & ct).sum().item() / max(cp.sum().item(), 1),
                     'contact_recall': (cp & ct).sum().item() / max(ct.sum().item(), 1),
                     'hole_recall': (p & t & h).sum().item() / th if th else float('nan'),
                     'hole_object_cells': int(th)}
    model.train()
    return out


def flush_subnormal_parameters(model) -> int:
    """Set every subnormal weight to zero; returns how many there were.

    Training leaves thousands of weights below float32's smallest normal number (1.2e-38).
    They change no output, but on Intel CPUs every multiply with one takes a microcode
    assist: ONNX Runtime ran this model 12x slower with them (31 ms vs 2.6 ms a frame here).
    """
    import torch

    tiny = torch.finfo(torch.float32).tiny
    flushed = 0
    with torch.no_grad():
        for p in model.parameters():
            sub = (p != 0) & (p.abs() < tiny)
            flushed += int(sub.sum())
            p[sub] = 0.0
    return flushed


def main(argv: list[str] | None = None) -> int:
    """Render, train, export, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--scenes', type=int, default=150, help='training scenes (x 8 lights)')
    parser.add_argument('--val-scenes', type=int, default=20, help='validation scenes')
    parser.add_argument('--seed0', type=int, default=1000, help='first training scene seed')
    parser.add_argument('--minutes', type=float, default=6.0, help='training wall-clock budget')
    parser.add_argument('--epochs', type=int, default=60,
                        help='epochs (fewer when --minutes would be exceeded: measured first)')
    parser.add_argument('--batch', type=int, default=32)
    parser.add_argument('--workers', type=int, default=2, help='render processes')
    parser.add_argument('--threads', type=int, default=2, help='torch threads')
    parser.add_argument('--data', type=Path, help='use this dataset .npz (train_*, val_* arrays '
                        'as written by --pack-data)')
    parser.add_argument('--pack-data', type=Path, help='write the (packed) dataset here, exit')
    parser.add_argument('--pack-limit', type=int, default=0,
                        help='with --pack-data: only the first N training frames, no val')
    parser.add_argument('--init-state', type=Path, help='start from this state_dict (.pt)')
    parser.add_argument('--save-state', type=Path, help='also save the trained state_dict')
    parser.add_argument('--provenance', default='',
                        help='JSON object merged into the record\'s "training" (e.g. the run '
                             'that produced --init-state)')
    parser.add_argument('--output', type=Path, default=ONNX_PATH)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args(argv)

    import torch
    import torch.nn.functional as nnf

    t_start = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    train_seeds = list(range(args.seed0, args.seed0 + args.scenes))
    val_seeds = list(range(args.seed0 + 50000, args.seed0 + 50000 + args.val_scenes))
    if args.data:
        d = np.load(args.data)
        train = unpack({k[len('train_'):]: d[k] for k in d.files if k.startswith('train_')})
        val = unpack({k[len('val_'):]: d[k] for k in d.files if k.startswith('val_')})
    else:
        train = build_dataset(train_seeds, args.workers)
        val = build_dataset(val_seeds, args.workers)
    if args.pack_data:
        if args.pack_limit:
            train = {k: v[:args.pack_limit] for k, v in train.items()}
            val = {k: v[:8] for k, v in val.items()}
        packed = {f'train_{k}': v for k, v in pack(train).items()}
        packed.update({f'val_{k}': v for k, v in pack(val).items()})
        np.savez_compressed(args.pack_data, **packed)
        print(f'wrote {args.pack_data}')
        return 0
    t_data = time.time() - t_start
    print(f'data: {len(train["x"])} train / {len(val["x"])} val frames ({t_data:.0f} s)',
          flush=True)
    dev = torch.device(args.device)
    xt = torch.from_numpy(train['x'].astype(np.float32))
    yt = torch.from_numpy(train['y'].astype(np.float32) / 255.0)
    xv = torch.from_numpy(val['x'].astype(np.float32))
    yv = torch.from_numpy(val['y'].astype(np.float32) / 255.0)
    model = build_torch_model()
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location='cpu'))
    model = model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
    steps_per_epoch = (len(xt) + args.batch - 1) // args.batch
    if args.epochs > 0:
        # Fit the schedule to the budget: time a few steps on a copy, then fix the epochs.
        probe = build_torch_model().to(dev)
        probe_opt = torch.optim.Adam(probe.parameters())
        t_probe = time.time()
        for _ in range(3):
            xb = xt[:args.batch].to(dev)
            loss = probe(xb).mean()
            probe_opt.zero_grad()
            loss.backward()
            probe_opt.step()
        epoch_s = (time.time() - t_probe) / 3 * steps_per_epoch * 1.15   # + augmentation
        fit = max(1, int(args.minutes * 60 / epoch_s))
        if fit < args.epochs:
            print(f'~{epoch_s:.0f} s per epoch: {fit} epochs fit in {args.minutes} min',
                  flush=True)
            args.epochs = fit
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=3e-3, pct_start=0.1,
        total_steps=max(args.epochs, 1) * steps_per_epoch)
    gen = torch.Generator().manual_seed(SEED)
    # Contact cells are rare: weight them up to about a quarter of the non-contact mass.
    contact_frac = float(yt[:, 1].mean())
    contact_weight = torch.tensor(min(20.0, 0.25 / max(contact_frac, 1e-4)), device=dev)
    t_train0 = time.time()
    budget = args.minutes * 60.0
    epochs_done = 0
    for epoch in range(args.epochs):
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb, yb = augment(xt[idx], yt[idx], gen)
            logit = model(xb.to(dev))
            yb = yb.to(dev)
            loss = (nnf.binary_cross_entropy_with_logits(logit[:, 0], yb[:, 0])
                    + nnf.binary_cross_entropy_with_logits(logit[:, 1], yb[:, 1],
                                                           pos_weight=contact_weight))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        epochs_done = epoch + 1
        elapsed = time.time() - t_train0
        print(f'epoch {epoch + 1}: loss {total / steps_per_epoch:.4f} ({elapsed:.0f} s)',
              flush=True)
        if elapsed * (epoch + 2) / (epoch + 1) > budget:
            print('training budget reached', flush=True)
            break
    t_train = time.time() - t_train0
    model = model.cpu().eval()
    flushed = flush_subnormal_parameters(model)
    print(f'{flushed} subnormal weights set to 0', flush=True)
    if args.save_state:
        torch.save(model.state_dict(), args.save_state)
    metrics = evaluate(model, xv, yv, val['lighting'])
    for cond, m in metrics.items():
        print(f'val {cond}: IoU {m["iou"]:.3f}, recall in depth holes '
              f'{m["hole_recall"]:.3f}, contact P/R {m["contact_precision"]:.2f}/'
              f'{m["contact_recall"]:.2f}')

    args.output.parent.mkdir(parents=True, exist_ok=True)
    dummy = torch.zeros(1, 5, INPUT_H, INPUT_W)
    torch.onnx.export(model, (dummy,), str(args.output), dynamo=False, opset_version=17,
                      input_names=[SEGNET_INPUT], output_names=[SEGNET_OUTPUT],
                      do_constant_folding=True)
    meta = {
        'model': 'segnet',
        'onnx': args.output.name,
        'sha256': sha256_file(args.output),
        'created_utc': datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds'),
        'torch': torch.__version__,
        'seed': SEED,
        'parameters': n_params,
        'opset': 17,
        'input': {'name': SEGNET_INPUT, 'shape': [1, 5, INPUT_H, INPUT_W], 'dtype': 'float32'},
        'output': {'name': SEGNET_OUTPUT, 'shape': [1, 2, OUTPUT_H, OUTPUT_W],
                   'meaning': 'per 8x8 VGA cell: logit object foreground, logit contact of '
                              'two objects'},
        'normalisation': {
            'rgb': 'RGB / 255 - 0.5, area-resampled',
            'height': f'world z / {HEIGHT_SCALE} m clipped to {list(HEIGHT_CLIP)}, mean over '
                      'valid depth pixels of the cell, 0 where none',
            'valid': 'fraction of the cell with valid depth'},
        'data': {'split': 'train (objects 000-799)', 'train_scene_seeds':
                 [train_seeds[0], train_seeds[-1]], 'val_scene_seeds':
                 [val_seeds[0], val_seeds[-1]], 'train_frames': int(len(xt)),
                 'val_frames': int(len(xv)), 'lighting': 'all 8 conditions per scene'},
        'training': {'epochs': epochs_done,
                     'contact_pos_weight': round(float(contact_weight), 3),
                     'batch': args.batch, 'optimizer': 'Adam, one-cycle',
                     'max_lr': 3e-3, 'device': args.device, 'threads': args.threads,
                     'data_seconds': round(t_data, 1), 'train_seconds': round(t_train, 1),
                     'subnormal_weights_flushed': flushed},
        'val_metrics': metrics,
    }
    if args.provenance:
        meta['training'].update(json.loads(args.provenance))
    Path(META_PATH if args.output == ONNX_PATH else args.output.with_suffix('.json')
         ).write_text(json.dumps(meta, indent=2) + '\n')
    print(f'wrote {args.output} ({n_params} parameters, sha256 {meta["sha256"][:12]})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
