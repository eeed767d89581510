# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Per-frame geometry: world rays, the height scene (shared with the grasp planner), reference.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.objects import depth_in_metres
from edge_loop.kernels.object_locator.params import LocatorParams

# --- deployed ---------------------------------------------------------------------------------

_RAY_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def world_rays(intr: Intrinsics, ext: Extrinsics) -> tuple[np.ndarray, np.ndarray]:
    """Cached (H*W, 3) float32 world direction per unit depth and (3,) float32 origin."""
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes())
    hit = _RAY_CACHE.get(key)
    if hit is not None:
        return hit
    u = (np.arange(intr.width, dtype=np.float64) - intr.cx) / intr.fx
    v = (np.arange(intr.height, dtype=np.float64) - intr.cy) / intr.fy
    uu, vv = np.meshgrid(u, v)
    cam = np.stack([uu, vv, np.ones_like(uu)], axis=-1).reshape(-1, 3)
    rays = np.ascontiguousarray((cam @ ext.rotation.T).astype(np.float32))
    origin = ext.translation.astype(np.float32)
    if len(_RAY_CACHE) > 8:
        _RAY_CACHE.clear()
    _RAY_CACHE[key] = (rays, origin)
    return rays, origin


@dataclass
class HeightScene:
    """Per-frame geometry shared by the locator and the grasp planner (deployed path)."""

    depth: np.ndarray     # (H*W,) float32 metres, NaN = none
    height: np.ndarray    # (H, W) float32 world z, NaN = none
    rays: np.ndarray      # (H*W, 3)
    origin: np.ndarray    # (3,)

    def points(self, flat_idx: np.ndarray) -> np.ndarray:
        """(N, 3) float32 world points of the given flat pixel indices."""
        return self.depth[flat_idx, None] * self.rays[flat_idx] + self.origin


def height_scene(depth_m: np.ndarray, intr: Intrinsics, ext: Extrinsics) -> HeightScene:
    """Back-project only what is needed: world z for every pixel."""
    d = depth_in_metres(depth_m).reshape(-1)
    rays, origin = world_rays(intr, ext)
    height = (d * rays[:, 2] + origin[2]).reshape(intr.height, intr.width)
    return HeightScene(d, height, rays, origin)


# --- reference --------------------------------------------------------------------------------

def world_points_reference(depth_m: np.ndarray, intr: Intrinsics,
                           ext: Extrinsics) -> np.ndarray:
    """(H, W, 3) float64 world points: p_world = R @ (z * K^-1 [u, v, 1]) + t."""
    h, w = depth_m.shape
    vv, uu = np.mgrid[0:h, 0:w].astype(np.float64)
    z = depth_m.astype(np.float64)
    cam = np.stack([(uu - intr.cx) / intr.fx * z, (vv - intr.cy) / intr.fy * z, z], axis=-1)
    return cam @ ext.rotation.T + ext.translation


def _foreground(world: np.ndarray, p: LocatorParams) -> np.ndarray:
    x, y, z = world[..., 0], world[..., 1], world[..., 2]
    with np.errstate(invalid='ignore'):
        return ((z > p.min_height) & (z < p.max_height) & (x > p.roi_x[0]) & (x < p.roi_x[1])
                & (y > p.roi_y[0]) & (y < p.roi_y[1]))
