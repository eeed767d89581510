# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The memory budget: one pool, every tenant's reservation, refusal when they do not fit.

``config/memory.yaml`` names the pools (16 GiB and 8 GiB for two embedded parts), the one in
force, and the tenants: the shared-memory frame ring, each stage's workspaces and models, the
CUDA contexts, and the decoder (weights in its format plus its KV cache for a stated context).
:meth:`MemoryBudget.admit` raises :class:`BudgetExceededError` listing every tenant and the overflow
when the reservations exceed the pool, or when a tenant's measured bytes exceed its
reservation. On a GPU :func:`enforce` caps the process with
``torch.cuda.set_per_process_memory_fraction``; on the CPU the budget is accounting only (the
bytes each tenant really allocated, recorded with :meth:`MemoryBudget.record`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_UNITS = {'': 1, 'b': 1, 'kib': 2**10, 'mib': 2**20, 'gib': 2**30, 'kb': 10**3, 'mb': 10**6,
          'gb': 10**9}
GIB = 2**30
MIB = 2**20


class BudgetError(ValueError):
    """A memory.yaml that cannot be read; the message quotes the value."""


class BudgetExceededError(RuntimeError):
    """Reservations (or measured bytes) exceed the pool; the message lists every tenant."""


def parse_size(value: Any) -> int:
    """Bytes from an int or a string like '16 GiB', '512MiB', '1.5 GB'."""
    if isinstance(value, bool):
        raise BudgetError(f'size {value!r}: expected bytes or "<number> MiB|GiB"')
    if isinstance(value, int):
        if value < 0:
            raise BudgetError(f'size {value!r} is negative')
        return value
    match = re.fullmatch(r'\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*', str(value))
    if not match or match.group(2).lower() not in _UNITS:
        raise BudgetError(f'size {value!r}: expected bytes or "<number> KiB|MiB|GiB"')
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_size(n_bytes: float) -> str:
    """'12.55 GiB', '256.0 MiB', '8.0 KiB'."""
    for unit, scale in (('GiB', GIB), ('MiB', MIB), ('KiB', 2**10)):
        if abs(n_bytes) >= scale:
            return f'{n_bytes / scale:.2f} {unit}'
    return f'{int(n_bytes)} B'


@dataclass(frozen=True)
class Tenant:
    """One reservation: name, kind, bytes, and how they were derived."""

    name: str
    kind: str
    nbytes: int
    detail: str = ''


def decoder_tenant(name: str, cfg: Any, fmt: str, context: int, activations: int,
                   label: str = '') -> Tenant:
    """A decoder's reservation: weights in ``fmt`` + KV cache for ``context`` + activations."""
    from edge_loop.reasoning.shapes import FORMATS, kv_cache_nbytes, weights_nbytes

    if fmt not in FORMATS:
        raise BudgetError(f'decoder format {fmt!r}: must be one of {", ".join(FORMATS)}')
    weights, kv = weights_nbytes(cfg, fmt), kv_cache_nbytes(cfg, context)
    detail = (f'{label} {fmt}: weights {format_size(weights)} + KV cache {context} tokens '
              f'{format_size(kv)} + activations {format_size(activations)}').strip()
    return Tenant(name, 'decoder', weights + kv + activations, detail)


def decoder_reservation(preset: str, fmt: str, context: int, activations: int) -> tuple[int, str]:
    """Bytes and description of a decoder tenant of a named preset shape."""
    from edge_loop.reasoning.shapes import PRESETS

    if preset not in PRESETS:
        raise BudgetError(f'decoder preset {preset!r}: must be one of {", ".join(PRESETS)}')
    tenant = decoder_tenant('', PRESETS[preset], fmt, context, activations, preset)
    return tenant.nbytes, tenant.detail


def tenant_from_spec(name: str, spec: dict[str, Any]) -> Tenant:
    """A :class:`Tenant` from one memory.yaml entry."""
    if not isinstance(spec, dict) or 'kind' not in spec:
        raise BudgetError(f'tenant {name!r}: expected a mapping with a kind, got {spec!r}')
    kind = spec['kind']
    try:
        if kind == 'frames':
            w, h, px, slots = (int(spec[k]) for k in ('width', 'height', 'channels_bytes',
                                                       'slots'))
            return Tenant(name, kind, w * h * px * slots, f'{slots} slots of {w}x{h}x{px} B')
        if kind == 'decoder':
            nbytes, detail = decoder_reservation(
                spec.get('preset', 'llama2_7b'), spec.get('format', 'fp16'),
                int(spec.get('context', 1024)), parse_size(spec.get('activations', 0)))
            return Tenant(name, kind, nbytes, detail)
        return Tenant(name, kind, parse_size(spec['size']), spec.get('detail', ''))
    except KeyError as exc:
        raise BudgetError(f'tenant {name!r} ({kind}): missing {exc}') from exc


@dataclass
class MemoryBudget:
    """A pool and its tenants' reservations (plus what each tenant really allocated)."""

    pool_name: str
    pool_bytes: int
    tenants: list[Tenant]
    measured: dict[str, int] = field(default_factory=dict)

    @property
    def reserved(self) -> int:
        return sum(t.nbytes for t in self.tenants)

    @property
    def overflow(self) -> int:
        """Bytes by which the reservations exceed the pool (0 when they fit)."""
        return max(0, self.reserved - self.pool_bytes)

    def fits(self) -> bool:
        return self.overflow == 0 and not self.over_reservation()

    def with_tenant(self, tenant: Tenant) -> MemoryBudget:
        """A copy with ``tenant`` added (or replacing the one of the same name)."""
        tenants = [t for t in self.tenants if t.name != tenant.name] + [tenant]
        return dataclasses.replace(self, tenants=tenants, measured=dict(self.measured))

    def with_pool(self, name: str, nbytes: int) -> MemoryBudget:
        return dataclasses.replace(self, pool_name=name, pool_bytes=nbytes,
                                   measured=dict(self.measured))

    def record(self, name: str, nbytes: int) -> None:
        """What tenant ``name`` really allocated (checked against its reservation)."""
        if name not in {t.name for t in self.tenants}:
            raise KeyError(f'no tenant {name!r} in the budget ({self.names()})')
        self.measured[name] = int(nbytes)

    def names(self) -> str:
        return ', '.join(t.name for t in self.tenants)

    def over_reservation(self) -> dict[str, int]:
        """Tenants whose measured bytes exceed their reservation, by how much."""
        reserved = {t.name: t.nbytes for t in self.tenants}
        return {n: b - reserved[n] for n, b in self.measured.items() if b > reserved[n]}

    def table(self) -> str:
        """One line per tenant, then the total against the pool."""
        rows = []
        for t in sorted(self.tenants, key=lambda t: -t.nbytes):
            used = self.measured.get(t.name)
            used_text = f' (measured {format_size(used)})' if used is not None else ''
            rows.append(f'  {t.name:<18} {t.kind:<9} {format_size(t.nbytes):>11}'
                        f'{used_text}  {t.detail}'.rstrip())
        rows.append(f'  total {format_size(self.reserved)} of pool {self.pool_name} '
                    f'{format_size(self.pool_bytes)}')
        return '\n'.join(rows)

    def admit(self) -> None:
        """Raise :class:`BudgetExceededError` (listing every tenant) unless everything fits."""
        problems = []
        if self.overflow:
            problems.append(f'reservations exceed pool {self.pool_name} by '
                            f'{format_size(self.overflow)}')
        for name, extra in self.over_reservation().items():
            problems.append(f'tenant {name} allocated {format_size(extra)} over its reservation')
        if problems:
            raise BudgetExceededError('; '.join(problems) + ':\n' + self.table())


def load_budget(path: str | Path | None = None, *, pool: str | None = None,
                overrides: dict[str, dict[str, Any]] | None = None) -> MemoryBudget:
    """Read memory.yaml (default: the package's config/memory.yaml).

    ``pool`` picks another pool by name; ``overrides`` replaces fields of tenants
    (``{'reasoner': {'format': 'fp16'}}``), so a node can budget the decoder it will build.
    """
    if path is None:
        from edge_loop.paths import share_dir

        path = Path(share_dir()) / 'config' / 'memory.yaml'
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BudgetError(f'{path}: {exc}') from exc
    if not isinstance(raw, dict) or 'pools' not in raw or 'tenants' not in raw:
        raise BudgetError(f'{path}: expected the keys pools, pool and tenants')
    pools = {name: parse_size(v) for name, v in raw['pools'].items()}
    pool_name = pool or raw.get('pool') or next(iter(pools))
    if pool_name not in pools:
        raise BudgetError(f'{path}: pool {pool_name!r} is not one of {", ".join(pools)}')
    tenants = []
    for name, spec in raw['tenants'].items():
        if overrides and name in overrides:
            spec = {**spec, **overrides[name]}
        tenants.append(tenant_from_spec(name, spec))
    return MemoryBudget(pool_name, pools[pool_name], tenants)


def enforce(budget: MemoryBudget, device: Any) -> float | None:
    """Cap this process's CUDA allocations at the pool; None on the CPU (accounting only).

    Returns the fraction of the device's memory the cap allows.
    """
    import torch

    device = torch.device(device)
    if device.type != 'cuda':
        return None
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(1.0, budget.pool_bytes / total)
    torch.cuda.set_per_process_memory_fraction(
        fraction, device.index if device.index is not None else torch.cuda.current_device())
    return fraction
