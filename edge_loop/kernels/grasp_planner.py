# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Analytic top-down parallel-jaw grasp from aligned depth.

For the target object's segment (the locator's result on the same frame: its objects, or its
centroids and label image in :func:`plan_grasp_segmented`; the locator runs here only when
neither is given) the planner samples ``n_angles`` closing directions over 180 degrees and
``offsets`` of the jaw across the closing direction. For each candidate:

- the *band* is the part of the object between the finger pads (within half a pad width of
  the jaw line); its extent along the closing direction is the contact width, its middle
  becomes the grasp centre; opening = contact width + 2 x ``clearance`` (<= ``max_opening``);
- the closing height (TCP = middle of the pads) is ``grasp_depth`` below the band's highest
  point, clamped so the fingertips stay ``table_margin`` above the table;
- both finger footprints (pad width x finger thickness, just outside the opening, plus
  ``collision_margin``) must be free: fewer than ``max_collision_points`` depth points of any
  geometry (other objects, tray walls) rise above the fingertips there.

Quality (higher is better) prefers a narrow opening (more room for the fingers, less chance
of a slipping contact) and a jaw line through the centroid:
``quality = 1 - opening / max_opening - centre_weight * |centre - centroid| / max_opening``.
Candidates are returned best first; when a target has no feasible grasp the next object in
:func:`~edge_loop.kernels.object_locator.rank_targets` order is tried.

:func:`plan_grasp_reference` loops over candidates with per-candidate numpy in float64 on the
reference locator's output; :func:`plan_grasp` evaluates all candidates at once in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.grasp_types import MAX_OPENING, PlanarGrasp
from edge_loop.kernels.object_locator import (
    DetectedObject,
    HeightScene,
    LocatorParams,
    check_inputs,
    depth_in_metres,
    height_scene,
    locate_objects,
    locate_objects_reference,
    rank_positions,
    rank_targets,
    world_points_reference,
)

# The locator's min_height is the tray floor plus this margin (5 sigma of the depth noise at
# 0.75 m): the workspace limit a user sets, from which the planner's floor and obstacle heights
# follow (:meth:`GraspParams.for_workspace`).
FLOOR_NOISE_MARGIN = 0.004


@dataclass(frozen=True)
class GraspParams:
    """Gripper geometry and planner settings (metres).

    ``floor_height`` and ``obstacle_min_height`` are the workspace's floor: build them from the
    workspace limit with :meth:`for_workspace` (the defaults are the shipped tray's). The hand
    is ``max_opening``, ``finger_width``, ``finger_thickness`` and ``pad_half_height``.
    """

    max_opening: float = MAX_OPENING
    finger_width: float = 0.02        # pad width across the closing direction
    finger_thickness: float = 0.012   # finger extent along the closing direction
    clearance: float = 0.012          # added on each side of the contact width
    grasp_depth: float = 0.025        # TCP below the band's highest point (docs/worlds.md)
    pad_half_height: float = 0.015    # pad middle to fingertip
    floor_height: float = 0.005       # tray floor top above the table
    table_margin: float = 0.002       # fingertips at least this high above the floor
    collision_margin: float = 0.004   # footprint grown by this on every side
    obstacle_min_height: float = 0.009  # floor + 4 mm (5 sigma of the depth noise at 0.75 m)
    max_collision_points: int = 2     # depth noise tolerance inside a footprint
    obstacle_stride: int = 2          # obstacle points from every 2nd row/column (~2.4 mm)
    n_angles: int = 24
    offsets: tuple[float, ...] = (0.0, -0.01, 0.01)
    min_band_points: int = 10
    max_targets: int = 3              # objects tried in picking order
    centre_weight: float = 0.5        # quality penalty per max_opening of grasp-centroid distance
    max_target_points: int = 1500     # larger segments use every k-th point (raster order)
    max_candidates: int = 20          # ranked candidates returned

    @classmethod
    def for_workspace(cls, min_height: float, **hand_and_settings) -> GraspParams:
        """Params whose floor follows the workspace limit ``min_height`` (the locator's).

        Obstacles are what rises above ``min_height``; the tray floor (where the fingertips
        must stay ``table_margin`` above) is ``min_height`` - :data:`FLOOR_NOISE_MARGIN`. The
        shipped 0.009 gives the shipped 0.005 / 0.009.
        """
        # rounded to 1e-9 m so that 0.009 gives 0.005 bit for bit
        return cls(floor_height=round(min_height - FLOOR_NOISE_MARGIN, 9),
                   obstacle_min_height=min_height, **hand_and_settings)


