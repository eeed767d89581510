# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Shape, dtype and layout sweeps that every op module reuses.

The sweep covers what a reviewer skips: frame sizes from 320x240 to 1920x1080 and an odd
641x479, ``16UC1`` (uint16 mm) and ``32FC1`` (float32 m) depth, all-zero / all-NaN /
one-valid-pixel depth, saturated and black colour, non-contiguous and read-only views (as
shared memory hands them out), and colour blurred along the rows as a shaking camera blurs
it. Scenes are rendered by ray casting boxes on the table plane (z = 0) for any camera pose,
so every size has real objects in it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

import cv2
import numpy as np

from edge_loop.kernels.camera import (
    D435_VGA,
    DEFAULT_CAMERA_ORIENTATION,
    DEFAULT_CAMERA_POSITION,
    Extrinsics,
    Intrinsics,
)

# (width, height): the sizes of the sweep; 641x479 catches even-size and alignment assumptions.
SIZES = ((320, 240), (640, 480), (641, 479), (1280, 720), (1920, 1080))
DEPTH_ENCODINGS = ('16UC1', '32FC1')
TABLE_RGB = (150, 140, 120)


@dataclass(frozen=True)
class Box:
    """An upright box on the table: centre (x, y) in world, yaw, size (sx, sy, sz), colour."""

    x: float
    y: float
    yaw: float
    sx: float
    sy: float
    sz: float
    z0: float = 0.0
    rgb: tuple[int, int, int] = (200, 40, 40)


@dataclass(frozen=True)
class RgbdInput:
    """One frame of a sweep: colour (RGB), depth in its encoding, and the camera model."""

    name: str
    color: np.ndarray
    depth: np.ndarray
    depth_encoding: str
    intrinsics: Intrinsics
    extrinsics: Extrinsics
    boxes: tuple[Box, ...] = field(default=(), compare=False)

    def depth_m(self) -> np.ndarray:
        """Depth as float32 metres with NaN where there is no data."""
        if self.depth_encoding == '16UC1':
            out = self.depth.astype(np.float32) * np.float32(0.001)
            out[self.depth == 0] = np.nan
            return out
        out = np.array(self.depth, dtype=np.float32)
        out[~np.isfinite(out) | (out <= 0)] = np.nan
        return out


def default_extrinsics() -> Extrinsics:
    """The contract's default camera: 0.75 m above the tray, looking straight down."""
    return Extrinsics.from_params(DEFAULT_CAMERA_POSITION, DEFAULT_CAMERA_ORIENTATION)


def tilted_extrinsics(tilt_deg: float = 15.0) -> Extrinsics:
    """A camera tilted about world x and moved back so it still sees the tray centre."""
    a = np.radians(tilt_deg)
    # Start from looking straight down (optical = diag(1,-1,-1)), rotate about world x.
    down = np.diag([1.0, -1.0, -1.0])
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    rot = rx @ down
    dist = 0.75
    pos = -rot[:, 2] * dist  # optical axis through the origin
    return Extrinsics(rot, pos)


def default_boxes(seed: int = 0, n: int = 4) -> tuple[Box, ...]:
    """``n`` separated boxes of graspable size at random yaw inside the tray."""
    rng = np.random.default_rng(seed)
    slots = [(-0.12, -0.08), (0.0, -0.08), (0.12, -0.08), (-0.12, 0.08), (0.0, 0.08),
             (0.12, 0.08)]
    order = rng.permutation(len(slots))[:n]
    colours = [(200, 40, 40), (40, 160, 60), (40, 60, 200), (220, 200, 40), (160, 60, 160),
               (40, 180, 180)]
    boxes = []
    for i, k in enumerate(order):
        x, y = slots[k]
        boxes.append(Box(x + rng.uniform(-0.015, 0.015), y + rng.uniform(-0.015, 0.015),
                         float(rng.uniform(-np.pi / 2, np.pi / 2)),
                         float(rng.uniform(0.03, 0.06)), float(rng.uniform(0.015, 0.035)),
                         float(rng.uniform(0.02, 0.06)), rgb=colours[i % len(colours)]))
    return tuple(boxes)


