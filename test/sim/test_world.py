# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The simulated scene: determinism, camera geometry, depth artefacts, lighting, ground truth."""

from __future__ import annotations

import numpy as np
import pybullet as p
import pytest

from edge_loop.kernels.camera import (
    D435_VGA,
    Extrinsics,
    Intrinsics,
    camera_to_world,
    deproject,
    project,
    world_to_camera,
)
from edge_loop.kernels.object_locator import locate_objects
from edge_loop.sim.camera import DepthArtefacts, discontinuities
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.objects import BAD_OBJECTS, SPLITS
from edge_loop.sim.world import SimWorld


@pytest.fixture(scope='module')
def world():
    w = SimWorld(11, n_objects=3, split='heldout')
    yield w
    w.close()


@pytest.fixture(scope='module')
def frame(world):
    return world.render()


def test_splits_are_disjoint_and_skip_bad_objects():
    assert set(SPLITS['train']).isdisjoint(SPLITS['heldout'])
    assert max(SPLITS['train']) <= 799 and min(SPLITS['heldout']) >= 800
    assert BAD_OBJECTS.isdisjoint(SPLITS['train'] + SPLITS['heldout'])


def test_same_seed_gives_byte_identical_depth_and_color(frame):
    with SimWorld(11, n_objects=3, split='heldout') as other:
        again = other.render()
    assert again.depth_mm.tobytes() == frame.depth_mm.tobytes()
    assert again.color.tobytes() == frame.color.tobytes()
    with SimWorld(12, n_objects=3, split='heldout') as different:
        assert different.render().depth_mm.tobytes() != frame.depth_mm.tobytes()


def test_objects_are_graspable_sized_heldout_and_settled(world):
    assert len(world.objects) == 3
    for o in world.objects:
        if o.urdf is not None:
            assert 800 <= int(o.name[-3:]) <= 999
        assert np.sort(o.size)[1] <= 0.07, o
        assert 0.02 <= o.mass <= 0.3
        pos, _ = o.pose
        assert abs(pos[0]) < 0.2 and abs(pos[1]) < 0.15 and 0.0 < pos[2] < 0.1
    assert world.objects_at_rest()


def test_frame_layout_and_label(world, frame):
    assert frame.color.shape == (480, 640, 3) and frame.color.dtype == np.uint8
    assert frame.depth_mm.shape == (480, 640) and frame.depth_mm.dtype == np.uint16
    assert frame.label.dtype == np.uint16
    assert set(np.unique(frame.label)) <= {0, 1, 2, 3}
    assert (frame.label > 0).sum() > 200
    # The table around the tray is 0.75 m away, the tray floor 0.745 m.
    assert abs(float(np.median(frame.depth_true_m[5:40, 5:40])) - 0.75) < 1e-3
    assert abs(float(np.median(frame.depth_true_m[235:245, 150:170])) - 0.745) < 1e-3


def test_object_projects_where_the_label_is(world, frame):
    """Hand-built projection: an object's centre projects inside its own label blob."""
    for k, centroid, _ in world.visible_centroids(frame):
        uv = project(world_to_camera(centroid, world.extrinsics), world.intrinsics)
        u, v = np.rint(uv).astype(int)
        ys, xs = np.nonzero(frame.label == k)
        assert xs.min() - 2 <= u <= xs.max() + 2 and ys.min() - 2 <= v <= ys.max() + 2


def test_off_centre_principal_point_and_tilted_camera():
    """A known cube projects to the pixels the pinhole model predicts."""
    intr = Intrinsics(fx=600.0, fy=610.0, cx=300.0, cy=260.0, width=640, height=480)
    # Camera 0.1 m to the side, tilted 15 deg about the optical x axis.
    ang = np.deg2rad(15.0)
    q_down = np.array([1.0, 0.0, 0.0, 0.0])
    q_tilt = np.array([np.sin(ang / 2), 0.0, 0.0, np.cos(ang / 2)])
    x1, y1, z1, w1 = q_down
    x2, y2, z2, w2 = q_tilt
    q = [w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
         w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2]
    pos = [0.1, -0.15, 0.7]
    with SimWorld(3, object_specs=['cube'], camera_position=pos, camera_orientation=q,
                  intrinsics=intr) as w:
        f = w.render()
        ext = Extrinsics.from_params(pos, q)
        cube, _ = w.objects[0].pose
        top = cube + np.array([0, 0, w.objects[0].size[2] / 2])
        u, v = np.rint(project(world_to_camera(top, ext), intr)).astype(int)
        assert f.label[v, u] == 1
        # depth at that pixel is the optical-axis distance of the top face
        expected = world_to_camera(top, ext)[2]
        assert abs(float(f.depth_true_m[v, u]) - expected) < 0.004


def test_depth_artefacts_statistics():
    rng = np.random.default_rng(0)
    art = DepthArtefacts()
    depth = np.full((400, 400), 0.75, np.float32)
    depth[:, 200:] = 2.0
    out = art.apply(depth, rng)
    edges = discontinuities(depth, art.edge_threshold_m)
    flat_near = out[:, :190][out[:, :190] > 0].astype(np.float64) / 1000.0
    flat_far = out[:, 210:][out[:, 210:] > 0].astype(np.float64) / 1000.0
    # noise ~ k z^2 (quantisation adds 1/sqrt(12) mm)
    for vals, z in ((flat_near, 0.75), (flat_far, 2.0)):
        want = np.hypot(art.noise_per_m2 * z * z, 0.001 / np.sqrt(12))
        assert abs(vals.std() - want) / want < 0.1
        assert abs(vals.mean() - z) < 0.001
    # millimetre quantisation is in the uint16 itself; dropout rate away from edges
    dropout = float((out[:, :190] == 0).mean())
    assert abs(dropout - art.dropout_prob) < 0.002
    hole_rate = float((out[edges] == 0).mean())
    assert abs(hole_rate - art.edge_hole_prob) < 0.06


