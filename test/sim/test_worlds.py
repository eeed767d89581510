# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Randomised worlds (edge_loop/sim/worlds.py) and a slice of bench/bench_worlds.py.

Determinism, the train / held-out split, the camera's view of the tray, clutter in contact,
the second hand, the shake, and two benchmark scenes end to end.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from edge_loop.kernels.camera import project, world_to_camera
from edge_loop.sim import grasp_trial
from edge_loop.sim.baselines import mask_centroid_grasp
from edge_loop.sim.gripper import HAND_A, HAND_B
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.world import SimWorld
from edge_loop.sim.worlds import (
    BINS,
    CAMERA_MODELS,
    DISTANCE_RANGE_M,
    FLOOR_TOP_RANGE_M,
    LIGHTING_MODELS,
    TILT_RANGE_DEG,
    TRAY_X_RANGE_M,
    bin_of,
    build_world,
    sample_world,
    touching_pairs,
)

N_SAMPLED = 150
BENCH = Path(__file__).resolve().parents[2] / 'bench' / 'bench_worlds.py'


@pytest.fixture(scope='module')
def configs():
    return {split: [sample_world(s, split) for s in range(N_SAMPLED)]
            for split in ('train', 'heldout')}


def test_sample_world_is_deterministic_and_seed_dependent():
    for split in ('train', 'heldout'):
        assert sample_world(17, split) == sample_world(17, split)
        assert sample_world(17, split) != sample_world(18, split)
    with pytest.raises(ValueError):
        sample_world(0, 'validation')


def test_heldout_parameter_families_never_appear_in_train(configs):
    def bins(cfg):
        return {'tilt': bin_of(cfg.camera_tilt_deg, *TILT_RANGE_DEG, BINS['tilt']),
                'distance': bin_of(cfg.camera_distance_m, *DISTANCE_RANGE_M, BINS['distance']),
                'floor_top': bin_of(cfg.floor_top, *FLOOR_TOP_RANGE_M, BINS['floor_top']),
                'tray_x': bin_of(cfg.tray_inner[0], *TRAY_X_RANGE_M, BINS['tray_x'])}

    seen = {split: {'bins': {k: set() for k in BINS}, 'cameras': set(), 'lighting': set()}
            for split in configs}
    for split, cfgs in configs.items():
        for cfg in cfgs:
            assert cfg.split == split
            for k, b in bins(cfg).items():
                seen[split]['bins'][k].add(b)
            seen[split]['cameras'].add(cfg.camera_model)
            seen[split]['lighting'].add(cfg.lighting_model)
            assert CAMERA_MODELS[cfg.camera_model][0] == split
    train, held = seen['train'], seen['heldout']
    for k in BINS:
        assert train['bins'][k].isdisjoint(held['bins'][k]), k
        assert len(held['bins'][k]) >= 2, k      # the held-out family spans the range
    assert train['cameras'].isdisjoint(held['cameras'])
    assert train['lighting'].isdisjoint(held['lighting'])
    assert train['lighting'] <= set(CONDITION_NAMES)
    assert held['lighting'] == set(LIGHTING_MODELS['heldout'])
    tilts = [c.camera_tilt_deg for cs in configs.values() for c in cs]
    assert min(tilts) < 5 and max(tilts) > 45
    dists = [c.camera_distance_m for cs in configs.values() for c in cs]
    assert 0.4 <= min(dists) < 0.5 and 0.8 < max(dists) <= 0.9
    counts = {c.n_objects for cs in configs.values() for c in cs}
    assert counts == {1, 2, 3, 4, 5, 6}
    assert {c.hand.name for cs in configs.values() for c in cs} == {'hand_a', 'hand_b'}


def test_every_sampled_camera_sees_the_whole_tray(configs):
    for cfgs in configs.values():
        for cfg in cfgs:
            (x0, y0), (ix, iy) = cfg.tray_center, cfg.tray_inner
            corners = np.array([[x0 + sx * ix / 2, y0 + sy * iy / 2, cfg.floor_top]
                                for sx in (-1, 1) for sy in (-1, 1)])
            cam = world_to_camera(corners, cfg.extrinsics)
            assert np.all(cam[:, 2] > 0.2), cfg.seed
            uv = project(cam, cfg.intrinsics)
            w, h = cfg.intrinsics.width, cfg.intrinsics.height
            assert np.all((uv[:, 0] > 0) & (uv[:, 0] < w) & (uv[:, 1] > 0) & (uv[:, 1] < h)), \
                (cfg.split, cfg.seed)
            # looking at the tray: its centre projects near the principal point
            centre = project(world_to_camera(np.array([[x0, y0, cfg.floor_top]]),
                                             cfg.extrinsics), cfg.intrinsics)[0]
            assert np.hypot(*(centre - [cfg.intrinsics.cx, cfg.intrinsics.cy])) < 2.0
            tilt = np.degrees(np.arccos(-cfg.extrinsics.rotation[2, 2]))
            assert tilt == pytest.approx(cfg.camera_tilt_deg, abs=1e-6)


