# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Scoring detections against the simulator's truth (one rule for every benchmark)."""

from __future__ import annotations

from typing import Any

import numpy as np

MATCH_RADIUS = 0.03   # a detection within 3 cm (x, y) of a visible object's centroid matches it


def match_detections(objects: list[Any], truth: list[tuple[int, np.ndarray, Any]],
                     radius: float = MATCH_RADIUS) -> tuple[list[float], int, set[int]]:
    """Greedy one-to-one matching by (x, y) distance, nearest pairs first.

    ``objects`` have a ``position`` (world, m); ``truth`` rows are (label, centroid, ...).
    Returns the 3D errors of the matches, the number of unmatched answers (false detections)
    and the labels of the matched truth objects.
    """
    pairs = sorted((np.hypot(*(o.position[:2] - c[:2])), i, j)
                   for i, o in enumerate(objects) for j, (_, c, *_rest) in enumerate(truth))
    used_o, used_t, errors = set(), set(), []
    for d, i, j in pairs:
        if d > radius or i in used_o or j in used_t:
            continue
        used_o.add(i)
        used_t.add(j)
        errors.append(float(np.linalg.norm(objects[i].position - truth[j][1])))
    return errors, len(objects) - len(used_o), {truth[j][0] for j in used_t}
