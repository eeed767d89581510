# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop verify``: run every op's gates, write the report and the deployment record.

Gates per op (each op is an :class:`~edge_loop.verify.spec.OpSpec` from an
``edge_loop/verify/ops_*.py`` module):

1. equivalence: reference vs deployed on every case of the sweep, with the op's tolerance row
   of ``config/tolerances.yaml`` (an op without a row fails: tolerances are chosen, not
   defaulted). If both implementations raise the same exception type on a case (an input both
   reject), that counts as agreement.
2. performance: reference and deployed timed alternately on ``perf_case()`` in the same run;
   the gate uses the median of the per-pair ratios deployed/reference, so load on the machine
   cancels out. It passes when ``1 / ratio >= min_speedup`` and ``ratio <= 1.10 x`` the ratio in
   ``config/verify_baseline.json`` (no baseline yet: passes with a note; ``--update-baseline``
   writes the median of 5 measurements). A failing measurement is repeated up to
   ``--perf-attempts`` (3) times, since other processes' load can skew one measurement; a
   real regression fails them all.

An op whose reference or deployed raises :class:`SkipOp` (e.g. torch is not installed for a
torch-vs-ONNX check) is reported as skipped with the reason and is not recorded as verified.
Reports go to ``reports/verify/`` (``<op>.md``/``<op>.json`` plus ``summary.md``/``.json``).
When every selected op passes, their entries in ``config/verified.json`` are updated with the
sha256 of their source modules and artifacts (see :mod:`edge_loop.verify.gate`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib
import inspect
import json
import pkgutil
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from edge_loop.paths import SOURCE_ROOT
from edge_loop.verify.spec import Case, OpSpec

REGRESSION_LIMIT = 1.10
BASELINE_RUNS = 5


class HostProbe:
    """Fixed memory-bound numpy work and fixed interpreted work, timed beside each op.

    Interleaving reference and deployed cancels a host's overall speed, not its memory: on a
    VM whose neighbours load the memory system (a 2-core CI VM copying 10 GB/s), the deployed
    kernels, which stream whole frames through numpy, slowed 1.5-3x while the references,
    interpreted loops, slowed 1.1x, and their ratios failed the 10% gate with no code
    changed. The quotient of the two probes' times says how much slower memory-bound work is
    here, against interpreted work, than where the baseline was measured.
    """

    def __init__(self) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        self._np = np
        self._frame = rng.random((480, 640, 3), dtype=np.float32)       # one VGA frame
        self._table = rng.random(1 << 22, dtype=np.float32)              # 16 MB, past L2
        self._index = rng.integers(0, self._table.size, 240 * 320)

    def memory(self) -> None:
        """Streams, a gather and a histogram over frame-sized arrays (a few ms)."""
        np = self._np
        lit = self._frame * self._frame + 0.25
        mask = (lit[::2, ::2, 1] > 0.75).ravel()
        picked = self._table[self._index]
        np.bincount(self._index[mask] & 0xFFFF, weights=picked[mask], minlength=1 << 16)

    @staticmethod
    def interpreted() -> None:
        """Python loops over ints, tuples and a dict (a few ms)."""
        seen: dict[int, int] = {}
        total = 0
        for i in range(12000):
            key = (i * 7919) & 1023
            seen[key] = seen.get(key, 0) + 1
            total += max(i & 15, key & 15)


class SkipOp(Exception):  # noqa: N818 - it is a verdict, not an error
    """Raised by an op (or its cases) that cannot run here; the message is the reason."""


@dataclass
class CaseResult:
    """Outcome of one case of the equivalence sweep."""

    name: str
    ok: bool
    worst_error: float
    detail: str


@dataclass
class OpResult:
    """Everything the report says about one op."""

    name: str
    verdict: str                      # pass | fail | skip
    reason: str = ''
    tolerance: dict[str, Any] = field(default_factory=dict)
    worst_error: float = 0.0
    worst_case: str = ''
    cases: list[CaseResult] = field(default_factory=list)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


# --- discovery and configuration --------------------------------------------------------------

def discover_ops(package: str = 'edge_loop.verify') -> list[OpSpec]:
    """Every ``OPS`` list of the ``ops_*`` modules of ``package`` (sorted by module)."""
    pkg = importlib.import_module(package)
    ops: list[OpSpec] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith('ops_'):
            module = importlib.import_module(f'{package}.{info.name}')
            ops.extend(getattr(module, 'OPS', []))
    names = [op.name for op in ops]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f'op name(s) registered twice: {", ".join(dupes)}')
    return ops


