# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A small commander facade for the pick loop, in the spirit of Navigation2's simple commander.

:class:`LoopCommander` does what a script driving the loop needs, in a few calls: bring the
graph up and wait until the lifecycle manager has it active, start a pick on a new scene
(simulator), wait for its result, bring the loop back after a safety intervention the
documented way, stop and start picking, wait for a bag to end, and shut down.
:class:`LoopObserver` (one rclpy node in this process) reads the results: per-stage latency
against each frame, safe stops, deadline misses, copies per frame, example frames and the
tactile trace. ``edge-loop demo`` (:mod:`edge_loop.demo`) is a thin client of it plus the
report::

    with LoopCommander(bringup.graph('sim'), bringup.default_params_file()) as loop:
        loop.bring_up()
        loop.new_scene('dim')
        pick = loop.run_pick(timeout_sim_s=40.0)
        if pick.fault:
            loop.recover(pick.fault)

Latency here is wall-clock time from the camera frame's arrival at the observer to each
stage's output arriving there. In simulation the loop runs on simulated time in lock-step
(rendering takes ~150 ms of CPU a frame), so the budget is judged on the loop's own compute.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop import bringup, stages, topics

# stage -> the topic whose message (stamped with the source stamp) marks it finished: the
# per-frame stages of the stage table (grasp_state runs at the gripper's rate)
STAGE_OUTPUTS = OrderedDict((s.name, s.topic) for s in stages.STAGES if not s.sampled)
EXAMPLE_PARTS = {'image', *stages.FRAME_STAGES}   # what an example frame shows
EXAMPLE_SETTLE_NS = 2_000_000_000   # sim time after a scene reset before an example frame
SIM_STALL_WALL_S = 120.0   # wall seconds without /clock moving: the simulation is stuck
REACTIVATE_WAIT_S = 120.0  # how long ~/reactivate is retried before a full reset


@dataclass
class Observation:
    """Everything the observer saw, for the table and the report."""

    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    frames: int = 0
    commands: int = 0
    safe_stops: int = 0
    misses: int = 0
    copies: dict[str, float] = field(default_factory=dict)
    # GPU-placed stages: host<->device transfers per frame, {stage: {'h2d image': 1.0, ...}}
    transfers: dict[str, dict[str, float]] = field(default_factory=dict)
    examples: dict[str, Any] = field(default_factory=dict)
    tactile: list[tuple[float, float, float, float]] = field(default_factory=list)
    grasp_states: list[tuple[float, str]] = field(default_factory=list)
    # safety interventions that ended an episode, with how the loop was brought back
    interventions: list[str] = field(default_factory=list)
    # (misses, safe stops) when a replayed bag ended: what came after judged a silent input
    at_input_end: tuple[int, int] | None = None
    # outputs that reached the observer before their frame's camera_info did (not timed)
    early_outputs: int = 0


