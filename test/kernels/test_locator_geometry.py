# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Locator geometry for any camera: object sizes in pixels follow the camera's range."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge_loop.kernels.camera import D435_VGA, Extrinsics
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    locate_objects,
    sizing_intrinsics,
)
from edge_loop.verify.sweeps import render_height_field

INTR = D435_VGA.scaled(320, 240)
DOWN = Extrinsics.from_params([0.0, 0.0, 0.75], [1.0, 0.0, 0.0, 0.0])


def _surface_frame(height_of, ext: Extrinsics = DOWN, intr=INTR):
    """(colour, depth) of one grey height field z = height_of(x, y) over a lighter floor."""
    depth, p = render_height_field(height_of, intr, ext)
    raised = height_of(p[..., 0], p[..., 1]) > 0.005
    colour = np.full(depth.shape + (3,), 200, np.uint8)
    # Two reds whose per-pixel step (under colour_step) the colour cut misses, but whose mean
    # chromaticities differ by 0.05 (over merge_color): apart once something cuts them.
    colour[raised & (p[..., 0] < 0)] = (150, 120, 120)
    colour[raised & (p[..., 0] >= 0)] = (160, 115, 115)
    return colour, depth.astype(np.float32)


def _square(side: float, top: float = 0.035):
    """A flat-topped block ``side`` square, ``top`` high, at the workspace centre."""
    def height_of(x, y):
        return np.where((np.abs(x) < side / 2) & (np.abs(y) < side / 2), top, 0.0)
    return height_of


@pytest.mark.parametrize('camera_z', [0.75, 0.009 + 0.741 / 2])
def test_the_smallest_object_is_a_metric_size_whatever_the_cameras_range(camera_z):
    """An 8 mm speck is under min_pixels' area from any range; a 2 cm block is over it.

    min_pixels is 80 px at 0.741 m, 1.16 cm^2.
    With sizes scaled by fx alone, the camera at half the range sees the speck in 4x the
    pixels (~200 at VGA) and reports it.
    """
    ext = Extrinsics.from_params([0.0, 0.0, camera_z], [1.0, 0.0, 0.0, 0.0])
    for side, found in ((0.008, 0), (0.02, 1)):
        colour, depth = _surface_frame(_square(side), ext, D435_VGA)
        assert len(locate_objects(colour, depth, D435_VGA, ext)) == found, (side, camera_z)
    if camera_z < 0.5:
        fx_only = dataclasses.replace(DEFAULT_PARAMS, size_with_range=False)
        colour, depth = _surface_frame(_square(0.008), ext, D435_VGA)
        assert len(locate_objects(colour, depth, D435_VGA, ext, fx_only)) == 1


def test_pixel_sizes_follow_the_cameras_range_not_only_its_focal_length():
    assert sizing_intrinsics(D435_VGA, DOWN, DEFAULT_PARAMS) is D435_VGA   # shipped: as tuned
    near = Extrinsics.from_params([0.0, 0.0, 0.009 + 0.741 / 2], [1.0, 0.0, 0.0, 0.0])
    sized = sizing_intrinsics(D435_VGA, near, DEFAULT_PARAMS)
    assert sized.fx == pytest.approx(2 * D435_VGA.fx)
    assert DEFAULT_PARAMS.min_pixels_for(sized) == 4 * DEFAULT_PARAMS.min_pixels_for(D435_VGA)
    # sensor effects stay in image pixels: the blind-spot size is the intrinsics' own
    assert DEFAULT_PARAMS.blind_hole_px_for(D435_VGA) == DEFAULT_PARAMS.blind_hole_px
    off = dataclasses.replace(DEFAULT_PARAMS, size_with_range=False)
    assert sizing_intrinsics(D435_VGA, near, off) is D435_VGA
