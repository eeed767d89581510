# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The torch kernels (edge_loop/kernels/gpu) against the numpy references, on the CPU here.

The same code runs on CUDA/ROCm; the GPU-only tests at the end skip without such a device
(the GPU results are in bench/results/placement_*).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip('torch', reason='torch is needed for the GPU kernels')

from edge_loop import placement  # noqa: E402
from edge_loop.kernels import occupancy as occ  # noqa: E402
from edge_loop.kernels.gpu import grasp as ggrasp  # noqa: E402
from edge_loop.kernels.gpu import locator as gloc  # noqa: E402
from edge_loop.kernels.gpu import occupancy as gocc  # noqa: E402
from edge_loop.kernels.gpu.loop import gpu_loop_step  # noqa: E402
from edge_loop.kernels.gpu.transfer import CopyLedger, Handoff  # noqa: E402
from edge_loop.kernels.grasp_planner import plan_grasp  # noqa: E402
from edge_loop.kernels.object_locator import locate_objects, rank_targets  # noqa: E402
from edge_loop.verify import ops_gpu_occupancy, ops_gpu_vision, ops_occupancy  # noqa: E402
from edge_loop.verify.run import SkipOp, discover_ops, load_tolerances  # noqa: E402
from edge_loop.verify.sweeps import non_contiguous, read_only, scene  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason='no CUDA/ROCm device on this host')
TOL = load_tolerances()


def _frames():
    base = scene(320, 240, seed=3, n_boxes=4, depth_encoding='16UC1')
    f32 = scene(320, 240, seed=3, n_boxes=4, depth_encoding='32FC1')
    blur = scene(640, 480, seed=4, n_boxes=6, depth_encoding='16UC1')
    return [('320x240 16UC1', base.color, base.depth, base.intrinsics, base.extrinsics),
            ('320x240 32FC1', f32.color, f32.depth, f32.intrinsics, f32.extrinsics),
            ('640x480 16UC1', blur.color, blur.depth, blur.intrinsics, blur.extrinsics),
            ('non-contiguous', non_contiguous(f32.color), non_contiguous(f32.depth),
             f32.intrinsics, f32.extrinsics),
            ('read-only', read_only(base.color), read_only(base.depth), base.intrinsics,
             base.extrinsics),
            ('all-NaN depth', base.color, np.full((240, 320), np.nan, np.float32),
             base.intrinsics, base.extrinsics),
            ('no colour', None, base.depth, base.intrinsics, base.extrinsics)]


# --- placement --------------------------------------------------------------------------------

@pytest.mark.parametrize('spec, expected', [('cpu', ('cpu', None)), ('cuda', ('cuda', None)),
                                            ('cuda:1', ('cuda', 1)), ('AUTO', ('auto', None))])
def test_parse_device_accepts_the_four_spellings(spec, expected):
    assert placement.parse_device(spec) == expected


@pytest.mark.parametrize('spec', ['gpu', 'cpu:0', 'cuda:', 'cuda:x', 'npu', ''])
def test_parse_device_rejects_anything_else(spec):
    with pytest.raises(placement.PlacementError):
        placement.parse_device(spec)


def test_resolve_device_never_falls_back_silently(monkeypatch):
    monkeypatch.setattr(placement, 'accelerator_count', lambda: 0)
    assert placement.resolve_device('auto').device == 'cpu'
    assert placement.resolve_device('cpu').device == 'cpu'
    with pytest.raises(placement.PlacementError, match='0 accelerator'):
        placement.resolve_device('cuda')
    monkeypatch.setattr(placement, 'accelerator_count', lambda: 2)
    assert placement.resolve_device('auto').device == 'cuda:0'
    assert placement.resolve_device('auto', allowed=('cpu',)).device == 'cpu'
    assert placement.resolve_device('cuda:1').device == 'cuda:1'
    with pytest.raises(placement.PlacementError):
        placement.resolve_device('cuda:2')


