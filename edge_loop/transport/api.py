# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""FrameWriter / FrameReader: one interface over iceoryx2 loans (``shm``) and ROS topics.

``shm``: the producer loans a sample, fills it in place and publishes; consumers get read-only
views on the same memory in a dedicated thread woken by an iceoryx2 event. Every frame is also
announced on ``/edge_loop/frames`` (sensor_msgs/CameraInfo, header = frame stamp/frame_id) and
its intrinsics on ``/camera/color/camera_info``; standard Images go out on the contract topics
only while someone subscribes to them (RViz, bags, a consumer in ``ros`` mode on another host).

``ros``: the producer publishes Image + Image + CameraInfo on the contract topics (filled in
place: the loan's arrays are views on the messages' bytes); the consumer pairs the three by
stamp and calls the same callback with views on the received bytes. Processes that exchange
images this way need ``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA`` in their environment.

A ``shm`` reader falls back to ``ros`` on its own when shared memory cannot be opened, and
when the producer is on another host: its frames are announced on ``/edge_loop/frames`` but
``REMOTE_AFTER_ANNOUNCEMENTS`` of them came and not one sample (the announcement watch ends
at the first sample).
"""

from __future__ import annotations

import array
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from edge_loop import topics
from edge_loop.images import ImageFormatError, image_to_array
from edge_loop.transport import shm as shm_mod
from edge_loop.transport.frame import RgbdFrame
from edge_loop.transport.header import (
    MAX_STAGES,
    FrameHeader,
    plane_geometry,
    read_camera_info,
)
from edge_loop.transport.header import write_camera_info as _write_info
from edge_loop.transport.sync import StampSynchroniser

TRANSPORTS = ('shm', 'ros')
QOS_CHOICES = ('reliable', 'best_effort')
PUBLISHER_DEPTH = 5
ANNOUNCE_DELAY_S = 0.001   # the consumers just woken run first; the announcement follows
# A shm reader that has seen this many frame announcements and not one sample reads ROS images
# instead (the producer is on another host); 15 is 1 s at the default 15 Hz camera.
REMOTE_AFTER_ANNOUNCEMENTS = 15


def image_qos(qos: str = 'reliable', depth: int = 2) -> QoSProfile:
    """QoS of the image topics: keep-last ``depth`` (bounded), reliable or best effort."""
    if qos not in QOS_CHOICES:
        raise ValueError(f'qos {qos!r} not one of {", ".join(QOS_CHOICES)}')
    reliability = (ReliabilityPolicy.RELIABLE if qos == 'reliable'
                   else ReliabilityPolicy.BEST_EFFORT)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=reliability)


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _readonly_view(arr: np.ndarray, data: Any) -> np.ndarray:
    """Return ``arr`` on a read-only buffer when it is a view on ``data``.

    A consumer must not be able to flip a view back to writeable; a private copy (when
    image_to_array had to convert) is only flagged read-only.
    """
    raw = np.frombuffer(data, dtype=np.uint8) if len(data) else None
    if raw is not None and arr.flags.c_contiguous and arr.ctypes.data == raw.ctypes.data:
        ro = np.frombuffer(memoryview(data).cast('B').toreadonly(), dtype=np.uint8)
        return ro[:arr.nbytes].view(arr.dtype).reshape(arr.shape)
    arr.flags.writeable = False
    return arr


def domain_channel(node: Any, channel: str) -> str:
    """The iceoryx2 service of ``channel`` in ``node``'s ROS domain.

    iceoryx2 services are machine-wide, ROS graphs are per domain: two graphs on one machine
    (parallel tests, two simulated robots) must not share frames.
    """
    try:
        domain = int(node.context.get_domain_id())
    except (AttributeError, TypeError, ValueError):
        domain = 0
    return channel if domain == 0 else f'{channel}/domain_{domain}'



def _resolve(node: Any, transport: str, what: str) -> str:
    if transport not in TRANSPORTS:
        raise ValueError(f'transport {transport!r} not one of {", ".join(TRANSPORTS)}')
    if transport == 'shm':
        ok, why = shm_mod.available()
        if not ok:
            node.get_logger().warning(f'{what}: shared memory unavailable ({why}); '
                                      f"falling back to transport 'ros'")
            return 'ros'
    return transport


def _shm_camera_info(sample: Any) -> Any:
    """CameraInfo carried in a sample's header, or None when the producer gave none."""
    header = FrameHeader.from_address(sample.user_header_ptr)
    if not header.has_info:
        return None
    msg = read_camera_info(header.info, CameraInfo())
    msg.header.stamp.sec, msg.header.stamp.nanosec = header.stamp_sec, header.stamp_nanosec
    msg.header.frame_id = header.frame_id.decode()
    del sample   # only held so that the header stays mapped until here
    return msg


