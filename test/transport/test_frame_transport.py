# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Frame transport between real processes.

Bytes intact, read-only views, drop-oldest, SIGKILL of either side, shared memory seen by
several consumers, the ROS fallback and a clean /dev/shm after close.

Each test runs its producer/consumer processes (test/transport/frame_peer.py) on its own
ROS_DOMAIN_ID and its own iceoryx2 file prefix, so parallel tests never see each other.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PEER = Path(__file__).with_name('frame_peer.py')
_prefix_counter = itertools.count()


class Peer:
    """One frame_peer.py process whose JSON lines are collected as they come."""

    def __init__(self, role: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.role = role
        self.log = log
        self._err = open(log, 'wb')  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, str(PEER), role, *args], env=env,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     start_new_session=True)
        self.events: list[dict] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with contextlib.suppress(json.JSONDecodeError):
                self.events.append(json.loads(line))

    def of(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e.get('event') == kind]

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                self._thread.join(2.0)
                if predicate():
                    return
                break
            time.sleep(0.02)
        raise AssertionError(f'{self.role}: timed out waiting for {what}; stderr:\n'
                             f'{self.log.read_text(errors="replace")[-3000:]}')

    def wait_frames(self, count: int, timeout: float = 45.0) -> None:
        self.wait_for(lambda: len(self.of('frame')) >= count, timeout, f'{count} frame(s)')

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5.0)
        self._thread.join(5.0)
        self._err.close()
        return self.proc.returncode


def _iox_files(prefix: str) -> set[str]:
    found = {name for name in os.listdir('/dev/shm') if name.startswith(prefix)}
    root = Path('/tmp/iceoryx2')
    if root.exists():
        found |= {str(p) for p in root.rglob(f'{prefix}*')}
    return found


@pytest.fixture
def iox_prefix(monkeypatch):
    """A private iceoryx2 file prefix (also set here, for in-process checks)."""
    prefix = f'elt{os.getpid() % 100000}x{next(_prefix_counter)}_'
    monkeypatch.setenv('EDGE_LOOP_IOX2_PREFIX', prefix)
    yield prefix
    from edge_loop.transport import remove_stale_resources

    remove_stale_resources()   # what SIGKILLed peers left behind
    for name in os.listdir('/dev/shm'):
        if name.startswith(prefix):   # iceoryx2's 16-byte global file of this prefix
            with contextlib.suppress(OSError):
                os.unlink(os.path.join('/dev/shm', name))


@pytest.fixture
def peers(ros_domain, iox_prefix, tmp_path):
    """``peers(role, *args)`` starts a frame_peer.py process; all stop at the end."""
    env = dict(ros_domain[1])
    env['EDGE_LOOP_IOX2_PREFIX'] = iox_prefix
    env['FASTDDS_BUILTIN_TRANSPORTS'] = 'LARGE_DATA'
    started: list[Peer] = []

    def start(role: str, *args: str, **extra_env: str) -> Peer:
        peer = Peer(role, list(args), {**env, **extra_env},
                    tmp_path / f'{role}{len(started)}.log')
        started.append(peer)
        return peer

    yield start
    for peer in reversed(started):
        peer.stop()


def _sent_formats(producer: Peer) -> dict[int, str]:
    return {e['stamp_ns']: e['fmt'] for e in producer.of('sent')}


def _check_frames(producer: Peer, consumer: Peer) -> set[str]:
    """Assert every received frame matches what was sent; return the formats seen."""
    from frame_peer import FORMATS

    hashes = producer.of('ready')[0]['hashes']
    sent = _sent_formats(producer)
    seen = set()
    for frame in consumer.of('frame'):
        fmt = sent[frame['stamp_ns']]
        c_shape, c_enc, d_shape, d_enc = FORMATS[fmt]
        assert [frame['color_sha'], frame['depth_sha']] == hashes[fmt], fmt
        assert frame['color_shape'] == (list(c_shape) if c_shape else None), fmt
        assert frame['depth_shape'] == (list(d_shape) if d_shape else None), fmt
        if c_enc:
            assert frame['color_encoding'] == c_enc
        if d_enc:
            assert frame['depth_encoding'] == d_enc
            assert frame['depth_dtype'] == ('uint16' if d_enc == '16UC1' else 'float32')
        assert frame['readonly'] is True, f'{fmt}: consumer could write into the frame'
        assert frame['frame_id'] == 'camera_optical'
        assert frame['info_d'] == [0.01, -0.02, 0.0, 0.0, 0.003]
        assert frame['info_stamp_ns'] == frame['stamp_ns']
        seen.add(fmt)
    return seen


