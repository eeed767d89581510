# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Host/device handoff: numpy frames to tensors by a chosen method, and a copy ledger.

Handoff methods (``bench/placement.py`` times each one per stage and size):

- ``pageable``: ``tensor.to(device)`` from the shared-memory view as it is; the driver
  stages it through its own pinned bounce buffer (a host copy plus the DMA, synchronous);
- ``pinned``: one host copy into a page-locked staging buffer of ours, then an asynchronous DMA;
- ``registered``: the shared-memory frame itself page-locked once with ``cudaHostRegister``
  (torch's CUDA runtime bindings), then DMA straight from it: no host copy at all;
- ``zero_copy``: on unified memory (an integrated GPU: ``is_integrated``) the device reads
  the host pages directly; on a discrete GPU this method does not exist and is reported so.

:class:`CopyLedger` counts every transfer the helpers here make, per direction and kind
(image or small), which is what the copy audit reports per frame.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

HANDOFF_METHODS = ('pageable', 'pinned', 'registered', 'zero_copy')
IMAGE_BYTES = 64 * 1024   # a transfer at least this large counts as an image in the audit


def as_host_tensor(arr: np.ndarray) -> torch.Tensor:
    """A CPU tensor viewing ``arr`` (no copy) where torch can; 16-bit depth as int16 bits.

    torch cannot view read-only memory (it warns and may write through) nor negative strides;
    such an array is copied once (never the case for the nodes' shared-memory frames, which
    are writeable forward views).
    """
    a = np.asarray(arr)
    if a.dtype == np.uint16:
        a = a.view(np.int16)
    if not a.flags.writeable or any(s < 0 for s in a.strides):
        a = a.copy()
    return torch.from_numpy(a)


@dataclass
class CopyLedger:
    """Transfers per direction ('h2d', 'd2h', 'host') and kind ('image', 'grid', ...)."""

    counts: Counter = field(default_factory=Counter)
    nbytes: Counter = field(default_factory=Counter)

    def note(self, direction: str, nbytes: int, kind: str | None = None) -> None:
        """Count one transfer of ``nbytes``; ``kind`` defaults to 'image' or 'small' by size."""
        kind = kind or ('image' if nbytes >= IMAGE_BYTES else 'small')
        self.counts[(direction, kind)] += 1
        self.nbytes[(direction, kind)] += nbytes

    def per_frame(self, frames: int) -> dict[str, float]:
        """Transfers per frame, keyed 'h2d image', 'd2h small', ..."""
        return {f'{d} {k}': n / max(frames, 1) for (d, k), n in sorted(self.counts.items())}

    def reset(self) -> None:
        """Start counting from zero."""
        self.counts.clear()
        self.nbytes.clear()


class Handoff:
    """Moves host frames (numpy views) to one device by one :data:`HANDOFF_METHODS` method.

    Staging buffers (``pinned``) and registrations (``registered``) are made on first use per
    buffer and kept: per frame the cost is the copy alone, as in the deployed loop.
    """

    def __init__(self, device: str | torch.device, method: str = 'pinned',
                 ledger: CopyLedger | None = None) -> None:
        if method not in HANDOFF_METHODS:
            raise ValueError(f'handoff method {method!r} is not one of {HANDOFF_METHODS}')
        self.device = torch.device(device)
        self.method = method
        self.ledger = ledger if ledger is not None else CopyLedger()
        self._staging: dict[tuple, torch.Tensor] = {}
        self._registered: dict[int, int] = {}
        if method == 'zero_copy' and not unified_memory(self.device):
            raise ValueError(f'{self.device} is a discrete GPU: no zero-copy host access')

    @property
    def on_cpu(self) -> bool:
        """True when the 'device' is the host: handoffs are views, nothing moves."""
        return self.device.type == 'cpu'

    def to_device(self, arr: np.ndarray) -> torch.Tensor:
        """The device tensor of one host array (counted in the ledger unless on the CPU)."""
        host = as_host_tensor(arr)
        if self.on_cpu or self.method == 'zero_copy':
            # zero-copy: an integrated GPU reads the host pages (torch still needs a device
            # tensor; on such parts .to() of registered memory maps rather than copies)
            return host if self.on_cpu else self._register(arr, host).to(self.device)
        self.ledger.note('h2d', host.numel() * host.element_size())
        if self.method == 'pageable':
            return host.to(self.device)
        if self.method == 'pinned':
            key = (tuple(host.shape), host.dtype)
            staging = self._staging.get(key)
            if staging is None:
                staging = self._staging[key] = torch.empty(host.shape, dtype=host.dtype,
                                                           pin_memory=True)
            staging.copy_(host)
            self.ledger.note('host', host.numel() * host.element_size())
            return staging.to(self.device, non_blocking=True)
        return self._register(arr, host).to(self.device, non_blocking=True)

    def host_view(self, arr: np.ndarray) -> torch.Tensor:
        """The host tensor of ``arr`` made ready for DMA by this method, without moving it.

        ``registered``: the array's buffer page-locked in place (once); ``pinned``: a copy in
        the staging buffer; otherwise the plain view. For copies a caller makes itself (a CUDA
        graph's input buffers).
        """
        host = as_host_tensor(arr)
        if self.on_cpu or self.method == 'pageable':
            return host
        if self.method == 'pinned':
            staging = torch.empty(host.shape, dtype=host.dtype, pin_memory=True)
            staging.copy_(host)
            return staging
        return self._register(arr, host)

    def _register(self, arr: np.ndarray, host: torch.Tensor) -> torch.Tensor:
        base = np.asarray(arr)
        while isinstance(base.base, np.ndarray):
            base = base.base
        ptr = base.__array_interface__['data'][0]
        if ptr not in self._registered:
            register_host(ptr, base.nbytes)
            self._registered[ptr] = base.nbytes
        return host

    def to_host(self, t: torch.Tensor, kind: str | None = None) -> np.ndarray:
        """A device tensor back on the host as numpy (counted unless on the CPU)."""
        if not self.on_cpu:
            self.ledger.note('d2h', t.numel() * t.element_size(), kind)
        return t.cpu().numpy()

    def close(self) -> None:
        """Unregister what :meth:`to_device` registered."""
        for ptr in self._registered:
            unregister_host(ptr)
        self._registered.clear()
        self._staging.clear()


def unified_memory(device: torch.device) -> bool:
    """True on an integrated GPU sharing the host's memory (zero-copy is possible)."""
    if device.type != 'cuda':
        return False
    return bool(getattr(torch.cuda.get_device_properties(device), 'is_integrated', False))


def register_host(ptr: int, nbytes: int) -> None:
    """Page-lock host memory in place (``cudaHostRegister``, portable flag); raises on error."""
    rt = torch.cuda.cudart()
    err = rt.cudaHostRegister(ptr, nbytes, 1)   # 1 = cudaHostRegisterPortable
    if int(err) != 0:
        raise RuntimeError(f'cudaHostRegister failed: {err}')


def unregister_host(ptr: int) -> None:
    """Undo :func:`register_host`."""
    torch.cuda.cudart().cudaHostUnregister(ptr)
