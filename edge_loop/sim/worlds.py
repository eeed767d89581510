# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Randomised worlds: camera pose and model, tray, colours, lighting model, clutter, hand.

:func:`sample_world` draws a frozen :class:`WorldConfig` from ``(seed, split)``;
:func:`build_world` makes the :class:`~edge_loop.sim.world.SimWorld` of it (objects of the
same split, touching on purpose in clutter). ``SimWorld(seed)`` without a config is the
shipped world, unchanged.

Factors (both splits draw every factor; the split decides *which values*):

- camera: tilt 0-50 deg off vertical, 0.4-0.9 m from the tray centre, any azimuth, looking at
  the tray floor's centre (image x horizontal); a pose whose image does not hold the whole
  tray interior (margin :data:`VIEW_MARGIN_PX`) is drawn again;
- camera model (intrinsics) of :data:`CAMERA_MODELS`;
- tray: centre within +-0.12 / +-0.08 m of the table centre, interior 0.34-0.46 x 0.26-0.34 m,
  floor 0.005-0.125 m above the table (on a stand);
- table, tray floor and wall colours;
- lighting model of :data:`LIGHTING_MODELS`, its parameters jittered;
- 1-6 objects; with 4-6 (and half of the 2-3 scenes) they are herded into contact;
- hand: :data:`~edge_loop.sim.gripper.HAND_A` (the shipped one) or ``HAND_B``.

Split (the held-out world configurations, kept apart like objects 800-999 in
:mod:`edge_loop.sim.objects`; never used for tuning, training or thresholds):

- camera tilt in 5-degree bins, distance in 5-cm bins, tray floor height in 2-cm bins and tray
  interior length in 2-cm bins alternate: even bins are 'train', odd bins 'heldout'
  (:func:`split_of_bin`), so no held-out tilt, distance, height or size is ever seen in
  training while both cover the whole range;
- camera models: train D435 VGA, D435 848x480, Astra-like; held-out D455 VGA (wide) and an
  Azure-Kinect-like 640x576;
- lighting models: train the eight shipped conditions of :mod:`edge_loop.sim.lighting`
  (jittered); held-out six others (very dim, low sun, two lights, coloured ambient and two
  mixed conditions that combine several effects);
- objects: the split's objects (train 000-799, held-out 800-999);
- scene seeds: the benchmark draws train worlds from seeds 500000-549999 and held-out worlds
  from 600000-649999 (:data:`SEED_RANGES`).

Colours, tray position, azimuth, object count and hand are drawn alike in both splits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pybullet as p

from edge_loop.kernels.camera import (
    D435_VGA,
    Extrinsics,
    Intrinsics,
    matrix_to_quat,
    project,
    world_to_camera,
)
from edge_loop.sim import lighting as lighting_mod
from edge_loop.sim.gripper import HAND_A, HAND_B, HandGeometry
from edge_loop.sim.lighting import Glare, Lighting
from edge_loop.sim.objects import pick_specs
from edge_loop.sim.world import TRAY_FLOOR, TRAY_WALL, SimWorld

SPLITS = ('train', 'heldout')
SEED_RANGES = {'train': (500_000, 550_000), 'heldout': (600_000, 650_000)}
VIEW_MARGIN_PX = 8
TILT_RANGE_DEG = (0.0, 50.0)
DISTANCE_RANGE_M = (0.4, 0.9)
FLOOR_TOP_RANGE_M = (TRAY_FLOOR, TRAY_FLOOR + 0.12)
TRAY_X_RANGE_M = (0.34, 0.46)
TRAY_Y_RANGE_M = (0.26, 0.34)
TRAY_CENTER_RANGE_M = (0.12, 0.08)
BINS = {'tilt': 10, 'distance': 10, 'floor_top': 6, 'tray_x': 6}
CLUTTER_MIN = 4

CAMERA_MODELS: dict[str, tuple[str, Intrinsics]] = {
    # name: (split, intrinsics of the colour image, depth registered to it)
    'd435_vga': ('train', D435_VGA),
    'd435_848x480': ('train', Intrinsics(fx=608.0, fy=608.0, cx=423.0, cy=241.0,
                                         width=848, height=480)),
    'astra_vga': ('train', Intrinsics(fx=570.0, fy=570.0, cx=318.0, cy=243.0,
                                      width=640, height=480)),
    'd455_vga': ('heldout', Intrinsics(fx=385.0, fy=385.0, cx=321.5, cy=238.0,
                                       width=640, height=480)),
    'azure_nfov_640x576': ('heldout', Intrinsics(fx=504.0, fy=504.0, cx=322.0, cy=290.0,
                                                 width=640, height=576)),
}


