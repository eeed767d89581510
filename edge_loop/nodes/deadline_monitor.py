# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline monitor: tracks every camera frame to its command and enforces the budget.

Each ``camera_info`` stamp opens a frame with an absolute deadline (stamp + end-to-end
budget); the stage outputs and the arm command, all stamped with the source camera stamp,
close it. A dedicated thread sleeps until the earliest open deadline (it runs SCHED_FIFO
where the OS allows it) and, when a frame's command is not out by then, publishes a safe
stop right away on ``/edge_loop/safe_stop`` (:mod:`edge_loop.nodes.safe_stop`: the frame's
stamp, the reason and the gripper hold to take). The pick controller obeys it with a zero
twist and that hold, and refuses any later command for that frame: it is the only writer of
the command topics, which the monitor only reads. After ``misses_to_deactivate`` consecutive
misses the controller is deactivated through its lifecycle services (from a worker thread) and
the loop reports ERROR;
``healthy_periods_to_ok`` healthy periods later it reports OK again, but the controller comes
back only through ``~/reactivate``. A camera or gripper input silent for ``stall_periods`` of
its period is a miss too. See docs/deadline_monitor.md.

Cost: the watched topics are taken raw by that same thread through its own wait set (on a
helper node that no executor spins) and only their header stamps are read, so the monitor
pays neither the executor's per-callback overhead nor deserialization. On real time a frame's
command wakes the thread, not its camera_info (one wake-up per frame). The gripper-rate topics
(200+ Hz joint states, grasp_state) are never woken for, and a DDS content filter on their
stamps (``gripper_sample_every_ms``, applied by the publisher) keeps all but a sample of them
from reaching this process at all.

Simulated time (``use_sim_time``): ``/clock`` is taken by that thread too, instead of by
rclpy's TimeSource through the executor (one executor callback per /clock message was most of
the monitor's CPU in simulation). Each message gets the simulated time of the last /clock
received before it (DDS receive order), so a command is not judged late because the simulator
stepped on before the thread woke; deadlines are checked whenever /clock moves, with no wall-clock
polling. The node's clock (timers, diagnostics stamps) is set from the same messages.

The judgement (frames, misses, health, deactivation) is the kernel :class:`LoopJudge`
(:mod:`edge_loop.kernels.deadline`); this node only feeds it and carries out its verdicts.
It is still about 1000 lines because what stays is ROS mechanics the kernel cannot hold:
the raw wait-set intake with DDS receive stamps, /clock taken in that thread, the
simulated-time settle, the content-filtered gripper sampling, the safe-stop channel,
lifecycle calls from a worker and /diagnostics.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import queue
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TwistStamped
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock_type import ClockType
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from edge_loop import stages, topics
from edge_loop.content_filter import set_content_filter, stamp_sampling_expression
from edge_loop.executors import MultiThreadedExecutor
from edge_loop.kernels.deadline import (
    NS_PER_MS,
    NS_PER_S,
    BatchRate,
    Deactivate,
    JudgeConfig,
    LatencyWindow,
    Level,
    LoopJudge,
    MonotonicMap,
    Note,
    SafeStop,
    StallWatch,
    header_stamp_ns,
    next_frame_check_ns,
)
from edge_loop.lifecycle_client import LifecycleClient, LifecycleError
from edge_loop.nodes import safe_stop
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node

# Defaults from the one stage table (edge_loop/stages.py); config/pick.yaml does not repeat them.
TABLE = stages.monitor_defaults()
_LEVEL_BYTE = {Level.OK: DiagnosticStatus.OK, Level.WARN: DiagnosticStatus.WARN,
               Level.ERROR: DiagnosticStatus.ERROR}
_MAX_WAIT_NS = NS_PER_S // 2       # housekeeping wake-up when nothing is due
_MIN_WAIT_NS = 100_000  # a real-time thread must never busy-wait: 0.1 ms is below the p99 goal
_CLOCK_STEP_NS = 20 * NS_PER_MS   # a system-clock change this large between wakes is a step


def _message_type(name: str) -> Any:
    """'pkg/msg/Type' -> the message class."""
    parts = name.split('/')
    if len(parts) != 3 or parts[1] != 'msg':
        raise ConfigError(f"message type {name!r}: expected 'package/msg/Type'")
    try:
        return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f'message type {name!r} not found ({exc})') from exc


# The gripper may publish at most this share of the sampling window apart (jitter margin),
# judged once this many of its samples were counted (the estimate settles first).
RATE_MARGIN = 0.75
RATE_CHECK_SAMPLES = 200


def _gripper_sampling(p: dict[str, Any]) -> tuple[int, int] | None:
    """(every, window) in ns for the gripper topics' content filter; None: every sample."""
    if not p['gripper_sample_every_ms']:
        return None
    every_ns = round(p['gripper_sample_every_ms'] * NS_PER_MS)
    window_ns = round(p['gripper_sample_window_ms'] * NS_PER_MS)
    try:
        stamp_sampling_expression(every_ns, window_ns)
    except ValueError as exc:
        raise ConfigError(f'gripper_sample_every_ms / gripper_sample_window_ms: {exc}') from exc
    # Two samples that pass are at most every + window apart; one window left empty by
    # jitter makes it 2 * every + window, which must not look like a stall.
    if p['gripper_stall_min_ms'] * NS_PER_MS < 2 * every_ns + window_ns:
        raise ConfigError(
            f"gripper_stall_min_ms = {p['gripper_stall_min_ms']:g} must be at least "
            '2 * gripper_sample_every_ms + gripper_sample_window_ms (the longest gap sampling '
            'leaves in a healthy gripper topic, one empty window included)')
    return every_ns, window_ns


def _is_stop_answer(data: bytes) -> bool:
    """A serialized arm command that holds still (how the controller answers a safe stop).

    Read only for commands stamped like a stop: a late command that still moves the arm is
    judged (late) as before, never taken for the answer.
    """
    twist = deserialize_message(data, TwistStamped).twist
    return not any((twist.linear.x, twist.linear.y, twist.linear.z,
                    twist.angular.x, twist.angular.y, twist.angular.z))


