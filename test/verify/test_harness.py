# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The verification harness catches wrong, slow and tampered implementations.

The injection tests put a slowdown and a numerical error just above the tolerance into real
deployed kernels (on small inputs, so they are quick) and check that verification fails on
the right gate with the right category, and on nothing else.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np
import pytest

from edge_loop.kernels.object_locator import locate_objects
from edge_loop.verify import host, ops_grasp_state, ops_vision, repro, run, timing
from edge_loop.verify.compare import compare_allclose, compare_exact
from edge_loop.verify.gate import DeploymentGateError, check_deployable
from edge_loop.verify.spec import Case, OpSpec, category_of
from edge_loop.verify.sweeps import (
    SIZES,
    negative_stride,
    non_contiguous,
    read_only,
    rgbd_inputs,
    scene,
)

EXACT = {'kind': 'exact', 'reason': 'index output'}
FLOAT = {'kind': 'array', 'rtol': 1.3e-6, 'atol': 1e-5, 'reason': 'float32 defaults'}


def _cases():
    rng = np.random.default_rng(0)
    yield Case('ints 1000', (rng.integers(0, 100, 1000),))
    yield Case('ints read-only strided', (read_only(rng.integers(0, 100, 2000)[::2]),))


def _ref_cumsum(a):
    out = np.empty(len(a), np.int64)
    total = 0
    for i, v in enumerate(a):
        total += int(v)
        out[i] = total
    return out


def _fast_cumsum(a):
    return np.cumsum(a, dtype=np.int64)


def _off_by_one_cumsum(a):
    out = np.cumsum(a, dtype=np.int64)
    out[1:] = out[:-1].copy()  # shifted: every prefix one element short
    return out


def _op(deployed, compare=compare_exact, claim=1.0, name='toy.cumsum', artifact=None):
    return OpSpec(name=name, reference=_ref_cumsum, deployed=deployed, cases=_cases,
                  compare=compare, perf_case=lambda: next(_cases()), claimed_speedup=claim,
                  artifact=artifact)


def test_correct_fast_op_passes_every_gate(tmp_path):
    store = host.BaselineStore(tmp_path / 'baselines')
    r = run.verify_op(_op(_fast_cumsum, claim=3.0), {'toy.cumsum': EXACT}, store)
    assert r.verdict == 'pass', r.reason
    assert r.gates['equivalence']['cases'] == 2 and r.failures == []
    claim = r.gates['claim']
    assert claim['pairs'] >= timing.MIN_PAIRS and claim['speedup_low'] >= 3.0
    assert claim['speedup_low'] <= claim['speedup'] <= claim['speedup_high']
    assert r.gates['regression']['category'] == 'baseline recorded'


def test_off_by_one_fails_equivalence_in_its_category():
    r = run.verify_op(_op(_off_by_one_cumsum), {'toy.cumsum': EXACT}, perf=False)
    assert r.verdict == 'fail' and r.failures == [('equivalence', 'nominal'),
                                                  ('equivalence', 'non-contiguous/'
                                                   'negative stride')]
    assert all(not c.ok for c in r.cases) and 'differ' in r.cases[0].detail
    assert r.categories['nominal']['status'] == 'FAIL'


def test_float_error_beyond_tolerance_fails_and_within_passes():
    ref = np.linspace(0, 1, 100, dtype=np.float32)
    assert compare_allclose(ref, ref + np.float32(5e-6), FLOAT)[1]
    worst, ok, detail = compare_allclose(ref, ref + np.float32(1e-4), FLOAT)
    assert not ok and worst > 1e-5 and 'beyond' in detail
    cmp = compare_allclose(ref, ref + np.float32(1e-4), FLOAT)
    assert cmp.max_abs == pytest.approx(1e-4, rel=1e-2) and cmp.abs_tol == 1e-5
    nan = ref.copy()
    nan[3] = np.nan
    assert not compare_allclose(ref, nan, FLOAT)[1]
    assert compare_allclose(nan, nan.copy(), FLOAT)[1]


# --- injected slowdown: a real deployed kernel, its real claim --------------------------------

def _short_trace_case():
    tr = ops_grasp_state.synthetic_episode(0, 'slip_lost', rate_hz=50.0)   # 100 samples
    return Case('slip_lost 100 samples', (tr.t, tr.positions, tr.velocities, tr.forces,
                                           tr.commanded_opening), {'shears': tr.shears})


