# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Occupancy kernel: equivalence through the harness op, fusion behaviour, sim IoU slice."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels import occupancy as occ
from edge_loop.kernels.camera import D435_VGA
from edge_loop.verify import ops_occupancy as ops

TOL = {'logodds_atol': 1e-5, 'max_cell_fraction': 0.005}


# The 1920x1080 and 3840x2160 cases (``full_only``) cost 27 s to 2 minutes of reference time
# each on 2 cores (108 s for 3840x2160 16UC1 in a fresh-clone CI run here), which CI's 30
# minutes cannot hold (this file runs twice there, with the robot's packages too): they run in
# `make verify`, whose record the nodes' deployment gate checks, and the torch port is compared
# with the deployed kernel on them in test_gpu_kernels.py. Here both encodings are swept up to
# 641x479, the same code path.
SWEEP = list(ops.cases(full=False))


@pytest.mark.parametrize('case', SWEEP, ids=lambda c: c.name)
def test_deployed_matches_reference_on_the_sweep(case):
    ref = occ.integrate_reference(*case.args, **case.kwargs)
    dep = occ.integrate(*case.args, **case.kwargs)
    worst, ok, detail = ops.compare(ref, dep, TOL)
    assert ok, detail
    assert dep.dtype == np.float32 and dep.shape == occ.DEFAULT_GRID.shape


def test_compare_catches_a_wrong_grid():
    case = next(iter(ops.cases()))
    ref = occ.integrate_reference(*case.args)
    wrong = ref.copy()
    wrong[10:30, 10:30] += 1.0
    assert not ops.compare(ref, wrong, TOL)[1]


def _fuse(depths, intr, ext, params=occ.DEFAULT_PARAMS, logodds=None):
    lo = occ.new_logodds() if logodds is None else logodds
    for d in depths:
        lo = occ.integrate(lo, d, intr, ext, params=params)
    return lo


@pytest.mark.parametrize('ext', [ops.DEFAULT_EXT, ops.tilted_extrinsics(25.0, (0.0, -0.3, 0.7)),
                                 ops.tilted_extrinsics(-30.0, (0.05, 0.4, 0.65))],
                         ids=['top-down', 'tilted 25', 'tilted -30 offset'])
def test_fused_grid_matches_the_true_boxes(ext):
    rng = np.random.default_rng(4)
    boxes = ops.random_boxes(rng, 5)
    truth = ops.box_occupancy(boxes)
    clean = ops.render_depth(boxes, D435_VGA, ext)
    lo = _fuse([ops.to_mm(ops.degrade(clean, rng, hole_fraction=0.05)) for _ in range(6)],
               D435_VGA, ext)
    grid = occ.to_occupancy_grid(lo)
    assert occ.occupancy_iou(grid, truth) > 0.85
    # free space is seen as free, not merely "not occupied"
    visible_free = (truth == 0) & (grid != occ.OCC_UNKNOWN)
    assert (grid[visible_free] == occ.OCC_FREE).mean() > 0.98


def test_noise_and_holes_do_not_flicker_fused_cells():
    rng = np.random.default_rng(1)
    boxes = ops.random_boxes(rng, 4)
    clean = ops.render_depth(boxes, D435_VGA, ops.DEFAULT_EXT)
    mapper = occ.OccupancyMapper()
    for _ in range(5):
        previous = mapper.update(ops.to_mm(ops.degrade(clean, rng)), D435_VGA, ops.DEFAULT_EXT)
    changes = np.zeros(previous.shape, dtype=int)
    for _ in range(10):
        grid = mapper.update(ops.to_mm(ops.degrade(clean, rng, noise_m=0.004,
                                                   hole_fraction=0.15)),
                             D435_VGA, ops.DEFAULT_EXT)
        changes += grid != previous
        previous = grid
    # Cells may settle once under the noisier frames; blinking back and forth is flicker.
    assert np.count_nonzero(changes >= 2) <= 3, np.count_nonzero(changes >= 2)
    assert np.count_nonzero(changes) <= 60


