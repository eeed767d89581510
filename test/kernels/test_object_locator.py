# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""object_locator kernel on ray-cast box scenes (ground truth known exactly)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from edge_loop.kernels.camera import D435_VGA, Extrinsics, Intrinsics
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    LINEAR_LUT,
    DetectedObject,
    LocatorParams,
    blind_spot_share,
    blur_leak,
    blur_leak_reference,
    blur_smear_sums,
    blur_smear_sums_reference,
    crease_cut,
    crease_reference,
    height_scene,
    hue_cut,
    locate_objects,
    locate_objects_reference,
    locate_objects_rgb_baseline,
    merge_regions,
    rank_targets,
    select_target,
)
from edge_loop.kernels.object_locator.scene import world_points_reference
from edge_loop.verify.compare import angle_diff_mod
from edge_loop.verify.sweeps import (
    Box,
    motion_blurred,
    read_only,
    render_boxes,
    render_height_field,
    scene,
    tilted_extrinsics,
)

BOXES = (Box(-0.10, 0.06, 0.5, 0.05, 0.025, 0.03, rgb=(200, 40, 40)),
         Box(0.00, -0.07, -0.8, 0.06, 0.02, 0.02, rgb=(40, 160, 60)),
         Box(0.11, 0.05, 1.2, 0.04, 0.025, 0.05, rgb=(40, 60, 200)))


def _match(objects, boxes, tol=0.006):
    """Each box has exactly one object within ``tol`` (x, y); returns them in box order."""
    assert len(objects) == len(boxes)
    out = []
    for b in boxes:
        d = [np.hypot(o.position[0] - b.x, o.position[1] - b.y) for o in objects]
        assert min(d) < tol, f'no object near box at ({b.x}, {b.y}): {d}'
        out.append(objects[int(np.argmin(d))])
    return out


def _visible_centroid(boxes, intr, ext, k):
    """Mean world point of box k's rendered pixels (the contract's definition)."""
    _, depth, label = render_boxes(boxes, intr, ext)
    v, u = np.nonzero(label == k)
    z = depth[v, u].astype(np.float64)
    cam = np.stack([(u - intr.cx) / intr.fx * z, (v - intr.cy) / intr.fy * z, z], axis=1)
    return (cam @ ext.rotation.T + ext.translation).mean(axis=0)


@pytest.mark.parametrize('encoding', ['16UC1', '32FC1'])
def test_finds_every_box_with_centroid_yaw_and_top(encoding):
    f = scene(640, 480, boxes=BOXES, depth_encoding=encoding)
    objects = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    for k, (obj, box) in enumerate(zip(_match(objects, BOXES), BOXES), start=1):
        truth = _visible_centroid(BOXES, f.intrinsics, f.extrinsics, k)
        # colour cut trims a 1 px ring at the border; mm quantisation in 16UC1
        assert np.linalg.norm(obj.position - truth) < 0.003
        assert angle_diff_mod(obj.yaw, box.yaw, np.pi) < np.radians(4)
        assert obj.top == pytest.approx(box.sz, abs=0.002)
        assert obj.pixel_count > 200 and 0 < obj.score < 1
        u0, v0, u1, v1 = obj.mask_bbox
        assert 0 <= u0 < u1 < 640 and 0 <= v0 < v1 < 480
        assert obj.points.shape == (obj.pixel_count, 3)


def test_any_camera_pose_gives_the_same_world_positions():
    f = scene(640, 480, boxes=BOXES, extrinsics=tilted_extrinsics(20.0))
    objects = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    # seen obliquely the visible surface includes one side: centroid moves a few mm
    for obj, box in zip(_match(objects, BOXES, tol=0.015), BOXES):
        assert obj.top == pytest.approx(box.sz, abs=0.003)


def test_depth_only_works_and_colour_splits_touching_boxes():
    touching = (Box(0.0, 0.0, 0.0, 0.05, 0.03, 0.03, rgb=(200, 40, 40)),
                Box(0.05, 0.0, 0.0, 0.05, 0.03, 0.03, rgb=(40, 60, 200)))
    f = scene(640, 480, boxes=touching)
    assert len(locate_objects(None, f.depth, f.intrinsics, f.extrinsics)) == 1
    objects = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    _match(objects, touching, tol=0.004)
    # shading (darker sides) and a dim exposure do not cut one object apart
    dim = (f.color.astype(np.float32) * 0.15).astype(np.uint8)
    assert len(locate_objects(dim, f.depth, f.intrinsics, f.extrinsics)) == 2


def test_reference_and_deployed_agree_on_read_only_and_strided_inputs():
    f = scene(641, 479, boxes=BOXES, depth_encoding='16UC1')
    depth = read_only(np.repeat(f.depth, 2, axis=1)[:, ::2])
    color = read_only(f.color)
    ref = locate_objects_reference(color, depth, f.intrinsics, f.extrinsics)
    dep = locate_objects(color, depth, f.intrinsics, f.extrinsics)
    assert len(ref) == len(dep) == 3
    for r, d in zip(ref, dep):
        assert np.linalg.norm(r.position - d.position) < 1e-4
        assert r.pixel_count == d.pixel_count and r.mask_bbox == d.mask_bbox


@pytest.mark.parametrize('fill', [0.0, np.nan])
def test_no_depth_finds_nothing(fill):
    f = scene(320, 240, boxes=BOXES)
    depth = np.full(f.depth.shape, fill, np.float32)
    assert locate_objects(f.color, depth, f.intrinsics, f.extrinsics) == []
    assert locate_objects_reference(f.color, depth, f.intrinsics, f.extrinsics) == []
    assert select_target([]) is None


def test_size_mismatch_is_an_error():
    f = scene(640, 480, boxes=BOXES)
    with pytest.raises(ValueError, match='does not match'):
        locate_objects(f.color[:240], f.depth, f.intrinsics, f.extrinsics)
    with pytest.raises(ValueError, match='camera_info'):
        locate_objects(None, f.depth[:, :320], f.intrinsics, f.extrinsics)


