# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Frame transport benchmark: iceoryx2 loans against rclpy topics, side by side.

Producer and consumers run in separate processes (this file with ``--role``); the producer
sends one payload per frame at 30 Hz; each consumer records the latency from send (just before
``publish``/``send``) to its callback holding a numpy view, and every process its CPU time per
frame (``time.process_time``). Variants:

- ``shm``: :class:`edge_loop.transport.FrameWriter`/``FrameReader`` over iceoryx2 (the producer
  writes into the loan; the copy audit counts copies at the consumer);
- ``shm_rt``: the same with the reader threads at SCHED_FIFO 20 (``EDGE_LOOP_SHM_RT_PRIORITY``;
  as plain ``shm`` where the process may not raise its priority);
- ``shm_poll``: the same with hybrid polling (``EDGE_LOOP_SHM_POLL_US``, :data:`POLL_US`): the
  reader sleeps until shortly before the next frame is due and polls for it from there;
- ``shm_core`` (not in the default set): the iceoryx2 data plane alone
  (:mod:`edge_loop.transport.shm`, no rclpy in either process), so the transport can be
  measured on a machine without ROS, e.g. one with more cores (docs/transport.md);
  ``shm_core_rt`` the same with ``shm_rt``'s reader priority;
- ``ros_reliable``: plain rclpy, reliable, depth 10, default Fast DDS transports;
- ``ros_best_effort``: the same with best-effort QoS;
- ``ros_tuned``: the best plain-ROS setting a user can choose without code: ``ros_reliable``
  with ``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA`` and glibc's malloc thresholds raised
  (``MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=1073741824``: the large message
  buffers are reused instead of mapped and unmapped per frame). The shm rows are compared with
  it (``x tuned``) as well as with the default (``x rel``).

The floor is one ``np.copyto`` of the payload in one process. Prints one table, then the shm
latency split into send -> reader awake (or sample seen by polling) -> received -> callback.

    python bench/bench_transport.py            # every payload, 1 and 3 consumers (~6 min)
    python bench/bench_transport.py --quick    # VGA rgb8 and 1080p rgb8, fewer frames
    python bench/bench_transport.py --pin      # producer on CPU 0, consumers on the others
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

PAYLOADS = {   # name -> (shape, encoding, dtype)
    'vga_rgb8': ((480, 640, 3), 'rgb8', np.uint8),
    'vga_16UC1': ((480, 640), '16UC1', np.uint16),
    'vga_32FC1': ((480, 640), '32FC1', np.float32),
    '720p_rgb8': ((720, 1280, 3), 'rgb8', np.uint8),
    '1080p_rgb8': ((1080, 1920, 3), 'rgb8', np.uint8),
}
QUICK_PAYLOADS = ('vga_rgb8', '1080p_rgb8')
VARIANTS = ('shm', 'shm_rt', 'shm_poll', 'ros_reliable', 'ros_best_effort', 'ros_tuned')
CORE_VARIANTS = ('shm_core', 'shm_core_rt')   # no rclpy: the data plane alone
TOPIC = '/bench/image'
CHANNEL = 'edge_loop/bench'
RATE_HZ = 30.0
WARMUP = 15
POLL_US = 1500       # shm_poll's window each side of the predicted send
TAIL = 5
TUNED_ENV = {'FASTDDS_BUILTIN_TRANSPORTS': 'LARGE_DATA', 'MALLOC_MMAP_THRESHOLD_': '67108864',
             'MALLOC_TRIM_THRESHOLD_': '1073741824'}
IOX2_PREFIX = 'edgebench_'


def emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + '\n')
    sys.stdout.flush()


def payload_array(name: str) -> tuple[np.ndarray, str]:
    shape, encoding, dtype = PAYLOADS[name]
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, shape).astype(dtype), encoding


