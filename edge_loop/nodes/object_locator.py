# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""object_locator: every object in the tray and the one to pick next, from RGB-D frames.

Inputs: frames from :class:`edge_loop.transport.FrameReader` (shared memory or the contract's
colour / aligned depth / camera_info topics). Outputs, stamped with the frame's stamp and in
``world_frame``: ``/edge_loop/objects`` (PoseArray, always, empty when nothing),
``/edge_loop/object`` (PoseStamped, only when an object is found), RViz markers on
``/edge_loop/markers`` (namespace ``objects``). A bad frame (wrong encoding, size mismatch,
missing camera_info, no valid depth) gives a throttled warning and a ``/diagnostics`` entry and
no output for that frame. A depth blind spot (glare) over at least ``blind_warn_share`` of the
tray turns the periodic ``/diagnostics`` summary to WARN: objects in it cannot be found, so an
empty list does not mean an empty tray. The kernel is
:func:`edge_loop.kernels.object_locator.locate_objects`; configure refuses to proceed unless it
matches ``config/verified.json`` (``require_verified``).

The helpers here (frame checks, diagnostics, markers) are shared with the grasp_planner node.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from edge_loop import topics
from edge_loop.images import COLOR_ENCODINGS, DEPTH_ENCODINGS, to_rgb
from edge_loop.kernels.camera import (
    D435_VGA,
    Extrinsics,
    Intrinsics,
    warm_up_frame,
    yaw_to_quat,
)
from edge_loop.kernels.object_locator import (
    USE_MODEL_DEFAULT,
    DetectedObject,
    LocatorParams,
    blind_spot_share,
    locate_objects,
    locate_objects_fused,
    rank_targets,
)
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.nodes.stage_health import StageHealth, check_deployable_or_fail


class BadFrameError(ValueError):
    """A frame the stage cannot use; the message says why (goes to the log and diagnostics)."""


def _pair(name: str, default: list[float], what: str) -> Param:
    return Param(name, default, what, length=2,
                 check=lambda v: None if v[0] < v[1] else 'needs [min, max] with min < max')


# Parameters both vision nodes share (the locator's geometry and the deployment gate).
VISION_PARAMS = (
    Param('require_verified', True,
          'Refuse to configure unless the kernel matches config/verified.json (make verify)'),
    Param('verified_record', '', 'Deployment record to check (empty: config/verified.json)'),
    Param('min_height', 0.009, 'Foreground: minimum height above the table (m)', min=0.0,
          max=0.2),
    Param('color_step', 0.1, 'Chromaticity step (L1) that separates touching objects',
          min=0.0, max=3.0),
    Param('hue_step', 0.15, 'Specular-free hue step (L1) that separates touching objects '
          'washed alike by glare or a highlight (0: off)', min=0.0, max=2.0),
    Param('min_pixels', 80, 'Smallest object at 640x480 (pixels; scaled with resolution)',
          min=1, max=100000),
    Param('split_pixels', 30, 'Smallest colour piece that is a region of its own (640x480; '
          'regions of one colour join again)', min=1, max=100000),
    _pair('roi_x', [-0.194, 0.194], 'Tray interior along world x [min, max] (m)'),
    _pair('roi_y', [-0.144, 0.144], 'Tray interior along world y [min, max] (m)'),
)


def locator_params(params: dict[str, Any]) -> LocatorParams:
    """LocatorParams from the node parameters."""
    return LocatorParams(min_height=params['min_height'], color_step=params['color_step'],
                         hue_step=params['hue_step'],
                         min_pixels=params['min_pixels'], split_pixels=params['split_pixels'],
                         roi_x=tuple(params['roi_x']),
                         roi_y=tuple(params['roi_y']))


