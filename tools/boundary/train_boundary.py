# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Train a tiny per-pixel 'boundary between two touching objects' net (issue 34 experiment).

Training worlds only: the net is fitted on seeds 500000-500399 (as drawn, and every seed
divisible by 3 also relit ``glare:1.0`` so washed-out merges are represented); seeds
500400-500499 (as drawn and all relit ``glare:1.0``) are held apart for the validation loss and
for choosing the threshold in eval_boundary.py. Seeds 500500-500799 (the evaluation set of
eval_boundary.py) and the held-out worlds (>= 600000) are never read.

Inputs per pixel (what the locator has): exposure-normalised RGB, height above the table
(``height_scene``), the locator's foreground and its per-pixel cut (colour / hue / depth step).
Target: foreground object pixels with a different object label within 1 px (8-neighbourhood).
Loss: BCE on foreground pixels only, positives weighted ``--pos-weight``; random crops, half
of them centred on a boundary pixel. Seeded; CPU, one thread.

    .venv-jazzy/bin/python tools/boundary/train_boundary.py            # render + prepare + fit
    .venv-jazzy/bin/python tools/boundary/train_boundary.py --minutes 14 \
        --out /tmp/boundary/boundary_net.pt      # (the reported net: 14 minutes, seed 0)

Frames are rendered once with ``tools/locator_worlds.py``'s ``frame()`` (pybullet, ~0.6 s each)
and cached under /tmp/edge_loop_locator_worlds; prepared crops are cached in
/tmp/boundary/data.pkl (``--rebuild`` to redo).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
import boundary_common as bc  # noqa: E402

TRAIN = range(500000, 500400)
THRESH = range(500400, 500500)


def jobs(split: str) -> list[tuple[int, str]]:
    """(seed, relight) frames of the 'train' or 'thresh' split."""
    if split == 'train':
        return ([(s, '') for s in TRAIN]
                + [(s, 'glare:1.0') for s in TRAIN if s % 3 == 0])
    return [(s, '') for s in THRESH] + [(s, 'glare:1.0') for s in THRESH]


def sample(seed: int, relight: str) -> dict:
    """Features, target and loss mask of one frame, cropped to the foreground's box."""
    bc.check_seed(seed)
    d = bc.frame(seed, bc.CACHE, relight)
    color = bc.normalised(d)
    scene, fg, cut = bc.cpu_masks(color, d['depth_mm'], d['intr'], d['ext'], d['lp'])
    box = bc.fg_box(fg)
    if box is None:
        return None
    r0, r1, c0, c1 = box
    x = bc.features(color[r0:r1, c0:c1], scene.height[r0:r1, c0:c1], fg[r0:r1, c0:c1],
                    cut[r0:r1, c0:c1])
    tgt = bc.boundary_target(d['label'])[r0:r1, c0:c1] & fg[r0:r1, c0:c1]
    return {'seed': seed, 'relight': relight, 'x': x.astype(np.float16),
            'y': tgt, 'm': fg[r0:r1, c0:c1]}


def prepare(path: Path, rebuild: bool) -> dict:
    """The prepared crops of both splits (cached at ``path``)."""
    if path.exists() and not rebuild:
        return pickle.loads(path.read_bytes())
    t0 = time.time()
    data = {}
    for split in ('train', 'thresh'):
        out = []
        for i, (s, r) in enumerate(jobs(split)):
            smp = sample(s, r)
            if smp is not None:
                out.append(smp)
            if i % 100 == 0:
                print(f'  {split} {i} seed {s} {r} {time.time() - t0:.0f}s', flush=True)
        data[split] = out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return data


def crop_batch(items: list[dict], rng: np.random.Generator, size: int, n: int):
    """Return n random (size x size) crops, half centred near a boundary pixel; random flips."""
    xs = np.zeros((n, 6, size, size), np.float32)
    ys = np.zeros((n, 1, size, size), np.float32)
    ms = np.zeros((n, 1, size, size), np.float32)
    pos_items = [it for it in items if it['y'].any()]
    for b in range(n):
        centred = rng.random() < 0.5 and pos_items
        it = pos_items[rng.integers(len(pos_items))] if centred else items[rng.integers(len(items))]
        h, w = it['m'].shape
        if centred:
            rr, cc = np.nonzero(it['y'])
            j = rng.integers(rr.size)
            r0 = int(rr[j]) - size // 2 + rng.integers(-size // 4, size // 4 + 1)
            c0 = int(cc[j]) - size // 2 + rng.integers(-size // 4, size // 4 + 1)
        else:
            r0 = rng.integers(min(0, h - size), max(0, h - size) + 1)
            c0 = rng.integers(min(0, w - size), max(0, w - size) + 1)
        r0 = int(np.clip(r0, min(0, h - size), max(0, h - size)))
        c0 = int(np.clip(c0, min(0, w - size), max(0, w - size)))
        sr0, sc0 = max(r0, 0), max(c0, 0)
        sr1, sc1 = min(r0 + size, h), min(c0 + size, w)
        dr0, dc0 = sr0 - r0, sc0 - c0
        xs[b, :, dr0:dr0 + sr1 - sr0, dc0:dc0 + sc1 - sc0] = it['x'][:, sr0:sr1, sc0:sc1]
        ys[b, 0, dr0:dr0 + sr1 - sr0, dc0:dc0 + sc1 - sc0] = it['y'][sr0:sr1, sc0:sc1]
        ms[b, 0, dr0:dr0 + sr1 - sr0, dc0:dc0 + sc1 - sc0] = it['m'][sr0:sr1, sc0:sc1]
        if rng.random() < 0.5:      # flips and transposes: the scene has no preferred side
            xs[b], ys[b], ms[b] = xs[b, :, :, ::-1], ys[b, :, :, ::-1], ms[b, :, :, ::-1]
        if rng.random() < 0.5:
            xs[b], ys[b], ms[b] = xs[b, :, ::-1], ys[b, :, ::-1], ms[b, :, ::-1]
        if rng.random() < 0.5:
            xs[b], ys[b], ms[b] = (xs[b].transpose(0, 2, 1), ys[b].transpose(0, 2, 1),
                                   ms[b].transpose(0, 2, 1))
    return torch.from_numpy(xs), torch.from_numpy(ys), torch.from_numpy(ms)


