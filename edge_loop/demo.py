# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop demo``: the main job.

Brings the whole graph up (one process per node, frames over shared memory, the deadline
monitor enforcing the budget, the lifecycle manager in charge) against ``sim_robot`` or a bag,
runs picks across every lighting condition on held-out objects, prints a table (pick success
with its 95% interval, per-stage and end-to-end latency p50/p99 against the budget, deadline
misses, copies per frame) and writes a report folder (Markdown + PNG).

Latency here is wall-clock time from the camera frame's arrival at an observer to each
stage's output arriving there. In simulation the loop runs on simulated time in lock-step
(rendering takes ~150 ms of CPU a frame), so the budget is judged on the loop's own compute.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop import bringup, stages, topics
from edge_loop.stats import percentiles, wilson_interval

# stage -> the topic whose message (stamped with the source stamp) marks it finished: the
# per-frame stages of the stage table (grasp_state runs at the gripper's rate)
STAGE_OUTPUTS = OrderedDict((s.name, s.topic) for s in stages.STAGES if not s.sampled)
EXAMPLE_PARTS = {'image', *stages.FRAME_STAGES}   # what an example frame shows
LIGHTING = ('nominal', 'dim', 'overexposed', 'harsh_shadow', 'color_cast', 'glare', 'flicker',
            'motion_blur')   # every condition of edge_loop.sim.lighting
EXAMPLE_SETTLE_NS = 2_000_000_000   # sim time after a scene reset before an example frame
SIM_STALL_WALL_S = 120.0   # wall seconds without /clock moving: the simulation is stuck
REACTIVATE_WAIT_S = 120.0  # how long ~/reactivate is retried before a full reset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop demo``."""
    parser.add_argument('--episodes', type=int, default=8,
                        help='pick episodes (cycling through every lighting condition)')
    parser.add_argument('--bag', type=Path, default=None,
                        help='replay this bag through the graph instead of the simulator')
    parser.add_argument('--transport', choices=bringup.TRANSPORTS, default='shm')
    parser.add_argument('--seed', type=int, default=800, help='first scene seed')
    parser.add_argument('--objects', type=int, default=3, help='objects per scene (1-5)')
    parser.add_argument('--episode-timeout', type=float, default=40.0,
                        help='simulated seconds before an episode counts as failed')
    parser.add_argument('--report', type=Path, default=Path('reports/demo'),
                        help='report folder (Markdown + PNG)')
    parser.add_argument('--max-minutes', type=float, default=0.0,
                        help='start no new episode after this many minutes of wall time '
                             '(0: no limit); the report says how many ran')
    parser.add_argument('--log-dir', type=Path, default=None)
    parser.add_argument('--params-file', type=Path, default=None)


@dataclass
class Episode:
    """One pick episode's result."""

    index: int
    lighting: str
    seed: int
    success: bool
    reason: str
    attempts: int
    sim_seconds: float
    wall_seconds: float


@dataclass
class Observation:
    """Everything the observer saw, for the table and the report."""

    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    frames: int = 0
    commands: int = 0
    safe_stops: int = 0
    misses: int = 0
    copies: dict[str, float] = field(default_factory=dict)
    examples: dict[str, Any] = field(default_factory=dict)
    tactile: list[tuple[float, float, float, float]] = field(default_factory=list)
    grasp_states: list[tuple[float, str]] = field(default_factory=list)
    # safety interventions that ended an episode, with how the loop was brought back
    interventions: list[str] = field(default_factory=list)


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
        from std_msgs.msg import Bool, Header

        self.h = harness
        self.obs = Observation()
        self._lock = threading.Lock()
        self._frame_wall: OrderedDict[int, float] = OrderedDict()
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
        n.create_subscription(Header, topics.SAFE_STOP, self._on_safe_stop, 10)
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
            self._frame_wall[self._ns(msg.header.stamp)] = time.monotonic()
            self.obs.frames += 1
            while len(self._frame_wall) > 300:
                self._frame_wall.popitem(last=False)

    def _on_output(self, stage: str, msg: Any) -> None:
        now = time.monotonic()
        stamp = self._ns(msg.header.stamp)
        with self._lock:
            t0 = self._frame_wall.get(stamp)
            if t0 is not None:
                self.obs.latencies_ms[stage].append((now - t0) * 1e3)
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
            for key, value in values.items():
                if key.startswith('copies_per_frame'):
                    try:
                        self.obs.copies[status.name.split(':')[0]] = float(value)
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


def _budgets(params_file: Path) -> tuple[float, dict[str, float]]:
    return stages.budgets_ms(stages.monitor_parameters([params_file]))


