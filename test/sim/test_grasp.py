# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Grasp types and grasp trials: a cube is held, empty space is not, the trace makes sense."""

from __future__ import annotations

import numpy as np
import pybullet as p
import pytest

from edge_loop.kernels.grasp_types import PlanarGrasp, grasp_from_rectangle, grasp_rectangle
from edge_loop.sim.baselines import mask_centroid_grasp, random_grasp
from edge_loop.sim.grasp_trial import run_grasp_trial
from edge_loop.sim.world import SimWorld


def test_rectangle_is_counter_clockwise_with_opening_along_p0_p1():
    g = PlanarGrasp(center=[0.1, -0.05, 0.03], yaw=0.7, opening=0.06, finger_width=0.02)
    r = grasp_rectangle(g)
    assert np.isclose(np.linalg.norm(r[1] - r[0]), 0.06)
    assert np.isclose(np.linalg.norm(r[2] - r[1]), 0.02)
    assert np.allclose(r[:, 2], 0.03)
    normal = np.cross(r[1] - r[0], r[2] - r[1])
    assert normal[2] > 0
    d = (r[1] - r[0]) / 0.06
    assert np.isclose(np.arctan2(d[1], d[0]), 0.7)
    back = grasp_from_rectangle(r)
    assert np.allclose(back.center, g.center) and np.isclose(back.yaw, g.yaw)
    assert np.isclose(back.opening, g.opening) and np.isclose(back.finger_width, 0.02)


def _cube_grasp(seed):
    with SimWorld(seed, object_specs=['cube']) as w:
        pos, orn = w.objects[0].pose
        side = float(w.objects[0].size[0])
    yaw = p.getEulerFromQuaternion(orn)[2]
    return PlanarGrasp(center=pos, yaw=yaw, opening=side + 0.025), pos


@pytest.mark.parametrize('seed', [0, 1])
def test_isolated_cube_grasp_is_held_with_a_tactile_trace(seed):
    grasp, pos = _cube_grasp(seed)
    result = run_grasp_trial(seed, grasp, object_specs=['cube'])
    assert result.success, result.reason
    assert result.reason == 'held'
    tr = result.trace
    n = len(tr['t'])
    assert n > 500 and tr['positions'].shape == (n, 2) and tr['forces'].shape == (n, 2)
    assert np.all(np.diff(tr['t']) > 0) and np.all(tr['forces'] >= 0)
    holding = tr['phase'] == 5
    assert holding.any()
    # both fingers press with about the commanded 40 N while holding, and the cube is up
    assert np.all(np.median(tr['forces'][holding], axis=0) > 25)
    assert float(np.median(tr['forces'][tr['phase'] == 0])) < 1.0
    assert tr['object_z'][-1] > pos[2] + 0.1


def test_grasp_in_empty_space_closes_empty():
    grasp, pos = _cube_grasp(0)
    grasp.center = grasp.center + np.array([0.12 if pos[0] < 0 else -0.12, 0.0, 0.0])
    result = run_grasp_trial(0, grasp, object_specs=['cube'])
    assert not result.success
    assert result.reason == 'closed_empty'
    assert result.trace['positions'][-1].sum() < 0.002
    assert float(np.median(result.trace['forces'][-20:])) < 3.0


def test_baselines_produce_valid_grasps():
    with SimWorld(801, n_objects=2, split='heldout') as w:
        g = mask_centroid_grasp(w, w.render())
    assert g is not None and 0.0 < g.opening <= 0.085
    assert abs(g.center[0]) < 0.2 and abs(g.center[1]) < 0.15
    r = random_grasp(np.random.default_rng(0))
    assert r.depth_below_top is not None and abs(r.center[0]) <= 0.2
