# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The locator's neck cut (kernels/object_locator/necks.py) on shapes whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels.camera import D435_VGA
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    LocatorParams,
    locate_objects,
    locate_objects_reference,
)
from edge_loop.kernels.object_locator.necks import (
    cut_components_at_necks,
    cut_labels_at_necks,
    neck_pieces,
    pieces_differ_in_colour,
)
from edge_loop.verify.sweeps import render_height_field, tilted_extrinsics


def _pixels(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.nonzero(mask)


def _discs(centres, radius, shape=(120, 200)) -> np.ndarray:
    rr, cc = np.mgrid[:shape[0], :shape[1]]
    mask = np.zeros(shape, bool)
    for r, c in centres:
        mask |= (rr - r) ** 2 + (cc - c) ** 2 <= radius ** 2
    return mask


def test_two_touching_discs_are_cut_between_their_centres():
    mask = _discs([(60, 60), (60, 99)], 20)         # 1 px overlap: a neck of ~13 px
    rows, cols = _pixels(mask)
    pieces = neck_pieces(rows, cols, ratio=0.6, min_peak=5.0, min_pixels=200)
    assert pieces is not None and sorted(np.unique(pieces)) == [0, 1]
    left = pieces[(rows == 60) & (cols == 60)][0]
    right = pieces[(rows == 60) & (cols == 99)][0]
    assert left != right
    # the cut runs through the neck: every pixel left of it in one piece, right in the other
    assert np.all(pieces[cols < 75] == left) and np.all(pieces[cols > 84] == right)


@pytest.mark.parametrize('shape', ['disc', 'rectangle', 'wide_waist'])
def test_one_object_without_a_narrow_neck_is_not_cut(shape):
    rr, cc = np.mgrid[:120, :200]
    if shape == 'disc':
        mask = _discs([(60, 80)], 30)
    elif shape == 'rectangle':
        mask = (abs(rr - 60) < 20) & (abs(cc - 100) < 60)
    else:   # two discs of radius 20 joined by a waist 34 px wide (saddle 17 > 0.6 x 20)
        mask = _discs([(60, 60), (60, 110)], 20) | ((abs(rr - 60) < 17) & (cc > 60) & (cc < 110))
    rows, cols = _pixels(mask)
    assert neck_pieces(rows, cols, ratio=0.6, min_peak=5.0, min_pixels=200) is None


def test_small_pieces_pinholes_and_a_zero_ratio_make_no_cut():
    mask = _discs([(60, 60), (60, 99)], 20)
    rows, cols = _pixels(mask)
    assert neck_pieces(rows, cols, ratio=0.0, min_peak=5.0, min_pixels=200) is None
    # a piece below min_pixels: no cut
    assert neck_pieces(rows, cols, ratio=0.6, min_peak=5.0, min_pixels=2000) is None
    # peaks lower than min_peak (radius 20 < 25): no core, no cut
    assert neck_pieces(rows, cols, ratio=0.6, min_peak=25.0, min_pixels=200) is None
    # one-pixel depth dropouts inside a single disc do not make necks
    disc = _discs([(60, 80)], 30)
    disc[50:70:4, 70:90:4] = False
    rows, cols = _pixels(disc)
    assert neck_pieces(rows, cols, ratio=0.6, min_peak=5.0, min_pixels=200) is None


def test_solid_regions_are_not_searched_but_two_discs_are():
    mask = _discs([(60, 60), (60, 99)], 20)
    rows, cols = _pixels(mask)
    # two touching discs fill 87-89 % of their hull: searched at 0.9, skipped at 0.85
    assert neck_pieces(rows, cols, 0.6, 5.0, 200, solidity=0.9) is not None
    assert neck_pieces(rows, cols, 0.6, 5.0, 200, solidity=0.85) is None


def test_pieces_must_differ_in_colour():
    pieces = np.array([0, 0, 1, 1])
    same = np.array([[100, 50, 50]] * 4, float)
    assert not pieces_differ_in_colour(same, pieces, 0.01)
    # the same chromaticity at another brightness (one object, half in shadow) is the same
    shaded = same.copy()
    shaded[2:] *= 0.5
    assert not pieces_differ_in_colour(shaded, pieces, 0.01)
    other = same.copy()
    other[2:] = (90, 60, 50)
    assert pieces_differ_in_colour(other, pieces, 0.01)


def _two_discs_frame(rng):
    mask = _discs([(60, 60), (60, 99)], 20) | _discs([(30, 160)], 12)
    colour = np.zeros(mask.shape + (3,), np.uint8)
    colour[..., :] = (120, 160, 120)
    rr, cc = np.mgrid[:mask.shape[0], :mask.shape[1]]
    colour[mask & (cc < 80)] = (150, 150, 150)
    colour[mask & (cc >= 80)] = (170, 150, 130)
    colour = np.clip(colour + rng.integers(-3, 4, colour.shape), 0, 255).astype(np.uint8)
    return mask, colour


def test_deployed_and_reference_forms_cut_the_same_pixels():
    rng = np.random.default_rng(3)
    mask, colour = _two_discs_frame(rng)
    rows, cols = _pixels(mask)
    # one region for the touching pair, one for the lone disc; labels not consecutive
    labels = np.where(cols < 140, 4, 7).astype(np.int64)
    p, sized = DEFAULT_PARAMS, D435_VGA
    deployed = cut_labels_at_necks(labels, rows, cols, colour, p, sized, min_pixels=80)
    components = [[(int(r), int(c)) for r, c, lbl in zip(rows, cols, labels) if lbl == k]
                  for k in (4, 7)]
    reference = cut_components_at_necks(components, colour, p, sized, min_pixels=80)
    assert len(np.unique(deployed)) == len(reference) == 3
    as_sets = sorted(sorted(map(tuple, np.stack([rows[deployed == k], cols[deployed == k]], 1)
                                .tolist())) for k in np.unique(deployed))
    assert as_sets == sorted(sorted(map(tuple, piece)) for piece in reference)
    # no colour image, or the cut switched off: the labels come back unchanged
    assert cut_labels_at_necks(labels, rows, cols, None, p, sized, 80) is labels
    off = LocatorParams(neck_ratio=0.0)
    assert cut_labels_at_necks(labels, rows, cols, colour, off, sized, 80) is labels
    assert cut_components_at_necks(components, colour, off, sized, 80) is components


def _pair_of_cylinders(x, y):
    """Two upright cylinders (r 3 cm, 3 cm tall) touching side by side along x."""
    left = (x + 0.0295) ** 2 + y ** 2 <= 0.03 ** 2
    right = (x - 0.0295) ** 2 + y ** 2 <= 0.03 ** 2
    return np.where(left | right, 0.03, 0.0)


@pytest.mark.parametrize('locate', [pytest.param(locate_objects, id='deployed'),
                                    pytest.param(locate_objects_reference, id='reference')])
@pytest.mark.parametrize('tilt', [0.0, 30.0])
def test_two_touching_cylinders_of_close_colours_are_two_objects(locate, tilt):
    intr = D435_VGA.scaled(320, 240)
    ext = tilted_extrinsics(tilt)
    depth, p = render_height_field(_pair_of_cylinders, intr, ext)
    raised = _pair_of_cylinders(p[..., 0], p[..., 1]) > 0.005
    colour = np.full(depth.shape + (3,), (120, 160, 120), np.uint8)
    # one grey, one slightly warm grey: a border the colour cut does not see
    colour[raised & (p[..., 0] < 0)] = (150, 150, 150)
    colour[raised & (p[..., 0] >= 0)] = (162, 150, 138)
    depth_mm = np.round(depth * 1000).astype(np.uint16)
    two = locate(colour, depth_mm, intr, ext)
    assert sorted(np.sign(o.position[0]) for o in two) == [-1.0, 1.0]
    for o in two:
        assert abs(abs(o.position[0]) - 0.0295) < 0.006
    if tilt == 0.0:
        # straight down nothing else separates them (from 30 deg the near one's occluding
        # edge does, and the neck cut must not spoil that)
        assert len(locate(colour, depth_mm, intr, ext, LocatorParams(neck_ratio=0.0))) == 1
