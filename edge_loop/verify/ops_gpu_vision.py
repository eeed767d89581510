# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Verified ops: the vision stages' torch kernels on the GPU, per dtype, against the CPU ones.

- ``object_locator.pixel_masks.cuda.<dtype>``: height, foreground and cut masks
  (:mod:`edge_loop.kernels.gpu.locator`) against the locator's own numpy/OpenCV functions;
- ``grasp_planner.score.cuda.<dtype>``: grasp-candidate scoring for a given target against the
  deployed ``plan_grasp(..., target=...)``;
- ``segnet.torch.cuda.<dtype>``: the torch module on the GPU, and ``segnet.ort.<provider>.float32``
  (``segnet.ort.cuda.float32`` for the CUDA execution provider, ``segnet.ort.vitisai.float32``
  for an NPU's): ONNX Runtime on that provider, one op per provider the installed onnxruntime
  has, both against ONNX Runtime on one CPU core (the deployed runtime).

Every performance gate is "GPU against CPU on the same host, handoff included" (pageable
copies). The references are the deployed CPU kernels except for the locator masks, whose
reference computes the cuts on the whole frame where the deployed locator cuts only the
foreground's box: that gate's speed-up (~40x on the H200) overstates the stage's gain;
``bench/placement.py`` measures the stage as deployed (docs/placement.md). Without a CUDA/ROCm
device the ops are skipped with that reason; CI runs the same torch code on the CPU
(``test/kernels/test_gpu_kernels.py``). Tolerances and why: ``config/tolerances.yaml``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from edge_loop.kernels.grasp_planner import plan_grasp
from edge_loop.kernels.object_locator import DetectedObject, locate_objects, rank_targets
from edge_loop.models import segnet
from edge_loop.placement import CPU_PROVIDER, ort_op_name
from edge_loop.verify.compare import angle_diff_mod, compare_allclose
from edge_loop.verify.ops_gpu_occupancy import MIN_SPEEDUP, gpu_op, on_gpu
from edge_loop.verify.spec import Case
from edge_loop.verify.sweeps import rgbd_inputs, scene

DTYPES = ('float32', 'float16', 'bfloat16')
# Grasp scoring: 3.1x [2.8, 3.5] side by side at VGA on the H200 (bench/results/
# placement_h200), below the 5x: the candidate-vs-obstacle test is ~20 small kernels
# even as one graph. The claim is what was measured, with margin.
GRASP_CLAIM = 2.0


# --- locator masks ----------------------------------------------------------------------------

def pixel_masks_reference(*args: Any, **kwargs: Any) -> Any:
    """The locator's numpy/OpenCV functions composed (imported late: needs torch)."""
    from edge_loop.kernels.gpu.locator import pixel_masks_reference as reference

    return reference(*args, **kwargs)


def _masks_cases() -> Iterator[Case]:
    for f in rgbd_inputs():
        yield Case(f.name, (f.color, f.depth, f.intrinsics, f.extrinsics))
    big = scene(3840, 2160, seed=12, n_boxes=6, depth_encoding='16UC1')
    yield Case('3840x2160 16UC1 6 boxes', (big.color, big.depth, big.intrinsics,
                                           big.extrinsics))
    yield Case('640x480 no colour', (None, big.depth[::4, ::6].copy()[:480, :640],
                                     big.intrinsics.scaled(640, 480), big.extrinsics))


def _vga_frame() -> Any:
    return scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')


def _masks_perf() -> Case:
    f = _vga_frame()
    return Case('640x480 16UC1, 5 boxes', (f.color, f.depth, f.intrinsics, f.extrinsics))


def compare_masks(ref: Any, dep: Any, tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Height, foreground and cut masks against the reference's.

    Height within ``height_atol_m`` (NaN at the same pixels); foreground and cut pixels that
    differ, as a share of the reference's foreground, within ``fg_fraction``/``cut_fraction``.
    """
    if ref.height.shape != dep.height.shape:
        return float('inf'), False, f'shape {dep.height.shape} != {ref.height.shape}'
    nan_diff = int(np.count_nonzero(np.isnan(ref.height) != np.isnan(dep.height)))
    both = np.isfinite(ref.height) & np.isfinite(dep.height)
    h_err = float(np.max(np.abs(ref.height[both] - dep.height[both]))) if both.any() else 0.0
    n_fg = max(int(np.count_nonzero(ref.fg)), 1)
    fg_err = np.count_nonzero(ref.fg != dep.fg) / n_fg
    cut_err = np.count_nonzero(ref.cut != dep.cut) / n_fg
    ratios = {'height': h_err / float(tol['height_atol_m']),
              'fg': fg_err / float(tol['fg_fraction']),
              'cut': cut_err / float(tol['cut_fraction'])}
    worst = max(ratios.values())
    ok = nan_diff == 0 and worst <= 1.0
    detail = (f'height max |d| {h_err:.3g} m, NaN differ {nan_diff}; fg {fg_err:.3%}, cut '
              f'{cut_err:.3%} of {n_fg} foreground px (cut {int(np.count_nonzero(ref.cut))})')
    return (worst if nan_diff == 0 else float('inf')), ok, detail


# --- grasp scoring ----------------------------------------------------------------------------

def _target(f: Any) -> DetectedObject | None:
    objs = locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)
    return objs[rank_targets(objs)[0]] if objs else None


def _grasp_cases() -> Iterator[Case]:
    last = None
    for f in rgbd_inputs():
        target = _target(f)
        if target is not None:
            last = f, target
            yield Case(f.name, (f.depth, f.intrinsics, f.extrinsics), {'target': target})
    f, target = last
    tiny = DetectedObject(position=target.position, yaw=0.0, pixel_count=3,
                          mask_bbox=(0, 0, 1, 1), score=0.0, top=target.top, elongation=1.0,
                          points=np.asarray(target.points[:3], np.float32))
    yield Case(f'{f.name}, target of 3 points (no grasp)', (f.depth, f.intrinsics,
                                                             f.extrinsics), {'target': tiny})
    big = scene(3840, 2160, seed=12, n_boxes=6, depth_encoding='16UC1')
    yield Case('3840x2160 16UC1 6 boxes', (big.depth, big.intrinsics, big.extrinsics),
               {'target': _target(big)})


def _grasp_perf() -> Case:
    f = _vga_frame()
    return Case('640x480 16UC1, 5 boxes, first target', (f.depth, f.intrinsics, f.extrinsics),
                {'target': _target(f)})


def compare_grasp_choice(ref: list[Any], dep: list[Any], tol: dict[str, Any]
                         ) -> tuple[float, bool, str]:
    """Both empty, or the deployed best grasp is one of the reference's near-best candidates.

    Near-best: quality within ``quality_slack`` of the best; the match is within the
    centre/yaw/opening limits.

    With slack 0 this is ``ops_vision.compare_grasps``; reduced precision may reorder two
    candidates whose qualities differ by less than its rounding, and either is as good a grasp.
    """
    if not ref or not dep:
        ok = not ref and not dep
        return (0.0 if ok else float('inf')), ok, (
            'both found no grasp' if ok else f'reference {len(ref)} vs {len(dep)} candidates')
    d = dep[0]
    best_q = ref[0].quality
    limits = (float(tol['center_m']), np.radians(float(tol['yaw_deg'])),
              float(tol['opening_m']))
    best_ratio, best_i = float('inf'), -1
    for i, r in enumerate(ref):
        if r.quality < best_q - float(tol.get('quality_slack', 0.0)) - 1e-12:
            break
        errs = (float(np.linalg.norm(np.asarray(r.center) - d.center)),
                angle_diff_mod(r.yaw, d.yaw, np.pi), abs(r.opening - d.opening))
        ratio = max(e / lim for e, lim in zip(errs, limits, strict=True))
        if ratio < best_ratio:
            best_ratio, best_i = ratio, i
    ok = best_ratio <= 1.0
    detail = (f'best grasp matches reference candidate {best_i} (quality '
              f'{ref[best_i].quality:.4f} vs best {best_q:.4f}), worst/limit {best_ratio:.3g}'
              if best_i >= 0 else 'no reference candidate within the quality slack')
    return best_ratio, ok, detail


# --- segnet -----------------------------------------------------------------------------------

def segnet_ort_cpu(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The deployed runtime: ONNX Runtime on one CPU core."""
    return segnet.load_segnet().session.run(None, {segnet.SEGNET_INPUT: inputs[
        segnet.SEGNET_INPUT]})


def _segnet_inputs() -> Iterator[tuple[str, np.ndarray]]:
    from edge_loop.kernels.object_locator import height_scene

    for w, h in ((640, 480), (1280, 720)):
        f = scene(w, h, seed=5, n_boxes=5, depth_encoding='16UC1')
        yield f'{w}x{h} box scene', segnet.prepare_inputs(
            f.color, height_scene(f.depth, f.intrinsics, f.extrinsics).height)
    shape = (1, 5, segnet.INPUT_H, segnet.INPUT_W)
    yield 'all-zero input', np.zeros(shape, np.float32)
    yield 'saturated colour, no depth', segnet.prepare_inputs(
        np.full((480, 640, 3), 255, np.uint8), np.full((480, 640), np.nan, np.float32))
    yield 'random normal input', np.random.default_rng(5).standard_normal(shape).astype(
        np.float32)


def _segnet_cases() -> Iterator[Case]:
    for name, x in _segnet_inputs():
        yield Case(name, ({segnet.SEGNET_INPUT: x},))


def _segnet_perf() -> Case:
    return next(iter(_segnet_cases()))


def compare_logits(ref: list[np.ndarray], dep: list[np.ndarray], tol: dict[str, Any]
                   ) -> tuple[float, bool, str]:
    """The first output (logits) with rtol/atol."""
    return compare_allclose(ref[0], dep[0], tol)


# Providers that are not a processor of this host (Azure: inference on a remote endpoint).
NOT_LOCAL_PROVIDERS = ('AzureExecutionProvider',)
# Providers that run on what torch calls the ``cuda`` device (CUDA, ROCm/HIP).
GPU_PROVIDERS = ('CUDAExecutionProvider', 'ROCMExecutionProvider',
                 'MIGraphXExecutionProvider')


def ort_accelerators() -> list[str]:
    """The installed onnxruntime's providers that run segnet off the CPU, on this host.

    One op ``segnet.ort.<provider>.float32`` each (:func:`edge_loop.placement.ort_op_name`): an
    op that can never run on a host is not one to gate there, and a provider a node is asked
    to use (an NPU's, say) is placed only once that op passed here. The plain onnxruntime
    wheel (the robot's, and the H200 image's 1.30.0) has none.
    """
    try:
        import onnxruntime
    except ImportError:
        return []
    return [p for p in onnxruntime.get_available_providers()
            if p not in (CPU_PROVIDER, *NOT_LOCAL_PROVIDERS)]


def _ort_on(provider: str):
    """The segnet forward through ONNX Runtime on ``provider`` (the CPU provider as fallback)."""

    def forward(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        from edge_loop.kernels.gpu.segnet import segnet_ort_on

        device = 'cuda:0' if provider in GPU_PROVIDERS else 'cpu'
        return segnet_ort_on(device, [provider])(inputs)

    forward.__name__ = f'segnet_ort_{provider.removesuffix("ExecutionProvider").lower()}'
    return forward


def _ort_op(provider: str) -> Any:
    from edge_loop.kernels.gpu.segnet import ort_session

    on_gpu_device = provider in GPU_PROVIDERS
    deployed = _ort_on(provider)
    deployed.__wrapped__ = ort_session
    # A GPU: the 5x. Any other provider (an NPU): it must at least not be slower
    # than the CPU provider it replaces; a tolerance row of its own in tolerances.yaml,
    # reasoned for that provider's arithmetic, is what lets it pass the equivalence gate.
    return gpu_op(name=ort_op_name('segnet', provider), reference=segnet_ort_cpu,
                  deployed=deployed, cases=_segnet_cases, compare=compare_logits,
                  perf_case=_segnet_perf,
                  claimed_speedup=MIN_SPEEDUP if on_gpu_device else 1.0,
                  artifact=str(segnet.ONNX_PATH), device='cuda' if on_gpu_device else 'cpu',
                  dtypes=('float32',), libraries=('numpy', 'onnx', 'onnxruntime'))


OPS = [
    *(gpu_op(name=f'object_locator.pixel_masks.cuda.{dt}', reference=pixel_masks_reference,
             deployed=on_gpu('edge_loop.kernels.gpu.locator:masks_on', dt,
                             'edge_loop.kernels.gpu.locator:pixel_masks'),
             cases=_masks_cases, compare=compare_masks, perf_case=_masks_perf,
             claimed_speedup=MIN_SPEEDUP, device='cuda', dtypes=('uint8', 'uint16', 'float32'),
             libraries=('numpy', 'opencv', 'torch')) for dt in DTYPES),
    *(gpu_op(name=f'grasp_planner.score.cuda.{dt}', reference=plan_grasp,
             deployed=on_gpu('edge_loop.kernels.gpu.grasp:plan_grasp_on', dt,
                             'edge_loop.kernels.gpu.grasp:score_candidates'),
             cases=_grasp_cases, compare=compare_grasp_choice, perf_case=_grasp_perf,
             claimed_speedup=GRASP_CLAIM, device='cuda', dtypes=('uint16', 'float32'),
             libraries=('numpy', 'opencv', 'torch')) for dt in DTYPES),
    *(gpu_op(name=f'segnet.torch.cuda.{dt}', reference=segnet_ort_cpu,
             deployed=on_gpu('edge_loop.kernels.gpu.segnet:segnet_torch_on', dt,
                             'edge_loop.kernels.gpu.segnet:torch_segnet'),
             cases=_segnet_cases, compare=compare_logits, perf_case=_segnet_perf,
             claimed_speedup=MIN_SPEEDUP, artifact=str(segnet.ONNX_PATH), device='cuda',
             dtypes=('float32',), libraries=('numpy', 'onnx', 'onnxruntime', 'torch'))
      for dt in DTYPES),
    *(_ort_op(p) for p in ort_accelerators()),
]
