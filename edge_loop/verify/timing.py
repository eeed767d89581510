# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The performance gate: interleaved reference/deployed pairs, a bootstrap interval, a claim.

Reference and deployed run alternately (ABBA order, so neither always runs second with warm
caches) on the same input in one process; each pair gives one speed-up
``reference time / deployed time``. Load on the machine slows both members of a pair alike
far more than it slows pairs apart, so the per-pair speed-ups vary much less than the times.
The statistic is the median per-pair speed-up; a percentile bootstrap over the pairs gives
its 95% interval. The gate fails only when the whole interval lies below the op's claim:
"not shown to be as fast as claimed" would fail an op on a noisy host, "shown to be slower
than claimed" does not.

Every library pool that would compete with the machine's load runs one thread meanwhile
(OpenCV, the BLAS numpy calls into, torch's intra-op pool): the claims are per core.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from edge_loop.verify.spec import Case, OpSpec

MIN_PAIRS = 30
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000


@contextlib.contextmanager
def single_threaded_opencv() -> Iterator[None]:
    """Run OpenCV on one thread meanwhile."""
    try:
        import cv2
    except ImportError:  # pragma: no cover - opencv is a dependency
        yield
        return
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)


def _openblas_libraries() -> list[Any]:
    """The OpenBLAS builds numpy loaded (numpy's own wheel ships ``scipy_openblas``)."""
    found = []
    dirs = {os.path.join(os.path.dirname(np.__file__), os.pardir, 'numpy.libs')}
    for path in sorted(p for d in dirs for p in glob.glob(os.path.join(d, '*openblas*.so*'))):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            continue
    return found


def _blas_thread_setters() -> list[tuple[Callable[[int], None], Callable[[], int]]]:
    pairs = []
    for lib in _openblas_libraries():
        for set_name, get_name in (
                ('scipy_openblas_set_num_threads64_', 'scipy_openblas_get_num_threads64_'),
                ('scipy_openblas_set_num_threads', 'scipy_openblas_get_num_threads'),
                ('openblas_set_num_threads', 'openblas_get_num_threads')):
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                getter.restype = ctypes.c_int
                pairs.append((setter, getter))
                break
    return pairs


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run numpy's BLAS (matmul: the ONNX reference evaluator's convolutions) on one thread.

    On a loaded 2-core host a two-thread BLAS waits for the other core: the same ONNX
    reference took 175 ms in one run and 349 ms in the next there (issue 30).
    """
    setters = _blas_thread_setters()
    before = [get() for _, get in setters]
    for set_threads, _ in setters:
        set_threads(1)
    try:
        yield
    finally:
        for (set_threads, _), n in zip(setters, before):
            set_threads(n)


@contextlib.contextmanager
def single_threaded_torch() -> Iterator[None]:
    """Run torch's intra-op pool on one thread meanwhile (only if torch is already imported)."""
    torch = sys.modules.get('torch')
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """OpenCV, BLAS and torch on one thread each."""
    with single_threaded_opencv(), single_threaded_blas(), single_threaded_torch():
        yield


def device_sync(device: str) -> Callable[[], None]:
    """A function that waits for ``device``'s queued work (a no-op on the CPU)."""
    if not device.startswith('cuda'):
        return lambda: None
    import torch

    return torch.cuda.synchronize


def bootstrap_interval(values: list[float], confidence: float = CONFIDENCE,
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                       ) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median of ``values`` (fixed seed: reproducible)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return float('nan'), float('nan')
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[idx], axis=1)
    tail = (1.0 - confidence) / 2.0
    return float(np.quantile(medians, tail)), float(np.quantile(medians, 1.0 - tail))