@dataclass(frozen=True)
class ExtraLight:
    """A further light: its own render (direction, colour, coefficients), weighted and tinted."""

    direction: tuple[float, float, float]
    color: tuple[float, float, float] = (1.0, 1.0, 1.0)
    ambient: float = 0.3
    diffuse: float = 0.6
    specular: float = 0.1
    shadow: bool = True
    weight: float = 0.5
    tint: tuple[float, float, float] = (1.0, 1.0, 1.0)


@dataclass(frozen=True)
class WorldLighting(Lighting):
    """A :class:`Lighting` with further lights (one render each, added in linear light)."""

    primary_weight: float = 1.0
    extra_lights: tuple[ExtraLight, ...] = ()

    def extra_renderer_args(self) -> list[dict]:
        """``p.getCameraImage`` light arguments of each further light."""
        return [{'lightDirection': list(x.direction), 'lightColor': list(x.color),
                 'lightDistance': 2.0, 'shadow': 1 if x.shadow else 0,
                 'lightAmbientCoeff': x.ambient, 'lightDiffuseCoeff': x.diffuse,
                 'lightSpecularCoeff': x.specular} for x in self.extra_lights]

    def combine(self, primary: np.ndarray, extras: list[np.ndarray]) -> np.ndarray:
        """uint8 RGB of the lights' renders added in linear light (before the sensor)."""
        lin = _linear(primary) * np.float32(self.primary_weight)
        for x, rgb in zip(self.extra_lights, extras):
            lin += _linear(rgb) * (np.float32(x.weight) * np.asarray(x.tint, np.float32))
        np.clip(lin, 0.0, 1.0, out=lin)
        return np.rint(lin ** np.float32(1 / 2.2) * 255.0).astype(np.uint8)


def _linear(rgb: np.ndarray) -> np.ndarray:
    return (rgb.astype(np.float32) * np.float32(1 / 255.0)) ** np.float32(2.2)


def _unit(v: np.ndarray) -> tuple[float, float, float]:
    v = np.asarray(v, np.float64)
    return tuple(float(x) for x in v / np.linalg.norm(v))


def _light_direction(rng: np.random.Generator, elevation_deg: tuple[float, float]
                     ) -> tuple[float, float, float]:
    az = rng.uniform(0, 2 * np.pi)
    el = np.radians(rng.uniform(*elevation_deg))
    return _unit([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])


def _train_lighting(rng: np.random.Generator) -> tuple[str, Lighting]:
    """One of the shipped conditions, exposure and light direction jittered."""
    name = lighting_mod.CONDITION_NAMES[int(rng.integers(len(lighting_mod.CONDITION_NAMES)))]
    base = lighting_mod.get(name)
    changes = {'exposure': base.exposure * float(rng.uniform(0.8, 1.25))}
    if name != 'harsh_shadow':
        changes['light_direction'] = _light_direction(rng, (50, 85))
    if base.glare is not None:
        changes['glare'] = dataclasses.replace(base.glare, u=float(rng.uniform(0.3, 0.7)),
                                               v=float(rng.uniform(0.3, 0.7)))
    return name, world_lighting(base, **changes)


def world_lighting(base: Lighting, **changes: object) -> WorldLighting:
    """``base`` (one light) as a :class:`WorldLighting`, with ``changes`` to its fields."""
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(Lighting)}
    return WorldLighting(**{**fields, **changes})


