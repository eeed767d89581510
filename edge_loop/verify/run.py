# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop verify``: run every op's gates, write the report and the deployment record.

Gates per op (each op is an :class:`~edge_loop.verify.spec.OpSpec` from an
``edge_loop/verify/ops_*.py`` module):

1. **equivalence**: reference vs deployed on every case of the sweep, with the op's tolerance
   row of ``config/tolerances.yaml`` (an op without a row fails: tolerances are chosen, not
   defaulted). Both raising the same exception type on a case (an input both reject) is
   agreement. Results are grouped by input category (:data:`~edge_loop.verify.spec.CATEGORIES`)
   and every failing case is saved as a reproducer (``--repro FILE`` reruns it).
2. **claim**: the speed-up the op claims, judged by a bootstrap interval over at least 30
   interleaved reference/deployed pairs (:mod:`edge_loop.verify.timing`); fails only when the
   whole interval lies below the claim. Absolute times are shown, never gated.
3. **regression**: against a baseline of the same host fingerprint
   (:mod:`edge_loop.verify.host`); a host without one records it (in a local, untracked
   directory) and says so.

An op whose reference or deployed raises :class:`SkipOp` (torch missing, no CUDA device) is
reported as skipped with the reason and is not recorded as verified. ``--quick`` runs the
first case of each input category, leaves out the cases marked ``full_only`` (3840x2160
frames) and times the minimum 30 pairs. When every
selected op passes, the entries of the ops whose files, tolerance row or environment changed
are rewritten in ``config/verified.json`` (see :mod:`edge_loop.verify.gate`); an unchanged
checkout on a host of the recorded versions leaves it untouched.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import json
import pkgutil
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from edge_loop.paths import SOURCE_ROOT
from edge_loop.verify import host, timing
from edge_loop.verify.compare import as_comparison
from edge_loop.verify.spec import CATEGORIES, Case, OpSpec
from edge_loop.verify.timing import deployed_ms_p50, single_threaded_opencv  # noqa: F401

QUICK_PAIRS = timing.MIN_PAIRS
FULL_PAIRS = 60
QUICK_CASES_PER_CATEGORY = 1     # --quick: the first case of each input category


class SkipOp(Exception):  # noqa: N818 - it is a verdict, not an error
    """Raised by an op (or its cases) that cannot run here; the message is the reason."""


@dataclass
class CaseResult:
    """Outcome of one case of the equivalence sweep."""

    name: str
    ok: bool
    worst_error: float
    detail: str
    category: str = 'nominal'
    dtypes: list[str] = field(default_factory=list)
    max_abs: float = float('nan')
    abs_tol: float = float('nan')
    max_rel: float = float('nan')
    rel_tol: float = float('nan')
    unit: str = ''
    repro: str = ''
    known: str = ''          # why a failure of this case is accepted (OpSpec.known_failures)

    @property
    def counts_as_failure(self) -> bool:
        """A failure the gate counts: an unexpected one, or a known failure that passes now."""
        return (not self.ok) != bool(self.known)


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
    categories: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)   # (gate, category)
    files: dict[str, str] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    device: str = 'cpu'


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


def default_config_file(name: str) -> Path:
    """config/<name> in the source tree when running from a checkout, else the share dir."""
    from edge_loop.verify.gate import _config_file

    src = SOURCE_ROOT / 'config'
    return src / name if src.is_dir() else _config_file(name)


