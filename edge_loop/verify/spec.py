# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""What a verified op declares.

Each ``edge_loop/verify/ops_<stage>.py`` module exposes ``OPS: list[OpSpec]``; the harness
(:mod:`edge_loop.verify.run`) discovers them, runs the gates and writes the report.

How an op declares ...

- **its claim**: ``claimed_speedup`` is the speed-up of ``deployed`` over ``reference`` that
  the op promises on ``perf_case()``. The performance gate times both interleaved in one
  process on the same input (at least 30 pairs), bootstraps a 95% confidence interval of the
  median per-pair speed-up, and fails only when the whole interval lies below the claim.
  Choose it from measurements with margin (docs/verification.md says how the shipped claims
  were chosen): it must hold on a loaded 2-core VM and on a large server alike. ``0`` means
  no performance claim (the timing is still shown); ``min_speedup`` is the old name of the
  field and is used when ``claimed_speedup`` is not given.
- **its device**: ``device`` is ``'cpu'`` (default) or a torch device string such as
  ``'cuda'``/``'cuda:0'``. The harness skips, with the reason, an op whose device is not
  present, synchronises the device around every timed call, and pins the accelerator's name
  and driver in the op's record (``config/verified.json``).
- **its dtypes**: ``dtypes`` lists the input dtypes the deployed implementation accepts
  (numpy or torch names, e.g. ``('uint16', 'float32')``); the category report has one row per
  dtype, so the sweep should hold at least one case per dtype (``Case.category='dtype
  float32'`` or any case whose arrays have that dtype).
- **its libraries**: ``libraries`` names the packages whose version the result depends on
  (``numpy``, ``opencv``, ``onnxruntime``, ``onnx``, ``torch``); they and Python are pinned
  in the record, and a change of their major.minor version marks the entry stale.
- **its input categories**: every :class:`Case` may carry ``category`` (one of
  :data:`CATEGORIES`); without one, the category is read from the case's name
  (:func:`category_of`). Categories an op cannot receive at all go in ``not_applicable``
  with the reason (e.g. ``{'saturated/black colour': 'takes no colour image'}``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# The rows of the failure-category report, in order. 'huge 3840x2160' runs only in --full.
CATEGORIES = (
    'nominal',
    'empty',
    'single pixel',
    'odd/prime size',
    'non-contiguous/negative stride',
    'NaN/inf/zero depth',
    'saturated/black colour',
    'depth extremes',
    'dtype',
    'large 1920x1080',
    'huge 3840x2160',
)

# Name fragments -> category, for cases that do not set one (first match wins).
_NAME_RULES = (
    ('3840x2160', 'huge 3840x2160'),
    ('1920x1080', 'large 1920x1080'),
    ('negative stride', 'non-contiguous/negative stride'),
    ('non-contiguous', 'non-contiguous/negative stride'),
    ('noncontiguous', 'non-contiguous/negative stride'),
    ('strided', 'non-contiguous/negative stride'),
    ('empty', 'empty'),
    ('one valid pixel', 'single pixel'),
    ('single', 'single pixel'),
    ('nan', 'NaN/inf/zero depth'),
    ('inf', 'NaN/inf/zero depth'),
    ('all-zero depth', 'NaN/inf/zero depth'),
    ('all zero', 'NaN/inf/zero depth'),
    ('zero depth', 'NaN/inf/zero depth'),
    ('saturated', 'saturated/black colour'),
    ('black', 'saturated/black colour'),
    ('depth extreme', 'depth extremes'),
    ('near', 'depth extremes'),
    ('far', 'depth extremes'),
    ('prime', 'odd/prime size'),
    ('641x479', 'odd/prime size'),
    ('dtype', 'dtype'),
)


def category_of(name: str) -> str:
    """The report category of a case named ``name`` (``nominal`` when no rule matches)."""
    low = name.lower()
    for fragment, category in _NAME_RULES:
        if fragment in low:
            return category
    return 'nominal'


@dataclass(frozen=True)
class Case:
    """One input of a sweep: a name a reviewer can read, and the call's arguments.

    ``category``: the report row (one of :data:`CATEGORIES`; empty: read from the name).
    ``full_only``: too slow for ``--quick`` (e.g. 3840x2160); runs in the default mode.
    """

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    category: str = ''
    full_only: bool = False

    @property
    def report_category(self) -> str:
        """``category`` if set, else the one read from the name."""
        return self.category or category_of(self.name)


@dataclass(frozen=True)
class OpSpec:
    """An optimised implementation and the plain reference it must match.

    Attributes:
        name: op id, also the key of its row in config/tolerances.yaml.
        reference: the plain implementation (obviously correct, may be slow); the
            performance gate always times this, never a second run of ``deployed``.
        deployed: the implementation the node runs.
        cases: the sweep (shapes, dtypes, degenerate inputs, read-only/non-contiguous views).
        compare: (ref_out, dep_out, tolerance) -> (worst_error, ok, detail), or a
            :class:`~edge_loop.verify.compare.Comparison` that also carries the max
            absolute/relative errors; the tolerance dict comes from config/tolerances.yaml.
        perf_case: the input used for the speed gate.
        min_speedup: old name of ``claimed_speedup`` (used when that is None).
        artifact: file (e.g. ONNX model) whose hash the deployment gate pins, or None.
        claimed_speedup: the speed-up the op claims on ``perf_case()`` (see the module doc).
        device: ``'cpu'`` or a torch device string (``'cuda'``).
        dtypes: input dtypes the deployed implementation accepts.
        libraries: packages whose version the result depends on (pinned in the record).
        not_applicable: category -> why the op never receives such input.
        known_failures: case name -> why its divergence is accepted (like a strict xfail:
            reported as a known failure, not failing the gate; the gate fails when such a
            case passes, so the entry is removed once the kernel is fixed).

    """

    name: str
    reference: Callable[..., Any]
    deployed: Callable[..., Any]
    cases: Callable[[], Iterable[Case]]
    compare: Callable[[Any, Any, dict[str, Any]], Any]
    perf_case: Callable[[], Case]
    min_speedup: float = 1.0
    artifact: str | None = None
    claimed_speedup: float | None = None
    device: str = 'cpu'
    dtypes: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ('numpy',)
    not_applicable: dict[str, str] = field(default_factory=dict)
    known_failures: dict[str, str] = field(default_factory=dict)

    @property
    def claim(self) -> float:
        """The speed-up the performance gate holds the op to (0: no claim)."""
        return self.claimed_speedup if self.claimed_speedup is not None else self.min_speedup