def extrinsics_from(params: dict[str, Any]) -> Extrinsics:
    """Camera pose from the shared parameters (ConfigError when invalid)."""
    try:
        return Extrinsics.from_params(params['camera_position'], params['camera_orientation'])
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def frame_inputs(frame: Any) -> tuple[np.ndarray, np.ndarray, Intrinsics]:
    """(colour RGB view, depth view, intrinsics) of a frame, or BadFrameError."""
    if frame.color is None or frame.depth is None:
        raise BadFrameError('frame without a colour or a depth image')
    if frame.color_encoding not in COLOR_ENCODINGS:
        raise BadFrameError(f'colour encoding {frame.color_encoding!r} not supported '
                       f'(use {" or ".join(COLOR_ENCODINGS)})')
    if frame.depth_encoding not in DEPTH_ENCODINGS:
        raise BadFrameError(f'depth encoding {frame.depth_encoding!r} not supported '
                       f'(use {" or ".join(DEPTH_ENCODINGS)})')
    color, depth = frame.color, frame.depth
    if color.ndim != 3 or color.shape[2] != 3:
        raise BadFrameError(f'colour image has shape {color.shape}, expected (H, W, 3)')
    if depth.ndim != 2:
        raise BadFrameError(f'depth image has shape {depth.shape}, expected (H, W)')
    if color.shape[:2] != depth.shape:
        raise BadFrameError(f'size mismatch: colour {color.shape[1]}x{color.shape[0]}, depth '
                       f'{depth.shape[1]}x{depth.shape[0]} (depth must be aligned to colour)')
    info = frame.camera_info
    if info is None:
        raise BadFrameError('missing camera_info')
    if (int(info.width), int(info.height)) != (depth.shape[1], depth.shape[0]):
        raise BadFrameError(f'camera_info is {info.width}x{info.height} but the images are '
                       f'{depth.shape[1]}x{depth.shape[0]}')
    try:
        intr = Intrinsics.from_k(list(info.k), info.width, info.height)
    except ValueError as exc:
        raise BadFrameError(str(exc)) from exc
    expected = np.float32 if frame.depth_encoding == '32FC1' else np.uint16
    if depth.dtype != expected:
        raise BadFrameError(f'depth dtype {depth.dtype} does not match {frame.depth_encoding}')
    valid = np.any(depth > 0) if expected is np.uint16 else np.any(np.isfinite(depth) &
                                                                    (depth > 0))
    if not valid:
        raise BadFrameError('no valid depth pixel in the frame (all zero/NaN)')
    return to_rgb(color, frame.color_encoding), depth, intr


def pose_of(obj: DetectedObject) -> Pose:
    """Pose of a detected object in world: centroid and yaw about z."""
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in obj.position)
    q = yaw_to_quat(obj.yaw)
    pose.orientation.x, pose.orientation.y = float(q[0]), float(q[1])
    pose.orientation.z, pose.orientation.w = float(q[2]), float(q[3])
    return pose


def delete_all(ns: str, header: Header) -> Marker:
    """A DELETEALL marker for namespace ``ns``."""
    return Marker(header=header, ns=ns, action=Marker.DELETEALL)


def object_markers(objects: list[DetectedObject], target: int | None,
                   header: Header) -> MarkerArray:
    """One arrow (centroid, yaw) per object; the target in green, the others in orange."""
    out = MarkerArray(markers=[delete_all('objects', header)])
    for i, obj in enumerate(objects):
        m = Marker(header=header, ns='objects', id=i, type=Marker.ARROW, action=Marker.ADD,
                   pose=pose_of(obj))
        m.scale.x, m.scale.y, m.scale.z = 0.05, 0.008, 0.008
        m.color = (ColorRGBA(r=0.1, g=0.9, b=0.2, a=1.0) if i == target
                   else ColorRGBA(r=1.0, g=0.6, b=0.1, a=0.9))
        out.markers.append(m)
    return out