def test_injected_slowdown_fails_the_claim_gate_only(tmp_path):
    op = replace(ops_grasp_state.OPS[0], perf_case=_short_trace_case)
    tol = run.load_tolerances()
    store = host.BaselineStore(tmp_path / 'baselines')
    good = run.verify_op(op, tol, store, quick=True)
    assert good.verdict == 'pass', good.reason   # the unchanged kernel holds its claim here

    def slowed(*args, **kwargs):
        time.sleep(0.006)                        # > the reference's ~1 ms: no speed-up left
        return op.deployed(*args, **kwargs)

    bad = run.verify_op(replace(op, deployed=slowed), tol, store, quick=True)
    assert bad.verdict == 'fail'
    assert bad.gates['equivalence']['verdict'] == 'pass'
    assert bad.failures[0] == ('claim', 'below claim')
    claim = bad.gates['claim']
    assert claim['speedup_high'] < op.claim and 'below the claimed' in claim['detail']
    # The reference side is the plain implementation, timed on the same input.
    assert claim['reference_ms_p50'] < claim['deployed_ms_p50']


# --- injected numerical error just above a tolerance, in one input category --------------------

def _locator_cases():
    f = scene(160, 120, seed=1, depth_encoding='16UC1')
    yield Case(f.name, (f.color, f.depth, f.intrinsics, f.extrinsics))
    yield Case('160x120 negative stride views', (negative_stride(f.color),
                                                  negative_stride(f.depth), f.intrinsics,
                                                  f.extrinsics))


def test_injected_error_above_tolerance_fails_equivalence_in_its_category(tmp_path):
    tol = run.load_tolerances()
    limit = tol['object_locator']['position_m']

    def off_on_flipped_views(color, depth, *args, **kwargs):
        out = locate_objects(color, depth, *args, **kwargs)
        if depth.strides[0] < 0:        # only negative-stride input is handled wrongly
            for o in out:
                o.position = o.position + np.array([1.05 * limit, 0.0, 0.0])
        return out

    op = replace(ops_vision.OPS[0], cases=_locator_cases, known_failures={})
    assert run.verify_op(op, tol, perf=False).verdict == 'pass'
    r = run.verify_op(replace(op, deployed=off_on_flipped_views), tol, perf=False,
                      repro_dir=tmp_path / 'repro')
    assert r.verdict == 'fail'
    assert r.failures == [('equivalence', 'non-contiguous/negative stride')]
    row = r.categories['non-contiguous/negative stride']
    assert row['status'] == 'FAIL' and row['abs_tol'] == limit
    assert limit < row['max_abs'] < 1.1 * limit
    assert r.categories['nominal']['status'] == 'pass'
    # The failing case is saved and reruns with one call: fails with the injected kernel ...
    (saved,) = row['repro']
    meta, case = repro.load(saved)
    assert meta['category'] == 'non-contiguous/negative stride' and case.args[1].strides[0] < 0
    injected = replace(op, deployed=off_on_flipped_views)
    assert run.compare_case(injected, case, tol['object_locator']).ok is False
    # ... and passes with the shipped one (edge-loop verify --repro FILE).
    assert run.main(['--repro', saved]) == 0


def test_injected_model_error_just_above_atol_is_caught(tmp_path):
    from edge_loop.verify.models import onnx_model_ops, run_onnxruntime

    path = _tiny_onnx(tmp_path / 'tiny.onnx')
    onnx_op, _ = onnx_model_ops('tiny', path, _model_cases, torch_forward=None)
    tol = {'tiny.onnx': FLOAT}
    assert run.verify_op(onnx_op, tol, perf=False).verdict == 'pass'

    def biased(inputs):     # |dep - ref| = 1.1 atol + rtol |ref|: 10% past the limit
        out = run_onnxruntime(str(path), inputs)
        return [(y + 1.1e-5 + 1.3e-6 * np.abs(y)).astype(np.float32) for y in out]

    r = run.verify_op(replace(onnx_op, deployed=biased), tol, perf=False)
    assert r.failures == [('equivalence', 'nominal')]
    assert 1e-5 < r.categories['nominal']['max_abs'] < 2e-5


# --- the same-host regression check -----------------------------------------------------------

