# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""frame_ingest: a ROS camera driver's frames into shared memory, with exactly one copy.

Inputs: the contract's ``/camera/color/image_raw``, ``/camera/aligned_depth_to_color/image_raw``
and ``/camera/color/camera_info`` from a driver (RealSense-style; remap for others), paired by
stamp (exact, or within ``sync_tolerance_ms``). Each pair is copied once into an iceoryx2 loan
on ``frame_channel`` (:class:`edge_loop.transport.FrameWriter`) and announced on
``/edge_loop/frames``; the stages then read it in place. The writer does not republish Images
or camera_info: the driver already does. Bad input (unsupported encoding, colour and depth of
different sizes) is skipped with a throttled warning and counted on ``/diagnostics``.

``image_transport: compressed`` reads image_transport's compressed topics instead
(``<colour topic>/compressed``: JPEG/PNG; ``<depth topic>/compressedDepth``: PNG 16UC1 or
32FC1, after the remaps of the raw topics), decodes each pair with OpenCV
(:func:`edge_loop.images.decode_compressed`) and copies the decoded planes into the loan: a
robot whose driver only offers compressed images, or a bag recorded that way. A format it
cannot decode is skipped with its name in the warning and counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from edge_loop import topics
from edge_loop.images import COLOR_ENCODINGS, DEPTH_ENCODINGS, ImageFormatError, decode_compressed
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node

WARN_PERIOD_S = 2.0
COMPRESSED_SUFFIX = {'color': '/compressed', 'depth': '/compressedDepth'}


@dataclass
class DecodedFrame:
    """A colour/depth pair decoded from CompressedImages, shaped as a reader's frame."""

    color: Any
    depth: Any
    color_encoding: str
    depth_encoding: str
    stamp: Any
    frame_id: str
    camera_info: Any
    receive_time_ns: int


class CompressedFrameReader:
    """Subscribes to the compressed colour/depth topics and camera_info; pairs by stamp.

    ``callback(frame)`` gets a :class:`DecodedFrame` per complete set; a set that does not
    decode goes to ``on_bad(reason)``. ``stats['dropped']`` counts sets never completed.
    """

    def __init__(self, node: Any, callback: Any, on_bad: Any, qos: str,
                 sync_tolerance_ns: int) -> None:
        from sensor_msgs.msg import CameraInfo, CompressedImage

        from edge_loop.transport import image_qos
        from edge_loop.transport.sync import StampSynchroniser

        self._node = node
        self._callback = callback
        self._on_bad = on_bad
        self._sync = StampSynchroniser(tolerance_ns=sync_tolerance_ns)
        # After the remaps of the raw topics (camera_ns), as image_transport names them.
        self.topics = {kind: node.resolve_topic_name(base) + COMPRESSED_SUFFIX[kind]
                       for kind, base in (('color', topics.COLOR), ('depth', topics.DEPTH))}
        iq = image_qos(qos)
        self._subs = [
            node.create_subscription(CompressedImage, self.topics['color'],
                                     lambda m: self._on_msg('color', m), iq),
            node.create_subscription(CompressedImage, self.topics['depth'],
                                     lambda m: self._on_msg('depth', m), iq),
            node.create_subscription(CameraInfo, topics.CAMERA_INFO,
                                     lambda m: self._on_msg('info', m), 10),
        ]

    @property
    def stats(self) -> dict[str, int]:
        """Frame sets evicted before they were complete."""
        return {'dropped': self._sync.evicted}

    def _on_msg(self, kind: str, msg: Any) -> None:
        stamp = msg.header.stamp
        done = self._sync.add(kind, int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), msg)
        if done is None:
            return
        received = time.monotonic_ns()
        parts = done[1]
        try:
            color, color_encoding = decode_compressed(parts['color'].format,
                                                      parts['color'].data)
            depth, depth_encoding = decode_compressed(parts['depth'].format,
                                                      parts['depth'].data)
        except ImageFormatError as exc:
            self._on_bad(str(exc))
            return
        self._callback(DecodedFrame(color, depth, color_encoding, depth_encoding,
                                    parts['color'].header.stamp,
                                    parts['color'].header.frame_id, parts['info'], received))

    def close(self) -> None:
        """Destroy the subscriptions (idempotent)."""
        subs, self._subs = self._subs, []
        for sub in subs:
            self._node.destroy_subscription(sub)