def test_ort_providers_follow_the_device_or_the_explicit_list():
    avail = ['CUDAExecutionProvider', 'CPUExecutionProvider']
    assert placement.ort_providers('cuda:0', available=avail)[0] == avail
    assert placement.ort_providers('cpu', available=avail)[0] == ['CPUExecutionProvider']
    chosen, notes = placement.ort_providers(
        'cpu', 'VitisAIExecutionProvider,CPUExecutionProvider', available=avail)
    assert chosen == ['CPUExecutionProvider'] and 'VitisAIExecutionProvider' in notes[0]
    chosen, _ = placement.ort_providers('cpu', ['VitisAIExecutionProvider'],
                                        available=['VitisAIExecutionProvider', *avail])
    assert chosen == ['VitisAIExecutionProvider', 'CPUExecutionProvider']
    with pytest.raises(placement.PlacementError):
        placement.parse_providers('CUDA')
    opts = placement.ort_provider_options(avail, 'cuda:1')
    assert opts[0]['device_id'] == '1' and opts[1] == {}


def test_a_node_gets_each_non_cpu_provider_gated_and_an_absent_npu_refused():
    avail = ['CUDAExecutionProvider', 'CPUExecutionProvider']
    chosen, ops, _ = placement.gated_providers('segnet', 'cuda:0', available=avail)
    assert chosen == avail and ops == ['segnet.ort.cuda.float32']
    assert placement.gated_providers('segnet', 'cpu', available=avail)[:2] == (
        ['CPUExecutionProvider'], [])
    npu = ['VitisAIExecutionProvider', 'CPUExecutionProvider']
    assert placement.gated_providers('segnet', 'cpu', 'VitisAIExecutionProvider',
                                     available=npu)[1] == ['segnet.ort.vitisai.float32']
    # asked for an NPU this onnxruntime does not have: refused, not a silent CPU fallback
    with pytest.raises(placement.PlacementError, match='none is in this onnxruntime'):
        placement.gated_providers('segnet', 'cpu', 'VitisAIExecutionProvider', available=avail)
    # ... unless the list itself names the CPU as the fallback
    assert placement.gated_providers('segnet', 'cpu', 'VitisAIExecutionProvider,'
                                     'CPUExecutionProvider', available=avail)[0] == [
        'CPUExecutionProvider']


# --- occupancy --------------------------------------------------------------------------------

def test_torch_occupancy_fp32_is_bit_identical_to_numpy_on_the_sweep():
    f = gocc.integrate_on('cpu', torch.float32)
    for case in ops_occupancy.cases():
        ref = occ.integrate(*case.args)
        np.testing.assert_array_equal(f(*case.args), ref, err_msg=case.name)


def test_torch_occupancy_fp16_within_its_tolerance_row():
    f = gocc.integrate_on('cpu', torch.float16)
    tol = TOL['occupancy.integrate.cuda.float16']
    worst = 0.0
    for case in itertools.islice(ops_occupancy.cases(), 12):   # small: where fp16 shows most
        err, ok, detail = ops_occupancy.compare(occ.integrate(*case.args), f(*case.args), tol)
        assert ok, f'{case.name}: {detail}'
        worst = max(worst, err)
    assert worst > 0.0   # half precision does change cells: the test can tell the dtypes apart


def test_torch_occupancy_rejects_what_numpy_rejects():
    case = ops_occupancy.perf_case()
    logodds, depth, intr, ext, spec, params = case.args
    f = gocc.integrate_on('cpu')
    for bad in (depth[:-1], depth[None]):
        with pytest.raises(ValueError):
            occ.integrate(logodds, bad, intr, ext, spec, params)
        with pytest.raises(ValueError):
            f(logodds, bad, intr, ext, spec, params)


def test_torch_mapper_matches_numpy_mapper_over_frames_with_hysteresis():
    ref, dep = occ.OccupancyMapper(), gocc.TorchOccupancyMapper(device='cpu')
    for seed in range(4):
        f = scene(640, 480, seed=seed, n_boxes=5, depth_encoding='16UC1')
        np.testing.assert_array_equal(dep.update(f.depth, f.intrinsics, f.extrinsics),
                                      ref.update(f.depth, f.intrinsics, f.extrinsics))
    np.testing.assert_array_equal(dep.logodds, ref.logodds)


