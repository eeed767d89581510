# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Frame channels over iceoryx2 shared memory (no rclpy import).

One publish-subscribe service per channel carries ``Slice[u64]`` samples (8-byte aligned; an
explicit ``payload_alignment`` would multiply every element's size by it) with a
:class:`~edge_loop.transport.header.FrameHeader` user header; an event service of the same
name wakes the consumers. Each process has one iceoryx2 node, shared by its channels and
deleted with the last of them, so ``close()`` leaves ``/dev/shm`` as it was.

Service settings (identical in every process, or opening fails):

- subscriber buffer 1 with safe overflow: a new frame replaces one the consumer has not taken
  yet (drop-oldest); the producer never blocks and a dead consumer cannot stall it;
- a subscriber borrows at most :data:`MAX_BORROWED` samples (the frame in the callback plus one
  handed off); a frame is released when the last consumer drops it;
- the publisher's pool is sized by iceoryx2 for every subscriber's buffer and borrows, so a
  SIGKILLed consumer only parks its own samples until its node is cleaned up.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import secrets
import select
import struct
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from edge_loop.transport.header import (
    MAGIC,
    PLANE_ALIGN,
    VERSION,
    FrameHeader,
    PlaneDesc,
    align_up,
    plane_geometry,
    plane_layout,
    set_plane,
)
from edge_loop.transport.poll import ArrivalPredictor

MAX_SUBSCRIBERS = 8
MAX_PUBLISHERS = 2          # a restarted producer may overlap its dead predecessor briefly
MAX_NODES = 24
MAX_BORROWED = 2
MAX_LOANS = 2
WAKE_PERIOD_S = 1.0         # safety net: close() wakes the reader thread itself
BYTES_PER_PIXEL = 8         # colour (<= 4 channels of uint8) + depth (<= 4 bytes)
# Opt-in SCHED_FIFO priority (1..99) of the reader threads: on a loaded machine the woken
# consumer then runs before best-effort work; needs CAP_SYS_NICE (ignored without it).
RT_PRIORITY_ENV = 'EDGE_LOOP_SHM_RT_PRIORITY'
# Opt-in hybrid polling window in microseconds (0 = off): the reader thread sleeps until this
# long before the next frame is due, then polls for it until this long after (see poll.py).
POLL_US_ENV = 'EDGE_LOOP_SHM_POLL_US'
MAX_POLL_US = 5000
TIMED_WAIT_SLACK_NS = 10_000_000
# Prefix of every iceoryx2 file (default 'iox2_'); tests use their own to stay apart.
PREFIX_ENV = 'EDGE_LOOP_IOX2_PREFIX'

try:  # iceoryx2 is optional: without it the transport falls back to ROS topics.
    import iceoryx2 as iox
    _IMPORT_ERROR: Exception | None = None
except Exception as exc:  # noqa: BLE001 - any import problem means "no shared memory"
    iox = None
    _IMPORT_ERROR = exc


class ShmUnavailableError(RuntimeError):
    """iceoryx2 cannot be used here (not installed, no /dev/shm, incompatible service)."""


def available() -> tuple[bool, str]:
    """(True, '') when iceoryx2 shared memory can be used, else (False, why)."""
    if iox is None:
        return False, f'iceoryx2 not importable: {_IMPORT_ERROR}'
    if not os.access('/dev/shm', os.W_OK):
        return False, '/dev/shm is not writable'
    return True, ''


def _config() -> Any:
    iox.set_log_level_from_env_or(iox.LogLevel.Error)   # not 'No config file was loaded'
    cfg = iox.config.global_config()
    prefix = os.environ.get(PREFIX_ENV)
    if prefix:
        cfg.global_cfg.prefix = iox.FileName.new(prefix)
    return cfg


# --- one iceoryx2 node per process -----------------------------------------------------------
_node_lock = threading.Lock()
_node: Any = None
_node_users = 0
_open_channels: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close channels a process forgot to close, so that its node's files go with it."""
    for channel in list(_open_channels):
        with contextlib.suppress(Exception):
            channel.close()


def _acquire_node() -> Any:
    global _node, _node_users
    ok, why = available()
    if not ok:
        raise ShmUnavailableError(why)
    with _node_lock:
        if _node is None:
            remove_stale_resources()
            name = iox.NodeName.new(f'edge_loop_{os.getpid()}')
            # Signal handling stays with rclpy (Ctrl-C must reach its executor).
            _node = (iox.NodeBuilder.new().name(name).config(_config())
                     .signal_handling_mode(iox.SignalHandlingMode.Disabled)
                     .create(iox.ServiceType.Ipc))
        _node_users += 1
        return _node


def _release_node() -> None:
    global _node, _node_users
    with _node_lock:
        _node_users -= 1
        if _node_users <= 0 and _node is not None:
            _node = None   # dropping the last reference removes the node's resources
            _node_users = 0


def remove_stale_resources() -> int:
    """Remove the shared-memory resources of dead iceoryx2 nodes; returns how many."""
    if iox is None:
        return 0
    removed = 0
    try:
        states = iox.Node.list(iox.ServiceType.Ipc, _config())
    except Exception:  # noqa: BLE001 - listing is best effort
        return 0
    for state in states:
        if isinstance(state, iox.NodeState.Dead):
            with contextlib.suppress(Exception):
                state[0].try_remove_stale_resources()
                removed += 1
    return removed


def _open_services(node: Any, channel: str) -> tuple[Any, Any]:
    name = iox.ServiceName.new(channel)
    pubsub = (node.service_builder(name)
              .publish_subscribe(iox.Slice[ctypes.c_uint64])
              .user_header(FrameHeader)
              .max_publishers(MAX_PUBLISHERS)
              .max_subscribers(MAX_SUBSCRIBERS)
              .max_nodes(MAX_NODES)
              .history_size(0)
              .subscriber_max_buffer_size(1)
              .subscriber_max_borrowed_samples(MAX_BORROWED)
              .enable_safe_overflow(True)
              .open_or_create())
    event = (node.service_builder(name).event()
             .max_notifiers(MAX_PUBLISHERS + 2)
             .max_listeners(MAX_SUBSCRIBERS)
             .max_nodes(MAX_NODES)
             .open_or_create())
    return pubsub, event


def _words(nbytes: int) -> int:
    """Slice length in u64 words for ``nbytes`` (u64 elements give 8-byte aligned samples)."""
    return max(1, (nbytes + 7) // 8)


class _SampleMemory:
    """numpy's view of one plane of a sample: keeps the sample borrowed while viewed."""

    __slots__ = ('__array_interface__', 'sample')

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str, readonly: bool,
                 sample: Any) -> None:
        self.__array_interface__ = {'data': (ptr, readonly), 'shape': shape,
                                    'typestr': typestr, 'version': 3}
        self.sample = sample


def _view(ptr: int, shape: tuple[int, ...], dtype: np.dtype, readonly: bool,
          sample: Any) -> np.ndarray:
    """An ndarray on shared memory at ``ptr``; read-only ones cannot be made writeable."""
    return np.asarray(_SampleMemory(ptr, shape, dtype.str, readonly, sample))


class ShmLoan:
    """A loaned, uninitialised sample with writable views on its planes."""

    def __init__(self, publisher: ShmPublisher, sample: Any, color: np.ndarray | None,
                 depth: np.ndarray | None) -> None:
        self._publisher = publisher
        self._sample = sample
        self.color = color
        self.depth = depth
        self.header = FrameHeader.from_address(sample.user_header_ptr)

    def send(self, yield_cpu: bool = True) -> int:
        """Publish the sample; returns the send time (CLOCK_MONOTONIC ns).

        ``yield_cpu=False`` skips the yield below (an A/B of the yield; docs/decisions/0002).
        """
        sample, self._sample = self._sample, None
        if sample is None:
            raise RuntimeError('loan already sent or released')
        send_ns = time.monotonic_ns()
        self.header.send_ns = send_ns
        sample.assume_init().send()
        self._publisher.notify()
        # The kernel wakes a consumer on the notifying CPU (99% of frames here), where it then
        # waits for whatever this process does next (the ROS announcement, the next physics
        # step). Give it the CPU now: behind 150 us of producer work a consumer's p50 went
        # 382 -> 223 us, behind 1 ms its p90 1263 -> 245 us (docs/decisions/0002).
        if yield_cpu:
            os.sched_yield()
        return send_ns

    def release(self) -> None:
        """Give an unsent loan back."""
        sample, self._sample = self._sample, None
        if sample is not None:
            with contextlib.suppress(Exception):
                sample.delete()


class ShmPublisher:
    """Producer side of a frame channel."""

    def __init__(self, channel: str, max_width: int, max_height: int) -> None:
        self.channel = channel
        self.max_bytes = align_up(max_width * max_height * BYTES_PER_PIXEL) + 2 * 64
        self.writer_id = secrets.randbits(63) or 1
        self.seq = 0
        self._node = _acquire_node()
        try:
            self._pubsub, self._event = _open_services(self._node, channel)
            self._publisher = (self._pubsub.publisher_builder()
                               .initial_max_slice_len(_words(self.max_bytes))
                               .allocation_strategy(iox.AllocationStrategy.Static)
                               .max_loaned_samples(MAX_LOANS)
                               .create())
            self._notifier = self._event.notifier_builder().create()
        except Exception as exc:
            self._drop_ports()
            _release_node()
            raise ShmUnavailableError(f'cannot open iceoryx2 channel {channel!r}: {exc}') from exc
        self._closed = False
        _open_channels.add(self)

    def loan(self, color_shape: tuple[int, ...] | None, color_encoding: str | None,
             depth_shape: tuple[int, ...] | None, depth_encoding: str | None) -> ShmLoan:
        """Loan a sample for one frame and return writable views on its planes."""
        c_dtype, c_bytes = plane_geometry(color_shape, color_encoding)
        d_dtype, d_bytes = plane_geometry(depth_shape, depth_encoding)
        d_offset = align_up(c_bytes)
        total = max(d_offset + d_bytes, 1)
        if total > self.max_bytes:
            raise ValueError(f'frame of {total} bytes exceeds the channel maximum of '
                             f'{self.max_bytes} (raise max_width/max_height)')
        try:
            sample = self._publisher.loan_slice_uninit(_words(total))
        except Exception:  # noqa: BLE001 - e.g. samples parked by dead consumers
            remove_stale_resources()
            sample = self._publisher.loan_slice_uninit(_words(total))
        ptr = sample.payload_ptr
        color = (_view(ptr, tuple(color_shape), c_dtype, False, sample) if color_shape
                 else None)
        depth = (_view(ptr + d_offset, tuple(depth_shape), d_dtype, False, sample)
                 if depth_shape else None)
        loan = ShmLoan(self, sample, color, depth)
        h = loan.header
        h.magic, h.version, h.writer_id = MAGIC, VERSION, self.writer_id
        set_plane(h.color, 0, color_shape, color_encoding, c_bytes)
        set_plane(h.depth, d_offset, depth_shape, depth_encoding, d_bytes)
        h.n_stages = 0
        h.has_info = 0
        return loan

    def next_seq(self) -> int:
        """Sequence number for the next frame (1, 2, ...)."""
        self.seq += 1
        return self.seq

    def notify(self) -> None:
        """Wake every consumer."""
        with contextlib.suppress(Exception):
            self._notifier.notify()

    def _drop_ports(self) -> None:
        for attr in ('_notifier', '_publisher'):
            port = getattr(self, attr, None)
            if port is not None:
                with contextlib.suppress(Exception):
                    port.delete()
                setattr(self, attr, None)
        self._pubsub = self._event = self._node = None

    def close(self) -> None:
        """Delete the ports; the node goes with the last channel of the process."""
        if getattr(self, '_closed', True):
            return
        self._closed = True
        self._drop_ports()
        _release_node()


class ShmSubscriber:
    """Consumer side of a frame channel: a thread wakes on the event and hands samples on.

    ``on_sample(sample, receive_ns)`` gets the newest iceoryx2 sample (see :meth:`decode`); it
    runs in the subscriber's thread.
    """

    def __init__(self, channel: str, on_sample: Callable[[Any, int], None],
                 on_error: Callable[[str], None] | None = None) -> None:
        self.channel = channel
        self._on_sample = on_sample
        self._on_error = on_error or (lambda msg: None)
        self.borrow_limit_hits = 0
        self.wake_ns = 0
        self.polled = 0        # frames found by polling (no wake-up)
        self.poll_misses = 0   # polling windows that ended without a frame
        self.views = PlaneViewCache()
        self._node = _acquire_node()
        try:
            self._pubsub, self._event = _open_services(self._node, channel)
            self._subscriber = self._pubsub.subscriber_builder().buffer_size(1).create()
            self._listener = self._event.listener_builder().create()
        except Exception as exc:
            self._drop_ports()
            _release_node()
            raise ShmUnavailableError(f'cannot open iceoryx2 channel {channel!r}: {exc}') from exc
        self._stop = threading.Event()
        self._closed = False
        _open_channels.add(self)
        self._thread = threading.Thread(target=self._run, name=f'shm:{channel}', daemon=True)
        self._thread.start()

    def decode(self, sample: Any) -> tuple[SampleInfo, np.ndarray | None, np.ndarray | None]:
        """:func:`decode` with this subscriber's lent views; call it from ``on_sample``."""
        return decode(sample, self.views)

    def _receive(self) -> Any:
        try:
            return self._subscriber.receive()
        except Exception:  # noqa: BLE001 - too many borrowed: maybe only by idle lent views
            if not self.views.give_back_idle():
                raise
            return self._subscriber.receive()

    def _set_priority(self) -> None:
        try:
            priority = int(os.environ.get(RT_PRIORITY_ENV, '0'))
        except ValueError:
            priority = 0
        if priority > 0:
            try:   # this thread only (Linux schedules threads)
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(min(priority, 99)))
            except (OSError, AttributeError) as exc:
                self._on_error(f'{RT_PRIORITY_ENV}={priority} not applied: {exc}')

    def _poll_window_ns(self) -> int:
        text = os.environ.get(POLL_US_ENV, '0')
        try:
            window_us = int(text)
        except ValueError:
            window_us = -1
        if not 0 <= window_us <= MAX_POLL_US:
            self._on_error(f'{POLL_US_ENV}={text!r} is not an integer in 0..{MAX_POLL_US}: '
                           'polling off')
            window_us = 0
        return window_us * 1000

    def _wait_for_sample(self, predictor: ArrivalPredictor | None, window_ns: int,
                         wake: Any) -> None:
        """Return when a sample may be there: polled near its predicted send, else woken."""
        if predictor is not None:
            due = predictor.next_send_ns(time.monotonic_ns(), window_ns)
            if due is not None:
                # Listener.timed_wait overshoots its timeout by 4-7 ms here (iceoryx2 0.10):
                # wait on the event for the bulk of the time, so an early frame or close()
                # still wakes us, and sleep the rest with the OS timer (~0.1-0.2 ms late).
                coarse_ns = due - window_ns - TIMED_WAIT_SLACK_NS - time.monotonic_ns()
                if coarse_ns > 0 and self._listener.timed_wait(iox.Duration.from_nanos(coarse_ns)):
                    return
                fine_ns = due - window_ns - time.monotonic_ns()
                if fine_ns > 0:
                    time.sleep(fine_ns / 1e9)
                end_ns = due + window_ns
                has_samples = self._subscriber.has_samples
                while not self._stop.is_set():
                    if has_samples():
                        self._listener.try_wait()   # its notification: consumed here
                        self.polled += 1
                        return
                    if time.monotonic_ns() >= end_ns:
                        break
                    # Lets this process's other threads take the GIL without giving the CPU
                    # away: sched_yield() handed it to any runnable task for a whole time slice
                    # (polled frames were seen ~1.2 ms late next to a busy process).
                    select.select([], [], [], 0)
                self.poll_misses += 1
                predictor.miss()
        self._listener.timed_wait(wake)

    def _run(self) -> None:
        self._set_priority()
        wake = iox.Duration.from_secs_f64(WAKE_PERIOD_S)
        window_ns = self._poll_window_ns()
        predictor = ArrivalPredictor() if window_ns else None
        while not self._stop.is_set():
            try:
                self._wait_for_sample(predictor, window_ns, wake)
            except Exception as exc:  # noqa: BLE001 - interrupted wait: just look again
                self._on_error(f'listener wait failed: {exc}')
                time.sleep(0.01)
            self.wake_ns = time.monotonic_ns()
            if self._stop.is_set():
                break
            # The buffer holds one sample, the newest (safe overflow replaced older ones):
            # one receive per wake-up is enough.
            try:
                latest = self._receive()
            except Exception as exc:  # noqa: BLE001 - e.g. too many borrowed samples
                self.borrow_limit_hits += 1
                self._on_error(f'receive failed ({exc}): the consumer still holds '
                               f'{MAX_BORROWED} frames; copy what you keep, drop the frame')
                continue
            if latest is None:
                continue
            receive_ns = time.monotonic_ns()
            if predictor is not None:
                header = FrameHeader.from_address(latest.user_header_ptr)
                if header.magic == MAGIC:
                    predictor.observe(header.send_ns)
                del header
            try:
                sample, latest = latest, None
                self._on_sample(sample, receive_ns)
                del sample   # released here unless the consumer kept a view on it
            except Exception as exc:  # noqa: BLE001 - a bad frame must not kill the thread
                self._on_error(f'frame handling failed: {type(exc).__name__}: {exc}')
            # After the callback, off the latency path: samples whose views nobody holds now.
            self.views.give_back_idle()

    def _drop_ports(self) -> None:
        for attr in ('_listener', '_subscriber'):
            port = getattr(self, attr, None)
            if port is not None:
                with contextlib.suppress(Exception):
                    port.delete()
                setattr(self, attr, None)
        self._pubsub = self._event = self._node = None

    def close(self) -> None:
        """Stop the thread and delete the ports."""
        if getattr(self, '_closed', True):
            return
        self._closed = True
        self._stop.set()
        with contextlib.suppress(Exception):   # wake our thread now (others just look again)
            notifier = self._event.notifier_builder().create()
            notifier.notify()
            notifier.delete()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self.views.clear()
        self._drop_ports()
        _release_node()


