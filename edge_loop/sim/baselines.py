# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Two baseline grasp choosers: the floor that a grasp planner must beat.

- :func:`random_grasp`: uniform centre inside the tray, uniform yaw, full opening, closing
  2 cm below whatever is under the jaws.
- :func:`mask_centroid_grasp`: the object with the most visible pixels in the ground-truth
  mask; centre = its visible-surface centroid, closing across the minor principal axis,
  opening = visible extent along that axis + 2 cm, closing 2 cm below its visible top.
"""

from __future__ import annotations

import numpy as np

from edge_loop.kernels.camera import camera_to_world, deproject
from edge_loop.kernels.grasp_types import MAX_OPENING, PlanarGrasp
from edge_loop.sim.world import TRAY_FLOOR, TRAY_INNER, SimFrame, SimWorld, principal_yaw

CLEARANCE_M = 0.02
DEPTH_BELOW_TOP_M = 0.02


def random_grasp(rng: np.random.Generator) -> PlanarGrasp:
    """A uniformly random top-down grasp inside the tray interior."""
    x = rng.uniform(-TRAY_INNER[0] / 2, TRAY_INNER[0] / 2)
    y = rng.uniform(-TRAY_INNER[1] / 2, TRAY_INNER[1] / 2)
    return PlanarGrasp(center=[x, y, 0.0], yaw=rng.uniform(-np.pi / 2, np.pi / 2),
                       opening=MAX_OPENING, depth_below_top=DEPTH_BELOW_TOP_M)


def mask_centroid_grasp(world: SimWorld, frame: SimFrame) -> PlanarGrasp | None:
    """Grasp the most visible object at its mask centroid across its minor axis (or None)."""
    ks, counts = np.unique(frame.label[frame.label > 0], return_counts=True)
    if ks.size == 0:
        return None
    k = int(ks[int(np.argmax(counts))])
    mask = (frame.label == k) & (frame.depth_true_m > 0)
    pts = camera_to_world(deproject(frame.depth_true_m, frame.intrinsics)[mask],
                          world.extrinsics).astype(np.float64)
    centroid = pts.mean(axis=0)
    yaw = principal_yaw(pts[:, :2]) + np.pi / 2
    axis = np.array([np.cos(yaw), np.sin(yaw)])
    proj = (pts[:, :2] - centroid[:2]) @ axis
    opening = float(min(proj.max() - proj.min() + CLEARANCE_M, MAX_OPENING))
    top = float(np.percentile(pts[:, 2], 98))
    z = top - min(DEPTH_BELOW_TOP_M, 0.5 * (top - TRAY_FLOOR))
    return PlanarGrasp(center=[centroid[0], centroid[1], z], yaw=float(yaw), opening=opening)
