# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""What the frame-reading nodes share: the one frame check, extrinsics, the segmentation hand-off.

- ``GATE_PARAMS``: the deployment gate's parameters.
- :class:`BadFrameError`, :func:`frame_inputs` (colour + depth) and :func:`depth_inputs` (depth
  only): every stage that reads frames checks them here, so a bad frame gives the same reason
  in every stage's log and ``/diagnostics``.
- :func:`labels_message` / :func:`labels_from_message`: the object locator's segmentation on
  ``/edge_loop/labels`` (sensor_msgs/Image ``mono8``, ``mono16`` past 255 objects; 0 =
  background, k = the k-th pose of ``/edge_loop/objects`` with the same stamp), which the grasp
  planner pairs by stamp with that PoseArray instead of running the locator again.
- :class:`LabelWriter` / :class:`LabelReader`: how the label image travels. With
  ``transport: shm`` it goes as an iceoryx2 loan on its own channel (``<frame_channel>/labels``,
  one ``mono8``/``mono16`` plane, the stamp in the sample header) and the Image topic is
  published only while someone subscribes (RViz, bags); with ``ros`` (or when shared memory
  is unusable) it is the Image topic. A 300 KB Image per frame over DDS made the locator's
  publish stall under load (the real-time replay deactivated the controller).
- :class:`PerceptionPairing`: that pairing, by exact stamp, with a count of frames whose
  locator result never came.
- :func:`extrinsics_from`: the camera pose from the parameters (``extrinsics_source:
  params``) or from TF (``tf``: ``world_frame`` -> ``camera_frame`` looked up once at
  configure, for a camera fixed to the cell; :func:`lookup_extrinsics` is the pure part).
  Where tf2_ros does not import (PyPI ROS wheels), ``tf`` fails configure naming the fix:
  the parameters are never used in its place.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from edge_loop import topics
from edge_loop.images import COLOR_ENCODINGS, DEPTH_ENCODINGS, fill_image, image_to_array, to_rgb
from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.nodes.stage_base import ConfigError, Param

# The deployment gate of a verified stage.
GATE_PARAMS = (
    Param('require_verified', True,
          'Refuse to configure unless the kernel matches config/verified.json (make verify)'),
    Param('verified_record', '', 'Deployment record to check (empty: config/verified.json)'),
)

LABEL_ENCODINGS = {np.dtype(np.uint8): 'mono8', np.dtype(np.uint16): 'mono16'}


class BadFrameError(ValueError):
    """A frame the stage cannot use; the message says why (goes to the log and diagnostics)."""


def extrinsics_from(params: dict[str, Any], node: Any = None) -> Extrinsics:
    """Camera pose from the parameters or, with ``extrinsics_source: tf``, from TF.

    ConfigError when the parameters are invalid, when tf2_ros is missing, or when TF has no
    transform ``world_frame`` -> ``camera_frame`` within ``tf_timeout_s``.
    """
    if params.get('extrinsics_source', 'params') == 'tf':
        if node is None:
            raise ConfigError('extrinsics_source tf: this stage cannot read TF (no node given)')
        return extrinsics_from_tf(node, params['world_frame'], params['camera_frame'],
                                  params['tf_timeout_s'])
    try:
        return Extrinsics.from_params(params['camera_position'], params['camera_orientation'])
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def tf_unavailable() -> str:
    """Why tf2_ros cannot be used here ('' when it imports)."""
    try:
        import tf2_ros  # noqa: F401
    except ImportError as exc:
        return (f"extrinsics_source 'tf' needs tf2_ros, which does not import here "
                f'({type(exc).__name__}: {exc}): install it with the ROS distribution '
                '(apt install ros-jazzy-tf2-ros; the PyPI ROS wheels have no tf2), or set '
                'extrinsics_source: params with camera_position / camera_orientation')
    return ''


def extrinsics_from_transform(transform: Any) -> Extrinsics:
    """Extrinsics of a geometry_msgs/Transform (the camera's pose in the world frame)."""
    t, q = transform.translation, transform.rotation
    position = [float(t.x), float(t.y), float(t.z)]
    orientation = [float(q.x), float(q.y), float(q.z), float(q.w)]
    norm = math.sqrt(sum(v * v for v in orientation))
    if not all(math.isfinite(v) for v in position + orientation) or norm < 1e-6:
        raise ConfigError(f'TF camera pose is not usable: position {position}, '
                          f'orientation {orientation}')
    return Extrinsics.from_params(position, [v / norm for v in orientation])


