# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""object_locator kernel on ray-cast box scenes (ground truth known exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels.object_locator import (
    DetectedObject,
    locate_objects,
    locate_objects_reference,
    locate_objects_rgb_baseline,
    rank_targets,
    select_target,
)
from edge_loop.verify.compare import angle_diff_mod
from edge_loop.verify.sweeps import Box, read_only, render_boxes, scene, tilted_extrinsics

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
