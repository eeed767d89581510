# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Top-down occupancy grid of the workspace from aligned depth (2.5D log-odds fusion).

Each depth pixel is deprojected and moved to ``world``; it lands in one grid cell and carries
the *horizontal area* of its surface patch (the z component of the cross product of the
world-point differences to its right and lower neighbours). Area, not point count, because a
camera sees the vertical faces of walls and boxes as many pixels that cover no floor: counted
as points they would mark the free cell in front of every face as occupied. Per frame a cell
whose observed area is at least ``min_observed_area`` gets evidence: a hit when at least
``hit_area_fraction`` of that area lies higher than ``occupied_height`` above the table (the
ground truth asks whether geometry rises at the cell centre), a miss otherwise. A cell that
nothing landed in gets no evidence and relaxes towards unknown. Log-odds are clamped so a cell
that changes (an object picked away) flips back within a few frames. Points above
``max_height`` (the gripper passing through the view) are ignored; pixels next to a hole or a
depth jump (patch area above ``max_area_ratio`` times that of a table-parallel patch at the
same depth) count with the area of the table-parallel patch.

Two implementations: :func:`integrate_reference` walks the pixels one at a time with the
textbook transforms; :func:`integrate` precomputes one world ray per pixel (cached per
intrinsics/extrinsics), works on whole float32 images and bins with ``np.bincount``. The
harness gates one against the other (``edge_loop/verify/ops_occupancy.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics

OCC_UNKNOWN = -1
OCC_FREE = 0
OCC_OCCUPIED = 100


@dataclass(frozen=True)
class GridSpec:
    """A horizontal grid in ``world`` (nav_msgs/OccupancyGrid layout).

    Cell (row j, col i) covers x in [ox + i*res, ox + (i+1)*res), y in [oy + j*res,
    oy + (j+1)*res).
    """

    origin_x: float = -0.30
    origin_y: float = -0.225
    resolution: float = 0.005
    width: int = 120
    height: int = 90

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of the grid arrays."""
        return (self.height, self.width)

    def cell_of(self, x: float, y: float) -> tuple[int, int] | None:
        """(row, col) of world point (x, y), or None outside the grid."""
        i = math.floor((x - self.origin_x) / self.resolution)
        j = math.floor((y - self.origin_y) / self.resolution)
        if 0 <= i < self.width and 0 <= j < self.height:
            return j, i
        return None

    def cell_centers(self) -> tuple[np.ndarray, np.ndarray]:
        """(X, Y) world coordinates of every cell centre, each (rows, cols)."""
        xs = self.origin_x + (np.arange(self.width) + 0.5) * self.resolution
        ys = self.origin_y + (np.arange(self.height) + 0.5) * self.resolution
        return np.meshgrid(xs, ys)


DEFAULT_GRID = GridSpec()


@dataclass(frozen=True)
class OccupancyParams:
    """Evidence and fusion parameters (log-odds units)."""

    occupied_height: float = 0.015   # m above the table top: higher = occupied (contract)
    max_height: float = 0.30         # m: points above are ignored (gripper, arm)
    min_observed_area: float = 0.1  # cell areas of surface a cell needs to count as observed
    hit_area_fraction: float = 0.5   # share of that area above occupied_height -> hit
    max_area_ratio: float = 1.5      # patch larger than this x a table-parallel one: a jump
    l_hit: float = 0.85
    l_miss: float = -0.6
    l_min: float = -2.0
    l_max: float = 3.0
    unobserved_decay: float = 0.01   # fraction of the log-odds lost per frame without evidence
    # Decayed log-odds nearer 0 than this become exactly 0 (unknown): repeated decay would
    # otherwise end on a subnormal float that never reaches 0 and slows every later multiply.
    decay_floor: float = 1e-3
    occupied_above: float = 0.5      # log-odds > this -> 100
    free_below: float = -0.5         # log-odds < this -> 0
    output_hysteresis: float = 1.0   # a published cell keeps its value until this far past
    pixel_stride: int = 2            # use every n-th pixel in u and v


DEFAULT_PARAMS = OccupancyParams()


def new_logodds(spec: GridSpec = DEFAULT_GRID) -> np.ndarray:
    """An all-unknown log-odds grid."""
    return np.zeros(spec.shape, dtype=np.float32)


def _update(logodds: np.ndarray, total: np.ndarray, high: np.ndarray,
            params: OccupancyParams) -> np.ndarray:
    """Apply one frame's per-cell areas to the log-odds (shared by both implementations)."""
    observed = total >= params.min_observed_area
    hit = observed & (high >= params.hit_area_fraction * total)
    miss = observed & ~hit
    out = logodds.astype(np.float32, copy=True)
    unobserved = ~observed
    out[unobserved] *= np.float32(1.0 - params.unobserved_decay)
    out[unobserved & (np.abs(out) < np.float32(params.decay_floor))] = 0.0
    out[hit] += np.float32(params.l_hit)
    out[miss] += np.float32(params.l_miss)
    np.clip(out, params.l_min, params.l_max, out=out)
    return out


def _check(logodds: np.ndarray, depth_m: np.ndarray, intr: Intrinsics, spec: GridSpec) -> None:
    if logodds.shape != spec.shape:
        raise ValueError(f'log-odds shape {logodds.shape} does not match the grid {spec.shape}')
    if spec.width * spec.height >= 2 ** 24:
        raise ValueError(f'grid of {spec.width}x{spec.height} cells: at most 2**24 cells '
                         '(cell indices are computed in float32)')
    if depth_m.ndim != 2 or depth_m.shape != (intr.height, intr.width):
        raise ValueError(f'depth shape {depth_m.shape} does not match the intrinsics '
                         f'{intr.width}x{intr.height}')


def integrate_reference(logodds: np.ndarray, depth_m: np.ndarray, intr: Intrinsics,
                        ext: Extrinsics, spec: GridSpec = DEFAULT_GRID,
                        params: OccupancyParams = DEFAULT_PARAMS) -> np.ndarray:
    """Fuse one depth image into ``logodds``; returns a new grid.

    ``depth_m``: float metres (NaN/<=0 = no data) or uint16 millimetres (0 = no data).
    Plain per-pixel loop: deproject, rotate and translate to world, patch area, bin.
    """
    _check(logodds, depth_m, intr, spec)
    return _update(logodds, *cell_areas_reference(depth_m, intr, ext, spec, params), params)


def cell_areas_reference(depth_m: np.ndarray, intr: Intrinsics, ext: Extrinsics,
                         spec: GridSpec = DEFAULT_GRID, params: OccupancyParams = DEFAULT_PARAMS
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(total, high): float64 observed horizontal surface per cell and its part up high.

    The per-pixel loop of :func:`integrate_reference` without the log-odds update.
    """
    total = np.zeros(spec.shape, dtype=np.float64)
    high = np.zeros(spec.shape, dtype=np.float64)
    r = ext.rotation
    t = ext.translation
    step = params.pixel_stride
    scale = 0.001 if depth_m.dtype == np.uint16 else 1.0
    res = spec.resolution

    def world(v: int, u: int) -> tuple[float, float, float] | None:
        """World point of pixel (v, u) in grid units (x, y) and metres (z), None if no data."""
        z = float(depth_m[v, u]) * scale
        if not (z > 0.0) or not math.isfinite(z):
            return None
        xc = (u - intr.cx) / intr.fx * z
        yc = (v - intr.cy) / intr.fy * z
        xw = r[0, 0] * xc + r[0, 1] * yc + r[0, 2] * z + t[0]
        yw = r[1, 0] * xc + r[1, 1] * yc + r[1, 2] * z + t[1]
        zw = r[2, 0] * xc + r[2, 1] * yc + r[2, 2] * z + t[2]
        return (xw - spec.origin_x) / res, (yw - spec.origin_y) / res, zw

    def ray(v: int, u: int) -> np.ndarray:
        return r @ np.array([(u - intr.cx) / intr.fx, (v - intr.cy) / intr.fy, 1.0])

    def table_area_per_z2(v: int, u: int) -> float:
        """Patch area (cell units) on a table-parallel plane, divided by depth squared."""
        d0 = ray(v, u)
        if not d0[2] < 0:
            return 0.0
        z_t = -t[2] / d0[2]
        corners = [t + z_t * ray(vv, uu) for vv, uu in ((v, u), (v, u + step), (v + step, u))]
        (x0, y0, _), (x1, y1, _), (x2, y2, _) = corners
        a = abs((x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0)) / (res * res)
        return a / (z_t * z_t)

    for v in range(0, intr.height - step, step):
        for u in range(0, intr.width - step, step):
            p = world(v, u)
            if p is None or p[2] > params.max_height:
                continue
            right = world(v, u + step)
            down = world(v + step, u)
            z = float(depth_m[v, u]) * scale
            flat_area = table_area_per_z2(v, u) * z * z
            area = math.inf
            if right is not None and down is not None:
                area = abs((right[0] - p[0]) * (down[1] - p[1])
                           - (right[1] - p[1]) * (down[0] - p[0]))
            if not area <= params.max_area_ratio * flat_area:
                area = flat_area   # next to a hole or across a jump: a table-parallel patch
            i, j = math.floor(p[0]), math.floor(p[1])
            if not (0 <= i < spec.width and 0 <= j < spec.height):
                continue
            total[j, i] += area
            if p[2] > params.occupied_height:
                high[j, i] += area
    return total, high


def world_rays(intr: Intrinsics, ext: Extrinsics, spec: GridSpec, stride: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """(rays, nominal) in float64 for every ``stride``-th pixel of one camera and grid.

    ``rays`` (H', W', 3) are the pixels' world directions at unit optical depth (world point =
    t + z * ray); ``nominal`` (H'-1, W'-1) is each pixel patch's area on a table-parallel plane
    in grid cells, divided by depth^2: the fallback area next to holes and depth jumps. The numpy
    and the torch kernels both build their tables from this one function.
    """
    u = (np.arange(0, intr.width, stride, dtype=np.float64) - intr.cx) / intr.fx
    v = (np.arange(0, intr.height, stride, dtype=np.float64) - intr.cy) / intr.fy
    uu, vv = np.meshgrid(u, v)
    rays = np.stack([uu, vv, np.ones_like(uu)], axis=-1) @ ext.rotation.T  # world dirs
    res = spec.resolution
    tz = ext.translation[2]
    with np.errstate(divide='ignore', invalid='ignore'):
        z_t = np.where(rays[..., 2] < 0, -tz / rays[..., 2], np.nan)
    px = rays[..., 0] * z_t / res
    py = rays[..., 1] * z_t / res
    a = np.abs((px[:-1, 1:] - px[:-1, :-1]) * (py[1:, :-1] - py[:-1, :-1])
               - (py[:-1, 1:] - py[:-1, :-1]) * (px[1:, :-1] - px[:-1, :-1]))
    return rays, np.nan_to_num(a / z_t[:-1, :-1] ** 2, nan=0.0)


class _RayCache:
    """Per-pixel world rays scaled to grid units, for one (intrinsics, extrinsics, grid)."""

    def __init__(self, intr: Intrinsics, ext: Extrinsics, spec: GridSpec, stride: int) -> None:
        rays, nominal = world_rays(intr, ext, spec, stride)
        res = spec.resolution
        # grid coordinate = (world - origin) / res
        self.gx = (rays[..., 0] / res).astype(np.float32)
        self.gy = (rays[..., 1] / res).astype(np.float32)
        self.hz = rays[..., 2].astype(np.float32)
        self.gx0 = np.float32((ext.translation[0] - spec.origin_x) / res)
        self.gy0 = np.float32((ext.translation[1] - spec.origin_y) / res)
        self.hz0 = np.float32(ext.translation[2])
        self.nominal = nominal.astype(np.float32)


_cache: dict[tuple, _RayCache] = {}


def _rays(intr: Intrinsics, ext: Extrinsics, spec: GridSpec, stride: int) -> _RayCache:
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), spec, stride)
    rays = _cache.get(key)
    if rays is None:
        if len(_cache) > 8:
            _cache.clear()
        rays = _cache[key] = _RayCache(intr, ext, spec, stride)
    return rays


def integrate(logodds: np.ndarray, depth_m: np.ndarray, intr: Intrinsics, ext: Extrinsics,
              spec: GridSpec = DEFAULT_GRID,
              params: OccupancyParams = DEFAULT_PARAMS) -> np.ndarray:
    """Deployed :func:`integrate_reference`: cached world rays, float32 images, bincount.

    ``depth_m`` may be float metres (NaN/<=0 = no data) or uint16 millimetres (0 = no data).
    """
    _check(logodds, depth_m, intr, spec)
    return _update(logodds, *cell_areas(depth_m, intr, ext, spec, params), params)


def cell_areas(depth_m: np.ndarray, intr: Intrinsics, ext: Extrinsics,
               spec: GridSpec = DEFAULT_GRID, params: OccupancyParams = DEFAULT_PARAMS
               ) -> tuple[np.ndarray, np.ndarray]:
    """Deployed :func:`cell_areas_reference`: (total, high) float64 per cell."""
    _check(np.zeros(spec.shape, np.float32), depth_m, intr, spec)
    rays = _rays(intr, ext, spec, params.pixel_stride)
    s = params.pixel_stride
    d = depth_m[::s, ::s] if s > 1 else depth_m
    if d.dtype == np.uint16:
        z = d.astype(np.float32)
        z *= np.float32(0.001)
        np.copyto(z, np.float32(np.nan), where=d == 0)
    else:
        z = d.astype(np.float32)
        # NaN and <= 0: no data; NaN spreads into the areas
        np.copyto(z, np.float32(np.nan), where=~(z > 0))
    gx = rays.gx * z
    gx += rays.gx0
    gy = rays.gy * z
    gy += rays.gy0
    # Horizontal patch area (cell units) of each pixel but the last row/column.
    dxu = gx[:-1, 1:] - gx[:-1, :-1]
    dyu = gy[:-1, 1:] - gy[:-1, :-1]
    dxv = gx[1:, :-1] - gx[:-1, :-1]
    dyv = gy[1:, :-1] - gy[:-1, :-1]
    dxu *= dyv
    dyu *= dxv
    area = np.abs(dxu - dyu)
    zc = z[:-1, :-1]
    flat_area = rays.nominal * zc
    flat_area *= zc
    # Next to a hole (NaN) or across a jump: assume a table-parallel patch.
    fallback = ~(area <= np.float32(params.max_area_ratio) * flat_area)
    np.copyto(area, flat_area, where=fallback)   # masked copy: 2x a boolean index's speed
    hz = rays.hz[:-1, :-1] * zc
    hz += rays.hz0
    px = np.floor(gx[:-1, :-1])
    py = np.floor(gy[:-1, :-1])
    keep = hz <= params.max_height   # False for NaN (no data)
    keep &= (px >= 0) & (px < spec.width) & (py >= 0) & (py < spec.height)
    py *= np.float32(spec.width)
    py += px                     # the flat cell index, exact in float32 below 2**24 cells
    flat = py[keep].astype(np.intp)
    area = area[keep]
    n = spec.width * spec.height
    total = np.bincount(flat, weights=area, minlength=n).reshape(spec.shape)
    area *= hz[keep] > params.occupied_height   # zero weight below: the same sums
    high_area = np.bincount(flat, weights=area, minlength=n).reshape(spec.shape)
    return total, high_area


View = tuple[np.ndarray, Intrinsics, Extrinsics]   # (depth, intrinsics, extrinsics)


def integrate_views(logodds: np.ndarray, views: list[View], spec: GridSpec = DEFAULT_GRID,
                    params: OccupancyParams = DEFAULT_PARAMS, reference: bool = False
                    ) -> np.ndarray:
    """Fuse the depth images of several cameras taken at one time into ``logodds``.

    Each view is ``(depth, intrinsics, extrinsics)`` (a fixed second camera, the arm's wrist
    camera at its current pose). Their per-cell areas add up before the one log-odds update,
    so a cell seen by any view gets its evidence once per frame (seen as floor by one camera
    and as the top of an object by the other, the larger area decides, as within one view)
    and a cell no view sees relaxes towards unknown once. With one view this is
    :func:`integrate` (``reference``: :func:`integrate_reference`).
    """
    if not views:
        raise ValueError('integrate_views needs at least one (depth, intrinsics, extrinsics)')
    areas = cell_areas_reference if reference else cell_areas
    total = np.zeros(spec.shape, np.float64)
    high = np.zeros(spec.shape, np.float64)
    for depth, intr, ext in views:
        _check(logodds, depth, intr, spec)
        t, h = areas(depth, intr, ext, spec, params)
        total += t
        high += h
    return _update(logodds, total, high, params)


def to_occupancy_grid(logodds: np.ndarray, params: OccupancyParams = DEFAULT_PARAMS,
                      previous: np.ndarray | None = None) -> np.ndarray:
    """int8 grid: -1 unknown, 0 free, 100 occupied (nav_msgs/OccupancyGrid values).

    With the ``previous`` grid, a cell keeps its free/occupied value until its log-odds move
    ``output_hysteresis`` past the threshold (border cells then do not blink through unknown).
    """
    out = np.full(logodds.shape, OCC_UNKNOWN, dtype=np.int8)
    free = logodds < params.free_below
    occupied = logodds > params.occupied_above
    if previous is not None:
        band = params.output_hysteresis
        free |= (previous == OCC_FREE) & (logodds < params.free_below + band)
        occupied |= (previous == OCC_OCCUPIED) & (logodds > params.occupied_above - band)
    out[free] = OCC_FREE
    out[occupied] = OCC_OCCUPIED
    return out


def occupancy_iou(grid: np.ndarray, truth: np.ndarray, where: np.ndarray | None = None
                  ) -> float:
    """IoU of the occupied cells (unknown counts as not occupied); 1.0 when both are empty.

    ``where`` (bool, the grid's shape): only these cells count, e.g. the cells some camera
    sees (:func:`visible_cells`) inside the tray.
    """
    a = grid == OCC_OCCUPIED
    b = truth == OCC_OCCUPIED
    if where is not None:
        a, b = a & where, b & where
    union = int(np.count_nonzero(a | b))
    return 1.0 if union == 0 else int(np.count_nonzero(a & b)) / union


def visible_cells(top: np.ndarray, intr: Intrinsics, ext: Extrinsics,
                  spec: GridSpec = DEFAULT_GRID, step_cells: float = 0.5,
                  clearance: float = 0.002) -> np.ndarray:
    """(rows, cols) bool: the camera sees the surface at each cell's centre.

    ``top``: (rows, cols) height in m of the surface at every cell centre (0: the table; the
    simulator's or a box scene's truth). A cell is seen when the point (x, y, top) at its
    centre projects into the image in front of the camera and the segment from the camera
    centre to it stays above the surface (more than ``clearance``) at every sample, one each
    ``step_cells`` of horizontal travel, outside the cell itself: ray-cast over the height map.
    Outside the grid the surface is the table. The cells a grid can know anything about; what
    lies behind an object from the camera's point of view is not among them.
    """
    if top.shape != spec.shape:
        raise ValueError(f'top {top.shape} does not match the grid {spec.shape}')
    xs, ys = spec.cell_centers()
    target = np.stack([xs, ys, top.astype(np.float64)], -1).reshape(-1, 3)
    cam = (target - ext.translation) @ ext.rotation
    with np.errstate(divide='ignore', invalid='ignore'):
        u = intr.fx * cam[:, 0] / cam[:, 2] + intr.cx
        v = intr.fy * cam[:, 1] / cam[:, 2] + intr.cy
    seen = (cam[:, 2] > 0) & (u >= 0) & (u < intr.width) & (v >= 0) & (v < intr.height)
    o = ext.translation.astype(np.float64)
    d = target - o
    span = np.hypot(d[:, 0], d[:, 1]) / spec.resolution
    n = int(np.ceil(span.max() / step_cells)) + 1 if span.size else 1
    own = np.arange(target.shape[0])
    flat_top = top.reshape(-1).astype(np.float64)
    for t in np.linspace(0.0, 1.0, n + 1)[1:-1]:
        p = o + t * d
        i = np.floor((p[:, 0] - spec.origin_x) / spec.resolution).astype(np.int64)
        j = np.floor((p[:, 1] - spec.origin_y) / spec.resolution).astype(np.int64)
        inside = (i >= 0) & (i < spec.width) & (j >= 0) & (j < spec.height)
        cell = np.where(inside, j * spec.width + i, 0)
        ground = np.where(inside, flat_top[cell], 0.0)
        seen &= ~((p[:, 2] < ground - clearance) & (~inside | (cell != own)))
    return seen.reshape(spec.shape)


class OccupancyMapper:
    """Stateful wrapper the node uses: holds the log-odds grid between frames."""

    def __init__(self, spec: GridSpec = DEFAULT_GRID,
                 params: OccupancyParams = DEFAULT_PARAMS) -> None:
        self.spec = spec
        self.params = params
        self.reset()

    def reset(self) -> None:
        """Forget everything (all unknown)."""
        self.logodds = new_logodds(self.spec)
        self.grid: np.ndarray | None = None

    def update(self, depth: np.ndarray, intr: Intrinsics, ext: Extrinsics) -> np.ndarray:
        """Fuse one depth image (uint16 mm or float m) and return the int8 grid."""
        self.logodds = integrate(self.logodds, depth, intr, ext, self.spec, self.params)
        self.grid = to_occupancy_grid(self.logodds, self.params, self.grid)
        return self.grid

    def update_views(self, views: list[View]) -> np.ndarray:
        """Fuse one time's depth images of several cameras (:func:`integrate_views`)."""
        self.logodds = integrate_views(self.logodds, views, self.spec, self.params)
        self.grid = to_occupancy_grid(self.logodds, self.params, self.grid)
        return self.grid