class LoopObserver:
    """Subscribes to the loop's topics and times each output against its frame."""

    def __init__(self, harness: Any, want_examples: bool = True) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PolygonStamped, PoseArray, TwistStamped
        from lifecycle_msgs.msg import TransitionEvent
        from nav_msgs.msg import OccupancyGrid
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, Image, JointState
        from std_msgs.msg import Bool

        self.h = harness
        self.obs = Observation()
        self._lock = threading.Lock()
        self._frame_wall: OrderedDict[int, float] = OrderedDict()
        # outputs that came before their frame's camera_info: {stamp: [stage, ...]}
        self._early: OrderedDict[int, list[str]] = OrderedDict()
        self._pending: dict[int, dict[str, Any]] = {}
        self._last_frame_ns = 0
        self._episode_start_ns = 0
        self.sim_time = 0.0
        self.lighting = 'nominal'
        self.outcomes: list[Any] = []
        self._want_examples = want_examples
        types = {topics.OBJECTS: PoseArray, topics.GRASP: PolygonStamped,
                 topics.OCCUPANCY: OccupancyGrid, topics.ARM_CMD: TwistStamped}
        n = harness.node
        n.create_subscription(CameraInfo, topics.CAMERA_INFO, self._on_frame, 10)
        for stage, topic in STAGE_OUTPUTS.items():
            n.create_subscription(types[topic], topic,
                                  lambda m, s=stage: self._on_output(s, m), 10)
        n.create_subscription(DiagnosticArray, topics.SAFE_STOP, self._on_safe_stop, 50)
        n.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 10)
        n.create_subscription(DiagnosticArray, topics.SIM_GRASP_OUTCOME, self.outcomes.append,
                              QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        n.create_subscription(DiagnosticArray, topics.GRASP_STATE, self._on_grasp_state, 10)
        n.create_subscription(Clock, topics.CLOCK, self._on_clock, 10)
        n.create_subscription(JointState, topics.JOINT_STATES, self._on_joints, 50)
        # The safety machinery's verdicts: the manager's ~/active and the controller's state.
        self.manager_active: bool | None = None
        self.manager_error = ''
        self.controller_state = ''
        n.create_subscription(Bool, '/lifecycle_manager/active', self._on_manager_active,
                              QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        n.create_subscription(TransitionEvent, '/pick_controller/transition_event',
                              self._on_controller_transition, 10)
        if want_examples:
            n.create_subscription(Image, topics.COLOR, self._on_color, 2)

    @staticmethod
    def _ns(stamp: Any) -> int:
        return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)

    def _on_clock(self, msg: Any) -> None:
        self.sim_time = self._ns(msg.clock) / 1e9

    def _on_manager_active(self, msg: Any) -> None:
        self.manager_active = bool(msg.data)

    def _on_controller_transition(self, msg: Any) -> None:
        self.controller_state = msg.goal_state.label

    def fault(self) -> str | None:
        """Why the loop cannot pick now (controller or graph taken down), or None."""
        if self.manager_active is False:
            return f'graph failure: {self.manager_error or "lifecycle manager reports a failure"}'
        if self.controller_state and self.controller_state != 'active':
            return 'pick_controller deactivated (safe state)'
        return None

    def _on_frame(self, msg: Any) -> None:
        with self._lock:
            self._last_frame_ns = max(self._last_frame_ns, self._ns(msg.header.stamp))
            stamp = self._ns(msg.header.stamp)
            self._frame_wall[stamp] = time.monotonic()
            self.obs.frames += 1
            while len(self._frame_wall) > 300:
                self._frame_wall.popitem(last=False)
            # A stage faster than the camera_info's own delivery to this observer (frames go
            # over shared memory, camera_info over DDS) answers before the frame is seen
            # here: no latency can be taken against the frame's arrival, so it is counted
            # apart, not timed (a 0 ms sample would flatter the stage).
            self.obs.early_outputs += len(self._early.pop(stamp, []))

    def _on_output(self, stage: str, msg: Any) -> None:
        now = time.monotonic()
        stamp = self._ns(msg.header.stamp)
        with self._lock:
            t0 = self._frame_wall.get(stamp)
            if t0 is not None:
                self.obs.latencies_ms[stage].append((now - t0) * 1e3)
            elif stamp > self._last_frame_ns:   # its frame's camera_info is still on the way
                self._early.setdefault(stamp, []).append(stage)
                while len(self._early) > 300:
                    self._early.popitem(last=False)
            if stage == 'pick_controller':
                self.obs.commands += 1
            if (self._want_examples and stage != 'pick_controller'
                    and stamp >= self._episode_start_ns):
                self._pending.setdefault(stamp, {})[stage] = msg
                if len(self._pending) > 60:
                    self._pending.pop(next(iter(self._pending)))

    def _on_color(self, msg: Any) -> None:
        if self.lighting in self.obs.examples:
            return
        stamp = self._ns(msg.header.stamp)
        with self._lock:
            if stamp >= self._episode_start_ns:
                self._pending.setdefault(stamp, {})['image'] = msg

    def new_episode(self, lighting: str) -> None:
        """Label what follows with ``lighting``; forget frames of the previous scene."""
        with self._lock:
            self.lighting = lighting
            self._pending.clear()
            # /clock runs on across resets: frames stamped before this are the old scene.
            self._episode_start_ns = self._last_frame_ns + 1

    def check_examples(self) -> None:
        """Keep one example frame per lighting: the newest with every stage's output."""
        if not self._want_examples or self.lighting in self.obs.examples:
            return
        with self._lock:
            # The occupancy map fuses frames: right after a scene reset it still shows the old
            # scene, fading out. An example frame is taken once it had time to converge.
            settled = self._episode_start_ns + EXAMPLE_SETTLE_NS
            ready = [o for stamp, o in self._pending.items()
                     if stamp >= settled
                     and EXAMPLE_PARTS <= set(o)
                     and o['grasp_planner'].polygon.points]
            if not ready:
                return
            outputs = dict(ready[-1])
        from edge_loop.images import image_to_array, to_rgb

        image = outputs.pop('image')
        rgb = np.array(to_rgb(image_to_array(image), image.encoding))
        self.obs.examples[self.lighting] = (rgb, outputs)

    def _on_safe_stop(self, msg: Any) -> None:
        from edge_loop.nodes.safe_stop import from_message

        if from_message(msg) is None:
            return
        with self._lock:
            self.obs.safe_stops += 1

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith('lifecycle_manager') and _level(status.level) >= 2:
                self.manager_error = status.message
            values = {kv.key: kv.value for kv in status.values}
            if 'misses' in values and 'loop' in status.name:
                try:
                    self.obs.misses = max(self.obs.misses, int(float(values['misses'])))
                except ValueError:
                    pass
            stage = status.name.split(':')[0]
            for key, value in values.items():
                try:
                    if key.startswith('copies_per_frame'):
                        self.obs.copies[stage] = float(value)
                    elif key.startswith('transfers_per_frame: '):
                        self.obs.transfers.setdefault(stage, {})[
                            key.removeprefix('transfers_per_frame: ')] = float(value)
                except ValueError:
                    pass

    def _on_grasp_state(self, msg: Any) -> None:
        if msg.status:
            self.obs.grasp_states.append((self._ns(msg.header.stamp) / 1e9,
                                          msg.status[0].message))
            del self.obs.grasp_states[:-4000]

    def _on_joints(self, msg: Any) -> None:
        if len(msg.position) >= 2 and len(msg.effort) >= 2:
            self.obs.tactile.append((self._ns(msg.header.stamp) / 1e9,
                                     float(msg.position[0] + msg.position[1]),
                                     float(msg.effort[0]), float(msg.effort[1])))
            del self.obs.tactile[:-8000]


def _set_param(harness: Any, node: str, name: str, value: Any) -> None:
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    client = harness.node.create_client(SetParameters, f'/{node}/set_parameters')
    if not client.wait_for_service(timeout_sec=10.0):
        raise RuntimeError(f'{node}/set_parameters not available')
    pv = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(value))
    if isinstance(value, int):
        pv = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)
    req = SetParameters.Request(parameters=[Parameter(name=name, value=pv)])
    result = _call(client, req, 10.0)
    harness.node.destroy_client(client)
    if not result.results or not result.results[0].successful:
        reason = result.results[0].reason if result.results else 'no answer'
        raise RuntimeError(f'{node}: cannot set {name}={value!r}: {reason}')


