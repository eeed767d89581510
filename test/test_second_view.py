# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The second camera's view for occupancy_mapper: decoding, bad input and freshness."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, Image

from edge_loop.images import fill_image
from edge_loop.kernels.camera import D435_VGA, Extrinsics
from edge_loop.nodes.second_view import SecondView, depth_view, fresh_view
from edge_loop.nodes.vision_common import BadFrameError

SMALL = D435_VGA.scaled(160, 120)


def _info(intr=SMALL):
    return CameraInfo(width=intr.width, height=intr.height,
                      k=[float(v) for v in intr.k().reshape(-1)])


def _depth(arr, encoding):
    msg = Image()
    fill_image(msg, np.ascontiguousarray(arr), encoding)
    return msg


def test_depth_view_reads_both_encodings_in_place():
    mm = np.full((120, 160), 700, np.uint16)
    view = depth_view(_depth(mm, '16UC1'), _info(), 5)
    assert view.depth.dtype == np.uint16 and view.depth.shape == (120, 160)
    assert view.intrinsics == SMALL and view.stamp_ns == 5
    metres = depth_view(_depth(mm.astype(np.float32) / 1000, '32FC1'), _info(), 5)
    assert metres.depth.dtype == np.float32 and float(metres.depth[0, 0]) == pytest.approx(0.7)


@pytest.mark.parametrize('case, message', [
    ('colour', 'encoding'),
    ('no_info', 'missing camera_info'),
    ('other_size', 'camera_info is 640x480'),
    ('all_zero', 'no valid depth pixel'),
])
def test_unreadable_second_images_are_refused_with_their_reason(case, message):
    msg, info = _depth(np.full((120, 160), 700, np.uint16), '16UC1'), _info()
    if case == 'colour':
        msg = _depth(np.zeros((120, 160, 3), np.uint8), 'rgb8')
    elif case == 'no_info':
        info = None
    elif case == 'other_size':
        info = _info(D435_VGA)
    else:
        msg = _depth(np.zeros((120, 160), np.uint16), '16UC1')
    with pytest.raises(BadFrameError, match=message) as err:
        depth_view(msg, info, 0)
    assert str(err.value).startswith('second camera: ')


def test_only_a_view_close_enough_in_time_is_fused():
    view = depth_view(_depth(np.full((120, 160), 700, np.uint16), '16UC1'), _info(), 1_000)
    assert fresh_view(view, 1_050, 50) is view
    assert fresh_view(view, 950, 50) is view       # a second image newer than the frame
    assert fresh_view(view, 1_051, 50) is None
    assert fresh_view(None, 1_000, 50) is None
    ext = Extrinsics.from_params([0.0, 0.3, 0.6], [1.0, 0.0, 0.0, 0.0])
    second = SecondView(ext, max_age_s=0.1)
    assert second.views_for(0) == []                               # none yet
    second.on_camera_info(_info())
    second.on_depth(_depth(np.full((120, 160), 700, np.uint16), '16UC1'), 1_000_000_000)
    (depth, intr, got_ext), = second.views_for(1_050_000_000)
    assert depth.shape == (120, 160) and intr == SMALL and got_ext is ext
    # an image arriving late with an older stamp does not replace the newer one
    second.on_depth(_depth(np.full((120, 160), 900, np.uint16), '16UC1'), 500_000_000)
    assert int(second.views_for(1_000_000_000)[0][0][0, 0]) == 700
    assert second.views_for(1_200_000_000) == []
    with pytest.raises(BadFrameError):
        second.on_depth(_depth(np.zeros((120, 160), np.uint16), '16UC1'), 1_300_000_000)
    values = second.values()
    assert (values['second_received'], values['second_fused'], values['second_not_fused'],
            values['second_bad']) == (3, 2, 2, 1)
    assert 'no valid depth pixel' in values['second_last_error']
