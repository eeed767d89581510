# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""grasp_planner kernel on ray-cast box scenes."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels.grasp_planner import (
    GraspParams,
    grasp_scene,
    plan_grasp,
    plan_grasp_reference,
    plan_grasp_segmented,
)
from edge_loop.kernels.grasp_types import grasp_rectangle
from edge_loop.kernels.object_locator import (
    label_image,
    locate_objects,
    rank_positions,
    rank_targets,
    segments_from_labels,
)
from edge_loop.verify.compare import angle_diff_mod
from edge_loop.verify.sweeps import Box, scene

P = GraspParams()
MIN_TCP_Z = P.floor_height + P.pad_half_height + P.table_margin


def test_single_box_closes_across_its_narrow_side():
    box = Box(0.02, -0.03, 0.6, 0.06, 0.03, 0.04)
    f = scene(640, 480, boxes=(box,), depth_encoding='16UC1')
    grasps = plan_grasp(f.depth, f.intrinsics, f.extrinsics)
    assert len(grasps) > 1
    assert all(a.quality >= b.quality for a, b in zip(grasps, grasps[1:]))
    g = grasps[0]
    assert angle_diff_mod(g.yaw, box.yaw + np.pi / 2, np.pi) <= np.radians(7.5) + 1e-9
    # visible width across (3 cm, plus a little side seen in perspective) + 2 x clearance
    assert g.opening == pytest.approx(0.03 + 2 * P.clearance, abs=0.004)
    assert np.hypot(g.center[0] - box.x, g.center[1] - box.y) < 0.004
    assert g.center[2] == pytest.approx(max(box.sz - P.grasp_depth, MIN_TCP_Z), abs=0.002)
    rect = grasp_rectangle(g)
    assert np.linalg.norm(rect[1] - rect[0]) == pytest.approx(g.opening)
    assert np.cross(rect[1] - rect[0], rect[2] - rect[1])[2] > 0


def test_low_object_keeps_the_fingertips_above_the_floor():
    f = scene(640, 480, boxes=(Box(0.0, 0.0, 0.0, 0.05, 0.025, 0.015),))
    g = plan_grasp(f.depth, f.intrinsics, f.extrinsics)[0]
    assert g.center[2] == pytest.approx(MIN_TCP_Z)


def test_too_wide_everywhere_gives_no_grasp():
    f = scene(640, 480, boxes=(Box(0.0, 0.0, 0.3, 0.10, 0.09, 0.03),))
    assert plan_grasp(f.depth, f.intrinsics, f.extrinsics) == []
    assert plan_grasp_reference(f.depth, f.intrinsics, f.extrinsics) == []


def test_a_tall_neighbour_blocks_the_narrow_axis():
    target = Box(0.0, 0.0, 0.0, 0.05, 0.03, 0.03)   # narrow along world y
    wall = Box(0.0, 0.034, 0.0, 0.08, 0.01, 0.06, rgb=(40, 60, 200))  # 1.9 cm beside it
    free = scene(640, 480, boxes=(target,))
    g_free = plan_grasp(free.depth, free.intrinsics, free.extrinsics)[0]
    assert angle_diff_mod(g_free.yaw, np.pi / 2, np.pi) < np.radians(8)
    f = scene(640, 480, boxes=(target, wall))
    objects = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    target_obj = min(objects, key=lambda o: np.hypot(*o.position[:2]))
    grasps = plan_grasp(f.depth, f.intrinsics, f.extrinsics, target=target_obj)
    assert grasps
    g = grasps[0]
    # Closing along y would put a finger into the wall: it closes along x instead.
    assert angle_diff_mod(g.yaw, 0.0, np.pi) < np.radians(8)
    assert g.opening == pytest.approx(0.05 + 2 * P.clearance, abs=0.005)


def test_reference_and_deployed_choose_the_same_grasp():
    f = scene(641, 479, seed=3, n_boxes=5, depth_encoding='16UC1')
    ref = plan_grasp_reference(f.depth, f.intrinsics, f.extrinsics)
    dep = plan_grasp(f.depth, f.intrinsics, f.extrinsics)
    assert ref and dep
    assert np.linalg.norm(ref[0].center - dep[0].center) < 1e-3
    assert angle_diff_mod(ref[0].yaw, dep[0].yaw, np.pi) < 1e-6
    assert ref[0].opening == pytest.approx(dep[0].opening, abs=1e-3)


def test_empty_scene_and_no_depth_give_no_grasp():
    f = scene(320, 240, boxes=())
    assert plan_grasp(f.depth, f.intrinsics, f.extrinsics) == []
    nan = np.full(f.depth.shape, np.nan, np.float32)
    assert plan_grasp(nan, f.intrinsics, f.extrinsics) == []


def _as_tuple(g):
    return (tuple(np.asarray(g.center).tolist()), g.yaw, g.opening, g.finger_width, g.quality)


def test_planning_on_the_locators_label_image_gives_the_same_grasps_bit_for_bit():
    # One perception pass: the planner node gets the locator's centroids (PoseArray, float64)
    # and its label image, not the DetectedObjects. Same grasps as planning on the objects.
    f = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    objects = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    assert len(objects) >= 3
    labels = label_image(objects, f.intrinsics.height, f.intrinsics.width)
    assert labels.dtype == np.uint8 and labels.max() == len(objects)
    segments = segments_from_labels(labels, len(objects))
    for obj, seg in zip(objects, segments):
        assert np.array_equal(obj.pixels, seg)   # raster order survives the round trip
    positions = np.array([o.position for o in objects])
    scene_, obstacles = grasp_scene(f.depth, f.intrinsics, f.extrinsics)
    got = plan_grasp_segmented(scene_, obstacles, positions, segments)
    want = plan_grasp(f.depth, f.intrinsics, f.extrinsics, objects=objects)
    assert got and [_as_tuple(g) for g in got] == [_as_tuple(g) for g in want]
    assert rank_positions(positions[:, :2], [o.top for o in objects]) == rank_targets(objects)
    # A label image that does not match the centroids is refused, not planned on.
    with pytest.raises(ValueError, match='segments'):
        plan_grasp_segmented(scene_, obstacles, positions[:-1], segments)
    with pytest.raises(ValueError, match='without pixels'):
        plan_grasp_segmented(scene_, obstacles, positions,
                             segments_from_labels(np.zeros_like(labels), len(objects)))
    # Nothing found: no segments, no grasp.
    assert plan_grasp_segmented(scene_, obstacles, np.zeros((0, 3)), []) == []


def test_label_image_widens_past_255_objects():
    class Obj:
        def __init__(self, k):
            self.pixels = np.array([k])

    labels = label_image([Obj(k) for k in range(300)], 20, 20)
    assert labels.dtype == np.uint16 and labels.reshape(-1)[299] == 300
    segs = segments_from_labels(labels, 300)
    assert [int(s[0]) for s in segs] == list(range(300))


def test_floor_and_obstacle_heights_follow_the_workspace_limit():
    """The planner's floor follows the workspace limit (GraspParams.for_workspace).

    The shipped min_height gives the shipped planner, bit for bit; a tray 6 cm higher moves
    the floor and the obstacle threshold with it.
    """
    assert GraspParams.for_workspace(0.009) == GraspParams()
    raised = GraspParams.for_workspace(0.069)
    assert raised.obstacle_min_height == 0.069
    assert raised.floor_height == pytest.approx(0.065)