def _heldout_lighting(rng: np.random.Generator) -> tuple[str, Lighting]:
    """One of the held-out lighting models (never in train), its parameters drawn."""
    names = ('very_dim', 'low_sun', 'two_lights', 'coloured_ambient', 'mixed_dim',
             'mixed_bright')
    name = names[int(rng.integers(len(names)))]
    sky = (float(rng.uniform(0.55, 0.75)), float(rng.uniform(0.75, 0.95)), 1.0)
    if name == 'very_dim':
        light = WorldLighting(name, light_direction=_light_direction(rng, (50, 85)),
                              ambient=0.45, diffuse=0.4, exposure=float(rng.uniform(0.05, 0.09)),
                              read_noise=3.5, shot_noise=0.02, vignette=0.3,
                              description='a dark room: exposure a twentieth to a tenth, '
                                          'strong vignette, high-gain noise')
    elif name == 'low_sun':
        light = WorldLighting(name, light_direction=_light_direction(rng, (15, 30)),
                              light_color=(1.0, 0.85, 0.65), ambient=0.15, diffuse=1.0,
                              specular=0.25, exposure=float(rng.uniform(1.1, 1.5)),
                              description='low warm sun through a window: long shadows')
    elif name == 'two_lights':
        light = WorldLighting(name, light_direction=_light_direction(rng, (35, 60)),
                              ambient=0.3, diffuse=0.7, primary_weight=0.6,
                              exposure=float(rng.uniform(0.9, 1.2)),
                              extra_lights=(ExtraLight(_light_direction(rng, (35, 60)),
                                                       color=(0.9, 0.95, 1.0), weight=0.6),),
                              description='two lamps from two sides: two shadows each')
    elif name == 'coloured_ambient':
        light = WorldLighting(name, light_direction=_light_direction(rng, (50, 85)),
                              ambient=0.3, diffuse=0.6, primary_weight=0.7,
                              extra_lights=(ExtraLight((0.0, 0.0, 1.0), ambient=1.0,
                                                       diffuse=0.0, specular=0.0, shadow=False,
                                                       weight=0.5, tint=sky),),
                              description='blue-green sky light from everywhere plus a lamp')
    elif name == 'mixed_dim':
        light = WorldLighting(name, light_direction=_light_direction(rng, (30, 60)),
                              light_color=(1.0, 0.8, 0.55), ambient=0.3, diffuse=0.7,
                              exposure=float(rng.uniform(0.12, 0.2)),
                              color_gain=(1.3, 0.95, 0.55), read_noise=3.0, shot_noise=0.015,
                              flicker=0.3, banding=0.15,
                              description='dim tungsten light on mains: dark, warm, flickering')
    else:   # mixed_bright
        light = WorldLighting(name, light_direction=_light_direction(rng, (40, 70)),
                              ambient=0.4, diffuse=0.6, specular=0.3,
                              exposure=float(rng.uniform(1.8, 2.6)), primary_weight=0.7,
                              glare=Glare(u=float(rng.uniform(0.3, 0.7)),
                                          v=float(rng.uniform(0.3, 0.7)), radius=0.08,
                                          strength=2.0),
                              motion_blur_px=int(rng.integers(5, 11)),
                              extra_lights=(ExtraLight((0.0, 0.0, 1.0), ambient=1.0,
                                                       diffuse=0.0, specular=0.0, shadow=False,
                                                       weight=0.4, tint=sky),),
                              description='over-exposed, a glare spot, sky light and blur')
    return name, light


LIGHTING_MODELS = {
    'train': lighting_mod.CONDITION_NAMES,
    'heldout': ('very_dim', 'low_sun', 'two_lights', 'coloured_ambient', 'mixed_dim',
                'mixed_bright'),
}
DIM_MODELS = ('dim', 'very_dim', 'mixed_dim')