def _progress(done: int, total: int, ok: int, note: str) -> None:
    width = 28
    filled = int(width * done / max(total, 1))
    bar = '#' * filled + '.' * (width - filled)
    sys.stderr.write(f'\r[{bar}] {done}/{total} picks, {ok} ok  {note:<40}')
    sys.stderr.flush()
    if done == total:
        sys.stderr.write('\n')


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


def run_episodes(args: argparse.Namespace, harness: Any, observer: LoopObserver,
                 episodes: list[Episode], graph: Any = None) -> list[Episode]:
    """Run the pick episodes against sim_robot, appending results to ``episodes``.

    A safety intervention (the deadline monitor or the lifecycle manager taking the
    controller down) or a simulation that stops advancing ends the episode as failed with
    that reason; the loop is brought back (:func:`_recover`) and the run goes on, each
    intervention listed in the table. An exited node process ends the run (RuntimeError).
    """
    total = args.episodes
    stop_at = time.monotonic() + args.max_minutes * 60.0 if args.max_minutes > 0 else None
    _progress(0, total, 0, 'starting')
    for i in range(total):
        if stop_at is not None and time.monotonic() > stop_at:
            print(f'\nedge-loop demo: --max-minutes {args.max_minutes:g} reached after {i} of '
                  f'{total} episodes', flush=True)
            break
        lighting = LIGHTING[i % len(LIGHTING)]
        _set_param(harness, 'sim_robot', 'lighting', lighting)
        n_outcomes = len(observer.outcomes)
        response = _trigger(harness, '/sim_robot/reset_scene')
        if not response.success:
            raise RuntimeError(f'reset_scene failed: {response.message}')
        observer.new_episode(lighting)
        if _has_service(harness, '/pick_controller/reset'):
            _trigger(harness, '/pick_controller/reset', timeout=10.0)
        wall0, sim0 = time.monotonic(), observer.sim_time
        last_sim, last_sim_wall = observer.sim_time, wall0
        result, attempts, fault = None, 0, None
        while result is None:
            if graph is not None and graph.dead():
                raise RuntimeError(f'node process(es) exited: {", ".join(graph.dead())}')
            fault = observer.fault()
            if fault is not None:
                time.sleep(0.5)   # the manager's ~/active may trail the controller's state
                fault = observer.fault()
                if fault is not None:
                    result = (False, fault)
                    break
            now = time.monotonic()
            if observer.sim_time != last_sim:
                last_sim, last_sim_wall = observer.sim_time, now
            elif now - last_sim_wall > SIM_STALL_WALL_S:
                fault = f'simulated time stood still for {SIM_STALL_WALL_S:.0f} s'
                result = (False, fault)
                break
            observer.check_examples()
            new = observer.outcomes[n_outcomes:]
            for msg in new:
                attempts += 1
                status = msg.status[0]
                if _level(status.level) == 0:   # OK: held after the lift
                    result = (True, status.message)
                    break
            n_outcomes += len(new)
            if result is None and observer.sim_time - sim0 > args.episode_timeout:
                result = (False, 'timeout' if not attempts else 'failed attempts')
            time.sleep(0.05)
        ep = Episode(i, lighting, int(response.message.split(':')[0].split()[-1])
                     if response.message.startswith('seed') else -1, result[0], result[1],
                     attempts, observer.sim_time - sim0, time.monotonic() - wall0)
        episodes.append(ep)
        _progress(i + 1, total, sum(e.success for e in episodes),
                  f'{lighting}: {"ok" if ep.success else ep.reason}')
        if fault is not None:
            how = _recover(harness, observer, fault)
            observer.obs.interventions.append(f'episode {i} ({lighting}): {fault}; back by {how}')
    return episodes


def _level(level: Any) -> int:
    """DiagnosticStatus.level as an int (rclpy gives a one-byte bytes object)."""
    return level[0] if isinstance(level, (bytes, bytearray)) else int(level)


def _has_service(harness: Any, name: str) -> bool:
    return any(n == name for n, _ in harness.node.get_service_names_and_types())