def repeats_per_side(reference_s: float) -> int:
    """Calls per side of a pair: as many as fit :data:`PAIR_SIDE_S` (1..:data:`MAX_REPEATS`).

    Each side of a pair is the fastest of this many calls. A call of a few ms that the
    scheduler pre-empts once takes 3-5x as long on a loaded 2-core host; the fastest of a
    few back-to-back calls is the call that was not pre-empted. Both sides take the same
    number, so neither is favoured; a reference of 100 ms or more gets one call per side.
    """
    return int(min(MAX_REPEATS, max(1, PAIR_SIDE_S // max(reference_s, 1e-6))))


PAIR_SIDE_S = 0.1
MAX_REPEATS = 5


def time_pairs(op: OpSpec, case: Case, pairs: int, max_seconds: float = 60.0,
               ) -> tuple[list[float], list[float], int]:
    """Reference and deployed times (s) of ``pairs`` interleaved pairs (ABBA order), and k.

    Each side of a pair is the fastest of k calls (:func:`repeats_per_side`). Stops early
    only when ``max_seconds`` is spent and :data:`MIN_PAIRS` pairs are done.
    """
    sync = device_sync(op.device)
    ref_t: list[float] = []
    dep_t: list[float] = []
    k = 1

    def timed(fn: Callable[..., Any], out: list[float]) -> None:
        best = float('inf')
        for _ in range(k):
            sync()
            t = time.perf_counter()
            fn(*case.args, **case.kwargs)
            sync()
            best = min(best, time.perf_counter() - t)
        out.append(best)

    with one_core():
        # Warm-up: lazy imports, caches, allocator, the first CUDA launch.
        t0 = time.perf_counter()
        op.reference(*case.args, **case.kwargs)
        sync()
        k = repeats_per_side(time.perf_counter() - t0)
        op.deployed(*case.args, **case.kwargs)
        sync()
        start = time.perf_counter()
        for i in range(max(pairs, MIN_PAIRS)):
            if i % 2 == 0:
                timed(op.reference, ref_t)
                timed(op.deployed, dep_t)
            else:
                timed(op.deployed, dep_t)
                timed(op.reference, ref_t)
            if i + 1 >= MIN_PAIRS and time.perf_counter() - start > max_seconds:
                break
    return ref_t, dep_t, k


def measure_speedup(op: OpSpec, case: Case | None = None, pairs: int = MIN_PAIRS,
                    max_seconds: float = 60.0) -> dict[str, Any]:
    """Per-pair speed-ups of ``op`` on ``case`` (default ``perf_case()``) and their interval."""
    case = case if case is not None else op.perf_case()
    ref_t, dep_t, k = time_pairs(op, case, pairs, max_seconds)
    speedups = [r / max(d, 1e-9) for r, d in zip(ref_t, dep_t, strict=True)]
    low, high = bootstrap_interval(speedups)
    return {
        'case': case.name,
        'pairs': len(speedups),
        'calls_per_side': k,
        'speedup': statistics.median(speedups),
        'speedup_low': low,
        'speedup_high': high,
        'speedups': [round(s, 4) for s in speedups],
        'reference_ms_p50': statistics.median(ref_t) * 1e3,
        'reference_ms_p90': float(np.percentile(ref_t, 90)) * 1e3,
        'deployed_ms_p50': statistics.median(dep_t) * 1e3,
        'deployed_ms_p90': float(np.percentile(dep_t, 90)) * 1e3,
        'reference_ms': [round(t * 1e3, 4) for t in ref_t],
        'deployed_ms': [round(t * 1e3, 4) for t in dep_t],
    }


def claim_gate(measured: dict[str, Any], claim: float) -> dict[str, Any]:
    """Judge ``measured`` (from :func:`measure_speedup`) against the op's claimed speed-up."""
    out = dict(measured, claim=claim)
    low, high = measured['speedup_low'], measured['speedup_high']
    interval = f'{measured["speedup"]:.3g}x, 95% interval [{low:.3g}, {high:.3g}]x'
    if not claim:
        out.update(verdict='pass', category='no claim', detail=f'{interval}; no claim made')
    elif high < claim:
        out.update(verdict='fail', category='below claim',
                   detail=f'{interval}: the whole interval lies below the claimed {claim:g}x')
    elif low < claim:
        out.update(verdict='pass', category='claim not excluded',
                   detail=f'{interval}: the claim {claim:g}x lies inside the interval')
    else:
        out.update(verdict='pass', category='claim met',
                   detail=f'{interval} >= the claimed {claim:g}x')
    return out


def deployed_ms_p50(op: OpSpec, repeats: int = 15) -> float:
    """p50 (ms) of the deployed implementation alone on ``perf_case()``.

    One warm-up call, OpenCV on one thread; the replay regression test's calibration.
    """
    case = op.perf_case()
    times = []
    with single_threaded_opencv():
        op.deployed(*case.args, **case.kwargs)
        for _ in range(repeats):
            t = time.perf_counter()
            op.deployed(*case.args, **case.kwargs)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def deployed_locator() -> OpSpec:
    """The deployed object locator's op (its fixed performance case calibrates machines)."""
    from edge_loop.verify import ops_vision

    return next(o for o in ops_vision.OPS if o.name == 'object_locator')


def _locator_worker(repeats: int) -> None:
    """One of :func:`locator_ms_p50_parallel`'s processes: ready, then time it on 'go'.

    Every worker does the same after 'go' (the case, one warm-up call, the timed calls), so
    their timed calls overlap.
    """
    op = deployed_locator()
    print('ready', flush=True)
    if sys.stdin.readline().strip() == 'go':
        print(deployed_ms_p50(op, repeats), flush=True)


def locator_ms_p50_parallel(workers: int, repeats: int = 60, timeout_s: float = 120.0
                            ) -> float:
    """Mean over ``workers`` processes of the deployed locator's p50 (ms), all timed at once.

    What :func:`deployed_ms_p50` cannot see: how the cores hold up when several processes
    compute together (two vCPUs that are one core's hyperthreads, a hypervisor's steal time).
    The loop is seven processes on those cores, so its latency follows this figure. Each
    worker is a fresh interpreter (no forked ROS or CUDA state); all start timing together.
    """
    import subprocess

    if workers < 1:
        raise ValueError(f'workers must be >= 1, got {workers}')
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get('PYTHONPATH', '')) if p))
    code = f'from edge_loop.verify.timing import _locator_worker; _locator_worker({repeats})'
    procs = [subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(workers)]
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != 'ready':
                proc.wait(timeout=timeout_s)
                raise RuntimeError(f'locator timing worker failed: {proc.stderr.read()[-2000:]}')
        for proc in procs:
            proc.stdin.write('go\n')
            proc.stdin.flush()
        times = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0 or not out.strip():
                raise RuntimeError(f'locator timing worker exited {proc.returncode}: {err[-2000:]}')
            times.append(float(out.split()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return statistics.fmean(times)
