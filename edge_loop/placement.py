# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Where a stage runs: the ``device`` parameter and the ONNX Runtime execution providers.

``device`` is one of ``cpu``, ``cuda``, ``cuda:N`` or ``auto``. ``cuda`` is also what torch
calls a ROCm/HIP GPU (an AMD integrated GPU), so one spelling covers both vendors. ``auto``
picks the first accelerator torch sees and the CPU otherwise; it never picks a device that
``bench/placement.py`` did not find faster (the caller passes ``allowed``).

ONNX models take an execution-provider list instead (``providers``): a comma-separated list
in priority order, such as ``CUDAExecutionProvider,CPUExecutionProvider`` or
``VitisAIExecutionProvider,CPUExecutionProvider`` on a Ryzen AI part, so an NPU is a
configuration change. Providers the installed ONNX Runtime does not have are dropped with a
note; the CPU provider always stays last as the fallback.

Nothing here imports torch or onnxruntime at module level: a CPU-only robot without them can
still parse its parameters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

DEVICE_CHOICES = ('cpu', 'cuda', 'cuda:N', 'auto')
_DEVICE_RE = re.compile(r'^(cpu|auto|cuda)(?::(\d+))?$')
CPU_PROVIDER = 'CPUExecutionProvider'
# What each device spelling asks ONNX Runtime for, best first.
_DEVICE_PROVIDERS = {
    'cuda': ('CUDAExecutionProvider', 'ROCMExecutionProvider', 'MIGraphXExecutionProvider'),
    'cpu': (),
}


class PlacementError(ValueError):
    """A device or provider setting that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class Placement:
    """A parsed ``device`` setting.

    Attributes:
        requested: the parameter as given (``auto``, ``cuda:1``, ...).
        device: the torch device string it resolved to (``cpu``, ``cuda:0``, ...).
        reason: one line saying why (printed by the node at configure).

    """

    requested: str
    device: str
    reason: str

    @property
    def is_accelerator(self) -> bool:
        """True when the stage runs off the CPU."""
        return self.device != 'cpu'


def parse_device(spec: str) -> tuple[str, int | None]:
    """(kind, index) of a device string; raises :class:`PlacementError` on anything else."""
    m = _DEVICE_RE.match(str(spec).strip().lower())
    if m is None:
        raise PlacementError(f'device {spec!r} is not one of {", ".join(DEVICE_CHOICES)}')
    kind, index = m.group(1), m.group(2)
    if index is not None and kind != 'cuda':
        raise PlacementError(f'device {spec!r}: only cuda takes an index')
    return kind, (int(index) if index is not None else None)


def accelerator_count() -> int:
    """Number of torch ``cuda`` devices (CUDA or ROCm/HIP); 0 without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(spec: str, allowed: tuple[str, ...] = ('cpu', 'cuda')) -> Placement:
    """Resolve ``spec`` against the devices present; raises :class:`PlacementError`.

    ``allowed``: device kinds ``auto`` may choose (a stage whose GPU kernel is not faster
    passes ``('cpu',)``). An explicit ``cuda``/``cuda:N`` on a host without that GPU fails:
    silently falling back would hide a misconfigured robot.
    """
    kind, index = parse_device(spec)
    n = accelerator_count()
    if kind == 'cpu':
        return Placement(spec, 'cpu', 'asked for the CPU')
    if kind == 'auto':
        if 'cuda' in allowed and n > 0:
            return Placement(spec, 'cuda:0', f'auto: {n} accelerator(s) found, using cuda:0')
        why = 'no accelerator found' if n == 0 else 'the accelerator is not faster for it'
        return Placement(spec, 'cpu', f'auto: {why}, using the CPU')
    index = 0 if index is None else index
    if index >= n:
        raise PlacementError(f'device {spec!r}: this host has {n} accelerator(s) visible to '
                             'torch (CUDA or ROCm)')
    return Placement(spec, f'cuda:{index}', f'asked for cuda:{index}')


