# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Named lighting conditions: renderer light settings plus sensor effects.

Each :class:`Lighting` is a mix of what TinyRenderer can do (light direction and colour,
ambient/diffuse/specular coefficients, shadows) and what a camera sensor does to the image
(exposure, gamma, colour cast, a saturated glare blob, vignette, noise, motion blur, flicker
between frames and rolling-shutter banding). Effects are applied in linear light and are
seeded by (scene seed, frame index), so the same seed gives the same images.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import cv2
import numpy as np

from edge_loop.sim.camera import block_noise


@dataclass(frozen=True)
class Glare:
    """A saturated blob (specular reflection / sun spot) in normalised image coordinates."""

    u: float = 0.62            # centre, fraction of the width
    v: float = 0.38            # centre, fraction of the height
    radius: float = 0.10       # Gaussian sigma, fraction of the width
    strength: float = 2.5      # peak added linear intensity (>= 1 saturates)
    depth_hole_level: float = 1.2  # glare intensity above which the depth camera sees nothing


@dataclass(frozen=True)
class Lighting:
    """One named condition (renderer + sensor)."""

    name: str
    light_direction: tuple[float, float, float] = (0.3, 0.2, 1.0)
    light_color: tuple[float, float, float] = (1.0, 1.0, 1.0)
    ambient: float = 0.6
    diffuse: float = 0.5
    specular: float = 0.1
    shadow: bool = True
    exposure: float = 1.0
    gamma: float = 1.0                 # applied to the display-referred image (>1 darkens)
    color_gain: tuple[float, float, float] = (1.0, 1.0, 1.0)
    vignette: float = 0.15             # relative fall-off at the image corner
    read_noise: float = 1.2            # std in 8-bit units (per 2x2 Bayer cell)
    shot_noise: float = 0.008          # std at full scale, as a fraction of full scale
    motion_blur_px: int = 0            # horizontal blur length
    flicker: float = 0.0               # per-frame gain varies uniformly in [1-f, 1+f]
    banding: float = 0.0               # rolling-shutter row banding amplitude
    glare: Glare | None = None
    description: str = field(default='', compare=False)

    def renderer_args(self) -> dict:
        """Keyword arguments of ``p.getCameraImage`` for this light."""
        return {
            'lightDirection': list(self.light_direction),
            'lightColor': list(self.light_color),
            'lightDistance': 2.0,
            'shadow': 1 if self.shadow else 0,
            'lightAmbientCoeff': self.ambient,
            'lightDiffuseCoeff': self.diffuse,
            'lightSpecularCoeff': self.specular,
        }

    def glare_map(self, width: int, height: int) -> np.ndarray | None:
        """Linear intensity (H, W) added by the glare blob, or None."""
        if self.glare is None:
            return None
        g = self.glare
        u = np.arange(width, dtype=np.float32)[None, :] - g.u * width
        v = np.arange(height, dtype=np.float32)[:, None] - g.v * height
        sigma = g.radius * width
        return g.strength * np.exp(-(u * u + v * v) / (2.0 * sigma * sigma))

    def depth_holes(self, width: int, height: int) -> np.ndarray | None:
        """Pixels where the glare blinds the depth camera (saturated IR), or None."""
        gm = self.glare_map(width, height)
        if gm is None:
            return None
        return gm > self.glare.depth_hole_level

    def apply(self, rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Sensor effects on a rendered uint8 RGB image; returns a new uint8 RGB image."""
        h, w = rgb.shape[:2]
        lin = (rgb.astype(np.float32) * np.float32(1.0 / 255.0)) ** np.float32(2.2)
        gain = self.exposure
        if self.flicker > 0:
            gain *= 1.0 + rng.uniform(-self.flicker, self.flicker)
        lin *= np.float32(gain) * np.asarray(self.color_gain, dtype=np.float32)
        if self.banding > 0:
            rows = np.arange(h, dtype=np.float32)
            phase = rng.uniform(0, 2 * np.pi)
            band = 1.0 + self.banding * np.sin(2 * np.pi * rows / 97.0 + phase)
            lin *= band[:, None, None].astype(np.float32)
        if self.vignette > 0:
            lin *= _vignette(h, w, self.vignette)[..., None]
        gm = self.glare_map(w, h)
        if gm is not None:
            lin += gm[..., None]
        if self.motion_blur_px > 1:
            kernel = np.full((1, self.motion_blur_px), 1.0 / self.motion_blur_px, np.float32)
            lin = cv2.filter2D(lin, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        np.clip(lin, 0.0, 1.0, out=lin)
        disp = lin ** np.float32(1.0 / 2.2)
        if self.gamma != 1.0:
            disp = disp ** np.float32(self.gamma)
        out = disp * np.float32(255.0)
        sigma = np.sqrt(np.float32(self.read_noise ** 2)
                        + np.float32((self.shot_noise * 255.0) ** 2) * lin)
        out += block_noise(rng, out.shape) * sigma
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _vignette(h: int, w: int, strength: float) -> np.ndarray:
    u = (np.arange(w, dtype=np.float32) - w / 2) / (w / 2)
    v = (np.arange(h, dtype=np.float32) - h / 2) / (w / 2)
    r2 = u[None, :] ** 2 + v[:, None] ** 2
    return (1.0 - strength * r2 / r2.max()).astype(np.float32)


CONDITIONS: dict[str, Lighting] = {c.name: c for c in (
    Lighting('nominal', description='even overhead light, mild vignette and sensor noise'),
    Lighting('dim', ambient=0.5, diffuse=0.4, exposure=0.12, read_noise=3.0, shot_noise=0.015,
             description='exposure far too low: dark, noisy (high gain)'),
    Lighting('overexposed', exposure=3.2, specular=0.3,
             description='exposure far too high: bright surfaces clip to white'),
    Lighting('harsh_shadow', light_direction=(1.0, 0.35, 0.4), ambient=0.12, diffuse=1.0,
             specular=0.2, exposure=1.3,
             description='low, hard side light: long dark shadows, little ambient'),
    Lighting('color_cast', light_color=(1.0, 0.8, 0.5), color_gain=(1.35, 0.95, 0.5),
             description='warm tungsten light without white balance'),
    Lighting('glare', specular=0.15, glare=Glare(),
             description='saturated glare blob; the depth camera is blind in its core'),
    Lighting('flicker', flicker=0.45, banding=0.25,
             description='mains flicker: gain changes frame to frame, rolling-shutter bands'),
    Lighting('motion_blur', motion_blur_px=15, read_noise=2.0,
             description='long exposure while the camera shakes: horizontal blur'),
)}
CONDITION_NAMES = tuple(CONDITIONS)


def get(name: str) -> Lighting:
    """The condition called ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return CONDITIONS[name]
    except KeyError:
        raise ValueError(f'unknown lighting {name!r}; known: {", ".join(CONDITIONS)}') from None
