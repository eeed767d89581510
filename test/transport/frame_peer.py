# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A test producer or consumer of frames, run as a file in its own process.

It prints one JSON object per line on stdout: ``ready``, then ``sent``/``frame`` per frame,
then ``closed`` with the reader's stats when stopped with SIGINT/SIGTERM.

    python frame_peer.py producer --transport shm --formats vga,hd --rate 20 --count 30
    python frame_peer.py consumer --transport shm --audit --delay 0.2
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import signal
import sys
import threading
import time

import numpy as np

# name -> (color shape, color encoding, depth shape, depth encoding)
FORMATS = {
    'vga': ((480, 640, 3), 'rgb8', (480, 640), '16UC1'),
    'vga_bgr_f32': ((480, 640, 3), 'bgr8', (480, 640), '32FC1'),
    'hd': ((720, 1280, 3), 'rgb8', (720, 1280), '16UC1'),
    'fhd': ((1080, 1920, 3), 'bgr8', (1080, 1920), '32FC1'),
    'odd': ((479, 641, 3), 'rgb8', (479, 641), '32FC1'),
    'odd16': ((479, 641, 3), 'bgr8', (479, 641), '16UC1'),
    'color_only': ((480, 640, 3), 'rgb8', None, None),
    'depth_only': (None, None, (480, 640), '16UC1'),
}


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + '\n')
    sys.stdout.flush()


