# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A seeded pybullet scene: table, tray, 1-5 settled objects, camera, lighting, gripper.

Everything random is drawn from ``numpy.random.default_rng(seed)`` in a fixed order and each
world has its own DIRECT pybullet client, so the same seed gives the same scene, the same
images and byte-identical depth. Sensor randomness of frame i is seeded by (seed, i).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pybullet as p

from edge_loop.kernels.camera import (
    D435_VGA,
    DEFAULT_CAMERA_ORIENTATION,
    DEFAULT_CAMERA_POSITION,
    Extrinsics,
    Intrinsics,
    camera_to_world,
    deproject,
)
from edge_loop.sim import lighting as lighting_mod
from edge_loop.sim.camera import DepthArtefacts, SimCamera
from edge_loop.sim.gripper import Gripper
from edge_loop.sim.objects import ObjectRecord, create_object, pick_specs

if TYPE_CHECKING:
    from edge_loop.sim.worlds import WorldConfig

PHYSICS_HZ = 240
DT = 1.0 / PHYSICS_HZ
TRAY_INNER = (0.40, 0.30)       # interior x, y (m)
TRAY_WALL = (0.01, 0.04)        # thickness, height (m)
TRAY_FLOOR = 0.005              # floor top height (m), below the occupancy threshold
OCCUPIED_ABOVE_M = 0.015
GRID = {'origin': (-0.30, -0.225), 'resolution': 0.005, 'width': 120, 'height': 90}
MIN_VISIBLE_PIXELS = 20
SETTLE_MAX_STEPS = 720


@dataclass
class SimFrame:
    """One rendered RGB-D frame with ground truth."""

    color: np.ndarray        # (H, W, 3) uint8 RGB, lighting applied
    depth_mm: np.ndarray     # (H, W) uint16, artefacts applied, 0 = no data
    depth_true_m: np.ndarray  # (H, W) float32, no artefacts (0 = nothing)
    label: np.ndarray        # (H, W) uint16: 0 background/table/tray/gripper, k = object k
    intrinsics: Intrinsics
    sim_time: float          # s since the world settled
    index: int               # frame number in this world
    lighting: str


def _box(client: int, half: tuple[float, float, float], pos: tuple[float, float, float],
         rgba: list[float], friction: float = 0.6) -> int:
    col = p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=client)
    vis = p.createVisualShape(p.GEOM_BOX, halfExtents=half, rgbaColor=rgba,
                              physicsClientId=client)
    body = p.createMultiBody(0.0, col, vis, basePosition=pos, physicsClientId=client)
    p.changeDynamics(body, -1, lateralFriction=friction, physicsClientId=client)
    return body


