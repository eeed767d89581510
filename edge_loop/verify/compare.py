# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Comparisons for ``OpSpec.compare``: ``(ref_out, dep_out, tolerance) -> (worst, ok, detail)``.

``tolerance`` is the op's row of config/tolerances.yaml. Array comparisons follow
``torch.testing.assert_close``: ``|dep - ref| <= atol + rtol * |ref|`` elementwise, NaN equal to
NaN at the same place; ``worst`` is the largest ``|dep - ref| - rtol * |ref|`` (<= atol passes).
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


def compare_exact(ref: Any, dep: Any, tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Integer/index/boolean outputs: same shape, same dtype kind, every element equal."""
    ref_a, dep_a = np.asarray(ref), np.asarray(dep)
    if ref_a.shape != dep_a.shape:
        return float('inf'), False, f'shape {dep_a.shape} != reference {ref_a.shape}'
    if ref_a.dtype != dep_a.dtype:
        return float('inf'), False, f'dtype {dep_a.dtype} != reference {ref_a.dtype}'
    diff = ref_a != dep_a
    n = int(np.count_nonzero(diff))
    if n == 0:
        return 0.0, True, 'identical'
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.ndim else ()
    worst = float(np.max(np.abs(ref_a.astype(np.float64) - dep_a.astype(np.float64))))
    return worst, False, f'{n} element(s) differ, first at {tuple(int(i) for i in idx)}'


def compare_allclose(ref: Any, dep: Any, tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Float arrays with rtol/atol (from ``tol`` or the dtype defaults)."""
    ref_a, dep_a = np.asarray(ref), np.asarray(dep)
    if ref_a.shape != dep_a.shape:
        return float('inf'), False, f'shape {dep_a.shape} != reference {ref_a.shape}'
    if ref_a.dtype != dep_a.dtype:
        return float('inf'), False, f'dtype {dep_a.dtype} != reference {ref_a.dtype}'
    default_rtol, default_atol = DTYPE_DEFAULTS.get(ref_a.dtype.name, (0.0, 0.0))
    rtol = float(tol.get('rtol', default_rtol))
    atol = float(tol.get('atol', default_atol))
    if ref_a.size == 0:
        return 0.0, True, 'empty'
    r = ref_a.astype(np.float64)
    d = dep_a.astype(np.float64)
    both_nan = np.isnan(r) & np.isnan(d)
    nan_mismatch = np.isnan(r) != np.isnan(d)
    excess = np.where(both_nan, 0.0, np.abs(d - r) - rtol * np.abs(r))
    excess = np.where(nan_mismatch, np.inf, excess)
    worst = float(np.max(excess))
    bad = int(np.count_nonzero(excess > atol))
    ok = bad == 0
    detail = (f'rtol={rtol:g} atol={atol:g}: ' +
              ('all within' if ok else f'{bad} element(s) beyond, worst excess {worst:.3g}'))
    return max(worst, 0.0), ok, detail


def angle_diff_mod(a: float, b: float, period: float) -> float:
    """Smallest |a - b| modulo ``period`` (pi for axes and parallel-jaw yaw)."""
    d = (a - b) % period
    return float(min(d, period - d))
