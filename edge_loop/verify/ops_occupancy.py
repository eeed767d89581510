# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Verified op: occupancy integration (reference per-pixel loop vs deployed vectorised).

Also holds the synthetic box scenes (ray-cast depth of boxes on the table seen from any camera
pose, with their exact occupancy) that the tests and ``bench/bench_occupancy.py`` use when the
simulator is not at hand.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from edge_loop.kernels import occupancy as occ
from edge_loop.kernels.camera import (
    D435_VGA,
    DEFAULT_CAMERA_ORIENTATION,
    DEFAULT_CAMERA_POSITION,
    Extrinsics,
    Intrinsics,
    matrix_to_quat,
)
from edge_loop.verify import sweeps
from edge_loop.verify.compare import Comparison
from edge_loop.verify.spec import Case, OpSpec


@dataclass(frozen=True)
class Box:
    """An axis-aligned box standing on the table: x/y extent and top height (m)."""

    x0: float
    y0: float
    x1: float
    y1: float
    top: float


def random_boxes(rng: np.random.Generator, n: int, spec: occ.GridSpec = occ.DEFAULT_GRID,
                 ) -> list[Box]:
    """``n`` boxes 2-8 cm wide, 0.5-10 cm tall, inside the workspace."""
    boxes = []
    for _ in range(n):
        w, d = rng.uniform(0.02, 0.08, size=2)
        cx = rng.uniform(spec.origin_x + 0.05, spec.origin_x + spec.width * spec.resolution - 0.05)
        cy = rng.uniform(spec.origin_y + 0.05,
                         spec.origin_y + spec.height * spec.resolution - 0.05)
        boxes.append(Box(cx - w / 2, cy - d / 2, cx + w / 2, cy + d / 2,
                         float(rng.uniform(0.005, 0.10))))
    return boxes


def render_depth(boxes: list[Box], intr: Intrinsics, ext: Extrinsics) -> np.ndarray:
    """Exact float32 depth (m) of boxes on the table plane z = 0 (NaN where a ray misses)."""
    u = (np.arange(intr.width) - intr.cx) / intr.fx
    v = (np.arange(intr.height) - intr.cy) / intr.fy
    uu, vv = np.meshgrid(u, v)
    rays_cam = np.stack([uu, vv, np.ones_like(uu)], axis=-1)      # z_cam = 1 per unit depth
    d = rays_cam @ ext.rotation.T                                  # world direction per depth
    o = ext.translation
    depth = np.full(uu.shape, np.inf)
    with np.errstate(divide='ignore', invalid='ignore'):
        t_table = -o[2] / d[..., 2]
        depth = np.where(t_table > 0, t_table, depth)
        for b in boxes:
            lo = np.array([b.x0, b.y0, 0.0])
            hi = np.array([b.x1, b.y1, b.top])
            t1 = (lo - o) / d
            t2 = (hi - o) / d
            tmin = np.nanmax(np.minimum(t1, t2), axis=-1)
            tmax = np.nanmin(np.maximum(t1, t2), axis=-1)
            hit = (tmax >= tmin) & (tmin > 0)
            depth = np.where(hit & (tmin < depth), tmin, depth)
    depth[~np.isfinite(depth)] = np.nan
    return depth.astype(np.float32)


def box_occupancy(boxes: list[Box], spec: occ.GridSpec = occ.DEFAULT_GRID,
                  occupied_height: float = 0.015) -> np.ndarray:
    """True occupancy (0/100) of the boxes: any overlap of a cell with a tall enough box."""
    truth = np.zeros(spec.shape, dtype=np.int8)
    xs = spec.origin_x + np.arange(spec.width + 1) * spec.resolution
    ys = spec.origin_y + np.arange(spec.height + 1) * spec.resolution
    for b in boxes:
        if b.top <= occupied_height:
            continue
        cols = (xs[1:] > b.x0) & (xs[:-1] < b.x1)
        rows = (ys[1:] > b.y0) & (ys[:-1] < b.y1)
        truth[np.ix_(rows, cols)] = occ.OCC_OCCUPIED
    return truth


def degrade(depth: np.ndarray, rng: np.random.Generator, noise_m: float = 0.002,
            hole_fraction: float = 0.02) -> np.ndarray:
    """Depth-sensor-like noise (Gaussian, growing with z^2) and random holes (NaN)."""
    out = depth + rng.normal(0.0, 1.0, depth.shape).astype(np.float32) * np.float32(
        noise_m) * (depth / 0.75) ** 2
    out[rng.random(depth.shape) < hole_fraction] = np.nan
    return out.astype(np.float32)


def to_mm(depth: np.ndarray) -> np.ndarray:
    """Float metres -> uint16 millimetres (0 = no data), as a 16UC1 image carries it."""
    mm = np.nan_to_num(depth, nan=0.0) * 1000.0
    return np.clip(np.round(mm), 0, 65535).astype(np.uint16)