def qos_for(variant: str, role: str):
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    if variant == 'ros_best_effort':
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                          reliability=ReliabilityPolicy.BEST_EFFORT)
    # ros_tuned differs from ros_reliable only in its environment (TUNED_ENV), so the column
    # says what the settings a user can choose are worth.
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                      reliability=ReliabilityPolicy.RELIABLE)


def run_paced(frames: int, send: Callable[[int], None]) -> None:
    """Call ``send(seq)`` for seq 1, 2, ... at RATE_HZ: warm-up, ``frames`` measured, tail.

    Emits the producer's CPU time per measured frame.
    """
    next_t = time.monotonic()
    cpu0 = cpu = 0.0
    for seq in range(1, WARMUP + frames + TAIL + 1):
        if seq == WARMUP + 1:
            cpu0 = time.process_time()
        send(seq)
        if seq == WARMUP + frames:
            cpu = time.process_time() - cpu0
        next_t += 1.0 / RATE_HZ
        time.sleep(max(0.0, next_t - time.monotonic()))
    emit(event='producer', cpu_per_frame_us=cpu / frames * 1e6)


def emit_consumer(latencies: list[int], cpu_marks: list[float],
                  phases: list[tuple[int, int, int]], polled: float,
                  copies: int, received: int) -> None:
    """The consumer's result line: latencies, CPU per frame, median phases, copies."""
    n = len(latencies)
    emit(event='consumer', latencies_ns=latencies,
         cpu_per_frame_us=(cpu_marks[-1] - cpu_marks[0]) / (n - 1) * 1e6 if n > 1
         else float('nan'),
         polled=polled,
         phases_us=(np.median(np.asarray(phases, dtype=np.float64), axis=0) / 1e3).tolist()
         if phases else None,
         copies_per_frame=copies / received if received else None)


# --- the data plane alone (no rclpy) --------------------------------------------------------
def run_core_producer(args: argparse.Namespace) -> None:
    from edge_loop.transport.shm import ShmPublisher

    publisher = ShmPublisher(CHANNEL, max_width=1920, max_height=1080)
    src, encoding = payload_array(args.payload)
    is_color = src.ndim == 3

    def send(seq: int) -> None:
        shape = src.shape
        loan = publisher.loan(shape if is_color else None, encoding if is_color else None,
                              None if is_color else shape, None if is_color else encoding)
        np.copyto(loan.color if is_color else loan.depth, src)   # render into the loan
        h = loan.header
        h.seq = publisher.next_seq()
        h.stamp_sec, h.stamp_nanosec = seq, 0
        loan.send()

    run_paced(args.frames, send)
    publisher.close()


def run_core_consumer(args: argparse.Namespace) -> None:
    from edge_loop.transport.shm import ShmSubscriber

    latencies: list[int] = []
    phases: list[tuple[int, int, int]] = []
    cpu_marks: list[float] = []
    counts = {'received': 0, 'copies': 0}
    last = WARMUP + args.frames
    holder: dict[str, ShmSubscriber] = {}

    def on_sample(sample, receive_ns: int) -> None:
        header, color, depth = holder['sub'].decode(sample)
        view = color if color is not None else depth
        now = time.monotonic_ns()
        seq = int(header.stamp_sec)
        if WARMUP < seq <= last:
            latencies.append(now - header.send_ns)
            cpu_marks.append(time.process_time())
            wake = holder['sub'].wake_ns
            phases.append((wake - header.send_ns, receive_ns - wake, now - receive_ns))
            # The view must lie inside the sample's own memory: otherwise it is a copy.
            start = sample.payload_ptr
            end = start + 8 * sample.header.number_of_elements
            counts['received'] += 1
            counts['copies'] += int(not start <= view.ctypes.data < end)

    holder['sub'] = ShmSubscriber(CHANNEL, on_sample)
    emit(event='ready')
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    stop.wait()
    holder['sub'].close()
    emit_consumer(latencies, cpu_marks, phases, 0.0, counts['copies'], counts['received'])


