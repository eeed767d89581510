# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Shared parts of the learned touching-object boundary experiment (issue 34; tools only).

- :func:`cpu_masks`: the deployed locator's own foreground and cut masks (its default path,
  same crop, same functions), as full-frame bool arrays for ``locate_objects(masks=...)``;
  with them unmodified the locator's answers are the same as without ``masks``.
- :func:`boundary_target`: object pixels with a *different* object label within 1 px (8-nbhd).
- :func:`features`: the net's inputs from what the locator has (exposure-normalised RGB,
  height above the table, foreground, the per-pixel cut).
- :class:`BoundaryNet`: a tiny fully-convolutional net (one stride-2 level, dilated context).
- :func:`predict`: boundary probability on the foreground's bounding box (zeros elsewhere).
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from edge_loop.kernels import exposure
from edge_loop.kernels.object_locator.colour import color_cut, depth_cut, hue_cut
from edge_loop.kernels.object_locator.scene import height_scene

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
from locator_worlds import frame  # noqa: E402,F401  (re-exported for the two scripts)

CACHE = Path('/tmp/edge_loop_locator_worlds')
WEIGHTS = Path('/tmp/boundary/boundary_net.pt')
HELD_OUT = 600000          # never touch seeds at or above this
HEIGHT_SCALE = 20.0        # metres -> net input (5 cm -> 1)
MARGIN = 8                 # pixels around the foreground box the net sees


def single_thread() -> None:
    """This machine is shared: one torch / OpenCV thread."""
    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def check_seed(seed: int) -> None:
    """Refuse the held-out evaluation worlds."""
    if seed >= HELD_OUT:
        raise SystemExit(f'seed {seed}: held-out evaluation worlds are never used here')


def normalised(d: dict) -> np.ndarray:
    """The colour image as locator_worlds.py gives it to the locator."""
    color, _ = exposure.normalise_exposure(d['color'], exposure.DEFAULT_TARGET,
                                           exposure.DEFAULT_MAX_GAIN)
    return color


def cpu_masks(color: np.ndarray, depth_mm: np.ndarray, intr, ext, p, scene=None):
    """(scene, fg, cut): the deployed locator's default-path masks as full-frame bool arrays.

    Mirrors ``deployed.locate_objects`` without ``masks`` (no ``fill``): the same foreground
    (height window, tray ROI), the same crop (foreground box + ``bridge_px``) for the colour,
    hue and depth-step cuts, so the 3x3 blurs see the same pixels.
    """
    scene = scene or height_scene(depth_mm, intr, ext)
    h, w = intr.height, intr.width
    height = scene.height
    fg = np.zeros((h, w), bool)
    cut = np.zeros((h, w), bool)
    with np.errstate(invalid='ignore'):
        cand = np.flatnonzero((height > p.min_height) & (height < p.max_height))
    if cand.size == 0:
        return scene, fg, cut
    pts = scene.points(cand)
    in_roi = ((pts[:, 0] > p.roi_x[0]) & (pts[:, 0] < p.roi_x[1])
              & (pts[:, 1] > p.roi_y[0]) & (pts[:, 1] < p.roi_y[1]))
    fg_idx = cand[in_roi]
    if fg_idx.size == 0:
        return scene, fg, cut
    fg.reshape(-1)[fg_idx] = True
    rows, cols = np.divmod(fg_idx, w)
    b = p.bridge_px
    r0, r1 = max(int(rows[0]) - b, 0), min(int(rows[-1]) + 1 + b, h)
    c0, c1 = max(int(cols.min()) - b, 0), min(int(cols.max()) + 1 + b, w)
    mask = fg[r0:r1, c0:c1].astype(np.uint8)
    c = color_cut(color, mask, r0, c0, p.color_step)
    if p.hue_step > 0:
        c |= hue_cut(color, mask, r0, c0, p)
    c |= depth_cut(height[r0:r1, c0:c1], mask, p.depth_step)
    cut[r0:r1, c0:c1] = c
    return scene, fg, cut & fg