sys.path.insert(0, str(PEER.parent))
ALL_FORMATS = 'vga,vga_bgr_f32,hd,fhd,odd,odd16,color_only,depth_only'
RGBD_FORMATS = 'vga,vga_bgr_f32,fhd,odd,odd16'


@pytest.mark.ros
@pytest.mark.every_distro
def test_round_trip_every_format_shm(peers, iox_prefix):
    consumer = peers('consumer', '--audit')
    consumer.wait_for(lambda: consumer.of('ready'), 30, 'consumer ready')
    producer = peers('producer', '--formats', ALL_FORMATS, '--count', '24', '--rate', '8')
    producer.wait_for(lambda: producer.of('closed'), 60, 'producer done')
    consumer.wait_for(lambda: consumer.of('frame') and consumer.of('frame')[-1]['seq'] == 24,
                      30, 'the last frame')
    assert _check_frames(producer, consumer) == set(ALL_FORMATS.split(','))
    assert consumer.stop() == 0, consumer.log.read_text(errors='replace')[-6000:]
    stats = consumer.of('closed')[0]['stats']
    assert stats['copies'] == 0 and stats['audited'] > 0 and stats['errors'] == 0
    assert stats['remote_fallback'] == 0   # 24 announcements, every one with its sample
    # Both sides closed cleanly: only iceoryx2's 16-byte global file of the prefix remains.
    assert {f for f in _iox_files(iox_prefix) if not f.endswith('global_mgmt')} == set()


@pytest.mark.ros
@pytest.mark.every_distro
def test_slow_consumer_drops_oldest(peers):
    consumer = peers('consumer', '--delay', '0.25')
    consumer.wait_for(lambda: consumer.of('ready'), 30, 'consumer ready')
    producer = peers('producer', '--formats', 'vga', '--count', '40', '--rate', '40')
    producer.wait_for(lambda: producer.of('closed'), 30, 'producer done (never blocked)')
    consumer.wait_for(lambda: consumer.of('frame') and consumer.of('frame')[-1]['seq'] == 40,
                      30, 'the newest frame')
    consumer.stop()
    seqs = [f['seq'] for f in consumer.of('frame')]
    assert seqs == sorted(set(seqs)), 'frames out of order or repeated'
    stats = consumer.of('closed')[0]['stats']
    assert len(seqs) < 40 and stats['dropped'] > 0
    assert stats['received'] + stats['dropped'] == 40 - (seqs[0] - 1)


def _dead_nodes() -> int:
    import iceoryx2 as iox

    from edge_loop.transport.shm import _config

    return sum(isinstance(s, iox.NodeState.Dead)
               for s in iox.Node.list(iox.ServiceType.Ipc, _config()))


@pytest.mark.ros
@pytest.mark.every_distro
def test_consumer_sigkill_does_not_stop_producer(peers):
    survivor = peers('consumer')
    victim = peers('consumer')
    for c in (survivor, victim):
        c.wait_for(lambda c=c: c.of('ready'), 30, 'consumer ready')
    producer = peers('producer', '--formats', 'vga', '--rate', '30')
    victim.wait_frames(5)
    victim.stop(signal.SIGKILL)
    assert _dead_nodes() >= 1
    for _ in range(2):   # consumers killed again and again must not exhaust the service
        replacement = peers('consumer')
        replacement.wait_frames(3)
        assert _dead_nodes() == 0, 'stale resources of the dead consumer were not cleaned'
        replacement.stop(signal.SIGKILL)
    sent_at_kill = len(producer.of('sent'))
    got_at_kill = len(survivor.of('frame'))
    producer.wait_for(lambda: len(producer.of('sent')) >= sent_at_kill + 30, 30,
                      'producer keeps sending')
    survivor.wait_frames(got_at_kill + 20)
    assert producer.proc.poll() is None
    assert producer.stop() == 0


@pytest.mark.ros
@pytest.mark.every_distro
def test_restarted_producer_is_picked_up(peers):
    consumer = peers('consumer')
    consumer.wait_for(lambda: consumer.of('ready'), 30, 'consumer ready')
    first = peers('producer', '--formats', 'vga', '--rate', '30')
    consumer.wait_frames(5)
    first.stop(signal.SIGKILL)
    old_writer = consumer.of('frame')[-1]['writer_id']
    second = peers('producer', '--formats', 'odd', '--rate', '30')
    consumer.wait_for(lambda: consumer.of('frame')[-1]['writer_id'] != old_writer, 30,
                      'frames of the restarted producer')
    count = len(consumer.of('frame'))
    consumer.wait_frames(count + 5)
    fresh = [f for f in consumer.of('frame') if f['writer_id'] != old_writer]
    hashes = second.of('ready')[0]['hashes']['odd']
    assert all([f['color_sha'], f['depth_sha']] == hashes for f in fresh)
    assert _dead_nodes() == 0
    second.stop()
    consumer.stop()
    assert consumer.of('closed')[0]['stats']['restarts'] >= 1