def sha(array: np.ndarray | None) -> str | None:
    if array is None:
        return None
    return hashlib.sha1(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


def make_planes(name: str, seed: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    c_shape, _, d_shape, d_enc = FORMATS[name]
    rng = np.random.default_rng(seed)
    color = rng.integers(0, 256, c_shape, dtype=np.uint8) if c_shape else None
    depth = None
    if d_shape is not None and d_enc == '16UC1':
        depth = rng.integers(0, 65536, d_shape, dtype=np.uint16)
    elif d_shape is not None:
        depth = rng.uniform(0.2, 3.0, d_shape).astype(np.float32)
        depth[::7, ::5] = np.nan   # NaN bit patterns must survive too
    return color, depth


def shm_location(address: int) -> list[object] | None:
    """(mapped file, offset in that file) of ``address`` from /proc/self/maps."""
    with open('/proc/self/maps') as maps:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split('-'))
            if lo <= address < hi:
                path = parts[5] if len(parts) > 5 else ''
                return [path, address - lo + int(parts[2], 16)]
    return None


def make_node(name: str):
    import rclpy

    rclpy.init()
    return rclpy.create_node(name)


def run_producer(args: argparse.Namespace) -> int:
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import CameraInfo

    from edge_loop.transport import FrameWriter

    node = make_node('frame_peer_producer')
    writer = FrameWriter(node, args.transport, args.channel, max_width=1920, max_height=1080)
    names = args.formats.split(',')
    planes = {name: make_planes(name, seed) for seed, name in enumerate(names)}
    emit(event='ready', transport=writer.transport,
         hashes={n: [sha(c), sha(d)] for n, (c, d) in planes.items()})
    if args.wait_subscribers:
        deadline = time.monotonic() + 30.0
        # Writer-side matches of the Image/CameraInfo writers (not the graph cache, which can
        # list a reader before the writer has matched it): a reliable writer that has matched
        # a reader keeps each frame until it is acknowledged, so frame 0 cannot be lost. With
        # shm these count the ROS readers only; shm readers take loans, not Images.
        while (writer.matched_subscribers() < args.wait_subscribers
               and time.monotonic() < deadline):
            time.sleep(0.02)
        if writer.matched_subscribers() < args.wait_subscribers:
            emit(event='wait_timeout', matched=writer.matched_subscribers())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    info = CameraInfo()
    info.distortion_model = 'plumb_bob'
    info.d = [0.01, -0.02, 0.0, 0.0, 0.003]
    period = 1.0 / args.rate
    next_t = time.monotonic()
    i = 0
    while not stop.is_set() and (args.count == 0 or i < args.count):
        name = names[i % len(names)]
        c_shape, c_enc, d_shape, d_enc = FORMATS[name]
        color, depth = planes[name]
        shape = c_shape or d_shape
        info.height, info.width = shape[0], shape[1]
        info.k = [615.0, 0.0, shape[1] / 2, 0.0, 615.0, shape[0] / 2, 0.0, 0.0, 1.0]
        with writer.loan(c_shape, c_enc, d_shape, d_enc) as frame:
            if color is not None:
                frame.color[...] = color
            if depth is not None:
                frame.depth[...] = depth
            seq = frame.publish(stamp=Time(sec=1000 + i, nanosec=i), frame_id='camera_optical',
                                camera_info=info)
        emit(event='sent', seq=seq, fmt=name, stamp_ns=(1000 + i) * 1_000_000_000 + i)
        i += 1
        next_t += period
        time.sleep(max(0.0, next_t - time.monotonic()))
    if writer.transport == 'ros' or args.wait_subscribers:
        from rclpy.duration import Duration

        # Reliable topics: let the last frames be delivered. 1080p frames over DDS on a loaded
        # 2-core CI VM took longer than the 2 s this once waited: the producer exited, and a
        # consumer waiting for the last frame never got it.
        acked = all(pub.wait_for_all_acked(Duration(seconds=15.0))
                    for pub in (writer._color_pub, writer._depth_pub, writer._info_pub)
                    if pub is not None)
        if not acked:
            emit(event='ack_timeout')
    writer.close()
    node.destroy_node()
    emit(event='closed', sent=i)
    return 0


def run_consumer(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from edge_loop.transport import FrameReader

    node = make_node('frame_peer_consumer')
    lock = threading.Lock()
    holder = {}

    def on_frame(frame) -> None:
        blocked = []
        for plane in (frame.color, frame.depth):
            if plane is None:
                continue
            try:
                plane.flat[0] = 0
                blocked.append(False)
            except ValueError:
                try:
                    plane.flags.writeable = True
                    blocked.append(False)
                except ValueError:
                    blocked.append(True)
        info = frame.camera_info
        fields = dict(
            event='frame', seq=frame.seq, writer_id=frame.writer_id, stamp_ns=frame.stamp_ns,
            transport=frame.transport,
            frame_id=frame.frame_id, color_encoding=frame.color_encoding,
            depth_encoding=frame.depth_encoding,
            color_shape=None if frame.color is None else list(frame.color.shape),
            depth_shape=None if frame.depth is None else list(frame.depth.shape),
            depth_dtype=None if frame.depth is None else str(frame.depth.dtype),
            color_sha=sha(frame.color), depth_sha=sha(frame.depth), readonly=all(blocked),
            info_d=None if info is None else list(info.d),
            info_stamp_ns=None if info is None else
            info.header.stamp.sec * 1_000_000_000 + info.header.stamp.nanosec,
            latency_ns=frame.latency_ns,
            stats=dict(holder['reader'].stats) if 'reader' in holder else None)
        if args.maps:
            plane = frame.color if frame.color is not None else frame.depth
            fields['location'] = shm_location(plane.ctypes.data)
        with lock:
            emit(**fields)
        if args.delay:
            time.sleep(args.delay)

    reader = FrameReader(node, args.transport, args.channel, callback=on_frame,
                         audit=args.audit)
    holder['reader'] = reader
    # Our own stop flag rather than rclpy's signal handling: twice in CI (Jazzy and Kilted) a
    # consumer in rclpy.spin() let a SIGINT pass and was killed 15 s later.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    emit(event='ready', transport=reader.transport)
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # A shutdown that hangs (seen once in CI: SIGKILL after 15 s) leaves every thread's
        # stack in the log for the test's failure message.
        faulthandler.dump_traceback_later(8.0)
        reader.close()
        with lock:
            emit(event='closed', stats=dict(reader.stats))
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('role', choices=('producer', 'consumer'))
    parser.add_argument('--transport', default='shm')
    parser.add_argument('--channel', default='edge_loop/test')
    parser.add_argument('--formats', default='vga')
    parser.add_argument('--rate', type=float, default=20.0)
    parser.add_argument('--count', type=int, default=0, help='0: until stopped')
    parser.add_argument('--wait-subscribers', type=int, default=0)
    parser.add_argument('--audit', action='store_true')
    parser.add_argument('--maps', action='store_true')
    parser.add_argument('--delay', type=float, default=0.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    return run_producer(args) if args.role == 'producer' else run_consumer(args)


if __name__ == '__main__':
    sys.exit(main())