def tilted_extrinsics(roll_deg: float, position: tuple[float, float, float]) -> Extrinsics:
    """A camera at ``position`` looking down, tilted by ``roll_deg`` about world x."""
    a = np.radians(roll_deg)
    down = np.array([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]])  # default: optical z = -world z
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    return Extrinsics.from_params(list(position), list(matrix_to_quat(rx @ down)))


DEFAULT_EXT = Extrinsics.from_params(DEFAULT_CAMERA_POSITION, DEFAULT_CAMERA_ORIENTATION)
SMALL = occ.GridSpec()
SMALL_INTR = D435_VGA.scaled(160, 120)


def _case(name: str, seed: int, intr: Intrinsics, ext: Extrinsics, n_boxes: int = 4,
          encoding: str = 'float', prior: bool = False, view: str = 'plain',
          params: occ.OccupancyParams = occ.DEFAULT_PARAMS) -> Case:
    rng = np.random.default_rng(seed)
    depth = degrade(render_depth(random_boxes(rng, n_boxes), intr, ext), rng)
    if encoding == 'uint16':
        depth = to_mm(depth)
    if view == 'readonly':
        depth = sweeps.read_only(depth)
    elif view == 'noncontiguous':
        depth = sweeps.non_contiguous(depth)
    elif view == 'negative':
        depth = sweeps.negative_stride(depth)
    logodds = (rng.uniform(-2, 3, SMALL.shape).astype(np.float32) if prior
               else occ.new_logodds(SMALL))
    return Case(name, (logodds, depth, intr, ext, SMALL, params))


def cases(full: bool = True) -> Iterator[Case]:
    """Sweep: encodings, priors, camera poses, views, empty/degenerate depth, strides.

    ``full=False`` leaves out the ``full_only`` frames (1920x1080, 3840x2160) before they are
    rendered: rendering them took 22 s of every test run's collection on 2 cores.
    """
    yield _case('160x120 float top-down', 1, SMALL_INTR, DEFAULT_EXT)
    yield _case('160x120 uint16 mm', 2, SMALL_INTR, DEFAULT_EXT, encoding='uint16')
    yield _case('160x120 with prior log-odds', 3, SMALL_INTR, DEFAULT_EXT, prior=True)
    yield _case('160x120 tilted 20 deg', 4, SMALL_INTR,
                tilted_extrinsics(20.0, (0.0, -0.25, 0.70)))
    yield _case('160x120 tilted 35 deg, offset', 5, SMALL_INTR,
                tilted_extrinsics(-35.0, (0.1, 0.45, 0.6)))
    yield _case('160x120 read-only view', 6, SMALL_INTR, DEFAULT_EXT, view='readonly')
    yield _case('160x120 non-contiguous view', 7, SMALL_INTR, DEFAULT_EXT, view='noncontiguous')
    yield _case('160x120 stride 2', 8, SMALL_INTR, DEFAULT_EXT,
                params=occ.OccupancyParams(pixel_stride=2))
    yield _case('320x240 no boxes', 9, D435_VGA.scaled(320, 240), DEFAULT_EXT, n_boxes=0)
    nan = np.full((120, 160), np.nan, dtype=np.float32)
    yield Case('160x120 all NaN', (occ.new_logodds(SMALL), nan, SMALL_INTR, DEFAULT_EXT,
                                   SMALL, occ.DEFAULT_PARAMS))
    zeros = np.zeros((120, 160), dtype=np.uint16)
    yield Case('160x120 all zero mm', (np.full(SMALL.shape, 2.0, np.float32), zeros, SMALL_INTR,
                                       DEFAULT_EXT, SMALL, occ.DEFAULT_PARAMS))
    yield _case('160x120 camera looking away (everything out of the grid)', 10, SMALL_INTR,
                tilted_extrinsics(80.0, (0.0, 0.0, 0.3)))
    # The shared sweep's sizes and encodings (the per-pixel reference is slow: small sizes).
    for rgbd in itertools.islice(sweeps.rgbd_inputs(seed=3, sizes=((320, 240), (641, 479))), 4):
        yield Case(f'sweep {rgbd.name}', (occ.new_logodds(SMALL), rgbd.depth, rgbd.intrinsics,
                                          rgbd.extrinsics, SMALL, occ.DEFAULT_PARAMS))
    yield from category_cases(full)


