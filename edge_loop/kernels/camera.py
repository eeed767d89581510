# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Pinhole camera model and extrinsics shared by every kernel (no ROS imports)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of the colour image (depth is registered to it)."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @classmethod
    def from_k(cls, k: np.ndarray | list[float], width: int, height: int) -> Intrinsics:
        """Build from a row-major 3x3 K (as in sensor_msgs/CameraInfo.k)."""
        k = np.asarray(k, dtype=np.float64).reshape(3, 3)
        if k[0, 0] <= 0 or k[1, 1] <= 0:
            raise ValueError(f'camera_info K has non-positive focal length: fx={k[0, 0]}, '
                             f'fy={k[1, 1]}')
        return cls(float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2]),
                   int(width), int(height))

    def k(self) -> np.ndarray:
        """Row-major 3x3 K."""
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1]])

    def scaled(self, width: int, height: int) -> Intrinsics:
        """Intrinsics of the same camera resampled to ``width`` x ``height``."""
        sx, sy = width / self.width, height / self.height
        return Intrinsics(self.fx * sx, self.fy * sy, self.cx * sx, self.cy * sy, width, height)


# A RealSense D435 colour stream at 640x480 (the simulator's default).
D435_VGA = Intrinsics(fx=615.0, fy=615.0, cx=320.0, cy=240.0, width=640, height=480)


def quat_to_matrix(q: np.ndarray | list[float]) -> np.ndarray:
    """Rotation matrix of a quaternion [qx, qy, qz, qw] (normalised here)."""
    x, y, z, w = np.asarray(q, dtype=np.float64)
    n = np.sqrt(x * x + y * y + z * z + w * w)
    if not np.isfinite(n) or n < 1e-9:
        raise ValueError(f'invalid quaternion {list(q)}')
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """Quaternion [qx, qy, qz, qw] of a rotation matrix."""
    r = np.asarray(r, dtype=np.float64)
    t = np.trace(r)
    if t > 0:
        s = np.sqrt(t + 1.0) * 2
        q = [(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, 0.25 * s]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = np.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2]) * 2
        q = [0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s]
    elif r[1, 1] > r[2, 2]:
        s = np.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2]) * 2
        q = [(r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s]
    else:
        s = np.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1]) * 2
        q = [(r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s, (r[1, 0] - r[0, 1]) / s]
    q = np.asarray(q)
    return q / np.linalg.norm(q)


def yaw_to_quat(yaw: float) -> np.ndarray:
    """Quaternion [qx, qy, qz, qw] of a rotation by ``yaw`` about world z."""
    return np.array([0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)])


@dataclass(frozen=True)
class Extrinsics:
    """Pose of camera_color_optical_frame in world: p_world = R @ p_cam + t."""

    rotation: np.ndarray  # (3, 3)
    translation: np.ndarray  # (3,)

    @classmethod
    def from_params(cls, position: list[float], orientation: list[float]) -> Extrinsics:
        """Build from the shared parameters camera_position / camera_orientation."""
        if len(position) != 3:
            raise ValueError(f'camera_position needs 3 values, got {list(position)}')
        if len(orientation) != 4:
            raise ValueError(f'camera_orientation needs 4 values [qx,qy,qz,qw], got '
                             f'{list(orientation)}')
        return cls(quat_to_matrix(orientation), np.asarray(position, dtype=np.float64))


# Default camera: 0.75 m above the table centre, looking straight down, image x along world x.
DEFAULT_CAMERA_POSITION = [0.0, 0.0, 0.75]
DEFAULT_CAMERA_ORIENTATION = [1.0, 0.0, 0.0, 0.0]


def deproject(depth_m: np.ndarray, intr: Intrinsics) -> np.ndarray:
    """(H, W, 3) points in the camera optical frame from metric depth (NaN stays NaN)."""
    h, w = depth_m.shape
    u = (np.arange(w, dtype=np.float32) - np.float32(intr.cx)) / np.float32(intr.fx)
    v = (np.arange(h, dtype=np.float32) - np.float32(intr.cy)) / np.float32(intr.fy)
    z = depth_m.astype(np.float32, copy=False)
    return np.stack([z * u[None, :], z * v[:, None], z], axis=-1)


def camera_to_world(points: np.ndarray, ext: Extrinsics) -> np.ndarray:
    """Transform (..., 3) camera-frame points to world."""
    r = ext.rotation.astype(np.float32)
    t = ext.translation.astype(np.float32)
    return points @ r.T + t


def world_to_camera(points: np.ndarray, ext: Extrinsics) -> np.ndarray:
    """Transform (..., 3) world points to the camera optical frame."""
    r = ext.rotation
    return (np.asarray(points, dtype=np.float64) - ext.translation) @ r


def project(points_cam: np.ndarray, intr: Intrinsics) -> np.ndarray:
    """(..., 2) pixel coordinates (u, v) of camera-frame points."""
    p = np.asarray(points_cam, dtype=np.float64)
    return np.stack([intr.fx * p[..., 0] / p[..., 2] + intr.cx,
                     intr.fy * p[..., 1] / p[..., 2] + intr.cy], axis=-1)


def nominal_intrinsics(width: int, height: int) -> Intrinsics:
    """A camera of ``width`` x ``height`` with the D435's field of view, centred.

    For warm-ups only (a frame of the camera's size before its calibration is known): never
    for geometry a robot acts on.
    """
    scale = width / D435_VGA.width
    return Intrinsics(fx=D435_VGA.fx * scale, fy=D435_VGA.fy * scale, cx=width / 2.0,
                      cy=height / 2.0, width=int(width), height=int(height))


def warm_up_frame(intr: Intrinsics = D435_VGA, distance_m: float = 0.75
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(rgb8 colour, 16UC1 depth in mm) of a flat grey surface with one box on it.

    What a stage runs its kernel on once at configure, so that one-time costs (the first ONNX
    Runtime run, first allocations) are not paid on the first real frame, against its deadline.
    """
    h, w = intr.height, intr.width
    color = np.full((h, w, 3), 128, np.uint8)
    depth = np.full((h, w), round(distance_m * 1000), np.uint16)
    box = (slice(h // 2 - h // 16, h // 2 + h // 16), slice(w // 2 - w // 16, w // 2 + w // 16))
    color[box] = (200, 60, 40)
    depth[box] -= 40
    return color, depth
