# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline monitor as a process, fed by a fake camera/stages/controller in the test."""

from __future__ import annotations

import signal
import threading
import time
import warnings

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from dummy_stage import FakeLoop, FramePlan, start_dummy
from geometry_msgs.msg import PoseArray, TwistStamped
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from edge_loop.nodes import safe_stop
from edge_loop.paths import SOURCE_ROOT
from edge_loop.testing import monitor_loop_status

pytestmark = pytest.mark.ros

# Behaviour, not speed, is tested here (bench/bench_deadline.py measures the 15 Hz / 66 ms
# budget): a roomy budget keeps the Python fakes' scheduling jitter on a loaded CI machine
# from turning nominal frames into misses. The fake gripper (100 Hz from a Python thread of
# this busy process) has been seen silent for 300 ms on CI: a gripper stall only after 1 s,
# or a spurious stall miss joins the consecutive count that a test is about.
RATE_HZ = 10.0
BUDGET_S = 0.200
MONITOR_PARAMS = {'control_rate_hz': RATE_HZ, 'end_to_end_budget_ms': BUDGET_S * 1000,
                  'misses_to_deactivate': 3, 'healthy_periods_to_ok': 15, 'stall_periods': 5,
                  'gripper_stall_min_ms': 1000.0, 'startup_grace_s': 3.0, 'arm_after_on_time': 5,
                  'diagnostics_period_s': 0.5,
                  # the 100 Hz fake gripper is sampled in 20 ms windows (a 10 ms one needs
                  # >= 133 Hz), every 100 ms: the stall watch sees 1 in 10 of its samples
                  'gripper_sample_every_ms': 100.0, 'gripper_sample_window_ms': 20.0}


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Received:
    """Messages with their receive time (ns, system clock)."""

    def __init__(self, harness, msg_type, topic):
        self.items: list[tuple[int, object]] = []
        self._lock = threading.Lock()
        harness.node.create_subscription(msg_type, topic, self._on, 50)

    def _on(self, msg) -> None:
        with self._lock:
            self.items.append((time.time_ns(), msg))

    def msgs(self) -> list:
        with self._lock:
            return [m for _, m in self.items]

    def timed(self) -> list:
        with self._lock:
            return list(self.items)


class Probed:
    """Like :class:`Received`, timed by DDS on arrival (the test's executor delay left out)."""

    def __init__(self, harness, msg_type, topic):
        self._probe = harness.receive_probe(msg_type, topic)

    def msgs(self) -> list:
        return [m for m, _ in list(self._probe.samples)]

    def timed(self) -> list:
        return [(t, m) for m, t in list(self._probe.samples)]


class Stops(Probed):
    """The safe-stop channel, read as :class:`~edge_loop.nodes.safe_stop.SafeStopEvent`."""

    def __init__(self, harness):
        super().__init__(harness, DiagnosticArray, '/edge_loop/safe_stop')

    def msgs(self) -> list:
        return [safe_stop.from_message(m) for m in super().msgs()]

    def timed(self) -> list:
        return [(t, safe_stop.from_message(m)) for t, m in super().timed()]


def loop_status(diags: Received):
    """Latest loop status of the monitor as (level, {key: value})."""
    return monitor_loop_status(diags.msgs())


@pytest.fixture
def rig(harness, node_procs, ros_domain, tmp_path):
    """Monitor process (active), dummy controller (active), fake loop, collectors."""
    procs = []

    def start_monitor(**params):
        proc = node_procs('deadline_monitor', params={**MONITOR_PARAMS, **params})
        client = harness.lifecycle('deadline_monitor')
        # after a kill the dead server stays in the graph for a while: wait for an answer
        client.wait_for_state('unconfigured', 30.0)
        client.transition('configure', timeout=30.0)
        client.transition('activate', timeout=10.0)
        return proc

    controller = start_dummy('pick_controller', ros_domain[1], tmp_path / 'nodes')
    procs.append(controller)
    ctl = harness.lifecycle('pick_controller')
    ctl.transition('configure', timeout=30.0)
    ctl.transition('activate', timeout=10.0)

    class Rig:
        pass

    r = Rig()
    r.start_monitor = start_monitor
    r.controller = ctl
    # When a safe stop went out is judged on its DDS arrival time: this test process's
    # executor (one Python thread, the fake loop beside it) can lag by more than a period.
    r.stops = Stops(harness)
    r.arm = Received(harness, TwistStamped, '/edge_loop/cmd/arm')
    r.gripper = Received(harness, JointState, '/edge_loop/cmd/gripper')
    r.diags = Received(harness, DiagnosticArray, '/diagnostics')
    r.fake = FakeLoop(harness.node, rate_hz=RATE_HZ)
    yield r
    r.fake.stop()
    for proc in procs:
        proc.stop()