DEVICES = ['cpu', pytest.param('cuda', marks=needs_cuda)]


@pytest.mark.parametrize('device', DEVICES)
def test_torch_mapper_warm_up_leaves_no_trace_and_one_graph_serves_two_cameras(device):
    # A node's configure warms the mapper up on a synthetic frame of nominal intrinsics; the
    # real camera (another fx/cx, same size) must then give the numpy mapper's grids from an
    # empty grid, and on CUDA replay the warm-up's graph (its ray table copied in), not a new
    # capture.
    import dataclasses

    from edge_loop.kernels.camera import nominal_intrinsics

    first = scene(640, 480, seed=0, n_boxes=5, depth_encoding='16UC1')
    other = dataclasses.replace(first.intrinsics, fx=first.intrinsics.fx * 1.1,
                                cx=first.intrinsics.cx - 7.0)
    ref, dep = occ.OccupancyMapper(), gocc.TorchOccupancyMapper(device=device)
    dep.warm_up(nominal_intrinsics(640, 480), first.extrinsics)
    assert not dep.logodds.any() and dep.grid is None
    for seed, intr in [(0, first.intrinsics), (1, other), (2, first.intrinsics)]:
        f = scene(640, 480, seed=seed, n_boxes=5, depth_encoding='16UC1')
        np.testing.assert_array_equal(dep.update(f.depth, intr, f.extrinsics),
                                      ref.update(f.depth, intr, f.extrinsics))
    np.testing.assert_array_equal(dep.logodds, ref.logodds)
    if device == 'cuda':
        assert len(dep._graphs._graphs) == 1


@pytest.mark.parametrize('device', DEVICES)
def test_target_scorer_warm_up_then_two_cameras_of_one_size_score_as_the_planner(device):
    import dataclasses

    from edge_loop.kernels.camera import nominal_intrinsics

    scorer = ggrasp.TargetScorer(device, ledger=CopyLedger())
    ext = _frames()[2][4]
    scorer.warm_up(nominal_intrinsics(640, 480), ext)
    assert not scorer.ledger.counts, 'the warm-up is not counted as a frame'
    for k, scale in enumerate([1.0, 1.08, 1.0]):
        f = scene(640, 480, seed=4 + k, n_boxes=6, depth_encoding='16UC1')
        intr = dataclasses.replace(f.intrinsics, fx=f.intrinsics.fx * scale,
                                   fy=f.intrinsics.fy * scale)
        objs = locate_objects(f.color, f.depth, intr, f.extrinsics)
        target = objs[rank_targets(objs)[0]]
        ref = plan_grasp(f.depth, intr, f.extrinsics, target=target)
        dep = scorer.plan(scorer.depth_to_device(f.depth), intr, f.extrinsics,
                          np.asarray(target.points, np.float32))
        assert ref
        _, ok, detail = ops_gpu_vision.compare_grasp_choice(
            ref, dep, TOL['grasp_planner.score.cuda.float32'])
        assert ok, f'fx x{scale}: {detail}'
    if device == 'cuda':
        assert len(scorer._graphs._graphs) == 1
    with pytest.raises(ValueError, match='does not match the intrinsics'):
        scorer.plan(scorer.depth_to_device(f.depth[:, :320]), intr, f.extrinsics,
                    np.asarray(target.points, np.float32))


# --- locator masks ----------------------------------------------------------------------------

def test_locator_masks_fp32_identical_to_the_locator_functions():
    masks = gloc.masks_on('cpu', torch.float32)
    for name, color, depth, intr, ext in _frames():
        ref = gloc.pixel_masks_reference(color, depth, intr, ext)
        dep = masks(color, depth, intr, ext)
        np.testing.assert_array_equal(dep.height, ref.height, err_msg=name)
        np.testing.assert_array_equal(dep.fg, ref.fg, err_msg=name)
        np.testing.assert_array_equal(dep.cut, ref.cut, err_msg=name)
    assert ref.cut.sum() > 0 or name == 'no colour'


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_locator_masks_reduced_precision_within_rows(dtype):
    masks = gloc.masks_on('cpu', getattr(torch, dtype))
    tol = TOL[f'object_locator.pixel_masks.cuda.{dtype}']
    for name, color, depth, intr, ext in _frames()[1:3]:
        _, ok, detail = ops_gpu_vision.compare_masks(
            gloc.pixel_masks_reference(color, depth, intr, ext), masks(color, depth, intr, ext),
            tol)
        assert ok, f'{name}: {detail}'


