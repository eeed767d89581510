# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Occupancy integration in torch: :func:`edge_loop.kernels.occupancy.integrate` on any device.

The same method as the numpy kernel (one cached world ray per pixel, horizontal patch area,
a table-parallel patch next to holes and jumps, per-cell area sums, log-odds update), written
against ``torch.device`` only, so it runs on the CPU, on CUDA and on ROCm/HIP alike.

Two differences in *how*, none in *what*:

- no boolean indexing: pixels that do not count get weight 0 and cell 0, so the whole update is
  a fixed-shape graph with no host synchronisation (boolean indexing makes a GPU wait for the
  count before it can size the result);
- the per-cell sums are accumulated in float64 (``index_add_``), as ``np.bincount`` does: a
  float32 atomic sum would also depend on the order the GPU threads arrive in.

``dtype`` is the precision of the per-pixel geometry (world point in grid units, patch area).
The ray table and the depth are rounded to it; the per-cell sums stay float64 and the log-odds
float32 (``edge_loop/verify/ops_gpu_occupancy.py`` says what each dtype costs in cells).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from edge_loop.kernels.camera import Extrinsics, Intrinsics, warm_up_frame
from edge_loop.kernels.gpu.graphs import GraphCache, keep_alive_cache
from edge_loop.kernels.gpu.transfer import CopyLedger, as_host_tensor
from edge_loop.kernels.occupancy import (
    DEFAULT_GRID,
    DEFAULT_PARAMS,
    OCC_FREE,
    OCC_OCCUPIED,
    OCC_UNKNOWN,
    GridSpec,
    OccupancyParams,
    world_rays,
)


@dataclass(frozen=True)
class RayTable:
    """Per-pixel world rays in grid units for one camera, grid and stride, on one device."""

    gx: torch.Tensor        # (h, w) world x per metre of depth, in cells
    gy: torch.Tensor
    hz: torch.Tensor        # world z per metre of depth (m/m)
    nominal: torch.Tensor   # (h-1, w-1) table-parallel patch area / depth^2 (cells)
    gx0: float
    gy0: float
    hz0: float


_TABLES: dict[tuple, RayTable] = keep_alive_cache({})


@torch.compiler.disable   # a host-side cache lookup (numpy keys): not traced
def ray_table(intr: Intrinsics, ext: Extrinsics, spec: GridSpec, stride: int,
              device: torch.device, dtype: torch.dtype = torch.float32) -> RayTable:
    """The cached :class:`RayTable` (built in float64 on the host, uploaded once)."""
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), spec, stride,
           str(device), dtype)
    table = _TABLES.get(key)
    if table is not None:
        return table
    rays, nominal = world_rays(intr, ext, spec, stride)
    res = spec.resolution

    def up(x: np.ndarray) -> torch.Tensor:
        # float32 first: the numpy kernel's table is float32, the same rounding
        return torch.from_numpy(x.astype(np.float32)).to(device=device, dtype=dtype)

    table = RayTable(up(rays[..., 0] / res), up(rays[..., 1] / res), up(rays[..., 2]),
                     up(nominal),
                     float(np.float32((ext.translation[0] - spec.origin_x) / res)),
                     float(np.float32((ext.translation[1] - spec.origin_y) / res)),
                     float(np.float32(ext.translation[2])))
    if len(_TABLES) > 16:
        _TABLES.clear()
    _TABLES[key] = table
    return table


