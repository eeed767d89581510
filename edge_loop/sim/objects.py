# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Graspable objects: pybullet_data's ``random_urdfs`` and a few known shapes.

``random_urdfs`` meshes are not centred on their link frame, declare a unit inertia and are
often wider than a gripper opening, so an object is built here from its mesh: the body frame
is put at the mesh's bounding-box centre, the mesh is scaled so that its middle dimension is
2-7 cm (so it fits a 0.08 m opening along some horizontal axis however it lands), and mass and
inertia come from a solid box of its size with a plastic-like density. The scale is recorded.

Splits: objects 000-799 are for development and training, 800-999 are held out (evaluation
only). 168 (NaN vertices), 295, 297, 602 and 824 (flakes) are never used.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pybullet as p
import pybullet_data

BAD_OBJECTS = frozenset({168, 295, 297, 602, 824})
SPLITS = {
    'train': tuple(i for i in range(0, 800) if i not in BAD_OBJECTS),
    'heldout': tuple(i for i in range(800, 1000) if i not in BAD_OBJECTS),
}
KNOWN_SHAPES = ('cube', 'cylinder')
DENSITY_KG_M3 = 600.0
FILL_FACTOR = 0.5          # a random blob fills about half of its bounding box
MASS_RANGE_KG = (0.03, 0.30)
MIDDLE_DIM_RANGE_M = (0.025, 0.06)
MAX_DIM_M = 0.12
OBJECT_FRICTION = 0.9


def urdf_path(index: int) -> Path:
    """Path of ``random_urdfs/NNN/NNN.urdf``."""
    return Path(pybullet_data.getDataPath()) / 'random_urdfs' / f'{index:03d}' / f'{index:03d}.urdf'


@functools.lru_cache(maxsize=1024)
def mesh_info(index: int) -> tuple[str, np.ndarray, np.ndarray, tuple[float, ...]]:
    """(obj path, bbox centre, bbox size (both in URDF-scaled metres), rgba) of one object."""
    urdf = urdf_path(index)
    text = urdf.read_text()
    mesh_scale = mesh_info_scale(index)
    rgba_match = re.search(r'<color rgba="([^"]+)"', text)
    rgba = tuple(float(s) for s in rgba_match.group(1).split()) if rgba_match \
        else (0.6, 0.6, 0.6, 1.0)
    obj = urdf.with_suffix('.obj')
    verts = np.array([[float(x) for x in line.split()[1:4]]
                      for line in obj.read_text().splitlines() if line.startswith('v ')])
    if verts.size == 0 or not np.all(np.isfinite(verts)):
        raise ValueError(f'object {index:03d}: mesh has no finite vertices')
    lo, hi = verts.min(axis=0) * mesh_scale, verts.max(axis=0) * mesh_scale
    return str(obj), (lo + hi) / 2.0, hi - lo, rgba