def _obj(x, y, top):
    return DetectedObject(np.array([x, y, top / 2]), 0.0, 100, (0, 0, 1, 1), 0.5, top=top)


def test_selection_highest_first_then_most_isolated():
    objs = [_obj(0.0, 0.0, 0.03), _obj(0.05, 0.0, 0.06), _obj(-0.1, 0.1, 0.02)]
    assert select_target(objs) == 1
    # equal heights (within 1 cm): the one farthest from its nearest neighbour
    objs = [_obj(0.0, 0.0, 0.03), _obj(0.03, 0.0, 0.035), _obj(0.15, 0.1, 0.032)]
    assert select_target(objs) == 2
    assert rank_targets(objs)[0] == 2 and sorted(rank_targets(objs)) == [0, 1, 2]


def test_rgb_baseline_fails_in_the_dark_where_depth_does_not():
    f = scene(640, 480, boxes=BOXES)
    table = (150, 140, 120)
    dark = (f.color.astype(np.float32) * 0.2).astype(np.uint8)
    from edge_loop.kernels.object_locator import RgbBaselineParams

    params = RgbBaselineParams(table_rgb=table)
    assert len(locate_objects_rgb_baseline(f.color, f.depth, f.intrinsics, f.extrinsics,
                                           params)) == 3
    dark_rgb = locate_objects_rgb_baseline(dark, f.depth, f.intrinsics, f.extrinsics, params)
    assert len(dark_rgb) != 3  # the whole dark table differs from the calibrated colour
    assert len(locate_objects(dark, f.depth, f.intrinsics, f.extrinsics)) == 3


LOCATORS = [pytest.param(locate_objects, id='deployed'),
            pytest.param(locate_objects_reference, id='reference')]


@pytest.mark.parametrize('locate', LOCATORS)
def test_one_colour_in_light_and_shadow_is_one_object(locate):
    # Two halves of one flat object, one in shadow: the per-pixel cut separates them
    # (chromaticity with its dark offset moves by > color_step) but their mean colours agree.
    halves = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(220, 60, 60)),
              Box(0.05, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(30, 8, 8)))
    f = scene(640, 480, boxes=halves)
    objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
    assert len(objects) == 1
    assert objects[0].position[0] == pytest.approx(0.025, abs=0.003)
    # Without the region merge (a limit no pair meets) the cut splits it in two.
    apart = locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                   LocatorParams(merge_color=0.0, merge_small_color=0.0))
    assert len(apart) == 2


@pytest.mark.parametrize('locate', LOCATORS)
def test_small_object_against_a_large_one_of_another_colour_stays_apart(locate):
    # ~150 visible pixels (1.5 x 1.5 cm at 0.75 m): below the old 150 px split size.
    pair = (Box(0.0, 0.0, 0.0, 0.06, 0.05, 0.03, rgb=(220, 200, 40)),
            Box(0.0375, 0.0, 0.0, 0.015, 0.015, 0.02, rgb=(140, 40, 200)))
    f = scene(640, 480, boxes=pair)
    objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
    _match(objects, pair, tol=0.004)


@pytest.mark.parametrize('locate', LOCATORS)
def test_floor_coloured_object_touching_a_coloured_one_is_not_read_as_its_blurred_edge(locate):
    # The floor colour is the orange object's colour blended fully with the floor: a piece
    # is explained as a blend (and joined) only if it keeps some of its neighbour's colour.
    pair = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(200, 120, 40)),
            Box(0.045, 0.0, 0.0, 0.04, 0.04, 0.03, rgb=(150, 140, 120)))
    f = scene(640, 480, boxes=pair)
    objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
    _match(objects, pair, tol=0.004)


def test_region_merge_joins_the_closest_pair_first_and_keeps_the_lowest_id():
    intr = scene(640, 480, boxes=()).intrinsics
    red, dark_red, blue = (np.array(c, float) * 1000 for c in ((200, 50, 50), (100, 26, 24),
                                                                (40, 40, 200)))
    sums = {1: red, 2: dark_red, 3: blue}
    counts = {1: 1000, 2: 1000, 3: 1000}
    contact = {(1, 2): 40, (2, 3): 40, (1, 3): 40}
    root = merge_regions(sums, counts, contact, np.array([150.0, 140.0, 120.0]),
                         DEFAULT_PARAMS, intr)
    assert root == {1: 1, 2: 1, 3: 3}
    # A border shorter than merge_min_contact never joins.
    root = merge_regions(sums, counts, {(1, 2): 2}, np.zeros(3), DEFAULT_PARAMS, intr)
    assert root == {1: 1, 2: 2, 3: 3}


@pytest.mark.parametrize('locate', LOCATORS)
def test_object_seen_in_two_parts_past_an_occluder_is_one_object(locate):
    # A bar with a taller box lying across its middle: two bar ends of one colour 2.5 cm
    # (20 px) apart are one object; the same two ends 6 cm apart are two.
    for gap, expected in ((0.025, 2), (0.06, 3)):
        end = 0.04
        boxes = (Box(-(gap + end) / 2, 0.0, 0.0, end, 0.02, 0.02, rgb=(60, 90, 200)),
                 Box((gap + end) / 2, 0.0, 0.0, end, 0.02, 0.02, rgb=(60, 90, 200)),
                 Box(0.0, 0.0, 0.0, gap, 0.05, 0.04, rgb=(220, 200, 40)))
        f = scene(640, 480, boxes=boxes)
        objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
        assert len(objects) == expected, gap
        if expected == 2:
            bar = min(objects, key=lambda o: o.top)
            assert np.linalg.norm(bar.position[:2]) < 0.003   # centroid of both ends