def test_regression_only_against_this_hosts_baseline(tmp_path):
    op = _op(_fast_cumsum)
    store = host.BaselineStore(tmp_path / 'b')
    first = run.verify_op(op, {'toy.cumsum': EXACT}, store)
    assert first.gates['regression']['category'] == 'baseline recorded'
    store.save()
    assert store.path.parent == tmp_path / 'b' and store.path.exists()
    again = run.verify_op(op, {'toy.cumsum': EXACT}, host.BaselineStore(tmp_path / 'b'))
    assert again.gates['regression']['category'] == 'no regression'
    # A baseline 10x faster than anything measured now: a regression ...
    data = json.loads(store.path.read_text())
    for key in ('speedup', 'speedup_low', 'speedup_high'):
        data['ops']['toy.cumsum'][key] *= 10 * host.REGRESSION_FACTOR
    store.path.write_text(json.dumps(data))
    slow = run.verify_op(op, {'toy.cumsum': EXACT}, host.BaselineStore(tmp_path / 'b'))
    assert slow.verdict == 'fail' and ('regression', 'regression') in slow.failures
    # ... but only for this host's fingerprint: another host has no baseline and records one.
    other = dict(store.fingerprint, cpu='another CPU')
    elsewhere = run.verify_op(op, {'toy.cumsum': EXACT},
                              host.BaselineStore(tmp_path / 'b', fingerprint=other))
    assert elsewhere.verdict == 'pass'
    assert elsewhere.gates['regression']['category'] == 'baseline recorded'


def test_host_fingerprint_names_what_timings_depend_on():
    fp = host.host_fingerprint()
    assert {'cpu', 'cores', 'accelerator', 'driver', 'python', 'numpy', 'opencv',
            'onnxruntime', 'torch'} <= set(fp)
    assert fp['cores'] >= 1 and fp['numpy'] == np.__version__
    assert host.fingerprint_id(fp) == host.fingerprint_id(dict(fp))
    assert host.fingerprint_id(dict(fp, numpy='0.0.1')) != host.fingerprint_id(fp)


def test_bootstrap_interval_brackets_the_median_and_is_reproducible():
    rng = np.random.default_rng(3)
    values = list(10 + rng.standard_normal(40))
    low, high = timing.bootstrap_interval(values)
    assert low < float(np.median(values)) < high and high - low < 2.0
    assert timing.bootstrap_interval(values) == (low, high)
    judged = timing.claim_gate({'speedup': 10.0, 'speedup_low': 9.0, 'speedup_high': 11.0},
                               10.5)
    assert judged['verdict'] == 'pass' and judged['category'] == 'claim not excluded'
    below = timing.claim_gate({'speedup': 10.0, 'speedup_low': 9.0, 'speedup_high': 11.0},
                              11.5)
    assert below['verdict'] == 'fail' and below['category'] == 'below claim'


# --- categories, known failures, exceptions ---------------------------------------------------

def test_category_table_marks_na_uncovered_and_known_failures():
    def raises_on_empty(a):
        if len(a) == 0:
            raise ValueError('empty')
        return _fast_cumsum(a)

    def cases():
        yield from _cases()
        yield Case('empty input', (np.zeros(0, np.int64),))

    op = OpSpec('toy.k', _fast_cumsum, raises_on_empty, cases, compare_exact,
                lambda: next(_cases()), dtypes=('int64',),
                not_applicable={'saturated/black colour': 'no image'},
                known_failures={'empty input': 'the caller never passes empty input'})
    r = run.verify_op(op, {'toy.k': EXACT}, perf=False)
    assert r.verdict == 'pass', r.reason
    assert r.categories['empty']['status'] == 'FAIL (known)'
    assert r.categories['saturated/black colour']['status'] == 'n/a'
    assert r.categories['single pixel']['status'] == 'not covered'
    assert r.categories['dtype int64']['cases'] == 3     # every case has int64 input
    # Strict: a listed known failure that passes fails the gate (remove the entry).
    fixed = run.verify_op(replace(op, deployed=_fast_cumsum), {'toy.k': EXACT}, perf=False)
    assert fixed.verdict == 'fail' and fixed.failures == [('equivalence', 'empty')]


def test_case_names_map_to_categories():
    assert category_of('640x480 32FC1 all-NaN depth') == 'NaN/inf/zero depth'
    assert category_of('641x479 motion-blurred dark object') == 'odd/prime size'
    assert category_of('640x480 16UC1 negative stride views') == \
        'non-contiguous/negative stride'
    assert category_of('3840x2160 16UC1 4 boxes') == 'huge 3840x2160'
    assert Case('x', (), category='dtype float32').report_category == 'dtype float32'


