# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The fixed-size frame header that travels in every shared-memory sample (no rclpy import).

A sample is one iceoryx2 ``Slice[uint8]`` payload holding the colour plane at offset 0 and the
depth plane at the next 64-byte boundary, plus this ctypes user header: stamp, frame id,
encodings and shapes of both planes, the camera intrinsics, a sequence number, the writer's
random id (a restarted producer gets a new one) and the producer's stage timestamps.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from edge_loop.images import ENCODINGS

MAGIC = 0x45444746          # 'EDGF'
VERSION = 1
PLANE_ALIGN = 64            # byte alignment of each plane inside the payload
MAX_STAGES = 8              # producer-side stage timestamps carried in the header
MAX_DISTORTION = 16


class PlaneDesc(ctypes.Structure):
    """Where one image plane lies in the payload and how to read it."""

    _fields_ = [
        ('offset', ctypes.c_uint64),
        ('nbytes', ctypes.c_uint64),
        ('height', ctypes.c_uint32),
        ('width', ctypes.c_uint32),
        ('encoding', ctypes.c_char * 16),
    ]


class CameraInfoBlock(ctypes.Structure):
    """sensor_msgs/CameraInfo without its header (fixed-size arrays)."""

    _fields_ = [
        ('height', ctypes.c_uint32),
        ('width', ctypes.c_uint32),
        ('distortion_model', ctypes.c_char * 32),
        ('d_len', ctypes.c_uint32),
        ('d', ctypes.c_double * MAX_DISTORTION),
        ('k', ctypes.c_double * 9),
        ('r', ctypes.c_double * 9),
        ('p', ctypes.c_double * 12),
        ('binning_x', ctypes.c_uint32),
        ('binning_y', ctypes.c_uint32),
        ('roi_x_offset', ctypes.c_uint32),
        ('roi_y_offset', ctypes.c_uint32),
        ('roi_height', ctypes.c_uint32),
        ('roi_width', ctypes.c_uint32),
        ('roi_do_rectify', ctypes.c_uint8),
    ]


class StageTime(ctypes.Structure):
    """One named timestamp (CLOCK_MONOTONIC ns) recorded by the producer."""

    _fields_ = [('name', ctypes.c_char * 24), ('t_ns', ctypes.c_int64)]


class FrameHeader(ctypes.Structure):
    """User header of every frame sample; identical layout in every process."""

    _fields_ = [
        ('magic', ctypes.c_uint32),
        ('version', ctypes.c_uint32),
        ('writer_id', ctypes.c_uint64),
        ('seq', ctypes.c_uint64),
        ('stamp_sec', ctypes.c_int32),
        ('stamp_nanosec', ctypes.c_uint32),
        ('send_ns', ctypes.c_int64),
        ('frame_id', ctypes.c_char * 64),
        ('color', PlaneDesc),
        ('depth', PlaneDesc),
        ('has_info', ctypes.c_uint8),
        ('info', CameraInfoBlock),
        ('n_stages', ctypes.c_uint32),
        ('stages', StageTime * MAX_STAGES),
    ]

    @staticmethod
    def type_name() -> str:
        """Name iceoryx2 uses to check that both sides agree on the header type."""
        return 'edge_loop::RgbdFrameHeader_v1'


def plane_geometry(shape: tuple[int, ...] | None, encoding: str | None) -> tuple[np.dtype, int]:
    """(dtype, nbytes) of a plane of ``shape``/``encoding``; validates the pair."""
    if shape is None:
        return np.dtype(np.uint8), 0
    if encoding not in ENCODINGS:
        raise ValueError(f'unsupported encoding {encoding!r}; supported: {", ".join(ENCODINGS)}')
    dtype, channels = ENCODINGS[encoding]
    want = 2 if channels == 1 else 3
    shape = tuple(int(x) for x in shape)
    if len(shape) != want or (channels > 1 and shape[2] != channels) or min(shape) <= 0:
        raise ValueError(f'shape {shape} does not fit encoding {encoding!r}')
    return dtype, int(np.prod(shape)) * dtype.itemsize


def align_up(n: int, align: int = PLANE_ALIGN) -> int:
    """``n`` rounded up to a multiple of ``align``."""
    return (n + align - 1) // align * align


def plane_shape(desc: PlaneDesc) -> tuple[tuple[int, ...], np.dtype] | None:
    """(shape, dtype) of a plane described in a header, or None for an absent plane."""
    return plane_layout(int(desc.nbytes), int(desc.height), int(desc.width),
                        desc.encoding.decode())


def plane_layout(nbytes: int, height: int, width: int,
                 encoding: str) -> tuple[tuple[int, ...], np.dtype] | None:
    """(shape, dtype) of a plane of ``nbytes`` bytes, or None for an absent plane (0 bytes)."""
    if nbytes == 0:
        return None
    if encoding not in ENCODINGS:
        raise ValueError(f'sample has unsupported encoding {encoding!r}')
    dtype, channels = ENCODINGS[encoding]
    shape = (height, width, channels) if channels > 1 else (height, width)
    if height * width * channels * dtype.itemsize != nbytes:
        raise ValueError(f'plane {width}x{height} {encoding} does not match its {nbytes} bytes')
    return shape, dtype


def set_plane(desc: PlaneDesc, offset: int, shape: tuple[int, ...] | None,
              encoding: str | None, nbytes: int) -> None:
    """Describe one plane in the header (``shape`` None: absent plane)."""
    desc.offset = offset
    desc.nbytes = nbytes
    desc.height = shape[0] if shape else 0
    desc.width = shape[1] if shape else 0
    desc.encoding = (encoding or '').encode()


def write_camera_info(block: CameraInfoBlock, msg: Any) -> None:
    """Copy a sensor_msgs/CameraInfo (without header) into the header block."""
    block.height = int(msg.height)
    block.width = int(msg.width)
    block.distortion_model = str(msg.distortion_model).encode()[:31]
    d = list(msg.d)[:MAX_DISTORTION]
    block.d_len = len(d)
    block.d[:len(d)] = d
    block.k[:] = [float(x) for x in msg.k]
    block.r[:] = [float(x) for x in msg.r]
    block.p[:] = [float(x) for x in msg.p]
    block.binning_x = int(msg.binning_x)
    block.binning_y = int(msg.binning_y)
    roi = msg.roi
    block.roi_x_offset = int(roi.x_offset)
    block.roi_y_offset = int(roi.y_offset)
    block.roi_height = int(roi.height)
    block.roi_width = int(roi.width)
    block.roi_do_rectify = 1 if roi.do_rectify else 0


def read_camera_info(block: CameraInfoBlock, msg: Any) -> Any:
    """Fill a sensor_msgs/CameraInfo (not its header) from the header block; returns it."""
    msg.height = int(block.height)
    msg.width = int(block.width)
    msg.distortion_model = block.distortion_model.decode()
    msg.d = list(block.d[:block.d_len])
    msg.k = list(block.k)
    msg.r = list(block.r)
    msg.p = list(block.p)
    msg.binning_x = int(block.binning_x)
    msg.binning_y = int(block.binning_y)
    msg.roi.x_offset = int(block.roi_x_offset)
    msg.roi.y_offset = int(block.roi_y_offset)
    msg.roi.height = int(block.roi_height)
    msg.roi.width = int(block.roi_width)
    msg.roi.do_rectify = bool(block.roi_do_rectify)
    return msg
