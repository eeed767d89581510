# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Find every object in the tray from aligned depth (lighting-independent) and choose one.

Method (height-above-table segmentation):

1. Every valid depth pixel is back-projected to ``world`` with the camera extrinsics; its
   height is world z (the table top is z = 0).
2. Foreground = height in ``(min_height, max_height)`` and (x, y) inside the tray interior
   ``roi_x`` x ``roi_y``, so the tray floor and walls never count as objects.
3. Touching objects are split with colour (depth alone cannot tell two touching objects of
   similar height apart): a foreground pixel whose chromaticity (3x3 box-blurred RGB divided
   by its intensity + 30, so shading and a dim exposure change it little) differs from a
   foreground 4-neighbour's by more than ``color_step`` (L1), or whose height differs from
   it by more than ``depth_step`` (an object lying on or against another; washed-out colours
   do not tell those apart), or whose specular-free hue (see step 4: the 3x3 mean in linear
   light less its smallest channel, as a chromaticity) differs from it by more than
   ``hue_step`` where both are known (no channel at ``merge_clip_level``, at least
   ``hue_min_level`` of such light: glare or a highlight adds white light that brings two
   objects' display chromaticities together, not their hues), is cut. Each 4-connected part
   of the foreground is one object unless the cut splits it into *major* pieces
   (4-connected uncut pixels, at least ``split_pixels``): then each major piece is a region
   and grows over the rest of its part (cut borders, small fragments from noise, shading or
   blur) one 4-neighbour step at a time. Without a colour image (``color_rgb=None``)
   nothing is cut (regions of one object could not be joined again).
4. The per-pixel cut also fires inside one object (a shadow across it, a dark side, motion
   blur mixing it with the floor, a step in its height), so touching regions are joined
   again by their *mean* colour (:func:`merge_regions`, closest pair first; only along a
   border of at least ``merge_contact_len`` x the square root of the smaller region's pixel
   count, since two objects may touch at a corner but a cut across one object runs across
   it): mean
   chromaticity RGB / (R + G + B) over thousands of pixels is free of noise and unchanged by
   exposure and shading, so two regions of one object agree within ``merge_color``
   (``merge_small_color`` for a region under ``merge_small_pixels``), and a region whose
   colour is its neighbour's blended with the floor (at most ``merge_max_blend`` of it) is
   that neighbour's edge (only along a border of at least ``merge_blend_len`` x the square
   root of its pixel count: two objects of one colour touching at a corner are not one
   object's edge). The blend is tested in linear light (blur and soft edges mix light, not
   8-bit display values) and on the region nearer the floor's colour, which may be the
   larger one (a thin object is blurred through: its pale sides outnumber its core), but
   then only if it is a band along the other (at most ``merge_blend_width`` pixels per
   shared border pair). Geometry vouches for a looser limit on the mean chromaticities
   (``merge_smooth_color``): two regions whose shared border is long (at least
   ``merge_smooth_len`` x the square root of the smaller region's pixel count, counted in
   4-neighbour pairs) and mostly (at least ``merge_smooth_frac`` of it) without a height step
   over ``depth_step`` lie on one continuous surface (a shadow edge, a highlight or a hue
   shift across one object); two objects that touch mostly meet along a short border or at
   a step in height. (Not for the blend test: an object of the floor's colour flush against
   a coloured one would pass it.) Regions that do
   not touch but come within ``merge_gap_px`` of each other join when they have the same
   distinct colour (one object seen in two parts past an occluder, or joined by a part too
   thin or low for depth). Overexposure clips an object's dominant channel, so its lit and
   shaded faces differ in chromaticity; pairs whose dominant channel is clipped are also
   compared over their unclipped channels (``merge_clip_level``, ``merge_clip_color``).
   A region inside its neighbour's outline (at least ``merge_enclosed_frac`` of its
   perimeter along it, at least ``merge_enclosed_smooth`` of that without a height step)
   is part of that surface up to ``merge_enclosed_color``: seen from above another object
   lies inside an object's outline only on top of it, with a step at least on its far side.
   Glare adds the lamp's (white) light to what it falls on and washes different colours
   alike; linear light less its smallest channel keeps a surface's hue under that, so two
   regions whose such specular-free hues differ by over ``merge_hue_veto`` never join
   (outside blurred frames and the enclosure test), and two whose hues agree within
   ``merge_hue_join`` join (one object washed paler on the glare's or a highlight's side).
   In a frame blurred along its rows (a shaking camera; :func:`blur_leak` compares how far
   the colour of everything raised smears over the floor beside it and above it, depth
   showing where the raised things end), each region's colour is restored by summing back
   the light it smeared over the floor on its rows (:func:`blur_smear_sums`), and touching
   regions whose restored colours agree (chromaticity within ``merge_blur_color``, or linear
   light within ``merge_blur_linear`` for dark objects) join: pieces of one object that the
   blur mixed with the floor unevenly.
   A region that is still two touching objects (one colour piece, no step, no crease) is cut
   at a neck of its outline when its two sides differ in mean colour (:mod:`.necks`).
   Objects under ``min_pixels`` (sizes scale with the focal length) are dropped, except
   that an object next to a blind spot of the depth camera (a hole of at least
   ``blind_hole_px``: glare) is kept from ``partial_min_pixels`` on (only part of it can be
   seen).