def test_compare_masks_fails_on_a_real_difference():
    _, color, depth, intr, ext = _frames()[2]
    ref = gloc.pixel_masks_reference(color, depth, intr, ext)
    bad = gloc.PixelMasks(ref.height, ref.fg, ref.cut.copy())
    bad.cut[ref.fg] = ~bad.cut[ref.fg]     # every foreground pixel's cut flipped
    assert not ops_gpu_vision.compare_masks(
        ref, bad, TOL['object_locator.pixel_masks.cuda.bfloat16'])[1]
    shifted = gloc.PixelMasks(ref.height + 1e-3, ref.fg, ref.cut)
    assert not ops_gpu_vision.compare_masks(
        ref, shifted, TOL['object_locator.pixel_masks.cuda.float32'])[1]


def test_locator_with_the_nodes_device_masks_finds_the_same_objects():
    # What object_locator does with device:=cuda (here on the CPU): the per-pixel part on the
    # device, packed masks back, the CPU tail on them.
    masks = gloc.LocatorMasks('cpu', ledger=CopyLedger())
    found = 0
    for name, color, depth, intr, ext in _frames():
        ref = locate_objects(color, depth, intr, ext)
        dep = locate_objects(color, depth, intr, ext, masks=masks(color, depth, intr, ext))
        assert len(dep) == len(ref), name
        for a, b in zip(ref, dep):
            np.testing.assert_array_equal(a.pixels, b.pixels, err_msg=name)
            np.testing.assert_array_equal(a.position, b.position, err_msg=name)
        found += len(ref)
    assert found >= 10
    assert masks.ledger.counts == {}    # on the CPU nothing crosses a bus


def test_locator_masks_refuse_a_frame_that_is_not_the_cameras():
    _, color, depth, intr, ext = _frames()[0]
    masks = gloc.LocatorMasks('cpu')
    with pytest.raises(ValueError, match='camera_info says'):
        masks(color, depth[:, :300], intr, ext)
    with pytest.raises(ValueError, match='does not match depth'):
        masks(color[:, :300], depth, intr, ext)
    fg, cut = masks(color, depth, intr, ext)
    with pytest.raises(ValueError, match='foreground mask is'):
        locate_objects(color, depth, intr, ext, masks=(fg[:, :300], cut))


@needs_cuda
def test_locator_masks_on_cuda_one_graph_per_size_and_only_bits_come_back():
    _, color, depth, intr, ext = _frames()[2]
    masks = gloc.LocatorMasks('cuda', ledger=CopyLedger())
    masks.warm_up(placement_nominal(intr), ext)
    assert masks.ledger.counts == {}
    ref = locate_objects(color, depth, intr, ext)
    dep = locate_objects(color, depth, intr, ext, masks=masks(color, depth, intr, ext))
    assert [o.pixel_count for o in dep] == [o.pixel_count for o in ref]
    assert len(masks._graphs._graphs) == 1     # the warm-up's graph served this camera
    assert masks.ledger.per_frame(1) == {'d2h mask bits': 1, 'h2d image': 2}


def placement_nominal(intr):
    from edge_loop.kernels.camera import nominal_intrinsics

    return nominal_intrinsics(intr.width, intr.height)


@pytest.mark.parametrize('shape', [(1, 1), (3, 5), (480, 640), (479, 641)])
def test_pack_mask_round_trips(shape):
    m = np.random.default_rng(0).random(shape) > 0.5
    bits = gloc.pack_mask(torch.from_numpy(m)).numpy()
    np.testing.assert_array_equal(bits, np.packbits(m.reshape(-1)))
    np.testing.assert_array_equal(gloc.unpack_mask(bits, shape), m)


