# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Model equivalence ops: torch module vs its ONNX export vs ONNX Runtime.

:func:`onnx_model_ops` turns one exported model into two ops for the harness, both with the
ONNX file as their artifact (so the deployment gate pins the exact weights):

- ``<name>.onnx``: the ONNX reference evaluator (``onnx.reference``, the standard's semantics
  in plain numpy) vs ONNX Runtime, the deployed runtime. Needs no torch.
- ``<name>.torch``: the torch module (the training code's forward) vs ONNX Runtime; skipped
  with a reason (:class:`~edge_loop.verify.run.SkipOp`) where torch is not installed, as on
  the robot and in CI.

Outputs are compared with :func:`edge_loop.verify.compare.compare_allclose` (float32:
torch.testing defaults) unless the op's tolerance row says otherwise.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from edge_loop.verify.compare import Comparison, compare_allclose
from edge_loop.verify.spec import Case, OpSpec

_SESSIONS: dict[str, Any] = {}


def _ort_session(path: str) -> Any:
    import onnxruntime as ort

    key = f'{path}:{Path(path).stat().st_mtime_ns}'
    if key not in _SESSIONS:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        _SESSIONS[key] = ort.InferenceSession(path, opts, providers=['CPUExecutionProvider'])
    return _SESSIONS[key]


def run_onnxruntime(path: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of the ONNX Runtime CPU session for ``path`` (one thread)."""
    return _ort_session(str(path)).run(None, inputs)


def run_onnx_reference(path: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of the ONNX reference evaluator (the standard's semantics, plain numpy)."""
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(str(path)).run(None, inputs))


def compare_outputs(ref: list[np.ndarray], dep: list[np.ndarray],
                    tol: dict[str, Any]) -> tuple[float, bool, str]:
    """Every output allclose (per-dtype defaults unless ``tol`` sets rtol/atol)."""
    if len(ref) != len(dep):
        return Comparison(float('inf'), False, f'{len(dep)} outputs, reference has {len(ref)}',
                          max_abs=float('inf'), max_rel=float('inf'))
    parts = [compare_allclose(np.asarray(r), np.asarray(d), tol) for r, d in zip(ref, dep)]
    if not parts:
        return Comparison(0.0, True, 'no outputs', max_abs=0.0, max_rel=0.0)
    return Comparison(max(p.worst for p in parts), all(p.ok for p in parts),
                      '; '.join(f'output {i}: {p.detail}' for i, p in enumerate(parts)),
                      max_abs=max(p.max_abs for p in parts),
                      abs_tol=max(p.abs_tol for p in parts),
                      max_rel=max(p.max_rel for p in parts),
                      rel_tol=max(p.rel_tol for p in parts))


def onnx_model_ops(name: str, onnx_path: str | Path,
                   cases: Callable[[], Iterable[Case]],
                   torch_forward: Callable[[dict[str, np.ndarray]], list[np.ndarray]] | None,
                   min_speedup: float = 1.0) -> list[OpSpec]:
    """The two equivalence ops of one exported model (see the module docstring).

    ``cases`` yield ``Case(name, (inputs_dict,))``; ``torch_forward(inputs) -> outputs`` runs
    the torch module (imported lazily inside it).
    """
    path = str(onnx_path)

    def deployed(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return run_onnxruntime(path, inputs)

    def onnx_reference(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return run_onnx_reference(path, inputs)

    def torch_reference(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        from edge_loop.verify.run import SkipOp

        if torch_forward is None:
            raise SkipOp('no torch module given for this model')
        if importlib.util.find_spec('torch') is None:
            raise SkipOp('torch is not installed (pip install torch==2.13.0 to run this gate)')
        return torch_forward(inputs)

    def perf_case() -> Case:
        return next(iter(cases()))

    return [
        OpSpec(name=f'{name}.onnx', reference=onnx_reference, deployed=deployed, cases=cases,
               compare=compare_outputs, perf_case=perf_case, min_speedup=min_speedup,
               artifact=path),
        OpSpec(name=f'{name}.torch', reference=torch_reference, deployed=deployed,
               cases=cases, compare=compare_outputs, perf_case=perf_case,
               min_speedup=min_speedup, artifact=path),
    ]
