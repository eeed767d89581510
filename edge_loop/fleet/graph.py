# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Graph mode: one bag through the real node graph, in lock-step, judged as in fast mode.

The graph is bringup's description (what ``edge-loop up bag:=...`` starts), cut to the
perception stages: bag_player, object_locator, grasp_planner and occupancy_mapper, one
process each, brought up by the lifecycle manager, frames over iceoryx2 shared memory.
bag_player runs in ``lockstep`` mode: it sends the next camera frame only once every stage
answered the previous one (stamps as recorded), so the replay is deterministic however slow
the machine. This process listens on the stages' output topics and judges each frame with
:func:`edge_loop.fleet.replay.judge_frame`, the same code as fast mode, against the bag's
ground truth.

Isolation of concurrent replays on one machine (Ray runs several tasks per node):

- each replay claims a ``ROS_DOMAIN_ID`` no other process on this machine holds (an flock
  on ``/tmp/edge_loop_domain_<id>.lock``, the same claim the ROS tests make, so a fleet run
  and a test run do not collide either), and its nodes discover peers on this host only
  (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``): two hosts never see each other;
- iceoryx2 services are machine-wide: the frame channel is already per domain
  (:func:`edge_loop.transport.api.domain_channel`) and every replay also gets its own
  iceoryx2 prefix (``EDGE_LOOP_IOX2_PREFIX``), so no service name is shared.

Costs (docs/fleet.md): a graph is brought up per bag (a few seconds of process start-up), so
graph mode is for fidelity on a selection of bags, fast mode for the whole fleet.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop import stages, topics
from edge_loop.bags import BagError, BagReader
from edge_loop.fleet.replay import BadBagError, _camera_topics, _frames, judge_frame
from edge_loop.kernels.camera import Extrinsics, Intrinsics

# The stages that read camera frames: what a bag alone can drive (no robot, no tactile).
GRAPH_STAGES = stages.FRAME_STAGES
ANSWERS = {'objects': topics.OBJECTS, 'grasp': topics.GRASP, 'occupancy': topics.OCCUPANCY}
BRINGUP_TIMEOUT_S = 120.0
FRAME_TIMEOUT_S = 30.0      # lock-step: one frame through the three stages, at worst


