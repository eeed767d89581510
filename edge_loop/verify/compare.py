# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Comparisons for ``OpSpec.compare``: ``(ref_out, dep_out, tolerance) -> (worst, ok, detail)``.

``tolerance`` is the op's row of config/tolerances.yaml. Array comparisons follow
``torch.testing.assert_close``: ``|dep - ref| <= atol + rtol * |ref|`` elementwise, NaN equal to
NaN at the same place; ``worst`` is the largest ``|dep - ref| - rtol * |ref|`` (<= atol passes).

A compare returns a :class:`Comparison`: it unpacks as ``(worst, ok, detail)`` and also
carries the largest absolute and relative errors and the tolerances they are held to, which
the failure-category report shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# torch.testing.assert_close defaults per dtype (rtol, atol).
DTYPE_DEFAULTS = {
    'float16': (1e-3, 1e-5),
    'bfloat16': (1.6e-2, 1e-5),
    'float32': (1.3e-6, 1e-5),
    'float64': (1e-7, 1e-7),
}


class Comparison(tuple):
    """``(worst, ok, detail)`` plus ``max_abs``/``abs_tol``/``max_rel``/``rel_tol``/``unit``.

    A plain 3-tuple, so older callers unpack it as before; the extra numbers are attributes
    (NaN where a compare has no such measure).
    """

    max_abs: float
    abs_tol: float
    max_rel: float
    rel_tol: float
    unit: str

    def __new__(cls, worst: float, ok: bool, detail: str, *, max_abs: float = float('nan'),
                abs_tol: float = float('nan'), max_rel: float = float('nan'),
                rel_tol: float = float('nan'), unit: str = '') -> Comparison:
        """A verdict with its error measures."""
        self = super().__new__(cls, (float(worst), bool(ok), str(detail)))
        self.max_abs, self.abs_tol = float(max_abs), float(abs_tol)
        self.max_rel, self.rel_tol = float(max_rel), float(rel_tol)
        self.unit = unit
        return self

    @property
    def worst(self) -> float:
        """The op's own worst-error figure (its unit is the compare's)."""
        return self[0]

    @property
    def ok(self) -> bool:
        """Within tolerance."""
        return self[1]

    @property
    def detail(self) -> str:
        """One line for the report."""
        return self[2]


def as_comparison(value: Any) -> Comparison:
    """A compare's result as a :class:`Comparison` (3-tuples get NaN error measures)."""
    if isinstance(value, Comparison):
        return value
    worst, ok, detail = value
    return Comparison(worst, ok, detail)


def compare_exact(ref: Any, dep: Any, tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Integer/index/boolean outputs: same shape, same dtype kind, every element equal."""
    ref_a, dep_a = np.asarray(ref), np.asarray(dep)
    inf = float('inf')
    if ref_a.shape != dep_a.shape:
        return Comparison(inf, False, f'shape {dep_a.shape} != reference {ref_a.shape}',
                          max_abs=inf, abs_tol=0.0, max_rel=inf, rel_tol=0.0)
    if ref_a.dtype != dep_a.dtype:
        return Comparison(inf, False, f'dtype {dep_a.dtype} != reference {ref_a.dtype}',
                          max_abs=inf, abs_tol=0.0, max_rel=inf, rel_tol=0.0)
    diff = ref_a != dep_a
    n = int(np.count_nonzero(diff))
    if n == 0:
        return Comparison(0.0, True, 'identical', max_abs=0.0, abs_tol=0.0, max_rel=0.0,
                          rel_tol=0.0)
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim else ()
    r64, d64 = ref_a.astype(np.float64), dep_a.astype(np.float64)
    worst = float(np.max(np.abs(r64 - d64)))
    with np.errstate(divide='ignore', invalid='ignore'):
        rel = float(np.nanmax(np.abs(r64 - d64) / np.abs(r64)))
    return Comparison(worst, False, f'{n} element(s) differ, first at '
                      f'{tuple(int(i) for i in idx)}', max_abs=worst, abs_tol=0.0,
                      max_rel=rel, rel_tol=0.0)


def compare_allclose(ref: Any, dep: Any, tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Float arrays with rtol/atol (from ``tol`` or the dtype defaults)."""
    ref_a, dep_a = np.asarray(ref), np.asarray(dep)
    inf = float('inf')
    default_rtol, default_atol = DTYPE_DEFAULTS.get(ref_a.dtype.name, (0.0, 0.0))
    rtol = float(tol.get('rtol', default_rtol))
    atol = float(tol.get('atol', default_atol))
    tols = {'abs_tol': atol, 'rel_tol': rtol}
    if ref_a.shape != dep_a.shape:
        return Comparison(inf, False, f'shape {dep_a.shape} != reference {ref_a.shape}',
                          max_abs=inf, max_rel=inf, **tols)
    if ref_a.dtype != dep_a.dtype:
        return Comparison(inf, False, f'dtype {dep_a.dtype} != reference {ref_a.dtype}',
                          max_abs=inf, max_rel=inf, **tols)
    if ref_a.size == 0:
        return Comparison(0.0, True, 'empty', max_abs=0.0, max_rel=0.0, **tols)
    r = ref_a.astype(np.float64)
    d = dep_a.astype(np.float64)
    both_nan = np.isnan(r) & np.isnan(d)
    nan_mismatch = np.isnan(r) != np.isnan(d)
    excess = np.where(both_nan, 0.0, np.abs(d - r) - rtol * np.abs(r))
    excess = np.where(nan_mismatch, np.inf, excess)
    worst = float(np.max(excess))
    bad = int(np.count_nonzero(excess > atol))
    ok = bad == 0
    abs_err = np.where(both_nan, 0.0, np.abs(d - r))
    abs_err = np.where(nan_mismatch, np.inf, abs_err)
    with np.errstate(divide='ignore', invalid='ignore'):
        rel_err = np.where(abs_err == 0, 0.0, abs_err / np.abs(r))
    detail = (f'rtol={rtol:g} atol={atol:g}: ' +
              ('all within' if ok else f'{bad} element(s) beyond, worst excess {worst:.3g}'))
    return Comparison(max(worst, 0.0), ok, detail, max_abs=float(np.max(abs_err)),
                      max_rel=float(np.nanmax(rel_err)), **tols)


def angle_diff_mod(a: float, b: float, period: float) -> float:
    """Smallest |a - b| modulo ``period`` (pi for axes and parallel-jaw yaw)."""
    d = (a - b) % period
    return float(min(d, period - d))