def _wait_matched(harness, fake: FakeLoop) -> None:
    for pub in fake.publishers():
        harness.wait_until(lambda p=pub: p.get_subscription_count() >= 1, 30.0,
                           f'monitor subscribed to {pub.topic_name}')
    harness.wait_for_publishers('/edge_loop/safe_stop', 1, 30.0)


def _plan(faults: dict[int, tuple[str, FramePlan]]):
    return lambda i: faults.get(i, ('nominal', FramePlan()))


def _stamps(stops, reason='deadline_miss') -> list[int]:
    return [m.stamp_ns for _, m in stops if m.reason == reason]


@pytest.mark.every_distro
def test_nominal_frames_no_miss_late_and_missing_command_safe_stop(harness, rig):
    rig.start_monitor(misses_to_deactivate=1000)
    _wait_matched(harness, rig.fake)
    late = FramePlan(command_delay_s=BUDGET_S + 0.060)
    slow_stages = FramePlan(command_delay_s=0.080, stage_delay_s=0.060)   # in time overall
    # after the 3 s start-up grace (30 frames): enforced even if a slow start left the
    # monitor unarmed (see test_consecutive_misses_deactivate_controller_until_reactivate)
    rig.fake.plan = _plan({40: ('slow_stages', slow_stages), 45: ('late', late),
                           52: ('missing', FramePlan(None))})
    rig.fake.start()
    harness.wait_until(lambda: rig.fake.frame_index > 60, 20.0, '60 frames')
    harness.wait_until(lambda: len(rig.stops.msgs()) >= 2, 5.0, 'two safe stops')
    time.sleep(0.3)   # let any extra (false) stop arrive before counting
    stops = rig.stops.timed()
    budget_ns = int(BUDGET_S * 1e9)
    horizon = time.time_ns() - budget_ns - 200_000_000
    # The first 2 s are warm-up, not judged: the monitor may arm after 5 on-time frames, while
    # a command of the first frames can still be lost or held up as DDS finishes matching and
    # the new processes start (a fresh-clone CI run stopped frame ~6, whose command the fake
    # loop had sent in time). The faults come from frame 40 on.
    judged = [f for f in rig.fake.sent[20:] if 0 <= f.stamp_ns < horizon]
    judged_stamps = {f.stamp_ns for f in judged}
    faults = {f.stamp_ns for f in judged if f.kind in ('late', 'missing')}
    # What really happened: a loaded machine can delay the fake controller too, so the
    # oracle is when each command actually went out (frames it cannot tell: either way).
    missed = {f.stamp_ns for f in judged if f.missed(budget_ns)}
    either = {f.stamp_ns for f in judged if f.missed(budget_ns) is None}
    stopped = set(_stamps(stops))
    assert len(faults) == 2 and faults <= stopped, [(m.reason, m.stamp_ns) for _, m in stops]
    assert {s for s in stopped if s in judged_stamps} - either == missed - either
    assert len(_stamps(stops)) == len(stopped)                  # one stop per missed frame
    for received, msg in stops:
        if msg.reason == 'deadline_miss':
            deadline = msg.stamp_ns + budget_ns
            assert 0 <= received - deadline < 0.5e9      # generous: the harness is Python too
    # The stop names the hold (the gripper's opening, the last commanded force); carrying it
    # out is the controller's (test_safe_stop.py): the monitor writes no command topic.
    holds = [m for _, m in stops if m.stamp_ns in faults]
    assert all(m.hold_opening_m == pytest.approx(0.04) and m.hold_force_n == 12.0
               for m in holds), holds
    writers = {(i.node_namespace.rstrip('/') + '/' + i.node_name)
               for topic in ('/edge_loop/cmd/arm', '/edge_loop/cmd/gripper')
               for i in harness.node.get_publishers_info_by_topic(topic)}
    assert '/deadline_monitor' not in writers, writers
    harness.wait_until(lambda: int(loop_status(rig.diags)[1].get('misses', -1)) >= 2, 5.0,
                       'diagnostics with the misses')
    stamps = [f.stamp_ns for f in rig.fake.sent if f.stamp_ns >= 0]
    gap = max(b - a for a, b in zip(stamps, stamps[1:]))
    # The monitor's own numbers are the stops it sent: its largest detection delay is the
    # largest (detected - deadline) the stops carry, and each stop was detected after its
    # deadline and before it arrived here. How fast that is, is bench/bench_deadline.py's: a
    # CI run on a loaded 2-core host once took 138 ms to publish one stop, and an absolute
    # bound here judged the host, not the monitor.
    stops = rig.stops.timed()
    harness.wait_until(lambda: loop_status(rig.diags)[1].get('detect_samples') == str(len(stops)),
                       5.0, f'diagnostics counting the {len(stops)} stops')
    level, values = loop_status(rig.diags)
    delays = []
    for received, msg in stops:
        assert msg.deadline_ns is not None and msg.detected_ns is not None, msg
        assert msg.deadline_ns <= msg.detected_ns <= received, (msg, received)
        delays.append(msg.detected_ns - msg.deadline_ns)
    assert float(values['detect_delay_max_ms']) == pytest.approx(max(delays) / 1e6, abs=0.006), \
        (values, delays)
    assert 0 <= float(values['reaction_p50_ms']) <= float(values['reaction_p99_ms']), values
    # A stall is 500 ms of silence as the monitor receives it; a fake camera that kept within
    # 250 ms leaves a loaded machine's delivery 250 ms of slack before one is right (a step of
    # the system clock is none: stalls are timed monotonic).
    if gap < 0.25e9:
        assert values['camera_stalls'] == '0', values
    else:   # the fake camera itself fell silent (this process starved): a stall is then right
        warnings.warn(f'fake camera silent for {gap / 1e9:.2f} s: stalls not judged ({values})',
                      stacklevel=1)
    assert int(values['late_commands']) >= 1
    stages = {s.name: {kv.key: kv.value for kv in s.values} for m in rig.diags.msgs()
              for s in m.status}
    assert int(stages['deadline_monitor: object_locator']['over_budget']) >= 1   # 60 > 30 ms
    assert any(s.name == 'deadline_monitor: object_locator' and s.level == b'\x01'
               for m in rig.diags.msgs() for s in m.status)