@pytest.mark.ros
@pytest.mark.every_distro
def test_three_consumers_share_the_same_memory(peers, iox_prefix):
    consumers = [peers('consumer', '--audit', '--maps') for _ in range(3)]
    for c in consumers:
        c.wait_for(lambda c=c: c.of('ready'), 30, 'consumer ready')
    producer = peers('producer', '--formats', 'vga,fhd', '--count', '20', '--rate', '10')
    producer.wait_for(lambda: producer.of('closed'), 30, 'producer done')
    for c in consumers:
        c.wait_for(lambda c=c: c.of('frame') and c.of('frame')[-1]['seq'] == 20, 30,
                   'the last frame')
        c.stop()
    where = [{f['seq']: tuple(f['location']) for f in c.of('frame')} for c in consumers]
    common = set(where[0]) & set(where[1]) & set(where[2])
    assert len(common) >= 5
    for seq in common:
        locations = {w[seq] for w in where}
        assert len(locations) == 1, f'frame {seq} lies in different memory: {locations}'
        path, _offset = locations.pop()
        assert path.startswith(f'/dev/shm/{iox_prefix}'), path
    for c in consumers:
        stats = c.of('closed')[0]['stats']
        assert stats['copies'] == 0 and stats['audited'] >= 2 * stats['received'] > 0
        _check_frames(producer, c)


@pytest.mark.ros
@pytest.mark.every_distro
def test_ros_transport_gives_identical_arrays(peers):
    consumer = peers('consumer', '--transport', 'ros', '--audit')
    consumer.wait_for(lambda: consumer.of('ready'), 30, 'consumer ready')
    assert consumer.of('ready')[0]['transport'] == 'ros'
    producer = peers('producer', '--transport', 'ros', '--formats', RGBD_FORMATS,
                     '--count', '0', '--rate', '5', '--wait-subscribers', '1')
    # Colour, depth and camera_info are three DDS topics; the keep-last-2 image readers drop
    # the oldest frame when DDS delivers large samples in bursts (by design: bounded
    # latency). So this test keeps sending until every format has arrived at least twice,
    # and judges the bytes of every frame that did arrive.
    formats = RGBD_FORMATS.split(',')

    def seen_twice() -> bool:
        sent = _sent_formats(producer)
        got = [sent.get(f['stamp_ns']) for f in consumer.of('frame')]
        return all(got.count(fmt) >= 2 for fmt in formats)

    consumer.wait_for(seen_twice, 90, 'every format twice')
    producer.stop(timeout=25.0)   # it waits up to 15 s for the last frames' acks
    assert not producer.of('ack_timeout'), 'the last frames were never acknowledged'
    consumer.wait_for(lambda: consumer.of('frame')[-1]['stamp_ns'] == max(_sent_formats(producer)),
                      40, 'the last frame')
    assert _check_frames(producer, consumer) == set(formats)
    consumer.stop()
    stats = consumer.of('closed')[0]['stats']
    # Over ROS each plane is deserialised once; the audit finds nothing beyond that.
    assert stats['copies'] == 2 * stats['received'] == 2 * len(consumer.of('frame'))
    assert stats['errors'] == 0


@pytest.mark.ros
@pytest.mark.every_distro
def test_shm_producer_serves_a_ros_consumer_the_same_frames(peers):
    shm_consumer = peers('consumer')
    ros_consumer = peers('consumer', '--transport', 'ros')
    for c in (shm_consumer, ros_consumer):
        c.wait_for(lambda c=c: c.of('ready'), 30, 'consumer ready')
    producer = peers('producer', '--formats', 'vga,odd16', '--count', '15', '--rate', '5',
                     '--wait-subscribers', '1')
    producer.wait_for(lambda: producer.of('closed'), 60, 'producer done')
    assert not producer.of('wait_timeout'), 'the ROS consumer was never matched'
    for c in (shm_consumer, ros_consumer):
        c.wait_for(lambda c=c: len(c.of('frame')) >= 5, 40, 'frames')
    by_stamp = {f['stamp_ns']: (f['color_sha'], f['depth_sha']) for f in shm_consumer.of('frame')}
    both = [f for f in ros_consumer.of('frame') if f['stamp_ns'] in by_stamp]
    assert len(both) >= 3
    assert all((f['color_sha'], f['depth_sha']) == by_stamp[f['stamp_ns']] for f in both)
    _check_frames(producer, ros_consumer)


