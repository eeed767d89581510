# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Fusion with the learned foreground (segnet): fill depth holes, re-join over-split objects.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.deployed import locate_objects
from edge_loop.kernels.object_locator.model_inputs import prepare_inputs
from edge_loop.kernels.object_locator.objects import (
    DetectedObject,
    _score,
    _yaw_and_elongation,
    check_inputs,
)
from edge_loop.kernels.object_locator.params import (
    DEFAULT_PARAMS,
    LocatorParams,
    sizing_intrinsics,
)
from edge_loop.kernels.object_locator.reference import locate_objects_reference
from edge_loop.kernels.object_locator.scene import HeightScene, height_scene

# --- fusion with the learned foreground (edge_loop/models/segnet.py) -----------------------

# Default of a node's ``use_model`` parameter: off. With the region merge and the depth-step
# cut in the depth locator, segnet's contact-based re-joining trades misses for false
# detections (training scenes 300000-300039: 14 misses / 6 false with it, 8 / 9 without,
# non-glare, 875 object views; validation scenes 310000-310029: 3 / 10 with, 3 / 12 without),
# filling depth holes changes nothing under glare (the glare core is saturated in colour too:
# neither sensor sees objects there), and the net costs ~5 ms of the frame on one core
# (verify baseline: 3.2 ms without, 8.2 ms with; the budget is 8 ms).
# bench/bench_vision.py prints both side by side.
USE_MODEL_DEFAULT = False

@dataclass(frozen=True)
class FusionParams:
    """How the locator uses segnet's foreground where depth fails.

    ``fill_logit``: a pixel without depth whose foreground logit exceeds this (0 = p 0.5)
    connects depth segments like a small depth hole does (an object cut in two by a glare
    spot stays one object). ``merge_logit``: two touching objects (at least
    ``min_contact_px`` 4-neighbour pixel pairs, tops within ``merge_max_top_diff``) whose
    mean contact logit along their common border is below this are one object the colour
    rule over-split, and are joined (None: never; the two limits were chosen on training
    scenes: a short contact or a step in height is more often two objects the model's
    coarse 8x8 cells do not separate). ``veto_logit``: a depth object whose mean foreground
    logit is below this is dropped (None: never). ``fill_height``: a hole pixel is inside the
    tray when its ray meets this height inside ``roi_x`` x ``roi_y``.
    """

    use_model: bool = True
    fill_logit: float = 0.0
    merge_logit: float | None = 0.0
    min_contact_px: int = 25
    merge_max_top_diff: float = 0.02
    veto_logit: float | None = None
    fill_height: float = 0.02


DEFAULT_FUSION = FusionParams()


def model_logits(model, color_rgb: np.ndarray | None, scene: HeightScene) -> np.ndarray:
    """(2, H, W) float32 logits (foreground, contact) of ``model`` (a ``SegNet``)."""
    h, w = scene.height.shape
    logit = model.logits(prepare_inputs(color_rgb, scene.height))
    # both channels in one resize (interleaved): a third less time than one call per channel
    up = cv2.resize(np.ascontiguousarray(logit.transpose(1, 2, 0)), (w, h),
                    interpolation=cv2.INTER_LINEAR)
    return up.transpose(2, 0, 1)