def render_boxes(boxes: tuple[Box, ...] | list[Box], intrinsics: Intrinsics,
                 extrinsics: Extrinsics) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ray-cast ``boxes`` on the table plane z = 0.

    Returns:
        (color RGB uint8 (H, W, 3), depth float32 metres along the optical axis (H, W), NaN
        where the ray misses everything, label int32 (H, W): 0 table/none, k = box k-1).

    """
    h, w = intrinsics.height, intrinsics.width
    u = (np.arange(w, dtype=np.float64) - intrinsics.cx) / intrinsics.fx
    v = (np.arange(h, dtype=np.float64) - intrinsics.cy) / intrinsics.fy
    rays_cam = np.stack(np.broadcast_arrays(u[None, :], v[:, None], np.ones((h, w))), axis=-1)
    rays = rays_cam @ extrinsics.rotation.T          # world direction per unit optical depth
    origin = extrinsics.translation
    best = np.full((h, w), np.inf)
    label = np.zeros((h, w), np.int32)
    shade = np.ones((h, w))
    # Table plane z = 0 (t = optical depth because rays have unit optical z).
    with np.errstate(divide='ignore', invalid='ignore'):
        t_table = -origin[2] / rays[..., 2]
    hit = t_table > 0
    best[hit] = t_table[hit]
    for k, box in enumerate(boxes, start=1):
        c, s = np.cos(box.yaw), np.sin(box.yaw)
        to_local = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        o = to_local @ (origin - np.array([box.x, box.y, box.z0 + box.sz / 2]))
        d = rays @ to_local.T
        half = np.array([box.sx, box.sy, box.sz]) / 2
        with np.errstate(divide='ignore', invalid='ignore'):
            t1 = (-half - o) / d
            t2 = (half - o) / d
        t_near = np.nanmax(np.minimum(t1, t2), axis=-1)
        t_far = np.nanmin(np.maximum(t1, t2), axis=-1)
        inside = (t_near <= t_far) & (t_near > 0) & (t_near < best)
        best[inside] = t_near[inside]
        label[inside] = k
        # Faces whose normal is not up look darker: a cheap cue for the colour image.
        axis = np.argmax(np.minimum(t1, t2), axis=-1)
        shade[inside] = np.where(axis[inside] == 2, 1.0, 0.7)
    depth = np.where(np.isfinite(best), best, np.nan).astype(np.float32)
    color = np.empty((h, w, 3), np.uint8)
    color[:] = TABLE_RGB
    for k, box in enumerate(boxes, start=1):
        m = label == k
        color[m] = (np.asarray(box.rgb)[None, :] * shade[m][:, None]).astype(np.uint8)
    return color, depth, label


@functools.lru_cache(maxsize=32)
def _render_cached(boxes: tuple[Box, ...], intr: Intrinsics, rotation: bytes,
                   translation: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Rendering is the slow part of a sweep: each op's sweep reuses the same frames."""
    ext = Extrinsics(np.frombuffer(rotation).reshape(3, 3), np.frombuffer(translation))
    color, depth, _ = render_boxes(boxes, intr, ext)
    return color, depth


def render_height_field(height_of, intrinsics: Intrinsics, extrinsics: Extrinsics,
                        floor: float = 0.005) -> tuple[np.ndarray, np.ndarray]:
    """(depth in m, world points (H, W, 3)) of a surface z = max(height_of(x, y), floor).

    Ray casting by fixed-point iteration (the depth where each ray meets the surface), for
    smooth fields such as slabs leaning into a valley; ``height_of`` takes world x, y arrays.
    """
    u = (np.arange(intrinsics.width) - intrinsics.cx) / intrinsics.fx
    v = (np.arange(intrinsics.height) - intrinsics.cy) / intrinsics.fy
    uu, vv = np.meshgrid(u, v)
    rays = np.stack([uu, vv, np.ones_like(uu)], -1) @ extrinsics.rotation.T
    o = extrinsics.translation
    depth = np.full(uu.shape, (floor - o[2]) / rays[..., 2].mean())
    for _ in range(60):
        p = o + depth[..., None] * rays
        depth = (np.maximum(height_of(p[..., 0], p[..., 1]), floor) - o[2]) / rays[..., 2]
    return depth, o + depth[..., None] * rays


def encode_depth(depth_m: np.ndarray, encoding: str) -> np.ndarray:
    """``16UC1`` uint16 millimetres (0 = none) or ``32FC1`` float32 metres (NaN = none)."""
    if encoding == '16UC1':
        mm = np.where(np.isfinite(depth_m), np.round(depth_m * 1000.0), 0)
        return np.clip(mm, 0, 65535).astype(np.uint16)
    if encoding == '32FC1':
        return np.asarray(depth_m, dtype=np.float32).copy()
    raise ValueError(f'unknown depth encoding {encoding!r}')


def non_contiguous(arr: np.ndarray) -> np.ndarray:
    """The same values as a strided view (every other column of a wider buffer)."""
    wide = np.zeros((arr.shape[0], arr.shape[1] * 2) + arr.shape[2:], dtype=arr.dtype)
    wide[:, ::2] = arr
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    return view