def _call(client: Any, request: Any, timeout: float) -> Any:
    event = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: event.set())
    if not event.wait(timeout):
        raise RuntimeError(f'{client.srv_name} timed out')
    return future.result()


def _trigger(harness: Any, service: str, timeout: float = 60.0) -> Any:
    from std_srvs.srv import Trigger

    client = harness.node.create_client(Trigger, service)
    try:
        if not client.wait_for_service(timeout_sec=10.0):
            raise RuntimeError(f'{service} not available')
        return _call(client, Trigger.Request(), timeout)
    finally:
        harness.node.destroy_client(client)


def _recover(harness: Any, observer: LoopObserver, fault: str) -> str:
    """Bring the loop back after a safety intervention, the documented way; say how.

    A controller the deadline monitor took down comes back only through its explicit
    ``~/reactivate`` (granted once the loop is healthy again); a graph failure, or a monitor
    that keeps refusing, through the lifecycle manager's ``~/reset`` and ``~/startup``.
    """
    if not fault.startswith('graph failure'):
        give_up = time.monotonic() + REACTIVATE_WAIT_S
        while time.monotonic() < give_up:
            if observer.fault() is None:
                return 'controller active again'
            if observer.manager_active is False:
                break
            answer = _trigger(harness, '/deadline_monitor/reactivate', timeout=15.0)
            if answer.success:
                return 'deadline monitor ~/reactivate'
            time.sleep(1.0)
    answer = _trigger(harness, '/lifecycle_manager/reset', timeout=180.0)
    if not answer.success:
        raise RuntimeError(f'cannot reset the loop after "{fault}": {answer.message}')
    answer = _trigger(harness, '/lifecycle_manager/startup', timeout=300.0)
    if not answer.success:
        raise RuntimeError(f'cannot bring the loop back after "{fault}": {answer.message}')
    give_up = time.monotonic() + 30.0
    while observer.fault() is not None and time.monotonic() < give_up:
        time.sleep(0.1)
    observer.manager_error = ''
    return 'lifecycle manager ~/reset + ~/startup'