class ObjectLocatorNode(StageNode):
    """Lifecycle stage running the object locator on every frame."""

    PARAMS = VISION_PARAMS + (
        Param('use_model', USE_MODEL_DEFAULT,
              'Fuse the segnet ONNX model (re-joins pieces it sees no contact between, fills '
              'depth holes; off by default, see USE_MODEL_DEFAULT)'),
        Param('diagnostics_period_s', 1.0, 'Period of the /diagnostics summary (s)', min=0.1,
              max=60.0),
        Param('blind_warn_share', 0.02,
              'Summary goes WARN when a depth blind spot (glare) covers this share of the tray '
              'interior: objects there cannot be found (0 = never)', min=0.0, max=1.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('object_locator', **kwargs)
        self._model: Any = None
        self._health: StageHealth | None = None
        self._pubs: dict[str, Any] = {}

    def configure_stage(self) -> None:
        """Gate, parameters, publishers."""
        use_model = self.params['use_model']
        check_deployable_or_fail(self, ['object_locator'] + (
            ['object_locator.fused', 'segnet.onnx'] if use_model else []))
        if use_model:
            from edge_loop.models.segnet import load_segnet

            self._model = load_segnet()
        self._ext = extrinsics_from(self.params)
        self._lp = locator_params(self.params)
        self._frame_id = self.params['world_frame']
        self._pubs = {
            'objects': self.create_lifecycle_publisher(PoseArray, topics.OBJECTS, 10),
            'object': self.create_lifecycle_publisher(PoseStamped, topics.OBJECT, 10),
            'markers': self.create_lifecycle_publisher(MarkerArray, topics.MARKERS, 10),
        }
        self._health = StageHealth(self, 'object_locator')
        self._warm_up()

    def _warm_up(self) -> None:
        """Run the kernel once (the first ONNX run takes ~160 ms: not on a real frame)."""
        color, depth = warm_up_frame()
        t0 = time.perf_counter()
        if self._model is not None:
            locate_objects_fused(color, depth, D435_VGA, self._ext, self._lp, model=self._model)
        else:
            locate_objects(color, depth, D435_VGA, self._ext, self._lp)
        self.get_logger().info(f'kernel warmed up in {(time.perf_counter() - t0) * 1e3:.0f} ms')

    def activate_stage(self) -> None:
        """Start reading frames."""
        self.open_frames(self._on_frame, lambda: self._health.summary(self.frame_reader))

    def deactivate_stage(self) -> None:
        """Stop reading frames."""
        self.close_frames()

    def release(self) -> None:
        """Close the reader, drop the model session, destroy the publishers (idempotent)."""
        self.close_frames()
        self._model = None
        for pub in self._pubs.values():
            self.destroy_publisher(pub)
        self._pubs = {}
        if self._health is not None:
            self.destroy_publisher(self._health.pub)
            self._health = None

    def _on_frame(self, frame: Any) -> None:
        health = self._health
        if health is None or not self._pubs:
            return
        t0 = time.perf_counter()
        try:
            color, depth, intr = frame_inputs(frame)
            health.audit(frame, color, depth)
            if self._model is not None:
                objects = locate_objects_fused(color, depth, intr, self._ext, self._lp,
                                               model=self._model)
            else:
                objects = locate_objects(color, depth, intr, self._ext, self._lp)
        except (BadFrameError, ValueError) as exc:
            health.bad_frame(str(exc), frame.stamp)
            return
        order = rank_targets(objects, self._lp.tie_height)
        target = order[0] if order else None
        self.debug_delay()
        header = Header(stamp=frame.stamp, frame_id=self._frame_id)
        self._pubs['objects'].publish(PoseArray(header=header,
                                                poses=[pose_of(o) for o in objects]))
        if target is not None:
            self._pubs['object'].publish(PoseStamped(header=header, pose=pose_of(objects[target])))
        self._pubs['markers'].publish(object_markers(objects, target, header))
        frame.mark('object_locator')
        health.processed((time.perf_counter() - t0) * 1e3)
        # After the answer is out (0.2 ms, ~1 ms with a blind spot): an empty or short list is
        # not an empty tray when the depth camera cannot see part of it.
        health.blind_spot(blind_spot_share(depth, intr, self._ext, self._lp),
                          self.params['blind_warn_share'])


def main(args: list[str] | None = None) -> int:
    """Run the object_locator node."""
    return run_node(ObjectLocatorNode, args)


if __name__ == '__main__':
    main()