# --- grasp scoring ----------------------------------------------------------------------------

@pytest.mark.parametrize('dtype', ['float32', 'float16'])
def test_grasp_scoring_matches_the_planner(dtype):
    plan = ggrasp.plan_grasp_on('cpu', getattr(torch, dtype))
    tol = TOL[f'grasp_planner.score.cuda.{dtype}']
    for name, color, depth, intr, ext in _frames()[:2]:   # 320x240: a near-tie in fp16
        objs = locate_objects(color, depth, intr, ext)
        target = objs[rank_targets(objs)[0]]
        ref = plan_grasp(depth, intr, ext, target=target)
        dep = plan(depth, intr, ext, target=target)
        assert ref, name
        _, ok, detail = ops_gpu_vision.compare_grasp_choice(ref, dep, tol)
        assert ok, f'{name}: {detail}'
        if dtype == 'float32':
            assert len(dep) == len(ref)
            assert [g.yaw for g in dep] == pytest.approx([g.yaw for g in ref])


def test_node_two_step_scoring_gives_the_segmented_planners_grasps():
    # What grasp_planner does with device:=cuda (here on the CPU): the depth goes to the
    # device when the frame arrives, the locator's targets are scored later, one by one.
    from edge_loop.kernels.grasp_planner import grasp_scene, plan_grasp_segmented
    from edge_loop.kernels.object_locator import (
        height_scene,
        label_image,
        segments_from_labels,
    )

    scorer = ggrasp.TargetScorer('cpu', ledger=CopyLedger())
    for name, color, depth, intr, ext in _frames()[:2]:
        objs = locate_objects(color, depth, intr, ext)
        labels = label_image(objs, intr.height, intr.width)
        positions = np.array([o.position for o in objs])
        segments = segments_from_labels(labels, len(objs))
        scene, obstacles = grasp_scene(depth, intr, ext)
        ref = plan_grasp_segmented(scene, obstacles, positions, segments)
        depth_t = scorer.depth_to_device(depth)
        def score(pts, d=depth_t, i=intr, e=ext):
            return scorer.plan(d, i, e, pts)
        dep = plan_grasp_segmented(height_scene(depth, intr, ext), None, positions, segments,
                                   score=score)
        assert ref, name
        assert [g.yaw for g in dep] == pytest.approx([g.yaw for g in ref]), name
        assert np.allclose([g.center for g in dep], [g.center for g in ref], atol=1e-6), name
    assert not scorer.ledger.counts, 'on the CPU nothing moves'


def test_grasp_compare_rejects_a_worse_candidate():
    _, color, depth, intr, ext = _frames()[2]
    objs = locate_objects(color, depth, intr, ext)
    ref = plan_grasp(depth, intr, ext, target=objs[rank_targets(objs)[0]])
    worse = [g for g in ref if g.quality < ref[0].quality - 0.05]
    assert worse
    ok = ops_gpu_vision.compare_grasp_choice(ref, worse, TOL['grasp_planner.score.cuda.float32'])
    assert not ok[1]


# --- segnet -----------------------------------------------------------------------------------

def test_segnet_torch_cpu_matches_onnx_runtime():
    from edge_loop.kernels.gpu.segnet import segnet_torch_on

    f = segnet_torch_on('cpu', torch.float32)
    tol = TOL['segnet.torch.cuda.float32']
    for case in list(ops_gpu_vision._segnet_cases())[2:4]:
        ref = ops_gpu_vision.segnet_ort_cpu(*case.args)
        _, ok, detail = ops_gpu_vision.compare_logits(ref, f(*case.args), tol)
        assert ok, f'{case.name}: {detail}'


# --- the loop step and the audit --------------------------------------------------------------