def _planes(color: np.ndarray | None, depth: np.ndarray | None) -> tuple[np.ndarray, ...]:
    if color is None:
        return () if depth is None else (depth,)
    return (color,) if depth is None else (color, depth)


def _shm_stage_times(sample: Any, wake_ns: int, receive_ns: int) -> dict[str, int]:
    """The producer's stage timestamps plus this consumer's wake and receive."""
    header = FrameHeader.from_address(sample.user_header_ptr)
    times = {header.stages[i].name.decode(): int(header.stages[i].t_ns)
             for i in range(min(int(header.n_stages), MAX_STAGES))}
    times['wake'] = wake_ns
    times['receive'] = receive_ns
    del sample
    return times


class _Announcer:
    """A worker thread publishing the per-frame ROS messages (bounded queue, drop-newest)."""

    def __init__(self, announce: Callable[[Any, bool], None], depth: int = 8) -> None:
        self._announce = announce
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name='frame-announcer', daemon=True)
        self._thread.start()

    def submit(self, info: Any, with_info: bool) -> None:
        try:
            self._queue.put_nowait((info, with_info))
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            time.sleep(ANNOUNCE_DELAY_S)
            with contextlib.suppress(Exception):   # a publisher destroyed at shutdown
                self._announce(*item)

    def close(self) -> None:
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=2.0)
        self._thread.join(timeout=5.0)


class FrameLoan:
    """A frame being written: fill ``color``/``depth`` in place, then :meth:`publish`."""

    def __init__(self, writer: FrameWriter, color: np.ndarray | None, depth: np.ndarray | None,
                 color_encoding: str | None, depth_encoding: str | None,
                 shm_loan: Any = None, msgs: tuple[Any, Any] = (None, None)) -> None:
        self._writer = writer
        self.color = color
        self.depth = depth
        self.color_encoding = color_encoding
        self.depth_encoding = depth_encoding
        self.loan_time_ns = time.monotonic_ns()
        self._shm_loan = shm_loan
        self._msgs = msgs
        self.published = False

    def __enter__(self) -> FrameLoan:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.published:
            self.release()

    def release(self) -> None:
        """Give the loan back without publishing."""
        if self._shm_loan is not None:
            self._shm_loan.release()
        self.color = self.depth = None

    def publish(self, stamp: Any, frame_id: str, camera_info: Any = None,
                stage_times: dict[str, int] | None = None) -> int:
        """Publish the frame; returns its sequence number. The arrays are invalid after."""
        if self.published:
            raise RuntimeError('frame already published')
        if hasattr(stamp, 'to_msg'):   # an rclpy.time.Time
            stamp = stamp.to_msg()
        self.published = True
        seq = self._writer._publish(self, stamp, frame_id, camera_info, stage_times or {})
        self.color = self.depth = None
        return seq