# --- producer --------------------------------------------------------------------------------
def run_producer(args: argparse.Namespace) -> None:
    import rclpy
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import Image

    from edge_loop.images import fill_image

    rclpy.init()
    node = rclpy.create_node('bench_producer')
    src, encoding = payload_array(args.payload)
    is_color = src.ndim == 3
    writer = pub = None
    if args.variant.startswith('shm'):
        from edge_loop.transport import FrameWriter

        writer = FrameWriter(node, 'shm', CHANNEL, max_width=1920, max_height=1080)
    else:
        pub = node.create_publisher(Image, TOPIC, qos_for(args.variant, 'producer'))
        deadline = time.monotonic() + 30.0
        while pub.get_subscription_count() < args.consumers and time.monotonic() < deadline:
            time.sleep(0.02)

    def send(seq: int) -> None:
        if writer is not None:
            shape = src.shape
            with writer.loan(shape if is_color else None, encoding if is_color else None,
                             None if is_color else shape,
                             None if is_color else encoding) as frame:
                np.copyto(frame.color if is_color else frame.depth, src)  # render into loan
                frame.publish(stamp=Time(sec=seq), frame_id='bench')
        else:
            msg = fill_image(Image(), src, encoding)
            msg.header.frame_id = str(seq)
            now = time.monotonic_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            pub.publish(msg)

    run_paced(args.frames, send)
    if writer is not None:
        writer.close()
    node.destroy_node()
    rclpy.try_shutdown()