def depth_metres(depth: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Metres in ``dtype`` with NaN for no data, from 16-bit millimetres or float metres.

    16-bit depth may come as ``torch.uint16`` or as ``torch.int16`` (the same bytes: torch's
    uint16 support is thin, so the handoff ships the raw bits as int16).
    """
    if depth.dtype in (torch.int16, torch.uint16):
        mm = depth.view(torch.int16).to(torch.int32) & 0xFFFF
        z = mm.to(torch.float32) * 0.001
        z = torch.where(mm == 0, torch.full_like(z, float('nan')), z)
        return z.to(dtype)
    if not depth.dtype.is_floating_point:
        raise ValueError(f'depth must be 16-bit mm or float m, got {depth.dtype}')
    z = depth.to(torch.float32)
    z = torch.where(z > 0, z, torch.full_like(z, float('nan')))
    return z.to(dtype)


def cell_areas(depth: torch.Tensor, intr: Intrinsics, ext: Extrinsics,
               spec: GridSpec = DEFAULT_GRID, params: OccupancyParams = DEFAULT_PARAMS,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(total, high): float64 (rows, cols) observed surface per cell and its part up high.

    "Up high" is above ``occupied_height``; ``depth`` is a tensor on the device the work runs on.
    """
    rays = checked_rays(tuple(depth.shape), intr, ext, spec, params, depth.device, dtype)
    return cell_areas_on(depth, rays, spec, params)


def checked_rays(depth_shape: tuple[int, ...], intr: Intrinsics, ext: Extrinsics,
                 spec: GridSpec, params: OccupancyParams, device: torch.device,
                 dtype: torch.dtype) -> RayTable:
    """The input checks of :func:`cell_areas`, then the camera's :class:`RayTable`."""
    if len(depth_shape) != 2 or tuple(depth_shape) != (intr.height, intr.width):
        raise ValueError(f'depth shape {tuple(depth_shape)} does not match the intrinsics '
                         f'{intr.width}x{intr.height}')
    if spec.width * spec.height >= 2 ** 24:
        raise ValueError(f'grid of {spec.width}x{spec.height} cells: at most 2**24 cells')
    return ray_table(intr, ext, spec, params.pixel_stride, device, dtype)


def cell_areas_on(depth: torch.Tensor, rays: RayTable, spec: GridSpec = DEFAULT_GRID,
                  params: OccupancyParams = DEFAULT_PARAMS) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cell_areas` with the camera's :class:`RayTable` already looked up.

    Tensors, numbers and frozen parameter records only: what ``torch.compile`` traces (the
    table's cache key holds numpy arrays, which Dynamo would turn into guarded tensors).
    """
    return cell_areas_from(depth, (rays.gx, rays.gy, rays.hz, rays.nominal),
                           (rays.gx0, rays.gy0, rays.hz0), spec, params)


def cell_areas_from(depth: torch.Tensor, tables: tuple[torch.Tensor, ...],
                    offsets: tuple[float, float, float], spec: GridSpec = DEFAULT_GRID,
                    params: OccupancyParams = DEFAULT_PARAMS
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cell_areas_on` with the table as tensors and numbers.

    ``tables`` is ``(gx, gy, hz, nominal)``, ``offsets`` is ``(gx0, gy0, hz0)``: the form in
    which a graph takes the camera's table as inputs.
    """
    s = params.pixel_stride
    gx_t, gy_t, hz_t, nominal_t = tables
    gx0, gy0, hz0 = offsets
    dtype = gx_t.dtype
    # Read in ``dtype``, compute in float32: the patch areas are differences of coordinates
    # near 100 cells, which half precision (11-bit mantissa) would cancel to a few bits.
    z = depth_metres(depth[::s, ::s] if s > 1 else depth, dtype).to(torch.float32)
    gx_r, gy_r, hz_r, nominal = (t.to(torch.float32) for t in tables)
    gx = gx_r * z + gx0
    gy = gy_r * z + gy0
    dxu = gx[:-1, 1:] - gx[:-1, :-1]
    dyu = gy[:-1, 1:] - gy[:-1, :-1]
    dxv = gx[1:, :-1] - gx[:-1, :-1]
    dyv = gy[1:, :-1] - gy[:-1, :-1]
    area = (dxu * dyv - dyu * dxv).abs()
    zc = z[:-1, :-1]
    flat_area = nominal * zc * zc
    # Next to a hole (NaN) or across a jump: assume a table-parallel patch.
    area = torch.where(area <= params.max_area_ratio * flat_area, area, flat_area)
    hz = hz_r[:-1, :-1] * zc + hz0
    px = torch.floor(gx[:-1, :-1])
    py = torch.floor(gy[:-1, :-1])
    keep = (hz <= params.max_height) & (px >= 0) & (px < spec.width) & (py >= 0) & (
        py < spec.height)
    flat = torch.where(keep, py * spec.width + px, torch.zeros_like(px)).to(torch.int64)
    weight = torch.where(keep, area, torch.zeros_like(area)).to(torch.float64)
    high_w = torch.where(hz > params.occupied_height, weight, torch.zeros_like(weight))
    n = spec.width * spec.height
    total = torch.zeros(n, dtype=torch.float64, device=depth.device)
    high = torch.zeros(n, dtype=torch.float64, device=depth.device)
    total.index_add_(0, flat.reshape(-1), weight.reshape(-1))
    high.index_add_(0, flat.reshape(-1), high_w.reshape(-1))
    return total.reshape(spec.shape), high.reshape(spec.shape)


def update_logodds(logodds: torch.Tensor, total: torch.Tensor, high: torch.Tensor,
                   params: OccupancyParams = DEFAULT_PARAMS) -> torch.Tensor:
    """One frame's evidence applied to float32 ``logodds`` (new tensor), as the numpy kernel."""
    observed = total >= params.min_observed_area
    hit = observed & (high >= params.hit_area_fraction * total)
    miss = observed & ~hit
    out = logodds.to(torch.float32)
    decayed = out * np.float32(1.0 - params.unobserved_decay)
    decayed = torch.where(decayed.abs() < np.float32(params.decay_floor),
                          torch.zeros_like(decayed), decayed)
    out = torch.where(observed, out, decayed)
    out = out + torch.where(hit, np.float32(params.l_hit), 0.0).to(torch.float32)
    out = out + torch.where(miss, np.float32(params.l_miss), 0.0).to(torch.float32)
    return out.clamp(params.l_min, params.l_max)


def integrate_torch(logodds: torch.Tensor, depth: torch.Tensor, intr: Intrinsics,
                    ext: Extrinsics, spec: GridSpec = DEFAULT_GRID,
                    params: OccupancyParams = DEFAULT_PARAMS,
                    dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Fuse one depth image (tensor, on the device the work runs on) into ``logodds``."""
    if tuple(logodds.shape) != spec.shape:
        raise ValueError(f'log-odds shape {tuple(logodds.shape)} does not match the grid '
                         f'{spec.shape}')
    total, high = cell_areas(depth, intr, ext, spec, params, dtype)
    return update_logodds(logodds, total, high, params)


def integrate_views_torch(logodds: torch.Tensor,
                          views: list[tuple[torch.Tensor, Intrinsics, Extrinsics]],
                          spec: GridSpec = DEFAULT_GRID, params: OccupancyParams = DEFAULT_PARAMS,
                          dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``occupancy.integrate_views`` in torch: the views' cell areas summed, one update."""
    if not views:
        raise ValueError('integrate_views_torch needs at least one (depth, intrinsics, extrinsics)')
    if tuple(logodds.shape) != spec.shape:
        raise ValueError(f'log-odds shape {tuple(logodds.shape)} does not match the grid '
                         f'{spec.shape}')
    total = high = None
    for depth, intr, ext in views:
        t, h = cell_areas(depth, intr, ext, spec, params, dtype)
        total, high = (t, h) if total is None else (total + t, high + h)
    return update_logodds(logodds, total, high, params)


def occupancy_grid_torch(logodds: torch.Tensor, params: OccupancyParams = DEFAULT_PARAMS,
                         previous: torch.Tensor | None = None) -> torch.Tensor:
    """int8 grid (-1/0/100) with the output hysteresis, as ``occupancy.to_occupancy_grid``."""
    free = logodds < params.free_below
    occupied = logodds > params.occupied_above
    if previous is not None:
        band = params.output_hysteresis
        free = free | ((previous == OCC_FREE) & (logodds < params.free_below + band))
        occupied = occupied | ((previous == OCC_OCCUPIED)
                               & (logodds > params.occupied_above - band))
    # Python scalars, not torch.tensor(..., device=...): that would be a host-to-device copy
    # per frame, which the copy audit counts.
    out = torch.full(logodds.shape, OCC_UNKNOWN, dtype=torch.int8, device=logodds.device)
    out = torch.where(free, OCC_FREE, out)
    return torch.where(occupied, OCC_OCCUPIED, out)


def integrate_on(device: str | torch.device, dtype: torch.dtype = torch.float32,
                 compile_mode: str | None = None):
    """:func:`integrate_torch` on ``device``, numpy in and out (the handoff included).

    The signature of ``occupancy.integrate``, for the verification harness and the bench.
    ``compile_mode``: see :class:`~edge_loop.kernels.gpu.graphs.GraphCache`.
    """
    dev = torch.device(device)
    graphs = GraphCache(dev, compile_mode=compile_mode)

    def integrate(logodds: np.ndarray, depth_m: np.ndarray, intr: Intrinsics, ext: Extrinsics,
                  spec: GridSpec = DEFAULT_GRID,
                  params: OccupancyParams = DEFAULT_PARAMS) -> np.ndarray:
        depth = np.asarray(depth_m)
        if depth.ndim != 2 or depth.shape != (intr.height, intr.width):
            raise ValueError(f'depth shape {depth.shape} does not match the intrinsics '
                             f'{intr.width}x{intr.height}')
        if depth.dtype not in (np.uint16, np.float32):
            depth = depth.astype(np.float32)
        d = as_host_tensor(depth)
        lo = torch.from_numpy(np.ascontiguousarray(logodds, dtype=np.float32))
        if tuple(lo.shape) != spec.shape:
            raise ValueError(f'log-odds shape {tuple(lo.shape)} does not match the grid '
                             f'{spec.shape}')
        key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), spec, params, dtype)

        def make():
            # the ray table looked up here, once: the captured (or compiled) function sees
            # tensors only
            rays = checked_rays(depth.shape, intr, ext, spec, params, dev, dtype)
            return lambda lo_t, d_t: update_logodds(lo_t, *cell_areas_on(d_t, rays, spec, params),
                                                    params)

        return graphs.run(key, make, lo, d).cpu().numpy()

    integrate.__name__ = (f'integrate_torch_{dev.type}_{str(dtype).removeprefix("torch.")}'
                          + ('_compiled' if compile_mode else ''))
    return integrate


