# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""launch_pytest tests of launch/pick.launch.py under the real ROS 2 launch and launch_ros.

CI installs the launch stack from the vendored wheels (``../shared/vendor/wheels``, see
requirements.txt and .ci/run). Each test brings the whole graph up through the launch file
and judges what comes out of it, not only lifecycle states:

- ``bag:=`` (restamped, ``start_paused:=true`` released by ``bag_player/resume``): every
  replayed frame is answered on the contract topics with its stamp, the stamps are the
  current clock's, the deadline monitor counts the frames with zero misses and reports the
  loop OK with sane latencies;
- the default simulated robot under ``namespace:=robot1``: a pick completes, every topic is
  under /robot1 and nothing appears on the global names;
- every other argument at once (``bag_clock``, ``use_sim_time``, ``rate``, ``camera_ns`` as
  realsense-ros names it, ``transport:=ros``, ``use_model``, ``device``, ``extrinsics_source``,
  ``rviz``) with ``namespace:=robot1``: judged by what comes out. rviz2 and tf2_ros are not
  installable here, so stand-ins (test/launch/standins/) are installed under their package
  names: launch_ros starts them as it would start the real ones, the RViz stand-in subscribes
  to every display's topic of rviz/pick.rviz and the test asserts each one gets data.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

launch_pytest = pytest.importorskip(
    'launch_pytest', reason='the launch stack is not installed: pip install the vendored wheels '
    '(../shared/vendor/README.md); .ci/run installs them')
launch = pytest.importorskip('launch')
pytest.importorskip('launch_ros')

from launch.actions import IncludeLaunchDescription, SetEnvironmentVariable  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

from edge_loop import topics  # noqa: E402
from edge_loop.paths import data_dir, share_dir  # noqa: E402
from edge_loop.testing import monitor_loop_status, ros_harness  # noqa: E402

pytestmark = pytest.mark.ros

BAG = 'grasp_nominal'          # 23 frames at 15 Hz with a grasp in them
FRAMES = 23
ANSWERS = {                    # contract topic -> message type (module, class)
    topics.OBJECTS: ('geometry_msgs.msg', 'PoseArray'),
    topics.GRASP: ('geometry_msgs.msg', 'PolygonStamped'),
    topics.OCCUPANCY: ('nav_msgs.msg', 'OccupancyGrid'),
    topics.ARM_CMD: ('geometry_msgs.msg', 'TwistStamped'),
}