def _ms(value_ns: float) -> str:
    return f'{value_ns / NS_PER_MS:.2f}'


def _fmt(value: float) -> str:
    return 'nan' if value != value else f'{value:.2f}'  # noqa: PLR0124 - NaN check


@dataclass
class _Input:
    """One watched topic: its subscription on the helper node and what it means."""

    topic: str
    subscription: Any
    msg_type: Any
    stages: tuple[str, ...] = ()      # stage names completed by a message here
    camera: bool = False              # opens frames
    command: bool = False             # closes frames
    gripper_command: bool = False     # last commanded force
    clock: bool = False               # /clock (simulated time)


@dataclass
class _Taken:
    """One message taken by the deadline thread."""

    received: int          # DDS receive stamp (system clock, ns)
    order: int             # take order (ties)
    entry: _Input
    stamp: int             # header stamp (ns)
    data: bytes
    source: int            # DDS source stamp: when the publisher sent it (system clock, ns)
    done: bool = False     # already handled out of order (_settle)


class DeadlineMonitor(StageNode):
    """Lifecycle node that enforces the loop's deadlines and reports them on /diagnostics."""

    PARAMS = (
        Param('control_rate_hz', 15.0, 'Camera / control rate (Hz): one frame per period',
              min=0.1, max=1000.0, tier='user'),
        Param('end_to_end_budget_ms', TABLE['end_to_end_budget_ms'],
              'Budget camera header.stamp -> command out (ms)', min=0.1, max=10000.0, tier='user'),
        Param('stage_names', TABLE['stage_names'], 'Stages reported on /diagnostics',
              tier='internal'),
        Param('stage_topics', TABLE['stage_topics'],
              'Output topic of each stage (stamped with its source stamp), same order',
              tier='internal'),
        Param('stage_types', TABLE['stage_types'], "Message type of each stage's topic",
              tier='internal'),
        Param('sampled_stages', TABLE['sampled_stages'],
              'Stages at sensor rate (not per camera frame): only the newest output is read at '
              'each wake-up, for the latency statistics', tier='internal'),
        Param('stage_budgets_ms', TABLE['stage_budgets_ms'],
              'Budget per stage (ms): source stamp -> output; for the command stage its own '
              'time after the last upstream output', min=0.0, tier='user'),
        Param('command_topic', topics.ARM_CMD,
              'Arm command (geometry_msgs/TwistStamped): closes a frame (read only; the '
              'controller answers a safe stop on it)', tier='internal'),
        Param('gripper_command_topic', topics.GRIPPER_CMD,
              'Gripper command (sensor_msgs/JointState): the last opening and force are read '
              'for the hold a safe stop asks for', tier='internal'),
        Param('camera_info_topic', topics.CAMERA_INFO, 'Frame clock: one stamp per frame',
              tier='internal'),
        Param('joint_states_topic', topics.JOINT_STATES,
              'Gripper joint states: stall watch and the opening to hold', tier='internal'),
        Param('misses_to_deactivate', 3, 'N consecutive misses -> deactivate the controller',
              min=1, max=1_000_000),
        Param('healthy_periods_to_ok', 15, 'M healthy periods -> report OK again',
              min=1, max=1_000_000),
        Param('stall_periods', 5, 'k periods without camera / gripper input = a miss',
              min=1, max=10_000),
        Param('gripper_stall_min_ms', 250.0,
              'Floor of the gripper stall timeout (k periods at 200 Hz are only 25 ms); at least '
              '2 * gripper_sample_every_ms + gripper_sample_window_ms',
              min=0.0, max=10000.0),
        Param('gripper_sample_every_ms', 100.0,
              'Gripper-rate topics (joint states, sampled stages) are taken only when their '
              'header stamp falls in the first gripper_sample_window_ms of every this many ms '
              '(a DDS content filter, applied by the publisher, so the rest never reaches '
              'this process); must divide 1000; 0 takes every sample', min=0.0, max=1000.0),
        Param('gripper_sample_window_ms', 10.0,
              'Width of that window; the gripper must publish at least every 3/4 of it '
              '(10 ms: >= 133 Hz), else windows can stay empty and it look stalled (a slower '
              'gripper is reported as an error)',
              min=0.1, max=1000.0),
        Param('controller_node', 'pick_controller', 'Lifecycle node deactivated after N misses',
              tier='internal'),
        Param('transition_timeout_s', 2.0, 'Timeout of a controller lifecycle transition',
              min=0.1, max=60.0),
        Param('startup_grace_s', 5.0,
              'After activation, misses count only once arm_after_on_time consecutive commands '
              'were on time, or after this long (pipeline warm-up)', min=0.0, max=600.0),
        Param('arm_after_on_time', 15,
              'Consecutive on-time commands that end the startup grace early (one on-time '
              'command amid a start-up backlog is not a warm pipeline)', min=1, max=1000),
        Param('window', 300, 'Samples in each latency window (p50/p99)', min=10, max=100_000,
              tier='internal'),
        Param('diagnostics_period_s', 1.0, 'Period of /diagnostics (s)', min=0.05, max=60.0,
              tier='internal'),
        Param('rt_priority', 10,
              'SCHED_FIFO priority of the deadline thread (0: do not ask for real time)',
              min=0, max=99),
        Param('sim_settle_ms', 100.0,
              'Simulated time: before a /clock tick expires a frame without a command, wait '
              'this long (wall) for a command published before that tick (a lock-step '
              'simulator answered it, but the two topics reached us in the other order)',
              min=0.0, max=1000.0, tier='internal'),
        Param('hold_force_n', 5.0,
              'Gripper hold force a safe stop asks for when no gripper command was seen yet '
              '(N)', min=0.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('deadline_monitor', **kwargs)
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._inputs_node = None
        self._inputs: list[_Input] = []
        self._joint_sub = None
        self._filtered: list[Any] = []
        self._sampling: tuple[int, int] | None = None
        self._filter_on = False
        self._rate_warned = False
        self._gripper_rate = BatchRate(RATE_CHECK_SAMPLES)
        self.gripper_sampling = 'every sample'
        self._wake = None
        self._entities: list[tuple[str, Any]] = []
        self._controller: LifecycleClient | None = None
        self._requests: queue.Queue[str | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._active = False
        self._sim_time = False
        self._sim_now_ns = 0      # newest /clock time (use_sim_time)
        self._node_clock_ns = 0
        self._wakeups = 0         # of the deadline thread, reported on /diagnostics
        # stall watches run on the monotonic clock on real time (see MonotonicMap)
        self._clock_map = MonotonicMap(_CLOCK_STEP_NS)
        self.rt_scheduling = 'not started'

    # --- configuration --------------------------------------------------------------------
    def configure_stage(self) -> None:
        """Validate the budget, create publishers, the helper node and the threads."""
        p = self.params
        n = len(p['stage_names'])
        for key in ('stage_topics', 'stage_types', 'stage_budgets_ms'):
            if len(p[key]) != n:
                raise ConfigError(f"parameter '{key}' = {p[key]!r}: expected {n} values "
                                  '(one per stage_names entry)')
        if len(set(p['stage_names'])) != n:
            raise ConfigError(f"parameter 'stage_names' = {p['stage_names']!r}: duplicates")
        self._sampling = _gripper_sampling(p)
        self._period_ns = int(NS_PER_S / p['control_rate_hz'])
        self._budget_ns = int(p['end_to_end_budget_ms'] * NS_PER_MS)
        self._sim_time = bool(self.get_parameter('use_sim_time').value)
        stage_types = [_message_type(t) for t in p['stage_types']]
        self._reset_state()

        reliable = QoSProfile(depth=10)
        # The one safe-stop channel; the command topics are the controller's alone.
        self._pub_stop = self.create_lifecycle_publisher(DiagnosticArray, topics.SAFE_STOP,
                                                         safe_stop.qos())
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, topics.DIAGNOSTICS,
                                                         reliable)
        group = ReentrantCallbackGroup()
        self._controller = LifecycleClient(self, p['controller_node'])
        self._srv = self.create_service(Trigger, '~/reactivate', self._on_reactivate,
                                        callback_group=group)
        self._diag_timer = self.create_timer(p['diagnostics_period_s'],
                                             self._publish_diagnostics)
        self._entities = [('publisher', self._pub_stop), ('publisher', self._pub_diag),
                          ('service', self._srv), ('timer', self._diag_timer)]

        # The watched topics live on a helper node that no executor spins: the deadline
        # thread takes them itself. It ignores the process's global arguments (a __node
        # remap would rename it too), so topic names are resolved through this node.
        self._inputs_node = rclpy.create_node(
            f'{self.get_name()}_inputs', namespace=self.get_namespace(), context=self.context,
            use_global_arguments=False, start_parameter_services=False)
        # Stage outputs and commands come from our own nodes (reliable): reliable here too,
        # so a message is not lost on the way to the monitor alone. Sensor topics (drivers
        # may publish best effort) are read best effort, which matches either.
        reliable_watch = QoSProfile(depth=10)
        sensor_watch = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        by_topic: dict[str, _Input] = {}

        sampled_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)

        def watch_topic(topic: str, msg_type: Any, sampled: bool = False,
                        sensor: bool = False) -> _Input:
            resolved = self.resolve_topic_name(topic)
            entry = by_topic.get(resolved)
            if entry is None:
                qos = sampled_qos if sampled else sensor_watch if sensor else reliable_watch
                sub = self._inputs_node.create_subscription(msg_type, resolved, _ignore, qos,
                                                            raw=True)
                entry = _Input(resolved, sub, msg_type)
                by_topic[resolved] = entry
            elif entry.msg_type is not msg_type:
                raise ConfigError(f'topic {topic!r} watched with two message types')
            return entry

        from sensor_msgs.msg import CameraInfo
        watch_topic(p['camera_info_topic'], CameraInfo, sensor=True).camera = True
        watch_topic(p['command_topic'], TwistStamped).command = True
        watch_topic(p['gripper_command_topic'], JointState).gripper_command = True
        for stage, topic, msg_type in zip(p['stage_names'], p['stage_topics'], stage_types):
            entry = watch_topic(topic, msg_type, sampled=stage in p['sampled_stages'])
            entry.stages += (stage,)
        self._inputs = list(by_topic.values())
        if self._sim_time:
            self._take_clock()
        # Joint states (>= 200 Hz) are drained only when the thread wakes anyway.
        self._joint_sub = self._inputs_node.create_subscription(
            JointState, self.resolve_topic_name(p['joint_states_topic']), _ignore,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT), raw=True)
        self._joint_seq = None
        self._sample_gripper_topics(by_topic)
        self._wake = self._inputs_node.create_guard_condition(_ignore)
        self._clock_map.update(time.time_ns(), time.monotonic_ns())
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name='deadline', daemon=True)
        self._thread.start()
        self._worker = threading.Thread(target=self._work, name='controller', daemon=True)
        self._worker.start()

    def _sample_gripper_topics(self, by_topic: dict[str, _Input]) -> None:
        """Content-filter the joint states and sampled stages down to stamp windows."""
        self._filtered = [self._joint_sub] + [
            e.subscription for e in by_topic.values()
            if any(stage in self.params['sampled_stages'] for stage in e.stages)]
        self.gripper_sampling = 'every sample'
        self._filter_on = False
        self._rate_warned = False
        self._gripper_rate = BatchRate(RATE_CHECK_SAMPLES)
        if self._sampling is None:
            self.get_logger().info('gripper topics taken: every sample')
            return
        every_ns, window_ns = self._sampling
        expression = stamp_sampling_expression(every_ns, window_ns)
        try:
            enabled = [set_content_filter(sub, expression) for sub in self._filtered]
        except (OSError, RuntimeError) as exc:
            enabled = [False]
            self.get_logger().warn(f'no content filter on the gripper topics ({exc}): '
                                   'taking every sample')
        if all(enabled):
            self._filter_on = True
            self.gripper_sampling = (f'{window_ns / NS_PER_MS:g} ms of stamps every '
                                     f'{every_ns / NS_PER_MS:g} ms (content filter)')
        else:
            self._clear_gripper_filter()
            self.gripper_sampling = 'every sample (the middleware has no content filter)'
        self.get_logger().info(f'gripper topics taken: {self.gripper_sampling}')

    def _clear_gripper_filter(self) -> None:
        self._filter_on = False
        for sub in self._filtered:
            with contextlib.suppress(OSError, RuntimeError):
                set_content_filter(sub, '')

    def _check_gripper_rate(self, now: int, count: int) -> None:
        """Say so when the gripper is too slow for the sampling window (once).

        Windows would then stay empty and the gripper look stalled: safe, but the stops are
        the configuration's fault. The rate is :class:`BatchRate`'s, not the stall watch's
        running estimate, which the windows' bursts bias when receive times are quantised
        (simulated time). The filter is not changed at run time: replacing it re-creates the
        DDS reader, and once, in simulation, that froze the whole loop.
        """
        if not self._filter_on or self._rate_warned:
            return
        period = self._gripper_rate.add(now, count, self._gripper_watch.stalls)
        if period is None or period <= RATE_MARGIN * self._sampling[1]:
            return
        self._rate_warned = True
        self.gripper_sampling += ' - the gripper is too slow for it and may look stalled'
        self.get_logger().error(
            f'gripper joint states come every {_ms(int(period))} ms, more than '
            f'{RATE_MARGIN:g} x gripper_sample_window_ms '
            f"({self.params['gripper_sample_window_ms']:g}): sampling windows can stay empty "
            'and the gripper look stalled; set gripper_sample_window_ms to at least '
            f'{period / RATE_MARGIN / NS_PER_MS:.1f} or gripper_sample_every_ms to 0')

    def _take_clock(self) -> None:
        """Read /clock in the deadline thread instead of through rclpy's TimeSource."""
        # detach_node drops the TimeSource's /clock subscription (idempotent); the node's
        # clocks stay on ROS time and are set by _update_node_clock from now on.
        self._time_source.detach_node()
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
        sub = self._inputs_node.create_subscription(
            Clock, self.resolve_topic_name(topics.CLOCK), _ignore, qos, raw=True)
        self._inputs.append(_Input(topics.CLOCK, sub, Clock, clock=True))

    def _update_node_clock(self) -> None:
        """The node's clock (timers, diagnostics stamps) to the newest /clock time."""
        if self._node_clock_ns != self._sim_now_ns:
            self._node_clock_ns = self._sim_now_ns
            self.get_clock().set_ros_time_override(Time(nanoseconds=self._sim_now_ns,
                                                        clock_type=ClockType.ROS_TIME))

    def _reset_state(self) -> None:
        p = self.params
        with self._lock:
            command_stage = next(
                (name for name, topic in zip(p['stage_names'], p['stage_topics'])
                 if self.resolve_topic_name(topic) == self.resolve_topic_name(
                     p['command_topic'])), None)
            self._judge = LoopJudge(JudgeConfig(
                budget_ns=self._budget_ns, period_ns=self._period_ns,
                stages=tuple((name, topic, int(budget * NS_PER_MS)) for name, topic, budget in
                             zip(p['stage_names'], p['stage_topics'], p['stage_budgets_ms'])),
                command_stage=command_stage, sampled_stages=tuple(p['sampled_stages']),
                misses_to_deactivate=p['misses_to_deactivate'],
                healthy_periods_to_ok=p['healthy_periods_to_ok'],
                arm_after_on_time=p['arm_after_on_time'],
                startup_grace_ns=int(p['startup_grace_s'] * NS_PER_S), window=p['window'],
                controller_node=p['controller_node']), self._now_ns())
            forward_only = not self._sim_time   # monotonic clock: see MonotonicMap
            self._camera_watch = StallWatch(p['stall_periods'], period_ns=self._period_ns,
                                            forward_only=forward_only)
            self._gripper_watch = StallWatch(
                p['stall_periods'], min_timeout_ns=int(p['gripper_stall_min_ms'] * NS_PER_MS),
                repeat_ns=self._period_ns, forward_only=forward_only)
            self._missed: dict[int, tuple[int, int]] = {}   # frame -> (miss wall ns, tick source)
            self._tick_source = 0
            self._settled = 0          # commands taken in _settle that arrived after their tick
            self._settle_max_ns = 0    # the longest wall wait for one of them
            self._reaction = LatencyWindow(max(p['window'], 1000))
            self._wake_delay = LatencyWindow(max(p['window'], 1000))
            self._own_stops: deque[int] = deque(maxlen=64)
            self._opening_m: float | None = None
            self._joint_raw: bytes | None = None
            self._force: float | None = None
            self._commanded_opening: float | None = None
            self._force_raw: bytes | None = None
            self._own_holds: deque[int] = deque(maxlen=64)

    def activate_stage(self) -> None:
        """Start enforcing (after a warm-up grace or the first on-time command)."""
        self._reset_state()
        with self._lock:
            self._active = True
        self._wake.trigger()

    def deactivate_stage(self) -> None:
        """Stop enforcing; keep the subscriptions."""
        with self._lock:
            self._active = False

    def release(self) -> None:
        """Stop the threads and destroy the helper node (idempotent)."""
        self._active = False
        self._stop.set()
        if self._wake is not None:
            with contextlib.suppress(Exception):
                self._wake.trigger()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self._worker is not None:
            self._requests.put(None)
            self._worker.join(timeout=5.0)
            self._worker = None
        if self._inputs_node is not None:
            self._inputs_node.destroy_node()
            self._inputs_node = None
            self._inputs = []
            self._joint_sub = None
            self._wake = None
        if self._controller is not None:
            self._controller.destroy()
            self._controller = None
        for kind, entity in self._entities:
            with contextlib.suppress(Exception):
                getattr(self, f'destroy_{kind}')(entity)
        self._entities = []

    # --- time -----------------------------------------------------------------------------
    def _now_ns(self) -> int:
        # Without /clock the node clock is the system clock: skip rclpy's Time objects.
        if not self._sim_time:
            return time.time_ns()
        return self._sim_now_ns

    def _read_clocks(self) -> tuple[int, int]:
        """(system clock now, its step since the last read or 0); deadline thread, real time."""
        wall = time.time_ns()
        step = self._clock_map.update(wall, time.monotonic_ns())
        if step:
            self.get_logger().warn(
                f'the system clock stepped by {step / NS_PER_S:+.3f} s: stalls are timed on '
                'the monotonic clock and are not affected; a frame open across the step is '
                'judged on the stepped clock', throttle_duration_sec=1.0)
        return wall, step

    def _watch_ns(self, received: int) -> int:
        """A receive time (system clock, or simulated time) on the stall watches' clock."""
        return received if self._sim_time else self._clock_map.to_mono(received)

    def _watch_now(self, now: int) -> int:
        """``now`` (the monitor's clock) on the stall watches' clock."""
        return now if self._sim_time else time.monotonic_ns()

    # --- the deadline thread --------------------------------------------------------------
    def _try_realtime(self) -> str:
        prio = self.params['rt_priority']
        if prio <= 0:
            return 'no (rt_priority 0)'
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
        except (OSError, AttributeError) as exc:
            return f'no ({exc})'
        # The middleware's receive threads stamp the arrival of every message: one point
        # below, so that a loaded host does not delay them (a late receive stamp is a miss).
        others = 0
        me = threading.get_native_id()
        with contextlib.suppress(OSError):
            for tid in map(int, os.listdir('/proc/self/task')):
                if tid != me and os.sched_getscheduler(tid) == os.SCHED_OTHER:
                    with contextlib.suppress(OSError):
                        os.sched_setscheduler(tid, os.SCHED_FIFO,
                                              os.sched_param(max(prio - 1, 1)))
                        others += 1
        return f'yes (SCHED_FIFO {prio}; {others} other threads {max(prio - 1, 1)})'

    def _run(self) -> None:
        _name_thread(b'deadline')
        self.rt_scheduling = self._try_realtime()
        self.get_logger().info(f'deadline thread started; real-time scheduling: '
                               f'{self.rt_scheduling}')
        # Few things wake the thread: on real time a frame's command (which closes it), the
        # next frame's expected deadline and, while a frame is overdue, camera_info (see
        # _loop); on simulated time /clock (time stands still between its messages).
        # Everything else is drained when it wakes anyway: each message keeps its DDS receive
        # time, so nothing is lost but the wake-ups.
        wake_on = [e for e in self._inputs if (e.clock if self._sim_time else e.camera)]
        wait_set = _rclpy.WaitSet(len(self._inputs), 1, 0, 0, 0, 0, self.context.handle)
        # _settle waits on the command topics alone (simulated time only).
        self._settle_wait = _rclpy.WaitSet(
            sum(e.command for e in self._inputs), 0, 0, 0, 0, 0,
            self.context.handle) if self._sim_time else None
        try:
            self._loop(wait_set, wake_on)
        except Exception as exc:  # noqa: BLE001
            if self._stop.is_set() or not rclpy.ok(context=self.context):
                return   # shutting down (Ctrl-C invalidates the context under us)
            self.get_logger().fatal(f'deadline thread died: {type(exc).__name__}: {exc}')
            raise

    def _loop(self, wait_set: Any, wake_on: list[_Input]) -> None:
        drain_order = [e for e in self._inputs if e.camera] + [
            e for e in self._inputs if not e.camera]
        commands = [e for e in self._inputs if e.command]
        while not self._stop.is_set():
            wait_ns, due, camera = self._wait_ns()
            wait_set.clear_entities()
            # Real time: a frame's command wakes the thread (the camera_info and stage outputs
            # before it are drained then), and the expected deadline of the next frame does
            # if no command comes; camera_info wakes it only while a frame is overdue.
            for entry in (wake_on if self._sim_time else commands + (wake_on if camera else [])):
                wait_set.add_subscription(entry.subscription.handle)
            wait_set.add_guard_condition(self._wake.handle)
            wait_set.wait(wait_ns)
            self._wakeups += 1
            if self._stop.is_set():
                break
            woke, step = (self._sim_now_ns, 0) if self._sim_time else self._read_clocks()
            with self._lock:
                if due is not None and woke >= due and not step:
                    self._wake_delay.add(woke - due)
                # In receive order across topics (a command after its stages, a frame's
                # camera_info before its outputs), as if each had woken the thread.
                taken: list[_Taken] = []
                for entry in drain_order:
                    self._drain(entry, taken)
                taken.sort(key=lambda t: (t.received, t.order))
                index = 0
                while index < len(taken):   # _settle may append commands that came late
                    item = taken[index]
                    index += 1
                    if item.done:
                        continue
                    if item.entry.clock:
                        if self._active:
                            self._settle(item, taken, index)
                        self._sim_now_ns = item.stamp
                        self._tick_source = item.source
                        if self._active:   # a miss is due at the first tick past its deadline
                            self._enforce(item.stamp)
                    elif self._active:
                        late = (item.entry.command and item.stamp in self._missed and
                                item.stamp not in self._own_stops)
                        self._on_message(item.entry, item.stamp, self._sim_now_ns
                                         if self._sim_time else item.received, item.data,
                                         item.received)
                        if late:
                            self._report_late(item)
                if self._sim_time:
                    self._update_node_clock()
                self._poll_joint_states()
                if self._active:
                    self._enforce(self._now_ns())

    def _wait_ns(self) -> tuple[int, int | None, bool]:
        """(relative wait in ns, the due time it waits for, camera_info wakes the thread).

        The wait ends at the next thing that can fall due; camera_info is waited on (real
        time) only while the next frame is overdue or none was seen yet.
        """
        if self._sim_time:
            # Simulated time moves only with /clock, which wakes the thread: nothing can fall
            # due before it (and a lock-step simulator may hold the clock still for long).
            return _MAX_WAIT_NS, None, False
        now, _ = self._read_clocks()
        with self._lock:
            if not self._active:
                return _MAX_WAIT_NS, None, True
            due = [self._clock_map.to_wall(t) for t in (self._camera_watch.next_check_ns(),
                                                        self._gripper_watch.next_check_ns())
                   if t is not None]
            deadline = self._judge.tracker.next_deadline()
            if deadline is not None:
                due.append(deadline)
            if not self._judge.armed:
                due.append(self._judge.grace_end_ns)
            expected = self._next_frame_check_ns()
        camera = expected is None or expected <= now
        if not camera:
            due.append(expected)
        if not due:
            return _MAX_WAIT_NS, None, camera
        wait = min(min(due) - now, _MAX_WAIT_NS)
        return max(wait, _MIN_WAIT_NS), (min(due) if wait < _MAX_WAIT_NS else None), camera

    def _next_frame_check_ns(self) -> int | None:
        """See :func:`next_frame_check_ns`; None while no frame was seen."""
        last = self._judge.tracker.last_stamp_ns
        if last is None:
            return None
        return next_frame_check_ns(last, self._period_ns, self._judge.camera_interval_ns,
                                   self._budget_ns)

    @staticmethod
    def _received_wall_ns(info: dict[str, Any]) -> int:
        """DDS receive stamp (system clock, ns); now if the middleware gives none."""
        received = info.get('received_timestamp') if isinstance(info, dict) else None
        return int(received) if received else time.time_ns()

    def _receive_ns(self, info: dict[str, Any]) -> int:
        """Receive time on the stall watches' clock: the DDS stamp on real time, else now."""
        if self._sim_time:
            return self._sim_now_ns
        return self._watch_ns(self._received_wall_ns(info))

    def _drain(self, entry: _Input, out: list[_Taken]) -> None:
        handle = entry.subscription.handle
        while True:
            taken = handle.take_message(entry.msg_type, True)
            if taken is None:
                return
            data, info = taken
            try:
                stamp = header_stamp_ns(data)
            except ValueError:
                continue
            received = self._received_wall_ns(info)
            source = info.get('source_timestamp') if isinstance(info, dict) else None
            out.append(_Taken(received, len(out), entry, stamp, data, int(source or received)))

    def _settle(self, tick: _Taken, taken: list[_Taken], index: int) -> None:
        """Before ``tick`` expires a frame on simulated time: take its commands sent earlier.

        A lock-step simulator moves its clock past a frame's deadline only after the command
        for that frame reached it, but the command and the /clock tick come to us on two
        topics and may arrive in the other order. Commands published (source stamp) before the
        tick count at the time before it: those already taken (marked done here)
        and those that arrive within ``sim_settle_ms``. Later ones join ``taken`` (whose items
        from ``index`` on are still to be handled) after the tick.
        """
        def expiring() -> bool:
            deadline = self._judge.tracker.next_deadline()
            return deadline is not None and deadline <= tick.stamp

        if not self._judge.controller_enabled or not expiring():
            return
        commands = [e for e in self._inputs if e.command]
        for item in taken[index:]:
            if item.entry.command and not item.done and item.source <= tick.source:
                item.done = True
                self._on_message(item.entry, item.stamp, self._sim_now_ns, item.data)
        start = time.monotonic_ns()
        end = start + int(self.params['sim_settle_ms'] * NS_PER_MS)
        while expiring():
            left = end - time.monotonic_ns()
            if left <= 0:
                return
            fresh: list[_Taken] = []
            for entry in commands:
                self._drain(entry, fresh)
            if not fresh:
                self._settle_wait.clear_entities()
                for entry in commands:
                    self._settle_wait.add_subscription(entry.subscription.handle)
                self._settle_wait.wait(left)
                continue
            for item in fresh:
                if item.source <= tick.source:
                    self._settled += 1
                    self._settle_max_ns = max(self._settle_max_ns, time.monotonic_ns() - start)
                    self._on_message(item.entry, item.stamp, self._sim_now_ns, item.data)
                else:
                    taken.append(item)   # after the tick, in arrival order

    def _poll_joint_states(self) -> None:
        if self._joint_sub is None:
            return
        # Depth 1: only the newest sample is kept (no Python work per message at 200 Hz);
        # the publisher's sequence numbers say how many arrived since the last poll.
        taken = self._joint_sub.handle.take_message(JointState, True)
        if taken is None or not self._active:
            return
        last, last_info = taken
        with contextlib.suppress(ValueError):
            self._judge.sampled_input(header_stamp_ns(last), self._received_wall_ns(last_info))
        seq = last_info.get('publication_sequence_number') if isinstance(last_info, dict) \
            else None
        count = 1
        if seq is not None and self._joint_seq is not None and seq > self._joint_seq:
            count = seq - self._joint_seq
        self._joint_seq = seq
        if count:
            received = self._receive_ns(last_info)
            self._gripper_watch.seen(received, count)
            self._joint_raw = last     # deserialized only when a hold needs the opening
            self._check_gripper_rate(received, count)

    def _last_gripper_command(self) -> tuple[float | None, float | None]:
        """(opening, force) of the last gripper command (not counting our own holds)."""
        if self._force_raw is not None:
            msg = deserialize_message(self._force_raw, JointState)
            if msg.effort:
                self._force = float(msg.effort[0])
            if msg.position:
                self._commanded_opening = float(msg.position[0])
            self._force_raw = None
        return self._commanded_opening, self._force

    def _opening(self) -> float | None:
        """Current gripper opening (sum of the finger positions), None if never seen."""
        self._poll_joint_states()
        if self._joint_raw is not None:
            msg = deserialize_message(self._joint_raw, JointState)
            if msg.position:
                self._opening_m = float(sum(msg.position))
            self._joint_raw = None
        return self._opening_m

    def _on_message(self, entry: _Input, stamp: int, now: int, data: bytes,
                    received: int | None = None) -> None:
        judge = self._judge
        if entry.camera:
            self._camera_watch.seen(self._watch_ns(now))
            self._carry_out(judge.camera(stamp, now))
            return
        for stage in entry.stages:
            judge.stage(stage, stamp, now, received)
        if entry.gripper_command and stamp not in self._own_holds:
            self._force_raw = data    # deserialized only when a hold needs the force
        if entry.command:
            if stamp in self._own_stops and _is_stop_answer(data):
                self._own_stops.remove(stamp)   # the controller carrying out our safe stop
                return
            self._carry_out(judge.command(stamp, now))

    def _enforce(self, now: int) -> None:
        """Declare every miss that is due at ``now`` (frames: the judge; stalls: the watches)."""
        judge = self._judge
        self._carry_out(judge.expire(now))
        if not judge.armed:
            return
        watch_now = self._watch_now(now)   # a stall's due and detection: the watches' clock
        due = self._camera_watch.next_check_ns()
        if self._camera_watch.check(watch_now):
            self._carry_out(judge.stall('camera_stall', now, due, watch_now))
        due = self._gripper_watch.next_check_ns()
        if due is not None and watch_now >= due:
            self._poll_joint_states()   # drained only now: it may have come after all
            due = self._gripper_watch.next_check_ns()
            if self._gripper_watch.check(watch_now):
                watch = self._gripper_watch
                self.get_logger().warn(
                    f'gripper joint states silent for {_ms(watch_now - watch.last_ns)} ms '
                    f'(period {_ms(watch.period_ns() or 0)} ms)', throttle_duration_sec=1.0)
                self._carry_out(judge.stall('gripper_stall', now, due, watch_now))

    def _carry_out(self, verdicts: list) -> None:
        """Do what the judge decided, in its order (a safe stop before its log line)."""
        for verdict in verdicts:
            if isinstance(verdict, SafeStop):
                t0 = time.perf_counter_ns()   # wall time on simulated time too
                self._publish_safe_stop(verdict)
                self._reaction.add(time.perf_counter_ns() - t0)
                if self._sim_time and verdict.reason == 'deadline_miss':
                    # for _report_late
                    self._missed[verdict.stamp_ns] = (time.time_ns(), self._tick_source)
                    while len(self._missed) > 32:
                        self._missed.pop(next(iter(self._missed)))
            elif isinstance(verdict, Note):
                log = self.get_logger()
                if verdict.level == 'miss':   # one line a second at most, whatever the rate
                    log.warn(verdict.text, throttle_duration_sec=1.0)
                elif verdict.level == 'info':
                    log.info(verdict.text)
                elif verdict.level == 'error':
                    log.error(verdict.text)
                else:
                    log.warn(verdict.text)
            elif isinstance(verdict, Deactivate):
                self._requests.put('deactivate')

    def _report_late(self, item: _Taken) -> None:
        """Say how a command that came after its frame's miss relates to the miss (sim time)."""
        missed_at, tick_source = self._missed.pop(item.stamp)
        self.get_logger().warn(
            f'the command for missed frame {item.stamp / NS_PER_S:.3f} came '
            f'{_ms(item.received - missed_at)} ms after the miss; it was published '
            f'{_ms(abs(item.source - tick_source))} ms '
            f'{"before" if item.source <= tick_source else "after"} the expiring /clock tick',
            throttle_duration_sec=1.0)

    def _publish_safe_stop(self, verdict: SafeStop) -> None:
        """Ask for a safe stop on the channel; the controller carries it out."""
        stamp = verdict.stamp_ns
        # The controller answers with a zero twist and the hold, stamped ``stamp``: those are
        # not the frame's command (nor the operator's gripper command), so they are skipped.
        self._own_stops.append(stamp)
        self._own_holds.append(stamp)
        opening = self._opening()
        commanded, force = self._last_gripper_command()
        # The measured opening may be a sample up to gripper_sample_every_ms old: while
        # closing on an object, holding there would open the jaws again. Never wider than
        # the last command, so a safe stop never lets go of what the gripper was gripping.
        if opening is not None and commanded is not None:
            opening = min(opening, commanded)
        self._pub_stop.publish(safe_stop.to_message(safe_stop.SafeStopEvent(
            stamp, verdict.reason, hold_opening_m=opening,
            hold_force_n=force if force is not None else self.params['hold_force_n'],
            deadline_ns=verdict.deadline_ns, detected_ns=verdict.detected_ns),
            source=self.get_name()))

    # --- controller lifecycle (worker thread / service) ------------------------------------
    def _work(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            controller = self._controller
            if controller is None:
                continue
            try:
                controller.transition('deactivate', self.params['transition_timeout_s'])
                result = 'done'
                self.get_logger().error(
                    f"'{controller.target}' deactivated after consecutive deadline misses; "
                    'call ~/reactivate when the loop is OK')
            except LifecycleError as exc:
                result = f'failed: {exc}'
                self.get_logger().error(f'could not deactivate the controller: {exc}')
            except Exception as exc:  # noqa: BLE001 - e.g. the context is shutting down
                if self._stop.is_set() or not rclpy.ok(context=self.context):
                    return
                result = f'failed: {type(exc).__name__}: {exc}'
                self.get_logger().error(f'could not deactivate the controller: {result}')
            with self._lock:
                self._judge.deactivation = result

    def _on_reactivate(self, request: Trigger.Request,
                       response: Trigger.Response) -> Trigger.Response:
        controller = self._controller
        with self._lock:
            level, run = self._judge.health.level, self._judge.health.healthy_run
            need = self._judge.health.healthy_to_ok
        if controller is None or not self._active:
            response.success, response.message = False, 'monitor is not active'
            return response
        if level is Level.ERROR:
            response.success = False
            response.message = (f'loop not healthy yet ({run}/{need} healthy periods); '
                                f"'{controller.target}' stays inactive")
            return response
        try:
            if controller.get_state(self.params['transition_timeout_s']) != 'active':
                controller.transition('activate', self.params['transition_timeout_s'])
        except LifecycleError as exc:
            response.success, response.message = False, f'reactivation failed: {exc}'
            self.get_logger().error(response.message)
            return response
        with self._lock:
            self._judge.reactivated(self._now_ns())
        response.success = True
        response.message = f"'{controller.target}' reactivated"
        self.get_logger().info(response.message)
        return response

    # --- diagnostics ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Loop numbers as a dict (also used by the benchmark and tests in-process)."""
        with self._lock:
            return {
                'state': self._judge.health.level.name,
                'frames': self._judge.tracker.opened,
                'frames_ok': self._judge.frames_ok,
                'misses': self._judge.health.misses,
                'consecutive_misses': self._judge.health.consecutive,
                'healthy_run': self._judge.health.healthy_run,
                'late_commands': self._judge.late_commands,
                'settled_commands': self._settled,
                'settle_max_ms': self._settle_max_ns / NS_PER_MS,
                'unenforced_frames': self._judge.unarmed_expired,
                'camera_stalls': self._camera_watch.stalls,
                'gripper_stalls': self._gripper_watch.stalls,
                'clock_steps': self._clock_map.steps,
                'e2e_p50_ms': self._judge.e2e.percentile_ms(50),
                'e2e_p99_ms': self._judge.e2e.percentile_ms(99),
                'detect_p50_ms': self._judge.detect.percentile_ms(50),
                'detect_p99_ms': self._judge.detect.percentile_ms(99),
                'detect_max_ms': self._judge.detect.max_ms(),
                'wake_p50_ms': self._wake_delay.percentile_ms(50),
                'wake_p99_ms': self._wake_delay.percentile_ms(99),
                'reaction_p50_ms': self._reaction.percentile_ms(50),
                'reaction_p99_ms': self._reaction.percentile_ms(99),
                'controller': 'enabled' if self._judge.controller_enabled
                else 'deactivated by monitor',
                'deactivation': self._judge.deactivation,
                'armed': self._judge.armed,
            }

    def _publish_diagnostics(self) -> None:
        if not self._active:
            return
        name = self.get_name()
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        now = self._now_ns()
        with self._lock:
            for stage, stats in self._judge.stages.items():
                status = DiagnosticStatus(name=f'{name}: {stage}', hardware_id='edge_loop')
                p50, p99 = stats.latency.percentile_ms(50), stats.latency.percentile_ms(99)
                over_new = stats.over_budget > stats.reported_over
                stats.reported_over = stats.over_budget
                status.level = DiagnosticStatus.WARN if over_new else DiagnosticStatus.OK
                status.message = ('no output yet' if not len(stats.latency) else
                                  f'p50 {p50:.1f} ms, p99 {p99:.1f} ms, budget '
                                  f'{stats.budget_ns / NS_PER_MS:.0f} ms')
                age = 'never' if stats.last_ns is None else _ms(now - stats.last_ns)
                status.values = [
                    KeyValue(key='latency_p50_ms', value=_fmt(p50)),
                    KeyValue(key='latency_p99_ms', value=_fmt(p99)),
                    KeyValue(key='budget_ms', value=_ms(stats.budget_ns)),
                    KeyValue(key='over_budget', value=str(stats.over_budget)),
                    KeyValue(key='samples', value=str(stats.latency.total)),
                    KeyValue(key='last_output_age_ms', value=age),
                    KeyValue(key='topic', value=stats.topic),
                ]
                array.status.append(status)
            snap = self.snapshot()
            level = self._judge.health.level
            reasons = dict(self._judge.reasons)
        loop = DiagnosticStatus(name=f'{name}: loop', hardware_id='edge_loop',
                                level=_LEVEL_BYTE[level])
        if level is Level.OK:
            loop.message = 'all deadlines met' if not snap['misses'] else (
                f"OK ({snap['misses']} misses in total)")
        elif level is Level.WARN:
            loop.message = f"deadline misses ({snap['consecutive_misses']} consecutive)"
        else:
            loop.message = (f"ERROR: controller {snap['controller']} "
                            f"(deactivation {snap['deactivation']})")
        values = {
            'state': snap['state'],
            'e2e_p50_ms': _fmt(snap['e2e_p50_ms']),
            'e2e_p99_ms': _fmt(snap['e2e_p99_ms']),
            'budget_ms': _ms(self._budget_ns),
            'period_ms': _ms(self._period_ns),
            'frames': snap['frames'],
            'misses': snap['misses'],
            'consecutive_misses': snap['consecutive_misses'],
            'healthy_periods': snap['healthy_run'],
            'late_commands': snap['late_commands'],
            'unenforced_frames': snap['unenforced_frames'],
            'sim_settled_commands': snap['settled_commands'],
            'sim_settle_max_ms': _fmt(snap['settle_max_ms']),
            'camera_stalls': snap['camera_stalls'],
            'gripper_stalls': snap['gripper_stalls'],
            'system_clock_steps': snap['clock_steps'],
            'gripper_sampling': self.gripper_sampling,
            'detect_delay_p50_ms': _fmt(snap['detect_p50_ms']),
            'detect_delay_p99_ms': _fmt(snap['detect_p99_ms']),
            'detect_delay_max_ms': _fmt(snap['detect_max_ms']),
            'detect_samples': str(self._judge.detect.total),
            'wake_delay_p50_ms': _fmt(snap['wake_p50_ms']),
            'wake_delay_p99_ms': _fmt(snap['wake_p99_ms']),
            'reaction_p50_ms': _fmt(snap['reaction_p50_ms']),
            'reaction_p99_ms': _fmt(snap['reaction_p99_ms']),
            'controller': snap['controller'],
            'deactivation': snap['deactivation'],
            'rt_scheduling': self.rt_scheduling,
            'deadline_thread_wakeups': self._wakeups,
            'enforcing': 'yes' if snap['armed'] else 'no (startup grace)',
        }
        values.update({f'misses_{k}': v for k, v in reasons.items()})
        loop.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        array.status.append(loop)
        self._pub_diag.publish(array)


def _name_thread(name: bytes) -> None:
    """Name the calling OS thread (top -H, /proc/PID/task/TID/comm); best effort."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(15, name[:15], 0, 0, 0)   # PR_SET_NAME


def _ignore(*_args: Any) -> None:
    """Callback of the helper node's entities: never called (no executor spins it)."""


def main(args: list[str] | None = None) -> int:
    """Run the deadline monitor (lifecycle: configure + activate to start enforcing)."""
    # Bound how long the deadline thread can wait for the GIL when it wakes up.
    sys.setswitchinterval(0.001)
    return run_node(DeadlineMonitor, args, executor_cls=MultiThreadedExecutor)


if __name__ == '__main__':
    sys.exit(main())