def test_gpu_loop_step_on_cpu_gives_the_stages_outputs_and_moves_nothing():
    f = scene(320, 240, seed=7, n_boxes=5, depth_encoding='16UC1')
    intr, ext = f.intrinsics, f.extrinsics
    objs = locate_objects(f.color, f.depth, intr, ext)
    target = objs[rank_targets(objs)[0]]
    ledger = CopyLedger()
    h = Handoff('cpu', 'pinned', ledger)
    mapper, ref_mapper = gocc.TorchOccupancyMapper(device='cpu'), occ.OccupancyMapper()
    for _ in range(2):
        r = gpu_loop_step({'color': h.to_device(f.color), 'depth': h.to_device(f.depth)},
                          intr, ext, mapper, target_points=torch.from_numpy(target.points),
                          handoff=h)
        np.testing.assert_array_equal(r.host['grid'], ref_mapper.update(f.depth, intr, ext))
    ref = gloc.pixel_masks_reference(f.color, f.depth, intr, ext)
    np.testing.assert_array_equal(gloc.unpack_mask(r.host['cut_bits'], (240, 320)), ref.cut)
    np.testing.assert_array_equal(gloc.unpack_mask(r.host['fg_bits'], (240, 320)), ref.fg)
    best = plan_grasp(f.depth, intr, ext, target=target)[0]
    assert r.grasps[0].yaw == pytest.approx(best.yaw)
    assert ledger.per_frame(2) == {}   # on the CPU every handoff is a view


def test_graphed_loop_step_on_cpu_matches_the_stages_and_its_ledger():
    from edge_loop.kernels.gpu.loop import GraphedLoopStep, segnet_input_t
    from edge_loop.kernels.gpu.segnet import torch_segnet
    from edge_loop.kernels.object_locator.model_inputs import prepare_inputs

    f = scene(320, 240, seed=7, n_boxes=5, depth_encoding='16UC1')
    intr, ext = f.intrinsics, f.extrinsics
    objs = locate_objects(f.color, f.depth, intr, ext)
    target = objs[rank_targets(objs)[0]]
    step = GraphedLoopStep('cpu', intr, ext, segnet_model=torch_segnet('cpu'))
    ref_mapper = occ.OccupancyMapper()
    for i in range(2):   # the occupancy state carries over frames
        step.load(f.color, f.depth, target.points)
        step.ledger.reset()
        grasps = step()
        np.testing.assert_array_equal(step.host_out['grid'].numpy(),
                                      ref_mapper.update(f.depth, intr, ext), err_msg=f'{i}')
    ref = gloc.pixel_masks_reference(f.color, f.depth, intr, ext)
    np.testing.assert_array_equal(
        gloc.unpack_mask(step.host_out['fg_bits'].numpy(), (240, 320)), ref.fg)
    np.testing.assert_array_equal(
        gloc.unpack_mask(step.host_out['cut_bits'].numpy(), (240, 320)), ref.cut)
    best = plan_grasp(f.depth, intr, ext, target=target)[0]
    assert grasps and grasps[0].yaw == pytest.approx(best.yaw)
    assert np.allclose(grasps[0].center, best.center, atol=2e-3)
    # segnet's input built on the device = the locator's numpy input (colour within 1/255)
    x = segnet_input_t(torch.from_numpy(f.color), step.out['locator'][0]).numpy()
    x_ref = prepare_inputs(f.color, ref.height)
    np.testing.assert_allclose(x[:, 3:], x_ref[:, 3:], atol=1e-5)
    assert np.abs(x[:, :3] - x_ref[:, :3]).max() <= 1 / 255 + 1e-6
    assert step.host_out['segnet_logits'].shape == (1, 2, 60, 80)
    # one upload per input, no image back
    per = step.ledger.per_frame(1)
    assert per['h2d color image'] == per['h2d depth image'] == 1
    assert not any(k.startswith('d2h') and 'image' in k for k in per)
    step.load(f.color, f.depth, None)
    assert step() == []


def test_ledger_counts_by_direction_and_kind():
    ledger = CopyLedger()
    ledger.note('h2d', 640 * 480 * 3)
    ledger.note('h2d', 640 * 480 * 2)
    ledger.note('d2h', 10800, 'grid')
    assert ledger.per_frame(1) == {'d2h grid': 1, 'h2d image': 2}


