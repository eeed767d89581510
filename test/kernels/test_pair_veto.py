# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The locator's learned pair veto (object_locator.pair_veto): off by default, what it vetoes."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels.camera import D435_VGA
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    LocatorParams,
    locate_objects,
    locate_objects_reference,
    merge_regions,
)
from edge_loop.kernels.object_locator import pair_veto_weights as weights
from edge_loop.kernels.object_locator.pair_veto import (
    pair_features,
    two_objects_probability,
    vetoed_pairs,
)
from edge_loop.verify.sweeps import Box, scene

VETO = LocatorParams(merge_pair_veto=0.7)
FLOOR = np.array([150.0, 140.0, 120.0])
RED, DARK_RED, BLUE = (np.array(c, float) * 1000 for c in ((200, 50, 50), (100, 26, 24),
                                                           (40, 40, 200)))


def test_weights_match_the_features():
    n, hidden = len(weights.FEATURES), len(weights.B1)
    assert len(weights.MEAN) == len(weights.SCALE) == n == 12
    assert np.shape(weights.W1) == (n, hidden) and np.shape(weights.W2) == (hidden,)
    assert all(s > 0 for s in weights.SCALE)


def test_off_by_default_and_the_rules_alone_decide():
    sums, counts = {1: RED, 2: DARK_RED, 3: BLUE}, {1: 1000, 2: 1000, 3: 1000}
    contact = {(1, 2): 40, (2, 3): 40, (1, 3): 40}
    assert DEFAULT_PARAMS.merge_pair_veto == 0
    assert vetoed_pairs(sums, sums, counts, contact, {}, None, None, DEFAULT_PARAMS,
                        D435_VGA) == set()
    assert merge_regions(sums, counts, contact, FLOOR, DEFAULT_PARAMS, D435_VGA)[2] == 1
    # On: a red and a half as bright red along a border of height steps are two objects to it
    # (the rules take the darker one for the lit one's shaded side): they stay apart.
    assert vetoed_pairs(sums, sums, counts, contact, {}, None, None, VETO, D435_VGA) \
        == {(1, 2), (1, 3), (2, 3)}
    assert merge_regions(sums, counts, contact, FLOOR, VETO, D435_VGA) == {1: 1, 2: 2, 3: 3}


def test_one_surface_of_one_colour_is_not_vetoed():
    """A long border without height steps between regions of one colour: one object."""
    sums, counts = {1: RED, 2: RED * 1.05}, {1: 2000, 2: 1500}
    contact = {(1, 2): 120}
    features = pair_features([(1, 2)], sums, sums, counts, contact, {(1, 2): 120},
                             {1: 300, 2: 260}, None, VETO, D435_VGA)
    assert two_objects_probability(features)[0] < 0.01
    assert merge_regions(sums, counts, contact, FLOOR, VETO, D435_VGA,
                         smooth={(1, 2): 120}) == {1: 1, 2: 1}
    # The same pair along a border of height steps is two objects of one colour to it.
    steps = pair_features([(1, 2)], sums, sums, counts, contact, {}, {1: 300, 2: 260}, None,
                          VETO, D435_VGA)
    assert two_objects_probability(steps)[0] > two_objects_probability(features)[0]


def test_a_pair_below_merge_min_contact_is_not_judged():
    sums, counts = {1: RED, 2: BLUE}, {1: 1000, 2: 1000}
    assert vetoed_pairs(sums, sums, counts, {(1, 2): 2}, {}, None, None, VETO, D435_VGA) == set()


@pytest.mark.parametrize('boxes', [
    (Box(0.0, 0.0, 0.0, 0.06, 0.05, 0.03, rgb=(220, 200, 40)),
     Box(0.0375, 0.0, 0.0, 0.015, 0.015, 0.02, rgb=(140, 40, 200))),
    (Box(-0.03, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(200, 60, 60)),
     Box(0.02, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(190, 70, 60)),
     Box(0.0, 0.05, 0.0, 0.04, 0.04, 0.05, rgb=(60, 60, 200))),
], ids=['small_on_large', 'three_touching'])
def test_both_implementations_agree_with_the_veto_on(boxes):
    """The veto works on merge_regions' sums, which both implementations build alike."""
    f = scene(640, 480, boxes=boxes)
    for glare in (1.0, 1.8):    # as rendered, and washed towards white
        color = np.clip(f.color.astype(np.float32) * glare, 0, 255).astype(np.uint8)
        ref = locate_objects_reference(color, f.depth, f.intrinsics, f.extrinsics, VETO)
        dep = locate_objects(color, f.depth, f.intrinsics, f.extrinsics, VETO)
        assert len(ref) == len(dep) >= 1
        for r, d in zip(ref, dep):
            assert np.linalg.norm(r.position - d.position) < 1e-4
            assert r.pixel_count == d.pixel_count and r.mask_bbox == d.mask_bbox
