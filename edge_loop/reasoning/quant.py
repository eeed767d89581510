# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Weight-only formats of the decoder's linear layers: fp16/bf16, int8 and int4.

Every format is one small class with ``forward(x) -> x @ W.T`` and ``nbytes``. The packed
formats are our own and have a plain reference (dequantise to the compute dtype, then
``F.linear``) that runs on every device:

* ``int8``: one int8 code per weight, one scale per output row (symmetric, ``W ~ q * s``).
* ``int4``: two codes per byte (the even input column in the high nibble), codes 0..15 with
  8 as zero, one scale per group of ``group`` input columns (``W ~ (q - 8) * s``).

Where torch ships a fused weight-only kernel for the device (``aten._weight_int8pack_mm``,
``aten._weight_int4pack_mm`` (tinygemm) on CUDA), :func:`enable_fast_kernels` switches a layer
to it only after checking it against the reference on random inputs; otherwise the reference
stays. ``fast`` tells which one a layer uses, so a benchmark can say what it measured.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from edge_loop.reasoning.shapes import FORMATS, INT4_GROUP, weight_bytes  # noqa: F401

# Relative error a fused kernel may show against the dequantising reference (both round the
# same codes; the difference is accumulation order and bf16 vs fp16 activations).
FAST_KERNEL_RTOL = 2e-2


class DenseWeight:
    """A plain weight in the compute dtype."""

    fmt = 'fp16'

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.fast = False

    @property
    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)