def _pick_launch(domain: int, arguments: dict[str, str]) -> launch.LaunchDescription:
    path = str(share_dir() / 'launch' / 'pick.launch.py')
    # A working tree whose kernels changed since the last `make verify` can still run these
    # tests with a params file that sets require_verified: false (never set in CI).
    dev_file = os.environ.get('EDGE_LOOP_LAUNCH_PARAMS_FILE')
    if dev_file:
        import yaml

        merged = yaml.safe_load(Path(dev_file).read_text()) or {}
        if arguments.get('params_file'):
            for key, value in (yaml.safe_load(Path(arguments['params_file']).read_text())
                               or {}).items():
                merged.setdefault(key, {}).setdefault('ros__parameters', {}).update(
                    value['ros__parameters'])
        merged_file = Path(tempfile.mkdtemp(prefix='launch_test_params_')) / 'params.yaml'
        merged_file.write_text(yaml.safe_dump(merged))
        arguments = {**arguments, 'params_file': str(merged_file)}
    return launch.LaunchDescription([
        SetEnvironmentVariable('ROS_DOMAIN_ID', str(domain)),
        SetEnvironmentVariable('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST'),
        SetEnvironmentVariable('PYTHONUNBUFFERED', '1'),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(path),
                                 launch_arguments=arguments.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


def _msg_class(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


def _level(value) -> int:
    return value[0] if isinstance(value, (bytes, bytearray)) else int(value)


def _ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class Recorder:
    """Every message of a few topics with its receive time (system clock, ns)."""

    def __init__(self, harness, names: dict[str, tuple[str, str]], qos=50) -> None:
        self.lock = threading.Lock()
        self.got: dict[str, list[tuple[int, object]]] = {t: [] for t in names}
        for topic, (module, name) in names.items():
            harness.node.create_subscription(
                _msg_class(module, name), topic,
                lambda msg, t=topic: self._on(t, msg), qos)

    def _on(self, topic: str, msg) -> None:
        with self.lock:
            self.got[topic].append((time.time_ns(), msg))

    def stamps(self, topic: str) -> list[int]:
        with self.lock:
            return [_ns(m.header.stamp) for _, m in self.got[topic]]


def _trigger(harness, service: str, timeout: float = 60.0) -> None:
    from std_srvs.srv import Trigger

    client = harness.node.create_client(Trigger, service)
    assert client.wait_for_service(timeout_sec=timeout), f'{service} never appeared'
    done = threading.Event()
    future = client.call_async(Trigger.Request())
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0), f'{service} did not answer'
    assert future.result().success, future.result().message


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f'timed out after {timeout:.0f} s waiting for {what}'
        time.sleep(0.1)


def _calibration():
    """How much slower this machine runs the locator than where the budgets were set."""
    from edge_loop import regression

    return regression.MachineCalibration.measure_configured()


@pytest.fixture(scope='module')
def calibrated_params(tmp_path_factory):
    """A params file and replay rate paced to this machine (edge_loop.check.pacing).

    On a machine ``slowdown`` times slower than where the budgets were set, the bag plays at
    ``1 / slowdown`` of its rate (the loop takes the budget machine's share of the CPU) and
    the monitor's budgets scale by ``slowdown``, as ``edge-loop check --calibrate`` does.
    Returns the file, the scaled end-to-end budget, the misses the regression allows, the
    calibration and the pacing.
    """
    import yaml

    from edge_loop.check.pacing import Pacing, deployed_monitor_parameters
    from edge_loop.paths import config_path

    gates = yaml.safe_load(config_path('regression.yaml').read_text())['gates']
    calibration = _calibration()
    paced = Pacing(calibration.slowdown)
    scale = paced.budget_scale
    monitor = deployed_monitor_parameters()
    params = {'deadline_monitor': {'ros__parameters': paced.monitor_parameters(monitor)}}
    path = tmp_path_factory.mktemp('params') / 'scaled_budgets.yaml'
    path.write_text(yaml.safe_dump(params))
    print(f'launch bag test: the locator {calibration.slowdown:.2f}x slower here than on the '
          f'budget machine; {paced.describe()}')
    return (path, monitor['end_to_end_budget_ms'] * scale, gates['max_deadline_misses'],
            calibration, paced)


@launch_pytest.fixture
def bag_launch(launch_domain, ament_prefix, calibrated_params):
    """pick.launch.py replaying the grasp bag in a loop, paused until the test listens."""
    return _pick_launch(launch_domain, {'bag': str(data_dir() / 'scenarios' / BAG),
                                        'loop': 'true', 'start_paused': 'true',
                                        'params_file': str(calibrated_params[0]),
                                        'rate': f'{calibrated_params[4].rate:.6f}',
                                        'log_level': 'info'})


@pytest.mark.launch(fixture=bag_launch)
def test_bag_replay_answers_every_frame_on_time(launch_domain, calibrated_params):
    """Frames answered with their stamps on the current clock, no misses, diagnostics OK."""
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import Bool

    _, budget_ms, allowed_misses, before, paced = calibrated_params
    with ros_harness(launch_domain, name='bag_launch_probe') as h:
        rec = Recorder(h, {topics.CAMERA_INFO: ('sensor_msgs.msg', 'CameraInfo'), **ANSWERS,
                           topics.DIAGNOSTICS: ('diagnostic_msgs.msg', 'DiagnosticArray')})
        active = h.collect(Bool, '/lifecycle_manager/active',
                           QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        _wait(lambda: any(m.data for m in active), 120.0, 'the lifecycle manager: all active')
        for topic in ANSWERS:
            h.wait_for_publishers(topic, timeout=30.0)
        time.sleep(1.0)    # our subscriptions match the publishers' writers
        assert not rec.stamps(topics.CAMERA_INFO), 'start_paused:=true did not hold the replay'
        _trigger(h, '/bag_player/resume')
        # Three passes of the 23-frame bag (loop:=true): the first warms the kernels up.
        _wait(lambda: len(rec.stamps(topics.CAMERA_INFO)) >= 3 * FRAMES,
              30.0 + 10.0 * paced.slowdown, f'{3 * FRAMES} frames')
        # The last judged frames' answers: wait until each is in (or 2 s, paced, since the
        # test allows a few frames without an answer), then pause.
        judged_sent = rec.stamps(topics.CAMERA_INFO)[FRAMES:3 * FRAMES]
        deadline = time.monotonic() + 2.0 * paced.slowdown
        while time.monotonic() < deadline and not all(
                set(judged_sent) <= set(rec.stamps(t)) for t in ANSWERS):
            time.sleep(0.05)
        _trigger(h, '/bag_player/pause')
        frames = rec.stamps(topics.CAMERA_INFO)
        assert len(set(frames)) == len(frames), 'a loop pass repeated stamps'
        judged = frames[FRAMES:3 * FRAMES]
        missing = {t: [frames.index(s) for s in judged if s not in set(rec.stamps(t))]
                   for t in ANSWERS}
        with rec.lock:
            diags = [m for _, m in rec.got[topics.DIAGNOSTICS]]
        level, values = monitor_loop_status(diags)
        print(f'unanswered frames (index) {missing}; monitor {values}')
        # The machine's speed drifts with its neighbours' load: real time is judged only if
        # it was not much slower after the replay than when the budgets were set.
        after = _calibration()
        if after.slowdown > 1.5 * before.slowdown:
            allowed_misses = None
        unanswered = {i for indices in missing.values() for i in indices}
        if allowed_misses is None:
            import warnings

            warnings.warn(f'machine too slow to judge real time (before: {before.describe()}; '
                          f"after: {after.describe()}): {values['misses']} misses and "
                          f'{len(unanswered)} unanswered frames not judged', stacklevel=1)
            # Perception still answers most frames (the controller may have been stopped).
            seen = {i for t in (topics.OBJECTS, topics.GRASP, topics.OCCUPANCY)
                    for i in missing[t]}
            assert len(seen) <= len(judged) // 2, f'frames without an answer: {missing}'
        else:
            # A frame a stage drops is a deadline miss too: the same allowance.
            assert len(unanswered) <= allowed_misses, f'frames without an answer: {missing}'
        # Restamped to the current clock: the stamp of an answer is a real latency.
        for topic in ANSWERS:
            with rec.lock:
                ages = [(wall - _ns(m.header.stamp)) / 1e6 for wall, m in rec.got[topic]]
            assert all(-50.0 < age < 2000.0 * paced.slowdown for age in ages), (
                topic, min(ages), max(ages))
        assert level is not None, 'no deadline monitor loop status'
        assert float(values['budget_ms']) == pytest.approx(budget_ms, abs=0.01), (
            'params_file:= did not reach the deadline monitor', values)
        assert int(values['frames']) >= FRAMES, values
        assert values['enforcing'] == 'yes', values
        if allowed_misses is not None:
            assert int(values['misses']) <= allowed_misses, values
            # OK; or WARN after an allowed miss, for the monitor's healthy_periods_to_ok
            # periods (a fresh-clone run here ended its window WARN after its one miss).
            assert _level(level) == 0 or (_level(level) == 1 and int(values['misses'])), values
            assert values['controller'] == 'enabled', values
        p50s = [float(kv.value) for m in diags for s in m.status for kv in s.values
                if kv.key == 'latency_p50_ms' and kv.value not in ('', 'nan', '-')]
        assert p50s and max(p50s) < 1000.0, f'stage latency p50 not on one clock: {p50s}'


@launch_pytest.fixture
def sim_ns_launch(launch_domain, ament_prefix):
    """pick.launch.py with the default simulated robot, every name under /robot1."""
    return _pick_launch(launch_domain, {'namespace': 'robot1'})


@pytest.mark.launch(fixture=sim_ns_launch)
def test_sim_in_namespace_completes_a_pick(launch_domain):
    """The default sim source picks an object; topics live under the namespace only."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import DurabilityPolicy, QoSProfile

    with ros_harness(launch_domain, name='sim_launch_probe') as h:
        latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        outcomes = h.collect(DiagnosticArray, '/robot1' + topics.SIM_GRASP_OUTCOME, latched)
        rec = Recorder(h, {'/robot1' + topics.GRASP: ANSWERS[topics.GRASP],
                           topics.GRASP: ANSWERS[topics.GRASP],
                           topics.DIAGNOSTICS: ('diagnostic_msgs.msg', 'DiagnosticArray')})
        _wait(lambda: any(_level(s.level) == 0 for m in outcomes for s in m.status), 150.0,
              'a successful pick (/robot1/sim/grasp_outcome level OK)')
        assert rec.stamps('/robot1' + topics.GRASP), 'no grasp under /robot1'
        assert not rec.stamps(topics.GRASP), 'the namespace leaked: a grasp on /edge_loop/grasp'
        with rec.lock:
            diags = [m for _, m in rec.got[topics.DIAGNOSTICS]]
        level, values = monitor_loop_status(diags)
        assert level is not None and values, 'no deadline monitor status on /diagnostics'
        assert int(values['misses']) == 0, values
        assert _level(level) == 0, values
        names = {name for name, _ in h.node.get_topic_names_and_types()}
        assert {'/robot1/camera/color/camera_info', '/robot1/edge_loop/cmd/arm'} <= names, names


STANDINS = Path(__file__).resolve().parent / 'standins'
REALSENSE_NS = '/camera/camera'


def _install_standin(prefix: Path, package: str, executable: str, script: Path) -> None:
    """An ament package ``package`` whose ``executable`` runs ``script`` with this Python."""
    index = prefix / 'share' / 'ament_index' / 'resource_index' / 'packages'
    index.mkdir(parents=True, exist_ok=True)
    (index / package).write_text('')
    (prefix / 'share' / package).mkdir(parents=True, exist_ok=True)
    lib = prefix / 'lib' / package
    lib.mkdir(parents=True, exist_ok=True)
    exe = lib / executable
    exe.write_text(f'#!{sys.executable}\nimport runpy\nrunpy.run_path({str(script)!r}, '
                   "run_name='__main__')\n")
    exe.chmod(0o755)


@pytest.fixture(scope='module')
def standins(ament_prefix, tmp_path_factory):
    """rviz2 and tf2_ros stand-ins on AMENT_PREFIX_PATH; where they write what they saw."""
    root = tmp_path_factory.mktemp('standins')
    prefix = root / 'install'
    _install_standin(prefix, 'rviz2', 'rviz2', STANDINS / 'rviz2_standin.py')
    _install_standin(prefix, 'tf2_ros', 'static_transform_publisher',
                     STANDINS / 'static_transform_publisher_standin.py')
    tf_dir = root / 'tf'
    tf_dir.mkdir()
    saved = {k: os.environ.get(k) for k in ('AMENT_PREFIX_PATH', 'EDGE_LOOP_RVIZ_STANDIN_OUT',
                                            'EDGE_LOOP_TF_STANDIN_DIR')}
    os.environ['AMENT_PREFIX_PATH'] = os.pathsep.join([str(prefix), saved['AMENT_PREFIX_PATH']])
    os.environ['EDGE_LOOP_RVIZ_STANDIN_OUT'] = str(root / 'rviz.json')
    os.environ['EDGE_LOOP_TF_STANDIN_DIR'] = str(tf_dir)
    try:
        yield root / 'rviz.json', tf_dir
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@launch_pytest.fixture
def every_argument_launch(launch_domain, standins, calibrated_params):
    """The bag on its own clock at half its speed, realsense names, RViz, TF, namespace."""
    return _pick_launch(launch_domain, {
        'bag': str(data_dir() / 'scenarios' / BAG), 'loop': 'true', 'rate': '0.5',
        'bag_clock': 'true', 'use_sim_time': 'true', 'namespace': 'robot1',
        'camera_ns': REALSENSE_NS, 'transport': 'ros', 'use_model': 'true', 'device': 'cpu',
        'extrinsics_source': 'params', 'rviz': 'true', 'log_level': 'warn',
        'params_file': str(calibrated_params[0])})


def _get_parameters(harness, node: str, names: list[str]) -> dict:
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = harness.node.create_client(GetParameters, f'{node}/get_parameters')
    assert client.wait_for_service(timeout_sec=30.0), f'{node}/get_parameters never appeared'
    done = threading.Event()
    future = client.call_async(GetParameters.Request(names=names))
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0), f'{node} did not answer get_parameters'
    return dict(zip(names, (parameter_value_to_python(v) for v in future.result().values)))


@pytest.mark.launch(fixture=every_argument_launch)
def test_every_other_argument_reaches_the_graph_rviz_and_tf(launch_domain, standins,
                                                           calibrated_params):
    """Each remaining launch argument, judged by its effect on what the graph does."""
    import json

    from rosgraph_msgs.msg import Clock

    from edge_loop import bringup

    rviz_out, tf_dir = standins
    info_topic = REALSENSE_NS + '/color/camera_info'
    with ros_harness(launch_domain, name='every_argument_probe') as h:
        clocks = h.collect(Clock, '/clock', 100)
        rec = Recorder(h, {info_topic: ('sensor_msgs.msg', 'CameraInfo'),
                           '/robot1' + topics.GRASP: ANSWERS[topics.GRASP],
                           '/robot1' + topics.OBJECTS: ANSWERS[topics.OBJECTS]})

        def rviz_state() -> dict:
            try:
                return json.loads(rviz_out.read_text())
            except (FileNotFoundError, ValueError):
                return {}

        def rviz_without_data() -> list[str] | None:
            shown = rviz_state().get('displays')
            return None if not shown else [f"{name} ({d['resolved_topic']})"
                                           for name, d in shown.items()
                                           if d['subscribed'] and not d['messages']]

        deadline = time.monotonic() + 150.0
        while rviz_without_data() != []:
            assert time.monotonic() < deadline, (
                f'RViz displays without data after 150 s: {rviz_without_data()}')
            time.sleep(0.2)
        _wait(lambda: len(rec.stamps(info_topic)) >= 2 * FRAMES, 60.0,
              f'{2 * FRAMES} frames on {info_topic}')
        _wait(lambda: rec.stamps('/robot1' + topics.GRASP), 30.0, 'a grasp under /robot1')

        # rviz:=true - RViz got the shipped config and follows namespace/camera_ns.
        state = rviz_state()
        assert state['config'].endswith('pick.rviz') and state['fixed_frame'] == 'world', state
        assert state['namespace'] == '/robot1' and state['use_sim_time'] is True, state
        resolved = {d['resolved_topic'] for d in state['displays'].values() if d['subscribed']}
        assert {'/robot1' + topics.OCCUPANCY, REALSENSE_NS + '/color/image_raw'} <= resolved, (
            resolved)
        # extrinsics_source:=params - the camera is published in TF from the parameters.
        started = sorted(json.loads(f.read_text())['argv'] for f in tf_dir.glob('*.json'))
        expected = sorted(t.arguments() for t in bringup.camera_transforms(
            [bringup.default_params_file(), calibrated_params[0]]))
        assert [a[:len(e)] for a, e in zip(started, expected)] == expected, started
        # bag_clock / use_sim_time - /clock from the bag, answers stamped on it.
        sent = set(rec.stamps(info_topic))
        assert clocks, 'bag_clock:=true published no /clock'
        assert _ns(clocks[-1].clock) < 1_000_000_000_000_000_000, 'not the bag clock'
        grasps = rec.stamps('/robot1' + topics.GRASP)
        assert grasps and set(grasps) <= sent, 'answers not stamped with the bag frames'
        # rate:=0.5 - bag time runs at half the wall clock's speed (slower than recorded, so a
        # loaded machine cannot fall behind and pass by accident).
        with rec.lock:
            got = [(wall, _ns(m.header.stamp)) for wall, m in rec.got[info_topic]]
        # Medians of the steps between frames: the restart between loop passes is no step.
        import statistics

        speed = (statistics.median(b[1] - a[1] for a, b in zip(got, got[1:]))
                 / statistics.median(b[0] - a[0] for a, b in zip(got, got[1:])))
        assert 0.4 < speed < 0.6, f'bag time ran {speed:.2f}x the wall clock with rate:=0.5'
        # transport:=ros - the locator takes the camera's Image topic itself.
        readers = {i.node_name for i in h.node.get_subscriptions_info_by_topic(
            REALSENSE_NS + '/color/image_raw')}
        assert 'object_locator' in readers, readers
        # use_model, device and use_sim_time reached the nodes.
        assert _get_parameters(h, '/robot1/object_locator', ['use_model', 'use_sim_time']) == {
            'use_model': True, 'use_sim_time': True}
        assert _get_parameters(h, '/robot1/occupancy_mapper', ['device']) == {'device': 'cpu'}