@pytest.mark.parametrize('locate', LOCATORS)
def test_edge_blended_with_the_floor_joins_its_object(locate):
    # Motion blur mixes an object's edge with the floor: (200, 40, 40) half-way to the
    # floor's (150, 140, 120) is (175, 90, 80), far from both in chromaticity.
    parts = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(200, 40, 40)),
             Box(0.04, 0.0, 0.0, 0.03, 0.04, 0.03, rgb=(175, 90, 80)))
    f = scene(640, 480, boxes=parts)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == 1
    no_blend = LocatorParams(merge_max_blend=0.0)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics, no_blend)) == 2


@pytest.mark.parametrize('locate', LOCATORS)
def test_height_step_separates_touching_objects_the_colour_cut_misses(locate):
    # Grey against a dull orange: the 3x3 blur spreads their chromaticity difference (0.17)
    # over three steps below color_step, so colour alone leaks across; the 2 cm height step
    # cuts them, and their mean colours differ too much to join again.
    pair = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(150, 150, 150)),
            Box(0.05, 0.0, 0.0, 0.05, 0.04, 0.05, rgb=(190, 150, 110)))
    f = scene(640, 480, boxes=pair)
    _match(locate(f.color, f.depth, f.intrinsics, f.extrinsics), pair, tol=0.004)
    no_step = LocatorParams(depth_step=1.0)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics, no_step)) == 1


@pytest.mark.parametrize('locate', LOCATORS)
def test_one_surface_in_two_colours_is_one_object_but_a_height_step_keeps_two(locate):
    # A bright red face and a dark, slightly purple one (mean chromaticities 0.08 apart: over
    # merge_color, and not the floor blended in) along a 4 cm border without a height step:
    # one continuous surface (a shadow edge with a hue shift), joined by merge_smooth_color.
    # The same two colours with a 2 cm step between them are two objects.
    for top, expected in ((0.03, 1), (0.05, 2)):
        halves = (Box(0.0, 0.0, 0.0, 0.05, 0.05, 0.03, rgb=(220, 60, 60)),
                  Box(0.04, 0.0, 0.0, 0.03, 0.05, top, rgb=(20, 6, 7)))
        f = scene(640, 480, boxes=halves)
        objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
        assert len(objects) == expected, top
    # Without the continuous-surface rule the flat pair splits too.
    f = scene(640, 480, boxes=(halves[0], Box(0.04, 0.0, 0.0, 0.03, 0.05, 0.03, rgb=(20, 6, 7))))
    apart = locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                   LocatorParams(merge_smooth_color=0.0))
    assert len(apart) == 2


@pytest.mark.parametrize('locate', LOCATORS)
def test_overexposed_faces_of_one_object_join_over_their_unclipped_channels(locate):
    # An overexposed magenta object: red clipped on its lit top and on its shaded side, which
    # meet at a 2 cm height step (its own occluding edge). Full chromaticities differ by
    # ~0.08 (over merge_color, no smooth border); green:blue agree, so it is one object.
    lit = Box(0.0, 0.0, 0.0, 0.05, 0.05, 0.05, rgb=(255, 50, 185))
    side = Box(0.04, 0.0, 0.0, 0.03, 0.05, 0.03, rgb=(255, 43, 158))
    f = scene(640, 480, boxes=(lit, side))
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == 1
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                      LocatorParams(merge_clip_color=0.0))) == 2
    # Red clipped too but another green:blue (an orange object): two objects.
    orange = Box(0.04, 0.0, 0.0, 0.03, 0.05, 0.03, rgb=(255, 150, 60))
    f = scene(640, 480, boxes=(lit, orange))
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == 2


def test_clipped_channel_must_be_dominant_in_both_regions():
    # Red clipped in one region only, where it is not the brightest channel of the other:
    # green:blue agree (1:1) but the colours differ (red vs cyan-grey): no join.
    intr = scene(640, 480, boxes=()).intrinsics
    sums = {1: np.array([255.0, 60.0, 60.0]) * 1000, 2: np.array([100.0, 150.0, 150.0]) * 1000}
    counts = {1: 1000, 2: 1000}
    contact = {(1, 2): 40}
    root = merge_regions(sums, counts, contact, np.array([150.0, 140.0, 120.0]),
                         DEFAULT_PARAMS, intr)
    assert root == {1: 1, 2: 2}
    # The same red face next to a shaded red one (red unclipped but still dominant) joins.
    sums[2] = np.array([200.0, 61.0, 59.0]) * 1000
    root = merge_regions(sums, counts, contact, np.array([150.0, 140.0, 120.0]),
                         LocatorParams(merge_color=0.0, merge_small_color=0.0), intr)
    assert root == {1: 1, 2: 1}


@pytest.mark.parametrize('locate', LOCATORS)
def test_washed_out_objects_of_different_hues_stay_apart(locate):
    # Glare-washed (light of the lamp's colour added): a pale red box beside a 1 cm taller
    # pale green one. Their display chromaticities are 0.023 apart (under merge_color), so
    # the colour test joins them; less their smallest channel in linear light, one is red
    # and the other green: the hue veto keeps them apart. Two faces of one pale red object
    # (the same hue) still join.
    for other, expected in (((230, 238, 231), 2), ((238, 231, 231), 1)):
        pair = (Box(-0.025, 0.0, 0.0, 0.05, 0.05, 0.03, rgb=(238, 230, 230)),
                Box(0.025, 0.0, 0.0, 0.05, 0.05, 0.04, rgb=other))
        f = scene(640, 480, boxes=pair)
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == expected, other
        # Without the veto the washed-out colours decide alone: one object either way.
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                          LocatorParams(merge_hue_veto=0.0))) == 1


