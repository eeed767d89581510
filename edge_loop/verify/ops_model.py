# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Verified ops of the learned model segnet and of the locator fused with it.

- ``segnet.onnx``: ONNX reference evaluator vs ONNX Runtime (one thread) on the shipped
  ``edge_loop/models/segnet.onnx``;
- ``segnet.torch``: the training code's torch module (weights read back from the ONNX file)
  vs ONNX Runtime; skipped with its reason where torch is missing (robot, CI);
- ``object_locator.fused``: :func:`locate_objects_fused` with the reference locator vs the
  deployed one, both given the same model outputs (real segnet, and fixed stub outputs that
  force the hole-fill and the merge paths), with the object_locator's task-level compare.

Model cases: real simulator frames (training objects, two lightings) prepared exactly as the
runtime does, plus an all-zero input, a saturated colour image with zero depth, a black image
and random normal inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from edge_loop.kernels.object_locator import (
    height_scene,
    locate_objects_fused,
)
from edge_loop.models import segnet
from edge_loop.verify.models import onnx_model_ops
from edge_loop.verify.ops_vision import compare_objects
from edge_loop.verify.spec import Case, OpSpec, category_of
from edge_loop.verify.sweeps import Box, camera_at_height, category_inputs, scene


@functools.lru_cache(maxsize=1)
def _sim_frames() -> tuple:
    """Two simulator frames; none where the simulator (pybullet) is not installed."""
    try:
        from edge_loop.sim.world import SimWorld
    except ImportError:          # e.g. a GPU host without pybullet: the box scenes remain
        return ()

    frames = []
    with SimWorld(424242, split='train', n_objects=4) as world:
        for cond in ('nominal', 'glare'):
            world.set_lighting(cond)
            f = world.render()
            frames.append((cond, f.color, f.depth_mm, f.intrinsics, world.extrinsics))
    return tuple(frames)


@functools.lru_cache(maxsize=1)
def _model_inputs() -> tuple[tuple[str, np.ndarray], ...]:
    out = []
    for cond, color, depth, intr, ext in _sim_frames():
        x = segnet.prepare_inputs(color, height_scene(depth, intr, ext).height)
        out.append((f'sim frame 640x480 ({cond}, train objects)', x))
    shape = (1, 5, segnet.INPUT_H, segnet.INPUT_W)
    out.append(('all-zero input', np.zeros(shape, np.float32)))
    h = np.full((480, 640), np.nan, np.float32)
    out.append(('saturated colour, zero depth',
                segnet.prepare_inputs(np.full((480, 640, 3), 255, np.uint8), h)))
    base = scene(640, 480, seed=3, depth_encoding='16UC1')
    out.append(('black colour, box scene depth', segnet.prepare_inputs(
        np.zeros((480, 640, 3), np.uint8),
        height_scene(base.depth, base.intrinsics, base.extrinsics).height)))
    rng = np.random.default_rng(5)
    out.append(('random normal input', rng.standard_normal(shape).astype(np.float32)))
    near = scene(640, 480, seed=6, depth_encoding='16UC1', extrinsics=camera_at_height(0.2))
    out.append(('depth extremes: camera 0.2 m above the table', segnet.prepare_inputs(
        near.color, height_scene(near.depth, near.intrinsics, near.extrinsics).height)))
    big = np.zeros(shape, np.float32)
    big[:, 3:] = 1e3     # heights far beyond any object (channels 3-4: height features)
    out.append(('depth extremes: height features at 1e3', big))
    return tuple(out)


# Category of each model input (the names are for readers, not for the name rules).
_MODEL_CATEGORIES = {
    'all-zero input': 'NaN/inf/zero depth',
    'saturated colour, zero depth': 'saturated/black colour',
    'black colour, box scene depth': 'saturated/black colour',
    'random normal input': 'nominal',
}
MODEL_NOT_APPLICABLE = {c: 'the model input is always 1x5x120x160 float32 '
                        '(segnet.prepare_inputs resizes every frame)'
                        for c in ('empty', 'single pixel', 'odd/prime size', 'large 1920x1080',
                                  'huge 3840x2160')}


def _segnet_cases() -> Iterator[Case]:
    for name, x in _model_inputs():
        yield Case(name, ({segnet.SEGNET_INPUT: x},),
                   category=_MODEL_CATEGORIES.get(name, category_of(name)))
    x = _model_inputs()[0][1]
    yield Case('non-contiguous input (every other element of a wider buffer)',
               ({segnet.SEGNET_INPUT: non_contiguous_last_axis(x)},),
               category='non-contiguous/negative stride')
    yield Case('negative stride input', ({segnet.SEGNET_INPUT: np.flip(
        np.ascontiguousarray(np.flip(x, axis=-1)), axis=-1)},),
        category='non-contiguous/negative stride')