def loss_fn(logit, y, m, pos_weight: float):
    """Weighted BCE over the foreground (m), positives x pos_weight."""
    w = m * (1.0 + (pos_weight - 1.0) * y)
    loss = F.binary_cross_entropy_with_logits(logit, y, weight=w, reduction='sum')
    return loss / w.sum().clamp_min(1.0)


@torch.inference_mode()
def validate(net, items: list[dict], pos_weight: float) -> dict:
    """Validation loss and pixel precision / recall at a few thresholds (foreground only)."""
    net.eval()
    tot, n = 0.0, 0
    stats = {t: [0, 0, 0] for t in (0.3, 0.5, 0.7, 0.9)}
    for it in items:
        x = torch.from_numpy(it['x'].astype(np.float32))[None]
        y = torch.from_numpy(it['y'].astype(np.float32))[None, None]
        m = torch.from_numpy(it['m'].astype(np.float32))[None, None]
        logit = net(x)
        tot += float(loss_fn(logit, y, m, pos_weight))
        n += 1
        p = torch.sigmoid(logit)[0, 0].numpy()
        yy, mm = it['y'], it['m']
        for t, s in stats.items():
            pr = (p > t) & mm
            s[0] += int((pr & yy).sum())
            s[1] += int(pr.sum())
            s[2] += int(yy.sum())
    net.train()
    out = {'loss': tot / max(n, 1)}
    for t, (tp, npred, npos) in stats.items():
        out[t] = (tp / max(npred, 1), tp / max(npos, 1))
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: prepare, fit, validate, save."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--data', type=Path, default=Path('/tmp/boundary/data.pkl'))
    ap.add_argument('--rebuild', action='store_true')
    ap.add_argument('--out', type=Path, default=bc.WEIGHTS)
    ap.add_argument('--minutes', type=float, default=12.0, help='training wall-clock budget')
    ap.add_argument('--steps', type=int, default=100000)
    ap.add_argument('--batch', type=int, default=12)
    ap.add_argument('--crop', type=int, default=96)
    ap.add_argument('--lr', type=float, default=3e-3)
    ap.add_argument('--pos-weight', type=float, default=5.0)
    ap.add_argument('--width', type=int, default=16)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    bc.single_thread()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    data = prepare(args.data, args.rebuild)
    train, held = data['train'], data['thresh']
    npos = sum(int(it['y'].sum()) for it in train)
    nfg = sum(int(it['m'].sum()) for it in train)
    print(f'train frames {len(train)} ({sum(it["y"].any() for it in train)} with touching '
          f'objects), boundary {npos} of {nfg} foreground pixels ({npos / nfg:.2%}); '
          f'threshold-set frames {len(held)}', flush=True)
    net = bc.BoundaryNet(c=args.width)
    print(f'parameters: {sum(p.numel() for p in net.parameters())}', flush=True)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    t0 = time.time()
    budget = args.minutes * 60
    step = 0
    run = 0.0
    while step < args.steps and time.time() - t0 < budget:
        frac = (time.time() - t0) / budget
        for g in opt.param_groups:       # cosine decay over the wall-clock budget
            g['lr'] = args.lr * 0.5 * (1 + np.cos(np.pi * min(frac, 1.0)))
        x, y, m = crop_batch(train, rng, args.crop, args.batch)
        loss = loss_fn(net(x), y, m, args.pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        run = 0.98 * run + 0.02 * loss.item() if step else loss.item()
        step += 1
        if step % 200 == 0:
            print(f'step {step} {time.time() - t0:.0f}s loss {run:.4f}', flush=True)
    v = validate(net, held, args.pos_weight)
    print(f'done: {step} steps in {time.time() - t0:.0f}s; threshold set loss {v["loss"]:.4f}; '
          + '; '.join(f'p>{t}: precision {v[t][0]:.2f} recall {v[t][1]:.2f}'
                      for t in (0.3, 0.5, 0.7, 0.9)), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({'state': net.state_dict(), 'config': {'c': args.width},
                'args': {k: str(v) for k, v in vars(args).items()}, 'steps': step}, args.out)
    print(f'saved {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