# The header's fixed part (ids, stamps, frame id, both plane descriptors) in one unpack: a
# ctypes field read costs as much as a whole unpack once the caches are cold.
_FIXED = struct.Struct('=IIQQiIq64s' + 'QQII16s' * 2)
_FixedBytes = ctypes.c_char * _FIXED.size
if (_FIXED.size != FrameHeader.depth.offset + ctypes.sizeof(PlaneDesc)
        or FrameHeader.color.offset != _FIXED.size - 2 * ctypes.sizeof(PlaneDesc)):
    raise ImportError('FrameHeader layout and its struct format disagree')
_CACHE_LIMIT = 64


class SampleInfo(NamedTuple):
    """What :func:`decode` reads from a sample's header (the rest stays in the header)."""

    writer_id: int
    seq: int
    stamp_sec: int
    stamp_nanosec: int
    send_ns: int
    frame_id: str
    color_encoding: str
    depth_encoding: str


class _Layout(NamedTuple):
    color: tuple[int, tuple[int, ...], np.dtype] | None   # (offset, shape, dtype)
    depth: tuple[int, tuple[int, ...], np.dtype] | None
    end: int
    color_encoding: str
    depth_encoding: str


_layouts: dict[tuple, _Layout] = {}
_frame_ids: dict[bytes, str] = {}