@pytest.mark.parametrize('locate', LOCATORS)
def test_hue_cut_splits_touching_washed_out_objects_of_one_height(locate):
    # A teal and a green box of one height, flush, washed by white light (as under glare):
    # display chromaticities 0.03 apart (under color_step) and no height step, so neither the
    # colour nor the depth cut separates them; their specular-free hues are 0.6 apart.
    pair = (Box(-0.025, 0.0, 0.0, 0.05, 0.05, 0.03, rgb=(174, 204, 192)),
            Box(0.025, 0.0, 0.0, 0.05, 0.05, 0.03, rgb=(158, 175, 159)))
    f = scene(640, 480, boxes=pair)
    _match(locate(f.color, f.depth, f.intrinsics, f.extrinsics), pair, tol=0.004)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                      LocatorParams(hue_step=0.0))) == 1
    assert _inner_hue_cut(pair) > 0
    # No hue where a channel is clipped or the hue is too faint: those pairs are not cut.
    for params in (LocatorParams(merge_clip_level=150.0), LocatorParams(hue_min_level=0.5)):
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics, params)) == 1
        assert _inner_hue_cut(pair, params) == 0
    # One colour in light and shadow has one hue: not cut (see the test above).
    halves = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(174, 204, 192)),
              Box(0.05, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(87, 102, 96)))
    f = scene(640, 480, boxes=halves)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == 1
    assert _inner_hue_cut(halves) == 0


def _inner_hue_cut(boxes, params=DEFAULT_PARAMS) -> int:
    """Pixels :func:`hue_cut` marks 3 px or more inside the boxes.

    (Their outer edges blend with the floor's hue in the 3x3 mean, whatever their colours.)
    """
    f = scene(640, 480, boxes=boxes)
    _, _, label = render_boxes(boxes, f.intrinsics, f.extrinsics)
    fg = (label > 0).astype(np.uint8)
    inner = cv2.erode(fg, np.ones((5, 5), np.uint8)) > 0
    return int((hue_cut(f.color, fg, 0, 0, params) & inner).sum())


def _hue_merge(sums, hue_1, hue_2, n_2=500, params=DEFAULT_PARAMS, **kwargs):
    """merge_regions on two 500-pixel regions sharing 40 border pairs, with their hues."""
    intr = scene(640, 480, boxes=()).intrinsics
    hue = kwargs.pop('hue', ({1: hue_1 * 500, 2: hue_2 * n_2}, {1: 500, 2: n_2}))
    return merge_regions(sums, {1: 500, 2: 500}, kwargs.pop('contact', {(1, 2): 40}),
                         np.array([150.0, 140.0, 120.0]), params, intr, hue=hue, **kwargs)


def test_hue_veto_needs_hue_in_both_regions_and_an_unblurred_frame():
    # Display colours alike (chromaticity L1 0.02).
    sums = {1: np.array([238.0, 230.0, 230.0]) * 500, 2: np.array([230.0, 238.0, 231.0]) * 500}
    red, green = np.array([0.065, 0.0, 0.0]), np.array([0.0, 0.065, 0.007])
    assert _hue_merge(sums, red, green) == {1: 1, 2: 2}          # hues differ: vetoed
    assert _hue_merge(sums, red, red * 1.02) == {1: 1, 2: 1}     # one hue: joined
    assert _hue_merge(sums, red, green, n_2=10) == {1: 1, 2: 1}  # too few unclipped pixels
    assert _hue_merge(sums, red, green * 0.2) == {1: 1, 2: 1}    # near grey: no hue
    assert _hue_merge(sums, red, green, hue=None) == {1: 1, 2: 1}
    # In a blurred frame (restored colours given) the floor's hue mixes in: no veto.
    restored = {1: np.array([0.86, 0.79, 0.79]) * 500, 2: np.array([0.79, 0.86, 0.80]) * 500}
    assert _hue_merge(sums, red, green, restored=restored) == {1: 1, 2: 1}


@pytest.mark.parametrize('locate', LOCATORS)
def test_one_object_washed_paler_on_one_side_joins_by_its_hue(locate):
    # Glare or a highlight adds white light to the part of a red object nearer it: in linear
    # light the pale part is the red plus 0.25 of white. Display chromaticities then differ by
    # ~0.5 (far over every colour limit; a 1 cm step between the parts, so no smooth border),
    # but less its smallest channel the pale part is the same red: one object. A green part
    # washed alike is another object whatever the join allows.
    def washed(rgb):
        lin = (np.asarray(rgb) / 255.0) ** 2.2 + 0.25
        return tuple(int(v) for v in np.rint(255 * np.clip(lin, 0, 1) ** (1 / 2.2)))

    for other, expected in (((200, 40, 40), 1), ((40, 200, 40), 2)):
        pair = (Box(-0.025, 0.0, 0.0, 0.05, 0.05, 0.03, rgb=(200, 40, 40)),
                Box(0.025, 0.0, 0.0, 0.05, 0.05, 0.04, rgb=washed(other)))
        f = scene(640, 480, boxes=pair)
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == expected, other
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                          LocatorParams(merge_hue_join=0.0))) == 2


def test_hue_join_needs_hue_white_and_a_border_in_an_unblurred_frame():
    # Display colours far apart: a red and the same red plus 0.25 of white in linear light.
    # (A blue floor in linear light: no pale red is the red blended with it.)
    sums = {1: np.array([200.0, 40.0, 40.0]) * 500, 2: np.array([235.0, 140.0, 140.0]) * 500}
    linear = {1: np.array([0.586, 0.019, 0.019]) * 500, 2: np.array([0.836, 0.269, 0.269]) * 500}
    red = np.array([0.567, 0.0, 0.0])

    def root(hue_2, **kwargs):
        return _hue_merge(sums, red, hue_2, linear_sums=kwargs.pop('linear_sums', linear),
                          linear_background=np.array([0.05, 0.1, 0.6]) * 100, **kwargs)

    assert root(red * 0.98 + np.array([0.0, 0.01, 0.0])) == {1: 1, 2: 1}   # one hue
    assert root(red, params=LocatorParams(merge_hue_join=0.0)) == {1: 1, 2: 2}
    assert root(np.array([0.5, 0.05, 0.0])) == {1: 1, 2: 2}     # hues 0.18 apart
    assert root(red, n_2=10) == {1: 1, 2: 2}                     # too few unclipped pixels
    assert root(red * 0.02) == {1: 1, 2: 2}                      # near grey: no hue
    assert root(red, hue=None) == {1: 1, 2: 2}
    restored = {1: linear[1], 2: linear[2]}
    assert root(red, restored=restored) == {1: 1, 2: 2}         # blurred: hues not compared
    # One hue but hardly any white between them (a red and a slightly paler red object).
    near_white = {1: linear[1], 2: np.array([0.62, 0.045, 0.045]) * 500}
    assert root(red, linear_sums=near_white) == {1: 1, 2: 2}
    # Along 8 border pairs (under 0.5 x sqrt(500) = 11): touching, not one surface.
    assert root(red, contact={(1, 2): 8}) == {1: 1, 2: 2}
    assert root(red, contact={(1, 2): 12}) == {1: 1, 2: 1}