@pytest.mark.ros
@pytest.mark.every_distro
def test_a_producer_on_another_host_is_read_over_ros(peers, iox_prefix):
    # Another host, as this consumer sees it: the producer's DDS traffic arrives, its
    # iceoryx2 loans never do (here: another iceoryx2 prefix, i.e. other shared memory).
    consumer = peers('consumer')
    consumer.wait_for(lambda: consumer.of('ready'), 30, 'consumer ready')
    assert consumer.of('ready')[0]['transport'] == 'shm'
    producer = peers('producer', '--formats', 'vga,odd16', '--rate', '15',
                     EDGE_LOOP_IOX2_PREFIX=iox_prefix + 'remote_')
    consumer.wait_frames(6, timeout=60.0)
    producer.stop()
    assert consumer.stop() == 0
    assert consumer.of('closed')[0]['stats']['remote_fallback'] == 1
    assert _check_frames(producer, consumer) == {'vga', 'odd16'}
    assert all(f['transport'] == 'ros' for f in consumer.of('frame'))


@pytest.mark.ros
@pytest.mark.every_distro
def test_close_leaves_dev_shm_as_it_was(harness, iox_prefix):
    from builtin_interfaces.msg import Time

    from edge_loop.transport import FrameReader, FrameWriter

    FrameWriter(harness.node, 'shm', 'edge_loop/close_test', 640, 480).close()  # global file
    before = _iox_files(iox_prefix)
    got = []   # values, not frames: a frame keeps its sample borrowed while referenced
    reader = FrameReader(harness.node, 'shm', 'edge_loop/close_test', callback=lambda f: got.append(
        (int(f.color[0, 0, 0]), int(f.depth[-1, -1]), f.camera_info)))
    writer = FrameWriter(harness.node, 'shm', 'edge_loop/close_test', 640, 480)
    assert writer.transport == 'shm' and reader.transport == 'shm'
    assert _iox_files(iox_prefix) != before
    # The pool is sized by max_width x max_height (26 samples of 640x480x8 B here).
    sizes = [os.path.getsize(f'/dev/shm/{n}') for n in os.listdir('/dev/shm')
             if n.startswith(iox_prefix)]
    assert 26 * 640 * 480 * 8 <= max(sizes) < 2 * 26 * 640 * 480 * 8
    for i in range(3):
        with writer.loan((480, 640, 3), 'rgb8', (480, 640), '16UC1') as frame:
            frame.color[...] = i
            frame.depth[...] = i
            frame.publish(stamp=Time(sec=i), frame_id='camera_optical')
        harness.wait_until(lambda i=i: len(got) > i, 10, f'frame {i}')
    assert got == [(0, 0, None), (1, 1, None), (2, 2, None)]
    writer.close()
    reader.close()
    assert _iox_files(iox_prefix) == before


@pytest.mark.ros
@pytest.mark.every_distro
def test_audit_counts_a_copy_a_stage_makes(harness, iox_prefix):
    from builtin_interfaces.msg import Time

    from edge_loop.images import to_rgb
    from edge_loop.transport import FrameReader, FrameWriter

    results = []

    def stage(frame):   # what a stage would hand its kernel: views count 0, copies 1
        results.append((frame.audit(to_rgb(frame.color, frame.color_encoding)[10:20]),
                        frame.audit(frame.depth.astype('float32'))))

    reader = FrameReader(harness.node, 'shm', 'edge_loop/audit_test', callback=stage,
                         audit=True)
    writer = FrameWriter(harness.node, 'shm', 'edge_loop/audit_test', 640, 480)
    with writer.loan((480, 640, 3), 'bgr8', (480, 640), '16UC1') as frame:
        frame.publish(stamp=Time(sec=1), frame_id='camera_optical')
    harness.wait_until(lambda: reader.stats['audited'] >= 4, 10, 'the audit')
    assert results == [(0, 1)]
    assert reader.stats['copies'] == 1   # the reader's own check of the planes found none
    writer.close()
    reader.close()


@pytest.mark.ros
@pytest.mark.every_distro
def test_falls_back_to_ros_without_shared_memory(harness, monkeypatch):
    from edge_loop.transport import FrameReader, FrameWriter, shm

    monkeypatch.setattr(shm, 'available', lambda: (False, 'disabled by the test'))
    writer = FrameWriter(harness.node, 'shm', 'edge_loop/fallback_test')
    reader = FrameReader(harness.node, 'shm', 'edge_loop/fallback_test', callback=print)
    assert (writer.transport, reader.transport) == ('ros', 'ros')
    writer.close()
    reader.close()
