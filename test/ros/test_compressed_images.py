# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Compressed camera images (issue 35): decoded at ingest with OpenCV, or refused by name.

The messages are encoded as image_transport's plugins write them: ``compressed``
(``'rgb8; jpeg compressed bgr8'``, OpenCV's BGR order inside) and ``compressedDepth``
(a 12-byte ConfigHeader, then a 16-bit PNG).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import struct

import cv2
import numpy as np
import pytest

from edge_loop.images import ImageFormatError, decode_compressed

_counter = itertools.count()


def _scene(h: int = 120, w: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """A smooth colour image (JPEG keeps it close) and a depth image with holes."""
    y, x = np.mgrid[0:h, 0:w]
    bgr = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 255 // (w + h))],
                   axis=-1).astype(np.uint8)
    depth = (600 + (x + y)).astype(np.uint16)
    depth[10:20, 30:50] = 0
    return bgr, depth


def _jpeg(bgr: np.ndarray) -> bytes:
    return cv2.imencode('.jpg', bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


def _compressed_depth(depth: np.ndarray, quant: tuple[float, float] = (0.0, 0.0)) -> bytes:
    return struct.pack('<iff', 0, *quant) + cv2.imencode('.png', depth)[1].tobytes()


def test_jpeg_and_png_colour_decode_to_bgr8():
    bgr, _ = _scene()
    image, encoding = decode_compressed('rgb8; jpeg compressed bgr8', _jpeg(bgr))
    assert encoding == 'bgr8' and image.shape == bgr.shape
    assert np.abs(image.astype(int) - bgr).mean() < 2.0          # lossy, but this image
    png = cv2.imencode('.png', bgr)[1].tobytes()
    for fmt in ('bgr8; png compressed bgr8', 'png'):                # Jazzy and legacy forms
        image, encoding = decode_compressed(fmt, png)
        assert encoding == 'bgr8' and np.array_equal(image, bgr)


def test_compressed_depth_png_16uc1_is_bit_exact():
    _, depth = _scene()
    for fmt in ('16UC1; compressedDepth png', '16UC1; compressedDepth'):
        image, encoding = decode_compressed(fmt, _compressed_depth(depth))
        assert encoding == '16UC1' and image.dtype == np.uint16
        assert np.array_equal(image, depth)


def test_compressed_depth_32fc1_inverts_the_quantisation():
    # The plugin stores q = a / d + b for float depth d (0 where there is none).
    quant_a, quant_b = 100.0, 10.0
    metres = np.array([[0.5, 1.0], [2.0, np.nan]], dtype=np.float32)
    q = np.where(np.isfinite(metres), quant_a / np.nan_to_num(metres, nan=1.0) + quant_b, 0)
    data = _compressed_depth(np.round(q).astype(np.uint16), (quant_a, quant_b))
    depth, encoding = decode_compressed('32FC1; compressedDepth png', data)
    assert encoding == '32FC1'
    assert np.allclose(depth[:1], [[0.5, 1.0]], rtol=1e-3) and np.isnan(depth[1, 1])


@pytest.mark.parametrize('fmt, data, words', [
    ('rgb8; theora compressed bgr8', b'xx', "'rgb8; theora compressed bgr8' is not supported"),
    ('16UC1; compressedDepth rvl', b'\0' * 20, "compressedDepth 'rvl' is not supported"),
    ('16UC1; compressedDepth png', b'\0' * 12, 'no image after its 12-byte header'),
    ('rgb8; jpeg compressed bgr8', b'not a jpeg', 'OpenCV could not decode'),
    ('mono16; compressedDepth png', b'\0' * 20, "compressedDepth of 'mono16'"),
])
def test_unknown_or_broken_formats_are_refused_by_name(fmt, data, words):
    with pytest.raises(ImageFormatError, match=re.escape(words)):
        decode_compressed(fmt, data)


def _sha(array: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


@pytest.mark.ros
@pytest.mark.every_distro
def test_frame_ingest_decodes_compressed_driver_images_into_shared_memory(
        monkeypatch, ros_domain, harness, node_procs):
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import CameraInfo, CompressedImage

    from edge_loop import topics
    from edge_loop.transport import FrameReader, image_qos, remove_stale_resources

    prefix = f'elc{os.getpid() % 100000}x{next(_counter)}_'
    monkeypatch.setenv('EDGE_LOOP_IOX2_PREFIX', prefix)
    ros_domain[1]['EDGE_LOOP_IOX2_PREFIX'] = prefix
    channel = 'edge_loop/ingest_compressed_test'
    proc = node_procs('frame_ingest', params={'transport': 'shm', 'frame_channel': channel,
                                              'image_transport': 'compressed'})
    try:
        client = harness.lifecycle('frame_ingest')
        client.wait_ready(30.0)
        client.transition('configure', timeout=20.0)
        client.transition('activate', timeout=20.0)
        got = []
        reader = FrameReader(harness.node, 'shm', channel, callback=lambda f: got.append(
            (f.stamp_ns, f.color_encoding, _sha(f.color), f.depth_encoding, _sha(f.depth))))
        pubs = {t: harness.node.create_publisher(CompressedImage, t, image_qos())
                for t in (topics.COLOR + '/compressed', topics.DEPTH + '/compressedDepth')}
        info_pub = harness.node.create_publisher(CameraInfo, topics.CAMERA_INFO, 10)
        for topic, pub in (*pubs.items(), (topics.CAMERA_INFO, info_pub)):
            harness.wait_until(lambda p=pub: p.get_subscription_count() >= 1, 30.0,
                               f'frame_ingest matched on {topic}')
        bgr, depth = _scene(480, 640)
        png = cv2.imencode('.png', bgr)[1].tobytes()   # lossless: the bytes can be compared
        k = [615.0, 0.0, 320.0, 0.0, 615.0, 240.0, 0.0, 0.0, 1.0]

        def send(sec: int, color_format: str) -> None:
            msgs = (CompressedImage(format=color_format, data=png),
                    CompressedImage(format='16UC1; compressedDepth png',
                                    data=_compressed_depth(depth)),
                    CameraInfo(width=640, height=480, k=k, distortion_model='plumb_bob'))
            for msg in msgs:
                msg.header.stamp = Time(sec=sec, nanosec=3)
                msg.header.frame_id = 'camera_color_optical_frame'
            pubs[topics.COLOR + '/compressed'].publish(msgs[0])
            pubs[topics.DEPTH + '/compressedDepth'].publish(msgs[1])
            info_pub.publish(msgs[2])

        send(200, 'rgb8; theora compressed bgr8')   # refused by name, no crash
        for sec in range(201, 204):
            for attempt in range(4):   # a keep-last reader may drop one in a burst: resend
                send(sec, 'rgb8; png compressed bgr8')
                try:
                    harness.wait_until(lambda sec=sec: any(g[0] == sec * 10**9 + 3
                                                           for g in got), 5.0, f'frame {sec}')
                    break
                except AssertionError:
                    if attempt == 3:
                        raise
        assert proc.wait_for_output("'rgb8; theora compressed bgr8' is not supported", 10.0), \
            proc.output()
        assert all(g[0] != 200 * 10**9 + 3 for g in got)
        assert {g[1:] for g in got} == {('bgr8', _sha(bgr), '16UC1', _sha(depth))}
        reader.close()
        client.transition('deactivate', timeout=20.0)
        client.transition('cleanup', timeout=20.0)
        assert 'Traceback' not in proc.output()
    finally:
        proc.stop()
        remove_stale_resources()
        for name in os.listdir('/dev/shm'):
            if name.startswith(prefix):
                os.unlink(os.path.join('/dev/shm', name))


@pytest.mark.ros
@pytest.mark.every_distro
def test_bag_player_decodes_a_compressed_realsense_bag_into_shared_memory(
        monkeypatch, ros_domain, harness, node_procs, tmp_path):
    """A bag of image_transport's compressed topics (realsense-ros names) feeds the loop."""
    from sensor_msgs.msg import CameraInfo, CompressedImage

    from edge_loop import topics
    from edge_loop.bags import BagWriter
    from edge_loop.transport import FrameReader, remove_stale_resources

    prefix = f'elb{os.getpid() % 100000}x{next(_counter)}_'
    monkeypatch.setenv('EDGE_LOOP_IOX2_PREFIX', prefix)
    ros_domain[1]['EDGE_LOOP_IOX2_PREFIX'] = prefix
    rng = np.random.default_rng(11)
    ns, sent = '/camera/camera', {}
    with BagWriter(tmp_path / 'bag') as writer:
        for i in range(4):
            stamp = 1_700_000_000_000_000_000 + i * 66_666_667
            bgr = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            depth = rng.integers(300, 900, (48, 64), dtype=np.uint16)
            sent[stamp] = (_sha(bgr), _sha(depth))
            info = CameraInfo(width=64, height=48,
                              k=[60.0, 0.0, 32.0, 0.0, 60.0, 24.0, 0.0, 0.0, 1.0])
            color = CompressedImage(format='rgb8; png compressed bgr8',
                                    data=cv2.imencode('.png', bgr)[1].tobytes())
            packed = CompressedImage(format='16UC1; compressedDepth png',
                                     data=_compressed_depth(depth))
            for topic, msg in ((f'{ns}/color/image_raw/compressed', color),
                               (f'{ns}/aligned_depth_to_color/image_raw/compressedDepth',
                                packed), (f'{ns}/color/camera_info', info)):
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 10**9)
                msg.header.frame_id = 'camera_color_optical_frame'
                writer.write(topic, stamp, msg)
    channel = f'edge_loop/test_{tmp_path.name}'
    frames = []
    reader = FrameReader(harness.node, transport='shm', channel=channel,
                         callback=lambda f: frames.append(
                             (f.stamp_ns, f.color_encoding, _sha(f.color), _sha(f.depth))))
    try:
        proc = node_procs('bag_player', params={'bag': str(tmp_path / 'bag'), 'transport': 'shm',
                                                'frame_channel': channel, 'rate': 0.25,
                                                'wait_topics': [topics.CAMERA_INFO]})
        harness.subscribe(CameraInfo, topics.CAMERA_INFO, lambda m: None)
        announced = harness.collect(CameraInfo, topics.FRAMES)
        client = harness.lifecycle('bag_player')
        client.transition('configure', timeout=60.0)
        harness.wait_for_publishers(topics.FRAMES)
        client.transition('activate', timeout=10.0)
        harness.wait_until(lambda: len(announced) >= 4, 30.0, '4 frames announced')
        try:
            harness.wait_until(lambda: len(frames) >= 4, 2.0, 'the last frame in shm')
        except AssertionError:
            if len(frames) < 3:   # drop-oldest channel: a starved reader may miss one
                raise
    finally:
        reader.close()
    assert frames and 'Traceback' not in proc.output()
    for stamp, encoding, color_sha, depth_sha in frames:
        assert encoding == 'bgr8' and (color_sha, depth_sha) == sent[stamp]
    remove_stale_resources()
    for name in os.listdir('/dev/shm'):
        if name.startswith(prefix):
            os.unlink(os.path.join('/dev/shm', name))


@pytest.mark.ros
@pytest.mark.every_distro
def test_bag_player_refuses_compressed_images_without_shared_memory(
        harness, node_procs, tmp_path):
    from sensor_msgs.msg import CameraInfo, CompressedImage

    from edge_loop.bags import BagWriter
    from edge_loop.lifecycle_client import LifecycleError

    with BagWriter(tmp_path / 'bag') as writer:
        for topic, msg in (('/camera/color/image_raw/compressed', CompressedImage(format='png')),
                           ('/camera/aligned_depth_to_color/image_raw/compressedDepth',
                            CompressedImage(format='16UC1; compressedDepth png')),
                           ('/camera/color/camera_info', CameraInfo(width=4, height=4))):
            writer.write(topic, 1, msg)
    proc = node_procs('bag_player', params={'bag': str(tmp_path / 'bag'), 'transport': 'ros'})
    client = harness.lifecycle('bag_player')
    with pytest.raises(LifecycleError, match='configure failed'):
        client.transition('configure', timeout=30.0)
    assert proc.wait_for_output("images are compressed; they are decoded into shared-memory "
                                "frames, which need transport 'shm'", 5.0), proc.output()
