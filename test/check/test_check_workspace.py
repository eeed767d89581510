# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 10 of edge-loop check: the workspace limits against what the camera sees."""

from __future__ import annotations

import numpy as np
import yaml

from edge_loop.check.items import Status, page_passes
from edge_loop.check.workspace import judge_workspace, workspace_item, workspace_view
from edge_loop.kernels.camera import D435_VGA, Extrinsics, matrix_to_quat
from edge_loop.paths import config_path

ROI = ((-0.194, 0.194), (-0.144, 0.144))


def _looking_at(centre: np.ndarray, target: np.ndarray) -> Extrinsics:
    """Optical frame at ``centre`` with z towards ``target`` (x horizontal)."""
    z = target - centre
    z = z / np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x = x / np.linalg.norm(x) if np.linalg.norm(x) > 1e-6 else np.array([1.0, 0.0, 0.0])
    return Extrinsics(np.stack([x, np.cross(z, x), z], axis=1), centre)


def _oblique(tilt_deg: float, distance: float, target=(0.0, 0.0, 0.0)) -> Extrinsics:
    t = np.radians(tilt_deg)
    target = np.asarray(target, float)
    return _looking_at(target + distance * np.array([0.0, -np.sin(t), np.cos(t)]), target)


def _params(tmp_path, ext: Extrinsics, roi=ROI):
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump({
        '/**': {'ros__parameters': {'camera_position': ext.translation.tolist(),
                                    'camera_orientation': matrix_to_quat(ext.rotation).tolist()}},
        'object_locator': {'ros__parameters': {'roi_x': list(roi[0]), 'roi_y': list(roi[1])}}}))
    return path


def test_shipped_and_oblique_cameras_see_the_workspace(tmp_path):
    item = workspace_item([config_path('pick.yaml')])
    assert item.status is Status.PASS, item.measured
    assert item.number == 10 and not item.required
    for tilt, dist in ((30.0, 0.55), (50.0, 0.9), (0.0, 0.5)):
        view = workspace_view(D435_VGA, _oblique(tilt, dist), *ROI)
        assert view.outside == 0.0 and view.image_share > 0.1, (tilt, dist, view)
        assert abs(view.centre_distance - dist) < 1e-9
    # the same through a layered params file (the user's file wins over pick.yaml)
    item = workspace_item([config_path('pick.yaml'), _params(tmp_path, _oblique(30.0, 0.55))])
    assert item.status is Status.PASS


def test_limits_that_do_not_match_the_camera_warn(tmp_path):
    # the tray moved 0.5 m but its limits (or the camera's pose) were not updated
    moved = _oblique(30.0, 0.55, target=(0.5, 0.0, 0.0))
    item = workspace_item([config_path('pick.yaml'), _params(tmp_path, moved)])
    assert item.status is Status.FAIL and 'outside the image' in item.fix
    assert page_passes([item])              # a warning: not required ...
    required = workspace_item([_params(tmp_path, moved)], required=True)
    assert not page_passes([required])      # ... unless --require 10
    # identity orientation looks straight up: nothing of the tray is in view
    up = Extrinsics(np.eye(3), np.array([0.0, 0.0, 0.75]))
    view = workspace_view(D435_VGA, up, *ROI)
    assert view.outside == 1.0 and view.image_share == 0.0
    # limits of a small corner of the view: the camera sees mostly outside the workspace
    small = judge_workspace(workspace_view(D435_VGA, _oblique(0.0, 0.75),
                                           (0.10, 0.15), (0.05, 0.10)))
    assert small.status is Status.FAIL and 'only' in small.fix
    # half the tray cut off by the image edge
    half = workspace_view(D435_VGA, _oblique(0.0, 0.75, target=(0.3, 0.0, 0.0)), *ROI)
    assert 0.2 < half.outside < 0.8


def test_unreadable_pose_is_a_failed_item_not_a_crash(tmp_path):
    path = tmp_path / 'bad.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'camera_orientation': [0.0, 0.0, 0.0, 0.0]}}}))
    item = workspace_item([path])
    assert item.status is Status.FAIL and 'quaternion' in item.measured
