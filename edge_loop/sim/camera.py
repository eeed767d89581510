# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Simulated RGB-D camera (RealSense D435-like) on pybullet's TinyRenderer.

The view and projection matrices are built by hand from the contract's extrinsics (pose of
``camera_color_optical_frame`` in world) and pinhole intrinsics, so an off-centre principal
point and any camera pose render correctly. Metric depth comes from the z-buffer; then
:class:`DepthArtefacts` adds what a stereo depth camera does: millimetre quantisation, noise
growing with depth squared, holes at depth discontinuities and random dropouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pybullet as p

from edge_loop.kernels.camera import Extrinsics, Intrinsics

NEAR_M = 0.05
FAR_M = 5.0
# OpenGL camera looks along -z with y up; the optical frame looks along +z with y down.
_GL_FROM_OPTICAL = np.diag([1.0, -1.0, -1.0])


def view_matrix(ext: Extrinsics) -> np.ndarray:
    """4x4 OpenGL view matrix (world -> GL eye) of a camera with optical-frame pose ``ext``."""
    r_gl = ext.rotation @ _GL_FROM_OPTICAL  # GL camera axes in world
    view = np.eye(4)
    view[:3, :3] = r_gl.T
    view[:3, 3] = -r_gl.T @ ext.translation
    return view


def projection_matrix(intr: Intrinsics, near: float = NEAR_M, far: float = FAR_M) -> np.ndarray:
    """4x4 OpenGL projection of a pinhole camera (principal point anywhere, row 0 = top)."""
    w, h = intr.width, intr.height
    return np.array([
        [2 * intr.fx / w, 0.0, 1.0 - 2 * intr.cx / w, 0.0],
        [0.0, 2 * intr.fy / h, 2 * intr.cy / h - 1.0, 0.0],
        [0.0, 0.0, -(far + near) / (far - near), -2 * far * near / (far - near)],
        [0.0, 0.0, -1.0, 0.0],
    ])


def zbuffer_to_metres(zbuf: np.ndarray, near: float = NEAR_M, far: float = FAR_M) -> np.ndarray:
    """Optical-axis depth (m, float32) from a [0, 1] OpenGL z-buffer; far plane -> 0."""
    z = np.asarray(zbuf, dtype=np.float64)
    depth = far * near / (far - (far - near) * z)
    depth[z >= 1.0 - 1e-7] = 0.0
    return depth.astype(np.float32)


@dataclass(frozen=True)
class DepthArtefacts:
    """Stereo-depth artefacts; every number here is checked by test/sim/test_camera.py.

    Attributes:
        noise_per_m2: std of the depth noise per metre squared of depth (sigma = k * z^2, m).
        edge_threshold_m: a pixel whose depth differs from a 4-neighbour by more than this is
            on a discontinuity.
        edge_hole_prob: probability that a discontinuity pixel (dilated by one pixel) is a hole.
        dropout_prob: probability of a random single-pixel dropout anywhere.
        min_range_m / max_range_m: outside this range there is no data (0), like the D435.

    """

    noise_per_m2: float = 0.0015
    edge_threshold_m: float = 0.01
    edge_hole_prob: float = 0.6
    dropout_prob: float = 0.005
    min_range_m: float = 0.1
    max_range_m: float = 4.0

    def apply(self, depth_m: np.ndarray, rng: np.random.Generator,
              extra_holes: np.ndarray | None = None) -> np.ndarray:
        """uint16 millimetres with artefacts (0 = no data) from clean metric depth."""
        z = depth_m.astype(np.float64)
        valid = (z >= self.min_range_m) & (z <= self.max_range_m)
        noisy = z + block_noise(rng, z.shape) * (self.noise_per_m2 * z * z)
        edges = discontinuities(depth_m, self.edge_threshold_m)
        holes = edges & (rng.random(z.shape) < self.edge_hole_prob)
        holes |= rng.random(z.shape) < self.dropout_prob
        if extra_holes is not None:
            holes |= extra_holes
        mm = np.rint(noisy * 1000.0)
        mm[~valid | holes] = 0
        return np.clip(mm, 0, 65535).astype(np.uint16)


def block_noise(rng: np.random.Generator, shape: tuple[int, ...], block: int = 2) -> np.ndarray:
    """Standard normal noise constant over ``block`` x ``block`` pixel cells (float32).

    Sensor noise after demosaicing (colour) or block matching (stereo depth) is spatially
    correlated over about a 2x2 cell; modelling it that way also keeps recorded bags small
    (zstd finds the repeats; i.i.d. per-pixel noise would triple a bag's size).
    """
    h, w = shape[:2]
    cells = rng.standard_normal(((h + block - 1) // block, (w + block - 1) // block,
                                 *shape[2:])).astype(np.float32)
    return np.repeat(np.repeat(cells, block, axis=0), block, axis=1)[:h, :w]


def discontinuities(depth_m: np.ndarray, threshold: float) -> np.ndarray:
    """Pixels next to a depth jump larger than ``threshold`` (both sides, dilated by 1 px)."""
    z = depth_m.astype(np.float32)
    jump = np.zeros(z.shape, dtype=bool)
    dx = np.abs(np.diff(z, axis=1)) > threshold
    dy = np.abs(np.diff(z, axis=0)) > threshold
    jump[:, 1:] |= dx
    jump[:, :-1] |= dx
    jump[1:, :] |= dy
    jump[:-1, :] |= dy
    grown = jump.copy()
    grown[:, 1:] |= jump[:, :-1]
    grown[:, :-1] |= jump[:, 1:]
    grown[1:, :] |= jump[:-1, :]
    grown[:-1, :] |= jump[1:, :]
    return grown


@dataclass
class RawRender:
    """What the renderer gives before any sensor effect."""

    color: np.ndarray       # (H, W, 3) uint8 RGB
    depth_m: np.ndarray     # (H, W) float32, 0 = nothing (far plane)
    segmentation: np.ndarray  # (H, W) int32 pybullet body ids, -1 = nothing


class SimCamera:
    """A fixed pinhole camera in one pybullet client."""

    def __init__(self, client: int, intrinsics: Intrinsics, extrinsics: Extrinsics) -> None:
        self.client = client
        self.intrinsics = intrinsics
        self.extrinsics = extrinsics
        # pybullet takes column-major flattened matrices.
        self._view = view_matrix(extrinsics).T.reshape(-1).tolist()
        self._proj = projection_matrix(intrinsics).T.reshape(-1).tolist()

    def render(self, light: dict) -> RawRender:
        """Render colour, metric depth and body segmentation with ``light`` settings."""
        w, h = self.intrinsics.width, self.intrinsics.height
        _, _, rgba, zbuf, seg = p.getCameraImage(
            w, h, viewMatrix=self._view, projectionMatrix=self._proj,
            renderer=p.ER_TINY_RENDERER, physicsClientId=self.client, **light)
        rgba = np.asarray(rgba, dtype=np.uint8).reshape(h, w, 4)
        depth = zbuffer_to_metres(np.asarray(zbuf, dtype=np.float32).reshape(h, w))
        seg = np.asarray(seg, dtype=np.int32).reshape(h, w)
        return RawRender(np.ascontiguousarray(rgba[..., :3]), depth, seg)
