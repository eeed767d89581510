# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Grasp-candidate scoring in torch: the planner's candidate evaluation on any device.

:func:`score_candidates` evaluates every (closing direction, jaw offset) candidate of one
target at once, as the deployed numpy planner (:func:`edge_loop.kernels.grasp_planner.plan_grasp`
with a target) does: the band of target points between the pads, its contact width and top,
the closing height, both finger footprints against the obstacle points, and the quality. The
differences are in *how*: obstacles are every ``obstacle_stride``-th pixel with the
non-obstacles masked (no boolean indexing, so no host synchronisation before the end), and
every candidate is checked against every obstacle rather than the feasible ones only; the
masks make the result the same. One device-to-host transfer per target brings back the
candidates' numbers (24 x 3 of them by default), never an image.

``dtype`` is the precision of the target and obstacle coordinates relative to the target's
centroid (tens of centimetres at most); openings, heights and qualities are float64 on the
host as in the numpy planner.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from edge_loop.kernels.camera import Extrinsics, Intrinsics, warm_up_frame
from edge_loop.kernels.gpu.graphs import GraphCache, keep_alive_cache
from edge_loop.kernels.gpu.locator import world_rays_t
from edge_loop.kernels.gpu.occupancy import depth_metres
from edge_loop.kernels.gpu.transfer import CopyLedger, as_host_tensor
from edge_loop.kernels.grasp_planner import DEFAULT_GRASP_PARAMS, GraspParams
from edge_loop.kernels.grasp_types import PlanarGrasp
from edge_loop.kernels.object_locator import DetectedObject, check_inputs

_OFFSETS: dict[tuple, torch.Tensor] = keep_alive_cache({})


@torch.compiler.disable   # a host-side cache lookup (numpy keys): not traced
def offsets_on(offsets: tuple[float, ...], device: torch.device) -> torch.Tensor:
    """The jaw offsets on the device, uploaded once (not a host-to-device copy per target)."""
    key = (tuple(offsets), str(device))
    if key not in _OFFSETS:
        _OFFSETS[key] = torch.tensor(offsets, dtype=torch.float64, device=device)
    return _OFFSETS[key]


def obstacle_points(depth: torch.Tensor, intr: Intrinsics, ext: Extrinsics,
                    params: GraspParams = DEFAULT_GRASP_PARAMS) -> torch.Tensor:
    """(M, 3) float32 world points of every ``obstacle_stride``-th pixel.

    z is -inf where the pixel is no obstacle (not above ``obstacle_min_height``, or no depth).
    """
    rays, origin = world_rays_t(intr, ext, depth.device)
    return obstacle_points_on(depth, rays, origin, params)


def obstacle_points_on(depth: torch.Tensor, rays: torch.Tensor, origin: torch.Tensor,
                       params: GraspParams = DEFAULT_GRASP_PARAMS) -> torch.Tensor:
    """:func:`obstacle_points` with the camera's rays looked up (what ``torch.compile`` sees)."""
    s = params.obstacle_stride
    d = depth_metres(depth[::s, ::s])
    r = rays[:, ::s, ::s]
    pts = d.unsqueeze(0) * r + origin[:, None, None]
    obstacle = pts[2] > params.obstacle_min_height
    z = torch.where(obstacle, pts[2], torch.full_like(pts[2], -math.inf))
    x = torch.where(obstacle, pts[0], torch.zeros_like(pts[0]))
    y = torch.where(obstacle, pts[1], torch.zeros_like(pts[1]))
    return torch.stack([x.reshape(-1), y.reshape(-1), z.reshape(-1)], dim=1)