# --- the verification ops ---------------------------------------------------------------------

def test_every_gpu_op_is_discovered_with_a_tolerance_row():
    names = [op.name for op in discover_ops() if '.cuda.' in op.name]
    ort_gpu = [p for p in ops_gpu_vision.ort_accelerators() if p in ops_gpu_vision.GPU_PROVIDERS]
    assert len(names) == 11 + len(ort_gpu)
    assert len(ops_gpu_occupancy.OPS) + len(ops_gpu_vision.OPS) == 11 + len(
        ops_gpu_vision.ort_accelerators())
    assert all(n in TOL and TOL[n].get('reason') for n in names)


def test_an_ort_op_per_accelerator_provider_and_none_for_cpu_or_remote(monkeypatch):
    import onnxruntime

    monkeypatch.setattr(onnxruntime, 'get_available_providers', lambda: [
        'VitisAIExecutionProvider', 'CUDAExecutionProvider', 'AzureExecutionProvider',
        'CPUExecutionProvider'])
    assert ops_gpu_vision.ort_accelerators() == ['VitisAIExecutionProvider',
                                                 'CUDAExecutionProvider']
    npu, gpu = (ops_gpu_vision._ort_op(p) for p in ops_gpu_vision.ort_accelerators())
    assert (npu.name, npu.device) == ('segnet.ort.vitisai.float32', 'cpu')
    assert (gpu.name, gpu.device) == ('segnet.ort.cuda.float32', 'cuda')
    # An NPU's op has no tolerance row until someone reasons one for its arithmetic:
    # the harness fails it (no silent pass), so a node refuses that provider.
    assert npu.name not in TOL and gpu.name in TOL


@pytest.mark.skipif(CUDA, reason='checks the skip on a host without a GPU')
def test_gpu_ops_skip_with_the_reason_without_a_gpu():
    op = ops_gpu_occupancy.OPS[0]
    case = next(iter(op.cases()))
    with pytest.raises(SkipOp, match='no CUDA'):
        op.deployed(*case.args, **case.kwargs)


@needs_cuda
@pytest.mark.parametrize('op', [*ops_gpu_occupancy.OPS, *ops_gpu_vision.OPS],
                         ids=lambda op: op.name)
def test_gpu_op_equivalence_on_cuda(op):
    from edge_loop.verify.run import equivalence_gate

    try:
        gate, cases = equivalence_gate(op, TOL[op.name])
    except SkipOp as exc:
        pytest.skip(str(exc))
    bad = [f'{c.name}: {c.detail}' for c in cases if not c.ok]
    assert gate['verdict'] == 'pass', bad


@needs_cuda
@pytest.mark.parametrize('method', ['pageable', 'pinned', 'registered'])
def test_handoff_methods_deliver_the_same_bytes(method):
    f = scene(640, 480, seed=1, depth_encoding='16UC1')
    ledger = CopyLedger()
    h = Handoff('cuda:0', method, ledger)
    try:
        d = h.to_device(f.depth)
        c = h.to_device(f.color)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(d.cpu().numpy().view(np.uint16), f.depth)
        np.testing.assert_array_equal(c.cpu().numpy(), f.color)
        assert ledger.per_frame(1)['h2d image'] == 2
    finally:
        h.close()


def test_graph_cache_refuses_a_compile_mode_that_captures_its_own_graphs():
    import torch

    from edge_loop.kernels.gpu.graphs import GraphCache

    with pytest.raises(ValueError, match='reduce-overhead'):
        GraphCache(torch.device('cpu'), compile_mode='reduce-overhead')


def test_decoder_matmul_attention_matches_sdpa():
    import torch

    from edge_loop.reasoning.decoder import TINY, random_decoder

    dec = random_decoder(TINY, context=32, dtype=torch.float32)
    toks, pos = torch.tensor([3, 5, 7]), torch.arange(3)
    ref = dec.forward(toks, pos).clone()
    dec.reset()
    dec.attention = 'matmul'
    out = dec.forward(toks, pos)
    assert torch.allclose(out, ref, atol=1e-5)
