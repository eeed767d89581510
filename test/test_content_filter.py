# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The stamp-sampling expression: what it lets through and what it refuses to build."""

import re

import pytest

from edge_loop.content_filter import NS_PER_S, stamp_passes, stamp_sampling_expression

MS = 1_000_000


def _evaluate(expression: str, nanosec: int) -> bool:
    """Evaluate the generated DDS-SQL subset (OR of closed-open ranges) for one stamp."""
    ranges = re.findall(r'\(header\.stamp\.nanosec >= (\d+) AND header\.stamp\.nanosec < (\d+)\)',
                        expression)
    assert ' OR '.join(f'(header.stamp.nanosec >= {a} AND header.stamp.nanosec < {b})'
                       for a, b in ranges) == expression
    return any(int(a) <= nanosec < int(b) for a, b in ranges)


@pytest.mark.parametrize('every_ms, window_ms', [(40, 10), (50, 5), (100, 20), (1000, 1)])
def test_windows_start_every_period_and_span_the_window(every_ms, window_ms):
    expression = stamp_sampling_expression(every_ms * MS, window_ms * MS)
    assert expression.count(' OR ') == 1000 // every_ms - 1
    for nanosec in range(0, NS_PER_S, MS // 4):
        assert _evaluate(expression, nanosec) == stamp_passes(nanosec, every_ms * MS,
                                                              window_ms * MS)


def test_a_publisher_no_slower_than_the_window_gets_one_sample_through_each_period():
    every, window = 40 * MS, 10 * MS
    for period in (window, 7 * MS, 4_166_667):      # 100, 143 and 240 Hz
        for phase in range(0, period, period // 7):
            stamps = range(phase, 3 * NS_PER_S, period)
            passed = [t for t in stamps if stamp_passes(t % NS_PER_S, every, window)]
            gaps = [b - a for a, b in zip(passed, passed[1:])]
            assert max(gaps) <= every + window


@pytest.mark.parametrize('every_ns, window_ns, message', [
    (30 * MS, 10 * MS, 'does not divide one second'),
    (0, 1, 'does not divide one second'),
    (5 * MS, 1 * MS, 'more than 100 windows'),
    (40 * MS, 40 * MS, 'shorter than the sampling period'),
    (40 * MS, 0, 'must be > 0'),
])
def test_bad_sampling_is_refused(every_ns, window_ns, message):
    with pytest.raises(ValueError, match=message):
        stamp_sampling_expression(every_ns, window_ns)