@pytest.mark.parametrize('locate', LOCATORS)
def test_object_touching_a_floor_blended_one_along_a_short_border_stays_apart(locate):
    # The colours of test_edge_blended_with_the_floor_joins_its_object, but the boxes share
    # only 16 mm of their sides (~13 px against ~39 px = sqrt of the smaller one's pixels):
    # two objects side by side, not one object and its blurred edge.
    pair = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(200, 40, 40)),
            Box(0.05, 0.024, 0.0, 0.05, 0.04, 0.03, rgb=(175, 90, 80)))
    f = scene(640, 480, boxes=pair)
    _match(locate(f.color, f.depth, f.intrinsics, f.extrinsics), pair, tol=0.004)
    # The merge rule alone (the neck cut, which runs after the merges, would cut the pair
    # apart again at their short contact).
    any_contact = LocatorParams(merge_blend_len=0.0, neck_ratio=0.0)
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics, any_contact)) == 1


@pytest.mark.parametrize('locate', LOCATORS)
def test_blurred_band_larger_than_its_core_joins_but_a_wide_pale_neighbour_does_not(locate):
    # A thin red object blurred through: its pale side (the red mixed half-way with the floor
    # in linear light) outnumbers its core. The pale piece is the one nearer the floor's
    # colour, so it is the blend candidate even though it is the larger region; it joins
    # while it is a band along the core (mean width <= merge_blend_width), not when it is a
    # 3 cm wide neighbour of that colour.
    lin = (np.array([[200, 40, 40], [150, 140, 120]]) / 255.0) ** 2.2
    pale = tuple(int(v) for v in np.rint(255 * lin.mean(axis=0) ** (1 / 2.2)))
    core = Box(0.0, 0.0, 0.0, 0.012, 0.05, 0.03, rgb=(200, 40, 40))
    for width, expected in ((0.016, 1), (0.03, 2)):
        side = Box(0.006 + width / 2, 0.0, 0.0, width, 0.05, 0.03, rgb=pale)
        f = scene(640, 480, boxes=(core, side))
        assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics)) == expected, width
    # Without the band rule only the smaller region may be the blend: the band stays apart.
    f = scene(640, 480, boxes=(core, Box(0.014, 0.0, 0.0, 0.016, 0.05, 0.03, rgb=pale)))
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                      LocatorParams(merge_blend_width=0.0))) == 2


def test_regions_touching_at_a_corner_do_not_join_however_alike():
    # Two large regions of one colour (an overexposed cube and cylinder): a border of 6
    # pairs is a corner contact (< merge_contact_len x sqrt(2000) ~ 11), 40 pairs a cut
    # across one object.
    intr = scene(640, 480, boxes=()).intrinsics
    sums = {1: np.array([205.0, 254.0, 254.0]) * 2000, 2: np.array([202.0, 250.0, 245.0]) * 2000}
    counts = {1: 2000, 2: 2000}
    floor = np.array([254.0, 254.0, 254.0])
    assert merge_regions(sums, counts, {(1, 2): 6}, floor, DEFAULT_PARAMS, intr) == {1: 1, 2: 2}
    assert merge_regions(sums, counts, {(1, 2): 40}, floor, DEFAULT_PARAMS, intr) == {1: 1, 2: 1}
    assert merge_regions(sums, counts, {(1, 2): 6}, floor, LocatorParams(merge_contact_len=0.0),
                         intr) == {1: 1, 2: 1}


@pytest.mark.parametrize('locate', LOCATORS)
def test_patch_inside_an_objects_outline_joins_but_an_object_on_top_does_not(locate):
    # A yellow-green patch (mean chromaticities 0.45 apart: over every other colour limit)
    # inside a green top, flush with it: its whole border runs along the top without a height
    # step, so it is part of that surface (a motion-blurred core inside its rim, a print).
    # The same patch as a 2 cm box lying on the top is another object: the camera sees its
    # near side face (a smooth concave corner) but its far side is a step. Checked at three
    # places in the image, so the side faces are seen from different directions.
    for x in (-0.12, 0.0, 0.1):
        top = Box(x, 0.0, 0.3, 0.07, 0.05, 0.03, rgb=(60, 160, 60))
        for height, expected in ((0.001, 1), (0.02, 2)):
            patch = Box(x, 0.0, 0.3, 0.025, 0.02, height, z0=0.03, rgb=(150, 150, 40))
            f = scene(640, 480, boxes=(top, patch))
            objects = locate(f.color, f.depth, f.intrinsics, f.extrinsics)
            assert len(objects) == expected, (x, height)
        # Without the enclosure test the flush patch stands as an object of its own.
        flush = Box(x, 0.0, 0.3, 0.025, 0.02, 0.001, z0=0.03, rgb=(150, 150, 40))
        f = scene(640, 480, boxes=(top, flush))
        apart = locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                       LocatorParams(merge_enclosed_frac=0.0))
        assert len(apart) == 2, x


