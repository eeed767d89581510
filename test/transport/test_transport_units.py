# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Pure parts of the transport: stamp pairing, plane layout and the header's camera info."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from edge_loop.transport.header import (
    PLANE_ALIGN,
    CameraInfoBlock,
    FrameHeader,
    align_up,
    plane_geometry,
    plane_shape,
    read_camera_info,
    set_plane,
    write_camera_info,
)
from edge_loop.transport.sync import StampSynchroniser


def test_pairs_by_exact_stamp_in_any_arrival_order():
    sync = StampSynchroniser()
    assert sync.add('depth', 2, 'd2') is None
    assert sync.add('color', 1, 'c1') is None
    assert sync.add('info', 2, 'i2') is None
    assert sync.add('color', 2, 'c2') == (2, {'depth': 'd2', 'info': 'i2', 'color': 'c2'})
    # stamp 1 can no longer complete in order: dropped and counted
    assert sync.pending() == 0 and sync.evicted == 1


def test_queue_is_bounded():
    sync = StampSynchroniser(queue_size=3)
    for stamp in range(10):
        sync.add('color', stamp, stamp)
    assert sync.pending() == 3 and sync.evicted == 7
    assert sync.add('depth', 9, 'd') is None
    assert sync.add('info', 9, 'i') == (9, {'color': 9, 'depth': 'd', 'info': 'i'})


def test_tolerance_pairs_nearby_stamps_only():
    sync = StampSynchroniser(tolerance_ns=1000)
    sync.add('color', 10_000, 'c')
    sync.add('depth', 10_600, 'd')
    assert sync.add('info', 9_500, 'i') == (10_000, {'color': 'c', 'depth': 'd', 'info': 'i'})
    sync.add('color', 20_000, 'c')
    assert sync.add('depth', 22_000, 'd') is None      # too far apart: a separate stamp
    with pytest.raises(ValueError):
        sync.add('thermal', 1, None)


@pytest.mark.parametrize(('shape', 'encoding', 'nbytes'), [
    ((480, 640, 3), 'rgb8', 921600), ((479, 641, 3), 'bgr8', 921117),
    ((480, 640), '16UC1', 614400), ((1080, 1920), '32FC1', 8294400), (None, None, 0)])
def test_plane_geometry(shape, encoding, nbytes):
    assert plane_geometry(shape, encoding)[1] == nbytes


@pytest.mark.parametrize(('shape', 'encoding'), [
    ((480, 640), 'rgb8'), ((480, 640, 4), 'rgb8'), ((480, 640, 1), '16UC1'),
    ((0, 640), '16UC1'), ((480, 640), 'yuv422')])
def test_plane_geometry_rejects_mismatches(shape, encoding):
    with pytest.raises(ValueError):
        plane_geometry(shape, encoding)


def test_header_plane_round_trip_and_alignment():
    header = FrameHeader()
    offset = align_up(921117)
    assert offset % PLANE_ALIGN == 0 and offset >= 921117
    set_plane(header.depth, offset, (479, 641), '32FC1', 479 * 641 * 4)
    shape, dtype = plane_shape(header.depth)
    assert shape == (479, 641) and dtype.itemsize == 4
    set_plane(header.color, 0, None, None, 0)
    assert plane_shape(header.color) is None
    header.depth.nbytes += 1
    with pytest.raises(ValueError):
        plane_shape(header.depth)


def test_camera_info_round_trip():
    from sensor_msgs.msg import CameraInfo

    msg = CameraInfo(width=641, height=479, distortion_model='rational_polynomial',
                     d=[0.1 * i for i in range(8)], k=[float(i) for i in range(9)],
                     binning_x=2)
    msg.roi.width, msg.roi.do_rectify = 100, True
    block = CameraInfoBlock()
    write_camera_info(block, msg)
    back = read_camera_info(block, CameraInfo())
    assert (back.width, back.height, back.distortion_model) == (641, 479, 'rational_polynomial')
    assert list(back.d) == list(msg.d) and list(back.k) == list(msg.k)
    assert back.binning_x == 2 and back.roi.width == 100 and back.roi.do_rectify
    assert ctypes.sizeof(FrameHeader) < 2048


def test_the_shared_memory_data_plane_imports_without_rclpy():
    # bench_transport's shm_core variant runs where ROS is not installed.
    code = ('import sys\n'
            'from edge_loop.transport import remove_stale_resources, shm, shm_available\n'
            'assert "rclpy" not in sys.modules, "rclpy was imported"\n'
            'from edge_loop.transport import FrameWriter\n'
            'assert "rclpy" in sys.modules and FrameWriter.__name__ == "FrameWriter"\n')
    subprocess.run([sys.executable, '-c', code], check=True, timeout=60)