def load_tolerances(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The tolerance table (op name -> row); every row must carry a ``reason``."""
    path = path or default_config_file('tolerances.yaml')
    data = yaml.safe_load(Path(path).read_text()) or {}
    table = data.get('ops', data)
    for name, row in table.items():
        if not isinstance(row, dict) or not row.get('reason'):
            raise ValueError(f'{path}: tolerance row {name!r} needs a reason')
    return table


def load_baseline(path: Path) -> dict[str, Any]:
    """The performance baseline (op name -> {'ratio': deployed/reference, ...})."""
    if not Path(path).exists():
        return {}
    return json.loads(Path(path).read_text()).get('ops', {})


def op_files(op: OpSpec) -> dict[str, str]:
    """Source modules (reference, deployed, spec module) and artifact an op depends on."""
    from edge_loop.verify.gate import display_path, sha256_file

    paths: list[Path] = []
    for fn in (op.deployed, op.reference, op.cases):
        try:
            src = inspect.getsourcefile(inspect.unwrap(fn))
        except TypeError:
            src = None
        if src and Path(src).resolve() not in paths:
            paths.append(Path(src).resolve())
    if op.artifact:
        art = Path(op.artifact)
        paths.append(art if art.is_absolute() else (SOURCE_ROOT / art).resolve())
    return {display_path(p): sha256_file(p) for p in paths}


# --- gates ------------------------------------------------------------------------------------

def _call(fn: Any, case: Case) -> tuple[Any, BaseException | None]:
    try:
        return fn(*case.args, **case.kwargs), None
    except SkipOp:
        raise
    except Exception as exc:  # noqa: BLE001 - an exception is a result the gate compares
        return None, exc


def equivalence_gate(op: OpSpec, tol: dict[str, Any]) -> tuple[dict[str, Any], list[CaseResult]]:
    """Run reference and deployed on every case and compare them with ``tol``."""
    results: list[CaseResult] = []
    for case in op.cases():
        ref, ref_exc = _call(op.reference, case)
        dep, dep_exc = _call(op.deployed, case)
        if ref_exc is not None or dep_exc is not None:
            same = (ref_exc is not None and dep_exc is not None
                    and type(ref_exc) is type(dep_exc))
            detail = (f'reference raised {type(ref_exc).__name__}: {ref_exc}' if ref_exc else
                      'reference returned') + '; ' + (
                f'deployed raised {type(dep_exc).__name__}: {dep_exc}' if dep_exc else
                'deployed returned')
            results.append(CaseResult(case.name, same, 0.0 if same else float('inf'), detail))
            continue
        try:
            worst, ok, detail = op.compare(ref, dep, tol)
        except Exception as exc:  # noqa: BLE001 - a compare that crashes is a failed case
            worst, ok, detail = float('inf'), False, f'compare raised {exc!r}'
        results.append(CaseResult(case.name, bool(ok), float(worst), detail))
    if not results:
        return {'verdict': 'fail', 'detail': 'the sweep has no cases'}, results
    failed = [r for r in results if not r.ok]
    worst = max(results, key=lambda r: r.worst_error)
    gate = {
        'verdict': 'fail' if failed else 'pass',
        'cases': len(results),
        'failed_cases': [r.name for r in failed],
        'worst_error': worst.worst_error,
        'worst_case': worst.name,
    }
    return gate, results


@functools.cache
def _host_probe() -> HostProbe:
    """One probe per process: its arrays (16 MB of table) are made once, not per gate."""
    return HostProbe()


@contextlib.contextmanager
def single_threaded_opencv() -> Iterator[None]:
    """Run OpenCV on one thread meanwhile.

    The budgets are per core, and a thread pool competing with the machine's load would make
    the timings noisy.
    """
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


def performance_gate(op: OpSpec, baseline_ratio: float | None, repeats: int = 51,
                     max_seconds: float = 20.0,
                     baseline_host: float | None = None) -> dict[str, Any]:
    """Time reference and deployed alternately on ``perf_case()``; gate on their ratio.

    The ratio may exceed the baseline's by :data:`REGRESSION_LIMIT`, times how much slower
    memory-bound work is on this host than where the baseline was measured
    (``baseline_host``, a :class:`HostProbe` quotient), never less.
    """
    with single_threaded_opencv():
        return _performance_gate(op, baseline_ratio, repeats, max_seconds, baseline_host)


def deployed_ms_p50(op: OpSpec, repeats: int = 15) -> float:
    """p50 (ms) of the deployed implementation alone on ``perf_case()``.

    One warm-up call, OpenCV on one thread, as in :func:`performance_gate`; without the
    reference in between the caches stay warm, so this is at most the interleaved figure the
    baseline file records as ``deployed_ms_p50``. Their quotient is a floor of how much slower
    this machine is than the baseline's.
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


def _performance_gate(op: OpSpec, baseline_ratio: float | None, repeats: int,
                      max_seconds: float, baseline_host: float | None) -> dict[str, Any]:
    case = op.perf_case()
    probe = _host_probe()
    probe.memory()
    probe.interpreted()
    # Warm up both (caches, lazy imports, allocator) and size the repeat count to the budget.
    t0 = time.perf_counter()
    op.reference(*case.args, **case.kwargs)
    ref_once = time.perf_counter() - t0
    op.deployed(*case.args, **case.kwargs)
    n = max(5, min(repeats, int(max_seconds / max(ref_once, 1e-6))))
    ref_t: list[float] = []
    dep_t: list[float] = []
    mem_t: list[float] = []
    py_t: list[float] = []
    for i in range(n):
        order = ((op.reference, ref_t), (op.deployed, dep_t))
        for fn, out in (order if i % 2 == 0 else order[::-1]):
            t = time.perf_counter()
            fn(*case.args, **case.kwargs)
            out.append(time.perf_counter() - t)
        for work, out in ((probe.memory, mem_t), (probe.interpreted, py_t)):
            t = time.perf_counter()
            work()
            out.append(time.perf_counter() - t)
    ratio = statistics.median(d / r for d, r in zip(dep_t, ref_t, strict=True))
    host = statistics.median(m / q for m, q in zip(mem_t, py_t, strict=True))
    scale = max(1.0, host / baseline_host) if baseline_host else 1.0
    speedup = 1.0 / ratio
    reasons = []
    if speedup < op.min_speedup:
        reasons.append(f'speed-up {speedup:.2f}x below the required {op.min_speedup:g}x')
    if baseline_ratio is not None and ratio > baseline_ratio * REGRESSION_LIMIT * scale:
        reasons.append(f'ratio deployed/reference {ratio:.4f} regressed more than '
                       f'{(REGRESSION_LIMIT - 1) * 100:.0f}% against the baseline '
                       f'{baseline_ratio:.4f}' + (f' x {scale:.2f} (host)' if scale > 1 else ''))
    note = '' if baseline_ratio is not None else 'no baseline yet (run --update-baseline)'
    if baseline_ratio is not None and scale > 1.0 and not reasons:
        note = (f'ok; limit x {scale:.2f}: memory-bound work is that much slower here, against '
                'interpreted work, than where the baseline was measured')
    return {
        'verdict': 'fail' if reasons else 'pass',
        'detail': '; '.join(reasons) or note or 'ok',
        'case': case.name,
        'repeats': n,
        'reference_ms_p50': statistics.median(ref_t) * 1e3,
        'deployed_ms_p50': statistics.median(dep_t) * 1e3,
        'ratio': ratio,
        'host_probe': host,
        'host_scale': scale,
        'speedup': speedup,
        'min_speedup': op.min_speedup,
        'baseline_ratio': baseline_ratio,
    }


def verify_op(op: OpSpec, tolerances: dict[str, dict[str, Any]], baseline: dict[str, Any],
              *, repeats: int = 51, perf_seconds: float = 20.0, perf: bool = True,
              perf_attempts: int = 3) -> OpResult:
    """All gates of one op."""
    result = OpResult(op.name, 'fail')
    tol = tolerances.get(op.name)
    if tol is None:
        result.reason = f'no tolerance row for {op.name!r} in config/tolerances.yaml'
        return result
    result.tolerance = dict(tol)
    try:
        result.files = op_files(op)
        eq, cases = equivalence_gate(op, tol)
        result.gates['equivalence'] = eq
        result.cases = cases
        result.worst_error = eq.get('worst_error', 0.0)
        result.worst_case = eq.get('worst_case', '')
        if perf:
            entry = baseline.get(op.name, {})
            base, base_host = entry.get('ratio'), entry.get('host_probe')
            # Load from other processes can slow the two implementations unequally for a
            # while: a failing measurement is repeated (up to perf_attempts); a real
            # regression fails every attempt. The report keeps every attempt's ratio.
            attempts = []
            for _ in range(max(1, perf_attempts)):
                attempts.append(performance_gate(op, base, repeats, perf_seconds, base_host))
                if attempts[-1]['verdict'] == 'pass':
                    break
            best = min(attempts, key=lambda a: a['ratio'])
            best['attempt_ratios'] = [round(a['ratio'], 5) for a in attempts]
            result.gates['performance'] = best
    except SkipOp as exc:
        result.verdict, result.reason = 'skip', str(exc)
        return result
    except Exception as exc:  # noqa: BLE001 - report it, do not stop the other ops
        result.reason = f'{type(exc).__name__}: {exc}'
        result.gates['error'] = {'verdict': 'fail', 'detail': traceback.format_exc()}
        return result
    failed = [g for g, v in result.gates.items() if v.get('verdict') != 'pass']
    result.verdict = 'fail' if failed else 'pass'
    result.reason = ('failed gate(s): ' + ', '.join(failed)) if failed else 'all gates pass'
    return result


# --- reports and records ----------------------------------------------------------------------

def _fmt(x: Any) -> str:
    return f'{x:.3g}' if isinstance(x, float) else str(x)


def op_markdown(r: OpResult) -> str:
    """Markdown report of one op."""
    lines = [f'## {r.name}: **{r.verdict.upper()}**', '', r.reason, '']
    if r.tolerance:
        lines += ['Tolerance: ' + ', '.join(f'{k}={v}' for k, v in r.tolerance.items()
                                          if k != 'reason'),
                  f'(reason: {r.tolerance.get("reason")})', '']
    eq = r.gates.get('equivalence')
    if eq:
        lines += [f'Equivalence: {eq["verdict"]}, {eq.get("cases", 0)} inputs swept, worst '
                  f'error {_fmt(eq.get("worst_error"))} on "{eq.get("worst_case", "")}"', '',
                  '| input | ok | worst error | detail |', '|---|---|---|---|']
        lines += [f'| {c.name} | {"yes" if c.ok else "**NO**"} | {_fmt(c.worst_error)} | '
                  f'{c.detail.replace("|", "/")} |' for c in r.cases]
        lines.append('')
    perf = r.gates.get('performance')
    if perf:
        lines += [f'Performance: {perf["verdict"]} on "{perf["case"]}" ({perf["repeats"]} '
                  f'interleaved repeats): reference p50 {perf["reference_ms_p50"]:.2f} ms, '
                  f'deployed p50 {perf["deployed_ms_p50"]:.2f} ms, ratio deployed/reference '
                  f'{perf["ratio"]:.4f} (speed-up {perf["speedup"]:.1f}x, required '
                  f'{perf["min_speedup"]:g}x; baseline ratio {_fmt(perf["baseline_ratio"])}, '
                  f'limit +{(REGRESSION_LIMIT - 1) * 100:.0f}%). {perf["detail"]}', '']
    if 'error' in r.gates:
        lines += ['```', r.gates['error']['detail'], '```', '']
    return '\n'.join(lines)


def write_reports(results: list[OpResult], out_dir: Path) -> None:
    """``<op>.md``/``<op>.json`` per op and ``summary.md``/``summary.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        (out_dir / f'{r.name}.json').write_text(json.dumps(asdict(r), indent=2, default=str))
        (out_dir / f'{r.name}.md').write_text(op_markdown(r) + '\n')
    rows = ['# Verification report', '',
            f'{datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")} on '
            f'{platform.node()} ({platform.machine()}, Python {platform.python_version()})', '',
            '| op | verdict | inputs | worst error | speed-up | ratio vs baseline | reason |',
            '|---|---|---|---|---|---|---|']
    for r in results:
        eq, perf = r.gates.get('equivalence', {}), r.gates.get('performance', {})
        base = perf.get('baseline_ratio')
        vs = f'{perf["ratio"] / base:.2f}' if perf and base else '-'
        rows.append(f'| {r.name} | {r.verdict} | {eq.get("cases", "-")} | '
                    f'{_fmt(r.worst_error)} | '
                    f'{(str(round(perf["speedup"], 1)) + "x") if perf else "-"} | {vs} | '
                    f'{r.reason} |')
    rows += [''] + [op_markdown(r) for r in results]
    (out_dir / 'summary.md').write_text('\n'.join(rows) + '\n')
    (out_dir / 'summary.json').write_text(json.dumps(
        {'ops': {r.name: {'verdict': r.verdict, 'reason': r.reason} for r in results},
         'passed': all(r.verdict == 'pass' for r in results)}, indent=2))


def update_baseline(results: list[OpResult], path: Path) -> None:
    """Store the measured ratios of the passing equivalence runs as the new baseline."""
    data = json.loads(path.read_text()) if path.exists() else {}
    ops = data.setdefault('ops', {})
    for r in results:
        perf = r.gates.get('performance')
        if perf and r.gates.get('equivalence', {}).get('verdict') == 'pass':
            ops[r.name] = {'ratio': round(perf['ratio'], 5),
                           'host_probe': round(perf['host_probe'], 4),
                           'reference_ms_p50': round(perf['reference_ms_p50'], 3),
                           'deployed_ms_p50': round(perf['deployed_ms_p50'], 3),
                           'machine': f'{platform.machine()} {platform.processor()}'.strip()}
    data['note'] = ('ratio = deployed/reference time measured interleaved in one run; the '
                    'performance gate fails when a run measures more than 1.10x this ratio, '
                    'times host_probe(now) / host_probe (memory-bound against interpreted '
                    'work, see HostProbe) where that is above 1')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + '\n')


def write_record(results: list[OpResult], path: Path) -> None:
    """Record the passing ops (file hashes + tolerance row) in the deployment record."""
    data = json.loads(path.read_text()) if path.exists() else {}
    ops = data.setdefault('ops', {})
    for r in results:
        if r.verdict != 'pass':
            continue
        old = ops.get(r.name, {})
        if old.get('files') == r.files and old.get('tolerance') == r.tolerance:
            continue  # unchanged: keep the entry (and its date) so the file does not churn
        ops[r.name] = {
            'files': r.files,
            'tolerance': r.tolerance,
            'worst_error': r.worst_error,
            'speedup': round(r.gates.get('performance', {}).get('speedup', 0.0), 2),
            'verified_at': datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds'),
        }
    data['note'] = ('written by `edge-loop verify`; nodes refuse to activate an op whose files '
                    'no longer match (edge_loop/verify/gate.py)')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + '\n')


# --- command line -----------------------------------------------------------------------------

def default_config_file(name: str) -> Path:
    """config/<name> in the source tree when running from a checkout, else the share dir."""
    from edge_loop.verify.gate import _config_file

    src = SOURCE_ROOT / 'config'
    return src / name if src.is_dir() else _config_file(name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``edge-loop verify``."""
    parser.add_argument('--ops', nargs='+', metavar='NAME', help='only these ops')
    parser.add_argument('--list', action='store_true', help='list the registered ops and exit')
    parser.add_argument('--output', type=Path, default=Path('reports/verify'),
                        help='report directory (default: reports/verify)')
    parser.add_argument('--tolerances', type=Path, default=None,
                        help='tolerance table (default: config/tolerances.yaml)')
    parser.add_argument('--baseline', type=Path, default=None,
                        help='performance baseline (default: config/verify_baseline.json)')
    parser.add_argument('--record', type=Path, default=None,
                        help='deployment record to update on success '
                             '(default: config/verified.json)')
    parser.add_argument('--no-record', action='store_true',
                        help='do not update the deployment record')
    parser.add_argument('--update-baseline', action='store_true',
                        help='store the measured speed ratios as the new baseline')
    parser.add_argument('--no-perf', action='store_true',
                        help='skip the performance gate (never records the ops as verified)')
    parser.add_argument('--repeats', type=int, default=51,
                        help='interleaved timing repeats per op (default: 51)')
    parser.add_argument('--perf-attempts', type=int, default=3,
                        help='measure a failing speed gate again up to this many times')
    parser.add_argument('--perf-seconds', type=float, default=20.0,
                        help='time budget of the reference in the speed gate per op')


def run(args: argparse.Namespace) -> int:
    """Run the gates; 0 when every selected op passes (skips do not fail the run)."""
    ops = discover_ops()
    if args.list:
        for op in ops:
            print(f'{op.name}: min_speed-up {op.min_speedup:g}x, artifact {op.artifact}')
        return 0
    if args.ops:
        unknown = sorted(set(args.ops) - {op.name for op in ops})
        if unknown:
            print(f'unknown op(s): {", ".join(unknown)}; registered: '
                  f'{", ".join(op.name for op in ops)}', file=sys.stderr)
            return 2
        ops = [op for op in ops if op.name in args.ops]
    tolerances = load_tolerances(args.tolerances or default_config_file('tolerances.yaml'))
    baseline_path = args.baseline or default_config_file('verify_baseline.json')
    baseline = {} if args.update_baseline else load_baseline(baseline_path)
    results = []
    for op in ops:
        t0 = time.perf_counter()
        r = verify_op(op, tolerances, baseline, repeats=args.repeats,
                      perf_seconds=args.perf_seconds, perf=not args.no_perf,
                      perf_attempts=args.perf_attempts)
        print(f'{r.name:24s} {r.verdict.upper():5s} ({time.perf_counter() - t0:5.1f} s) '
              f'{r.reason}', flush=True)
        for c in r.cases:
            if not c.ok:
                print(f'    {c.name}: {c.detail}')
        perf = r.gates.get('performance')
        if perf:
            print(f'    speed: reference {perf["reference_ms_p50"]:.2f} ms, deployed '
                  f'{perf["deployed_ms_p50"]:.2f} ms, ratio {perf["ratio"]:.4f}; '
                  f'{perf["detail"]}')
        if args.update_baseline and perf and r.gates['equivalence'].get('verdict') == 'pass':
            # A baseline from one lucky run would make later runs fail: take the median ratio
            # of BASELINE_RUNS measurements.
            runs = [perf] + [performance_gate(op, None, args.repeats, args.perf_seconds)
                             for _ in range(BASELINE_RUNS - 1)]
            ratios = [x['ratio'] for x in runs]
            perf['baseline_runs'] = [round(x, 5) for x in ratios]
            perf['ratio'] = statistics.median(ratios)
            perf['host_probe'] = statistics.median(x['host_probe'] for x in runs)
            print(f'    baseline ratio: median of {[round(x, 5) for x in ratios]} = '
                  f'{perf["ratio"]:.4f}; host probe {perf["host_probe"]:.4f}')
        results.append(r)
    write_reports(results, args.output)
    if args.update_baseline:
        update_baseline(results, baseline_path)
        print(f'baseline written to {baseline_path}')
    passed = all(r.verdict != 'fail' for r in results)
    if passed and not args.no_record and not args.no_perf:
        record = args.record or default_config_file('verified.json')
        write_record(results, record)
        print(f'deployment record updated: {record}')
    print(f'report: {args.output / "summary.md"}')
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m edge_loop.verify.run``."""
    parser = argparse.ArgumentParser(prog='edge-loop verify', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == '__main__':
    sys.exit(main())