def _c_string(raw: bytes) -> str:
    return raw.split(b'\0', 1)[0].decode(errors='replace')


def _plane(offset: int, nbytes: int, height: int, width: int,
           encoding: str) -> tuple[int, tuple[int, ...], np.dtype] | None:
    geo = plane_layout(nbytes, height, width, encoding)
    if geo is None:
        return None
    if offset % PLANE_ALIGN:
        raise ValueError(f'plane offset {offset} is not {PLANE_ALIGN}-byte aligned')
    return offset, geo[0], geo[1]


def _layout(planes: tuple) -> _Layout:
    """Where both planes lie, from the header's two plane descriptors (cached by their value)."""
    layout = _layouts.get(planes)
    if layout is None:
        c_enc, d_enc = _c_string(planes[4]), _c_string(planes[9])
        color, depth = _plane(*planes[:4], c_enc), _plane(*planes[5:9], d_enc)
        end = max(planes[0] + planes[1] if color else 0, planes[5] + planes[6] if depth else 0)
        layout = _Layout(color, depth, end, c_enc if color else '', d_enc if depth else '')
        if len(_layouts) >= _CACHE_LIMIT:
            _layouts.clear()
        _layouts[planes] = layout
    return layout


def _make_views(sample: Any, layout: _Layout) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Read-only views of a sample's planes, each based on a holder of the sample."""
    ptr = sample.payload_ptr
    return tuple(None if geo is None else
                 _view(ptr + geo[0], geo[1], geo[2], True, sample)
                 for geo in (layout.color, layout.depth))