def lookup_extrinsics(lookup: Callable[[str, str], Any], world_frame: str, camera_frame: str,
                      timeout_s: float, poll_s: float = 0.05,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> Extrinsics:
    """The camera pose from ``lookup(target, source)`` (a TransformStamped), retried.

    ``lookup`` is tf2's ``Buffer.lookup_transform(world_frame, camera_frame, latest)``: the
    transform taking camera points into the world, which is the camera's pose there. TF
    fills in as its publishers are discovered, so a failing lookup is retried every
    ``poll_s`` until ``timeout_s``; then ConfigError names both frames and tf2's last reason.
    """
    deadline = clock() + timeout_s
    while True:
        try:
            stamped = lookup(world_frame, camera_frame)
        except Exception as exc:  # noqa: BLE001 - tf2's Lookup/Connectivity/Extrapolation
            last = f'{type(exc).__name__}: {exc}'
        else:
            return extrinsics_from_transform(stamped.transform)
        if clock() >= deadline:
            raise ConfigError(f'no transform {world_frame} -> {camera_frame} in TF after '
                              f'{timeout_s:g} s ({last}); is the robot publishing the camera '
                              f'(ros2 run tf2_ros tf2_echo {world_frame} {camera_frame})?')
        sleep(poll_s)


def extrinsics_from_tf(node: Any, world_frame: str, camera_frame: str,
                       timeout_s: float) -> Extrinsics:
    """Look the camera pose up in TF once (ConfigError when tf2_ros is missing or TF lacks it).

    A private listener node with its own executor thread fills the buffer: configure runs
    inside the stage's executor, which cannot deliver /tf_static to it meanwhile.
    """
    why = tf_unavailable()
    if why:
        raise ConfigError(why)
    import rclpy
    import tf2_ros
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.time import Time

    # Without the process's arguments: its '-r __node:=<stage>' would give this node the
    # stage's name too.
    listener_node = rclpy.create_node(f'{node.get_name()}_tf_lookup',
                                      namespace=node.get_namespace(), context=node.context,
                                      start_parameter_services=False, enable_rosout=False,
                                      use_global_arguments=False)
    buffer = tf2_ros.Buffer()
    listener = tf2_ros.TransformListener(buffer, listener_node, spin_thread=False)
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(listener_node)
    thread = threading.Thread(target=executor.spin, name='tf-lookup', daemon=True)
    thread.start()
    try:
        ext = lookup_extrinsics(lambda target, source: buffer.lookup_transform(
            target, source, Time()), world_frame, camera_frame, timeout_s)
    finally:
        executor.shutdown(timeout_sec=1.0)
        thread.join(timeout=1.0)
        listener.unregister()
        listener_node.destroy_node()
    node.get_logger().info(f'camera pose from TF ({world_frame} -> {camera_frame}): '
                           f'position {[round(float(v), 4) for v in ext.translation]}')
    return ext


def depth_inputs(frame: Any) -> tuple[np.ndarray, Intrinsics]:
    """(depth view, intrinsics) of a frame, or BadFrameError."""
    depth = frame.depth
    if depth is None:
        raise BadFrameError('frame without a depth image')
    if frame.depth_encoding not in DEPTH_ENCODINGS:
        raise BadFrameError(f'depth encoding {frame.depth_encoding!r} not supported '
                            f'(use {" or ".join(DEPTH_ENCODINGS)})')
    if depth.ndim != 2:
        raise BadFrameError(f'depth image has shape {depth.shape}, expected (H, W)')
    expected = np.float32 if frame.depth_encoding == '32FC1' else np.uint16
    if depth.dtype != expected:
        raise BadFrameError(f'depth dtype {depth.dtype} does not match {frame.depth_encoding}')
    info = frame.camera_info
    if info is None:
        raise BadFrameError('missing camera_info')
    if (int(info.width), int(info.height)) != (depth.shape[1], depth.shape[0]):
        raise BadFrameError(f'camera_info is {info.width}x{info.height} but the depth image is '
                            f'{depth.shape[1]}x{depth.shape[0]}')
    try:
        intr = Intrinsics.from_k(list(info.k), info.width, info.height)
    except ValueError as exc:
        raise BadFrameError(str(exc)) from exc
    with np.errstate(invalid='ignore'):
        if not np.any(depth > 0):   # NaN compares false: all-NaN float depth is caught too
            raise BadFrameError('no valid depth pixel in the frame (all zero/NaN)')
    return depth, intr


def frame_inputs(frame: Any) -> tuple[np.ndarray, np.ndarray, Intrinsics]:
    """(colour RGB view, depth view, intrinsics) of a frame, or BadFrameError."""
    color, depth = frame.color, frame.depth
    if color is None or depth is None:
        raise BadFrameError('frame without a colour or a depth image')
    if frame.color_encoding not in COLOR_ENCODINGS:
        raise BadFrameError(f'colour encoding {frame.color_encoding!r} not supported '
                            f'(use {" or ".join(COLOR_ENCODINGS)})')
    if color.ndim != 3 or color.shape[2] != 3:
        raise BadFrameError(f'colour image has shape {color.shape}, expected (H, W, 3)')
    if depth.ndim == 2 and color.shape[:2] != depth.shape:
        raise BadFrameError(f'size mismatch: colour {color.shape[1]}x{color.shape[0]}, depth '
                            f'{depth.shape[1]}x{depth.shape[0]} (depth must be aligned to '
                            'colour)')
    depth, intr = depth_inputs(frame)
    return to_rgb(color, frame.color_encoding), depth, intr


def delete_all(ns: str, header: Header) -> Marker:
    """A DELETEALL marker for namespace ``ns``."""
    return Marker(header=header, ns=ns, action=Marker.DELETEALL)


def labels_message(labels: np.ndarray, header: Header) -> Image:
    """The locator's label image as sensor_msgs/Image (mono8 or mono16, see the module doc)."""
    return fill_image(Image(header=header), labels, LABEL_ENCODINGS[labels.dtype])


def labels_from_message(msg: Image) -> np.ndarray:
    """The label image of a ``/edge_loop/labels`` message (ValueError when it is not one)."""
    if msg.encoding not in LABEL_ENCODINGS.values():
        raise ValueError(f'label image encoding {msg.encoding!r} is not mono8 or mono16')
    return image_to_array(msg)


def stamp_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def stamp_seconds(stamp: Any) -> float:
    """A builtin_interfaces/Time as float seconds."""
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


LABEL_MAX_WIDTH, LABEL_MAX_HEIGHT = 1920, 1080


def _label_channel(node: Any) -> str:
    from edge_loop.transport.api import domain_channel

    return domain_channel(node, f"{node.params['frame_channel']}/labels")


class LabelWriter:
    """The locator's end of the label channel (see the module docstring)."""

    def __init__(self, node: Any, qos_depth: int = 2) -> None:
        self._node = node
        self._pub = node.create_lifecycle_publisher(Image, topics.LABELS, qos_depth)
        self._shm = None
        if node.params['transport'] == 'shm':
            from edge_loop.transport import shm

            try:
                self._shm = shm.ShmPublisher(_label_channel(node), LABEL_MAX_WIDTH,
                                             LABEL_MAX_HEIGHT)
            except shm.ShmUnavailableError as exc:
                node.get_logger().warning(f'labels: {exc}; sending them as {topics.LABELS}')

    def write(self, labels: np.ndarray, header: Header) -> None:
        """Send one frame's label image, stamped ``header.stamp``."""
        if self._shm is not None:
            encoding = LABEL_ENCODINGS[labels.dtype]
            loan = self._shm.loan(None, None, labels.shape, encoding)
            loan.depth[...] = labels
            h = loan.header
            h.seq = self._shm.next_seq()
            h.stamp_sec, h.stamp_nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
            h.frame_id = header.frame_id.encode()[:63]
            loan.send(yield_cpu=False)
            if self._pub.get_subscription_count() == 0:
                return
        self._pub.publish(labels_message(labels, header))

    def close(self) -> None:
        """Release the channel and the publisher (idempotent)."""
        shm, self._shm = self._shm, None
        if shm is not None:
            shm.close()
        pub, self._pub = self._pub, None
        if pub is not None:
            self._node.destroy_publisher(pub)


class LabelReader:
    """The planner's end: ``callback(stamp_ns, labels)`` per label image (a private copy)."""

    def __init__(self, node: Any, callback: Any, qos_depth: int = 4) -> None:
        self._node = node
        self._callback = callback
        self._shm = None
        self._sub = None
        if node.params['transport'] == 'shm':
            from edge_loop.transport import shm

            try:
                self._shm = shm.ShmSubscriber(_label_channel(node), self._on_sample,
                                              lambda text: node.get_logger().warning(
                                                  f'labels: {text}'))
            except shm.ShmUnavailableError as exc:
                node.get_logger().warning(f'labels: {exc}; reading {topics.LABELS}')
        if self._shm is None:
            self._sub = node.create_subscription(Image, topics.LABELS, self._on_message,
                                                 qos_depth)

    def _on_sample(self, sample: Any, _receive_ns: int) -> None:
        from edge_loop.transport import shm

        info, _, labels = shm.decode(sample)
        stamp = info.stamp_sec * 1_000_000_000 + info.stamp_nanosec
        labels = np.array(labels)   # the sample goes back at once
        del sample
        self._callback(stamp, labels)

    def _on_message(self, msg: Image) -> None:
        try:
            labels = labels_from_message(msg)
        except ValueError as exc:
            self._node.get_logger().warning(f'labels ignored: {exc}',
                                            throttle_duration_sec=1.0)
            return
        self._callback(stamp_ns(msg.header.stamp), labels)

    def close(self) -> None:
        """Stop reading (idempotent)."""
        shm, self._shm = self._shm, None
        if shm is not None:
            shm.close()
        sub, self._sub = self._sub, None
        if sub is not None:
            self._node.destroy_subscription(sub)


class PerceptionPairing:
    """Pair a stage's own per-frame work with the locator's result for the same stamp.

    ``add(kind, stamp_ns, item)`` with kind ``frame`` (what the stage computed from the frame),
    ``objects`` (PoseArray) or ``labels`` (Image); returns ``{kind: item}`` once all three of a
    stamp are in. Pairing is by exact stamp only. A frame whose locator result has not come
    when a newer frame completes, or when more than ``depth`` stamps are pending, is dropped and
    counted in ``missing`` (the stage reports it: never a silent, wrong pairing). With
    ``window_ns`` a pending stamp is also dropped once a part ``window_ns`` newer came: on a
    starved machine the locator may be several frames behind, and a count of frames would
    drop results that are still on their way; ``depth`` then only bounds memory.
    """

    KINDS = ('frame', 'objects', 'labels')

    def __init__(self, depth: int = 4, window_ns: int | None = None) -> None:
        self.depth = max(1, depth)
        self.window_ns = window_ns
        self.missing = 0        # frames of this stage that never got the locator's result
        self.unmatched = 0      # locator results whose frame this stage never had
        self._pending: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _drop(self, entry: dict[str, Any]) -> None:
        if 'frame' in entry:
            self.missing += 1
        else:
            self.unmatched += 1

    def add(self, kind: str, stamp: int, item: Any) -> dict[str, Any] | None:
        """Add one part; the complete set of ``stamp`` when this was its last part."""
        if kind not in self.KINDS:
            raise ValueError(f'unknown kind {kind!r}')
        with self._lock:
            entry = self._pending.get(stamp)
            if entry is None:
                entry = self._pending[stamp] = {}
                while len(self._pending) > self.depth:
                    self._drop(self._pending.popitem(last=False)[1])
                if self.window_ns is not None:
                    for old in [k for k in self._pending if k < stamp - self.window_ns]:
                        self._drop(self._pending.pop(old))
            entry[kind] = item
            if len(entry) < len(self.KINDS):
                return None
            del self._pending[stamp]
            # Frames are answered in stamp order: anything older can no longer complete.
            for old in [k for k in self._pending if k < stamp]:
                self._drop(self._pending.pop(old))
            return entry

    def pending(self) -> int:
        """Stamps waiting for a part."""
        with self._lock:
            return len(self._pending)