def test_enclosed_region_joins_only_along_most_of_its_border_and_without_a_step():
    # Region 2 (green-yellow) shares 96 pairs with region 1 (green): all of its border
    # (perimeter 96) and smooth -> one surface. Half its border on the floor, or a third of
    # the shared border a height step (an object lying on the other), keeps them apart.
    intr = scene(640, 480, boxes=()).intrinsics
    sums = {1: np.array([60.0, 160.0, 60.0]) * 2000, 2: np.array([150.0, 150.0, 40.0]) * 400}
    counts = {1: 2000, 2: 400}
    floor = np.array([150.0, 140.0, 120.0])

    def merged(perimeter_2, smooth):
        return merge_regions(sums, counts, {(1, 2): 96}, floor, DEFAULT_PARAMS, intr,
                             smooth={(1, 2): smooth}, perimeter={1: 400, 2: perimeter_2})

    assert merged(96, 96) == {1: 1, 2: 1}
    assert merged(192, 96) == {1: 1, 2: 2}
    assert merged(96, 64) == {1: 1, 2: 2}
    assert merge_regions(sums, counts, {(1, 2): 96}, floor, DEFAULT_PARAMS, intr,
                         smooth={(1, 2): 96}) == {1: 1, 2: 2}     # no perimeters: no test


@pytest.mark.parametrize('locate', LOCATORS)
def test_part_of_an_object_beside_a_depth_blind_spot_counts_below_min_pixels(locate):
    # A box hidden from the depth camera by a large blind disc (glare) but for a sliver of
    # ~70 px at its edge: kept (partial_min_pixels); a ~70 px box in the open is not.
    box = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(200, 40, 40)),)
    f = scene(640, 480, boxes=box)
    u0, v0, u1, v1 = locate(f.color, f.depth, f.intrinsics, f.extrinsics)[0].mask_bbox
    uu, vv = np.meshgrid(np.arange(640), np.arange(480))
    depth = f.depth.copy()
    depth[(uu - (u1 - 201)) ** 2 + (vv - (v0 + v1) / 2) ** 2 < 200 ** 2] = np.nan
    sliver = locate(f.color, depth, f.intrinsics, f.extrinsics)
    assert len(sliver) == 1 and sliver[0].pixel_count < DEFAULT_PARAMS.min_pixels
    assert locate(f.color, depth, f.intrinsics, f.extrinsics,
                  LocatorParams(partial_min_pixels=DEFAULT_PARAMS.min_pixels)) == []
    speck = (Box(0.0, 0.0, 0.0, 0.008, 0.008, 0.012, rgb=(200, 40, 40)),)
    f = scene(640, 480, boxes=speck)
    assert locate(f.color, f.depth, f.intrinsics, f.extrinsics) == []
    assert len(locate(f.color, f.depth, f.intrinsics, f.extrinsics,
                      LocatorParams(min_pixels=20))) == 1


def _tray_pixels(intr, ext, p=DEFAULT_PARAMS) -> np.ndarray:
    """(H, W) bool: pixels whose ray meets the table plane inside the ROI (plain loop-free)."""
    uu, vv = np.meshgrid((np.arange(intr.width) - intr.cx) / intr.fx,
                         (np.arange(intr.height) - intr.cy) / intr.fy)
    ray = np.stack([uu, vv, np.ones_like(uu)], axis=-1) @ ext.rotation.T
    t = -ext.translation[2] / ray[..., 2]
    x, y = ext.translation[0] + t * ray[..., 0], ext.translation[1] + t * ray[..., 1]
    return ((ray[..., 2] < 0) & (x > p.roi_x[0]) & (x < p.roi_x[1])
            & (y > p.roi_y[0]) & (y < p.roi_y[1]))


@pytest.mark.parametrize('encoding', ['16UC1', '32FC1'])
def test_blind_spot_share_counts_large_holes_over_the_tray_only(encoding):
    f = scene(640, 480, boxes=BOXES, depth_encoding=encoding)
    intr, ext = f.intrinsics, f.extrinsics
    tray = _tray_pixels(intr, ext)
    none = 0 if encoding == '16UC1' else np.nan
    assert blind_spot_share(f.depth, intr, ext) == 0.0
    uu, vv = np.meshgrid(np.arange(640), np.arange(480))
    disc = (uu - 330) ** 2 + (vv - 240) ** 2 < 80 ** 2          # ~20000 px, over the tray
    depth = f.depth.copy()
    depth[disc] = none
    want = (disc & tray).sum() / tray.sum()
    assert 0.2 < want < 0.3
    assert blind_spot_share(depth, intr, ext) == pytest.approx(want, abs=0.01)
    # the same hole read-only and strided, as shared memory and crops hand it over
    wide = np.zeros((480, 1280), depth.dtype)
    wide[:, ::2] = depth
    assert blind_spot_share(read_only(wide[:, ::2]), intr, ext) == pytest.approx(want, abs=0.01)
    # more hole pixels, but in 6x6 squares 1 px apart (holes at edges, shiny spots): no spot
    scattered = f.depth.copy()
    scattered[(uu % 7 < 6) & (vv % 7 < 6) & tray] = none
    assert (np.isnan(scattered) if encoding == '32FC1' else scattered == 0).sum() > disc.sum()
    assert blind_spot_share(scattered, intr, ext) == 0.0
    # a large hole where the camera sees no tray (beyond its wall) does not count
    outside = f.depth.copy()
    outside[:100, :] = none
    assert not (tray[:100]).any() and blind_spot_share(outside, intr, ext) == 0.0
    # below blind_hole_px it is a hole, not a blind spot
    assert blind_spot_share(depth, intr, ext, LocatorParams(blind_hole_px=30000)) == 0.0
    with pytest.raises(ValueError, match='camera_info says'):
        blind_spot_share(depth[:240], intr, ext)


def _height(f) -> np.ndarray:
    return height_scene(f.depth, f.intrinsics, f.extrinsics).height