def test_missing_tolerance_row_and_exceptions():
    r = run.verify_op(_op(_fast_cumsum), {}, perf=False)
    assert r.verdict == 'fail' and 'no tolerance row' in r.reason

    def raises(a):
        raise ValueError('bad input')

    r = run.verify_op(_op(raises), {'toy.cumsum': EXACT}, perf=False)
    assert r.verdict == 'fail' and 'deployed raised ValueError' in r.cases[0].detail
    both = OpSpec('toy.both', raises, raises, _cases, compare_exact, lambda: next(_cases()))
    r = run.verify_op(both, {'toy.both': EXACT}, perf=False)
    assert r.gates['equivalence']['verdict'] == 'pass'  # both reject the input the same way


def test_skip_is_reported_with_its_reason():
    def needs_torch(a):
        raise run.SkipOp('torch is not installed')

    op = OpSpec('toy.model', needs_torch, _fast_cumsum, _cases, compare_exact,
                lambda: next(_cases()))
    r = run.verify_op(op, {'toy.model': EXACT}, perf=False)
    assert r.verdict == 'skip' and 'torch' in r.reason
    gpu = replace(_op(_fast_cumsum), device='cuda:0')
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        r = run.verify_op(gpu, {'toy.cumsum': EXACT}, perf=False)
        assert r.verdict == 'skip' and 'cuda' in r.reason.lower()


def test_sweep_covers_sizes_encodings_degenerate_and_views():
    frames = {f.name: f for f in rgbd_inputs()}
    names = list(frames)
    for w, h in SIZES:
        assert any(n.startswith(f'{w}x{h} 16UC1') for n in names)
        assert any(n.startswith(f'{w}x{h} 32FC1') for n in names)
    for what in ('all-zero', 'all-NaN', 'one valid pixel', 'saturated', 'black',
                 'non-contiguous', 'read-only'):
        assert any(what in n for n in names), what
    assert not frames['640x480 non-contiguous views'].depth.flags.c_contiguous
    assert not frames['640x480 16UC1 read-only views'].depth.flags.writeable
    assert non_contiguous(np.ones((4, 4))).shape == (4, 4)
    flipped = negative_stride(np.arange(12).reshape(3, 4))
    assert flipped.strides[0] < 0 and (flipped == np.arange(12).reshape(3, 4)).all()


# --- deployment record ------------------------------------------------------------------------

def _record_op(tmp_path):
    from edge_loop.verify.gate import sha256_file

    module = tmp_path / 'kernel.py'
    module.write_text('def f(a):\n    return a\n')
    artifact = tmp_path / 'model.onnx'
    artifact.write_bytes(b'weights-v1')
    record = tmp_path / 'verified.json'
    tolerances = tmp_path / 'tolerances.yaml'
    tolerances.write_text('ops:\n  toy.model:\n    kind: exact\n    reason: index output\n')
    result = run.OpResult('toy.model', 'pass', tolerance={'kind': 'exact',
                                                          'reason': 'index output'},
                          files={str(module): sha256_file(module),
                                 str(artifact): sha256_file(artifact)})
    run.write_record([result], record)
    return module, artifact, record, tolerances


def test_deployment_gate_refuses_a_tampered_artifact(tmp_path):
    module, artifact, record, tolerances = _record_op(tmp_path)
    check_deployable(['toy.model'], record, tolerances)
    artifact.write_bytes(b'weights-v2')
    with pytest.raises(DeploymentGateError, match='model.onnx sha256 .* does not match the '
                       'verified record .*make verify'):
        check_deployable(['toy.model'], record, tolerances)


def test_deployment_gate_refuses_changed_source_tolerance_or_unknown_op(tmp_path):
    module, artifact, record, tolerances = _record_op(tmp_path)
    module.write_text('def f(a):\n    return a + 1\n')
    with pytest.raises(DeploymentGateError, match='kernel.py'):
        check_deployable(['toy.model'], record, tolerances)
    module.write_text('def f(a):\n    return a\n')
    check_deployable(['toy.model'], record, tolerances)
    tolerances.write_text('ops:\n  toy.model:\n    kind: exact\n    max: 3\n    reason: x\n')
    with pytest.raises(DeploymentGateError, match='tolerance row'):
        check_deployable(['toy.model'], record, tolerances)
    with pytest.raises(DeploymentGateError, match='no passing verification record'):
        check_deployable(['other'], record, tolerances)
    with pytest.raises(DeploymentGateError, match='no verification record'):
        check_deployable(['toy.model'], tmp_path / 'missing.json', tolerances)


def test_committed_record_matches_the_vision_kernels():
    """Fails when a kernel changed without `make verify` (so the nodes would refuse it)."""
    check_deployable(['object_locator', 'grasp_planner'])