def boundary_target(label: np.ndarray) -> np.ndarray:
    """Object pixels with a different object (label > 0) in their 3x3 neighbourhood."""
    lab = label.astype(np.int32)
    k = np.ones((3, 3), np.uint8)
    big = np.int32(1 << 30)
    lab_f = lab.astype(np.float32)
    hi = cv2.dilate(lab_f, k, borderType=cv2.BORDER_REPLICATE)
    nz = np.where(lab > 0, lab, big).astype(np.float32)
    lo = cv2.erode(nz, k, borderType=cv2.BORDER_REPLICATE)
    obj = lab > 0
    return obj & ((hi > lab_f) | ((lo < lab_f) & (lo < float(big))))


def fg_box(fg: np.ndarray, margin: int = MARGIN, mult: int = 4):
    """(r0, r1, c0, c1) of the foreground's box plus ``margin``, sides a multiple of ``mult``."""
    rr = np.flatnonzero(fg.any(axis=1))
    cc = np.flatnonzero(fg.any(axis=0))
    h, w = fg.shape
    if rr.size == 0:
        return None
    r0, r1 = max(int(rr[0]) - margin, 0), min(int(rr[-1]) + 1 + margin, h)
    c0, c1 = max(int(cc[0]) - margin, 0), min(int(cc[-1]) + 1 + margin, w)
    # grow to a multiple of mult inside the frame
    while (r1 - r0) % mult:
        if r1 < h:
            r1 += 1
        else:
            r0 -= 1
    while (c1 - c0) % mult:
        if c1 < w:
            c1 += 1
        else:
            c0 -= 1
    return r0, r1, c0, c1


def features(color: np.ndarray, height: np.ndarray, fg: np.ndarray,
             cut: np.ndarray) -> np.ndarray:
    """(6, H, W) float32: RGB / 255, height x HEIGHT_SCALE (0 off the foreground), fg, cut."""
    hgt = np.where(fg, np.nan_to_num(height, nan=0.0), 0.0).astype(np.float32) * HEIGHT_SCALE
    x = np.empty((6,) + fg.shape, np.float32)
    x[:3] = color.transpose(2, 0, 1).astype(np.float32) * np.float32(1 / 255)
    x[3] = np.clip(hgt, -1.0, 8.0)
    x[4] = fg
    x[5] = cut
    return x


class BoundaryNet(nn.Module):
    """Full-res stem -> stride-2 dilated context -> upsample + skip -> 1 logit per pixel."""

    def __init__(self, c: int = 16, cin: int = 6):
        super().__init__()
        self.stem = nn.Conv2d(cin, 8, 3, padding=1)
        self.down = nn.Conv2d(8, c, 3, stride=2, padding=1)
        self.ctx = nn.ModuleList([nn.Conv2d(c, c, 3, padding=d, dilation=d)
                                  for d in (1, 2, 4, 8, 1)])
        self.fuse = nn.Conv2d(c + 8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.relu(self.stem(x))
        y = F.relu(self.down(s))
        for conv in self.ctx:
            y = F.relu(conv(y)) + y
        y = F.interpolate(y, size=s.shape[-2:], mode='bilinear', align_corners=False)
        z = F.relu(self.fuse(torch.cat([y, s], 1)))
        return self.head(z)


def load_net(path: Path = WEIGHTS) -> BoundaryNet:
    """The saved net (train_boundary.py), in eval mode."""
    ck = torch.load(path, map_location='cpu')
    net = BoundaryNet(**ck.get('config', {}))
    net.load_state_dict(ck['state'])
    net.eval()
    return net


@torch.inference_mode()
def predict(net: BoundaryNet, color: np.ndarray, height: np.ndarray, fg: np.ndarray,
            cut: np.ndarray) -> np.ndarray:
    """(H, W) float32 boundary probability (the foreground box only; 0 elsewhere)."""
    prob = np.zeros(fg.shape, np.float32)
    box = fg_box(fg)
    if box is None:
        return prob
    r0, r1, c0, c1 = box
    x = features(color[r0:r1, c0:c1], height[r0:r1, c0:c1], fg[r0:r1, c0:c1],
                 cut[r0:r1, c0:c1])
    logit = net(torch.from_numpy(x)[None])[0, 0]
    prob[r0:r1, c0:c1] = torch.sigmoid(logit).numpy()
    return prob