class Int8Weight:
    """int8 codes ``q`` (out, in) and per-row scales ``scale`` (out,), ``W ~ q * scale``."""

    fmt = 'int8'

    def __init__(self, codes: torch.Tensor, scale: torch.Tensor) -> None:
        if codes.dtype != torch.int8 or codes.dim() != 2 or scale.shape != codes.shape[:1]:
            raise ValueError(f'int8 weight: codes {tuple(codes.shape)} {codes.dtype}, '
                             f'scale {tuple(scale.shape)}')
        self.codes = codes
        self.scale = scale
        self.fast = False

    @classmethod
    def quantize(cls, weight: torch.Tensor) -> Int8Weight:
        scale = weight.abs().amax(dim=1).float().clamp_min(1e-8) / 127.0
        codes = torch.round(weight.float() / scale[:, None]).clamp_(-127, 127).to(torch.int8)
        return cls(codes, scale.to(weight.dtype))

    @property
    def nbytes(self) -> int:
        return self.codes.numel() + self.scale.numel() * self.scale.element_size()

    def dequantize(self) -> torch.Tensor:
        return self.codes.to(self.scale.dtype) * self.scale[:, None]

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.codes.to(x.dtype)) * self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fast:
            shape = x.shape
            out = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, shape[-1]), self.codes,
                                                     self.scale)
            return out.reshape(*shape[:-1], -1)
        return self.reference(x)

    def try_fast(self) -> str | None:
        """Switch to aten._weight_int8pack_mm if it matches the reference; else why not."""
        return _check_fast(self, lambda: None)

    def drop_reference(self) -> None:
        """Nothing to free: the fused kernel reads the same codes."""


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """(out, in) codes 0..15 -> (out, in/2) uint8, the even column in the high nibble."""
    codes = codes.to(torch.uint8)
    return (codes[:, 0::2] << 4) | codes[:, 1::2]


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_int4`: (out, in/2) uint8 -> (out, in) uint8 codes."""
    out = torch.empty(packed.shape[0], packed.shape[1] * 2, dtype=torch.uint8,
                      device=packed.device)
    out[:, 0::2] = packed >> 4
    out[:, 1::2] = packed & 0x0F
    return out


class Int4Weight:
    """Packed int4 codes (out, in/2) uint8 and group scales (out, in/group)."""

    fmt = 'int4'

    def __init__(self, packed: torch.Tensor, scale: torch.Tensor, group: int = INT4_GROUP
                 ) -> None:
        out_f, half_in = packed.shape
        if packed.dtype != torch.uint8 or scale.shape != (out_f, 2 * half_in // group):
            raise ValueError(f'int4 weight: packed {tuple(packed.shape)} {packed.dtype}, '
                             f'scale {tuple(scale.shape)}, group {group}')
        self.packed = packed
        self.scale = scale
        self.group = group
        self.fast = False
        self._tiny: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def quantize(cls, weight: torch.Tensor, group: int = INT4_GROUP) -> Int4Weight:
        out_f, in_f = weight.shape
        if in_f % group:
            raise ValueError(f'int4: {in_f} input columns are not a multiple of group {group}')
        w = weight.float().reshape(out_f, in_f // group, group)
        scale = w.abs().amax(dim=2).clamp_min(1e-8) / 7.0
        codes = (torch.round(w / scale[..., None]) + 8).clamp_(0, 15).reshape(out_f, in_f)
        return cls(pack_int4(codes), scale.to(weight.dtype), group)

    @property
    def nbytes(self) -> int:
        own = self.packed.numel() + self.scale.numel() * self.scale.element_size()
        if self._tiny is not None:  # the fused kernel's tiled copy (see drop_reference)
            own += sum(t.numel() * t.element_size() for t in self._tiny)
        return own

    def dequantize(self) -> torch.Tensor:
        codes = unpack_int4(self.packed).to(self.scale.dtype) - 8
        out_f, in_f = codes.shape
        w = codes.reshape(out_f, in_f // self.group, self.group) * self.scale[..., None]
        return w.reshape(out_f, in_f)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantize().to(x.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._tiny is not None:
            tiny_packed, scales_zeros = self._tiny
            shape = x.shape
            out = torch.ops.aten._weight_int4pack_mm(
                x.reshape(-1, shape[-1]).to(torch.bfloat16), tiny_packed, self.group,
                scales_zeros)
            return out.reshape(*shape[:-1], -1).to(x.dtype)
        return self.reference(x)

    def _to_tinygemm(self) -> None:
        # tinygemm dequantises (q - 8) * scale + zero; our format is symmetric, so zero = 0.
        tiny = torch.ops.aten._convert_weight_to_int4pack(self.packed, 8)
        scale = self.scale.to(torch.bfloat16).t().contiguous()       # (in/group, out)
        scales_zeros = torch.stack([scale, torch.zeros_like(scale)], dim=2).contiguous()
        self._tiny = (tiny, scales_zeros)

    def try_fast(self) -> str | None:
        """Switch to tinygemm (CUDA) if it matches the reference; else why not."""
        return _check_fast(self, self._to_tinygemm)

    def drop_reference(self) -> None:
        """Free our packed codes once tinygemm's tiled copy serves (halves int4's bytes)."""
        if self._tiny is not None:
            # new empty tensors: a [:0] view would keep the whole storage alive
            self.packed = self.packed.new_empty(0)
            self.scale = self.scale.new_empty(0)


def _check_fast(layer: Any, prepare: Any) -> str | None:
    """Turn on ``layer``'s fused kernel if its output matches the reference, else undo."""
    dtype = layer.scale.dtype
    gen = torch.Generator(device=layer.scale.device).manual_seed(1234)
    in_f = layer.codes.shape[1] if hasattr(layer, 'codes') else layer.packed.shape[1] * 2
    x = torch.randn(3, in_f, device=layer.scale.device, dtype=dtype, generator=gen)
    want = layer.reference(x).float()
    try:
        prepare()
        layer.fast = True
        got = layer.forward(x).float()
    except (RuntimeError, NotImplementedError) as exc:
        _undo_fast(layer)
        return f'{type(exc).__name__}: {str(exc).splitlines()[0][:160]}'
    err = float((got - want).norm() / want.norm().clamp_min(1e-12))
    if not err < FAST_KERNEL_RTOL:
        _undo_fast(layer)
        return f'fused kernel differs from the reference: relative error {err:.3g}'
    # Batch-1 decode is what runs: keep the fused kernel only where it is faster there.
    x1 = x[:1]
    fused_s = _time(layer.forward, x1)
    layer.fast = False
    ref_s = _time(layer.reference, x1)
    layer.fast = True
    if fused_s >= ref_s:
        _undo_fast(layer)
        return 'fused kernel slower than the reference at batch 1'
    return None


def _time(fn: Any, x: torch.Tensor, reps: int = 20) -> float:
    """Median seconds of ``fn(x)`` (synchronised on CUDA)."""
    cuda = x.device.type == 'cuda'
    times = []
    for i in range(reps + 3):
        if cuda:
            torch.cuda.synchronize(x.device)
        t0 = time.perf_counter()
        fn(x)
        if cuda:
            torch.cuda.synchronize(x.device)
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _undo_fast(layer: Any) -> None:
    layer.fast = False
    if hasattr(layer, '_tiny'):
        layer._tiny = None


def make_weight(weight: torch.Tensor, fmt: str) -> DenseWeight | Int8Weight | Int4Weight:
    """Wrap a dense (out, in) weight in ``fmt`` (quantising it for int8/int4)."""
    if fmt == 'fp16':
        return DenseWeight(weight)
    if fmt == 'int8':
        return Int8Weight.quantize(weight)
    if fmt == 'int4':
        return Int4Weight.quantize(weight)
    raise ValueError(f'weight format {fmt!r}: must be one of {", ".join(FORMATS)}')


def random_weight(out_f: int, in_f: int, fmt: str, *, std: float, dtype: torch.dtype,
                  device: torch.device, generator: torch.Generator | None = None
                  ) -> DenseWeight | Int8Weight | Int4Weight:
    """A random weight built directly in ``fmt`` on ``device`` (no dense copy for int8/int4)."""
    kw: dict[str, Any] = {'device': device, 'generator': generator}
    if fmt == 'fp16':
        w = torch.empty(out_f, in_f, dtype=dtype, device=device)
        return DenseWeight(w.normal_(0.0, std, generator=generator))
    if fmt == 'int8':
        codes = torch.randint(-127, 128, (out_f, in_f), dtype=torch.int8, **kw)
        # uniform codes have std 73; scale them to the wanted weight std
        return Int8Weight(codes, torch.full((out_f,), std / 73.3, dtype=dtype, device=device))
    if fmt == 'int4':
        packed = torch.randint(0, 256, (out_f, in_f // 2), dtype=torch.uint8, **kw)
        scale = torch.full((out_f, in_f // INT4_GROUP), std / 4.6, dtype=dtype, device=device)
        return Int4Weight(packed, scale)
    raise ValueError(f'weight format {fmt!r}: must be one of {", ".join(FORMATS)}')


def enable_fast_kernels(weights: list[Any]) -> dict[str, Any]:
    """Try the fused kernel on every packed weight; return what was used and why not."""
    used, reasons = 0, set()
    packed = [w for w in weights if not isinstance(w, DenseWeight)]
    for w in packed:
        reason = w.try_fast()
        if reason is None:
            used += 1
            w.drop_reference()
        else:
            reasons.add(reason)
    return {'packed_layers': len(packed), 'fused': used, 'not_fused_because': sorted(reasons)}