def summary_table(episodes: list[Episode], obs: Observation, e2e_budget: float,
                  stage_budgets: dict[str, float]) -> str:
    """The table the demo prints."""
    lines = []
    if episodes:
        ok = sum(e.success for e in episodes)
        lo, hi = wilson_interval(ok, len(episodes))
        times = [e.sim_seconds for e in episodes if e.success]
        lines.append(f'pick success: {ok}/{len(episodes)} = {ok / len(episodes):.0%} '
                     f'(95% Wilson interval {lo:.0%}-{hi:.0%}); time per successful pick '
                     f'(sim s) p50 {percentiles(times, [50])[0]:.1f}')
        per = defaultdict(lambda: [0, 0])
        for e in episodes:
            per[e.lighting][0] += e.success
            per[e.lighting][1] += 1
        lines.append('per lighting: ' + ', '.join(f'{k} {v[0]}/{v[1]}' for k, v in per.items()))
    else:
        lines.append('pick success: n/a (bag replay: no physics)')
    lines.append('')
    lines.append(f'{"stage":<18} {"n":>6} {"p50 ms":>8} {"p99 ms":>8} {"budget ms":>10}  ok')
    for stage in STAGE_OUTPUTS:
        values = obs.latencies_ms.get(stage, [])
        p50, p99 = percentiles(values)
        budget = e2e_budget if stage == 'pick_controller' else stage_budgets.get(stage, 0.0)
        name = 'end-to-end' if stage == 'pick_controller' else stage
        verdict = 'yes' if values and p99 <= budget else ('-' if not values else 'NO')
        lines.append(f'{name:<18} {len(values):>6} {p50:>8.1f} {p99:>8.1f} {budget:>10.1f}  '
                     f'{verdict}')
    lines.append('')
    lines.append(f'frames {obs.frames}, commands {obs.commands}, deadline misses '
                 f'{obs.misses}, safe stops {obs.safe_stops}')
    if obs.interventions:
        lines.append(f'safety interventions that ended an episode: {len(obs.interventions)}')
        lines.extend(f'  - {note}' for note in obs.interventions)
    if obs.copies:
        lines.append('copies per frame after ingest: ' + ', '.join(
            f'{k} {v:g}' for k, v in sorted(obs.copies.items())))
    return '\n'.join(lines)


def run(args: argparse.Namespace) -> int:
    """Bring the graph up, run the episodes (or the bag), print the table, write the report."""
    from edge_loop.launcher import Graph
    from edge_loop.testing import ros_harness

    if args.episodes < 1:
        print('edge-loop demo: --episodes must be >= 1', file=sys.stderr)
        return 2
    if args.bag is not None and not args.bag.exists():
        print(f'edge-loop demo: bag {args.bag} does not exist', file=sys.stderr)
        return 2
    params_file = args.params_file or bringup.default_params_file()
    # The copy audit is on for the frame-reading stages: the table reports copies per frame.
    extra: dict[str, dict[str, Any]] = {stage: {'copy_audit': True}
                                        for stage in stages.FRAME_STAGES}
    if args.bag is not None:
        nodes = bringup.graph('bag', bag=str(args.bag), transport=args.transport, extra=extra)
    else:
        # lock-step and sim time come with the graph description (bringup.SOURCE_SETTINGS)
        extra['sim_robot'] = {'split': 'heldout', 'seed': args.seed - 1,
                              'n_objects': args.objects}
        nodes = bringup.graph('sim', transport=args.transport, extra=extra)
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix='edge_loop_demo_'))
    graph = Graph(nodes, Path(params_file), log_dir)

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt('terminated')

    signal.signal(signal.SIGTERM, on_term)
    episodes: list[Episode] = []
    domain = int(os.environ.get('ROS_DOMAIN_ID', '0'))
    print(f'edge-loop demo: starting {len(nodes)} nodes (logs in {log_dir})', flush=True)
    observer = None
    try:
        with ros_harness(domain, name='edge_loop_demo') as harness:
            observer = LoopObserver(harness)
            graph.start()
            graph.wait_active(120.0)
            print('edge-loop demo: graph active: ' + ', '.join(n.name for n in nodes),
                  flush=True)
            if args.bag is not None:
                _wait_bag_done(harness, graph)
            else:
                run_episodes(args, harness, observer, episodes, graph)
            obs = observer.obs
    except (RuntimeError, KeyboardInterrupt) as exc:
        print(f'\nedge-loop demo: stopping: {exc or type(exc).__name__}', file=sys.stderr)
        graph.stop()
        if observer is None or not episodes:
            return 1
        # nothing lost: what ran so far is still reported
        print(f'edge-loop demo: results of the {len(episodes)} episode(s) that ran:',
              file=sys.stderr)
        _finish(args, episodes, observer.obs, Path(params_file))
        return 1
    graph.stop()
    _finish(args, episodes, obs, Path(params_file))
    return 0


def _finish(args: argparse.Namespace, episodes: list[Episode], obs: Observation,
            params_file: Path) -> None:
    """Print the table and write the report folder."""
    e2e, stage_budgets = _budgets(params_file)
    table = summary_table(episodes, obs, e2e, stage_budgets)
    print(table)
    from edge_loop.report import write_report

    path = write_report(args.report, table, episodes, obs, e2e, stage_budgets)
    print(f'report: {path}')


def _wait_bag_done(harness: Any, graph: Any) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool

    done = harness.collect(Bool, '/bag_player/done',
                           QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    deadline = time.monotonic() + 3600
    while not done and time.monotonic() < deadline:
        if graph.dead():
            raise RuntimeError(f'process(es) exited: {graph.dead()}')
        time.sleep(0.1)
    time.sleep(0.5)  # outputs of the last frame