5. Per component: position = mean of its 3D points (the visible-surface centroid of the
   contract), yaw = major principal axis of the points' (x, y) in the world horizontal plane
   (in (-pi/2, pi/2]), top = highest point, pixel count, pixel bbox.

Colour is not needed (``color_rgb`` may be None); :func:`locate_objects_rgb_baseline` is the
RGB-only colour-threshold method this is compared against in bench/bench_vision.py.

Selection rule (:func:`rank_targets`, :func:`select_target`): the highest object first (an
object on top of a pile must go before the ones under it, and the gripper reaches it without
touching the others); objects whose tops are within ``1 cm`` of the highest count as equally
high and are ordered by isolation (distance from the centroid to the nearest other object's
centroid, larger first), so the gripper's fingers have room.

Two implementations with the same results: :func:`locate_objects_reference` (float64, plain
loops for the cut test and a breadth-first flood fill, per-object numpy) and
:func:`locate_objects` (deployed: cached per-pixel ray tables, float32, OpenCV connected
components, bincount moments).
"""

from __future__ import annotations

from edge_loop.kernels.object_locator.blind_spots import (
    blind_spot_share,
    large_regions,
    near_blind_spot,
    tray_view,
)
from edge_loop.kernels.object_locator.blur import (
    LEAK_FLOOR_STRIDE,
    LEAK_STRIDE,
    blur_leak,
    blur_leak_reference,
    blur_smear_sums,
    blur_smear_sums_reference,
)
from edge_loop.kernels.object_locator.colour import (
    CHROMA_OFFSET,
    LINEAR_LUT,
    LINEAR_LUT32,
    chromaticity_reference,
    color_cut,
    crease_cut,
    crease_reference,
    depth_cut,
    hue_cut,
    hue_reference,
    linear_light,
)
from edge_loop.kernels.object_locator.deployed import (
    locate_objects,
)
from edge_loop.kernels.object_locator.fused import (
    DEFAULT_FUSION,
    USE_MODEL_DEFAULT,
    FusionParams,
    fill_mask,
    locate_objects_fused,
    merge_over_split,
    model_logits,
    object_mean_logit,
    object_pixels,
)
from edge_loop.kernels.object_locator.merging import (
    gap_candidates,
    merge_regions,
)
from edge_loop.kernels.object_locator.objects import (
    DetectedObject,
    check_fill,
    check_inputs,
    depth_in_metres,
)
from edge_loop.kernels.object_locator.params import (
    DEFAULT_PARAMS,
    NOMINAL_FX,
    NOMINAL_RANGE,
    LocatorParams,
    sizing_intrinsics,
)
from edge_loop.kernels.object_locator.reference import (
    locate_objects_reference,
    near_blind_spot_reference,
)
from edge_loop.kernels.object_locator.rgb_baseline import (
    RgbBaselineParams,
    locate_objects_rgb_baseline,
)
from edge_loop.kernels.object_locator.scene import (
    HeightScene,
    height_scene,
    world_points_reference,
    world_rays,
)
from edge_loop.kernels.object_locator.targets import (
    label_image,
    rank_positions,
    rank_targets,
    segments_from_labels,
    select_target,
)

__all__ = [
    'NOMINAL_FX',
    'NOMINAL_RANGE',
    'sizing_intrinsics',
    'LocatorParams',
    'DEFAULT_PARAMS',
    'DetectedObject',
    'depth_in_metres',
    'check_inputs',
    'check_fill',
    'CHROMA_OFFSET',
    'LINEAR_LUT',
    'LINEAR_LUT32',
    'linear_light',
    'chromaticity_reference',
    'hue_reference',
    'color_cut',
    'hue_cut',
    'depth_cut',
    'crease_cut',
    'crease_reference',
    'LEAK_STRIDE',
    'LEAK_FLOOR_STRIDE',
    'blur_leak',
    'blur_leak_reference',
    'blur_smear_sums',
    'blur_smear_sums_reference',
    'gap_candidates',
    'merge_regions',
    'world_rays',
    'HeightScene',
    'height_scene',
    'world_points_reference',
    'large_regions',
    'near_blind_spot',
    'tray_view',
    'blind_spot_share',
    'near_blind_spot_reference',
    'locate_objects_reference',
    'locate_objects',
    'USE_MODEL_DEFAULT',
    'FusionParams',
    'DEFAULT_FUSION',
    'model_logits',
    'object_pixels',
    'merge_over_split',
    'fill_mask',
    'object_mean_logit',
    'locate_objects_fused',
    'rank_targets',
    'rank_positions',
    'label_image',
    'segments_from_labels',
    'select_target',
    'RgbBaselineParams',
    'locate_objects_rgb_baseline',
]