class GraphError(Exception):
    """The graph could not replay a bag (a node died, bring-up or a frame timed out)."""


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _read_truth(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(stamp, parts) of every camera frame, the images dropped (the graph decodes them)."""
    try:
        with BagReader(path) as reader:
            camera = _camera_topics(reader)
            return [(stamp, {k: v for k, v in parts.items() if k not in ('color', 'depth')})
                    for stamp, parts in _frames(reader, camera)]
    except BagError as exc:
        raise BadBagError('corrupt', str(exc)) from None


def graph_nodes(path: str | Path, params: dict[str, Any]) -> list[Any]:
    """The node graph of one lock-step replay (bringup's description, perception stages)."""
    from edge_loop import bringup

    extra: dict[str, dict[str, Any]] = {
        'bag_player': {'mode': 'lockstep', 'restamp': False, 'loop': False,
                       'wait_topics': [topics.CAMERA_INFO],
                       'lockstep_topics': list(ANSWERS.values()),
                       'lockstep_timeout_s': FRAME_TIMEOUT_S, 'start_delay_s': 0.5}}
    if params.get('locator'):
        extra['object_locator'] = dict(params['locator'])
    if params.get('grasp'):
        extra['grasp_planner'] = dict(params['grasp'])
    for stage in GRAPH_STAGES:
        # The camera pose the fast replay uses (config/pick.yaml's). The deployment gate
        # (require_verified) is off: a regression run judges a build before it is verified
        # and shipped, as fast mode does; the report's revision says which code ran.
        extra.setdefault(stage, {}).update(
            camera_position=list(params['camera_position']),
            camera_orientation=list(params['camera_orientation']), require_verified=False)
    return bringup.graph('bag', bag=str(path), transport='shm', monitor=False,
                         stages=GRAPH_STAGES, extra=extra)


def replay_graph_frames(path: str | Path, params: dict[str, Any],
                        claim: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Per-frame records of one bag replayed through the node graph (see module docstring).

    Raises BadBagError for a bag the graph cannot take (read here first, before any process
    starts) and :class:`GraphError` when the graph fails. ``claim``, when given, receives the
    ROS domain id this replay ran on (``claim['domain']``).
    """
    frames = _read_truth(path)
    if not frames:
        return
    ext = Extrinsics.from_params(params['camera_position'], params['camera_orientation'])
    info = frames[0][1]['info']
    intr = Intrinsics.from_k(info.k, info.width, info.height)
    answers = _run_graph(path, params, [s for s, _ in frames], claim)
    previous = None
    for index, (stamp, parts) in enumerate(frames):
        got = answers[stamp]
        info = parts['info']
        intr = Intrinsics.from_k(info.k, info.width, info.height)
        # lock-step cycle: from the previous frame's last answer to this one's (bag_player
        # waits for all three before it sends the next frame)
        done_at = max(t for t, _ in got.values())
        timing = {'total_ms': round((done_at - previous) * 1e3, 3)} if previous else {}
        previous = done_at
        yield judge_frame(index, stamp, parts, got['objects'][1], got['grasp'][1],
                          got['occupancy'][1], intr, ext, params['gates'], timing)


def _run_graph(path: str | Path, params: dict[str, Any], stamps: list[int],
               claim: dict[str, Any] | None) -> dict[int, dict[str, tuple[float, Any]]]:
    """Bring the graph up on a domain of its own, replay, return {stamp: {kind: (t, data)}}."""
    from geometry_msgs.msg import PolygonStamped, PoseArray
    from nav_msgs.msg import OccupancyGrid
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import CameraInfo
    from std_msgs.msg import Bool

    from edge_loop.bringup import default_params_file
    from edge_loop.launcher import Graph
    from edge_loop.testing import claim_domain_id, domain_env, ros_harness

    wanted = set(stamps)
    got: dict[int, dict[str, tuple[float, Any]]] = {s: {} for s in stamps}

    def record(kind: str):
        def cb(msg: Any) -> None:
            stamp = _ns(msg.header.stamp)
            if stamp not in wanted:
                return
            if kind == 'objects':
                data: Any = np.array([[p.position.x, p.position.y, p.position.z]
                                      for p in msg.poses], np.float64).reshape(-1, 3)
            elif kind == 'grasp':
                pts = msg.polygon.points
                data = (np.array([[q.x, q.y, q.z] for q in pts], np.float64)
                        if pts else None)
            else:
                data = np.asarray(msg.data, np.int8).reshape(msg.info.height, msg.info.width)
            got[stamp].setdefault(kind, (time.monotonic(), data))
        return cb

    def complete() -> bool:
        return all(len(v) == len(ANSWERS) for v in got.values())

    work = Path(tempfile.mkdtemp(prefix='el_graph_'))
    ok = False
    domain, lock = claim_domain_id()
    if claim is not None:
        claim['domain'] = domain
    try:
        env = domain_env(domain, work / 'ros_log')
        env['EDGE_LOOP_IOX2_PREFIX'] = f'iox2_elg{domain}_'
        graph = Graph(graph_nodes(path, params), default_params_file(), work / 'logs', env=env)
        with ros_harness(domain, 'fleet_graph_replay') as h:
            qos = QoSProfile(depth=100)
            for kind, cls in (('objects', PoseArray), ('grasp', PolygonStamped),
                              ('occupancy', OccupancyGrid)):
                h.subscribe(cls, ANSWERS[kind], record(kind), qos)
            # bag_player starts once camera_info has a subscriber and the manager reports the
            # graph active; with shared memory no stage subscribes to it: this process does.
            h.collect(CameraInfo, topics.CAMERA_INFO, qos)
            done = h.collect(Bool, '/bag_player/done',
                             QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
            try:
                _start_unblocked(graph)
                try:
                    graph.wait_active(BRINGUP_TIMEOUT_S)
                except RuntimeError as exc:
                    raise GraphError(f"bring-up failed: {str(exc)[-400:]}; the nodes' logs: "
                                     f'{_log_tails(work / "logs")}') from None
                limit = FRAME_TIMEOUT_S * (len(stamps) + 1)
                try:
                    # every frame answered by all three stages: bag_player sent the last
                    # frame only after the one before it was answered, so nothing is left
                    h.wait_until(lambda: complete() or bool(graph.dead()), limit,
                                 'the end of the bag')
                except AssertionError:
                    pass
                dead = graph.dead()
                if dead or not complete():
                    missing = {s: sorted(set(ANSWERS) - set(v)) for s, v in got.items()
                               if len(v) < len(ANSWERS)}
                    raise GraphError(
                        f'node process(es) died: {dead}; {_log_tails(work / "logs")}' if dead else
                        f'no answer from the graph within {limit:.0f} s for '
                        f'{len(missing)} of {len(stamps)} frames, e.g. '
                        f'{next(iter(missing.items()))}; bag_player done: {bool(done)}')
                ok = True
            finally:
                graph.stop()
    finally:
        lock.close()
        if ok and not os.environ.get('EDGE_LOOP_FLEET_KEEP_LOGS'):
            shutil.rmtree(work, ignore_errors=True)
    return got


def _start_unblocked(graph: Any) -> None:
    """``graph.start()`` with SIGINT unblocked while the node processes are forked.

    A Ray worker runs its tasks with SIGINT blocked, and a blocked signal stays blocked across
    fork and exec: the nodes would then ignore the SIGINT that stops them cleanly and each
    wait out its stop timeout (about a minute for the graph) before SIGTERM.
    """
    old = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        graph.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _log_tails(folder: Path, lines: int = 3) -> str:
    """The last error lines of every node log under ``folder`` (for a failure's reason)."""
    out = []
    for log in sorted(folder.glob('*.log')):
        text = log.read_text(errors='replace').splitlines()
        bad = [line for line in text if 'ERROR' in line or 'Error' in line] or text
        if bad:
            out.append(f'{log.stem}: ' + ' | '.join(x.strip()[:200] for x in bad[-lines:]))
    return '; '.join(out) + f' (logs kept in {folder})'