class FrameWriter:
    """Producer end of a frame channel (see the module docstring)."""

    def __init__(self, node: Any, transport: str = 'shm', channel: str = 'edge_loop/rgbd',
                 max_width: int = 1920, max_height: int = 1080, *, image_topics: bool = True,
                 camera_info_topic: bool = True, qos: str = 'reliable') -> None:
        self.node = node
        self.channel = channel
        self.transport = _resolve(node, transport, 'FrameWriter')
        self.image_topics = image_topics or self.transport == 'ros'
        self.stats = {'published': 0, 'images_published': 0}
        self._shm: shm_mod.ShmPublisher | None = None
        self._seq = 0
        if self.transport == 'shm':
            try:
                self._shm = shm_mod.ShmPublisher(domain_channel(node, channel), max_width,
                                                 max_height)
            except shm_mod.ShmUnavailableError as exc:
                node.get_logger().warning(f"FrameWriter: {exc}; falling back to transport 'ros'")
                self.transport = 'ros'
                self.image_topics = True
        self._frames_pub = node.create_publisher(CameraInfo, topics.FRAMES, 10)
        self._info_pub = (node.create_publisher(CameraInfo, topics.CAMERA_INFO, 10)
                          if camera_info_topic else None)
        self._color_pub = self._depth_pub = None
        if self.image_topics:
            # A deeper writer history: Fast DDS sends large samples asynchronously and drops
            # one that a newer sample displaces before its fragments are all out.
            pub_qos = image_qos(qos, depth=PUBLISHER_DEPTH)
            self._color_pub = node.create_publisher(Image, topics.COLOR, pub_qos)
            self._depth_pub = node.create_publisher(Image, topics.DEPTH, pub_qos)
        self._ros_buffers: dict[tuple[Any, ...], tuple[Any, np.ndarray]] = {}
        # shm: the per-frame ROS messages go out from a worker thread, so that the producer
        # leaves the CPU to the consumers it has just woken (measurable on a loaded machine).
        self._announcer = _Announcer(self._announce) if self._shm is not None else None
        self._closed = False

    # --- producing ------------------------------------------------------------------------
    def loan(self, color_shape: tuple[int, ...] | None = None, color_encoding: str | None = None,
             depth_shape: tuple[int, ...] | None = None, depth_encoding: str | None = None,
             ) -> FrameLoan:
        """Loan a frame; use as a context manager (an unpublished loan is given back)."""
        if self._closed:
            raise RuntimeError('FrameWriter is closed')
        if color_shape is None and depth_shape is None:
            raise ValueError('a frame needs a colour or a depth plane')
        if self._shm is not None:
            shm_loan = self._shm.loan(color_shape, color_encoding, depth_shape, depth_encoding)
            return FrameLoan(self, shm_loan.color, shm_loan.depth, color_encoding,
                             depth_encoding, shm_loan=shm_loan)
        color_msg, color = self._ros_plane('color', color_shape, color_encoding)
        depth_msg, depth = self._ros_plane('depth', depth_shape, depth_encoding)
        return FrameLoan(self, color, depth, color_encoding, depth_encoding,
                         msgs=(color_msg, depth_msg))

    def _ros_plane(self, which: str, shape: tuple[int, ...] | None, encoding: str | None,
                   ) -> tuple[Any, np.ndarray | None]:
        """An Image message reused per shape whose bytes the loan writes in place."""
        if shape is None:
            return None, None
        dtype, nbytes = plane_geometry(shape, encoding)
        key = (which, tuple(shape), encoding)
        cached = self._ros_buffers.get(key)
        if cached is None:
            if len(self._ros_buffers) >= 8:   # the frame size changed: forget old sizes
                self._ros_buffers.clear()
            msg = Image()
            msg.height, msg.width = int(shape[0]), int(shape[1])
            msg.encoding = encoding
            msg.is_bigendian = 0
            msg.step = nbytes // msg.height
            msg.data = array.array('B', bytes(nbytes))
            view = np.frombuffer(msg.data, dtype=np.uint8).view(dtype).reshape(shape)
            cached = self._ros_buffers[key] = (msg, view)
        return cached

    def matched_subscribers(self) -> int:
        """Readers that every ROS image/info writer of this channel has matched (DDS-side).

        Unlike ``node.count_subscribers`` (the graph cache), a writer that has matched a
        reliable reader keeps what it publishes until that reader acknowledges it, so a
        producer that must not lose its first frame waits on this.
        """
        pubs = [p for p in (self._color_pub, self._depth_pub, self._info_pub) if p is not None]
        return min((p.get_subscription_count() for p in pubs), default=0)

    def _subscribed(self, pub: Any) -> bool:
        return pub is not None and (self.transport == 'ros' or pub.get_subscription_count() > 0)

    def _publish(self, loan: FrameLoan, stamp: Any, frame_id: str, camera_info: Any,
                 stage_times: dict[str, int]) -> int:
        self._seq += 1
        seq = self._seq
        color, depth = loan.color, loan.depth
        if loan._shm_loan is not None:
            h = loan._shm_loan.header
            h.seq = seq
            h.stamp_sec, h.stamp_nanosec = int(stamp.sec), int(stamp.nanosec)
            h.frame_id = frame_id.encode()[:63]
            if camera_info is not None:
                _write_info(h.info, camera_info)
                h.has_info = 1
            times = {'loan': loan.loan_time_ns, **stage_times}
            times['publish'] = time.monotonic_ns()
            items = list(times.items())[:MAX_STAGES]
            for i, (name, t_ns) in enumerate(items):
                h.stages[i].name = name.encode()[:23]
                h.stages[i].t_ns = int(t_ns)
            h.n_stages = len(items)
            loan._shm_loan.send()   # consumers wake now; the ROS side follows
        else:
            for msg in loan._msgs:
                if msg is not None:
                    msg.header.stamp = stamp
                    msg.header.frame_id = frame_id
        self._publish_images(loan, color, depth, stamp, frame_id)
        info = self._frame_info(loan, color, depth, stamp, frame_id, camera_info)
        with_info = camera_info is not None or self.transport == 'ros'
        if self._announcer is not None:
            self._announcer.submit(info, with_info)
        else:
            self._announce(info, with_info)
        self.stats['published'] += 1
        return seq

    @staticmethod
    def _frame_info(loan: FrameLoan, color: np.ndarray | None, depth: np.ndarray | None,
                    stamp: Any, frame_id: str, camera_info: Any) -> Any:
        """The frame's CameraInfo for /edge_loop/frames and camera_info (a snapshot)."""
        info = CameraInfo()
        if camera_info is not None:
            info.height, info.width = camera_info.height, camera_info.width
            info.distortion_model = camera_info.distortion_model
            info.d, info.k = camera_info.d, camera_info.k
            info.r, info.p = camera_info.r, camera_info.p
            info.binning_x, info.binning_y = camera_info.binning_x, camera_info.binning_y
            info.roi.x_offset, info.roi.y_offset = camera_info.roi.x_offset, \
                camera_info.roi.y_offset
            info.roi.height, info.roi.width = camera_info.roi.height, camera_info.roi.width
            info.roi.do_rectify = camera_info.roi.do_rectify
        else:
            plane = color if color is not None else depth
            info.height, info.width = int(plane.shape[0]), int(plane.shape[1])
        info.header.stamp = stamp
        info.header.frame_id = frame_id
        return info

    def _announce(self, info: Any, with_info: bool) -> None:
        self._frames_pub.publish(info)
        if with_info and self._info_pub is not None:
            self._info_pub.publish(info)

    def _publish_images(self, loan: FrameLoan, color: np.ndarray | None,
                        depth: np.ndarray | None, stamp: Any, frame_id: str) -> None:
        from edge_loop.images import fill_image

        for pub, plane, encoding, msg in ((self._color_pub, color, loan.color_encoding,
                                           loan._msgs[0]),
                                          (self._depth_pub, depth, loan.depth_encoding,
                                           loan._msgs[1])):
            if plane is None or not self._subscribed(pub):
                continue
            if msg is None:   # shm: a copy for RViz/bags/ros consumers, only when subscribed
                msg = fill_image(Image(), plane, encoding)
                msg.header.stamp = stamp
                msg.header.frame_id = frame_id
            pub.publish(msg)
            self.stats['images_published'] += 1

    def close(self) -> None:
        """Release the shared-memory channel and the ROS publishers (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._announcer is not None:
            self._announcer.close()
            self._announcer = None
        if self._shm is not None:
            self._shm.close()
            self._shm = None
        for pub in (self._frames_pub, self._info_pub, self._color_pub, self._depth_pub):
            if pub is not None:
                with contextlib.suppress(Exception):
                    self.node.destroy_publisher(pub)
        self._ros_buffers.clear()


class FrameReader:
    """Consumer end of a frame channel: ``callback(frame: RgbdFrame)`` per frame.

    ``shm``: the callback runs in the reader's own thread, never concurrently with itself; keep
    it short or hand the frame off. ``ros``: it runs in the node's executor.
    ``stats``: received; dropped = superseded (shm: frames replaced by a newer one before this
    reader took them, drop-oldest) + unpaired (ros: colour/depth/camera_info sets that never
    completed); copies (payload copies found by the audit, plus the deserialisation copy of
    each plane over ROS); audited; restarts (producer restarts seen); errors; borrow_limit;
    remote_fallback (1 once a ``shm`` reader switched to ROS images because the producer's
    frames were announced but never arrived in shared memory: it runs on another host);
    polled / poll_misses (``EDGE_LOOP_SHM_POLL_US``: frames found by polling near their
    predicted send, and polling windows that ended without one).
    """

    def __init__(self, node: Any, transport: str = 'shm', channel: str = 'edge_loop/rgbd',
                 callback: Callable[[RgbdFrame], None] | None = None, audit: bool = False, *,
                 qos: str = 'reliable', sync_tolerance_ns: int = 0, queue_size: int = 8,
                 remote_fallback: bool = True) -> None:
        if callback is None:
            raise ValueError('FrameReader needs a callback')
        self.node = node
        self.channel = channel
        self.callback = callback
        self.audit = audit
        self.transport = _resolve(node, transport, 'FrameReader')
        self.stats = {'received': 0, 'dropped': 0, 'superseded': 0, 'unpaired': 0, 'copies': 0,
                      'audited': 0, 'restarts': 0, 'errors': 0, 'borrow_limit': 0,
                      'remote_fallback': 0, 'polled': 0, 'poll_misses': 0}
        self._writer_id = 0
        self._last_seq = 0
        self._last_error_log = 0.0
        self._shm: shm_mod.ShmSubscriber | None = None
        self._subs: list[Any] = []
        self._ros_args = (qos, sync_tolerance_ns, queue_size)
        self._shm_seen = False
        self._announced = 0
        self._remote_watch: Any = None
        self._closed = False
        if self.transport == 'shm':
            try:
                self._shm = shm_mod.ShmSubscriber(domain_channel(node, channel), self._on_sample,
                                                  self._log_error)
            except shm_mod.ShmUnavailableError as exc:
                node.get_logger().warning(f"FrameReader: {exc}; falling back to transport 'ros'")
                self.transport = 'ros'
        if self.transport == 'shm' and remote_fallback:
            # A producer on another host announces its frames over DDS, but its loans live in
            # that host's memory: announcements without samples mean "read ROS images".
            self._remote_watch = node.create_subscription(CameraInfo, topics.FRAMES,
                                                          self._on_announcement, 10)
        if self.transport == 'ros':
            self._open_ros()

    def _open_ros(self) -> None:
        qos, sync_tolerance_ns, queue_size = self._ros_args
        self._sync = StampSynchroniser(queue_size=queue_size, tolerance_ns=sync_tolerance_ns)
        self._ros_seq = 0
        iq = image_qos(qos)
        node = self.node
        self._subs = [
            node.create_subscription(Image, topics.COLOR,
                                     lambda m: self._on_msg('color', m), iq),
            node.create_subscription(Image, topics.DEPTH,
                                     lambda m: self._on_msg('depth', m), iq),
            node.create_subscription(CameraInfo, topics.CAMERA_INFO,
                                     lambda m: self._on_msg('info', m), 10),
        ]

    # --- producer on another host ---------------------------------------------------------
    def _on_announcement(self, _msg: Any) -> None:
        if self._closed or self._remote_watch is None:
            return
        if self._shm_seen:   # the producer shares our memory: stop watching
            self._drop_remote_watch()
            return
        self._announced += 1
        if self._announced < REMOTE_AFTER_ANNOUNCEMENTS:
            return
        self._drop_remote_watch()
        self.node.get_logger().warning(
            f'FrameReader({self.channel}): {self._announced} frames announced on '
            f'{topics.FRAMES} and none arrived over shared memory: the producer is on another '
            "host (or in another iceoryx2 prefix); reading the ROS image topics (transport "
            "'ros') from now on")
        shm, self._shm = self._shm, None
        if shm is not None:
            shm.close()
        self.transport = 'ros'
        self.stats['remote_fallback'] = 1
        self._open_ros()

    def _drop_remote_watch(self) -> None:
        watch, self._remote_watch = self._remote_watch, None
        if watch is not None:
            with contextlib.suppress(Exception):
                self.node.destroy_subscription(watch)

    # --- shm ------------------------------------------------------------------------------
    def _on_sample(self, sample: Any, receive_ns: int) -> None:
        self._shm_seen = True
        sub = self._shm   # None only for a frame that beats the constructor's assignment
        info, color, depth = shm_mod.decode(sample, sub.views if sub is not None else None)
        writer_id, seq = info.writer_id, info.seq
        if writer_id != self._writer_id:
            if self._writer_id:
                self.stats['restarts'] += 1
            self._writer_id = writer_id
        elif seq > self._last_seq + 1:
            self.stats['superseded'] += seq - self._last_seq - 1
            self.stats['dropped'] += seq - self._last_seq - 1
        self._last_seq = seq
        # Decoded on first use; the partials hold the sample, so the header stays mapped.
        frame = RgbdFrame(
            color=color, depth=depth, color_encoding=info.color_encoding,
            depth_encoding=info.depth_encoding,
            stamp_ns=info.stamp_sec * 1_000_000_000 + info.stamp_nanosec,
            frame_id=info.frame_id, seq=seq, writer_id=writer_id,
            send_time_ns=info.send_ns, receive_time_ns=receive_ns, transport='shm',
            info_factory=functools.partial(_shm_camera_info, sample),
            stage_factory=functools.partial(_shm_stage_times, sample,
                                            sub.wake_ns if sub is not None else receive_ns,
                                            receive_ns),
            buffers=_planes(color, depth), on_audit=self._count_audit)
        del sample, color, depth
        self._deliver(frame)
        if self.audit:   # after the callback: the check costs the consumer, not the latency
            frame.audit(*frame._buffers)

    # --- ros ------------------------------------------------------------------------------
    def _on_msg(self, kind: str, msg: Any) -> None:
        done = self._sync.add(kind, _stamp_ns(msg.header.stamp), msg)
        self.stats['dropped'] = self.stats['unpaired'] = self._sync.evicted
        if done is None:
            return
        receive_ns = time.monotonic_ns()
        stamp_ns, parts = done
        try:
            color, depth = image_to_array(parts['color']), image_to_array(parts['depth'])
        except ImageFormatError as exc:
            self._log_error(f'bad image: {exc}')
            return
        color = _readonly_view(color, parts['color'].data)
        depth = _readonly_view(depth, parts['depth'].data)
        buffers = tuple(np.frombuffer(parts[k].data, dtype=np.uint8) for k in ('color', 'depth')
                        if len(parts[k].data))
        info = parts['info']
        self._ros_seq += 1
        frame = RgbdFrame(
            color=color, depth=depth, color_encoding=parts['color'].encoding,
            depth_encoding=parts['depth'].encoding, stamp_ns=stamp_ns,
            frame_id=parts['color'].header.frame_id, seq=self._ros_seq, writer_id=0,
            send_time_ns=0, receive_time_ns=receive_ns, transport='ros',
            info_factory=lambda: info, buffers=buffers, stage_times={'receive': receive_ns},
            on_audit=self._count_audit)
        # Each plane was deserialised out of the middleware's buffer: one copy per plane.
        self.stats['copies'] += 2
        if self.audit:
            frame.audit(color, depth)
        self._deliver(frame)

    # --- common ---------------------------------------------------------------------------
    def _count_audit(self, checked: int, copies: int) -> None:
        self.stats['audited'] += checked
        self.stats['copies'] += copies

    def _deliver(self, frame: RgbdFrame) -> None:
        self.stats['received'] += 1
        if self._shm is not None:
            self.stats['borrow_limit'] = self._shm.borrow_limit_hits
            self.stats['polled'] = self._shm.polled
            self.stats['poll_misses'] = self._shm.poll_misses
        try:
            self.callback(frame)
        except Exception as exc:  # noqa: BLE001 - a stage bug must not kill the transport
            self._log_error(f'frame callback raised {type(exc).__name__}: {exc}')

    def _log_error(self, text: str) -> None:
        self.stats['errors'] += 1
        now = time.monotonic()
        if now - self._last_error_log > 2.0:
            self._last_error_log = now
            with contextlib.suppress(Exception):
                self.node.get_logger().warning(f'FrameReader({self.channel}): {text}')

    def pending(self) -> int:
        """Images waiting for their partner (``ros`` transport); 0 with shared memory."""
        sync = getattr(self, '_sync', None)
        return int(sync.pending()) if sync is not None else 0

    def close(self) -> None:
        """Stop receiving and release the channel (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._shm is not None:
            self._shm.close()
            self._shm = None
        self._drop_remote_watch()
        for sub in self._subs:
            with contextlib.suppress(Exception):
                self.node.destroy_subscription(sub)
        self._subs = []