def parse_providers(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """The provider list from a comma-separated string or a list (empty entries dropped)."""
    items = spec.split(',') if isinstance(spec, str) else list(spec)
    names = [s.strip() for s in items if s and s.strip()]
    for name in names:
        if not name.endswith('ExecutionProvider'):
            raise PlacementError(f'execution provider {name!r} does not end in '
                                 "'ExecutionProvider' (see onnxruntime.get_available_providers())")
    return names


def ort_providers(device: str, providers: str | list[str] = '',
                  available: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(providers to pass to ONNX Runtime, notes) for a resolved torch device string.

    An explicit ``providers`` list wins over the device; otherwise the device picks (a GPU:
    CUDA, ROCm or MIGraphX, whichever is installed). ``available`` defaults to
    ``onnxruntime.get_available_providers()``. The CPU provider is always appended.
    """
    if available is None:
        import onnxruntime

        available = list(onnxruntime.get_available_providers())
    wanted = parse_providers(providers) if providers else list(
        _DEVICE_PROVIDERS['cuda' if device.startswith('cuda') else 'cpu'])
    chosen, notes = [], []
    for name in wanted:
        if name == CPU_PROVIDER:
            continue
        if name in available:
            chosen.append(name)
        else:
            notes.append(f'{name} not in this onnxruntime ({", ".join(available)})')
    chosen.append(CPU_PROVIDER)
    return chosen, notes


def ort_provider_options(providers: list[str], device: str) -> list[dict[str, str]]:
    """Per-provider options: the GPU index for CUDA/ROCm (and no TF32), nothing for others.

    TF32 off: the CUDA provider would otherwise round float32 conv inputs to 10 bits of
    mantissa, which the float32 gate (and the model's float32 verification) does not allow.
    """
    index = device.split(':', 1)[1] if ':' in device else '0'
    options = {'CUDAExecutionProvider': {'device_id': index, 'use_tf32': '0'},
               'ROCMExecutionProvider': {'device_id': index}}
    return [dict(options.get(p, {})) for p in providers]


def gated_providers(model: str, device: str, providers: str | list[str] = '',
                    available: list[str] | None = None
                    ) -> tuple[list[str], list[str], list[str]]:
    """(providers, verified ops they need, notes) for ``model`` on a node's settings.

    As :func:`ort_providers`, and refuses (:class:`PlacementError`) an explicit list of
    which this onnxruntime has none: falling back to the CPU silently would hide a
    misconfigured robot (an NPU driver missing), as an explicit ``cuda`` on a host without
    one does.
    """
    chosen, notes = ort_providers(device, providers, available)
    asked = parse_providers(providers) if providers else []
    if asked and chosen == [CPU_PROVIDER] and CPU_PROVIDER not in asked:
        raise PlacementError(f'providers {", ".join(asked)}: none is in this onnxruntime '
                             f'({"; ".join(notes)})')
    return chosen, [ort_op_name(model, p) for p in chosen if p != CPU_PROVIDER], notes


def ort_op_name(model: str, provider: str) -> str:
    """The verified op a model on an execution provider needs: ``<model>.ort.<short>.float32``.

    ``CUDAExecutionProvider`` -> ``segnet.ort.cuda.float32``; an NPU's provider, e.g.
    ``VitisAIExecutionProvider`` -> ``segnet.ort.vitisai.float32``: a provider is placed only
    after ``make verify`` gated the model on it, on that host.
    """
    short = provider.removesuffix('ExecutionProvider').lower()
    return f'{model}.ort.{short}.float32'


def _why_not(parse: Callable[[str], object], spec: str) -> str | None:
    try:
        parse(spec)
    except PlacementError as exc:
        return str(exc)
    return None


def device_error(spec: str) -> str | None:
    """None for a valid ``device`` spelling, else why not (a node's ``Param.check``)."""
    return _why_not(parse_device, spec)


def providers_error(spec: str) -> str | None:
    """None for a valid ``providers`` list ('' = follow ``device``), else why not."""
    return _why_not(parse_providers, spec)