@dataclass(frozen=True)
class WorldConfig:
    """One randomised world (everything but the objects' own draw, which the seed does)."""

    seed: int
    split: str
    camera_model: str
    intrinsics: Intrinsics
    camera_tilt_deg: float
    camera_distance_m: float
    camera_azimuth_deg: float
    camera_position: tuple[float, float, float]
    camera_orientation: tuple[float, float, float, float]
    tray_center: tuple[float, float]
    tray_inner: tuple[float, float]
    floor_top: float              # tray floor top above the table (m)
    table_rgba: tuple[float, ...]
    tray_floor_rgba: tuple[float, ...]
    tray_wall_rgba: tuple[float, ...]
    lighting_model: str
    lighting: Lighting
    n_objects: int
    touching: bool                # objects herded into contact
    hand: HandGeometry

    @property
    def extrinsics(self) -> Extrinsics:
        """The camera's pose (the contract's camera_position / camera_orientation)."""
        return Extrinsics.from_params(list(self.camera_position), list(self.camera_orientation))

    @property
    def roi(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Tray interior less 6 mm, as a user sets ``roi_x`` / ``roi_y``."""
        (x0, y0), (ix, iy) = self.tray_center, self.tray_inner
        return ((x0 - ix / 2 + 0.006, x0 + ix / 2 - 0.006),
                (y0 - iy / 2 + 0.006, y0 + iy / 2 - 0.006))

    def tray_corners(self) -> np.ndarray:
        """(8, 3) world points: the tray interior's corners on the floor and on the wall tops."""
        (x0, y0), (ix, iy) = self.tray_center, self.tray_inner
        wall_top = self.floor_top - TRAY_FLOOR + TRAY_WALL[1]
        return np.array([[x0 + sx * ix / 2, y0 + sy * iy / 2, z]
                         for z in (self.floor_top, wall_top)
                         for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))])

    def factors(self) -> dict[str, object]:
        """The per-factor labels the benchmark tabulates."""
        lo = int(self.camera_tilt_deg // 10) * 10
        return {'camera_tilt': f'{lo}-{lo + 10} deg', 'lighting': self.lighting_model,
                'objects': str(self.n_objects), 'camera_model': self.camera_model,
                'hand': self.hand.name}


def bin_of(value: float, lo: float, hi: float, n: int) -> int:
    """Index of the equal bin of [lo, hi] (n bins) that holds ``value``."""
    return int(np.clip(np.floor((value - lo) / (hi - lo) * n), 0, n - 1))


def split_of_bin(index: int) -> str:
    """Even bins are 'train', odd bins 'heldout'."""
    return SPLITS[index % 2]


def _draw_in_split(rng: np.random.Generator, lo: float, hi: float, n: int, split: str) -> float:
    """A value uniform over the bins of [lo, hi] that belong to ``split``."""
    mine = [i for i in range(n) if split_of_bin(i) == split]
    i = mine[int(rng.integers(len(mine)))]
    width = (hi - lo) / n
    # Stay a hair inside the bin so that the bin of the value is the bin drawn.
    return float(lo + width * (i + rng.uniform(1e-6, 1.0 - 1e-6)))


def look_at(position: np.ndarray, target: np.ndarray, azimuth: float
            ) -> tuple[float, float, float, float]:
    """Optical-frame quaternion of a camera at ``position`` looking at ``target``, no roll.

    Image x is horizontal; straight down (where "horizontal" is any direction) it points
    along ``azimuth`` + 90 deg, which is the horizontal perpendicular of the tilt's direction.
    """
    z = np.asarray(target, np.float64) - np.asarray(position, np.float64)
    z /= np.linalg.norm(z)
    x = np.array([-np.sin(azimuth), np.cos(azimuth), 0.0])
    x -= z * (x @ z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return tuple(float(v) for v in matrix_to_quat(np.stack([x, y, z], axis=1)))


def sees_tray(config: WorldConfig, margin_px: float = VIEW_MARGIN_PX) -> bool:
    """Whether every tray interior corner (floor and wall top) projects inside the image."""
    cam = world_to_camera(config.tray_corners(), config.extrinsics)
    if np.any(cam[:, 2] <= 0.1):
        return False
    uv = project(cam, config.intrinsics)
    w, h = config.intrinsics.width, config.intrinsics.height
    return bool(np.all((uv[:, 0] >= margin_px) & (uv[:, 0] <= w - 1 - margin_px)
                       & (uv[:, 1] >= margin_px) & (uv[:, 1] <= h - 1 - margin_px)))


def _rgba(rng: np.random.Generator, lo: float, hi: float) -> tuple[float, ...]:
    return (*(float(v) for v in rng.uniform(lo, hi, 3)), 1.0)


def sample_world(seed: int, split: str) -> WorldConfig:
    """The world configuration of ``(seed, split)`` (same arguments, same world)."""
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; use one of {", ".join(SPLITS)}')
    rng = np.random.default_rng([int(seed), 34, SPLITS.index(split)])
    models = [m for m, (s, _) in CAMERA_MODELS.items() if s == split]
    camera_model = models[int(rng.integers(len(models)))]
    intrinsics = CAMERA_MODELS[camera_model][1]
    tray_inner = (_draw_in_split(rng, *TRAY_X_RANGE_M, BINS['tray_x'], split),
                  float(rng.uniform(*TRAY_Y_RANGE_M)))
    tray_center = (float(rng.uniform(-TRAY_CENTER_RANGE_M[0], TRAY_CENTER_RANGE_M[0])),
                   float(rng.uniform(-TRAY_CENTER_RANGE_M[1], TRAY_CENTER_RANGE_M[1])))
    floor_top = _draw_in_split(rng, *FLOOR_TOP_RANGE_M, BINS['floor_top'], split)
    target = np.array([*tray_center, floor_top])
    for _ in range(200):
        tilt = _draw_in_split(rng, *TILT_RANGE_DEG, BINS['tilt'], split)
        dist = _draw_in_split(rng, *DISTANCE_RANGE_M, BINS['distance'], split)
        az = float(rng.uniform(0.0, 360.0))
        t, a = np.radians(tilt), np.radians(az)
        pos = target + dist * np.array([np.sin(t) * np.cos(a), np.sin(t) * np.sin(a), np.cos(t)])
        config = WorldConfig(
            seed=int(seed), split=split, camera_model=camera_model, intrinsics=intrinsics,
            camera_tilt_deg=tilt, camera_distance_m=dist, camera_azimuth_deg=az,
            camera_position=tuple(float(v) for v in pos),
            camera_orientation=look_at(pos, target, a), tray_center=tray_center,
            tray_inner=tray_inner, floor_top=floor_top, table_rgba=(0, 0, 0, 1),
            tray_floor_rgba=(0, 0, 0, 1), tray_wall_rgba=(0, 0, 0, 1), lighting_model='',
            lighting=lighting_mod.get('nominal'), n_objects=0, touching=False, hand=HAND_A)
        if sees_tray(config):
            break
    else:
        raise RuntimeError(f'world {seed} ({split}): no camera pose sees the tray')
    lighting_model, light = (_train_lighting if split == 'train' else _heldout_lighting)(rng)
    n_objects = int(rng.integers(1, 7))
    touching = n_objects >= CLUTTER_MIN or (n_objects > 1 and rng.random() < 0.5)
    return dataclasses.replace(
        config, table_rgba=_rgba(rng, 0.2, 0.8), tray_floor_rgba=_rgba(rng, 0.3, 0.9),
        tray_wall_rgba=_rgba(rng, 0.2, 0.8), lighting_model=lighting_model, lighting=light,
        n_objects=n_objects, touching=touching, hand=HAND_B if rng.random() < 0.5 else HAND_A)


def build_world(config: WorldConfig) -> SimWorld:
    """The settled :class:`SimWorld` of ``config`` (objects of its split, herded if touching).

    The gripper waits 2 m above the tray (behind every sampled camera: out of the image).
    Herding: every object not yet touching another is pulled towards a point near the tray's
    centre with a horizontal force of 1.2 x its weight (more than the floor's friction) while
    it moves slower than 0.15 m/s, until each touches another or 2 s have passed; then the
    scene settles. Objects end in contact (or stacked), as in a bin shaken together.
    """
    rng = np.random.default_rng([config.seed, 34, 1])
    specs = pick_specs(rng, config.n_objects, config.split)
    spread = (0.04, 0.04) if config.touching else (
        config.tray_inner[0] / 2 - 0.07, config.tray_inner[1] / 2 - 0.06)
    world = SimWorld(config.seed, split=config.split, object_specs=specs,
                     spawn_region=spread, world=config)
    world.gripper.teleport([*config.tray_center, config.floor_top + 2.0], 0.0)
    if config.touching:
        centre = np.asarray(config.tray_center) + rng.uniform(-0.03, 0.03, 2)
        _herd(world, centre)
    world.settle()
    world._steps = 0
    return world


def _herd(world: SimWorld, centre: np.ndarray, seconds: float = 2.0, pull: float = 1.2) -> None:
    c = world.client
    bodies = [o.body_id for o in world.objects]
    for i in range(int(seconds * 240)):
        touching = _touching_each(world, bodies)
        if i % 24 == 0 and all(touching):
            break
        for o, in_contact in zip(world.objects, touching):
            if in_contact:
                continue
            pos, _ = o.pose
            d = centre - pos[:2]
            n = float(np.linalg.norm(d))
            v, _ = p.getBaseVelocity(o.body_id, physicsClientId=c)
            if n > 1e-3 and float(np.dot(v[:2], d)) / n < 0.15:
                f = d / n * (pull * o.mass * 9.81)
                p.applyExternalForce(o.body_id, -1, [float(f[0]), float(f[1]), 0.0],
                                     pos.tolist(), p.WORLD_FRAME, physicsClientId=c)
        world.step()


def _touching_each(world: SimWorld, bodies: list[int]) -> list[bool]:
    """Per object: whether it touches another object."""
    out = []
    for b in bodies:
        out.append(any(p.getContactPoints(b, other, physicsClientId=world.client)
                       for other in bodies if other != b))
    return out


def touching_pairs(world: SimWorld) -> int:
    """How many object pairs are in contact."""
    objs = world.objects
    return sum(1 for i in range(len(objs)) for j in range(i + 1, len(objs))
               if p.getContactPoints(objs[i].body_id, objs[j].body_id,
                                     physicsClientId=world.client))