def _level(level: Any) -> int:
    """DiagnosticStatus.level as an int (rclpy gives a one-byte bytes object)."""
    return level[0] if isinstance(level, (bytes, bytearray)) else int(level)


def _has_service(harness: Any, name: str) -> bool:
    return any(n == name for n, _ in harness.node.get_service_names_and_types())


def _wait_bag_done(harness: Any, graph: Any, timeout_s: float = 3600.0) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool

    done = harness.collect(Bool, '/bag_player/done',
                           QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    deadline = time.monotonic() + timeout_s
    while not done and time.monotonic() < deadline:
        if graph.dead():
            raise RuntimeError(f'process(es) exited: {graph.dead()}')
        time.sleep(0.1)


@dataclass(frozen=True)
class PickResult:
    """How one pick ended (:meth:`LoopCommander.run_pick`)."""

    success: bool
    reason: str
    attempts: int
    sim_seconds: float
    wall_seconds: float
    fault: str | None = None   # a safety intervention or a stuck simulation ended it


class LoopCommander:
    """Bring the loop up, drive picks, read results, shut down (see the module docstring).

    Args:
        nodes: the graph (:func:`edge_loop.bringup.graph`).
        params_file: the parameters (default: the shipped config/pick.yaml).
        log_dir: one log per node process (default: a new temporary folder).
        domain_id: ROS_DOMAIN_ID of the observer (default: the environment's).
        examples: keep an example frame per lighting condition (the report's pictures).
    """

    def __init__(self, nodes: list[bringup.NodeSpec], params_file: Path | None = None,
                 log_dir: Path | None = None, domain_id: int | None = None,
                 examples: bool = True) -> None:
        from edge_loop.launcher import Graph

        self.nodes = nodes
        self.params_file = Path(params_file or bringup.default_params_file())
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix='edge_loop_demo_'))
        self.domain_id = (int(os.environ.get('ROS_DOMAIN_ID', '0')) if domain_id is None
                          else domain_id)
        self.graph = Graph(nodes, self.params_file, self.log_dir)
        self._examples = examples
        self.harness: Any = None
        self.observer: LoopObserver | None = None

    # --- lifetime -------------------------------------------------------------------------
    def __enter__(self) -> LoopCommander:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.shutdown()

    def bring_up(self, timeout_s: float = 120.0) -> None:
        """Start every node process and wait until the lifecycle manager has them active."""
        from edge_loop.testing import RosHarness

        if self.harness is None:
            self.harness = RosHarness(self.domain_id, name='edge_loop_demo')
            self.observer = LoopObserver(self.harness, want_examples=self._examples)
        self.graph.start()
        self.wait_active(timeout_s)

    def wait_active(self, timeout_s: float = 120.0) -> None:
        """Until every managed node is active (RuntimeError when bring-up fails)."""
        self.graph.wait_active(timeout_s)

    def shutdown(self) -> None:
        """Stop every node process (lifecycle shutdown first) and the observer (idempotent)."""
        self.graph.stop()
        harness, self.harness = self.harness, None
        if harness is not None:
            harness.close()

    def dead(self) -> list[str]:
        """Node processes that exited."""
        return self.graph.dead()

    @property
    def obs(self) -> Observation:
        """What the observer saw so far."""
        return self._observer().obs

    def _observer(self) -> LoopObserver:
        if self.observer is None:
            raise RuntimeError('the loop is not up: call bring_up() first')
        return self.observer

    # --- picks (simulator) ----------------------------------------------------------------
    def new_scene(self, lighting: str) -> str:
        """A new scene under ``lighting``; the controller back to observe. Returns its name."""
        observer = self._observer()
        _set_param(self.harness, 'sim_robot', 'lighting', lighting)
        response = _trigger(self.harness, '/sim_robot/reset_scene')
        if not response.success:
            raise RuntimeError(f'reset_scene failed: {response.message}')
        observer.new_episode(lighting)
        if _has_service(self.harness, '/pick_controller/reset'):
            _trigger(self.harness, '/pick_controller/reset', timeout=10.0)
        return response.message

    def run_pick(self, timeout_sim_s: float) -> PickResult:
        """Wait for the pick on the current scene to end (success, failure, a fault).

        A safety intervention (the deadline monitor or the lifecycle manager taking the
        controller down) or a simulation that stops advancing ends it with that ``fault``;
        :meth:`recover` brings the loop back. An exited node process raises RuntimeError.
        """
        observer = self._observer()
        n_outcomes = len(observer.outcomes)
        wall0, sim0 = time.monotonic(), observer.sim_time
        last_sim, last_sim_wall = observer.sim_time, wall0
        attempts = 0
        while True:
            if self.dead():
                raise RuntimeError(f'node process(es) exited: {", ".join(self.dead())}')
            fault = observer.fault()
            if fault is not None:
                time.sleep(0.5)   # the manager's ~/active may trail the controller's state
                fault = observer.fault()
                if fault is not None:
                    return self._result(False, fault, attempts, sim0, wall0, fault)
            now = time.monotonic()
            if observer.sim_time != last_sim:
                last_sim, last_sim_wall = observer.sim_time, now
            elif now - last_sim_wall > SIM_STALL_WALL_S:
                fault = f'simulated time stood still for {SIM_STALL_WALL_S:.0f} s'
                return self._result(False, fault, attempts, sim0, wall0, fault)
            observer.check_examples()
            new = observer.outcomes[n_outcomes:]
            n_outcomes += len(new)
            for msg in new:
                attempts += 1
                status = msg.status[0]
                if _level(status.level) == 0:   # OK: held after the lift
                    return self._result(True, status.message, attempts, sim0, wall0)
            if observer.sim_time - sim0 > timeout_sim_s:
                return self._result(False, 'timeout' if not attempts else 'failed attempts',
                                    attempts, sim0, wall0)
            time.sleep(0.05)

    def _result(self, success: bool, reason: str, attempts: int, sim0: float, wall0: float,
                fault: str | None = None) -> PickResult:
        return PickResult(success, reason, attempts, self._observer().sim_time - sim0,
                          time.monotonic() - wall0, fault)

    def recover(self, fault: str) -> str:
        """Bring the loop back after ``fault``; say how (see :func:`_recover`)."""
        return _recover(self.harness, self._observer(), fault)

    def stop_picks(self, timeout_s: float = 30.0) -> None:
        """Take the controller down (it sends one zero twist first; the robot holds still).

        The deadline monitor then sees frames without commands: it stops them and reports
        ERROR, as for any controller gone quiet; :meth:`start_picks` brings it back.
        """
        self.harness.lifecycle('pick_controller').transition('deactivate', timeout=timeout_s)

    def start_picks(self) -> str:
        """Bring a stopped controller back the documented way (see :meth:`recover`)."""
        return self.recover('picks stopped by the commander')

    # --- bag replay -----------------------------------------------------------------------
    def wait_bag_done(self, timeout_s: float = 3600.0) -> None:
        """Until bag_player says the bag ended (RuntimeError when a process exits).

        The safety counts at that moment are kept (``Observation.at_input_end``): after the
        bag's end the deadline monitor rightly finds the gripper topics silent, which says
        nothing about the replayed frames. Then half a second for the last frame's outputs.
        """
        _wait_bag_done(self.harness, self.graph, timeout_s)
        if self.observer is not None:
            obs = self.observer.obs
            obs.at_input_end = (obs.misses, obs.safe_stops)
        time.sleep(0.5)  # outputs of the last frame