def read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view with the same layout (writing raises, as a shared-memory sample does)."""
    out = arr.view()
    out.flags.writeable = False
    return out


def scene(width: int = 640, height: int = 480, *, seed: int = 0, n_boxes: int = 4,
          depth_encoding: str = '32FC1', extrinsics: Extrinsics | None = None,
          boxes: tuple[Box, ...] | None = None, name: str | None = None) -> RgbdInput:
    """One rendered frame of boxes at ``width`` x ``height``."""
    intr = D435_VGA.scaled(width, height)
    ext = extrinsics if extrinsics is not None else default_extrinsics()
    boxes = default_boxes(seed, n_boxes) if boxes is None else boxes
    color, depth = _render_cached(tuple(boxes), intr, ext.rotation.tobytes(),
                                  ext.translation.tobytes())
    color, depth = color.copy(), depth.copy()
    return RgbdInput(name or f'{width}x{height} {depth_encoding} {len(boxes)} boxes',
                     color, encode_depth(depth, depth_encoding), depth_encoding, intr, ext,
                     boxes)


def motion_blurred(color: np.ndarray, length: int = 15, vertical: bool = False) -> np.ndarray:
    """``color`` (uint8 RGB) blurred along its rows (columns) as the simulated camera blurs it.

    A box of ``length`` px in linear light (gamma 2.2), rounded back to 8 bits.
    """
    lin = ((np.asarray(color, np.float32) / 255.0) ** 2.2).astype(np.float32)
    kernel = np.full((1, length), 1.0 / length, np.float32)
    lin = cv2.filter2D(lin, -1, kernel.T if vertical else kernel,
                       borderType=cv2.BORDER_REPLICATE)
    return np.clip(np.rint(255.0 * lin ** (1 / 2.2)), 0, 255).astype(np.uint8)


def rgbd_inputs(seed: int = 0, sizes: tuple[tuple[int, int], ...] = SIZES) -> Iterator[RgbdInput]:
    """The standard sweep of RGB-D frames (see the module docstring)."""
    for w, h in sizes:
        for enc in DEPTH_ENCODINGS:
            yield scene(w, h, seed=seed, depth_encoding=enc)
    base = scene(640, 480, seed=seed + 1)
    yield scene(640, 480, seed=seed + 2, extrinsics=tilted_extrinsics(15.0),
                name='640x480 camera tilted 15 deg')
    yield scene(640, 480, seed=seed, boxes=(), name='640x480 empty table')
    crowded = (Box(0.0, 0.0, 0.3, 0.05, 0.03, 0.04, rgb=(200, 40, 40)),
               Box(0.045, 0.01, -0.2, 0.05, 0.03, 0.025, rgb=(40, 40, 200)))
    yield scene(640, 480, boxes=crowded, name='640x480 two touching boxes of different height')
    for w, h in ((640, 480), (1280, 720)):
        blurred = scene(w, h, seed=seed + 4, n_boxes=6)
        yield RgbdInput(f'{w}x{h} motion-blurred colour', motion_blurred(blurred.color),
                        blurred.depth, blurred.depth_encoding, blurred.intrinsics,
                        blurred.extrinsics, blurred.boxes)
    dark = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(30, 20, 60)),
            Box(0.03, 0.0, 0.0, 0.01, 0.08, 0.03, rgb=(30, 20, 60)),
            Box(-0.045, 0.0, 0.0, 0.04, 0.04, 0.03, rgb=(200, 180, 40)))
    thin = scene(641, 479, boxes=dark)
    yield RgbdInput('641x479 motion-blurred dark object with a thin part', motion_blurred(
        thin.color), thin.depth, thin.depth_encoding, thin.intrinsics, thin.extrinsics, dark)
    for enc in DEPTH_ENCODINGS:
        zero = np.zeros(base.depth.shape, np.uint16 if enc == '16UC1' else np.float32)
        yield RgbdInput(f'640x480 {enc} all-zero depth', base.color, zero, enc,
                        base.intrinsics, base.extrinsics)
    yield RgbdInput('640x480 32FC1 all-NaN depth', base.color,
                    np.full(base.depth.shape, np.nan, np.float32), '32FC1', base.intrinsics,
                    base.extrinsics)
    one = np.zeros_like(base.depth)
    one[240, 320] = base.depth[240, 320]
    yield RgbdInput('640x480 32FC1 one valid pixel', base.color, one, '32FC1',
                    base.intrinsics, base.extrinsics)
    yield RgbdInput('640x480 saturated colour', np.full_like(base.color, 255), base.depth,
                    base.depth_encoding, base.intrinsics, base.extrinsics, base.boxes)
    yield RgbdInput('640x480 black colour', np.zeros_like(base.color), base.depth,
                    base.depth_encoding, base.intrinsics, base.extrinsics, base.boxes)
    yield RgbdInput('640x480 non-contiguous views', non_contiguous(base.color),
                    non_contiguous(base.depth), base.depth_encoding, base.intrinsics,
                    base.extrinsics, base.boxes)
    s16 = scene(640, 480, seed=seed + 3, depth_encoding='16UC1')
    yield RgbdInput('640x480 16UC1 read-only views', read_only(s16.color), read_only(s16.depth),
                    '16UC1', s16.intrinsics, s16.extrinsics, s16.boxes)
    yield RgbdInput('640x480 32FC1 read-only non-contiguous', read_only(base.color),
                    read_only(non_contiguous(base.depth)), '32FC1', base.intrinsics,
                    base.extrinsics, base.boxes)


def negative_stride(arr: np.ndarray) -> np.ndarray:
    """The same values as a view with negative strides (a flipped view of a flipped copy)."""
    view = np.flip(np.ascontiguousarray(np.flip(arr, axis=(0, 1))), axis=(0, 1))
    assert view.strides[0] < 0 and view.strides[1] < 0
    return view


def camera_at_height(height_m: float) -> Extrinsics:
    """The default downward camera moved to ``height_m`` above the table."""
    ext = default_extrinsics()
    return Extrinsics(ext.rotation, np.array([ext.translation[0], ext.translation[1],
                                              height_m]))


def category_inputs(seed: int = 0) -> Iterator[RgbdInput]:
    """The failure-category frames besides :func:`rgbd_inputs` (spec.CATEGORIES).

    A one-pixel frame, 0x0 frames, prime sizes, negative-stride views, depth with inf
    pixels, the camera at the D435's near end (0.2 m) and far (3 m) above the table, raw
    16UC1 extremes (1 mm and 65535 mm pixels), and 3840x2160 frames of both encodings.
    """
    base = scene(640, 480, seed=seed + 1)
    for enc in DEPTH_ENCODINGS:
        one = scene(1, 1, seed=seed, depth_encoding=enc, name=f'1x1 {enc} single pixel')
        yield one
        dtype = np.uint16 if enc == '16UC1' else np.float32
        yield RgbdInput(f'0x0 {enc} empty frame', np.zeros((0, 0, 3), np.uint8),
                        np.zeros((0, 0), dtype), enc, Intrinsics(615.0, 615.0, 0.0, 0.0, 0, 0),
                        default_extrinsics())
    yield scene(331, 241, seed=seed + 5, depth_encoding='16UC1',
                name='331x241 16UC1 prime size')
    yield scene(479, 317, seed=seed + 6, depth_encoding='32FC1',
                name='479x317 32FC1 prime size')
    s16 = scene(640, 480, seed=seed + 3, depth_encoding='16UC1')
    yield RgbdInput('640x480 16UC1 negative stride views', negative_stride(s16.color),
                    negative_stride(s16.depth), '16UC1', s16.intrinsics, s16.extrinsics,
                    s16.boxes)
    yield RgbdInput('640x480 32FC1 negative stride views', negative_stride(base.color),
                    negative_stride(base.depth), '32FC1', base.intrinsics, base.extrinsics,
                    base.boxes)
    inf = np.array(base.depth, copy=True)
    inf[::7, ::5] = np.inf
    inf[100:140, 200:260] = -np.inf
    yield RgbdInput('640x480 32FC1 inf depth pixels', base.color, inf, '32FC1',
                    base.intrinsics, base.extrinsics, base.boxes)
    for h, what in ((0.2, 'near'), (3.0, 'far')):
        for enc in DEPTH_ENCODINGS:
            yield scene(640, 480, seed=seed + 7, depth_encoding=enc,
                        extrinsics=camera_at_height(h),
                        name=f'640x480 {enc} depth extremes: camera {h:g} m above ({what})')
    raw = np.array(s16.depth, copy=True)
    raw[::9, ::4] = 65535
    raw[3::9, ::4] = 1
    yield RgbdInput('640x480 16UC1 depth extremes: 1 mm and 65535 mm pixels', s16.color, raw,
                    '16UC1', s16.intrinsics, s16.extrinsics, s16.boxes)
    for enc in DEPTH_ENCODINGS:
        yield scene(3840, 2160, seed=seed, depth_encoding=enc)