def test_kernel_package_pins_every_module_of_it():
    files = run.op_files(ops_vision.OPS[0])
    pinned = {p for p in files if p.startswith('edge_loop/kernels/object_locator')}
    assert 'edge_loop/verify/ops_vision.py' in files
    if 'edge_loop/kernels/object_locator.py' not in pinned:     # split into a package
        assert len(pinned) > 1 and 'edge_loop/kernels/object_locator/__init__.py' in pinned


def test_tolerance_table_has_a_reason_for_every_row():
    table = run.load_tolerances(run.default_config_file('tolerances.yaml'))
    assert {'object_locator', 'grasp_planner'} <= set(table)
    assert all(row['reason'] for row in table.values())


@pytest.mark.slow
def test_edge_loop_verify_passes_on_the_vision_ops(tmp_path):
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    args = parser.parse_args(['--quick', '--ops', 'object_locator', 'grasp_planner',
                              '--output', str(tmp_path / 'report'), '--record',
                              str(tmp_path / 'verified.json'), '--baseline-dir',
                              str(tmp_path / 'baselines')])
    assert run.run(args) == 0
    summary = json.loads((tmp_path / 'report' / 'summary.json').read_text())
    assert summary['passed'] and set(summary['ops']) == {'object_locator', 'grasp_planner'}
    per_op = json.loads((tmp_path / 'report' / 'object_locator.json').read_text())
    assert per_op['gates']['equivalence']['cases'] >= 8
    assert per_op['gates']['claim']['speedup_high'] >= 10.0
    assert (tmp_path / 'report' / 'index.md').read_text().startswith('# Verification report')
    assert '<img src="data:image/png;base64,' in (tmp_path / 'report' / 'index.html').read_text()
    record = json.loads((tmp_path / 'verified.json').read_text())
    files = record['ops']['object_locator']['files']
    assert any(p.startswith('edge_loop/kernels/object_locator') for p in files)
    assert record['ops']['object_locator']['environment']['numpy'] == np.__version__


def _tiny_onnx(path, seed=0, bias_shift=0.0):
    """Tiny model y = relu(x @ W + b), float32, batch dimension free."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = (rng.standard_normal(4) + bias_shift + 3.0).astype(np.float32)   # relu stays open
    graph = helper.make_graph(
        [helper.make_node('MatMul', ['x', 'w'], ['xw']),
         helper.make_node('Add', ['xw', 'b'], ['z']),
         helper.make_node('Relu', ['z'], ['y'])],
        'tiny', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['n', 8])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['n', 4])],
        [numpy_helper.from_array(w, 'w'), numpy_helper.from_array(b, 'b')])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _model_cases():
    rng = np.random.default_rng(1)
    for n in (1, 7, 64):
        yield Case(f'batch {n}', ({'x': (0.1 * rng.standard_normal((n, 8))).astype(
            np.float32)},))


def test_onnx_export_vs_onnxruntime_and_torch_gate(tmp_path):
    from edge_loop.verify.models import onnx_model_ops, run_onnx_reference, run_onnxruntime

    path = _tiny_onnx(tmp_path / 'tiny.onnx')
    onnx_op, torch_op = onnx_model_ops('tiny', path, _model_cases, torch_forward=None)
    tol = {'tiny.onnx': FLOAT, 'tiny.torch': FLOAT}
    r = run.verify_op(onnx_op, tol, perf=False)
    assert r.verdict == 'pass' and r.gates['equivalence']['cases'] == 3
    assert str(path) in r.files
    assert run.verify_op(torch_op, tol, perf=False).verdict == 'skip'
    # An export whose weights differ from the module's is caught.
    other = _tiny_onnx(tmp_path / 'other.onnx', bias_shift=0.01)
    wrong = OpSpec('tiny.onnx', lambda x: run_onnx_reference(str(path), x),
                   lambda x: run_onnxruntime(str(other), x), _model_cases,
                   onnx_op.compare, lambda: next(_model_cases()))
    assert run.verify_op(wrong, tol, perf=False).verdict == 'fail'
    # The record pins the model file: swapping the weights is refused.
    record = tmp_path / 'verified.json'
    run.write_record([r], record)
    check_deployable(['tiny.onnx'], record, tmp_path / 'no-tolerances.yaml')
    _tiny_onnx(path, seed=5)
    with pytest.raises(DeploymentGateError, match='tiny.onnx sha256'):
        check_deployable(['tiny.onnx'], record, tmp_path / 'no-tolerances.yaml')