@pytest.mark.parametrize('leak', [blur_leak, blur_leak_reference], ids=['deployed', 'reference'])
def test_horizontal_blur_is_told_from_sharp_and_vertically_blurred_frames(leak):
    f = scene(640, 480, boxes=BOXES)
    height, p = _height(f), DEFAULT_PARAMS
    sharp = leak(f.color, height, p, f.intrinsics)
    along_rows = leak(motion_blurred(f.color), height, p, f.intrinsics)
    along_columns = leak(motion_blurred(f.color, vertical=True), height, p, f.intrinsics)
    assert along_rows > p.blur_leak_threshold > max(sharp, along_columns)
    assert along_columns < 0 < along_rows
    assert leak(f.color, np.full_like(height, np.nan), p, f.intrinsics) == 0.0


def test_blur_leak_reference_and_deployed_agree():
    f = scene(641, 479, boxes=BOXES)
    color = motion_blurred(f.color)
    assert blur_leak(color, _height(f), DEFAULT_PARAMS, f.intrinsics) == pytest.approx(
        blur_leak_reference(color, _height(f), DEFAULT_PARAMS, f.intrinsics), abs=1e-6)


@pytest.mark.parametrize('smear', [blur_smear_sums, blur_smear_sums_reference],
                         ids=['deployed', 'reference'])
def test_a_thin_objects_colour_is_restored_from_its_smear_over_the_floor(smear):
    # A 1 cm bar (~8 px) under a 15 px blur keeps about half of its own light in its pixels.
    bar = Box(0.0, 0.0, 0.0, 0.01, 0.06, 0.02, rgb=(200, 40, 40))
    f = scene(640, 480, boxes=(bar,))
    height = _height(f)
    with np.errstate(invalid='ignore'):
        fg = height > DEFAULT_PARAMS.min_height
    rows, cols = np.nonzero(fg)
    r0, c0 = rows.min() - 2, cols.min() - 2
    labels = fg[r0:rows.max() + 3, c0:cols.max() + 3].astype(np.int64)
    true = LINEAR_LUT[np.array(bar.rgb)]
    color = motion_blurred(f.color)
    own = LINEAR_LUT[color[fg]].mean(axis=0)
    restored = (LINEAR_LUT[color[fg]].sum(axis=0)
                + smear(labels, color, height, r0, c0, 1, DEFAULT_PARAMS, f.intrinsics)[1]
                ) / fg.sum()
    assert np.abs(own - true).max() > 0.1                 # blur paled it
    np.testing.assert_allclose(restored, true, atol=0.02)
    # Nothing to restore in a sharp frame.
    sharp = (LINEAR_LUT[f.color[fg]].sum(axis=0)
             + smear(labels, f.color, height, r0, c0, 1, DEFAULT_PARAMS, f.intrinsics)[1]
             ) / fg.sum()
    np.testing.assert_allclose(sharp, LINEAR_LUT[f.color[fg]].mean(axis=0), atol=0.01)


def test_smear_sums_reference_and_deployed_agree_with_two_regions_and_a_tie():
    pair = (Box(-0.02, 0.0, 0.0, 0.02, 0.04, 0.03, rgb=(200, 40, 40)),
            Box(0.02, 0.0, 0.0, 0.02, 0.04, 0.03, rgb=(40, 60, 200)))
    f = scene(640, 480, boxes=pair)
    height = _height(f)
    color = motion_blurred(f.color)
    with np.errstate(invalid='ignore'):
        fg = height > DEFAULT_PARAMS.min_height
    rows, cols = np.nonzero(fg)
    r0, c0 = rows.min() - 2, cols.min() - 2
    crop = fg[r0:rows.max() + 3, c0:cols.max() + 3]
    labels = np.where(crop, 1 + (np.arange(crop.shape[1]) > crop.shape[1] // 2)[None, :], 0)
    a = blur_smear_sums(labels, color, height, r0, c0, 2, DEFAULT_PARAMS, f.intrinsics)
    b = blur_smear_sums_reference(labels, color, height, r0, c0, 2, DEFAULT_PARAMS,
                                  f.intrinsics)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)    # float32 against float64
    assert np.abs(a[1:]).sum() > 0


@pytest.mark.parametrize('locate', LOCATORS)
def test_blurred_dark_object_with_a_thin_part_is_one_object_and_its_neighbour_stays_apart(
        locate):
    # Blur smears the dark object over the pale floor: its 1 cm wide bar and its rims read as
    # floor-blended pieces, three objects unless the smear is summed back into them.
    dark = (30, 20, 60)
    boxes = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=dark),
             Box(0.03, 0.0, 0.0, 0.01, 0.08, 0.03, rgb=dark))
    f = scene(640, 480, boxes=boxes)
    color = motion_blurred(f.color)
    assert len(locate(color, f.depth, f.intrinsics, f.extrinsics)) == 1
    off = LocatorParams(blur_leak_px=0)
    assert len(locate(color, f.depth, f.intrinsics, f.extrinsics, off)) == 3
    # A differently coloured object touching it stays an object of its own.
    other = Box(-0.045, 0.0, 0.0, 0.04, 0.04, 0.03, rgb=(200, 180, 40))
    f = scene(640, 480, boxes=boxes + (other,))
    objects = locate(motion_blurred(f.color), f.depth, f.intrinsics, f.extrinsics)
    assert len(objects) == 2
    assert min(abs(o.position[0] + 0.045) for o in objects) < 0.006


