# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Planar parallel-jaw grasp and its jaw rectangle (the contract's ``/edge_loop/grasp``).

A top-down grasp is a TCP position (the middle of the finger pads when they close), the yaw of
the closing direction about world z, the opening before closing and the finger-pad width. Its
jaw rectangle has four corners p0..p3: p0->p1 along the closing direction (length = opening),
p1->p2 across it (length = pad width), counter-clockwise seen from above, so the right-hand
normal points up, towards the gripper.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_FINGER_WIDTH = 0.02
MAX_OPENING = 0.085
# How many next-best grasps of a frame the planner hands on to the controller (the
# grasp_planner node's `alternatives` default; the kernel-level episodes use the same).
GRASP_ALTERNATIVES = 5


@dataclass
class PlanarGrasp:
    """A top-down parallel-jaw grasp in the world frame.

    Attributes:
        center: (3,) TCP position when the fingers close (middle of the finger pads), m.
        yaw: angle of the closing direction about world z, rad.
        opening: jaw opening before closing, m.
        finger_width: finger-pad width (across the closing direction), m.
        quality: planner score (higher is better); not used by the simulator.
        depth_below_top: if set, the closing height is taken from the scene instead of
            ``center[2]``: the highest geometry under the jaw rectangle minus this depth.

    """

    center: np.ndarray
    yaw: float
    opening: float
    finger_width: float = DEFAULT_FINGER_WIDTH
    quality: float = 0.0
    depth_below_top: float | None = field(default=None)

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=np.float64).reshape(3)
        self.yaw = float(self.yaw)
        self.opening = float(self.opening)
        self.finger_width = float(self.finger_width)
        self.quality = float(self.quality)

    def closing_axis(self) -> np.ndarray:
        """Unit vector of the closing direction in world (horizontal)."""
        return np.array([np.cos(self.yaw), np.sin(self.yaw), 0.0])


def grasp_rectangle(g: PlanarGrasp) -> np.ndarray:
    """(4, 3) jaw rectangle corners p0..p3 of ``g`` (counter-clockwise seen from above)."""
    a = g.closing_axis() * (g.opening / 2.0)
    b = np.array([-np.sin(g.yaw), np.cos(g.yaw), 0.0]) * (g.finger_width / 2.0)
    c = g.center
    # p0 -> p1 along +a, p1 -> p2 along +b: a x b points up, so the order is counter-clockwise.
    return np.stack([c - a - b, c + a - b, c + a + b, c - a + b])


def grasp_from_rectangle(corners: np.ndarray, quality: float = 0.0) -> PlanarGrasp:
    """Inverse of :func:`grasp_rectangle` (tolerates a slightly non-rectangular polygon)."""
    p = np.asarray(corners, dtype=np.float64).reshape(4, 3)
    closing = ((p[1] - p[0]) + (p[2] - p[3])) / 2.0
    across = ((p[2] - p[1]) + (p[3] - p[0])) / 2.0
    opening = float(np.hypot(closing[0], closing[1]))
    width = float(np.hypot(across[0], across[1]))
    yaw = float(np.arctan2(closing[1], closing[0]))
    return PlanarGrasp(center=p.mean(axis=0), yaw=yaw, opening=opening, finger_width=width,
                       quality=quality)
