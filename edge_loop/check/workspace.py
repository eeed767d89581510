# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 10: the workspace limits against what the camera sees.

Everything geometric in the loop derives from the extrinsics (``camera_position``,
``camera_orientation``), the intrinsics and the workspace limits (the locator's ``roi_x`` x
``roi_y`` tray interior). A wrong sign in a quaternion, a tray moved without its limits, or
limits copied from another cell give no error anywhere: the locator then finds nothing, or
finds the table. This item projects the workspace box (the tray interior from the table
plane up to ``WORKSPACE_TOP``) through the intrinsics and extrinsics and reports

- the share of the box that falls outside the image (or behind the camera): those parts of
  the workspace can never be seen; more than ``MAX_OUTSIDE`` warns;
- the share of the image whose rays meet the table plane inside the limits: a camera that
  sees mostly outside the workspace (under ``MIN_IMAGE_SHARE``) is probably looking at
  another place than the limits say (or from much farther than planned).

A warning, not a gate: the item is not required unless ``--require 10``; it needs no graph
(a pure function of the parameters and the intrinsics), so it runs even when the graph fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop.check.items import ItemResult, Status
from edge_loop.kernels.camera import D435_VGA, Extrinsics, Intrinsics

WORKSPACE_TOP = 0.10      # m above the table: the tallest objects the loop is meant for
MAX_OUTSIDE = 0.05        # share of the workspace box outside the image that warns
MIN_IMAGE_SHARE = 0.10    # share of the image on the workspace under which it warns
_SAMPLES = 41             # points per side of each face of the box
_IMAGE_STRIDE = 8         # pixel stride of the image-share estimate


@dataclass(frozen=True)
class WorkspaceView:
    """How the workspace box and the image overlap (shares in 0..1)."""

    outside: float        # of the box's surface points: not in the image or behind the camera
    floor_outside: float  # of the tray floor (z = 0) alone
    image_share: float    # of the image's pixels: ray meets z = 0 inside roi_x x roi_y
    centre_distance: float  # m, camera centre to the middle of the tray floor