def load_tolerances(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The tolerance table (op name -> row); every row must carry a ``reason``."""
    path = path or default_config_file('tolerances.yaml')
    data = yaml.safe_load(Path(path).read_text()) or {}
    table = data.get('ops', data)
    for name, row in table.items():
        if not isinstance(row, dict) or not row.get('reason'):
            raise ValueError(f'{path}: tolerance row {name!r} needs a reason')
    return table


# Packages that group unrelated modules: a function in one of them pins its own module only.
GROUPING_PACKAGES = ('edge_loop', 'edge_loop.kernels', 'edge_loop.verify', 'edge_loop.models',
                     'edge_loop.nodes')


def op_files(op: OpSpec) -> dict[str, str]:
    """Source modules (reference, deployed, spec module) and artifact an op depends on.

    A function defined in a kernel package (``edge_loop/kernels/object_locator/``) pins
    every module of that package: its helpers live in the sibling modules.
    """
    from edge_loop.verify.gate import display_path, sha256_file

    paths: list[Path] = []
    for fn in (op.deployed, op.reference, op.cases):
        fn = inspect.unwrap(fn)
        try:
            src = inspect.getsourcefile(fn)
        except TypeError:
            src = None
        if not src:
            continue
        module = getattr(fn, '__module__', '') or ''
        package = module.rpartition('.')[0]
        found = [Path(src).resolve()]
        if package and package not in GROUPING_PACKAGES and module.startswith('edge_loop.') \
                and (Path(src).parent / '__init__.py').exists():
            found += sorted(p.resolve() for p in Path(src).parent.glob('*.py'))
        paths += [p for p in found if p not in paths]
    if op.artifact:
        art = Path(op.artifact)
        paths.append(art if art.is_absolute() else (SOURCE_ROOT / art).resolve())
    return {display_path(p): sha256_file(p) for p in paths}


def check_device(op: OpSpec) -> None:
    """Raise :class:`SkipOp` when the op's device is not present here."""
    if op.device == 'cpu':
        return
    try:
        import torch
    except ImportError as exc:
        raise SkipOp(f'{op.device} op: torch is not installed') from exc
    if op.device.startswith('cuda') and not torch.cuda.is_available():
        raise SkipOp(f'{op.device} op: no CUDA device on this host')


# --- equivalence ------------------------------------------------------------------------------

def _call(fn: Any, case: Case) -> tuple[Any, BaseException | None]:
    try:
        return fn(*case.args, **case.kwargs), None
    except SkipOp:
        raise
    except Exception as exc:  # noqa: BLE001 - an exception is a result the gate compares
        return None, exc


def case_dtypes(case: Case) -> list[str]:
    """Dtype names of the arrays among the case's arguments (one level into dicts/tuples)."""
    found: list[str] = []
    values = list(case.args) + list(case.kwargs.values())
    for v in values:
        inner = list(v.values()) if isinstance(v, dict) else (
            list(v) if isinstance(v, (tuple, list)) and len(v) < 16 else [v])
        for x in inner:
            dtype = getattr(x, 'dtype', None)
            if dtype is not None and hasattr(x, 'shape') and str(dtype) not in found:
                found.append(str(dtype).replace('torch.', ''))
    return found


def compare_case(op: OpSpec, case: Case, tol: dict[str, Any]) -> CaseResult:
    """Run reference and deployed on one case and compare them with ``tol``."""
    base = {'category': case.report_category, 'dtypes': case_dtypes(case)}
    ref, ref_exc = _call(op.reference, case)
    dep, dep_exc = _call(op.deployed, case)
    if ref_exc is not None or dep_exc is not None:
        same = ref_exc is not None and dep_exc is not None and type(ref_exc) is type(dep_exc)
        detail = (f'reference raised {type(ref_exc).__name__}: {ref_exc}' if ref_exc else
                  'reference returned') + '; ' + (
            f'deployed raised {type(dep_exc).__name__}: {dep_exc}' if dep_exc else
            'deployed returned')
        err = 0.0 if same else float('inf')
        return CaseResult(case.name, same, err, detail, max_abs=err, max_rel=err, **base)
    try:
        cmp = as_comparison(op.compare(ref, dep, tol))
    except Exception as exc:  # noqa: BLE001 - a compare that crashes is a failed case
        return CaseResult(case.name, False, float('inf'), f'compare raised {exc!r}', **base)
    return CaseResult(case.name, cmp.ok, cmp.worst, cmp.detail, max_abs=cmp.max_abs,
                      abs_tol=cmp.abs_tol, max_rel=cmp.max_rel, rel_tol=cmp.rel_tol,
                      unit=cmp.unit, **base)


def equivalence_gate(op: OpSpec, tol: dict[str, Any], *, quick: bool = False,
                     repro_dir: Path | None = None) -> tuple[dict[str, Any], list[CaseResult]]:
    """Every case of the sweep (``quick``: without the ``full_only`` ones)."""
    from edge_loop.verify import repro

    results: list[CaseResult] = []
    left_out: list[str] = []
    seen: dict[str, int] = {}
    for case in op.cases():
        category = case.report_category
        seen[category] = seen.get(category, 0) + 1
        if quick and (case.full_only or seen[category] > QUICK_CASES_PER_CATEGORY):
            left_out.append((case.name, category))
            continue
        result = compare_case(op, case, tol)
        result.known = op.known_failures.get(case.name, '')
        if result.known and result.ok:
            result.detail += ('; listed in known_failures but passes now: remove the entry '
                              f'({result.known})')
        if not result.ok and repro_dir is not None:
            result.repro = str(repro.save(repro_dir, op, case, result))
        results.append(result)
    if not results:
        return {'verdict': 'fail', 'detail': 'the sweep has no cases',
                'left_out_categories': sorted({c for _, c in left_out})}, results
    failed = [r for r in results if r.counts_as_failure]
    judged = [r for r in results if not r.known] or results
    worst = max(judged, key=lambda r: r.worst_error)
    gate = {
        'verdict': 'fail' if failed else 'pass',
        'cases': len(results),
        'failed_cases': [r.name for r in failed],
        'failed_categories': sorted({r.category for r in failed}),
        'known_failures': [r.name for r in results if r.known and not r.ok],
        'left_out_quick': [name for name, _ in left_out],
        'left_out_categories': sorted({category for _, category in left_out}),
        'worst_error': worst.worst_error,
        'worst_case': worst.name,
    }
    return gate, results


def _max(values: list[float]) -> float:
    finite = [v for v in values if not np.isnan(v)]
    return max(finite) if finite else float('nan')


def category_table(op: OpSpec, cases: list[CaseResult], left_out: list[str]
                   ) -> dict[str, dict[str, Any]]:
    """Category -> {status, cases, failed, max_abs, abs_tol, max_rel, rel_tol, note}.

    Status: pass, FAIL, FAIL (known: a listed known failure), n/a (the op never receives
    such input; the note says why), --full (its cases run only without --quick; ``left_out``
    holds those categories) or not covered (no case in the sweep).
    Each accepted dtype (``op.dtypes``) gets a row ``dtype <name>``.
    """
    rows: dict[str, dict[str, Any]] = {}
    names = [c for c in CATEGORIES if c != 'dtype'] + [f'dtype {d}' for d in op.dtypes]
    for category in names:
        if category.startswith('dtype '):
            dtype = category.split(' ', 1)[1]
            members = [c for c in cases if dtype in c.dtypes or c.category == category]
        else:
            members = [c for c in cases if c.category == category]
        if not members:
            if category in op.not_applicable:
                rows[category] = {'status': 'n/a', 'note': op.not_applicable[category]}
            elif category in left_out:
                rows[category] = {'status': '--full', 'note': 'runs without --quick'}
            else:
                rows[category] = {'status': 'not covered', 'note': 'no case in the sweep'}
            continue
        failed = [c for c in members if not c.ok]
        unexpected = [c for c in members if c.counts_as_failure]
        status = 'FAIL' if unexpected else ('FAIL (known)' if failed else 'pass')
        rows[category] = {
            'status': status,
            'known': sorted({c.known for c in failed if c.known}),
            'cases': len(members),
            'failed': [c.name for c in failed],
            'max_abs': _max([c.max_abs for c in members]),
            'abs_tol': _max([c.abs_tol for c in members]),
            'max_rel': _max([c.max_rel for c in members]),
            'rel_tol': _max([c.rel_tol for c in members]),
            'unit': next((c.unit for c in members if c.unit), ''),
            'repro': [c.repro for c in failed if c.repro],
        }
    return rows


# --- performance ------------------------------------------------------------------------------

def performance_gates(op: OpSpec, baselines: host.BaselineStore | None, *, pairs: int,
                      max_seconds: float, update_baseline: bool = False,
                      ) -> dict[str, dict[str, Any]]:
    """The claim gate and the same-host regression check of one op."""
    measured = timing.measure_speedup(op, pairs=pairs, max_seconds=max_seconds)
    gates = {'claim': timing.claim_gate(measured, op.claim)}
    if baselines is not None:
        baseline, where = (None, '') if update_baseline else baselines.get(op.name,
                                                                          measured['case'])
        gates['regression'] = host.regression_check(measured, baseline, where, baselines.path)
        if baseline is None and gates['claim']['verdict'] == 'pass':
            baselines.put(op.name, measured)
            if update_baseline:
                gates['regression']['detail'] = f'baseline re-recorded in {baselines.path}'
        elif baseline is None:
            gates['regression']['detail'] = 'no baseline for this host; none recorded from ' \
                'a run that fails its claim'
    return gates


def verify_op(op: OpSpec, tolerances: dict[str, dict[str, Any]],
              baselines: host.BaselineStore | None = None, *, perf: bool = True,
              quick: bool = False, pairs: int | None = None, perf_seconds: float = 60.0,
              repro_dir: Path | None = None, update_baseline: bool = False) -> OpResult:
    """All gates of one op."""
    from edge_loop.verify.gate import current_environment

    result = OpResult(op.name, 'fail', device=op.device)
    tol = tolerances.get(op.name)
    if tol is None:
        result.reason = f'no tolerance row for {op.name!r} in config/tolerances.yaml'
        result.failures.append(('equivalence', 'no tolerance row'))
        return result
    result.tolerance = dict(tol)
    try:
        check_device(op)
        result.files = op_files(op)
        result.environment = current_environment(op.libraries, op.device)
        eq, cases = equivalence_gate(op, tol, quick=quick, repro_dir=repro_dir)
        result.gates['equivalence'] = eq
        result.cases = cases
        result.categories = category_table(op, cases, eq.get('left_out_categories', []))
        result.worst_error = eq.get('worst_error', 0.0)
        result.worst_case = eq.get('worst_case', '')
        result.failures += [('equivalence', c) for c in eq.get('failed_categories', [])]
        if perf:
            n = pairs or (QUICK_PAIRS if quick else FULL_PAIRS)
            result.gates.update(performance_gates(op, baselines, pairs=n,
                                                  max_seconds=perf_seconds,
                                                  update_baseline=update_baseline))
            for gate in ('claim', 'regression'):
                if result.gates.get(gate, {}).get('verdict') == 'fail':
                    result.failures.append((gate, result.gates[gate]['category']))
    except SkipOp as exc:
        result.verdict, result.reason = 'skip', str(exc)
        return result
    except Exception as exc:  # noqa: BLE001 - report it, do not stop the other ops
        result.reason = f'{type(exc).__name__}: {exc}'
        result.gates['error'] = {'verdict': 'fail', 'detail': traceback.format_exc()}
        result.failures.append(('error', type(exc).__name__))
        return result
    failed = [g for g, v in result.gates.items() if v.get('verdict') != 'pass']
    result.verdict = 'fail' if failed else 'pass'
    result.reason = ('failed gate(s): ' + ', '.join(
        f'{g} ({c})' for g, c in result.failures)) if failed else 'all gates pass'
    return result


# --- the deployment record --------------------------------------------------------------------

def write_record(results: list[OpResult], path: Path, mode: str = 'full') -> list[str]:
    """Record the passing ops whose files, tolerance or environment changed; their names.

    An entry whose files and tolerance are unchanged and whose environment is not stale
    (same major.minor versions) is kept as it is, so an unchanged checkout does not dirty
    the tracked file; a full run replaces an entry a ``--quick`` run wrote (``mode``).
    """
    from edge_loop.verify.gate import current_environment, stale_reasons

    data = json.loads(path.read_text()) if path.exists() else {}
    ops = data.setdefault('ops', {})
    written = []
    for r in results:
        if r.verdict != 'pass':
            continue
        env = r.environment or current_environment(('numpy',))
        old = ops.get(r.name, {})
        if (old.get('files') == r.files and old.get('tolerance') == r.tolerance
                and old.get('environment') and not stale_reasons(old['environment'])
                and (old.get('mode') == 'full' or mode == 'quick')):
            continue
        claim = r.gates.get('claim', {})
        ops[r.name] = {
            'files': r.files,
            'tolerance': r.tolerance,
            'environment': env,
            'worst_error': r.worst_error,
            'speedup': round(claim.get('speedup', 0.0), 2),
            'claimed_speedup': claim.get('claim'),
            'mode': mode,
            'verified_at': datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds'),
        }
        written.append(r.name)
    if not written and path.exists():
        return written
    data['note'] = ('written by `edge-loop verify`; nodes refuse to activate an op whose files '
                    'no longer match or whose environment (major.minor library versions, '
                    'accelerator) changed (edge_loop/verify/gate.py)')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + '\n')
    return written


