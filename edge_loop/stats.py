# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Small statistics shared by the demo, the benchmarks and the regression tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (0, 0 for no trials)."""
    if trials <= 0:
        return 0.0, 0.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 99)) -> list[float]:
    """Percentiles of ``values`` (NaN for none)."""
    if len(values) == 0:
        return [float('nan')] * len(qs)
    return [float(v) for v in np.percentile(np.asarray(values, dtype=np.float64), qs)]


def percentile_of_sorted(values: Sequence[float], q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear method) for values already sorted.

    For a window that is sorted once and asked for several percentiles: ``np.percentile``
    costs ~50 us a call on a 300-sample window here, this a few. NaN for no values.
    """
    if not values:
        return float('nan')
    index = q / 100.0 * (len(values) - 1)
    lo = int(index)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (index - lo)


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p of paired trials (1.0 without discordant pairs).

    ``only_a``: trials that succeeded for method A alone, ``only_b``: for B alone; the pairs
    both methods agree on carry no evidence.
    """
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1))
    return min(1.0, 2.0 * tail / 2.0 ** n)


def paired_difference(a: Sequence[bool], b: Sequence[bool],
                      z: float = 1.959964) -> dict[str, float]:
    """Success-rate difference A - B of two methods tried on the same trials.

    Returns the difference, its 95% interval by Newcombe's hybrid score method for paired
    proportions (method 10, Stat Med 17:2635, 1998: Wilson intervals of both rates combined
    with the correlation of the pairs; unlike the Wald interval it stays inside [-1, 1] and
    holds up near 0 % and 100 %), the discordant counts and the exact McNemar p.
    """
    if len(a) != len(b):
        raise ValueError(f'paired trials: {len(a)} outcomes for A, {len(b)} for B')
    n = len(a)
    if n == 0:
        raise ValueError('paired trials: no trials')
    both = sum(1 for x, y in zip(a, b) if x and y)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    neither = n - both - only_a - only_b
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson_interval(both + only_a, n, z)
    l2, u2 = wilson_interval(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    # the correlation of the pairs, continuity-corrected as Newcombe does (a positive
    # association counts only beyond n / 2)
    cross = both * neither - only_a * only_b
    cross = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    diff = p1 - p2
    lower = diff - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2)
                                 + (u2 - p2) ** 2, 0.0))
    upper = diff + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2)
                                 + (p2 - l2) ** 2, 0.0))
    return {'difference': diff, 'low': max(lower, -1.0), 'high': min(upper, 1.0),
            'only_a': only_a, 'only_b': only_b, 'trials': n,
            'mcnemar_p': mcnemar_exact_p(only_a, only_b)}