# --- consumer --------------------------------------------------------------------------------
def run_consumer(args: argparse.Namespace) -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import Image

    from edge_loop.images import image_to_array

    rclpy.init()
    node = rclpy.create_node('bench_consumer')
    latencies: list[int] = []
    phases: list[tuple[int, int, int]] = []
    cpu_marks: list[float] = []
    last = WARMUP + args.frames
    reader = None

    def record(seq: int, send_ns: int, now_ns: int) -> None:
        if WARMUP < seq <= last:
            latencies.append(now_ns - send_ns)
            cpu_marks.append(time.process_time())

    if args.variant.startswith('shm'):
        from edge_loop.transport import FrameReader

        def on_frame(frame) -> None:
            now = time.monotonic_ns()
            seq = int(frame.stamp_ns // 1_000_000_000)
            record(seq, frame.send_time_ns, now)
            if WARMUP < seq <= last:   # where the latency goes: send -> wake -> receive -> us
                times = frame.stage_times
                phases.append((times['wake'] - frame.send_time_ns,
                               times['receive'] - times['wake'], now - times['receive']))

        reader = FrameReader(node, 'shm', CHANNEL, callback=on_frame, audit=True)
    else:
        def on_image(msg) -> None:
            view = image_to_array(msg)   # the consumer's numpy view of the payload
            now = time.monotonic_ns()
            send = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            record(int(msg.header.frame_id), send, now)
            del view

        node.create_subscription(Image, TOPIC, on_image, qos_for(args.variant, 'consumer'))
    emit(event='ready')
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    # Spin as a stage node does, without a timeout: the shm reader's frames come on its own
    # thread, but its executor must run to drop the remote-producer watch once shared memory
    # delivers (without it every frame's DDS announcement is received and queued for ever).
    # A spin_once loop with a timeout would wake the process on its own (a 0.5 s timeout
    # cost ~40 us of CPU per frame at 30 Hz); the main thread just waits for SIGINT.
    threading.Thread(target=rclpy.spin, args=(node,), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt, ExternalShutdownException):
        stop.wait()
    stats = dict(reader.stats) if reader is not None else {}
    if reader is not None:
        reader.close()
    emit_consumer(latencies, cpu_marks, phases,
                  stats.get('polled', 0) / max(stats.get('received', 0), 1),
                  stats.get('copies', 0), stats.get('received', 0))
    rclpy.try_shutdown()   # ends the spinning thread


# --- orchestration ---------------------------------------------------------------------------
class Proc:
    """A role process whose JSON lines are collected."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, *argv], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        self.events: list[dict] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with contextlib.suppress(json.JSONDecodeError):
                self.events.append(json.loads(line))

    def wait_event(self, kind: str, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in list(self.events):
                if event.get('event') == kind:
                    return event
            if self.proc.poll() is not None:
                self._thread.join(1.0)
                return next((e for e in self.events if e.get('event') == kind), None)
            time.sleep(0.02)
        return None

    def finish(self, sig: int | None = signal.SIGINT, timeout: float = 20.0) -> None:
        if sig is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5.0)
        self._thread.join(2.0)


def run_config(variant: str, payload: str, consumers: int, frames: int,
               domain_id: int, pin: bool = False) -> dict:
    from edge_loop.testing import domain_env

    env = domain_env(domain_id)
    env.pop('FASTDDS_BUILTIN_TRANSPORTS', None)
    env['EDGE_LOOP_IOX2_PREFIX'] = IOX2_PREFIX
    if variant == 'ros_tuned':
        env.update(TUNED_ENV)
    if variant in ('shm_rt', 'shm_core_rt'):
        env['EDGE_LOOP_SHM_RT_PRIORITY'] = '20'
    if variant == 'shm_poll':
        env['EDGE_LOOP_SHM_POLL_US'] = str(POLL_US)
    common = ['--variant', variant, '--payload', payload, '--frames', str(frames),
              '--consumers', str(consumers)]
    cpus = sorted(os.sched_getaffinity(0))
    placement = ([['--cpu', str(cpus[1 + i % (len(cpus) - 1)])] for i in range(consumers)]
                 if pin and len(cpus) > 1 else [[] for _ in range(consumers)])
    cons = [Proc(['--role', 'consumer', *common, *where], env) for where in placement]
    for c in cons:
        c.wait_event('ready', 60.0)
    prod = Proc(['--role', 'producer', *common, *(['--cpu', str(cpus[0])] if pin else [])],
                env)
    prod_result = prod.wait_event('producer', frames / RATE_HZ + 90.0) or {}
    prod.finish(sig=None)
    time.sleep(1.0)   # late frames
    results = []
    for c in cons:
        c.finish()
        results.append(c.wait_event('consumer', 5.0) or {})
    lat = np.concatenate([np.asarray(r.get('latencies_ns', []), dtype=np.float64)
                          for r in results]) / 1e3
    received = [len(r.get('latencies_ns', [])) for r in results]
    cons_cpu = [r.get('cpu_per_frame_us') for r in results
                if r.get('cpu_per_frame_us') is not None]
    copies = [r.get('copies_per_frame') for r in results if r.get('copies_per_frame') is not None]
    polled = [r['polled'] for r in results if 'polled' in r]
    phases = [r['phases_us'] for r in results if r.get('phases_us')]
    return {
        'variant': variant, 'payload': payload, 'consumers': consumers,
        'p50_us': float(np.percentile(lat, 50)) if lat.size else float('nan'),
        'p99_us': float(np.percentile(lat, 99)) if lat.size else float('nan'),
        'delivered': sum(received) / (frames * consumers),
        'producer_cpu_us': prod_result.get('cpu_per_frame_us', float('nan')),
        'consumer_cpu_us': float(np.nanmean(cons_cpu)) if cons_cpu else float('nan'),
        'copies': float(np.mean(copies)) if copies else None,
        'polled': float(np.mean(polled)) if polled else 0.0,
        'phases_us': np.mean(phases, axis=0).tolist() if phases else None,
    }


def memcpy_floor_us(payload: str, repeats: int = 60) -> float:
    src, _ = payload_array(payload)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        np.copyto(dst, src)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times)) / 1e3


def wake_floor_us(frames: int = 90) -> tuple[float, float]:
    """p50/p99 of waking a blocked Python process through a pipe at RATE_HZ.

    The floor under any cross-process notification, iceoryx2's event included: what a halted
    virtual CPU and the scheduler cost before a consumer runs a line of its own.
    """
    to_child, from_parent = os.pipe()
    results_r, results_w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the sleeper
        os.close(from_parent)
        os.close(results_r)
        latencies = []
        os.write(results_w, b'R')   # ready
        for _ in range(frames):
            sent = int.from_bytes(os.read(to_child, 8), 'little')
            latencies.append(time.monotonic_ns() - sent)
        os.write(results_w, json.dumps(latencies).encode())
        os._exit(0)
    os.close(to_child)
    os.close(results_w)
    os.read(results_r, 1)   # the child is up (the first 10 wake-ups are not counted anyway)
    next_t = time.monotonic()
    for _ in range(frames):
        os.write(from_parent, time.monotonic_ns().to_bytes(8, 'little'))
        next_t += 1.0 / RATE_HZ
        time.sleep(max(0.0, next_t - time.monotonic()))
    chunks = []
    while chunk := os.read(results_r, 65536):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    os.close(from_parent)
    os.close(results_r)
    latencies = np.asarray(json.loads(b''.join(chunks)), dtype=np.float64)[10:] / 1e3
    return float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99))


def cleanup_shm() -> None:
    os.environ['EDGE_LOOP_IOX2_PREFIX'] = IOX2_PREFIX
    from edge_loop.transport import remove_stale_resources

    remove_stale_resources()
    for name in os.listdir('/dev/shm'):
        if name.startswith(IOX2_PREFIX) and name.endswith('global_mgmt'):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join('/dev/shm', name))


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None or not np.isfinite(value):
        return '-'
    return f'{value:,.{digits}f}'


# Copies of the payload on the rclpy path, read off the code path (not measured): fill
# Image.data, Python -> C message, CDR serialisation, deserialisation, C -> Python array.
ROS_COPIES = '>=4*'


def print_table(rows: list[dict], floors: dict[str, float]) -> None:
    header = (f'{"payload":<11} {"cons":>4} {"variant":<16} {"p50 us":>9} {"p99 us":>9} '
              f'{"x rel":>6} {"x tuned":>7} {"deliv":>6} {"prod CPU us/f":>13} '
              f'{"cons CPU us/f":>13} {"copies/f":>8} {"polled":>6}')
    print(header)
    print('-' * len(header))
    ref = {(r['payload'], r['consumers']): r['p50_us'] for r in rows
           if r['variant'] == 'ros_reliable'}
    tuned = {(r['payload'], r['consumers']): r['p50_us'] for r in rows
             if r['variant'] == 'ros_tuned'}
    last_key = None
    for r in rows:
        key = (r['payload'], r['consumers'])
        if last_key is not None and key != last_key:
            print()
        if key != last_key:
            print(f'{r["payload"]:<11} {r["consumers"]:>4} {"memcpy floor":<16} '
                  f'{fmt(floors[r["payload"]], 1):>9}')
        last_key = key
        speedup = ref.get(key, float('nan')) / r['p50_us'] if r['p50_us'] else float('nan')
        vs_tuned = tuned.get(key, float('nan')) / r['p50_us'] if r['p50_us'] else float('nan')
        copies = fmt(r['copies'], 2) if r['variant'].startswith('shm') else ROS_COPIES
        print(f'{r["payload"]:<11} {r["consumers"]:>4} {r["variant"]:<16} '
              f'{fmt(r["p50_us"]):>9} {fmt(r["p99_us"]):>9} {fmt(speedup, 1):>6} '
              f'{fmt(vs_tuned, 1):>7} '
              f'{r["delivered"] * 100:>5.0f}% {fmt(r["producer_cpu_us"]):>13} '
              f'{fmt(r["consumer_cpu_us"]):>13} {copies:>8} '
              f'{r.get("polled", 0.0) * 100:>5.0f}%')
    print('\nx rel / x tuned: p50 of plain rclpy reliable / of tuned rclpy over this p50.\n'
          'deliv: measured frames that reached the consumers.\n'
          'polled: frames the consumer found by polling near their predicted send (shm_poll).\n'
          'CPU: time.process_time per frame in each process (consumers averaged).\n'
          'copies/f: shm from the consumer copy audit; *rclpy: counted on the code path\n'
          '(fill Image.data, Python -> C, serialise, deserialise, C -> Python).')
    split = [r for r in rows if r.get('phases_us')]
    if split:
        print('\nshm latency by phase, median us: send -> reader thread awake (or the sample '
              'seen by polling), -> sample received, -> callback')
        for r in split:
            wake, receive, deliver = r['phases_us']
            print(f'{r["payload"]:<11} {r["consumers"]:>4} {r["variant"]:<16} '
                  f'{wake:>7.0f} {receive:>7.0f} {deliver:>7.0f}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true', help='2 payloads, fewer frames')
    parser.add_argument('--frames', type=int, default=None, help='measured frames per run')
    parser.add_argument('--payloads', default=None, help='comma-separated subset')
    parser.add_argument('--variants', default=','.join(VARIANTS))
    parser.add_argument('--consumer-counts', default='1,3')
    parser.add_argument('--json', type=Path, default=None, help='also write the rows here')
    parser.add_argument('--pin', action='store_true',
                        help='producer on CPU 0, consumers on the other CPUs (round robin): '
                             'a core of its own for a one-consumer polling reader')
    # process roles (internal)
    parser.add_argument('--role', choices=('producer', 'consumer'), default=None)
    parser.add_argument('--variant', default='shm')
    parser.add_argument('--payload', default='vga_rgb8')
    parser.add_argument('--consumers', type=int, default=1)
    parser.add_argument('--cpu', type=int, default=None)
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if args.role is not None:   # one process of a run: the data plane alone, or through rclpy
        core = args.variant in CORE_VARIANTS
        roles = {'producer': run_core_producer if core else run_producer,
                 'consumer': run_core_consumer if core else run_consumer}
        roles[args.role](args)
        return 0
    frames = args.frames or (60 if args.quick else 150)
    payloads = (args.payloads.split(',') if args.payloads
                else list(QUICK_PAYLOADS if args.quick else PAYLOADS))
    counts = [int(c) for c in args.consumer_counts.split(',')]
    variants = args.variants.split(',')
    unknown = sorted(set(variants) - set(VARIANTS) - set(CORE_VARIANTS))
    if unknown:
        parser.error(f'unknown variant(s) {unknown}; choose from {VARIANTS + CORE_VARIANTS}')
    floors = {p: memcpy_floor_us(p) for p in payloads}
    wake_p50, wake_p99 = wake_floor_us()
    rows = []
    domain = 150 + os.getpid() % 50
    t0 = time.monotonic()
    try:
        for payload in payloads:
            for consumers in counts:
                for variant in variants:
                    domain = 150 + (domain - 149) % 80
                    rows.append(run_config(variant, payload, consumers, frames, domain,
                                           args.pin))
                    r = rows[-1]
                    print(f'# {payload} x{consumers} {variant}: p50 {fmt(r["p50_us"])} us, '
                          f'delivered {r["delivered"] * 100:.0f}%', file=sys.stderr, flush=True)
    finally:
        cleanup_shm()
    print(f'\nedge_loop frame transport, {RATE_HZ:.0f} Hz, {frames} frames per run, separate '
          f'processes{", pinned (producer CPU 0)" if args.pin else ""} '
          f'({time.monotonic() - t0:.0f} s)\n')
    print(f'wake floor (a Python process blocked in read() on a pipe, woken at {RATE_HZ:.0f} '
          f'Hz): p50 {wake_p50:.0f} us, p99 {wake_p99:.0f} us\n')
    print_table(rows, floors)
    if args.json:
        args.json.write_text(json.dumps({'rows': rows, 'memcpy_us': floors,
                                         'wake_floor_us': [wake_p50, wake_p99]}, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
