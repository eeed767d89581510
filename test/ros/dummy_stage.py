# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Test-only fakes for the deadline monitor and lifecycle manager tests and the benchmark.

- :class:`DummyStage`: a lifecycle node that does nothing but its transitions (the base logs
  'configured', 'activated', ...); run it as a process with :func:`start_dummy` (or
  ``python test/ros/dummy_stage.py --ros-args -r __node:=NAME``). ``-p gain:=-1.0`` makes
  configure fail on a bad parameter.
- :class:`FakeLoop`: a fake camera, fake stages and a fake controller publishing from a
  thread on a given node, each frame following a plan (on time, late, missing, stalled).
"""

from __future__ import annotations

import heapq
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _dummy_class():
    from edge_loop.nodes.stage_base import Param, StageNode

    class DummyStage(StageNode):
        """A lifecycle stage that only transitions."""

        PARAMS = (Param('gain', 1.0, 'A parameter that must be >= 0', min=0.0),
                  Param('configure_delay_s', 0.0, 'Sleep in configure (s)', min=0.0),
                  Param('gil_hog_s', 0.0, 'While active, a busy thread holds the GIL this '
                        'long at a time (a node whose executor is starved) (s)', min=0.0))

        def __init__(self) -> None:
            super().__init__('dummy_stage')
            self._hog = threading.Event()

        def configure_stage(self) -> None:
            time.sleep(self.params['configure_delay_s'])

        def activate_stage(self) -> None:
            if self.params['gil_hog_s'] > 0.0:
                self._hog.set()
                # Starved only once the activation has been answered: started inside the
                # change_state callback, the hog left its reply dozens of GIL hand-overs to
                # make, and the manager's 20 s change_state timeout sometimes ran out first.
                threading.Timer(1.0, self._start_hog).start()

        def _start_hog(self) -> None:
            if not self._hog.is_set():
                return
            # The interpreter hands the GIL over only every switch interval: every other
            # thread (the executor answering get_state) waits up to that long per step.
            sys.setswitchinterval(self.params['gil_hog_s'])
            threading.Thread(target=self._busy, daemon=True).start()

        def deactivate_stage(self) -> None:
            self._hog.clear()

        def _busy(self) -> None:
            while self._hog.is_set():
                sum(range(1000))

    return DummyStage


def main(args: list[str] | None = None) -> int:
    """Run one DummyStage."""
    from edge_loop.nodes.stage_base import run_node

    return run_node(_dummy_class(), args)


def start_dummy(name: str, env: dict[str, str], log_dir: Path,
                params: dict[str, Any] | None = None):
    """Start a DummyStage process named ``name`` (a :class:`NodeProcess`)."""
    from edge_loop.bringup import NodeSpec
    from edge_loop.testing import NodeProcess

    env = dict(env)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(HERE), env.get('PYTHONPATH')) if p)
    log_dir.mkdir(parents=True, exist_ok=True)
    spec = NodeSpec(name=name, executable='dummy_stage', parameters=params or {})
    return NodeProcess('dummy_stage', spec.ros_args(None), env, log_dir / f'{name}.log',
                       name=name)


# --- fake loop ------------------------------------------------------------------------------
STAGE_TOPICS = (  # (stage, topic, type) of the default monitor configuration
    ('object_locator', '/edge_loop/objects', 'geometry_msgs.msg.PoseArray'),
    ('grasp_planner', '/edge_loop/grasp', 'geometry_msgs.msg.PolygonStamped'),
    ('occupancy_mapper', '/edge_loop/occupancy', 'nav_msgs.msg.OccupancyGrid'),
)


def _cls(path: str) -> Any:
    module, name = path.rsplit('.', 1)
    return getattr(__import__(module, fromlist=[name]), name)


@dataclass
class FramePlan:
    """What the fake loop does for one frame."""

    command_delay_s: float | None = 0.010   # None: no command at all
    stage_delay_s: float = 0.004
    camera: bool = True                     # False: the camera skips this period


@dataclass
class SentFrame:
    """A frame the fake camera published."""

    stamp_ns: int
    plan: FramePlan
    kind: str
    command_ns: int | None = None    # when the command was actually published (system clock)

    def missed(self, budget_ns: int, margin_ns: int = 2_000_000,
               delivery_ns: int = 30_000_000) -> bool | None:
        """Whether the command really missed the deadline; None when it cannot be told.

        The oracle for the monitor: the fake loop itself can be late when the machine is
        loaded, so what counts is when the command went out, not what was planned. None
        within ``margin_ns`` after the deadline and ``delivery_ns`` before it: the monitor
        judges a command by its arrival, and a loaded machine (CI, 2 cores) has been seen to
        deliver a command that went out just in time a few ms after the deadline.
        """
        if self.command_ns is None:
            return True
        late_by = self.command_ns - (self.stamp_ns + budget_ns)
        if -delivery_ns <= late_by <= margin_ns:
            return None
        return late_by > 0


@dataclass(order=True)
class _Event:
    due: float
    seq: int
    action: Callable[[], None] = field(compare=False)


class FakeLoop:
    """Fake camera + stages + controller + gripper on ``node``, driven by a plan per frame."""

    def __init__(self, node: Any, rate_hz: float = 15.0, joint_rate_hz: float = 100.0,
                 stages: tuple[tuple[str, str, str], ...] = STAGE_TOPICS,
                 grasp_state: bool = True, grasp_state_every: int = 4) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import TwistStamped
        from sensor_msgs.msg import CameraInfo, JointState

        self.node = node
        self.period = 1.0 / rate_hz
        self.joint_period = 1.0 / joint_rate_hz if joint_rate_hz > 0 else None
        self._cam = node.create_publisher(CameraInfo, '/camera/color/camera_info', 10)
        self._stages = [(name, _cls(t), node.create_publisher(_cls(t), topic, 10))
                        for name, topic, t in stages]
        self._cmd = node.create_publisher(TwistStamped, '/edge_loop/cmd/arm', 10)
        self._grip_cmd = node.create_publisher(JointState, '/edge_loop/cmd/gripper', 10)
        self._joints = node.create_publisher(JointState, '/gripper/joint_states', 10)
        self._grasp_state = (node.create_publisher(DiagnosticArray, '/edge_loop/grasp_state',
                                                   10) if grasp_state else None)
        self._types = (CameraInfo, TwistStamped, JointState, DiagnosticArray)
        self.plan: Callable[[int], tuple[str, FramePlan]] = lambda i: ('nominal', FramePlan())
        self.sent: list[SentFrame] = []
        self.joints_enabled = True
        self.opening = 0.04              # measured (joint states)
        self.commanded_opening = 0.06    # in each gripper command
        self._events: list[_Event] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.frame_index = 0
        self._next_frame = 0.0
        self._joint_ticks = 0
        self.grasp_state_every = grasp_state_every   # joint-state samples per grasp_state

    def publishers(self) -> list[Any]:
        """Every publisher (to wait for matching subscribers)."""
        return [self._cam, self._cmd, self._joints] + [p for _, _, p in self._stages]

    def start(self) -> None:
        """Start publishing."""
        self._stop.clear()
        t0 = time.monotonic()
        self._next_frame = t0
        self._schedule(t0, self._frame)
        if self.joint_period:
            self._schedule(t0, self._joint_tick)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop publishing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _schedule(self, due: float, action: Callable[[], None]) -> None:
        with self._lock:
            heapq.heappush(self._events, _Event(due, next(self._seq), action))

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                event = self._events[0] if self._events else None
            if event is None:
                time.sleep(0.001)
                continue
            delay = event.due - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, 0.01))
                continue
            with self._lock:
                heapq.heappop(self._events)
            event.action()

    def _stamp(self, stamp_ns: int) -> Any:
        from builtin_interfaces.msg import Time
        return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)

    def _frame(self) -> None:
        now = time.monotonic()
        self._next_frame = max(self._next_frame + self.period, now - self.period)
        self._schedule(self._next_frame, self._frame)
        kind, plan = self.plan(self.frame_index)
        self.frame_index += 1
        if not plan.camera:
            self.sent.append(SentFrame(-1, plan, kind))
            return
        CameraInfo, TwistStamped, JointState, _ = self._types
        stamp_ns = self.node.get_clock().now().nanoseconds
        stamp = self._stamp(stamp_ns)
        msg = CameraInfo()
        msg.header.stamp = stamp
        msg.header.frame_id = 'camera_color_optical_frame'
        self._cam.publish(msg)
        sent = SentFrame(stamp_ns, plan, kind)
        self.sent.append(sent)

        def stages() -> None:
            for _name, cls, pub in self._stages:
                out = cls()
                out.header.stamp = stamp
                out.header.frame_id = 'world'
                pub.publish(out)

        self._schedule(now + plan.stage_delay_s, stages)
        if plan.command_delay_s is not None:
            def command() -> None:
                cmd = TwistStamped()
                cmd.header.stamp = stamp
                cmd.header.frame_id = 'world'
                cmd.twist.linear.x = 0.05
                self._cmd.publish(cmd)
                sent.command_ns = time.time_ns()
                grip = JointState(name=['gripper'], position=[self.commanded_opening],
                                  effort=[12.0])
                grip.header.stamp = stamp
                self._grip_cmd.publish(grip)
            self._schedule(now + plan.command_delay_s, command)

    def _joint_tick(self) -> None:
        self._schedule(time.monotonic() + self.joint_period, self._joint_tick)
        if not self.joints_enabled:
            return
        _, _, JointState, DiagnosticArray = self._types
        msg = JointState(name=['left_finger', 'right_finger'],
                         position=[self.opening / 2, self.opening / 2], effort=[0.0, 0.0])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self._joints.publish(msg)
        self._joint_ticks += 1
        if self._grasp_state is not None and self._joint_ticks % self.grasp_state_every == 0:
            state = DiagnosticArray()
            state.header.stamp = msg.header.stamp
            self._grasp_state.publish(state)


if __name__ == '__main__':
    sys.exit(main())