class TorchOccupancyMapper:
    """The node's stateful wrapper with the grid kept on ``device`` between frames.

    Same interface as ``occupancy.OccupancyMapper``: :meth:`update` takes a numpy depth image
    (the shared-memory view) and returns the int8 grid as numpy; per frame that is one
    host-to-device copy of the depth and one device-to-host copy of the 10.8 kB grid.
    """

    def __init__(self, spec: GridSpec = DEFAULT_GRID, params: OccupancyParams = DEFAULT_PARAMS,
                 device: str | torch.device = 'cpu', dtype: torch.dtype = torch.float32,
                 compile_mode: str | None = None, ledger: CopyLedger | None = None) -> None:
        self.spec = spec
        self.params = params
        self.device = torch.device(device)
        self.ledger = ledger   # counts update()'s transfers (a node's copy audit)
        self.dtype = dtype
        self._graphs = GraphCache(self.device, compile_mode=compile_mode)
        self.reset()

    def reset(self) -> None:
        """Forget everything (all unknown)."""
        self.logodds_t = torch.zeros(self.spec.shape, dtype=torch.float32, device=self.device)
        self.grid_t: torch.Tensor | None = None
        self.grid: np.ndarray | None = None

    @property
    def logodds(self) -> np.ndarray:
        """The log-odds grid on the host (a copy; for tests and reports)."""
        return self.logodds_t.cpu().numpy()

    def update_tensor(self, depth: torch.Tensor, intr: Intrinsics,
                      ext: Extrinsics) -> torch.Tensor:
        """Fuse a depth tensor (on the device, or a host tensor the graph copies in).

        Returns the int8 grid on the device. On CUDA the whole update is one graph replay.
        """
        spec, params, dtype = self.spec, self.params, self.dtype
        rays = checked_rays(tuple(depth.shape), intr, ext, spec, params, self.device, dtype)
        # The camera's ray table is an input of the graph, not captured in it: one graph per
        # frame size serves any intrinsics (a warm-up at configure captures it before the
        # first frame; the real camera's table is copied into it once). The offsets depend on
        # the extrinsics only.
        key = (rays.gx0, rays.gy0, rays.hz0, spec, params, dtype)

        def make():
            offsets = (rays.gx0, rays.gy0, rays.hz0)

            def step(lo, d, prev, gx, gy, hz, nominal):
                areas = cell_areas_from(d, (gx, gy, hz, nominal), offsets, spec, params)
                new = update_logodds(lo, *areas, params)
                return new, occupancy_grid_torch(new, params, prev)
            return step

        prev = self.grid_t if self.grid_t is not None else torch.full(
            spec.shape, OCC_UNKNOWN, dtype=torch.int8, device=self.device)
        new, grid = self._graphs.run(key, make, self.logodds_t, depth, prev, rays.gx, rays.gy,
                                     rays.hz, rays.nominal)
        # the graph's outputs are its static buffers: keep copies as the state
        self.logodds_t = new.clone()
        self.grid_t = grid.clone()
        return self.grid_t

    def warm_up(self, intr: Intrinsics, ext: Extrinsics) -> None:
        """Run one synthetic frame of ``intr``'s size, then forget it (a node's configure).

        Pays the one-time costs (device context, kernel loading, graph capture) before the
        first real frame; any camera of that size then replays the same graph.
        """
        ledger, self.ledger = self.ledger, None
        try:
            self.update(warm_up_frame(intr)[1], intr, ext)
        finally:
            self.ledger = ledger
            self.reset()

    def update(self, depth: np.ndarray, intr: Intrinsics, ext: Extrinsics) -> np.ndarray:
        """Fuse one depth image (uint16 mm or float m, numpy) and return the int8 grid."""
        host = as_host_tensor(depth)
        self.grid = self.update_tensor(host, intr, ext).cpu().numpy()
        if self.ledger is not None and self.device.type != 'cpu':
            self.ledger.note('h2d', host.numel() * host.element_size())
            self.ledger.note('d2h', self.grid.nbytes, 'grid')
        return self.grid

    def update_views(self, views: list[tuple[np.ndarray, Intrinsics, Extrinsics]]
                     ) -> np.ndarray:
        """Fuse one time's depth images of several cameras (``integrate_views``), no graph."""
        on = [(as_host_tensor(d).to(self.device), intr, ext) for d, intr, ext in views]
        self.logodds_t = integrate_views_torch(self.logodds_t, on, self.spec, self.params,
                                               self.dtype)
        self.grid_t = occupancy_grid_torch(self.logodds_t, self.params, self.grid_t)
        self.grid = self.grid_t.cpu().numpy()
        return self.grid
