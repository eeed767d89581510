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