def test_removed_object_clears_and_unobserved_cells_relax_to_unknown():
    box = ops.Box(-0.05, -0.05, 0.05, 0.05, 0.06)
    with_box = ops.render_depth([box], D435_VGA, ops.DEFAULT_EXT)
    without = ops.render_depth([], D435_VGA, ops.DEFAULT_EXT)
    lo = _fuse([with_box] * 8, D435_VGA, ops.DEFAULT_EXT)
    cell = occ.DEFAULT_GRID.cell_of(0.0, 0.0)
    assert occ.to_occupancy_grid(lo)[cell] == occ.OCC_OCCUPIED
    lo = _fuse([without] * 8, D435_VGA, ops.DEFAULT_EXT, logodds=lo)
    assert occ.to_occupancy_grid(lo)[cell] == occ.OCC_FREE
    nothing = np.full(without.shape, np.nan, np.float32)
    lo = _fuse([nothing] * 200, D435_VGA, ops.DEFAULT_EXT, logodds=lo)
    assert (occ.to_occupancy_grid(lo) == occ.OCC_UNKNOWN).all()


def test_unobserved_decay_ends_at_exact_zero_not_subnormal():
    # float32 decay by 0.99 a frame sticks at the smallest subnormal (1.4e-45) for ever,
    # and subnormal operands make every later multiply take a microcode assist.
    lo = occ.new_logodds()
    lo[:5, :5], lo[5:10, :5] = occ.DEFAULT_PARAMS.l_max, occ.DEFAULT_PARAMS.l_min
    nothing = np.full((480, 640), np.nan, np.float32)
    for _ in range(900):
        lo = occ.integrate(lo, nothing, D435_VGA, ops.DEFAULT_EXT)
    assert (lo == 0).all()
    assert not ((lo != 0) & (np.abs(lo) < np.finfo(np.float32).tiny)).any()


def test_no_data_gives_no_evidence_and_points_above_max_height_are_ignored():
    zeros = np.zeros((480, 640), np.uint16)
    lo = occ.integrate(occ.new_logodds(), zeros, D435_VGA, ops.DEFAULT_EXT)
    assert (lo == 0).all()
    # a "gripper" plate 0.4 m above the table fills the view: ignored, not occupied
    plate = np.full((480, 640), 0.35, np.float32)
    lo = occ.integrate(occ.new_logodds(), plate, D435_VGA, ops.DEFAULT_EXT)
    assert (occ.to_occupancy_grid(lo) == occ.OCC_UNKNOWN).all()


def test_bad_shapes_raise():
    with pytest.raises(ValueError):
        occ.integrate(occ.new_logodds(), np.zeros((10, 10), np.float32), D435_VGA,
                      ops.DEFAULT_EXT)
    with pytest.raises(ValueError):
        occ.integrate(np.zeros((3, 3), np.float32), np.zeros((480, 640), np.float32), D435_VGA,
                      ops.DEFAULT_EXT)
    huge = occ.GridSpec(width=4096, height=4096)
    with pytest.raises(ValueError, match='2\\*\\*24'):
        occ.integrate(occ.new_logodds(huge), np.zeros((480, 640), np.float32), D435_VGA,
                      ops.DEFAULT_EXT, huge)


def test_grid_values_and_iou():
    lo = np.array([[-3.0, 0.0, 3.0]], np.float32)
    assert occ.to_occupancy_grid(lo).tolist() == [[0, -1, 100]]
    a = np.array([[100, 100, 0]], np.int8)
    b = np.array([[100, 0, 0]], np.int8)
    assert occ.occupancy_iou(a, b) == pytest.approx(0.5)
    assert occ.occupancy_iou(b * 0, b * 0) == 1.0


@pytest.mark.slow
def test_iou_against_the_simulator_on_held_out_scenes():
    from edge_loop.sim import world as sim
    ious = []
    for seed in (810, 811):
        with sim.SimWorld(seed, split='heldout') as world:
            mapper = occ.OccupancyMapper()
            for _ in range(3):
                frame = world.render()
                grid = mapper.update(frame.depth_mm, frame.intrinsics, world.extrinsics)
            truth = np.where(world.gt_occupancy(), 100, 0).astype(np.int8)
            ious.append(occ.occupancy_iou(grid, truth))
    assert np.mean(ious) >= 0.88, ious