def test_restored_colours_join_pieces_of_a_dark_object_that_chromaticity_cannot_compare():
    # A dark object's restored colour is a few hundredths of full scale in linear light: its
    # chromaticity is noise, but pieces of it agree in linear light within merge_blur_linear.
    intr = scene(640, 480, boxes=()).intrinsics
    sums = {1: np.array([40.0, 30.0, 60.0]) * 1000, 2: np.array([120.0, 118.0, 115.0]) * 200}
    counts = {1: 1000, 2: 200}
    contact = {(1, 2): 40}
    floor = np.array([0.0, 0.0, 1000.0])       # a floor neither region is a blend of
    restored = {1: np.array([0.020, 0.012, 0.040]) * 1000,
                2: np.array([0.035, 0.010, 0.030]) * 200}
    join = merge_regions(sums, counts, contact, floor, DEFAULT_PARAMS, intr, restored=restored)
    assert join == {1: 1, 2: 1}
    assert merge_regions(sums, counts, contact, floor, DEFAULT_PARAMS, intr) == {1: 1, 2: 2}
    no_linear = LocatorParams(merge_blur_linear=0.0)
    assert merge_regions(sums, counts, contact, floor, no_linear, intr,
                         restored=restored) == {1: 1, 2: 2}
    # Two objects: their restored colours differ in chromaticity and in linear light.
    apart = {1: np.array([0.30, 0.05, 0.05]) * 1000, 2: np.array([0.05, 0.05, 0.30]) * 200}
    assert merge_regions(sums, counts, contact, floor, DEFAULT_PARAMS, intr,
                         restored=apart) == {1: 1, 2: 2}


def test_blur_restoration_takes_float_colour_as_the_rest_of_the_locator_does():
    dark = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(30, 20, 60)),
            Box(0.03, 0.0, 0.0, 0.01, 0.08, 0.03, rgb=(30, 20, 60)))
    f = scene(640, 480, boxes=dark)
    color = motion_blurred(f.color)
    as_float = locate_objects(color.astype(np.float32), f.depth, f.intrinsics, f.extrinsics)
    assert len(as_float) == len(locate_objects(color, f.depth, f.intrinsics, f.extrinsics)) == 1


def _height_field_frame(height_of, ext: Extrinsics, intr: Intrinsics):
    """(colour, 16UC1 depth) of a height field z = height_of(x, y) over a green floor at 5 mm.

    Grey where x < 0, dull orange where x >= 0: 0.17 apart in chromaticity, which the 3x3
    blur spreads under color_step (the colour cut misses their border), over
    merge_smooth_color (one surface in two colours would join, two objects do not).
    """
    depth, p = render_height_field(height_of, intr, ext)
    raised = height_of(p[..., 0], p[..., 1]) > 0.005
    colour = np.full(depth.shape + (3,), (120, 160, 120), np.uint8)
    colour[raised & (p[..., 0] < 0)] = (150, 150, 150)
    colour[raised & (p[..., 0] >= 0)] = (190, 150, 110)
    return colour, np.round(depth * 1000).astype(np.uint16)


def _valley(x, y):
    """Two slabs leaning against each other (31 deg): a V along y with no height step."""
    return np.where((np.abs(x) < 0.045) & (np.abs(y) < 0.04), 0.015 + 0.6 * np.abs(x), 0.0)


def _ridge(x, y):
    """One roof: the same two faces meeting in a convex ridge."""
    return np.where((np.abs(x) < 0.045) & (np.abs(y) < 0.04), 0.057 - 0.6 * np.abs(x), 0.0)


QVGA = D435_VGA.scaled(320, 240)


@pytest.mark.parametrize('locate', LOCATORS)
def test_concave_crease_separates_touching_objects_a_convex_edge_does_not(locate):
    down = tilted_extrinsics(0.0)
    colour, depth = _height_field_frame(_valley, down, QVGA)
    two = locate(colour, depth, QVGA, down)
    assert sorted(np.sign(o.position[0]) for o in two) == [-1.0, 1.0]
    # what the colour and height cuts see alone: one object
    no_crease = LocatorParams(crease_deg=0.0)
    assert len(locate(colour, depth, QVGA, down, no_crease)) == 1
    colour, depth = _height_field_frame(_ridge, down, QVGA)
    assert len(locate(colour, depth, QVGA, down)) == 1


def test_crease_cut_is_the_same_in_both_implementations_from_an_oblique_camera():
    ext = tilted_extrinsics(35.0)
    colour, depth = _height_field_frame(_valley, ext, QVGA)
    p = DEFAULT_PARAMS
    scene_ = height_scene(depth, QVGA, ext)
    world = world_points_reference(depth / 1000.0, QVGA, ext)
    fg = np.isfinite(world[..., 2]) & (world[..., 2] > p.min_height)
    normal, known = crease_reference(world, fg, ext.translation, p)
    cos = np.cos(np.radians(p.crease_deg))
    pairs = []
    for a, b in (((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
                 ((slice(None, -1), slice(None)), (slice(1, None), slice(None)))):
        bend = (normal[a] * normal[b]).sum(-1) < cos
        valley = ((normal[b] - normal[a]) * (world[b] - world[a])).sum(-1) < 0
        pairs.append(bend & valley & known[a] & known[b])
    ref = np.zeros(fg.shape, bool)
    for d, (a, b) in zip(pairs, (((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
                                 ((slice(None, -1), slice(None)), (slice(1, None), slice(None))))):
        ref[a] |= d
        ref[b] |= d
    rows, cols = np.nonzero(fg)
    r0, c0 = rows.min(), cols.min()
    crop = fg[r0:rows.max() + 1, c0:cols.max() + 1]
    dep = crease_cut(scene_.depth.reshape(QVGA.height, QVGA.width), scene_.height,
                     scene_.rays.reshape(QVGA.height, QVGA.width, 3), crop.astype(np.uint8),
                     r0, c0, p)
    assert dep.sum() > 20      # the valley is found from 35 deg too
    assert np.array_equal(dep, ref[r0:rows.max() + 1, c0:cols.max() + 1])
    objects = locate_objects(colour, depth, QVGA, ext)
    reference = locate_objects_reference(colour, depth, QVGA, ext)
    assert [o.pixel_count for o in reference] == [o.pixel_count for o in objects]
    for a, b in zip(reference, objects):
        assert np.allclose(a.position, b.position, atol=1e-5)
