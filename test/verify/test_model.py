# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""segnet: shipped file vs its record, ONNX Runtime vs the ONNX reference and torch, fusion."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from edge_loop.kernels.object_locator import (
    FusionParams,
    locate_objects,
    locate_objects_fused,
)
from edge_loop.models import segnet
from edge_loop.verify.compare import compare_allclose
from edge_loop.verify.models import run_onnx_reference, run_onnxruntime
from edge_loop.verify.ops_model import StubModel
from edge_loop.verify.run import load_tolerances
from edge_loop.verify.sweeps import Box, scene


def _inputs() -> list[np.ndarray]:
    f = scene(640, 480, seed=3, depth_encoding='16UC1')
    from edge_loop.kernels.object_locator import height_scene

    boxes = segnet.prepare_inputs(f.color, height_scene(f.depth, f.intrinsics,
                                                        f.extrinsics).height)
    return [np.zeros((1, 5, segnet.INPUT_H, segnet.INPUT_W), np.float32), boxes]


def test_onnx_file_matches_its_record() -> None:
    meta = segnet.load_meta()
    assert segnet.sha256_file(segnet.ONNX_PATH) == meta['sha256']
    assert meta['input']['shape'] == [1, 5, segnet.INPUT_H, segnet.INPUT_W]
    assert meta['opset'] >= 17
    assert meta['parameters'] <= 100_000


def test_shipped_weights_have_no_subnormals() -> None:
    # A subnormal operand costs a microcode assist per multiply on Intel CPUs: ORT ran segnet
    # 12x slower with the 5365 that training had left.
    import onnx
    from onnx import numpy_helper

    tiny = np.finfo(np.float32).tiny
    for init in onnx.load(str(segnet.ONNX_PATH)).graph.initializer:
        w = numpy_helper.to_array(init)
        assert not ((w != 0) & (np.abs(w) < tiny)).any(), init.name


def test_training_flushes_subnormal_weights() -> None:
    torch = pytest.importorskip('torch')
    from edge_loop.models.train import flush_subnormal_parameters

    model = segnet.build_torch_model()
    with torch.no_grad():
        first = next(model.parameters())
        first.view(-1)[:3] = torch.tensor([1e-40, -3e-39, 2e-38])
    assert flush_subnormal_parameters(model) == 2   # 2e-38 is normal: kept
    assert first.view(-1)[:2].eq(0).all() and first.view(-1)[2] == np.float32(2e-38)
    assert flush_subnormal_parameters(model) == 0


def test_onnxruntime_matches_the_onnx_reference() -> None:
    tol = load_tolerances()['segnet.onnx']
    for x in _inputs():
        ref = run_onnx_reference(segnet.ONNX_PATH, {segnet.SEGNET_INPUT: x})[0]
        dep = run_onnxruntime(segnet.ONNX_PATH, {segnet.SEGNET_INPUT: x})[0]
        assert dep.shape == (1, 2, segnet.OUTPUT_H, segnet.OUTPUT_W)
        worst, ok, detail = compare_allclose(ref, dep, tol)
        assert ok, detail


@pytest.mark.skipif(importlib.util.find_spec('torch') is None,
                    reason='torch is not installed (pip install torch==2.13.0 to run this)')
def test_torch_module_matches_onnxruntime() -> None:
    tol = load_tolerances()['segnet.torch']
    for x in _inputs():
        ref = segnet.torch_forward({segnet.SEGNET_INPUT: x})[0]
        dep = run_onnxruntime(segnet.ONNX_PATH, {segnet.SEGNET_INPUT: x})[0]
        worst, ok, detail = compare_allclose(ref, dep, tol)
        assert ok, detail


def _thin_box_with_hole():
    """A 10 x 1.2 cm bar whose middle is a 74 px depth hole: two ends of < 80 px each."""
    f = scene(640, 480, boxes=(Box(0.0, 0.0, 0.0, 0.10, 0.012, 0.03, rgb=(200, 40, 40)),),
              depth_encoding='16UC1', name='bar')
    depth = np.array(f.depth, copy=True)
    vv, uu = np.mgrid[0:480, 0:640]
    depth[(uu - f.intrinsics.cx) ** 2 + (vv - f.intrinsics.cy) ** 2 < 37 ** 2] = 0
    return f, depth


def test_fused_locator_finds_an_object_cut_by_a_depth_hole() -> None:
    f, depth = _thin_box_with_hole()
    assert locate_objects(f.color, depth, f.intrinsics, f.extrinsics) == []
    model = StubModel(-5.0, 5.0, hole=(40, 30, 6))     # the model sees an object in the hole
    for reference in (False, True):
        found = locate_objects_fused(f.color, depth, f.intrinsics, f.extrinsics, model=model,
                                     reference=reference)
        assert len(found) == 1
        # Centroid from the valid depth points only: the two ends, symmetric about x = 0.
        assert np.linalg.norm(found[0].position[:2]) < 0.003
    off = locate_objects_fused(f.color, depth, f.intrinsics, f.extrinsics, model=model,
                               fusion=FusionParams(use_model=False))
    assert off == []


def test_fused_locator_merges_pieces_without_predicted_contact() -> None:
    two = (Box(0.0, 0.0, 0.3, 0.05, 0.03, 0.04, rgb=(200, 40, 40)),
           Box(0.045, 0.01, -0.2, 0.05, 0.03, 0.04, rgb=(40, 40, 200)))
    f = scene(640, 480, boxes=two, depth_encoding='32FC1', name='two')
    assert len(locate_objects(f.color, f.depth, f.intrinsics, f.extrinsics)) == 2
    apart = locate_objects_fused(f.color, f.depth, f.intrinsics, f.extrinsics,
                                 model=StubModel(5.0, 5.0))
    assert len(apart) == 2
    joined = locate_objects_fused(f.color, f.depth, f.intrinsics, f.extrinsics,
                                  model=StubModel(5.0, -5.0))
    assert len(joined) == 1
    assert joined[0].pixel_count == sum(o.pixel_count for o in apart)