def object_pixels(obj: DetectedObject, intr: Intrinsics, ext: Extrinsics
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the pixels of ``obj`` (its depth points projected into the image)."""
    cam = (np.asarray(obj.points, np.float64) - ext.translation) @ ext.rotation
    z = np.maximum(cam[:, 2], 1e-6)
    u = np.clip(np.rint(cam[:, 0] / z * intr.fx + intr.cx), 0, intr.width - 1).astype(int)
    v = np.clip(np.rint(cam[:, 1] / z * intr.fy + intr.cy), 0, intr.height - 1).astype(int)
    return v, u


def _merged(group: list[DetectedObject], min_pixels: int) -> DetectedObject:
    pts = np.concatenate([o.points for o in group])
    p64 = pts.astype(np.float64)
    centre = p64.mean(axis=0)
    d = p64[:, :2] - centre[:2]
    cov = d.T @ d / len(d)
    yaw, elong = _yaw_and_elongation(cov[0, 0], cov[0, 1], cov[1, 1])
    boxes = np.array([o.mask_bbox for o in group])
    n = len(pts)
    return DetectedObject(position=centre, yaw=yaw, pixel_count=n,
                          mask_bbox=(int(boxes[:, 0].min()), int(boxes[:, 1].min()),
                                     int(boxes[:, 2].max()), int(boxes[:, 3].max())),
                          score=_score(n, min_pixels), top=float(max(o.top for o in group)),
                          elongation=elong, points=pts,
                          pixels=np.concatenate([o.pixels for o in group]))


def merge_over_split(objects: list[DetectedObject], contact_logits: np.ndarray,
                     intr: Intrinsics, ext: Extrinsics, params: LocatorParams,
                     fusion: FusionParams) -> list[DetectedObject]:
    """Join touching objects between which the model sees no contact of two objects.

    Centroid, yaw and top of a joined object come from the union of its depth points; it
    keeps the place of its first piece in the list (raster order of first pixels).
    """
    if fusion.merge_logit is None or len(objects) < 2:
        return objects
    pixels = [object_pixels(o, intr, ext) for o in objects]
    seen = [(v, u) for v, u in pixels if v.size]
    if len(seen) < 2:
        return objects
    # labels on the objects' bounding box only (the full frame was most of the cost)
    r0, r1 = min(int(v.min()) for v, _ in seen), max(int(v.max()) for v, _ in seen) + 1
    c0, c1 = min(int(u.min()) for _, u in seen), max(int(u.max()) for _, u in seen) + 1
    lab = np.zeros((r1 - r0, c1 - c0), np.int32)
    for i, (v, u) in enumerate(pixels):
        lab[v - r0, u - c0] = i + 1
    contact_logits = contact_logits[r0:r1, c0:c1]
    pairs: dict[tuple[int, int], list[float]] = {}
    for a, b, la, lb in ((lab[:, :-1], lab[:, 1:], contact_logits[:, :-1], contact_logits[:, 1:]),
                         (lab[:-1], lab[1:], contact_logits[:-1], contact_logits[1:])):
        m = (a > 0) & (b > 0) & (a != b)
        if not m.any():
            continue
        lo, hi = np.minimum(a[m], b[m]), np.maximum(a[m], b[m])
        val = 0.5 * (la[m] + lb[m])
        for i, j, v in zip(lo.tolist(), hi.tolist(), val.tolist()):
            pairs.setdefault((i - 1, j - 1), []).append(v)
    parent = list(range(len(objects)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for (i, j), vals in sorted(pairs.items()):
        if len(vals) >= fusion.min_contact_px and float(np.mean(vals)) < fusion.merge_logit \
                and abs(objects[i].top - objects[j].top) < fusion.merge_max_top_diff:
            ri, rj = root(i), root(j)
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[DetectedObject]] = {}
    for i, o in enumerate(objects):
        groups.setdefault(root(i), []).append(o)
    min_pixels = params.min_pixels_for(sizing_intrinsics(intr, ext, params))
    return [g[0] if len(g) == 1 else _merged(g, min_pixels)
            for _, g in sorted(groups.items())]


def fill_mask(logits: np.ndarray, scene: HeightScene, params: LocatorParams,
              fusion: FusionParams) -> np.ndarray:
    """(H, W) bool: pixels without depth that the model calls object, inside the tray."""
    h, w = logits.shape
    cand = np.flatnonzero((logits.reshape(-1) > fusion.fill_logit) & ~np.isfinite(scene.depth))
    out = np.zeros(h * w, bool)
    if cand.size:
        rays = scene.rays[cand]
        with np.errstate(divide='ignore', invalid='ignore'):
            s = (np.float32(fusion.fill_height) - scene.origin[2]) / rays[:, 2]
        x = scene.origin[0] + s * rays[:, 0]
        y = scene.origin[1] + s * rays[:, 1]
        inside = ((s > 0) & (x > params.roi_x[0]) & (x < params.roi_x[1])
                  & (y > params.roi_y[0]) & (y < params.roi_y[1]))
        out[cand[inside]] = True
    return out.reshape(h, w)


def object_mean_logit(obj: DetectedObject, logits: np.ndarray, intr: Intrinsics,
                      ext: Extrinsics) -> float:
    """Mean of ``logits`` (H, W) over the pixels of ``obj``."""
    if len(obj.points) == 0:
        return float('-inf')
    return float(logits[object_pixels(obj, intr, ext)].mean())


def locate_objects_fused(color_rgb: np.ndarray | None, depth_m: np.ndarray,
                         intrinsics: Intrinsics, extrinsics: Extrinsics,
                         params: LocatorParams | None = None, model=None,
                         fusion: FusionParams | None = None,
                         reference: bool = False,
                         masks: tuple[np.ndarray, np.ndarray] | None = None
                         ) -> list[DetectedObject]:
    """Depth locator plus segnet where depth fails (holes, glare); centroids stay depth-only.

    ``model`` is a :class:`edge_loop.models.segnet.SegNet` (None or ``fusion.use_model``
    false: the depth locator alone). Both implementations take the same ``fill`` mask, so the
    reference-vs-deployed gate covers the fused path (op ``object_locator.fused``).
    ``masks``: the per-pixel part from a GPU, as :func:`locate_objects` takes it (deployed
    path only).
    """
    p = params or DEFAULT_PARAMS
    f = fusion or DEFAULT_FUSION
    if reference and masks is not None:
        raise ValueError('the reference locator computes its own masks')
    locate = locate_objects_reference if reference else locate_objects
    extra = {} if masks is None else {'masks': masks}
    if model is None or not f.use_model:
        return locate(color_rgb, depth_m, intrinsics, extrinsics, p, **extra)
    check_inputs(color_rgb, depth_m, intrinsics)
    scene = height_scene(depth_m, intrinsics, extrinsics)
    logits = model_logits(model, color_rgb, scene)
    fill = fill_mask(logits[0], scene, p, f)
    if reference:
        objects = locate(color_rgb, depth_m, intrinsics, extrinsics, p, fill=fill)
    else:
        objects = locate(color_rgb, depth_m, intrinsics, extrinsics, p, scene=scene, fill=fill,
                         **extra)
    objects = merge_over_split(objects, logits[1], intrinsics, extrinsics, p, f)
    if f.veto_logit is not None:
        objects = [o for o in objects
                   if object_mean_logit(o, logits[0], intrinsics, extrinsics) >= f.veto_logit]
    return objects