# --- command line -----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``edge-loop verify``."""
    parser.add_argument('--ops', nargs='+', metavar='NAME', help='only these ops')
    parser.add_argument('--list', action='store_true', help='list the registered ops and exit')
    parser.add_argument('--quick', action='store_true',
                        help='one case per input category, no 3840x2160, 30 timing pairs')
    parser.add_argument('--repro', type=Path, metavar='FILE',
                        help='rerun one saved failing case (.npz) and exit')
    parser.add_argument('--output', type=Path, default=Path('reports/verify'),
                        help='report directory (default: reports/verify)')
    parser.add_argument('--tolerances', type=Path, default=None,
                        help='tolerance table (default: config/tolerances.yaml)')
    parser.add_argument('--baseline-dir', type=Path, default=None,
                        help="where this host's speed-up baselines are kept (default: "
                             '$XDG_CACHE_HOME/edge_loop/verify/baselines)')
    parser.add_argument('--update-baseline', action='store_true',
                        help="record this run's speed-ups as this host's baseline")
    parser.add_argument('--record', type=Path, default=None,
                        help='deployment record to update on success '
                             '(default: config/verified.json)')
    parser.add_argument('--no-record', action='store_true',
                        help='do not update the deployment record')
    parser.add_argument('--no-perf', action='store_true',
                        help='skip the performance gates (never records the ops as verified)')
    parser.add_argument('--pairs', type=int, default=None,
                        help=f'interleaved timing pairs per op (default {FULL_PAIRS}, '
                             f'--quick {QUICK_PAIRS}; never fewer than {timing.MIN_PAIRS})')
    parser.add_argument('--perf-seconds', type=float, default=60.0,
                        help='stop timing an op after this long once 30 pairs are done')


