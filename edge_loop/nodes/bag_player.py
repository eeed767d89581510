# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""bag_player: replay a rosbag2 folder into the loop, timed or in lock-step.

- ``mode: timed`` keeps the recorded spacing, scaled by ``rate``; ``lockstep`` publishes the
  next camera frame only once the loop answered the previous one (a message on
  every ``lockstep_topics`` stamped with that frame's stamp) or ``lockstep_timeout_s`` passed, for
  deterministic regression on a noisy machine.
- Waits until ``wait_topics`` have subscribers before the first message (ros2/rosbag2#109),
  and, with ``wait_for_manager``, until that lifecycle manager reports the whole graph active
  (its latched ``~/active``): a replay that starts while the stages are still configuring
  loses its first frames.
- ``loop`` starts again at the end (new stamps each pass) without end, ``passes`` plays the
  bag that many times, then says ``~/done`` (a long replay from a short bag), ``rate`` scales
  the recorded spacing, ``start_paused`` waits for ``~/resume``; ``~/pause`` and
  ``~/resume`` (Trigger) work at any time.
- ``publish_clock`` publishes /clock from the bag's receive times (``ros2 bag play --clock``),
  at ``clock_rate_hz`` and before every camera frame, for graphs on ``use_sim_time``; across a
  ``loop`` the clock keeps running forward. The bag's own /clock is skipped
  (``skip_topics``).
- ``restamp`` rewrites header stamps to the replay time (same original stamp -> same new
  stamp, so colour, depth and camera_info of a frame still pair), which makes
  ``now - stamp`` a real latency; off, stamps and bytes go out exactly as recorded.
- ``transport: shm``: colour, depth and camera_info of a frame are written once, straight
  from the bag's bytes into a shared-memory loan (the FrameWriter announces the frame and
  publishes camera_info and, while someone subscribes, the Image topics); ``ros`` publishes
  the recorded messages as they are.
- A missing, truncated or unknown-type bag fails ``configure`` with the reason.
- Bags from ``ros2 bag record`` on a robot: the camera topics are found under any namespace
  (realsense-ros 4.x records /camera/camera/color/image_raw, ...) and replayed under the
  contract's names (remap those with camera_ns as for a live camera); topics recorded as
  transient local (the metadata's offered QoS, e.g. /tf_static) are replayed latched; images
  recorded only compressed (image_transport's ``compressed`` colour and ``compressedDepth``
  depth) are decoded with OpenCV into the shared-memory frames (``transport: shm`` only);
  other compressed-only bags fail ``configure`` with what to record instead.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import rclpy
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from edge_loop import topics
from edge_loop.bags import (
    COMPRESSED_TYPE,
    BagError,
    BagMessage,
    BagReader,
    cdr_stamp_ns,
    cdr_with_stamp,
    find_camera_topics,
    header_first,
    message_class,
    transient_local_topics,
)
from edge_loop.images import ImageFormatError, decode_compressed, image_to_array
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node
from edge_loop.transport import FrameWriter

_LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                      reliability=ReliabilityPolicy.RELIABLE)


CAMERA_TOPICS = (topics.COLOR, topics.DEPTH, topics.CAMERA_INFO)
CANONICAL = {'color': topics.COLOR, 'depth': topics.DEPTH, 'info': topics.CAMERA_INFO}


class BagPlayer(StageNode):
    """Lifecycle node that replays a bag (see module docstring)."""

    PARAMS = (
        Param('bag', '', 'rosbag2 folder to replay (MCAP or sqlite3 storage)',
              check=lambda s: None if s else 'a bag path is required'),
        Param('mode', 'timed', 'timed (recorded spacing / rate) or lockstep',
              choices=('timed', 'lockstep')),
        Param('rate', 1.0, 'Playback speed factor for timed mode', min=0.01, max=100.0),
        Param('loop', False, 'Start again at the end of the bag, without end'),
        Param('passes', 1, 'Times through the bag before ~/done (loop: endless); a pass after '
              'the first gets new stamps as with loop', min=1),
        Param('restamp', False, 'Rewrite header stamps to the replay time'),
        Param('wait_topics', [topics.CAMERA_INFO],
              'Topics that need a subscriber before playback starts', type='str[]'),
        Param('wait_timeout_s', 60.0, 'How long to wait for those subscribers', min=0.0,
              max=3600.0),
        Param('frame_topic', topics.CAMERA_INFO, 'Topic whose messages delimit camera frames'),
        Param('lockstep_topics', [topics.ARM_CMD],
              'Answers (stamped with the frame) that release the next frame: list every stage '
              'whose output is checked, or a fast stage lets frames overtake a slow one',
              type='str[]'),
        Param('lockstep_timeout_s', 2.0, 'Give up waiting for an answer after this long',
              min=0.001, max=600.0),
        Param('skip_topics', [topics.CLOCK],
              'Topics in the bag not to replay (a recorded /clock contradicts restamping)',
              type='str[]'),
        Param('start_delay_s', 0.0, 'Pause after subscribers matched, before the first message',
              min=0.0, max=60.0),
        Param('start_paused', False, 'Wait for ~/resume before the first message'),
        Param('publish_clock', False,
              'Publish /clock from the bag (for use_sim_time graphs; use with restamp false)'),
        Param('clock_rate_hz', 100.0, '/clock messages per second of bag time (publish_clock)',
              min=1.0, max=10000.0),
        Param('wait_for_manager', '',
              "Lifecycle manager whose latched ~/active must be true before playing ('': "
              'do not wait)'),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('bag_player', **kwargs)
        self._reader: BagReader | None = None
        self._topic_pubs: dict[str, Any] = {}
        self._types: dict[str, type] = {}
        self._raw: dict[str, bool] = {}   # topic -> publish the recorded bytes (header first)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._answered = threading.Condition()
        self._answers: dict[int, set[str]] = {}
        self._answer_subs: list[Any] = []
        self._done_pub = None
        self._matched: dict[str, int] = {}
        self._writer: FrameWriter | None = None
        self._frame_parts: dict[int, dict[str, Any]] = {}
        self._typestore = None
        self._canonical: dict[str, str] = {}
        self.published = 0
        self.lockstep_timeouts = 0
        self._resumed = threading.Event()
        self._graph_active = threading.Event()
        self._clock_pub = None
        self._clock_offset_ns = 0     # added to bag time on each loop pass (monotonic /clock)
        self._last_clock_ns = -1
        self._pause_services: list[Any] = []   # not _services: rclpy.Node keeps its own there
        self._extra_subs: list[Any] = []

    # --- lifecycle --------------------------------------------------------------------------
    def configure_stage(self) -> None:
        try:
            self._reader = BagReader(self.params['bag']).open()
        except BagError as exc:
            raise ConfigError(f"parameter 'bag' = {self.params['bag']!r}: {exc}") from None
        if self._reader.message_count == 0:
            raise ConfigError(f"parameter 'bag' = {self.params['bag']!r}: bag has no messages")
        bag_topics = self._reader.topics
        try:
            camera = find_camera_topics(bag_topics)
        except BagError as exc:
            raise ConfigError(f"parameter 'bag' = {self.params['bag']!r}: {exc}") from None
        # recorded camera topic -> the contract's name it is replayed under
        self._canonical = {camera[role]: CANONICAL[role] for role in camera}
        latched = transient_local_topics(self._reader)
        if self.params['transport'] == 'shm' and camera:
            width, height = self._frame_size()
            self._writer = FrameWriter(self, transport='shm', channel=self.params['frame_channel'],
                                       max_width=width, max_height=height)
            if self._writer.transport != 'shm':   # fell back: replay the recorded messages
                self._writer.close()
                self._writer = None
        if camera and bag_topics[camera['color']] == COMPRESSED_TYPE and self._writer is None:
            raise ConfigError(f"parameter 'bag' = {self.params['bag']!r}: its images are "
                              'compressed; they are decoded into shared-memory frames, which '
                              "need transport 'shm' (and shared memory on this host)")
        for topic, msgtype in bag_topics.items():
            if topic in self.params['skip_topics']:
                continue
            if self._writer is not None and topic in self._canonical:
                self._topic_pubs[topic] = None   # goes through the frame channel
                self._types[topic] = message_class(msgtype)
                continue
            cls = message_class(msgtype)
            self._types[topic] = cls
            self._raw[topic] = header_first(cls)
            name = self._canonical.get(topic, topic)
            qos = _LATCHED if topic in latched else 50
            self._topic_pubs[topic] = self.create_lifecycle_publisher(
                cls, name, qos, event_callbacks=PublisherEventCallbacks(
                    matched=lambda info, t=name: self._on_matched(t, info)))
        self._done_pub = self.create_lifecycle_publisher(Bool, '~/done', _LATCHED)
        if self.params['publish_clock']:
            if self.params['restamp']:
                raise ConfigError("parameter 'publish_clock' = True needs 'restamp' = False: "
                                  'restamped headers would not match the bag clock')
            self._clock_pub = self.create_lifecycle_publisher(Clock, topics.CLOCK, 10)
        self._pause_services = [
            self.create_service(Trigger, '~/pause', self._on_pause),
            self.create_service(Trigger, '~/resume', self._on_resume)]
        if self.params['start_paused']:
            self._resumed.clear()
        else:
            self._resumed.set()
        self._graph_active.clear()
        self._clock_offset_ns, self._last_clock_ns = 0, -1
        if self.params['wait_for_manager']:
            self._extra_subs.append(self.create_subscription(
                Bool, f"{self.params['wait_for_manager'].strip('/')}/active",
                self._on_manager_active, _LATCHED))
        else:
            self._graph_active.set()
        if self.params['mode'] == 'lockstep':
            for topic in self.params['lockstep_topics']:
                answer_type = self._types.get(topic) or message_class(
                    topics.TYPES.get(topic, 'geometry_msgs/msg/TwistStamped'))
                self._answer_subs.append(self.create_subscription(
                    answer_type, topic, lambda m, t=topic: self._on_answer(t, m), 10))
        self.get_logger().info(
            f"bag {self.params['bag']}: {self._reader.message_count} messages on "
            f'{len(self._topic_pubs)} topics, mode {self.params["mode"]}')

    def _frame_size(self) -> tuple[int, int]:
        """Size of the bag's camera frames (sizes the shared-memory pool)."""
        assert self._reader is not None
        info_topics = [t for t, c in self._canonical.items() if c == topics.CAMERA_INFO]
        for item in self._reader.messages(info_topics or [topics.CAMERA_INFO]):
            info = deserialize_message(item.data, message_class(item.msgtype))
            return max(1, int(info.width)), max(1, int(info.height))
        return 1920, 1080

    def activate_stage(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._play_guarded, name='bag_player',
                                        daemon=True)
        self._thread.start()

    def deactivate_stage(self) -> None:
        self._stop_thread()

    def release(self) -> None:
        self._stop_thread()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for pub in self._topic_pubs.values():
            if pub is not None:
                self.destroy_publisher(pub)
        self._topic_pubs.clear()
        self._frame_parts.clear()
        if self._done_pub is not None:
            self.destroy_publisher(self._done_pub)
            self._done_pub = None
        for sub in self._answer_subs + self._extra_subs:
            self.destroy_subscription(sub)
        self._answer_subs, self._extra_subs = [], []
        for srv in self._pause_services:
            self.destroy_service(srv)
        self._pause_services = []
        if self._clock_pub is not None:
            self.destroy_publisher(self._clock_pub)
            self._clock_pub = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _stop_thread(self) -> None:
        self._stop.set()
        with self._answered:
            self._answered.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    # --- playback ---------------------------------------------------------------------------
    def _on_answer(self, topic: str, msg: Any) -> None:
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self._answered:
            self._answers.setdefault(stamp, set()).add(topic)
            while len(self._answers) > 1024:
                self._answers.pop(next(iter(self._answers)))
            self._answered.notify_all()

    def _on_pause(self, _request: Any, response: Any) -> Any:
        self._resumed.clear()
        response.success, response.message = True, 'paused'
        return response

    def _on_resume(self, _request: Any, response: Any) -> Any:
        self._resumed.set()
        response.success, response.message = True, 'playing'
        return response

    def _on_manager_active(self, msg: Any) -> None:
        if msg.data:
            self._graph_active.set()

    def _wait_resumed(self) -> bool:
        """Block while paused; False when stopping."""
        while not self._resumed.is_set():
            if self._stop.is_set():
                return False
            self._resumed.wait(0.05)
        return not self._stop.is_set()

    def _on_matched(self, topic: str, info: Any) -> None:
        self._matched[topic] = int(info.current_count)

    def _has_reader(self, topic: str) -> bool:
        # The writer-side matched event, not the graph: a subscriber seen in the graph may not
        # have matched our writer yet, and its first messages would be lost (Fast DDS 3).
        recorded = {c: r for r, c in self._canonical.items()}.get(topic, topic)
        if self._topic_pubs.get(recorded) is not None:
            return self._matched.get(topic, 0) >= 1
        return self.count_subscribers(topic) >= 1

    def _wait_for_subscribers(self) -> bool:
        deadline = time.monotonic() + self.params['wait_timeout_s']
        while not self._graph_active.is_set():
            if self._stop.is_set():
                return False
            if time.monotonic() > deadline:
                self.get_logger().warning(
                    f"{self.params['wait_for_manager']} did not report the graph active within "
                    f"{self.params['wait_timeout_s']} s; playing anyway")
                break
            self._stop.wait(0.02)
        for topic in self.params['wait_topics']:
            while not self._has_reader(topic):
                if self._stop.is_set():
                    return False
                if time.monotonic() > deadline:
                    self.get_logger().warning(
                        f'no subscriber on {topic} after {self.params["wait_timeout_s"]} s; '
                        'playing anyway')
                    return True
                self._stop.wait(0.02)
        return True

    def _play_guarded(self) -> None:
        try:
            self._play()
        except BagError as exc:
            self.get_logger().error(f'playback stopped: {exc}')
        except Exception as exc:  # noqa: BLE001 - a playback thread must not die silently
            if self._stop.is_set() or not rclpy.ok(context=self.context):
                return   # Ctrl-C invalidated the context under a publish: a stop, not an error
            self.get_logger().error(f'playback stopped: {type(exc).__name__}: {exc}')

    def _play(self) -> None:
        if not self._wait_for_subscribers():
            return
        if self.params['start_delay_s'] > 0:
            self._stop.wait(self.params['start_delay_s'])
        passes = 0
        while not self._stop.is_set():
            first, last = self._play_once()
            passes += 1
            if first is None or (not self.params['loop'] and passes >= self.params['passes']):
                break
            # The next pass's bag time continues one clock period after this one's end.
            self._clock_offset_ns += last - first + int(1e9 / self.params['clock_rate_hz'])
        if not self._stop.is_set() and self._done_pub is not None:
            self._done_pub.publish(Bool(data=True))
            self.get_logger().info(f'playback finished: {self.published} messages, '
                                   f'{self.lockstep_timeouts} lock-step timeouts')

    def _play_once(self) -> tuple[int | None, int]:
        """One pass through the bag; returns its first and last receive times (ns)."""
        assert self._reader is not None
        lockstep = self.params['mode'] == 'lockstep'
        rate = self.params['rate']
        restamp = self.params['restamp']
        frame_topic = self.params['frame_topic']
        t0_log: int | None = None
        t0_wall = time.monotonic()
        stamp_map: dict[int, int] = {}
        pending: tuple[int, int] | None = None  # (log time, published stamp) of last frame
        last_log = 0
        for item in self._reader.messages(list(self._topic_pubs)):
            if self._stop.is_set():
                return t0_log, last_log
            if not self._resumed.is_set():
                paused_at = time.monotonic()
                if not self._wait_resumed():
                    return t0_log, last_log
                t0_wall += time.monotonic() - paused_at   # the pause does not count as lag
            if t0_log is None:
                t0_log = item.timestamp_ns
            last_log = item.timestamp_ns
            if lockstep:
                if pending is not None and item.timestamp_ns != pending[0]:
                    self._wait_answer(pending[1])
                    pending = None
            else:
                due = t0_wall + (item.timestamp_ns - t0_log) / 1e9 / rate
                delay = due - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return t0_log, last_log
            if self._clock_pub is not None:
                self._tick_clock(item.timestamp_ns, force=item.topic in self._canonical)
            stamp = self._publish(item, restamp, stamp_map)
            if self._canonical.get(item.topic, item.topic) == frame_topic and stamp is not None:
                pending = (item.timestamp_ns, stamp)
        if lockstep and pending is not None:
            self._wait_answer(pending[1])
        return t0_log, last_log

    def _tick_clock(self, log_ns: int, force: bool) -> None:
        """Publish /clock at the bag time of the next message (at most clock_rate_hz)."""
        now_ns = log_ns + self._clock_offset_ns
        period = int(1e9 / self.params['clock_rate_hz'])
        if now_ns <= self._last_clock_ns or (not force and now_ns - self._last_clock_ns < period):
            return
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(now_ns, 10**9)
        self._clock_pub.publish(msg)
        self._last_clock_ns = now_ns

    def _publish(self, item: BagMessage, restamp: bool, stamp_map: dict[int, int]) -> int | None:
        """Publish one message (or add it to a shared-memory frame); returns its stamp."""
        if self._writer is not None and item.topic in self._canonical:
            return self._to_frame(item, restamp, stamp_map)
        if self._raw.get(item.topic):
            # Header-first message: published as the recorded bytes (restamped in place),
            # no deserialize/serialize round trip at the gripper's 240 Hz.
            original = cdr_stamp_ns(item.data)
            stamp = self._new_stamp(original, stamp_map) if restamp else (
                original + self._clock_offset_ns)
            data = cdr_with_stamp(item.data, stamp) if stamp != original else item.data
            self._topic_pubs[item.topic].publish(data)
            self.published += 1
            return stamp
        msg = deserialize_message(item.data, self._types[item.topic])
        stamp = self._stamp(msg, restamp, stamp_map)
        self._topic_pubs[item.topic].publish(msg)
        self.published += 1
        return stamp

    def _new_stamp(self, original: int, stamp_map: dict[int, int]) -> int:
        """Replay-time stamp of a recorded stamp (one original stamp -> one new stamp)."""
        stamp = stamp_map.get(original)
        if stamp is None:
            stamp = self.get_clock().now().nanoseconds
            stamp_map[original] = stamp
            if len(stamp_map) > 4096:
                stamp_map.pop(next(iter(stamp_map)))
        return stamp

    def _stamp(self, msg: Any, restamp: bool, stamp_map: dict[int, int]) -> int | None:
        """The message's (possibly rewritten) header stamp in ns."""
        header = getattr(msg, 'header', None)
        if header is None:
            return None
        original = header.stamp.sec * 10**9 + header.stamp.nanosec
        if not restamp and not self._clock_offset_ns:
            return original
        # Restamped to the replay time, or (bag clock, a later loop pass) moved on with /clock.
        stamp = (self._new_stamp(original, stamp_map) if restamp
                 else original + self._clock_offset_ns)
        header.stamp.sec, header.stamp.nanosec = divmod(stamp, 10**9)
        return stamp

    def _to_frame(self, item: BagMessage, restamp: bool, stamp_map: dict[int, int]) -> int | None:
        """Collect colour, depth and camera_info of a frame; write them into one loan."""
        role = self._canonical[item.topic]
        if role == topics.CAMERA_INFO:
            msg = deserialize_message(item.data, self._types[item.topic])
        else:
            # rosbags gives the pixel bytes as a view on the raw record: the only copy of the
            # pixels is the one into the loan.
            if self._typestore is None:
                from rosbags.typesys import Stores, get_typestore
                self._typestore = get_typestore(Stores.ROS2_JAZZY)
            msg = self._typestore.deserialize_cdr(item.data, item.msgtype)
        original = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        parts = self._frame_parts.setdefault(original, {})
        parts[role] = msg
        if len(self._frame_parts) > 8:   # an incomplete frame never completes: drop it
            self._frame_parts.pop(next(iter(self._frame_parts)))
        if len(parts) < len(CAMERA_TOPICS):
            return None
        del self._frame_parts[original]
        info = parts[topics.CAMERA_INFO]
        stamp = self._stamp(info, restamp, stamp_map)
        color, depth = parts[topics.COLOR], parts[topics.DEPTH]
        try:
            color_arr, color_encoding = _image_of(color)
            depth_arr, depth_encoding = _image_of(depth)
        except ImageFormatError as exc:
            self.get_logger().warning(f'frame {original}: {exc}; skipped',
                                      throttle_duration_sec=5.0)
            return None
        with self._writer.loan(color_arr.shape, color_encoding, depth_arr.shape,
                               depth_encoding) as loan:
            loan.color[...] = color_arr
            loan.depth[...] = depth_arr
            loan.publish(info.header.stamp, info.header.frame_id, info)
        self.published += 3
        return stamp

    def _wait_answer(self, stamp: int) -> None:
        deadline = time.monotonic() + self.params['lockstep_timeout_s']
        with self._answered:
            wanted = set(self.params['lockstep_topics'])
            while not wanted <= self._answers.get(stamp, set()) and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    self.lockstep_timeouts += 1
                    missing = sorted(wanted - self._answers.get(stamp, set()))
                    self.get_logger().warning(
                        f'lock-step: no answer on {missing} for frame '
                        f'{stamp} within {self.params["lockstep_timeout_s"]} s',
                        throttle_duration_sec=5.0)
                    break
                self._answered.wait(left)
            self._answers.pop(stamp, None)


def _image_of(msg: Any) -> tuple[Any, str]:
    """(array, encoding) of a recorded Image (a view) or CompressedImage (decoded)."""
    if hasattr(msg, 'encoding'):
        return image_to_array(msg), msg.encoding
    return decode_compressed(msg.format, msg.data)


def main(args: list[str] | None = None) -> int:
    """Entry point of the bag_player executable."""
    return run_node(BagPlayer, args)


if __name__ == '__main__':
    main()