def candidate_table(pts: torch.Tensor, centroid: torch.Tensor, obstacles: torch.Tensor,
                    params: GraspParams = DEFAULT_GRASP_PARAMS,
                    dtype: torch.dtype = torch.float32,
                    offsets: torch.Tensor | None = None) -> torch.Tensor:
    """(5, K, O) float64: free, quality, s_mid, opening, tcp_z of every candidate.

    ``pts``: the (subsampled) target points, float32, rows of NaN allowed as padding (they
    fall in no band); ``centroid``: (2,) float64 of the whole target. No host synchronisation:
    capturable in a CUDA graph. ``offsets``: ``params.offsets`` on the device (looked up when
    not given; a compiled caller passes them).
    """
    p = params
    dev = pts.device
    yaws = torch.arange(p.n_angles, dtype=torch.float64, device=dev) * (math.pi / p.n_angles)
    offs = offsets_on(p.offsets, dev) if offsets is None else offsets
    cos, sin = torch.cos(yaws).to(dtype), torch.sin(yaws).to(dtype)
    c32 = centroid.to(torch.float32)
    rel = (pts[:, :2] - c32).to(dtype)
    s = rel[:, :1] * cos + rel[:, 1:] * sin                                 # (N, K)
    t = rel[:, 1:] * cos - rel[:, :1] * sin
    band = (t[:, :, None] - offs.to(dtype)).abs() <= p.finger_width / 2     # (N, K, O)
    n_band = band.sum(0)
    big = 1e4   # metres: beyond any coordinate, inside half precision's range
    s3 = s[:, :, None]
    s_min = torch.where(band, s3, torch.full_like(s3, big)).amin(0).to(torch.float64)
    s_max = torch.where(band, s3, torch.full_like(s3, -big)).amax(0).to(torch.float64)
    z3 = pts[:, 2, None, None]
    z_top = torch.where(band, z3, torch.full_like(z3, -big)).amax(0).to(torch.float64)
    opening = s_max - s_min + 2 * p.clearance
    feasible = (n_band >= p.min_band_points) & (opening <= p.max_opening)
    s_mid = (s_min + s_max) / 2
    tcp_z = torch.clamp(z_top - p.grasp_depth,
                        min=p.floor_height + p.pad_half_height + p.table_margin)
    tip_z = (tcp_z - p.pad_half_height).to(torch.float32)
    reach = p.max_opening / 2 + p.finger_thickness + p.collision_margin + max(
        abs(o) for o in p.offsets) + p.finger_width
    rel_o32 = obstacles[:, :2] - c32
    near = (rel_o32 * rel_o32).sum(1) <= np.float32((reach + 0.05) ** 2)
    rel_o = rel_o32.to(dtype)
    so = rel_o[:, :1] * cos + rel_o[:, 1:] * sin                            # (M, K)
    to = rel_o[:, 1:] * cos - rel_o[:, :1] * sin
    across = (to[:, :, None] - offs.to(dtype)).abs() <= (p.finger_width / 2
                                                         + p.collision_margin)
    lo = (opening / 2 - p.collision_margin).to(dtype)
    hi = (opening / 2 + p.finger_thickness + p.collision_margin).to(dtype)
    r = (so[:, :, None] - s_mid.to(dtype)).abs()
    hits = (across & (r >= lo) & (r <= hi) & (obstacles[:, 2, None, None] > tip_z)
            & near[:, None, None])
    free = feasible & (hits.sum(0) < p.max_collision_points)
    off_centre = torch.hypot(s_mid, offs)
    quality = 1.0 - opening / p.max_opening - p.centre_weight * off_centre / p.max_opening
    return torch.stack([free.to(torch.float64), quality, s_mid, opening, tcp_z])


def grasps_from_table(table: np.ndarray, centroid: np.ndarray,
                      params: GraspParams = DEFAULT_GRASP_PARAMS) -> list[PlanarGrasp]:
    """Ranked grasps (best first) from :func:`candidate_table`'s numbers, on the host."""
    p = params
    free_h, quality_h, s_mid_h, opening_h, tcp_h = table
    k_f, o_f = np.nonzero(free_h > 0)
    q = quality_h[k_f, o_f]
    yaws_h = np.arange(p.n_angles) * (np.pi / p.n_angles)
    offs_h = np.asarray(p.offsets, dtype=np.float64)
    out = []
    for i in np.argsort(-q, kind='stable')[:p.max_candidates]:
        k, o = k_f[i], o_f[i]
        d = np.array([np.cos(yaws_h[k]), np.sin(yaws_h[k])])
        e = np.array([-np.sin(yaws_h[k]), np.cos(yaws_h[k])])
        centre_xy = centroid + d * s_mid_h[k, o] + e * offs_h[o]
        out.append(PlanarGrasp(center=[centre_xy[0], centre_xy[1], tcp_h[k, o]],
                               yaw=float(yaws_h[k]), opening=float(opening_h[k, o]),
                               finger_width=p.finger_width, quality=float(q[i])))
    return out


