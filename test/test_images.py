# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Image <-> numpy conversion without cv_bridge."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image

from edge_loop.images import (
    ImageFormatError,
    depth_to_metres,
    fill_image,
    image_to_array,
    to_rgb,
)


@pytest.mark.parametrize(('encoding', 'shape', 'dtype'), [
    ('rgb8', (480, 640, 3), np.uint8), ('bgr8', (479, 641, 3), np.uint8),
    ('16UC1', (480, 640), np.uint16), ('32FC1', (241, 321), np.float32),
    ('mono8', (10, 7), np.uint8),
])
def test_round_trip(encoding, shape, dtype):
    arr = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    msg = fill_image(Image(), arr, encoding)
    assert msg.step == shape[1] * (shape[2] if len(shape) == 3 else 1) * arr.itemsize
    out = image_to_array(msg)
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_array_equal(out, arr)


def test_padded_step_is_honoured():
    arr = np.arange(12, dtype=np.uint16).reshape(3, 4)
    msg = Image(height=3, width=4, encoding='16UC1', step=10, is_bigendian=0)
    padded = np.zeros((3, 10), np.uint8)
    padded[:, :8] = arr.view(np.uint8).reshape(3, 8)
    msg.data = padded.tobytes()
    np.testing.assert_array_equal(image_to_array(msg), arr)


def test_big_endian_depth():
    arr = np.array([[1, 2], [300, 65535]], dtype=np.uint16)
    msg = Image(height=2, width=2, encoding='16UC1', step=4, is_bigendian=1)
    msg.data = arr.astype('>u2').tobytes()
    np.testing.assert_array_equal(image_to_array(msg), arr)


@pytest.mark.parametrize(('msg', 'match'), [
    (Image(height=2, width=2, encoding='yuv422', step=4), 'unsupported image encoding'),
    (Image(height=2, width=2, encoding='rgb8', step=3), 'step 3 smaller'),
    (Image(height=0, width=2, encoding='rgb8', step=6), 'empty image'),
])
def test_bad_messages(msg, match):
    with pytest.raises(ImageFormatError, match=match):
        image_to_array(msg)


def test_short_data():
    msg = Image(height=2, width=2, encoding='rgb8', step=6)
    msg.data = bytes(7)
    with pytest.raises(ImageFormatError, match='needs 12'):
        image_to_array(msg)


def test_depth_to_metres_marks_missing_as_nan():
    mm = np.array([[0, 1000], [250, 65535]], dtype=np.uint16)
    m = depth_to_metres(mm, '16UC1')
    assert np.isnan(m[0, 0]) and m[0, 1] == pytest.approx(1.0) and m[1, 0] == pytest.approx(0.25)
    f = np.array([[np.nan, -1.0], [0.0, 2.5]], dtype=np.float32)
    mf = depth_to_metres(f, '32FC1')
    assert np.isnan(mf[:, 0]).all() and np.isnan(mf[0, 1]) and mf[1, 1] == 2.5
    assert f[1, 1] == 2.5 and np.isnan(f[0, 0])  # input untouched
    with pytest.raises(ImageFormatError):
        depth_to_metres(mm, 'mono16')


def test_to_rgb():
    bgr = np.zeros((1, 1, 3), np.uint8)
    bgr[0, 0] = (1, 2, 3)
    assert tuple(to_rgb(bgr, 'bgr8')[0, 0]) == (3, 2, 1)
    with pytest.raises(ImageFormatError):
        to_rgb(bgr, 'mono8')


def test_fill_rejects_wrong_dtype():
    with pytest.raises(ImageFormatError, match='needs dtype'):
        fill_image(Image(), np.zeros((2, 2), np.float64), '32FC1')