def test_rendered_depth_has_holes_at_object_edges(frame):
    edges = discontinuities(frame.depth_true_m, 0.01)
    assert edges.sum() > 50
    assert (frame.depth_mm[edges] == 0).mean() > 0.3
    assert (frame.depth_mm[~edges] == 0).mean() < 0.02
    valid = (frame.depth_mm > 0) & ~edges
    err = frame.depth_mm[valid] / 1000.0 - frame.depth_true_m[valid]
    assert 0.0003 < float(err.std()) < 0.003


def test_every_lighting_condition_renders_and_differs_from_nominal():
    def cells(img):  # 8x8 cell means: sensor noise averages out, lighting effects do not
        return img.astype(np.float32).reshape(60, 8, 80, 8, 3).mean(axis=(1, 3))

    with SimWorld(21, n_objects=2, split='heldout') as w:
        nominal = cells(w.render().color)
        # two nominal frames differ only by sensor noise: the yardstick
        noise_p99 = float(np.percentile(np.abs(cells(w.render().color) - nominal), 99))
        for name in CONDITION_NAMES:
            if name == 'nominal':
                continue
            w.set_lighting(name)
            img = w.render().color
            assert img.shape == (480, 640, 3) and img.dtype == np.uint8
            diff = np.percentile(np.abs(cells(img) - nominal), 99)
            assert diff > max(8.0, 3.0 * noise_p99), name


def test_flicker_changes_between_frames():
    with SimWorld(21, n_objects=2, split='heldout', lighting='flicker') as w:
        means = [float(w.render().color.mean()) for _ in range(3)]
    assert max(means) - min(means) > 3.0


def test_glare_blinds_depth_in_its_core():
    with SimWorld(21, n_objects=1, split='heldout', lighting='glare') as w:
        f = w.render()
    holes = w.light.depth_holes(640, 480)
    assert holes.sum() > 1000 and (f.depth_mm[holes] == 0).all()
    assert (f.color[holes] > 240).mean() > 0.9


def test_glare_core_carries_no_signal():
    # An object inside the glare core changes neither image there: the depth camera returns
    # nothing and every colour channel is clipped before the noise is added, so the frame is
    # the same, bit for bit, with the object moved out of view. The simulator still counts it
    # visible; the sensor-aware truth does not, and no method could find it.
    with SimWorld(5, object_specs=['cube'], lighting='glare') as w:
        core = w.light.depth_holes(w.intrinsics.width, w.intrinsics.height)
        v, u = (int(c.mean()) for c in np.nonzero(core))
        first = w.render(peek=True)
        floor = camera_to_world(deproject(first.depth_true_m, first.intrinsics)[v, u][None],
                                w.extrinsics)[0]
        cube = w.objects[0]
        pos, orn = p.getBasePositionAndOrientation(cube.body_id, physicsClientId=w.client)
        p.resetBasePositionAndOrientation(cube.body_id, [floor[0], floor[1], pos[2]], orn,
                                          physicsClientId=w.client)
        seen = w.render(peek=True)
        p.resetBasePositionAndOrientation(cube.body_id, [3.0, 3.0, pos[2]], orn,
                                          physicsClientId=w.client)
        gone = w.render(peek=True)
        on_cube = seen.label == cube.k
        assert (on_cube & core).sum() > 500 and (gone.label == cube.k).sum() == 0
        assert np.array_equal(seen.color[core], gone.color[core])
        assert not seen.depth_mm[core].any() and not gone.depth_mm[core].any()
        assert [k for k, _, _ in w.visible_centroids(seen)] == [cube.k]
        assert w.visible_centroids(seen, sensed=True) == []
        assert len(locate_objects(seen.color, seen.depth_mm, seen.intrinsics,
                                  w.extrinsics)) == 0


def test_visible_centroids_and_occupancy(world, frame):
    found = world.visible_centroids(frame)
    assert {k for k, _, _ in found} <= {1, 2, 3} and len(found) >= 2
    occ = world.gt_occupancy()
    assert occ.shape == (90, 120)
    for _, c, yaw in found:
        col = int((c[0] + 0.30) / 0.005)
        row = int((c[1] + 0.225) / 0.005)
        assert occ[max(row - 2, 0):row + 3, max(col - 2, 0):col + 3].any()
        assert -np.pi / 2 < yaw <= np.pi / 2
    # tray walls are occupied, tray floor (centre, away from objects) and the table free
    assert occ[45, int((0.205 + 0.30) / 0.005)]
    assert not occ[2, 2]
    assert occ.mean() < 0.4


def test_occupancy_ignores_the_gripper():
    with SimWorld(5, n_objects=0) as w:
        empty = w.gt_occupancy()
        w.gripper.teleport([0.0, 0.0, 0.1], 0.0)
        assert np.array_equal(w.gt_occupancy(), empty)
        assert not empty[40:50, 55:65].any()


def test_default_intrinsics_are_d435_vga(frame):
    assert frame.intrinsics == D435_VGA
