# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""DDS content filters on rclpy subscriptions, used to sample a fast topic by its stamps.

A subscriber that needs only a regular sample of a 200+ Hz topic (the deadline monitor's
gripper watch) still pays the middleware's receive cost for every message: about 40 us of
Fast DDS receive thread per message here, 1.5% of a core at 200 Hz. Fast DDS evaluates a
content filter in the *writer* where it can, so samples that fail it are not even sent: the
deadline monitor's receive thread went from 1.9% to 0.6% of a core with the filter below.

Setting or removing a filter re-creates the DDS reader underneath. Do it before anything
waits on the subscription (an executor that was waiting on one was not woken for it again
here), and not while the topic is flowing in a running graph (the deadline monitor sets its
filters once, at configure).

:func:`stamp_sampling_expression` builds a DDS-SQL filter that passes the samples whose
``header.stamp`` falls in a window of ``window_ns`` at the start of every ``every_ns`` of each
second: a publisher whose sample period is at most ``window_ns`` then gets at least one sample
through per ``every_ns``, and the largest silence a healthy publisher leaves is
``every_ns + window_ns``.

:func:`set_content_filter` applies (or, with an empty expression, removes) a filter on an
existing subscription: through rclpy on Kilted and later (``Subscription.set_content_filter``);
rclpy 7 (Jazzy) wraps none of rcl's content-filter API, so there it calls
``rcl_subscription_set_content_filter`` on the subscription's rcl handle through ctypes.
Both return whether the middleware enabled the filter (an rmw without content filtering
keeps delivering every sample, which is correct, just not cheaper).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

NS_PER_S = 1_000_000_000
# Keeps the expression short (one OR term per window): at most 100 windows a second, i.e. a
# spacing of 10 ms or more, far finer than any use here.
MAX_WINDOWS = 100
RCL_RET_UNSUPPORTED = 3    # rcl/types.h: the rmw implements no content filter


def stamp_sampling_expression(every_ns: int, window_ns: int,
                              field: str = 'header.stamp.nanosec') -> str:
    """DDS-SQL expression passing stamps in ``[k * every_ns, k * every_ns + window_ns)``.

    ``every_ns`` must divide one second (so the windows are evenly spaced across the second
    boundary) into at most :data:`MAX_WINDOWS` windows, and ``0 < window_ns < every_ns``.
    """
    if every_ns <= 0 or NS_PER_S % every_ns:
        raise ValueError(f'sampling period {every_ns} ns does not divide one second')
    if NS_PER_S // every_ns > MAX_WINDOWS:
        raise ValueError(f'sampling period {every_ns} ns gives more than {MAX_WINDOWS} '
                         'windows a second')
    if not 0 < window_ns < every_ns:
        raise ValueError(f'window {window_ns} ns must be > 0 and shorter than the sampling '
                         f'period {every_ns} ns')
    return ' OR '.join(f'({field} >= {start} AND {field} < {start + window_ns})'
                       for start in range(0, NS_PER_S, every_ns))


def stamp_passes(stamp_nanosec: int, every_ns: int, window_ns: int) -> bool:
    """What :func:`stamp_sampling_expression` lets through, for one stamp (tests, docs)."""
    return stamp_nanosec % every_ns < window_ns


class _Rcl:
    """The few rcl content-filter functions, loaded once from the venv's or ROS's librcl."""

    _lib: Any = None

    @classmethod
    def lib(cls) -> Any:
        if cls._lib is None:
            lib = None
            for path in _librcl_candidates():
                try:
                    lib = ctypes.CDLL(path)
                    break
                except OSError:
                    continue
            if lib is None:
                raise OSError('librcl.so not found (looked next to this Python and on '
                              'LD_LIBRARY_PATH)')
            lib.rcl_subscription_content_filter_options_init.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                ctypes.c_void_p]
            lib.rcl_subscription_set_content_filter.argtypes = [ctypes.c_void_p,
                                                                ctypes.c_void_p]
            lib.rcl_subscription_content_filter_options_fini.argtypes = [ctypes.c_void_p,
                                                                         ctypes.c_void_p]
            lib.rcl_subscription_is_cft_enabled.argtypes = [ctypes.c_void_p]
            lib.rcl_subscription_is_cft_enabled.restype = ctypes.c_bool
            lib.rcutils_reset_error.argtypes = []
            cls._lib = lib
        return cls._lib


def _librcl_candidates() -> list[str]:
    paths = [os.path.join(sys.prefix, 'lib', 'librcl.so')]
    for directory in os.environ.get('LD_LIBRARY_PATH', '').split(os.pathsep):
        if directory:
            paths.append(os.path.join(directory, 'librcl.so'))
    return paths + ['librcl.so']


def set_content_filter(subscription: Any, expression: str) -> bool:
    """Filter ``subscription`` (an rclpy Subscription) by ``expression`` ('' removes it).

    Returns whether a content filter is in effect afterwards. Raises ``RuntimeError`` with
    rcl's error code when rcl rejects the expression.
    """
    if hasattr(subscription, 'set_content_filter'):      # rclpy >= 9 (Kilted)
        subscription.set_content_filter(expression, [])
        return bool(subscription.is_cft_enabled)
    lib = _Rcl.lib()
    handle = ctypes.c_void_p(subscription.handle.pointer)
    # rcl_subscription_content_filter_options_t: a char* and an rcutils_string_array_t
    # (size, data, allocator of five pointers), 64 bytes; zero is its initialised state.
    options = ctypes.create_string_buffer(256)
    code = lib.rcl_subscription_content_filter_options_init(
        handle, expression.encode(), 0, None, options)
    if code != 0:
        lib.rcutils_reset_error()
        raise RuntimeError(f'rcl_subscription_content_filter_options_init failed ({code})')
    try:
        code = lib.rcl_subscription_set_content_filter(handle, options)
    finally:
        lib.rcl_subscription_content_filter_options_fini(handle, options)
    if code == RCL_RET_UNSUPPORTED:
        lib.rcutils_reset_error()
        return False
    if code != 0:
        lib.rcutils_reset_error()
        raise RuntimeError(f'rcl_subscription_set_content_filter failed ({code}) for '
                           f'{expression[:80]!r}')
    return bool(lib.rcl_subscription_is_cft_enabled(handle))