class FrameIngestNode(StageNode):
    """Lifecycle node copying driver frames into shared-memory loans."""

    PARAMS = (
        Param('max_width', 1920, 'Largest frame width the channel accepts (pixels)', min=1,
              max=8192),
        Param('max_height', 1080, 'Largest frame height the channel accepts (pixels)', min=1,
              max=8192),
        Param('sync_tolerance_ms', 0.0,
              'Pair colour/depth/camera_info whose stamps differ by up to this (0: exact)',
              min=0.0, max=50.0),
        Param('driver_qos', 'reliable', 'QoS of the driver topics', choices=('reliable',
                                                                            'best_effort')),
        Param('image_transport', 'raw', "What the driver's images are: raw (sensor_msgs/Image "
              'on the colour and depth topics) or compressed (CompressedImage on '
              '<colour>/compressed and <depth>/compressedDepth, decoded here with OpenCV)',
              choices=('raw', 'compressed')),
        Param('diagnostics_period_s', 1.0, 'Period of the /diagnostics summary (s)', min=0.1,
              max=60.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('frame_ingest', **kwargs)
        self._writer: Any = None
        self._diag_pub: Any = None
        self.ingested = 0
        self.skipped = 0
        self._last_warn = 0.0

    def configure_stage(self) -> None:
        """Open the shared-memory channel (fails when shared memory cannot be used)."""
        from edge_loop.transport import FrameWriter

        if self.params['transport'] != 'shm':
            raise ConfigError("frame_ingest only makes sense with transport 'shm' (with 'ros' "
                              'the stages read the driver topics directly)')
        self._writer = FrameWriter(self, 'shm', self.params['frame_channel'],
                                   self.params['max_width'], self.params['max_height'],
                                   image_topics=False, camera_info_topic=False)
        if self._writer.transport != 'shm':
            self._writer.close()
            self._writer = None
            raise ConfigError('shared memory is not available on this host')
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)

    def activate_stage(self) -> None:
        """Subscribe to the driver."""
        tolerance_ns = int(self.params['sync_tolerance_ms'] * 1e6)
        if self.params['image_transport'] == 'compressed':
            reader = CompressedFrameReader(self, self._ingest, self._skip,
                                           self.params['driver_qos'], tolerance_ns)
            self.get_logger().info(f"reading compressed images on {reader.topics['color']} "
                                   f"and {reader.topics['depth']}")
            self.watch_frames(reader, self._summary)
            return
        self.open_frames(self._ingest, self._summary, transport='ros',
                         qos=self.params['driver_qos'], sync_tolerance_ns=tolerance_ns)

    def deactivate_stage(self) -> None:
        """Stop ingesting."""
        self.close_frames()

    def release(self) -> None:
        """Close the channel and the subscriptions (idempotent)."""
        self.close_frames()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._diag_pub is not None:
            self.destroy_publisher(self._diag_pub)
            self._diag_pub = None

    def _skip(self, why: str) -> None:
        self.skipped += 1
        now = time.monotonic()
        if now - self._last_warn > WARN_PERIOD_S:
            self._last_warn = now
            self.get_logger().warning(f'frame skipped: {why}')

    def _ingest(self, frame: Any) -> None:
        """The one copy: the driver's bytes into the loan."""
        writer = self._writer
        if writer is None:
            return
        color, depth = frame.color, frame.depth
        if frame.color_encoding not in COLOR_ENCODINGS:
            return self._skip(f'colour encoding {frame.color_encoding!r} not one of '
                              f'{", ".join(COLOR_ENCODINGS)}')
        if frame.depth_encoding not in DEPTH_ENCODINGS:
            return self._skip(f'depth encoding {frame.depth_encoding!r} not one of '
                              f'{", ".join(DEPTH_ENCODINGS)}')
        if color.shape[:2] != depth.shape:
            return self._skip(f'colour {color.shape[1]}x{color.shape[0]} and depth '
                              f'{depth.shape[1]}x{depth.shape[0]} differ (depth not aligned?)')
        try:
            with writer.loan(color.shape, frame.color_encoding, depth.shape,
                             frame.depth_encoding) as loan:
                loan.color[...] = color
                loan.depth[...] = depth
                loan.publish(frame.stamp, frame.frame_id, frame.camera_info,
                             stage_times={'receive': frame.receive_time_ns})
        except ValueError as exc:   # e.g. larger than max_width x max_height
            return self._skip(str(exc))
        self.ingested += 1
        return None

    def _summary(self) -> None:
        if self._diag_pub is None:
            return
        stats = self.frame_reader.stats if self.frame_reader is not None else {}
        ok = self.skipped == 0
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK if ok else DiagnosticStatus.WARN, name='frame_ingest',
            message='ok' if ok else 'frames skipped',
            hardware_id=self.params['frame_channel'],
            values=[KeyValue(key=k, value=str(v)) for k, v in (
                ('ingested', self.ingested), ('skipped', self.skipped),
                ('unpaired', stats.get('dropped', 0)))])
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``frame_ingest`` executable."""
    return run_node(FrameIngestNode, args)


if __name__ == '__main__':
    main()