def non_contiguous_last_axis(x: np.ndarray) -> np.ndarray:
    """The same values as a view on every other element of a twice-as-wide buffer."""
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def _torch_forward(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import torch

    torch.set_num_threads(1)   # one core, as ONNX Runtime runs
    return segnet.torch_forward(inputs)


class StubModel:
    """Fixed model outputs (for the fused-locator equivalence cases)."""

    def __init__(self, fg: float, contact: float, hole: tuple[float, float, float] | None = None
                 ) -> None:
        """Constant logits; ``hole`` = (u, v, radius) in 80x60 cells gets foreground +5."""
        self.out = np.zeros((2, segnet.OUTPUT_H, segnet.OUTPUT_W), np.float32)
        self.out[0], self.out[1] = fg, contact
        if hole is not None:
            vv, uu = np.mgrid[0:segnet.OUTPUT_H, 0:segnet.OUTPUT_W]
            self.out[0][(uu - hole[0]) ** 2 + (vv - hole[1]) ** 2 < hole[2] ** 2] = 5.0

    def logits(self, inputs: np.ndarray) -> np.ndarray:
        """The fixed (2, 60, 80) logits."""
        return self.out


def _punch_hole(depth: np.ndarray, u: float, v: float, r: float) -> np.ndarray:
    out = np.array(depth, copy=True)
    vv, uu = np.mgrid[0:out.shape[0], 0:out.shape[1]]
    out[(uu - u) ** 2 + (vv - v) ** 2 < r * r] = 0
    return out


def _fused_cases() -> Iterator[Case]:
    real = segnet.load_segnet()
    for cond, color, depth, intr, ext in _sim_frames():
        yield Case(f'sim 640x480 {cond}, segnet', (color, depth, intr, ext),
                   {'model': real})
    split = (Box(0.0, 0.0, 0.2, 0.12, 0.05, 0.03, rgb=(200, 40, 40)),
             Box(0.1, 0.05, 0.0, 0.04, 0.04, 0.05, rgb=(40, 160, 40)))
    f = scene(640, 480, boxes=split, depth_encoding='16UC1', name='split')
    # A 40 px hole across the long box cuts it in two depth parts.
    holed = _punch_hole(f.depth, 320, 240, 40)
    yield Case('640x480 box cut by a depth hole, stub fills the hole',
               (f.color, holed, f.intrinsics, f.extrinsics),
               {'model': StubModel(-5.0, 5.0, hole=(40, 30, 7))})
    yield Case('640x480 box cut by a depth hole, segnet', (f.color, holed, f.intrinsics,
                                                          f.extrinsics), {'model': real})
    two = (Box(0.0, 0.0, 0.3, 0.05, 0.03, 0.04, rgb=(200, 40, 40)),
           Box(0.045, 0.01, -0.2, 0.05, 0.03, 0.025, rgb=(40, 40, 200)))
    t = scene(640, 480, boxes=two, depth_encoding='32FC1', name='two')
    yield Case('640x480 two touching boxes, stub says no contact (merge)',
               (t.color, t.depth, t.intrinsics, t.extrinsics),
               {'model': StubModel(5.0, -5.0)})
    yield Case('640x480 two touching boxes, segnet', (t.color, t.depth, t.intrinsics,
                                                      t.extrinsics), {'model': real})
    s = scene(320, 240, seed=4, depth_encoding='32FC1')
    yield Case('320x240 32FC1, segnet', (s.color, s.depth, s.intrinsics, s.extrinsics),
               {'model': real})
    zero = np.zeros_like(f.depth)
    yield Case('640x480 all-zero depth, segnet', (f.color, zero, f.intrinsics, f.extrinsics),
               {'model': real})
    yield Case('640x480 saturated colour, segnet', (np.full_like(f.color, 255), f.depth,
                                                    f.intrinsics, f.extrinsics),
               {'model': real})
    yield from _fused_category_cases(real)


def _fused_category_cases(real: object) -> Iterator[Case]:
    """Category frames of the shared sweep through the fused locator (segnet)."""
    for rgbd in category_inputs(seed=8):
        name = rgbd.name
        if 'camera 3 m' in name or ('32FC1' in name and ('0x0' in name or '1x1' in name)):
            continue   # one frame per size is enough here; the far camera sees nothing
        yield Case(f'{name}, segnet', (rgbd.color, rgbd.depth, rgbd.intrinsics,
                                       rgbd.extrinsics), {'model': real},
                   full_only='3840x2160' in name)
    f = scene(1920, 1080, seed=9, depth_encoding='16UC1')
    yield Case(f'{f.name}, segnet', (f.color, f.depth, f.intrinsics, f.extrinsics),
               {'model': real}, full_only=True)


def _fused_perf() -> Case:
    return next(iter(_fused_cases()))


def locate_objects_fused_reference(*args, **kwargs):
    """The fused locator with the plain reference locator inside."""
    return locate_objects_fused(*args, reference=True, **kwargs)


# segnet.onnx is one op (ONNX reference evaluator vs ONNX Runtime), segnet.torch the other
# (torch module vs ONNX Runtime); claims from measurements (docs/verification.md, "Claims").
_SEGNET_ONNX, _SEGNET_TORCH = onnx_model_ops('segnet', segnet.ONNX_PATH, _segnet_cases,
                                             _torch_forward)
OPS = [
    replace(_SEGNET_ONNX, claimed_speedup=20.0, dtypes=('float32',),
            libraries=('numpy', 'onnx', 'onnxruntime'), not_applicable=MODEL_NOT_APPLICABLE),
    # ONNX Runtime is not to be slower than the training code's torch forward: claim 1x.
    replace(_SEGNET_TORCH, claimed_speedup=1.0, dtypes=('float32',),
            libraries=('numpy', 'onnxruntime', 'torch'), not_applicable=MODEL_NOT_APPLICABLE),
    OpSpec(name='object_locator.fused', reference=locate_objects_fused_reference,
           deployed=locate_objects_fused, cases=_fused_cases, compare=compare_objects,
           perf_case=_fused_perf, claimed_speedup=4.0, artifact=str(segnet.ONNX_PATH),
           dtypes=('uint8', 'uint16', 'float32'),
           libraries=('numpy', 'opencv', 'onnxruntime')),
]