def category_cases(full: bool = True) -> Iterator[Case]:
    """The failure categories (spec.CATEGORIES) on depth: sizes, views, values, extremes.

    The reference visits every used pixel in Python (~30-60 us each on a 2-core VM), so the
    categories use 160x120 frames where the size does not matter, and the 1920x1080 and
    3840x2160 frames (node's stride 2) run only without --quick.
    """
    # The 1x1 and 0x0 frames come first: stop there, before the rest of the list is rendered.
    for rgbd in itertools.takewhile(lambda r: r.depth.shape[0] <= 1,
                                    sweeps.category_inputs(seed=4)):
        yield Case(f'sweep {rgbd.name}', (occ.new_logodds(SMALL), rgbd.depth,
                                              rgbd.intrinsics, rgbd.extrinsics, SMALL,
                                              occ.DEFAULT_PARAMS))
    yield _case('157x113 float prime size', 11, D435_VGA.scaled(157, 113), DEFAULT_EXT)
    yield _case('163x127 uint16 prime size', 12, D435_VGA.scaled(163, 127), DEFAULT_EXT,
                encoding='uint16')
    yield _case('160x120 float negative stride view', 13, SMALL_INTR, DEFAULT_EXT,
                view='negative')
    yield _case('160x120 uint16 negative stride view', 14, SMALL_INTR, DEFAULT_EXT,
                encoding='uint16', view='negative')
    base = _case('160x120 float', 15, SMALL_INTR, DEFAULT_EXT)
    inf = np.array(base.args[1], copy=True)
    inf[::7, ::5] = np.inf
    inf[40:60, 50:80] = -np.inf
    yield Case('160x120 float inf depth pixels', (occ.new_logodds(SMALL), inf, SMALL_INTR,
                                                  DEFAULT_EXT, SMALL, occ.DEFAULT_PARAMS))
    for h, what in ((0.2, 'near'), (3.0, 'far')):
        yield _case(f'160x120 float depth extremes: camera {h:g} m above ({what})', 16,
                    SMALL_INTR, sweeps.camera_at_height(h))
    raw = _case('160x120 uint16', 17, SMALL_INTR, DEFAULT_EXT, encoding='uint16')
    mm = np.array(raw.args[1], copy=True)
    mm[::9, ::4] = 65535
    mm[3::9, ::4] = 1
    yield Case('160x120 uint16 depth extremes: 1 mm and 65535 mm pixels',
               (occ.new_logodds(SMALL), mm, SMALL_INTR, DEFAULT_EXT, SMALL, occ.DEFAULT_PARAMS))
    for w, h in ((1920, 1080), (3840, 2160)) if full else ():
        for enc in ('16UC1', '32FC1'):
            f = sweeps.scene(w, h, seed=5, depth_encoding=enc)
            yield Case(f'{f.name}, stride 2', (occ.new_logodds(SMALL), f.depth, f.intrinsics,
                                               f.extrinsics, SMALL, occ.DEFAULT_PARAMS),
                       full_only=True)


def gate_perf_case() -> Case:
    """The claim's input: a 160x120 uint16 frame with 6 boxes, stride 2.

    Smaller than the node's 640x480 (``perf_case``, the bench's) so that 30 pairs of the
    per-pixel reference take seconds, not minutes.
    """
    rng = np.random.default_rng(0)
    intr = SMALL_INTR
    depth = to_mm(degrade(render_depth(random_boxes(rng, 6), intr, DEFAULT_EXT), rng))
    return Case('160x120 uint16, 6 boxes, stride 2', (occ.new_logodds(SMALL), depth, intr,
                                                      DEFAULT_EXT, SMALL, occ.DEFAULT_PARAMS))


def perf_case() -> Case:
    """A realistic 640x480 uint16 frame from the default camera with 6 boxes."""
    rng = np.random.default_rng(0)
    depth = to_mm(degrade(render_depth(random_boxes(rng, 6), D435_VGA, DEFAULT_EXT), rng))
    return Case('640x480 uint16, 6 boxes', (occ.new_logodds(SMALL), depth, D435_VGA,
                                            DEFAULT_EXT, SMALL, occ.DEFAULT_PARAMS))


def compare(ref: np.ndarray, dep: np.ndarray, tol: dict) -> tuple[float, bool, str]:
    """Cells whose log-odds differ (float64 loop vs float32 rays: ties at cell borders)."""
    limit = float(tol.get('max_cell_fraction', 0.005))
    if ref.shape != dep.shape:
        return Comparison(float('inf'), False, f'shape {ref.shape} != {dep.shape}',
                          max_abs=float('inf'), abs_tol=limit, unit='share of cells')
    diff = np.abs(ref.astype(np.float64) - dep.astype(np.float64))
    differing = float(np.count_nonzero(diff > tol.get('logodds_atol', 1e-5))) / diff.size
    grid_diff = float(np.count_nonzero(occ.to_occupancy_grid(ref) != occ.to_occupancy_grid(dep)))
    ok = differing <= limit
    with np.errstate(divide='ignore', invalid='ignore'):
        rel = np.where(diff == 0, 0.0, diff / np.abs(ref.astype(np.float64)))
    return Comparison(differing, ok, f'{differing:.4%} cells differ in log-odds, '
                      f'{grid_diff:.0f} in the int8 grid, max |d| {diff.max():.3g}',
                      max_abs=differing, abs_tol=limit, max_rel=float(np.max(rel)),
                      unit='share of cells')


OPS = [
    OpSpec(name='occupancy.integrate', reference=occ.integrate_reference,
           deployed=occ.integrate, cases=cases, compare=compare, perf_case=gate_perf_case,
           claimed_speedup=50.0, dtypes=('uint16', 'float32'), libraries=('numpy',),
           not_applicable={'saturated/black colour': 'takes depth only'}),
]