def test_a_hold_never_opens_wider_than_the_last_gripper_command(harness, rig):
    # Closing on an object: commanded 3 cm, while the sampled opening still says 4 cm. A hold
    # at 4 cm would open the jaws; the hold keeps the commanded 3 cm and the commanded force.
    rig.start_monitor()
    _wait_matched(harness, rig.fake)
    rig.fake.commanded_opening = 0.03
    rig.fake.plan = _plan({40: ('missing', FramePlan(None))})   # after the 3 s grace
    rig.fake.start()

    def missing_stamps():
        return {f.stamp_ns for f in list(rig.fake.sent) if f.kind == 'missing'}

    # The missing frame's own stop: on a loaded machine an earlier frame can miss too, and its
    # stop (and hold) carry that frame's stamp.
    harness.wait_until(lambda: any(m.reason == 'deadline_miss'
                                   and m.stamp_ns in missing_stamps()
                                   for m in rig.stops.msgs()),
                       20.0, 'the missing frame stopped')
    missing = missing_stamps()
    hold = next(m for m in rig.stops.msgs() if m.stamp_ns in missing)
    assert hold.hold_opening_m == pytest.approx(0.03) and hold.hold_force_n == 12.0


@pytest.mark.every_distro
def test_consecutive_misses_deactivate_controller_until_reactivate(harness, rig):
    rig.start_monitor(healthy_periods_to_ok=30)    # 3 s of ERROR to try ~/reactivate in
    _wait_matched(harness, rig.fake)
    # The burst comes after the monitor's 3 s start-up grace (30 frames at 10 Hz), so it is
    # enforced even when a slow start left fewer than arm_after_on_time on-time frames in a
    # row (a Kilted CI run: frames 12-15 came before the monitor armed; nothing deactivated).
    # Three missing frames, misses_to_deactivate: with a budget of two periods frame 43's
    # command is on time before frame 42's deadline, and only counting outcomes in frame
    # order makes the three misses consecutive (counted as they happened, it broke the run).
    rig.fake.plan = _plan({i: ('missing', FramePlan(None)) for i in range(40, 43)})
    rig.fake.start()
    rig.controller.wait_for_state('inactive', 20.0)
    harness.wait_until(lambda: loop_status(rig.diags)[0] == b'\x02', 5.0, 'ERROR diagnostics')
    client = harness.node.create_client(Trigger, '/deadline_monitor/reactivate')
    assert client.wait_for_service(10.0)

    def reactivate():
        event = threading.Event()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _f: event.set())
        assert event.wait(15.0)
        return future.result()

    refused = reactivate()       # still ERROR: 30 healthy periods take 3 s
    assert not refused.success and 'not healthy' in refused.message
    harness.wait_until(lambda: loop_status(rig.diags)[1].get('state') == 'OK', 10.0,
                       'OK after healthy periods')
    assert rig.controller.get_state() == 'inactive'   # never silently re-activated
    assert loop_status(rig.diags)[1]['controller'] == 'deactivated by monitor'
    answer = reactivate()
    assert answer.success, answer.message
    assert rig.controller.get_state() == 'active'
    assert len(rig.stops.msgs()) >= 3