class _LentViews:
    """The read-only plane views of one sample slot, lent to each frame received in it.

    Each view's base is a :class:`_SampleMemory` that holds the sample now in the slot; every
    view a consumer derives (a slice, a transpose, a memoryview) references the plane view.
    So when the views' and holders' reference counts are back to what this object itself
    holds, nobody can still see the memory and the sample can go back to the producer.
    """

    __slots__ = ('views', '_holders', '_tracked', '_baseline')

    def __init__(self, sample: Any, layout: _Layout) -> None:
        self.views = _make_views(sample, layout)
        self._holders = tuple(v.base for v in self.views if v is not None)
        self._tracked = self._holders + tuple(v for v in self.views if v is not None)
        self._baseline = self._refcounts()

    def _refcounts(self) -> tuple[int, ...]:
        return tuple(sys.getrefcount(obj) for obj in self._tracked)

    @property
    def lent(self) -> bool:
        return self._holders[0].sample is not None

    def lend(self, sample: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
        for holder in self._holders:
            holder.sample = sample
        return self.views

    def give_back_if_unused(self) -> bool:
        """Drop the sample when no view of it is referenced outside this object."""
        if self._refcounts() != self._baseline:
            return False
        for holder in self._holders:
            holder.sample = None
        return True


class PlaneViewCache:
    """Plane views made once per sample slot and lent to every frame received in that slot.

    Making two numpy views costs ~40 us a frame in a reader thread whose caches went cold in
    the 33 ms since the last frame; looking them up costs a few. The producer's pool has a
    fixed set of slots, so a subscriber sees the same few payload addresses over and over.
    A slot's views are lent out again only after :meth:`give_back_idle` found that nobody
    references them any more, so the frame contract holds: a frame, or any view on it, keeps
    its sample borrowed. Used by one reader thread only.
    """

    def __init__(self) -> None:
        self._slots: dict[tuple[int, tuple], _LentViews] = {}
        self._lent: list[_LentViews] = []
        self.hits = 0
        self.misses = 0

    def views(self, sample: Any, planes: tuple,
              layout: _Layout) -> tuple[np.ndarray | None, np.ndarray | None]:
        if layout.color is None and layout.depth is None:
            return None, None
        key = (sample.payload_ptr, planes)
        slot = self._slots.get(key)
        if slot is not None and not slot.lent:
            self.hits += 1
        else:
            self.misses += 1
            if slot is not None:   # still in use: cannot happen while iceoryx2 holds the slot
                return _make_views(sample, layout)
            if len(self._slots) >= _CACHE_LIMIT:
                self._slots = {k: v for k, v in self._slots.items() if v.lent}
                if len(self._slots) >= _CACHE_LIMIT:
                    return _make_views(sample, layout)
            slot = self._slots[key] = _LentViews(sample, layout)
        self._lent.append(slot)
        return slot.lend(sample)

    @property
    def in_use(self) -> int:
        """Slots whose views were lent and not yet found unreferenced."""
        return len(self._lent)

    def give_back_idle(self) -> int:
        """Release the samples of lent views nobody references any more; returns how many."""
        still = [slot for slot in self._lent if not slot.give_back_if_unused()]
        released = len(self._lent) - len(still)
        self._lent = still
        return released

    def clear(self) -> None:
        """Forget every slot (its views stay valid for whoever still holds them)."""
        self.give_back_idle()
        self._slots.clear()
        self._lent.clear()


def decode(sample: Any, cache: PlaneViewCache | None = None,
           ) -> tuple[SampleInfo, np.ndarray | None, np.ndarray | None]:
    """(header fields, colour, depth) of a received sample; the planes are read-only views.

    With a ``cache`` (a subscriber's :attr:`ShmSubscriber.views`) the views of the sample's
    slot are lent instead of made; without one they are made for this sample.
    """
    fields = _FIXED.unpack_from(_FixedBytes.from_address(sample.user_header_ptr))
    if fields[0] != MAGIC or fields[1] != VERSION:
        raise ValueError(f'sample header magic/version {fields[0]:#x}/{fields[1]} '
                         f'is not edge_loop frame v{VERSION}')
    planes = fields[8:18]
    layout = _layout(planes)
    if layout.end > 8 * sample.header.number_of_elements:
        raise ValueError(f'planes end at byte {layout.end}, the sample has '
                         f'{8 * sample.header.number_of_elements}')
    if cache is not None:
        color, depth = cache.views(sample, planes, layout)
    else:
        color, depth = _make_views(sample, layout)
    frame_id = _frame_ids.get(fields[7])
    if frame_id is None:
        if len(_frame_ids) >= _CACHE_LIMIT:
            _frame_ids.clear()
        frame_id = _frame_ids[fields[7]] = _c_string(fields[7])
    info = SampleInfo(fields[2], fields[3], fields[4], fields[5], fields[6], frame_id,
                      layout.color_encoding, layout.depth_encoding)
    return info, color, depth