def score_candidates(target: torch.Tensor, obstacles: torch.Tensor,
                     params: GraspParams = DEFAULT_GRASP_PARAMS,
                     dtype: torch.dtype = torch.float32) -> list[PlanarGrasp]:
    """Ranked feasible grasps (best first) of one target's (N, 3) float32 world points."""
    p = params
    n_all = target.shape[0]
    if n_all == 0:
        return []
    centroid = target[:, :2].to(torch.float64).mean(0)
    stride = -(-n_all // p.max_target_points)
    table = candidate_table(target[::stride], centroid, obstacles, p, dtype)
    # one transfer: the candidates' numbers and the centroid
    host = torch.cat([table.reshape(-1), centroid]).cpu().numpy()
    return grasps_from_table(host[:-2].reshape(table.shape), host[-2:], p)


def target_block(points: np.ndarray, params: GraspParams = DEFAULT_GRASP_PARAMS
                 ) -> tuple[np.ndarray, np.ndarray]:
    """((max_target_points, 3) float32 padded with NaN, (2,) float64 centroid) on the host.

    The fixed shape lets one CUDA graph score every target; the subsampling (every k-th
    point of a large segment) and the centroid are the planner's.
    """
    pts = np.asarray(points, np.float32)
    centroid = pts[:, :2].mean(axis=0, dtype=np.float64)
    sub = pts[::-(-len(pts) // params.max_target_points)]
    block = np.full((params.max_target_points, 3), np.nan, np.float32)
    block[:len(sub)] = sub
    return block, centroid


class TargetScorer:
    """:func:`plan_grasp_on`'s work in the two steps a node does them in.

    The frame's depth goes to the device when the frame arrives (:meth:`depth_to_device`: one
    host-to-device transfer, counted in ``ledger``), the locator's targets come later
    (:meth:`plan`: one graph replay and one small device-to-host transfer of the candidates'
    numbers per target). ``plan_grasp_on`` is these two steps back to back, so the op the
    verification gates (``grasp_planner.score.<device>.<dtype>``) is the code a node runs.
    """

    def __init__(self, device: str | torch.device, dtype: torch.dtype = torch.float32,
                 compile_mode: str | None = None, ledger: CopyLedger | None = None) -> None:
        self.device = torch.device(device)
        self.dtype = dtype
        self.ledger = ledger
        self._graphs = GraphCache(self.device, compile_mode=compile_mode)

    def depth_to_device(self, depth: np.ndarray) -> torch.Tensor:
        """The frame's depth (16-bit mm or float m, numpy) as a tensor on the device."""
        host = as_host_tensor(depth)
        if self.ledger is not None and self.device.type != 'cpu':
            self.ledger.note('h2d', host.numel() * host.element_size())
        return host.to(self.device)

    def plan(self, depth: torch.Tensor, intrinsics: Intrinsics, extrinsics: Extrinsics,
             points: np.ndarray, params: GraspParams | None = None) -> list[PlanarGrasp]:
        """Ranked grasps (best first) of one target's (N, 3) world points; [] for none."""
        p = params or DEFAULT_GRASP_PARAMS
        if len(points) == 0:
            return []
        block, centroid = target_block(points, p)
        dev, dtype = self.device, self.dtype
        if tuple(depth.shape) != (intrinsics.height, intrinsics.width):
            raise ValueError(f'depth shape {tuple(depth.shape)} does not match the intrinsics '
                             f'{intrinsics.width}x{intrinsics.height}')
        # The camera's rays and origin are inputs of the graph (copied in when the camera
        # changes), so one graph per frame size serves any camera: a warm-up captures it.
        rays, origin = world_rays_t(intrinsics, extrinsics, dev)
        key = (p, dtype)

        def make():
            offs = offsets_on(p.offsets, dev)   # looked up once: the graph sees tensors only

            def step(d, pts, c, rays_t, origin_t):
                obstacles = obstacle_points_on(d, rays_t, origin_t, p)
                return candidate_table(pts, c, obstacles, p, dtype, offs)
            return step

        table = self._graphs.run(key, make, depth, torch.from_numpy(block),
                                 torch.from_numpy(centroid), rays, origin).cpu().numpy()
        if self.ledger is not None and dev.type != 'cpu':
            self.ledger.note('d2h', table.nbytes, 'grasp table')
        return grasps_from_table(table, centroid, p)


    def warm_up(self, intrinsics: Intrinsics, extrinsics: Extrinsics,
                params: GraspParams | None = None) -> None:
        """Score one synthetic target on a frame of ``intrinsics``' size (a node's configure).

        Pays the one-time costs (device context, kernel loading, graph capture) before the
        first real frame; any camera of that size then replays the same graph.
        """
        ledger, self.ledger = self.ledger, None
        try:
            depth = warm_up_frame(intrinsics)[1]
            points = np.array([[0.0, 0.0, 0.02], [0.01, 0.0, 0.02], [0.0, 0.01, 0.02]],
                              np.float32)
            self.plan(self.depth_to_device(depth), intrinsics, extrinsics, points, params)
        finally:
            self.ledger = ledger


def plan_grasp_on(device: str | torch.device, dtype: torch.dtype = torch.float32,
                  compile_mode: str | None = None):
    """Grasps for a given target on ``device``, numpy in and out (the handoff included).

    The signature of ``plan_grasp(depth, intr, ext, target, params)``. ``compile_mode``: see
    :class:`~edge_loop.kernels.gpu.graphs.GraphCache`.
    """
    dev = torch.device(device)
    scorer = TargetScorer(dev, dtype, compile_mode)

    def plan(depth_m: np.ndarray, intrinsics: Intrinsics, extrinsics: Extrinsics,
             target: DetectedObject | None = None,
             params: GraspParams | None = None) -> list[PlanarGrasp]:
        if target is None:
            raise ValueError('the GPU scorer plans for a given target (the locator finds it)')
        check_inputs(None, depth_m, intrinsics)
        return scorer.plan(scorer.depth_to_device(depth_m), intrinsics, extrinsics,
                           np.asarray(target.points, np.float32), params)

    plan.__name__ = (f'plan_grasp_torch_{dev.type}_{str(dtype).removeprefix("torch.")}'
                     + ('_compiled' if compile_mode else ''))
    return plan
