# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""tools/locator_worlds.py --misses: each missed object's class, on a hand-made frame."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'tools'))
from locator_worlds import classify_misses  # noqa: E402


def _answer(label: np.ndarray, *ks: int) -> SimpleNamespace:
    return SimpleNamespace(pixels=np.flatnonzero(np.isin(label.reshape(-1), ks)))


def test_misses_are_classed_by_how_and_colour():
    label = np.zeros((10, 40), np.int32)
    for k in range(1, 5):                         # four 10x10 objects side by side
        label[:, (k - 1) * 10:k * 10] = k
    color = np.full((10, 40, 3), 120, np.uint8)
    color[:, 10:20] = 255                         # object 2 clipped white
    color[:5, 30:40] = 255                        # object 4 half clipped
    truth = [(k, np.zeros(3)) for k in range(1, 5)]
    objects = [_answer(label, 1, 2), _answer(label, 3)]
    # 1 and 2 in one answer matched to 1; 3's answer too far off; 4 not found at all.
    got = classify_misses(objects, truth, {1}, label, color, 250.0)
    assert got == ['merged / white', 'offset / coloured', 'not found / part white']
    assert classify_misses(objects, truth, {1, 2, 3, 4}, label, color, 250.0) == []