def _list(ops: list[OpSpec]) -> int:
    for op in ops:
        print(f'{op.name}: claims {op.claim:g}x on {op.device}, libraries '
              f'{", ".join(op.libraries)}, artifact {op.artifact}')
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the gates; 0 when every selected op passes (skips do not fail the run)."""
    from edge_loop.verify import report, repro

    if getattr(args, 'repro', None):
        return repro.rerun(args.repro, args.tolerances)
    ops = discover_ops()
    if args.list:
        return _list(ops)
    if args.ops:
        unknown = sorted(set(args.ops) - {op.name for op in ops})
        if unknown:
            print(f'unknown op(s): {", ".join(unknown)}; registered: '
                  f'{", ".join(op.name for op in ops)}', file=sys.stderr)
            return 2
        ops = [op for op in ops if op.name in args.ops]
    tolerances = load_tolerances(args.tolerances or default_config_file('tolerances.yaml'))
    baselines = host.BaselineStore(args.baseline_dir, default_config_file('verify_baseline.json'))
    out_dir: Path = args.output
    repro_dir = out_dir / 'repro'
    if repro_dir.is_dir():
        for old in repro_dir.glob('*.npz'):
            old.unlink()
    started = time.perf_counter()
    results = []
    print(f'host: {host.describe(baselines.fingerprint)} (fingerprint {baselines.id})',
          flush=True)
    for op in ops:
        t0 = time.perf_counter()
        r = verify_op(op, tolerances, baselines, perf=not args.no_perf, quick=args.quick,
                      pairs=args.pairs, perf_seconds=args.perf_seconds, repro_dir=repro_dir,
                      update_baseline=args.update_baseline)
        print(report.console_line(r, time.perf_counter() - t0), flush=True)
        results.append(r)
    if not args.no_perf:
        baselines.save()
    passed = all(r.verdict != 'fail' for r in results)
    record_note = ''
    if passed and not args.no_record and not args.no_perf:
        record = args.record or default_config_file('verified.json')
        written = write_record(results, record, 'quick' if args.quick else 'full')
        record_note = (f'deployment record: {record} ' + (
            f'updated for {", ".join(written)}' if written else 'unchanged'))
    index = report.write_report(results, out_dir, fingerprint=baselines.fingerprint,
                                fingerprint_id=baselines.id, quick=args.quick,
                                seconds=time.perf_counter() - started)
    print()
    print(report.console_table(results))
    if record_note:
        print(record_note)
    print(f'report: {index} (and {index.with_suffix(".html")})')
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m edge_loop.verify.run``."""
    parser = argparse.ArgumentParser(prog='edge-loop verify', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == '__main__':
    # Run the imported module's main, not this __main__ copy: an op raises
    # edge_loop.verify.run.SkipOp, which is not this copy's SkipOp class (the H200 run of
    # `python -m edge_loop.verify.run` reported a GPU op's skip as a failure for that reason).
    from edge_loop.verify import run as _run

    sys.exit(_run.main())