def test_a_startup_backlog_is_not_enforced_until_the_loop_runs_on_time(harness, rig):
    # One on-time command amid a start-up backlog does not arm the monitor: it needs
    # arm_after_on_time (here 5) in a row; then a burst of missing commands is enforced.
    rig.start_monitor(startup_grace_s=60.0, arm_after_on_time=5)
    _wait_matched(harness, rig.fake)
    # The burst starts once the monitor reports that it enforces, not at a fixed frame: on a
    # loaded CI machine the fake loop's jitter can break the on-time streak for seconds.
    burst_start = []
    burst_len = 3   # misses_to_deactivate (misses count in frame order: see StampOrder)
    faults = {i: ('missing', FramePlan(None)) for i in (1, 2, 3, 4)}
    rig.fake.plan = lambda i: (('missing', FramePlan(None)) if burst_start and
                               burst_start[0] <= i < burst_start[0] + burst_len else
                               faults.get(i, ('nominal', FramePlan())))
    rig.fake.start()
    harness.wait_until(lambda: loop_status(rig.diags)[1].get('enforcing') == 'yes', 30.0,
                       'the monitor armed by on-time commands')
    assert rig.fake.frame_index > 5, 'armed before the backlog was over'
    burst_start.append(rig.fake.frame_index + 2)
    rig.controller.wait_for_state('inactive', 20.0)
    missing = sorted(f.stamp_ns for f in rig.fake.sent if f.kind == 'missing')
    backlog, burst = missing[:4], missing[4:4 + burst_len]
    # The burst is enforced: its first frame gets a safe stop (which may still be on its way
    # to this process). The controller may go inactive before the burst's third frame when a
    # loaded machine made the fake loop late just before it: every other stop must then be a
    # frame that really missed.
    harness.wait_until(lambda: burst[0] in set(_stamps(rig.stops.timed())), 5.0,
                       "the burst's first safe stop")
    stopped = {m.stamp_ns for m in rig.stops.msgs() if m.reason == 'deadline_miss'}
    assert not stopped & set(backlog), 'a start-up backlog frame was enforced'
    really_missed = {f.stamp_ns for f in rig.fake.sent if f.missed(int(BUDGET_S * 1e9))
                     is not False}
    assert stopped <= really_missed, f'false safe stops: {sorted(stopped - really_missed)}'
    harness.wait_until(lambda: int(loop_status(rig.diags)[1].get('unenforced_frames', 0)) >= 4,
                       5.0, 'the backlog counted as unenforced')