def test_rendered_world_matches_its_config_and_clutter_touches():
    """The renderer uses the config's camera, clutter is in contact, the gripper out of view.

    Tray (or object) pixels where the tray's interior projects; the 4 objects of a clutter
    scene touch (at least a chain of them).
    """
    cfg = sample_world(7, 'train')      # 4 objects, tilted astra camera
    assert cfg.n_objects == 4 and cfg.touching
    with build_world(cfg) as world:
        assert world.gripper.hand == cfg.hand
        raw = world.camera.render(world.light.renderer_args())
        assert raw.color.shape == (cfg.intrinsics.height, cfg.intrinsics.width, 3)
        tray_ids = set(world.tray)
        for corner in cfg.tray_corners()[:4]:
            inside = corner.copy()
            inside[:2] += 0.85 * (np.asarray(cfg.tray_center) - corner[:2])
            u, v = project(world_to_camera(inside[None], cfg.extrinsics), cfg.intrinsics)[0]
            assert raw.segmentation[int(v), int(u)] in tray_ids | {o.body_id
                                                                  for o in world.objects}
        assert world.gripper.body not in set(np.unique(raw.segmentation))
        assert touching_pairs(world) >= cfg.n_objects - 1
        assert len(world.visible_centroids(world.render())) >= 3


def test_second_hand_opens_wider_and_the_shake_is_the_issues():
    with SimWorld(3, object_specs=['cube']) as world:
        assert world.gripper.hand == HAND_A
        grasp = mask_centroid_grasp(world, world.render())
        poses = []
        real_shake = grasp_trial._shake

        class Spy:
            def __init__(self, rec):
                self.rec = rec

            def step(self, n, phase):
                self.rec.step(n, phase)
                xyz, yaw = world.gripper.tcp_pose()
                poses.append((xyz[0], xyz[1], yaw))

        grasp_trial._shake = lambda g, rec: real_shake(g, Spy(rec))
        try:
            result = grasp_trial.execute_grasp(world, grasp)
        finally:
            grasp_trial._shake = real_shake
        assert result.success
        a = np.array(poses) - poses[0]
        assert len(a) == 240                                     # 1 s at 240 Hz
        lateral = np.hypot(a[:, 0], a[:, 1])
        assert 0.026 < lateral.max() < 0.034                      # +-3 cm
        assert 0.13 < np.abs(a[:, 2]).max() < 0.17                # +-0.15 rad
        sign_changes = np.count_nonzero(np.diff(np.sign(a[5:, 2])) != 0)
        assert 3 <= sign_changes <= 5                             # 2 Hz over 1 s
    cfg = sample_world(0, 'train')
    assert cfg.hand == HAND_B
    with build_world(cfg) as world:
        world.gripper.set_opening_now(1.0)
        world.step(5)
        assert world.gripper.opening() == pytest.approx(HAND_B.max_opening, abs=0.003)
        assert HAND_B.max_opening > HAND_A.max_opening + 0.02


def _bench():
    spec = importlib.util.spec_from_file_location('bench_worlds', BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_slice_end_to_end(tmp_path):
    """Two scenes through bench_worlds (held-out and train) and the report."""
    bench = _bench()
    rows = [bench.run_scene(1, 'heldout'), bench.run_scene(10, 'train')]
    for r in rows:
        assert r['visible'] == 1 and r['detected'] == 1 and r['false'] == 0, r
        assert r['target_error_m'] < 0.01, r
        assert r['locate_ms'] > 0 and r['plan_ms'] > 0
        assert r['reason'] in ('held', 'no_grasp', 'closed_empty', 'blocked_empty',
                               'no_object', 'dropped_lift', 'dropped_shake')
    assert any(r['success'] for r in rows), rows
    report = bench.build_report(rows, 'test', True)
    assert report['sets']['heldout']['summary']['detected']['k'] == 1
    md = bench.markdown(report)
    assert '| grasp success after lift + shake |' in md
    assert '### heldout: by lighting' in md and 'coloured_ambient' in md
