# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""occupancy_mapper: a top-down occupancy grid of the workspace, fused over the depth frames.

Input: frames from :class:`edge_loop.transport.FrameReader` (only the aligned depth and the
camera_info are used). Output: ``/edge_loop/occupancy`` (nav_msgs/OccupancyGrid, frame
``world_frame``, stamp = the frame's stamp) on every frame: -1 unknown, 0 free, 100 occupied
(geometry more than ``occupied_height`` above the table). A bad frame (no depth, wrong encoding,
size mismatch, missing camera_info, no valid pixel) gives a throttled warning and a
``/diagnostics`` entry and no output; the fused grid is kept. The kernel is
:func:`edge_loop.kernels.occupancy.integrate`, gated by the verification record
(``require_verified``).

A second fixed depth camera (``second_depth_topic``, ``second_camera_info_topic`` and its pose
``second_camera_position`` / ``second_camera_orientation``) fills the first one's shadows:
each main frame is fused together with the second camera's newest image taken within
``second_max_age_s`` of it (:func:`edge_loop.kernels.occupancy.integrate_views`, one update);
without a fresh one the frame is mapped from the main camera alone. Its counters
(``second_fused``, ``second_not_fused``, ``second_bad``) are in the ``/diagnostics`` summary
(:mod:`edge_loop.nodes.second_view`).
"""

from __future__ import annotations

import array
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose
from nav_msgs.msg import MapMetaData, OccupancyGrid
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from edge_loop import topics
from edge_loop.kernels.camera import Extrinsics, nominal_intrinsics
from edge_loop.kernels.occupancy import GridSpec, OccupancyMapper, OccupancyParams
from edge_loop.nodes.second_view import SecondView
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.nodes.stage_health import StageHealth, check_deployable_or_fail
from edge_loop.nodes.vision_common import (
    BadFrameError,
    depth_inputs,
    extrinsics_from,
    stamp_ns,
)
from edge_loop.placement import PlacementError, device_error, resolve_device

_DEF = OccupancyParams()
OP_NAME = 'occupancy.integrate'
GPU_OP_NAME = 'occupancy.integrate.cuda.float32'


def grid_message(grid: np.ndarray, spec: GridSpec, header: Header) -> OccupancyGrid:
    """nav_msgs/OccupancyGrid of an int8 (rows, cols) grid (row-major from the origin)."""
    info = MapMetaData(resolution=float(spec.resolution), width=spec.width, height=spec.height,
                       origin=Pose())
    info.origin.position.x = float(spec.origin_x)
    info.origin.position.y = float(spec.origin_y)
    info.origin.orientation.w = 1.0
    info.map_load_time = header.stamp
    msg = OccupancyGrid(header=header, info=info)
    msg.data = array.array('b', np.ascontiguousarray(grid, dtype=np.int8).tobytes())
    return msg


class OccupancyMapperNode(StageNode):
    """Lifecycle stage fusing every depth frame into the occupancy grid."""

    PARAMS = (
        Param('require_verified', True,
              'Refuse to configure unless the kernel matches config/verified.json (make verify)'),
        Param('verified_record', '', 'Deployment record to check (empty: config/verified.json)'),
        Param('grid_origin', [-0.30, -0.225], 'World (x, y) of the grid corner (m)', length=2,
              tier='user'),
        Param('grid_resolution', 0.005, 'Cell size (m)', min=0.001, max=0.5, tier='user'),
        Param('grid_width', 120, 'Cells along world x', min=1, max=4000, tier='user'),
        Param('grid_height', 90, 'Cells along world y', min=1, max=4000, tier='user'),
        Param('occupied_height', _DEF.occupied_height,
              'Geometry higher than this above the table is occupied (m)', min=0.0, max=1.0),
        Param('max_height', _DEF.max_height,
              'Points higher than this are ignored: gripper, arm (m)', min=0.0, max=5.0),
        Param('min_observed_area', _DEF.min_observed_area,
              'Surface (in cell areas) a cell needs in a frame to get evidence', min=0.0,
              max=10.0),
        Param('hit_area_fraction', _DEF.hit_area_fraction,
              'Share of that surface above occupied_height that makes a hit', min=0.0, max=1.0),
        Param('l_hit', _DEF.l_hit, 'Log-odds added for a hit', min=0.0, max=10.0),
        Param('l_miss', _DEF.l_miss, 'Log-odds added for a miss', min=-10.0, max=0.0),
        Param('l_min', _DEF.l_min, 'Lower log-odds clamp', min=-50.0, max=0.0),
        Param('l_max', _DEF.l_max, 'Upper log-odds clamp', min=0.0, max=50.0),
        Param('unobserved_decay', _DEF.unobserved_decay,
              'Share of the log-odds lost per frame without evidence (towards unknown)',
              min=0.0, max=1.0),
        Param('occupied_above', _DEF.occupied_above, 'Log-odds above this: occupied (100)',
              min=0.0, max=50.0),
        Param('free_below', _DEF.free_below, 'Log-odds below this: free (0)', min=-50.0,
              max=0.0),
        Param('device', 'cpu', 'Where the update runs: cpu, cuda, cuda:N or auto (a GPU where '
              'torch sees one; the torch kernel, gated as occupancy.integrate.cuda.float32; '
              'see docs/placement.md)', check=device_error),
        Param('warmup_size', [640, 480], 'Camera size (width, height) whose GPU graph is '
              'captured at configure; a frame of another size captures its own on arrival '
              '(one slow frame). Ignored on the CPU', length=2, min=1, max=8192),
        Param('pixel_stride', _DEF.pixel_stride, 'Use every n-th pixel in u and v', min=1,
              max=16),
        Param('second_depth_topic', '', 'Aligned depth image (16UC1 mm or 32FC1 m) of a second '
              'fixed camera fused into the same grid (fills the main camera shadows); empty: '
              'none', tier='internal'),
        Param('second_camera_info_topic', '', 'camera_info of that depth image (required with '
              'second_depth_topic)', tier='internal'),
        Param('second_camera_position', [0.0, 0.0, 0.75], 'Position of the second camera '
              'optical frame in the world frame (m)', length=3, tier='internal'),
        Param('second_camera_orientation', [1.0, 0.0, 0.0, 0.0], 'Orientation (qx, qy, qz, '
              'qw) of the second camera optical frame in the world frame', length=4,
              tier='internal'),
        Param('second_max_age_s', 0.1, 'A second image is fused with a main frame only if '
              'their stamps are at most this far apart (s)', min=0.0, max=10.0),
        Param('diagnostics_period_s', 1.0, 'Period of the /diagnostics summary (s)', min=0.1,
              max=60.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('occupancy_mapper', **kwargs)
        self._health: StageHealth | None = None
        self._pub: Any = None
        self._mapper: OccupancyMapper | None = None
        self._second: SecondView | None = None
        self._second_subs: list[Any] = []

    def configure_stage(self) -> None:
        """Gate, grid, fusion parameters, publisher."""
        check_deployable_or_fail(self, [OP_NAME])
        prm = self.params
        try:
            self._ext = extrinsics_from(prm, self)   # params or TF (extrinsics_source)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        spec = GridSpec(origin_x=prm['grid_origin'][0], origin_y=prm['grid_origin'][1],
                        resolution=prm['grid_resolution'], width=prm['grid_width'],
                        height=prm['grid_height'])
        fusion = OccupancyParams(
            occupied_height=prm['occupied_height'], max_height=prm['max_height'],
            min_observed_area=prm['min_observed_area'],
            hit_area_fraction=prm['hit_area_fraction'], l_hit=prm['l_hit'],
            l_miss=prm['l_miss'], l_min=prm['l_min'], l_max=prm['l_max'],
            unobserved_decay=prm['unobserved_decay'], occupied_above=prm['occupied_above'],
            free_below=prm['free_below'], pixel_stride=prm['pixel_stride'])
        try:
            where = resolve_device(prm['device'])
        except PlacementError as exc:
            raise ConfigError(str(exc)) from exc
        if where.is_accelerator:
            # torch only where a GPU is asked for: a CPU-only robot needs no torch
            from edge_loop.kernels.gpu.occupancy import TorchOccupancyMapper
            from edge_loop.kernels.gpu.transfer import CopyLedger

            check_deployable_or_fail(self, [GPU_OP_NAME])
            self._mapper = TorchOccupancyMapper(spec, fusion, device=where.device,
                                                ledger=CopyLedger())
            t0 = time.perf_counter()
            width, height = prm['warmup_size']
            self._mapper.warm_up(nominal_intrinsics(width, height), self._ext)
            self.get_logger().info(f'GPU graph for {width}x{height} frames captured in '
                                   f'{(time.perf_counter() - t0) * 1e3:.0f} ms')
        else:
            self._mapper = OccupancyMapper(spec, fusion)
        self.get_logger().info(f'occupancy update on {where.device} ({where.reason})')
        self._frame_id = prm['world_frame']
        self._pub = self.create_lifecycle_publisher(OccupancyGrid, topics.OCCUPANCY, 10)
        self._health = StageHealth(self, 'occupancy_mapper')
        self._health.ledger = getattr(self._mapper, 'ledger', None)
        self._configure_second_camera()

    def _configure_second_camera(self) -> None:
        """Subscribe to the second camera when one is configured (ConfigError if half set)."""
        prm = self.params
        depth_topic, info_topic = prm['second_depth_topic'], prm['second_camera_info_topic']
        if not depth_topic:
            if info_topic:
                raise ConfigError('second_camera_info_topic is set but second_depth_topic is '
                                  'empty: set both to fuse a second camera, or neither')
            return
        if not info_topic:
            raise ConfigError(f'second_depth_topic {depth_topic!r} needs '
                              'second_camera_info_topic (its intrinsics)')
        try:
            ext = Extrinsics.from_params(prm['second_camera_position'],
                                         prm['second_camera_orientation'])
        except ValueError as exc:
            raise ConfigError(f'second camera pose: {exc}') from exc
        second = SecondView(ext, prm['second_max_age_s'])
        self._second = second
        self._second_subs = [
            self.create_subscription(CameraInfo, info_topic, second.on_camera_info, 10),
            self.create_subscription(Image, depth_topic, self._on_second_depth, 2)]
        self._health.extra = second.values
        self.get_logger().info(f'second camera {depth_topic} fused within '
                               f'{prm["second_max_age_s"]} s of each frame')

    def _on_second_depth(self, msg: Image) -> None:
        second, health = self._second, self._health
        if second is None or health is None:
            return
        try:
            second.on_depth(msg, stamp_ns(msg.header.stamp))
        except BadFrameError as exc:
            health.warn_throttled(str(exc))

    def activate_stage(self) -> None:
        """Start reading frames."""
        self.open_frames(self._on_frame, lambda: self._health.summary(self.frame_reader))

    def deactivate_stage(self) -> None:
        """Stop reading frames (the fused grid is kept)."""
        self.close_frames()

    def release(self) -> None:
        """Close the reader, forget the grid, destroy the publishers (idempotent)."""
        self.close_frames()
        if self._pub is not None:
            self.destroy_publisher(self._pub)
            self._pub = None
        if self._health is not None:
            self.destroy_publisher(self._health.pub)
            self._health = None
        for sub in self._second_subs:
            self.destroy_subscription(sub)
        self._second_subs, self._second = [], None
        self._mapper = None

    def _on_frame(self, frame: Any) -> None:
        health, mapper, pub = self._health, self._mapper, self._pub
        if health is None or mapper is None or pub is None:
            return
        t0 = time.perf_counter()
        try:
            depth, intr = depth_inputs(frame)
            health.audit(frame, depth)
            second = self._second.views_for(stamp_ns(frame.stamp)) if self._second else []
            if second:
                grid = mapper.update_views([(depth, intr, self._ext)] + second)
            else:
                grid = mapper.update(depth, intr, self._ext)
        except (BadFrameError, ValueError) as exc:
            health.bad_frame(str(exc), frame.stamp)
            return
        self.debug_delay()
        pub.publish(grid_message(grid, mapper.spec,
                                 Header(stamp=frame.stamp, frame_id=self._frame_id)))
        frame.mark('occupancy_mapper')
        health.processed((time.perf_counter() - t0) * 1e3)


def main(args: list[str] | None = None) -> int:
    """Run the occupancy_mapper node."""
    return run_node(OccupancyMapperNode, args)


if __name__ == '__main__':
    main()