class SimWorld:
    """One seeded scene in its own pybullet DIRECT client."""

    def __init__(self, seed: int, *, n_objects: int | None = None, split: str = 'train',
                 lighting: str = 'nominal',
                 camera_position: list[float] | tuple[float, ...] = tuple(DEFAULT_CAMERA_POSITION),
                 camera_orientation: list[float] | tuple[float, ...] =
                 tuple(DEFAULT_CAMERA_ORIENTATION),
                 intrinsics: Intrinsics = D435_VGA, object_specs: list[str] | None = None,
                 artefacts: DepthArtefacts | None = None,
                 spawn_region: tuple[float, float] = (0.13, 0.08),
                 world: WorldConfig | None = None) -> None:
        """Build and settle the scene.

        Args:
            seed: scene seed (objects, poses, scales, sensor noise).
            n_objects: 1-5 objects; drawn from the seed when None.
            split: 'train' (objects 000-799) or 'heldout' (800-999).
            lighting: a name in :data:`edge_loop.sim.lighting.CONDITIONS`.
            camera_position: optical-frame position in world (m).
            camera_orientation: optical-frame orientation [qx, qy, qz, qw] in world.
            intrinsics: pinhole intrinsics of the colour image (depth is registered to it).
            object_specs: explicit objects ('cube', 'cylinder', 'NNN'); overrides n/split.
            artefacts: depth artefact model (defaults to :class:`DepthArtefacts`).
            spawn_region: half-extents (x, y) of the drop region around the tray centre.
            world: a randomised world (:mod:`edge_loop.sim.worlds`): its camera, tray,
                colours, lighting and hand replace the arguments above (None: today's world,
                byte for byte).

        """
        self.seed = int(seed)
        self.split = split
        self.rng = np.random.default_rng(self.seed)
        self.config = world
        self.tray_center = np.zeros(2)
        self.floor_top = TRAY_FLOOR     # tray floor top height (m)
        if world is not None:
            camera_position, camera_orientation = world.camera_position, world.camera_orientation
            intrinsics = world.intrinsics
            self.tray_center = np.asarray(world.tray_center, dtype=np.float64)
            self.floor_top = world.floor_top
        self.light = lighting_mod.get(lighting) if world is None else world.lighting
        self.intrinsics = intrinsics
        self.extrinsics = Extrinsics.from_params(list(camera_position),
                                                 list(camera_orientation))
        self.artefacts = artefacts or DepthArtefacts()
        self.client = p.connect(p.DIRECT)
        self._frames = 0
        self._steps = 0
        c = self.client
        p.setGravity(0, 0, -9.81, physicsClientId=c)
        p.setTimeStep(DT, physicsClientId=c)
        p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, numSolverIterations=60,
                                    physicsClientId=c)
        self._build_static()
        if world is None:
            self.gripper = Gripper(c, np.random.default_rng([self.seed, 7]), DT)
        else:
            self.gripper = Gripper(c, np.random.default_rng([self.seed, 7]), DT, hand=world.hand)
        if object_specs is None:
            n = int(self.rng.integers(1, 6)) if n_objects is None else int(n_objects)
            if not 0 <= n <= 5:
                raise ValueError(f'n_objects must be 0..5, got {n}')
            object_specs = pick_specs(self.rng, n, split)
        self.objects: list[ObjectRecord] = []
        for i, spec in enumerate(object_specs):
            pos = np.array([self.rng.uniform(-spawn_region[0], spawn_region[0]),
                            self.rng.uniform(-spawn_region[1], spawn_region[1]),
                            0.06 + 0.07 * i])
            if world is not None:
                pos += [*self.tray_center, self.floor_top - TRAY_FLOOR]
            rpy = [self.rng.uniform(-np.pi, np.pi), self.rng.uniform(-np.pi / 2, np.pi / 2),
                   self.rng.uniform(-np.pi, np.pi)]
            orn = np.array(p.getQuaternionFromEuler(rpy))
            self.objects.append(create_object(c, i + 1, spec, self.rng, pos, orn))
        self._body_to_k = {o.body_id: o.k for o in self.objects}
        self.settle()
        self._steps = 0
        self.camera = SimCamera(c, intrinsics, self.extrinsics)
        self._occupancy_cache: tuple[np.ndarray, np.ndarray] | None = None

    def _build_static(self) -> None:
        c = self.client
        cfg = self.config
        table_rgba = [0.62, 0.52, 0.40, 1] if cfg is None else list(cfg.table_rgba)
        self.table = _box(c, (0.6, 0.45, 0.02), (0.0, 0.0, -0.02), table_rgba)
        inner = TRAY_INNER if cfg is None else cfg.tray_inner
        ix, iy = inner[0] / 2, inner[1] / 2
        t, hgt = TRAY_WALL
        grey = [0.55, 0.58, 0.62, 1] if cfg is None else list(cfg.tray_wall_rgba)
        floor_rgba = [0.72, 0.74, 0.78, 1] if cfg is None else list(cfg.tray_floor_rgba)
        x0, y0 = self.tray_center
        z0 = self.floor_top - TRAY_FLOOR   # what the tray stands on (0: the table)
        self.tray = []
        if z0 > 0:   # a stand under the tray
            self.tray.append(_box(c, (ix + t, iy + t, z0 / 2), (x0, y0, z0 / 2), table_rgba))
        floor = _box(c, (ix + t, iy + t, TRAY_FLOOR / 2), (x0, y0, z0 + TRAY_FLOOR / 2),
                     floor_rgba)
        zc = z0 + hgt / 2
        walls = [
            _box(c, (ix + t, t / 2, hgt / 2), (x0, y0 + iy + t / 2, zc), grey),
            _box(c, (ix + t, t / 2, hgt / 2), (x0, y0 - iy - t / 2, zc), grey),
            _box(c, (t / 2, iy, hgt / 2), (x0 + ix + t / 2, y0, zc), grey),
            _box(c, (t / 2, iy, hgt / 2), (x0 - ix - t / 2, y0, zc), grey),
        ]
        self.tray += [floor, *walls]

    # --- time -----------------------------------------------------------------------------
    @property
    def sim_time(self) -> float:
        """Seconds of simulated time since the scene settled."""
        return self._steps * DT

    def step(self, n: int = 1) -> None:
        """Advance physics by ``n`` steps of 1/240 s (gripper commands applied each step)."""
        for _ in range(int(n)):
            self.gripper.before_step()
            p.stepSimulation(physicsClientId=self.client)
            self.gripper.after_step()
            self._steps += 1

    def settle(self, max_steps: int = SETTLE_MAX_STEPS) -> int:
        """Step until every object is at rest (or ``max_steps``); returns the steps taken."""
        for i in range(max_steps):
            self.step()
            if i >= 120 and i % 20 == 0 and self.objects_at_rest():
                return i + 1
        return max_steps

    def objects_at_rest(self, lin: float = 0.01, ang: float = 0.2) -> bool:
        """True when no object moves faster than ``lin`` m/s or ``ang`` rad/s."""
        for o in self.objects:
            v, w = p.getBaseVelocity(o.body_id, physicsClientId=self.client)
            if np.linalg.norm(v) > lin or np.linalg.norm(w) > ang:
                return False
        return True

    # --- sensing --------------------------------------------------------------------------
    def set_lighting(self, name: str) -> None:
        """Switch the lighting condition for the next frames."""
        self.light = lighting_mod.get(name)

    def render(self, *, peek: bool = False) -> SimFrame:
        """Render one RGB-D frame with lighting, depth artefacts and the object label image.

        Sensor noise of frame i is seeded by (seed, i); ``peek`` renders without moving on to
        the next frame index (a look that does not change the recorded sequence).
        """
        raw = self.camera.render(self.light.renderer_args())
        extra = getattr(self.light, 'extra_lights', ())
        if extra:   # several lights: one render each, added in linear light
            raw.color = self.light.combine(raw.color, [
                self.camera.render(args).color for args in self.light.extra_renderer_args()])
        index = self._frames
        if not peek:
            self._frames += 1
        rng_color = np.random.default_rng([self.seed, index, 1])
        rng_depth = np.random.default_rng([self.seed, index, 2])
        color = self.light.apply(raw.color, rng_color)
        h, w = raw.depth_m.shape
        depth_mm = self.artefacts.apply(raw.depth_m, rng_depth,
                                        extra_holes=self.light.depth_holes(w, h))
        label = np.zeros(raw.segmentation.shape, dtype=np.uint16)
        for body, k in self._body_to_k.items():
            label[raw.segmentation == body] = k
        return SimFrame(color=color, depth_mm=depth_mm, depth_true_m=raw.depth_m, label=label,
                        intrinsics=self.intrinsics, sim_time=self.sim_time, index=index,
                        lighting=self.light.name)

    def visible_centroids(self, frame: SimFrame, *, sensed: bool = False
                          ) -> list[tuple[int, np.ndarray, float]]:
        """(k, centroid (3,) world, yaw) of each object with enough visible pixels.

        Centroid = mean of the 3D points of the object's visible pixels (true depth); yaw =
        angle of the major principal axis of those points in the world xy plane, in
        (-pi/2, pi/2].

        ``sensed``: count only pixels the sensors carry a signal from. Inside the lighting's
        depth blind spot (the glare core) the depth camera returns nothing and every colour
        channel is clipped before the sensor noise is added, so the frame there is the same
        whatever lies under it (test/sim/test_world.py shows it bit for bit): no method can
        find an object that has fewer than ``MIN_VISIBLE_PIXELS`` outside it.
        """
        pts_cam = deproject(frame.depth_true_m, frame.intrinsics)
        h, w = frame.label.shape
        light = self.light if frame.lighting == self.light.name \
            else lighting_mod.get(frame.lighting)
        blind = light.depth_holes(w, h) if sensed else None
        out = []
        for o in self.objects:
            mask = (frame.label == o.k) & (frame.depth_true_m > 0)
            if blind is not None:
                mask &= ~blind
            if int(mask.sum()) < MIN_VISIBLE_PIXELS:
                continue
            pts = camera_to_world(pts_cam[mask], self.extrinsics).astype(np.float64)
            centroid = pts.mean(axis=0)
            out.append((o.k, centroid, principal_yaw(pts[:, :2])))
        return out

    def gt_occupancy(self, origin: tuple[float, float] = GRID['origin'],
                     resolution: float = GRID['resolution'], width: int = GRID['width'],
                     height: int = GRID['height']) -> np.ndarray:
        """(height, width) bool: geometry above 0.015 m at each cell centre (gripper ignored).

        Cached until an object moves (the tray and table never do).
        """
        key = np.array([origin[0], origin[1], resolution, width, height, *self._object_state()])
        if self._occupancy_cache is not None and self._occupancy_cache[0].shape == key.shape \
                and np.allclose(self._occupancy_cache[0], key, atol=1e-3, rtol=0):
            return self._occupancy_cache[1].copy()
        xs = origin[0] + (np.arange(width) + 0.5) * resolution
        ys = origin[1] + (np.arange(height) + 0.5) * resolution
        gx, gy = np.meshgrid(xs, ys)
        n = gx.size
        top = np.full(n, 1.0)
        hit_z = np.full(n, -1.0)
        todo = np.arange(n)
        for _ in range(4):  # re-cast below the gripper where a ray hit it first
            if todo.size == 0:
                break
            frm = np.stack([gx.ravel()[todo], gy.ravel()[todo], top[todo]], axis=1)
            to = frm.copy()
            to[:, 2] = -0.05
            results = []
            for s in range(0, len(todo), 8192):
                results += p.rayTestBatch(frm[s:s + 8192].tolist(), to[s:s + 8192].tolist(),
                                          physicsClientId=self.client)
            again = []
            for idx, res in zip(todo, results):
                if res[0] == self.gripper.body:
                    top[idx] = res[3][2] - 1e-4
                    again.append(idx)
                elif res[0] >= 0:
                    hit_z[idx] = res[3][2]
            todo = np.array(again, dtype=np.int64)
        occ = (hit_z > OCCUPIED_ABOVE_M + (self.floor_top - TRAY_FLOOR)).reshape(height, width)
        self._occupancy_cache = (key, occ)
        return occ.copy()

    def _object_state(self) -> list[float]:
        out: list[float] = []
        for o in self.objects:
            pos, orn = o.pose
            out += [*pos, *orn]
        return out

    def object_by_k(self, k: int) -> ObjectRecord:
        """The object with label ``k``."""
        return self.objects[k - 1]

    def close(self) -> None:
        """Disconnect the pybullet client (idempotent)."""
        if self.client is not None and self.client >= 0:
            try:
                p.disconnect(physicsClientId=self.client)
            except p.error:
                pass
            self.client = -1

    def __enter__(self) -> SimWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def principal_yaw(xy: np.ndarray) -> float:
    """Yaw of the major principal axis of (N, 2) points, in (-pi/2, pi/2]."""
    d = xy - xy.mean(axis=0)
    cov = d.T @ d / max(len(d), 1)
    evals, evecs = np.linalg.eigh(cov)
    major = evecs[:, int(np.argmax(evals))]
    yaw = float(np.arctan2(major[1], major[0]))
    if yaw <= -np.pi / 2:
        yaw += np.pi
    elif yaw > np.pi / 2:
        yaw -= np.pi
    return yaw