@dataclass
class ObjectRecord:
    """One object in a world; ``k`` is its 1-based label in masks and ground truth."""

    k: int
    name: str                 # 'random_urdfs/NNN', 'cube' or 'cylinder'
    urdf: str | None          # source URDF (random_urdfs) or None (known shape)
    scale: float              # applied to the URDF's mesh scale (1.0 for known shapes)
    size: np.ndarray          # (3,) scaled bounding-box size in the body frame, m
    mass: float
    body_id: int
    client: int

    @property
    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), quaternion [qx, qy, qz, qw]) of the body frame in world."""
        pos, orn = p.getBasePositionAndOrientation(self.body_id, physicsClientId=self.client)
        return np.array(pos), np.array(orn)


def _box_inertia(mass: float, size: np.ndarray) -> list[float]:
    x, y, z = size
    return [mass / 12.0 * (y * y + z * z), mass / 12.0 * (x * x + z * z),
            mass / 12.0 * (x * x + y * y)]


def _mass_of(size: np.ndarray, fill: float) -> float:
    return float(np.clip(DENSITY_KG_M3 * fill * np.prod(size), *MASS_RANGE_KG))


def create_object(client: int, k: int, spec: str, rng: np.random.Generator,
                  position: np.ndarray, orientation: np.ndarray) -> ObjectRecord:
    """Create object ``spec`` ('cube', 'cylinder' or an int index as text) at a pose."""
    if spec == 'cube':
        side = float(rng.uniform(0.035, 0.055))
        size = np.array([side, side, side])
        col = p.createCollisionShape(p.GEOM_BOX, halfExtents=(size / 2).tolist(),
                                     physicsClientId=client)
        rgba = [*rng.uniform(0.1, 0.9, 3).tolist(), 1.0]
        vis = p.createVisualShape(p.GEOM_BOX, halfExtents=(size / 2).tolist(), rgbaColor=rgba,
                                  physicsClientId=client)
        name, urdf, scale, fill = 'cube', None, 1.0, 1.0
    elif spec == 'cylinder':
        radius, height = float(rng.uniform(0.018, 0.03)), float(rng.uniform(0.04, 0.08))
        size = np.array([2 * radius, 2 * radius, height])
        col = p.createCollisionShape(p.GEOM_CYLINDER, radius=radius, height=height,
                                     physicsClientId=client)
        rgba = [*rng.uniform(0.1, 0.9, 3).tolist(), 1.0]
        vis = p.createVisualShape(p.GEOM_CYLINDER, radius=radius, length=height,
                                  rgbaColor=rgba, physicsClientId=client)
        name, urdf, scale, fill = 'cylinder', None, 1.0, np.pi / 4
    else:
        index = int(spec)
        if index in BAD_OBJECTS:
            raise ValueError(f'object {index:03d} is on the bad list')
        obj, centre, raw_size, rgba = mesh_info(index)
        dims = np.sort(raw_size)
        scale = float(rng.uniform(*MIDDLE_DIM_RANGE_M)) / dims[1]
        scale = min(scale, MAX_DIM_M / dims[2])
        size = raw_size * scale
        # The URDF's mesh scale times ours; the body frame goes to the bounding-box centre.
        mesh_scale = (mesh_info_scale(index) * scale).tolist()
        offset = (-centre * scale).tolist()
        col = p.createCollisionShape(p.GEOM_MESH, fileName=obj, meshScale=mesh_scale,
                                     collisionFramePosition=offset, physicsClientId=client)
        vis = p.createVisualShape(p.GEOM_MESH, fileName=obj, meshScale=mesh_scale,
                                  visualFramePosition=offset, rgbaColor=list(rgba),
                                  physicsClientId=client)
        name, urdf, fill = f'random_urdfs/{index:03d}', str(urdf_path(index)), FILL_FACTOR
    mass = _mass_of(size, fill)
    body = p.createMultiBody(baseMass=mass, baseCollisionShapeIndex=col,
                             baseVisualShapeIndex=vis, basePosition=position.tolist(),
                             baseOrientation=orientation.tolist(), physicsClientId=client)
    p.changeDynamics(body, -1, localInertiaDiagonal=_box_inertia(mass, size),
                     lateralFriction=OBJECT_FRICTION, spinningFriction=0.002,
                     rollingFriction=0.0001, restitution=0.05, physicsClientId=client)
    return ObjectRecord(k=k, name=name, urdf=urdf, scale=float(scale), size=size,
                        mass=mass, body_id=body, client=client)


@functools.lru_cache(maxsize=1024)
def mesh_info_scale(index: int) -> np.ndarray:
    """The URDF's own mesh scale of object ``index``."""
    text = urdf_path(index).read_text()
    match = re.search(r'scale="([^"]+)"', text)
    return np.array([float(s) for s in match.group(1).split()]) if match else np.ones(3)


def pick_specs(rng: np.random.Generator, n: int, split: str,
               known_shape_prob: float = 0.2) -> list[str]:
    """``n`` object specs: mostly ``split`` objects, sometimes a cube or cylinder."""
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; use one of {", ".join(SPLITS)}')
    ids = SPLITS[split]
    out = []
    for _ in range(n):
        if rng.random() < known_shape_prob:
            out.append(KNOWN_SHAPES[int(rng.integers(len(KNOWN_SHAPES)))])
        else:
            out.append(str(ids[int(rng.integers(len(ids)))]))
    return out