DEFAULT_GRASP_PARAMS = GraspParams()


def _candidate_axes(p: GraspParams) -> tuple[np.ndarray, np.ndarray]:
    yaws = np.arange(p.n_angles) * (np.pi / p.n_angles)
    offs = np.asarray(p.offsets, dtype=np.float64)
    return yaws, offs


def _quality(opening: float, s_mid: float, offset: float, p: GraspParams) -> float:
    off_centre = np.hypot(s_mid, offset)
    return float(1.0 - opening / p.max_opening - p.centre_weight * off_centre / p.max_opening)


def obstacle_pixels(height: np.ndarray, p: GraspParams) -> np.ndarray:
    """Flat indices of obstacle pixels: above ``obstacle_min_height``, on a sparse grid.

    Every ``obstacle_stride``-th row and column only: the collision check does not need every
    pixel.
    """
    w = height.shape[1]
    s = p.obstacle_stride
    with np.errstate(invalid='ignore'):
        rr, cc = np.nonzero(height[::s, ::s] > p.obstacle_min_height)
    return (rr * s) * w + cc * s


def _band_points(target: np.ndarray, p: GraspParams) -> np.ndarray:
    """Every k-th point of a large segment (k = ceil(N / max_target_points)), for the bands."""
    stride = -(-len(target) // p.max_target_points)
    return target[::stride]


# --- reference --------------------------------------------------------------------------------

def _plan_for_target_reference(target: np.ndarray, obstacles: np.ndarray,
                               p: GraspParams) -> list[PlanarGrasp]:
    centroid = target[:, :2].mean(axis=0)
    target = _band_points(target, p)
    yaws, offs = _candidate_axes(p)
    out = []
    for yaw in yaws:
        d = np.array([np.cos(yaw), np.sin(yaw)])
        e = np.array([-np.sin(yaw), np.cos(yaw)])
        s = (target[:, :2] - centroid) @ d
        t = (target[:, :2] - centroid) @ e
        so = (obstacles[:, :2] - centroid) @ d
        to = (obstacles[:, :2] - centroid) @ e
        for off in offs:
            band = np.abs(t - off) <= p.finger_width / 2
            if np.count_nonzero(band) < p.min_band_points:
                continue
            s_min, s_max = s[band].min(), s[band].max()
            opening = s_max - s_min + 2 * p.clearance
            if opening > p.max_opening:
                continue
            s_mid = (s_min + s_max) / 2
            tcp_z = max(target[band, 2].max() - p.grasp_depth,
                        p.floor_height + p.pad_half_height + p.table_margin)
            tip_z = tcp_z - p.pad_half_height
            across = np.abs(to - off) <= p.finger_width / 2 + p.collision_margin
            lo = opening / 2 - p.collision_margin
            hi = opening / 2 + p.finger_thickness + p.collision_margin
            rel = np.abs(so - s_mid)
            hits = across & (rel >= lo) & (rel <= hi) & (obstacles[:, 2] > tip_z)
            if np.count_nonzero(hits) >= p.max_collision_points:
                continue
            centre_xy = centroid + d * s_mid + e * off
            out.append(PlanarGrasp(center=[centre_xy[0], centre_xy[1], tcp_z], yaw=float(yaw),
                                   opening=float(opening), finger_width=p.finger_width,
                                   quality=_quality(opening, s_mid, off, p)))
    out.sort(key=lambda g: -g.quality)
    return out[:p.max_candidates]


def plan_grasp_reference(depth_m: np.ndarray, intrinsics: Intrinsics, extrinsics: Extrinsics,
                         target: DetectedObject | None = None,
                         params: GraspParams | None = None,
                         locator_params: LocatorParams | None = None) -> list[PlanarGrasp]:
    """Plain version: ranked grasp candidates (best first), [] when nothing is graspable."""
    p = params or DEFAULT_GRASP_PARAMS
    check_inputs(None, depth_m, intrinsics)
    world = world_points_reference(depth_in_metres(depth_m), intrinsics, extrinsics)
    obstacles = world.reshape(-1, 3)[obstacle_pixels(world[..., 2], p)]
    if target is not None:
        return _plan_for_target_reference(np.asarray(target.points, np.float64), obstacles, p)
    objects = locate_objects_reference(None, depth_m, intrinsics, extrinsics, locator_params)
    for i in rank_targets(objects)[:p.max_targets]:
        grasps = _plan_for_target_reference(objects[i].points.astype(np.float64), obstacles, p)
        if grasps:
            return grasps
    return []


# --- deployed ---------------------------------------------------------------------------------

def _plan_for_target(target: np.ndarray, obstacles: np.ndarray,
                     p: GraspParams) -> list[PlanarGrasp]:
    centroid = target[:, :2].mean(axis=0, dtype=np.float64)
    target = _band_points(target, p)
    yaws, offs = _candidate_axes(p)
    dirs = np.stack([np.cos(yaws), np.sin(yaws)]).astype(np.float32)          # (2, K)
    across = np.stack([-np.sin(yaws), np.cos(yaws)]).astype(np.float32)       # (2, K)
    rel_t = target[:, :2] - centroid.astype(np.float32)
    s = rel_t @ dirs                                                          # (N, K)
    t = rel_t @ across
    half_fw = np.float32(p.finger_width / 2)
    band = np.abs(t[:, :, None] - offs.astype(np.float32)) <= half_fw         # (N, K, O)
    n_band = band.sum(axis=0)
    big = np.float32(1e9)
    s3 = s[:, :, None]
    s_min = np.where(band, s3, big).min(axis=0)
    s_max = np.where(band, s3, -big).max(axis=0)
    z_top = np.where(band, target[:, 2, None, None], -big).max(axis=0)
    opening = (s_max - s_min).astype(np.float64) + 2 * p.clearance
    feasible = (n_band >= p.min_band_points) & (opening <= p.max_opening)
    if not feasible.any():
        return []
    s_mid = (s_min.astype(np.float64) + s_max) / 2
    tcp_z = np.maximum(z_top.astype(np.float64) - p.grasp_depth,
                       p.floor_height + p.pad_half_height + p.table_margin)
    tip_z = tcp_z - p.pad_half_height
    # Only obstacles that can reach a footprint matter: within the largest reach of centroid.
    reach = p.max_opening / 2 + p.finger_thickness + p.collision_margin + max(
        abs(o) for o in p.offsets) + p.finger_width
    rel_o = obstacles[:, :2] - centroid.astype(np.float32)
    near = np.einsum('ij,ij->i', rel_o, rel_o) <= np.float32((reach + 0.05) ** 2)
    rel_o, oz = rel_o[near], obstacles[near, 2]
    k_idx, o_idx = np.nonzero(feasible)
    so = rel_o @ dirs[:, k_idx]                                               # (M, C)
    to = rel_o @ across[:, k_idx]
    off_c = offs[o_idx].astype(np.float32)
    open_c = opening[k_idx, o_idx]
    lo = (open_c / 2 - p.collision_margin).astype(np.float32)
    hi = (open_c / 2 + p.finger_thickness + p.collision_margin).astype(np.float32)
    rel = np.abs(so - s_mid[k_idx, o_idx].astype(np.float32))
    hits = ((np.abs(to - off_c) <= np.float32(p.finger_width / 2 + p.collision_margin))
            & (rel >= lo) & (rel <= hi) & (oz[:, None] > tip_z[k_idx, o_idx].astype(np.float32)))
    free = np.flatnonzero(hits.sum(axis=0) < p.max_collision_points)
    k_f, o_f = k_idx[free], o_idx[free]
    off_centre = np.hypot(s_mid[k_f, o_f], offs[o_f])
    quality = (1.0 - opening[k_f, o_f] / p.max_opening
               - p.centre_weight * off_centre / p.max_opening)
    out = []
    for c in np.argsort(-quality, kind='stable')[:p.max_candidates]:
        k, o = k_f[c], o_f[c]
        d = np.array([np.cos(yaws[k]), np.sin(yaws[k])])
        e = np.array([-np.sin(yaws[k]), np.cos(yaws[k])])
        centre_xy = centroid + d * s_mid[k, o] + e * offs[o]
        out.append(PlanarGrasp(center=[centre_xy[0], centre_xy[1], tcp_z[k, o]],
                               yaw=float(yaws[k]), opening=float(opening[k, o]),
                               finger_width=p.finger_width, quality=float(quality[c])))
    return out


def grasp_scene(depth_m: np.ndarray, intrinsics: Intrinsics, extrinsics: Extrinsics,
                params: GraspParams | None = None) -> tuple[HeightScene, np.ndarray]:
    """The frame's geometry for planning: (height scene, (M, 3) obstacle points).

    The part of planning that needs only the depth image: a node runs it as soon as the frame
    arrives, before the locator's segmentation of that frame does.
    """
    p = params or DEFAULT_GRASP_PARAMS
    check_inputs(None, depth_m, intrinsics)
    scene = height_scene(depth_m, intrinsics, extrinsics)
    return scene, scene.points(obstacle_pixels(scene.height, p))


def plan_grasp_segmented(scene: HeightScene, obstacles: np.ndarray | None,
                         positions: np.ndarray, segments: list[np.ndarray],
                         params: GraspParams | None = None, tie_height: float = 0.01,
                         score: Callable[[np.ndarray], list[PlanarGrasp]] | None = None
                         ) -> list[PlanarGrasp]:
    """Ranked grasps from the locator's result: centroids and segments (flat pixel indices).

    ``positions`` (K, 3) and ``segments`` (K arrays, raster order) are one frame's
    ``/edge_loop/objects`` and label image (:func:`segments_from_labels`); the objects are
    tried in :func:`rank_positions` order, as :func:`plan_grasp` tries the locator's objects,
    and give the same grasps bit for bit. ``score``: the candidates of one target's (N, 3)
    points by another verified scorer (a GPU's, ``kernels.gpu.grasp.TargetScorer``, which
    finds its obstacles on the device: ``obstacles`` is then unused and may be None).
    """
    p = params or DEFAULT_GRASP_PARAMS
    if len(positions) != len(segments):
        raise ValueError(f'{len(positions)} object centroids but {len(segments)} segments')
    if any(len(seg) == 0 for seg in segments):
        raise ValueError('an object without pixels in the label image')
    points = [scene.points(seg) for seg in segments]
    tops = [float(pts[:, 2].max()) for pts in points]
    xy = np.asarray(positions, np.float64).reshape(-1, 3)[:, :2]
    for i in rank_positions(xy, np.asarray(tops), tie_height)[:p.max_targets]:
        grasps = (score(points[i]) if score is not None
                  else _plan_for_target(points[i], obstacles, p))
        if grasps:
            return grasps
    return []


def plan_grasp(depth_m: np.ndarray, intrinsics: Intrinsics, extrinsics: Extrinsics,
               target: DetectedObject | None = None, params: GraspParams | None = None,
               locator_params: LocatorParams | None = None,
               objects: list[DetectedObject] | None = None) -> list[PlanarGrasp]:
    """Deployed version: ranked grasp candidates (best first), [] when nothing is graspable.

    ``objects``: the locator's output on the same frame (else the locator runs here).
    """
    p = params or DEFAULT_GRASP_PARAMS
    scene, obstacles = grasp_scene(depth_m, intrinsics, extrinsics, p)
    if target is not None:
        return _plan_for_target(np.asarray(target.points, np.float32), obstacles, p)
    if objects is None:
        objects = locate_objects(None, depth_m, intrinsics, extrinsics, locator_params,
                                 scene=scene)
    for i in rank_targets(objects)[:p.max_targets]:
        grasps = _plan_for_target(np.asarray(objects[i].points, np.float32), obstacles, p)
        if grasps:
            return grasps
    return []
