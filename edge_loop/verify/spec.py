# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""What a verified op declares.

Each ``edge_loop/verify/ops_<stage>.py`` module exposes
``OPS: list[OpSpec]``; the harness discovers them, runs the gates and writes the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One input of a sweep: a name a reviewer can read, and the call's arguments."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    """An optimised implementation and the plain reference it must match.

    Attributes:
        name: op id, also the key of its row in config/tolerances.yaml.
        reference: the plain implementation (obviously correct, may be slow).
        deployed: the implementation the node runs.
        cases: the sweep (shapes, dtypes, degenerate inputs, read-only/non-contiguous views).
        compare: (ref_out, dep_out, tolerance) -> (worst_error, ok, detail); the tolerance
            dict comes from config/tolerances.yaml.
        perf_case: the input used for the speed gate (a realistic 640x480 frame).
        min_speedup: deployed must be at least this much faster than reference.
        artifact: file (e.g. ONNX model) whose hash the deployment gate pins, or None.

    """

    name: str
    reference: Callable[..., Any]
    deployed: Callable[..., Any]
    cases: Callable[[], Iterable[Case]]
    compare: Callable[[Any, Any, dict[str, Any]], tuple[float, bool, str]]
    perf_case: Callable[[], Case]
    min_speedup: float = 1.0
    artifact: str | None = None
