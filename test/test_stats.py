# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge_loop.stats: the percentile of a sorted window is numpy's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_loop.stats import percentile_of_sorted, percentiles


@pytest.mark.parametrize('n', [1, 2, 3, 10, 300, 301])
def test_percentile_of_sorted_matches_numpy(n):
    values = sorted(np.random.default_rng(n).exponential(5.0, n).tolist())
    for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
        assert percentile_of_sorted(values, q) == pytest.approx(np.percentile(values, q),
                                                                rel=1e-12, abs=1e-12)


def test_no_values_give_nan():
    assert math.isnan(percentile_of_sorted([], 50))
    assert all(math.isnan(v) for v in percentiles([], (50, 99)))
