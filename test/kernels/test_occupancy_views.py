# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Occupancy across viewpoints: cells hidden behind objects stay unknown; two views merge."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels import occupancy as occ
from edge_loop.kernels.camera import D435_VGA
from edge_loop.verify import ops_occupancy as ops

# One tall box in the middle of the grid, seen obliquely from either side (30 deg about x).
TALL = [ops.Box(-0.0275, -0.0275, 0.0275, 0.0275, 0.10)]   # faces mid-cell
FROM_FRONT = ops.tilted_extrinsics(30.0, (0.0, -0.33, 0.57))
FROM_BACK = ops.tilted_extrinsics(-30.0, (0.0, 0.33, 0.57))


def _tops(boxes: list[ops.Box], spec: occ.GridSpec = occ.DEFAULT_GRID) -> np.ndarray:
    """Surface height at every cell centre (the truth visible_cells ray-casts over)."""
    xs, ys = spec.cell_centers()
    top = np.zeros(spec.shape)
    for b in boxes:
        inside = (xs > b.x0) & (xs < b.x1) & (ys > b.y0) & (ys < b.y1)
        top[inside] = np.maximum(top[inside], b.top)
    return top


def _frames(boxes, ext, n=6, seed=5):
    rng = np.random.default_rng(seed)
    clean = ops.render_depth(boxes, D435_VGA, ext)
    return [ops.to_mm(ops.degrade(clean, rng, hole_fraction=0.02)) for _ in range(n)]


def test_cells_hidden_behind_an_object_stay_unknown():
    top = _tops(TALL)
    seen = occ.visible_cells(top, D435_VGA, FROM_FRONT)
    in_view = occ.visible_cells(np.zeros_like(top), D435_VGA, FROM_FRONT)   # nothing on it
    hidden = in_view & ~seen & (top == 0)      # floor in the box's shadow
    assert hidden.sum() > 150, hidden.sum()
    # the shadow lies behind the box's front face (y = -0.0275), away from the camera
    rows = np.nonzero(hidden)[0]
    _, ys = occ.DEFAULT_GRID.cell_centers()
    assert ys[rows, 0].min() > -0.03 and ys[rows, 0].mean() > 0.03
    mapper = occ.OccupancyMapper()
    for depth in _frames(TALL, FROM_FRONT):
        grid = mapper.update(depth, D435_VGA, FROM_FRONT)
    # Ray-cast hidden cells are never free; a cell cut by the shadow's edge may be seen in part.
    inner = hidden & np.roll(hidden, 1, 0) & np.roll(hidden, -1, 0) & np.roll(hidden, 1, 1) \
        & np.roll(hidden, -1, 1)
    assert inner.sum() > 80
    assert (grid[inner] == occ.OCC_UNKNOWN).all()
    assert (grid[hidden] == occ.OCC_FREE).mean() < 0.25
    # what the camera sees is right: the box occupied, the visible floor free
    truth = ops.box_occupancy(TALL)
    assert occ.occupancy_iou(grid, truth, seen) > 0.85
    assert (grid[seen & (truth == 0)] == occ.OCC_FREE).mean() > 0.97


def test_a_second_view_fills_the_first_ones_shadow():
    top = _tops(TALL)
    seen_a = occ.visible_cells(top, D435_VGA, FROM_FRONT)
    seen_b = occ.visible_cells(top, D435_VGA, FROM_BACK)
    truth = ops.box_occupancy(TALL)
    in_view_a = occ.visible_cells(np.zeros_like(top), D435_VGA, FROM_FRONT)
    shadow_a = in_view_a & ~seen_a & seen_b & (top == 0)
    assert shadow_a.sum() > 150
    mapper = occ.OccupancyMapper()
    for da, db in zip(_frames(TALL, FROM_FRONT), _frames(TALL, FROM_BACK, seed=6)):
        grid = mapper.update_views([(da, D435_VGA, FROM_FRONT), (db, D435_VGA, FROM_BACK)])
    assert (grid[shadow_a] == occ.OCC_FREE).mean() > 0.95     # seen by the second camera
    both = seen_a | seen_b
    assert occ.occupancy_iou(grid, truth, both) > 0.9
    assert (grid[both & (truth == 0)] == occ.OCC_FREE).mean() > 0.97
    # one camera alone leaves that shadow unknown
    alone = occ.OccupancyMapper()
    for da in _frames(TALL, FROM_FRONT):
        grid_a = alone.update(da, D435_VGA, FROM_FRONT)
    assert (grid_a[shadow_a] == occ.OCC_FREE).mean() < 0.15


def test_views_merge_as_one_update_and_the_implementations_agree():
    small = D435_VGA.scaled(160, 120)
    rng = np.random.default_rng(9)
    boxes = ops.random_boxes(rng, 4)
    views = [(ops.degrade(ops.render_depth(boxes, small, ext), rng), small, ext)
             for ext in (FROM_FRONT, FROM_BACK)]
    lo = occ.new_logodds()
    lo[:5] = 2.0                                     # a prior the unseen cells relax from
    one = occ.integrate_views(lo, views[:1])
    assert np.array_equal(one, occ.integrate(lo, *views[0]))
    dep = occ.integrate_views(lo, views)
    ref = occ.integrate_views(lo, views, reference=True)
    assert ops.compare(ref, dep, {'logodds_atol': 1e-5, 'max_cell_fraction': 0.005})[1]
    # evidence is summed, then applied once: not two updates in a row
    assert not np.array_equal(dep, occ.integrate(occ.integrate(lo, *views[0]), *views[1]))
    assert np.abs(dep).max() <= occ.DEFAULT_PARAMS.l_max
    with pytest.raises(ValueError):
        occ.integrate_views(lo, [])


def test_iou_where_counts_only_those_cells():
    grid = np.array([[100, 100, 0, -1]], np.int8)
    truth = np.array([[100, 0, 0, 100]], np.int8)
    assert occ.occupancy_iou(grid, truth) == pytest.approx(1 / 3)
    assert occ.occupancy_iou(grid, truth, np.array([[True, False, True, False]])) == 1.0


def test_torch_twin_merges_views_like_numpy():
    torch = pytest.importorskip('torch')
    from edge_loop.kernels.gpu import occupancy as gocc

    frames = list(zip(_frames(TALL, FROM_FRONT, n=3), _frames(TALL, FROM_BACK, n=3, seed=6)))
    ref = occ.OccupancyMapper()
    dev = gocc.TorchOccupancyMapper(device=torch.device('cpu'))
    for da, db in frames:
        views = [(da, D435_VGA, FROM_FRONT), (db, D435_VGA, FROM_BACK)]
        g_ref = ref.update_views(views)
        g_dev = dev.update_views(views)
    assert np.abs(dev.logodds - ref.logodds).max() < 1e-4
    assert (g_dev != g_ref).mean() < 0.005
    with pytest.raises(ValueError):
        gocc.integrate_views_torch(torch.zeros(occ.DEFAULT_GRID.shape), [])
