# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge_loop.stats: percentiles as numpy's, paired comparisons of two methods."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_loop.stats import (
    mcnemar_exact_p,
    paired_difference,
    percentile_of_sorted,
    percentiles,
)


@pytest.mark.parametrize('n', [1, 2, 3, 10, 300, 301])
def test_percentile_of_sorted_matches_numpy(n):
    values = sorted(np.random.default_rng(n).exponential(5.0, n).tolist())
    for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
        assert percentile_of_sorted(values, q) == pytest.approx(np.percentile(values, q),
                                                                rel=1e-12, abs=1e-12)


def test_no_values_give_nan():
    assert math.isnan(percentile_of_sorted([], 50))
    assert all(math.isnan(v) for v in percentiles([], (50, 99)))


def _pairs(both: int, only_a: int, only_b: int, neither: int):
    a = [True] * (both + only_a) + [False] * (only_b + neither)
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return a, b


def test_mcnemar_exact_p_is_the_two_sided_binomial_tail_of_the_discordant_pairs():
    assert mcnemar_exact_p(10, 0) == pytest.approx(2 / 2 ** 10)
    assert mcnemar_exact_p(0, 10) == mcnemar_exact_p(10, 0)
    tail = sum(math.comb(21, k) for k in range(7)) / 2 ** 21
    assert mcnemar_exact_p(15, 6) == pytest.approx(2 * tail)
    assert mcnemar_exact_p(5, 5) == 1.0 and mcnemar_exact_p(0, 0) == 1.0


def test_paired_difference_counts_discordant_pairs_and_brackets_the_difference():
    r = paired_difference(*_pairs(12, 9, 2, 21))
    assert (r['only_a'], r['only_b'], r['trials']) == (9, 2, 44)
    assert r['difference'] == pytest.approx(7 / 44)
    assert r['low'] < r['difference'] < r['high']
    assert 0.0 < r['low'] < 0.03 and 0.28 < r['high'] < 0.31   # Newcombe 10: ~0.01-0.30
    # Methods that agree on every trial: no difference, an interval around 0.
    same = paired_difference(*_pairs(280, 0, 0, 20))
    assert same['difference'] == 0.0 and same['low'] < 0.0 < same['high']
    assert same['mcnemar_p'] == 1.0
    # Edges stay inside [-1, 1] (a Wald interval would not with one trial).
    one = paired_difference([True], [False])
    assert -1.0 <= one['low'] < one['difference'] == 1.0 <= one['high'] <= 1.0


def test_paired_difference_approaches_the_wald_interval_for_many_trials():
    a, b = _pairs(8000, 600, 300, 1100)
    r = paired_difference(a, b)
    n, d = len(a), (600 - 300) / len(a)
    half = 1.959964 * math.sqrt((600 + 300) / n - d * d) / math.sqrt(n)
    assert r['low'] == pytest.approx(d - half, abs=0.002)
    assert r['high'] == pytest.approx(d + half, abs=0.002)


def test_paired_difference_rejects_unpaired_or_empty_outcomes():
    with pytest.raises(ValueError, match='paired'):
        paired_difference([True, False], [True])
    with pytest.raises(ValueError, match='no trials'):
        paired_difference([], [])