def _box_points(roi_x: tuple[float, float], roi_y: tuple[float, float],
                top: float) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) points on the box's floor and top and its four sides; bool mask of the floor's."""
    s = np.linspace(0.0, 1.0, _SAMPLES)
    a, b = np.meshgrid(s, s)
    a, b = a.ravel(), b.ravel()
    x = roi_x[0] + a * (roi_x[1] - roi_x[0])
    y = roi_y[0] + b * (roi_y[1] - roi_y[0])
    z = b * top
    faces = [np.stack([x, y, np.zeros_like(x)], 1), np.stack([x, y, np.full_like(x, top)], 1),
             np.stack([x, np.full_like(x, roi_y[0]), z], 1),
             np.stack([x, np.full_like(x, roi_y[1]), z], 1),
             np.stack([np.full_like(y, roi_x[0]), roi_y[0] + a * (roi_y[1] - roi_y[0]), z], 1),
             np.stack([np.full_like(y, roi_x[1]), roi_y[0] + a * (roi_y[1] - roi_y[0]), z], 1)]
    floor = np.zeros(len(faces) * len(x), bool)
    floor[:len(x)] = True
    return np.concatenate(faces), floor


def workspace_view(intr: Intrinsics, ext: Extrinsics, roi_x: tuple[float, float],
                   roi_y: tuple[float, float], top: float = WORKSPACE_TOP) -> WorkspaceView:
    """Project the workspace box into the image and the image onto the table plane."""
    pts, floor = _box_points(roi_x, roi_y, top)
    cam = (pts - ext.translation) @ ext.rotation       # world -> optical frame
    with np.errstate(divide='ignore', invalid='ignore'):
        u = intr.fx * cam[:, 0] / cam[:, 2] + intr.cx
        v = intr.fy * cam[:, 1] / cam[:, 2] + intr.cy
    seen = (cam[:, 2] > 1e-6) & (u >= 0) & (u < intr.width) & (v >= 0) & (v < intr.height)
    uu, vv = np.meshgrid(np.arange(0, intr.width, _IMAGE_STRIDE) + 0.5,
                         np.arange(0, intr.height, _IMAGE_STRIDE) + 0.5)
    rays = np.stack([(uu - intr.cx) / intr.fx, (vv - intr.cy) / intr.fy,
                     np.ones_like(uu)], -1).reshape(-1, 3) @ ext.rotation.T
    with np.errstate(divide='ignore', invalid='ignore'):
        t = np.where(rays[:, 2] < 0, -ext.translation[2] / rays[:, 2], np.nan)
        x = ext.translation[0] + t * rays[:, 0]
        y = ext.translation[1] + t * rays[:, 1]
        on = (x > roi_x[0]) & (x < roi_x[1]) & (y > roi_y[0]) & (y < roi_y[1])
    centre = np.array([0.5 * (roi_x[0] + roi_x[1]), 0.5 * (roi_y[0] + roi_y[1]), 0.0])
    return WorkspaceView(outside=float(1.0 - seen.mean()),
                         floor_outside=float(1.0 - seen[floor].mean()),
                         image_share=float(on.mean()),
                         centre_distance=float(np.linalg.norm(centre - ext.translation)))


def judge_workspace(view: WorkspaceView, required: bool = False) -> ItemResult:
    """Item 10 from a :class:`WorkspaceView` (a warning unless ``required``)."""
    rows = [('workspace box outside the image', f'{view.outside:.0%}', f'<= {MAX_OUTSIDE:.0%}',
             'yes' if view.outside <= MAX_OUTSIDE else 'NO'),
            ('tray floor outside the image', f'{view.floor_outside:.0%}', '-', ''),
            ('image on the workspace', f'{view.image_share:.0%}', f'>= {MIN_IMAGE_SHARE:.0%}',
             'yes' if view.image_share >= MIN_IMAGE_SHARE else 'NO'),
            ('camera to tray centre', f'{view.centre_distance:.2f} m', '-', '')]
    measured = (f'{view.outside:.0%} of the workspace box outside the image, '
                f'{view.image_share:.0%} of the image on it, camera {view.centre_distance:.2f} m '
                'from its centre')
    limit = f'outside <= {MAX_OUTSIDE:.0%}, image share >= {MIN_IMAGE_SHARE:.0%}'
    problems = []
    if view.outside > MAX_OUTSIDE:
        problems.append(f'{view.outside:.0%} of the workspace (roi_x, roi_y, up to '
                        f'{WORKSPACE_TOP:.2f} m) is outside the image')
    if view.image_share < MIN_IMAGE_SHARE:
        problems.append(f'only {view.image_share:.0%} of the image looks at the workspace')
    if not problems:
        return ItemResult(10, Status.PASS, measured, limit, required=required, rows=rows)
    return ItemResult(10, Status.FAIL, measured, limit, required=required, rows=rows,
                      fix='; '.join(problems) + ': check camera_position / camera_orientation '
                      '(pose of camera_color_optical_frame in world) and object_locator.roi_x '
                      '/ roi_y (tray interior in world)')


def params_view(params_files: list[Path], intr: Intrinsics = D435_VGA) -> WorkspaceView:
    """:func:`workspace_view` from params files (later files win, as rcl layers them)."""
    import yaml

    shared: dict[str, Any] = {}
    locator: dict[str, Any] = {}
    for path in params_files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        shared.update((data.get('/**') or {}).get('ros__parameters') or {})
        locator.update((data.get('object_locator') or {}).get('ros__parameters') or {})
    ext = Extrinsics.from_params(list(shared.get('camera_position', (0.0, 0.0, 0.75))),
                                 list(shared.get('camera_orientation', (1.0, 0.0, 0.0, 0.0))))
    roi_x = tuple(float(v) for v in locator.get('roi_x', (-0.194, 0.194)))
    roi_y = tuple(float(v) for v in locator.get('roi_y', (-0.144, 0.144)))
    return workspace_view(intr, ext, roi_x, roi_y)


def workspace_item(params_files: list[Path], intr: Intrinsics = D435_VGA,
                   required: bool = False) -> ItemResult:
    """Item 10 from the params files; FAIL (not a crash) when they cannot be read."""
    try:
        view = params_view(params_files, intr)
    except Exception as exc:  # noqa: BLE001 - an unreadable pose cannot be judged
        return ItemResult(10, Status.FAIL, f'{type(exc).__name__}: {exc}', 'readable extrinsics',
                          fix=f'the extrinsics or workspace limits cannot be read: {exc}',
                          required=required)
    return judge_workspace(view, required)
