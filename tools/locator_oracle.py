# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Ground-truth oracles for the deployed locator's segmentation (analysis only, never deployed).

How far could better segmentation decisions take the locator on what the sensors deliver?
Under :func:`oracle` the deployed :func:`locate_objects` keeps its own foreground, noise and
size thresholds but takes one or both of its segmentation decisions from the simulator's
label image:

- ``cuts``: every 4-neighbour pair of foreground pixels on two different objects is cut too
  (a perfect instance boundary on top of the colour, hue and depth cuts);
- ``merges``: of the regions the cuts leave, two on the same object (majority label) always
  join when they touch and two on different objects never do.

What is still missed under both is lost before segmentation: too few foreground pixels (the
depth blind spot, edge dropouts) or a centroid pulled off by a part the sensors cannot see.
The patch is process-local and undone on exit.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import numpy as np

from edge_loop.kernels.object_locator import colour, deployed, merging

MODES = ('cuts', 'merges', 'both')


class _Truth:
    """The frame's label image and the majority object of each region, while patched."""

    label: np.ndarray | None = None
    crop_origin: tuple[int, int] = (0, 0)
    region_object: dict[int, int] = {}


def set_frame_label(label: np.ndarray) -> None:
    """The simulator's label image of the frame about to be located."""
    _Truth.label = label


@contextlib.contextmanager
def oracle(mode: str) -> Iterator[None]:
    """Patch the locator's cut and/or merge with the truth (``mode`` in :data:`MODES`)."""
    if mode not in MODES:
        raise ValueError(f'oracle mode must be one of {MODES}, got {mode!r}')
    # Patched where the deployed locator looks them up: its own module, and merging's for the
    # merge that _merge_grown calls.
    where = {'color_cut': deployed, 'depth_cut': deployed, '_merge_grown': deployed,
             'merge_regions': merging}
    saved = {name: getattr(module, name) for name, module in where.items()}
    color_cut, depth_cut = saved['color_cut'], saved['depth_cut']
    merge_grown, merge_regions = saved['_merge_grown'], saved['merge_regions']

    def color_cut_at(color_rgb, fg, r0, c0, step):
        _Truth.crop_origin = (r0, c0)       # locate_objects cuts colour first, then depth
        return color_cut(color_rgb, fg, r0, c0, step)

    def depth_cut_and_truth(height, fg, step):
        cut = depth_cut(height, fg, step)
        r0, c0 = _Truth.crop_origin
        lab = _Truth.label[r0:r0 + fg.shape[0], c0:c0 + fg.shape[1]].astype(np.int32)
        dx = (lab[:, 1:] != lab[:, :-1]) & (lab[:, 1:] > 0) & (lab[:, :-1] > 0)
        dy = (lab[1:] != lab[:-1]) & (lab[1:] > 0) & (lab[:-1] > 0)
        return cut | colour._both_sides(dx, dy, fg.shape)

    def merge_grown_with_truth(grown, color_rgb, mask, rows, cols, crop_idx, *args):
        region = grown.reshape(-1)[crop_idx].astype(np.intp)
        truth = _Truth.label[rows, cols]
        majority = {}
        for i in np.unique(region):
            t = truth[(region == i) & (truth > 0)]
            majority[int(i)] = Counter(t.tolist()).most_common(1)[0][0] if t.size else 0
        _Truth.region_object = majority
        return merge_grown(grown, color_rgb, mask, rows, cols, crop_idx, *args)

    def merge_by_truth(rgb_sums, counts, contact, *args, **kwargs):
        obj = _Truth.region_object
        by_rules = merge_regions(rgb_sums, counts, contact, *args, **kwargs)
        root = {i: i for i in rgb_sums}

        def find(i):
            while root[i] != i:
                i = root[i]
            return i
        # Same object: joined if touching or if the rules joined them (a gap join).
        same = [(i, j) for i in root for j in root if i < j and obj.get(i)
                and obj.get(i) == obj.get(j) and ((i, j) in contact or by_rules[i] == by_rules[j])]
        for i, j in same:
            a, b = find(i), find(j)
            root[max(a, b)] = min(a, b)
        return {i: find(i) for i in root}

    if mode in ('cuts', 'both'):
        deployed.color_cut, deployed.depth_cut = color_cut_at, depth_cut_and_truth
    if mode in ('merges', 'both'):
        deployed._merge_grown, merging.merge_regions = merge_grown_with_truth, merge_by_truth
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(where[name], name, fn)