def test_stalled_camera_and_gripper_are_misses(harness, rig):
    rig.start_monitor(misses_to_deactivate=1000)
    _wait_matched(harness, rig.fake)
    # The stall starts after the monitor's 3 s start-up grace (48 frames at 15 Hz), so it is
    # enforced even when a slow start left fewer than arm_after_on_time on-time frames in a row.
    first, end = 48, 60
    stalled = {i: ('stall', FramePlan(camera=False)) for i in range(first, end)}
    rig.fake.plan = _plan(stalled)
    rig.fake.start()
    harness.wait_until(lambda: any(m.reason == 'camera_stall' for m in rig.stops.msgs()),
                       20.0, 'camera_stall safe stop')
    harness.wait_until(lambda: rig.fake.frame_index > end + 6, 20.0, 'camera back')
    stall_stops = [m.stamp_ns for m in rig.stops.msgs() if m.reason == 'camera_stall']
    # The oracle is the silences the fake camera really left: the planned 12 periods (which a
    # loaded machine stretches) and any other gap a starved test process made. A stall comes
    # after 5 silent periods, then one miss per further period, inside the silence (+ the
    # delivery of the next frame).
    period_ns = int(1e9 / RATE_HZ)
    timeout_ns = MONITOR_PARAMS['stall_periods'] * period_ns
    sent = sorted(f.stamp_ns for f in rig.fake.sent if f.stamp_ns > 0)
    silences = [(a, b) for a, b in zip(sent, sent[1:]) if b - a > timeout_ns]
    planned = (max(f.stamp_ns for f in rig.fake.sent[:first]),
               next(f.stamp_ns for f in rig.fake.sent[end:] if f.stamp_ns > 0))
    assert planned in silences, (planned, silences)
    assert any(planned[0] < stamp <= planned[1] + 300_000_000 for stamp in stall_stops), \
        'no camera_stall in the planned silence'
    allowed = sum((b - a - timeout_ns) // period_ns + 2 for a, b in silences)
    assert len(stall_stops) <= allowed, (len(stall_stops), silences)
    for stamp in stall_stops:
        assert any(a + timeout_ns <= stamp <= b + 300_000_000 for a, b in silences), \
            (stamp, silences)
    count = len(rig.stops.msgs())
    # The stall is found through the content filter (1 in 10 samples reach the monitor).
    assert 'content filter' in loop_status(rig.diags)[1]['gripper_sampling']
    rig.fake.joints_enabled = False
    harness.wait_until(lambda: any(m.reason == 'gripper_stall' for m in rig.stops.msgs()),
                       10.0, 'gripper_stall safe stop')
    rig.fake.joints_enabled = True
    budget_ns = int(BUDGET_S * 1e9)
    really_missed = {f.stamp_ns for f in rig.fake.sent if f.missed(budget_ns) is not False}
    assert set(_stamps(rig.stops.timed()[:count])) <= really_missed   # no false positive


def test_a_gripper_too_slow_for_the_sampling_window_is_reported(harness, rig):
    # 100 Hz joint states and 5 ms windows: windows can stay empty and the gripper look
    # stalled. The monitor sees the rate (from the publisher's sequence numbers, filtered
    # samples included) and says which setting to change; it does not touch the filter.
    rig.start_monitor(gripper_sample_window_ms=5.0)
    _wait_matched(harness, rig.fake)
    rig.fake.plan = _plan({})
    rig.fake.start()
    harness.wait_until(
        lambda: 'too slow' in loop_status(rig.diags)[1].get('gripper_sampling', ''), 20.0,
        'the slow gripper reported')
    assert 'content filter' in loop_status(rig.diags)[1]['gripper_sampling']


def test_monitor_restarted_picks_up_again(harness, rig):
    first = rig.start_monitor()
    _wait_matched(harness, rig.fake)
    rig.fake.plan = _plan({})
    rig.fake.start()
    harness.wait_until(lambda: int(loop_status(rig.diags)[1].get('frames', 0)) > 5, 20.0,
                       'monitor tracking frames')
    first.signal(signal.SIGKILL)
    first.proc.wait(5.0)
    rig.diags.items.clear()
    start = rig.fake.frame_index
    second = rig.start_monitor()
    harness.wait_until(lambda: loop_status(rig.diags)[1].get('enforcing') == 'yes', 20.0,
                       'restarted monitor enforcing')
    n = rig.fake.frame_index + 3
    rig.fake.plan = _plan({n: ('missing', FramePlan(None))})
    harness.wait_until(lambda: any(f.kind == 'missing' for f in rig.fake.sent), 10.0,
                       'the missing frame')
    missing = next(f.stamp_ns for f in rig.fake.sent if f.kind == 'missing')
    harness.wait_until(lambda: missing in _stamps(rig.stops.timed()), 10.0,
                       'safe stop after restart')
    budget_ns = int(BUDGET_S * 1e9)
    really_missed = {f.stamp_ns for f in rig.fake.sent if f.missed(budget_ns) is not False}
    assert set(_stamps(rig.stops.timed())) <= really_missed
    assert rig.fake.frame_index > start and second.alive()


def test_configures_from_the_deployed_params_file(harness, node_procs):
    proc = node_procs('deadline_monitor', params_file=SOURCE_ROOT / 'config' / 'pick.yaml')
    diags = Received(harness, DiagnosticArray, '/diagnostics')
    client = harness.lifecycle('deadline_monitor')
    for transition in ('configure', 'activate', 'deactivate', 'cleanup', 'configure',
                       'activate'):
        client.transition(transition, timeout=30.0)
    harness.wait_until(lambda: loop_status(diags)[0] is not None, 10.0, 'diagnostics')
    values = loop_status(diags)[1]
    assert values['budget_ms'] == '66.00' and values['period_ms'] == '66.67'
    assert values['rt_scheduling'].startswith(('yes', 'no'))
    stages = {s.name for m in diags.msgs() for s in m.status}
    assert {f'deadline_monitor: {n}' for n in ('object_locator', 'grasp_planner',
                                               'occupancy_mapper', 'grasp_state',
                                               'pick_controller')} <= stages
    client.transition('shutdown', timeout=10.0)
    assert 'Traceback' not in proc.output()


@pytest.mark.every_distro
def test_on_simulated_time_deadlines_follow_the_clock(harness, node_procs):
    # use_sim_time: the monitor reads /clock in its deadline thread. A command that arrived
    # before /clock passed its deadline is on time even when the thread sees both at once;
    # a missing command is a miss as soon as /clock passes the deadline; the node clock
    # (diagnostics stamps) follows /clock.
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CameraInfo

    monitor = node_procs('deadline_monitor', params={
        **MONITOR_PARAMS, 'use_sim_time': True, 'misses_to_deactivate': 1000,
        'stall_periods': 50})
    stops = Stops(harness)
    diags = Received(harness, DiagnosticArray, '/diagnostics')
    client = harness.lifecycle('deadline_monitor')
    client.wait_for_state('unconfigured', 30.0)
    client.transition('configure', timeout=30.0)
    client.transition('activate', timeout=10.0)
    clock = harness.node.create_publisher(Clock, '/clock', 10)
    camera = harness.node.create_publisher(CameraInfo, '/camera/color/camera_info', 10)
    command = harness.node.create_publisher(TwistStamped, '/edge_loop/cmd/arm', 10)
    # grasp_state runs on the gripper clock; in simulation every 16th of its stamps equals a
    # camera stamp, which must not make it a stage that frames wait for
    grasp_state = harness.node.create_publisher(DiagnosticArray, '/edge_loop/grasp_state', 10)
    joints = harness.node.create_publisher(JointState, '/gripper/joint_states', 10)
    objects = harness.node.create_publisher(PoseArray, '/edge_loop/objects', 10)
    for pub in (clock, camera, command, grasp_state, joints, objects):
        harness.wait_until(lambda p=pub: p.get_subscription_count() >= 1, 30.0, pub.topic_name)

    def at(t_ns: int, msg):
        stamp = msg.clock if isinstance(msg, Clock) else msg.header.stamp
        stamp.sec, stamp.nanosec = divmod(t_ns, 1_000_000_000)
        return msg

    step_ns, budget_ns = 300_000_000, int(BUDGET_S * 1e9)   # frames 0.3 s of sim time apart
    missing = {12, 15}
    stamps = []
    for k in range(20):
        t = 1_000_000_000 + k * step_ns
        stamps.append(t)
        clock.publish(at(t, Clock()))
        camera.publish(at(t, CameraInfo()))
        # the gripper's clock runs ahead of the last /clock tick (240 Hz samples, 60 Hz
        # ticks): its grasp_state latency is joint states in -> grasp_state out, both on the
        # monitor's receive clock, never stamp vs. /clock (that was -10 ms on even frames)
        gripper_t = t + 10_000_000 * (k % 2 == 0)
        joints.publish(at(gripper_t, JointState(position=[0.02, 0.02])))
        grasp_state.publish(at(gripper_t, DiagnosticArray()))
        objects.publish(at(t, PoseArray()))
        if k not in missing:
            command.publish(at(t, TwistStamped()))
        clock.publish(at(t + budget_ns + 50_000_000, Clock()))   # right away past the deadline
        time.sleep(0.05)   # pacing only: the wall time between frames does not matter
    for k in range(1, 13):   # one more simulated second without frames: diagnostics
        clock.publish(at(stamps[-1] + step_ns + k * 100_000_000, Clock()))
        joints.publish(at(stamps[-1] + step_ns + k * 100_000_000 + 10_000_000,
                          JointState(position=[0.02, 0.02])))
        time.sleep(0.02)
    expected = {stamps[k] for k in missing}
    harness.wait_until(lambda: expected <= set(_stamps(stops.timed())), 10.0,
                       'safe stops for the missing frames')
    harness.wait_until(lambda: int(loop_status(diags)[1].get('frames', 0)) >= 20, 10.0,
                       'diagnostics of all frames')
    assert _stamps(stops.timed()) == sorted(expected)     # one each, and no false positive
    assert not [m for m in stops.msgs() if m.reason != 'deadline_miss']
    assert monitor.wait_for_output('deadline_miss: frame', 5.0), monitor.output()
    said = [line for line in monitor.output().splitlines() if 'deadline_miss: frame' in line]
    assert all('object_locator' in line and 'grasp_state' not in line for line in said), said
    values = loop_status(diags)[1]
    assert int(values['misses']) == 2 and values['enforcing'] == 'yes'
    # detected on the simulated clock, at the first /clock tick past the deadline that the
    # monitor saw (t + 250 ms; the next frame's t + 300 ms if DDS delivered that one first)
    assert 50.0 <= float(values['detect_delay_p99_ms']) <= 100.0
    gs = [{kv.key: kv.value for kv in st.values} for m in diags.msgs() for st in m.status
          if st.name == 'deadline_monitor: grasp_state']
    assert gs and int(gs[-1]['samples']) >= 5, gs[-1:]
    assert -1.0 < float(gs[-1]['latency_p50_ms']) < 100.0, gs[-1]
    # diagnostics are stamped on the simulated clock
    last = _ns(diags.msgs()[-1].header.stamp)
    assert stamps[0] <= last <= stamps[-1] + step_ns + 1_200_000_000
