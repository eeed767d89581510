# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lent plane views: a slot's views are reused only when nobody can still see the sample."""

import time
import types

import numpy as np
import pytest

from edge_loop.transport import shm as shm_mod

SHAPE = (6, 8, 3)


def _planes(color_shape=SHAPE, depth_shape=(6, 8)) -> tuple:
    """The header's two plane descriptors as decode() unpacks them."""
    c_bytes = int(np.prod(color_shape))
    d_off = shm_mod.align_up(c_bytes)
    return (0, c_bytes, color_shape[0], color_shape[1], b'rgb8',
            d_off, 2 * int(np.prod(depth_shape)), depth_shape[0], depth_shape[1], b'16UC1')


@pytest.fixture
def slot():
    """A fake sample over a numpy buffer (the slot's memory) and a fresh cache."""
    memory = np.zeros(4096, np.uint8)
    sample = types.SimpleNamespace(payload_ptr=memory.ctypes.data)
    planes = _planes()
    return memory, sample, planes, shm_mod._layout(planes), shm_mod.PlaneViewCache()


def test_views_are_read_only_and_on_the_slot(slot):
    memory, sample, planes, layout, cache = slot
    color, depth = cache.views(sample, planes, layout)
    assert color.shape == SHAPE and color.dtype == np.uint8
    assert depth.shape == (6, 8) and depth.dtype == np.uint16
    assert np.shares_memory(color, memory) and np.shares_memory(depth, memory)
    with pytest.raises(ValueError):
        color.flags.writeable = True
    memory[:SHAPE[0] * SHAPE[1] * 3] = 7
    assert (color == 7).all()


@pytest.mark.parametrize('keep', [
    lambda c, d: c,                     # the view itself
    lambda c, d: c[2:, ::2],            # a slice
    lambda c, d: d.T,                   # a transpose of the other plane
    lambda c, d: memoryview(c),         # a buffer export
    lambda c, d: np.asarray(d),         # the same object again
    lambda c, d: c.base,                # the holder, which holds the sample
])
def test_any_reference_keeps_the_sample_lent(slot, keep):
    _, sample, planes, layout, cache = slot
    views = cache.views(sample, planes, layout)
    lent_ids = [id(v) for v in views]   # the slot keeps them alive: the ids stay theirs
    kept = keep(*views)
    del views
    assert cache.give_back_idle() == 0 and cache.in_use == 1
    # The slot is still lent: a new sample there gets views of its own, not these.
    other = cache.views(sample, planes, layout)
    assert [id(v) for v in other] != lent_ids and cache.misses == 2
    del kept, other
    assert cache.give_back_idle() == 1 and cache.in_use == 0


def test_unreferenced_views_are_lent_again_and_let_the_sample_go(slot):
    _, sample, planes, layout, cache = slot
    first = cache.views(sample, planes, layout)
    ids = tuple(id(v) for v in first)
    del first
    assert cache.give_back_idle() == 1
    assert all(h.sample is None for h in cache._slots[(sample.payload_ptr, planes)]._holders)
    again = cache.views(sample, planes, layout)
    assert tuple(id(v) for v in again) == ids and cache.hits == 1 and cache.misses == 1


def test_another_layout_in_the_same_slot_gets_its_own_views(slot):
    _, sample, planes, layout, cache = slot
    small = _planes((4, 4, 3), (4, 4))
    a = cache.views(sample, planes, layout)
    b = cache.views(sample, small, shm_mod._layout(small))
    assert a[0].shape == SHAPE and b[0].shape == (4, 4, 3) and cache.misses == 2


def test_a_frame_without_planes_has_no_views(slot):
    _, sample, _, _, cache = slot
    empty = (0, 0, 0, 0, b'', 0, 0, 0, 0, b'')
    assert cache.views(sample, empty, shm_mod._layout(empty)) == (None, None)
    assert cache.in_use == 0


@pytest.mark.parametrize('planes, why', [
    ((0, 100, 6, 8, b'rgb8', 0, 0, 0, 0, b''), 'does not match'),
    ((8, 144, 6, 8, b'rgb8', 0, 0, 0, 0, b''), 'aligned'),
    ((0, 144, 6, 8, b'bgr9', 0, 0, 0, 0, b''), 'unsupported encoding'),
])
def test_bad_plane_descriptors_are_refused(planes, why):
    with pytest.raises(ValueError, match=why):
        shm_mod._layout(planes)


def test_a_kept_frame_stays_intact_while_the_channel_goes_on(shm):
    """Real iceoryx2 channel in one process: lent views under a consumer that keeps one."""
    frames: list[int] = []
    kept: list[np.ndarray] = []
    errors: list[str] = []
    holder: dict = {}

    def on_sample(sample, receive_ns):
        info, color, depth = holder['sub'].decode(sample)
        assert info.frame_id == 'cam' and info.color_encoding == 'rgb8'
        assert (color == color[0, 0, 0]).all() and (depth == info.seq).all()
        frames.append(info.seq)
        if info.seq == 3:
            kept.append(color[1:])   # a slice of frame 3, kept past its callback

    holder['sub'] = sub = shm.ShmSubscriber('lent/test', on_sample, errors.append)
    pub = shm.ShmPublisher('lent/test', 64, 48)

    def send(seq: int) -> int:   # one frame every 10 ms, every pixel = its sequence number
        loan = pub.loan(SHAPE, 'rgb8', (6, 8), '16UC1')
        loan.header.seq, loan.header.stamp_sec = seq, seq
        loan.header.frame_id = b'cam'
        loan.color[...] = seq % 256
        loan.depth[...] = seq
        loan.send()
        time.sleep(0.01)
        return seq

    try:
        seq = 0
        deadline = time.monotonic() + 10.0
        while len(frames) < 30 and time.monotonic() < deadline:
            seq = send(seq + 1)
        assert len(frames) >= 30 and 3 in frames, frames
        assert errors == []
        # Frame 3's memory was never handed back to the producer: still its bytes.
        assert kept and (kept[0] == 3).all()
        assert sub.views.hits > 0, 'no slot was ever lent again'
        assert sub.views.in_use <= 2
        # Let frame 3 go: the reader gives it back after its next callback.
        kept.clear()
        seen = len(frames)
        deadline = time.monotonic() + 10.0
        while (len(frames) == seen or sub.views.in_use) and time.monotonic() < deadline:
            seq = send(seq + 1)
        assert sub.views.in_use == 0, 'frame 3 was not given back after it was dropped'
        assert errors == []
    finally:
        sub.close()
        pub.close()
