# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The memory budget (accounting, refusal) and zero allocations per frame on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_loop.memory import budget as mb

CONFIG = Path(__file__).resolve().parents[2] / 'config' / 'memory.yaml'


@pytest.mark.parametrize(('text', 'n_bytes'), [
    ('16 GiB', 16 * 2**30), ('512MiB', 512 * 2**20), ('1.5 GiB', 3 * 2**29), (4096, 4096),
    ('2 GB', 2 * 10**9), ('10', 10)])
def test_sizes_parse_with_units(text, n_bytes):
    assert mb.parse_size(text) == n_bytes


@pytest.mark.parametrize('text', ['sixteen', '16 GiBs', -1, True, '1 TiB'])
def test_bad_sizes_are_refused_quoting_them(text):
    with pytest.raises(mb.BudgetError, match='size'):
        mb.parse_size(text)


def test_shipped_budget_fits_the_16gib_pool_and_lists_every_tenant():
    budget = mb.load_budget(CONFIG)
    assert budget.pool_name == 'soc_16g' and budget.pool_bytes == 16 * 2**30
    names = {t.name for t in budget.tenants}
    assert {'frame_ring', 'object_locator', 'grasp_planner', 'occupancy_mapper',
            'reasoner', 'cuda_contexts'} <= names
    ring = next(t for t in budget.tenants if t.name == 'frame_ring')
    assert ring.nbytes == 8 * 640 * 480 * 7
    budget.admit()   # does not raise
    assert budget.overflow == 0 and budget.fits()


@pytest.mark.parametrize(('pool', 'fmt', 'fits'), [
    ('soc_16g', 'fp16', True), ('soc_16g', 'int8', True), ('soc_16g', 'int4', True),
    ('soc_8g', 'fp16', False), ('soc_8g', 'int8', False), ('soc_8g', 'int4', True)])
def test_which_decoder_formats_fit_which_pool(pool, fmt, fits):
    budget = mb.load_budget(CONFIG, pool=pool, overrides={'reasoner': {'format': fmt}})
    assert budget.fits() is fits


def test_activation_over_budget_is_refused_listing_tenants_and_overflow():
    budget = mb.load_budget(CONFIG, pool='soc_8g', overrides={'reasoner': {'format': 'fp16'}})
    expected_overflow = budget.reserved - 8 * 2**30
    assert budget.overflow == expected_overflow > 0
    for _ in range(3):   # refused every time, not once
        with pytest.raises(mb.BudgetExceededError) as err:
            budget.admit()
        text = str(err.value)
        assert f'exceed pool soc_8g by {mb.format_size(expected_overflow)}' in text
        for tenant in budget.tenants:
            assert tenant.name in text
        assert 'llama2_7b fp16: weights 12.55 GiB' in text


def test_a_tenant_that_allocates_more_than_it_reserved_is_refused():
    budget = mb.load_budget(CONFIG)
    budget.record('object_locator', 31 * 2**20)
    budget.admit()
    budget.record('object_locator', 40 * 2**20)
    with pytest.raises(mb.BudgetExceededError, match='object_locator allocated 8.00 MiB over'):
        budget.admit()
    with pytest.raises(KeyError, match='no tenant'):
        budget.record('nobody', 1)


def test_bad_memory_yaml_is_refused_naming_the_problem(tmp_path):
    path = tmp_path / 'memory.yaml'
    path.write_text('pools: {a: 1 GiB}\npool: b\ntenants: {}\n')
    with pytest.raises(mb.BudgetError, match="pool 'b' is not one of a"):
        mb.load_budget(path)
    path.write_text('pools: {a: 1 GiB}\ntenants: {x: {kind: decoder, format: int3}}\n')
    with pytest.raises(mb.BudgetError, match="format 'int3'"):
        mb.load_budget(path)
    path.write_text('pools: {a: 1 GiB}\ntenants: {x: {kind: workspace}}\n')
    with pytest.raises(mb.BudgetError, match="tenant 'x' .*missing 'size'"):
        mb.load_budget(path)


def test_enforce_is_accounting_only_on_the_cpu():
    pytest.importorskip('torch', reason='torch is not installed (the CI installs it)')
    assert mb.enforce(mb.load_budget(CONFIG), 'cpu') is None


def test_loop_step_allocates_nothing_per_frame_on_the_cpu():
    torch = pytest.importorskip('torch', reason='torch is not installed (the CI installs it)')
    from edge_loop.memory.counters import allocations_per_frame
    from edge_loop.memory.loop_step import RepresentativeStep

    step = RepresentativeStep(120, 160)
    step.fill_frame(torch.Generator().manual_seed(1), objects=1)
    step()
    counts = allocations_per_frame(step, 10, 'cpu')
    assert counts['cpu']['torch'] == 0, counts['cpu']['torch_ops']
    assert counts['cpu']['numpy'] == 0
    # the step computes something: one object of 50x40 pixels, centroid inside it
    cx, cy, _, count = step.features[0].tolist()
    assert 1500 < count < 2100
    assert step.host_command.abs().sum() > 0


def test_the_counter_sees_an_allocating_frame():
    torch = pytest.importorskip('torch', reason='torch is not installed (the CI installs it)')
    import numpy as np

    from edge_loop.memory.counters import cpu_allocations

    a = torch.randn(64, 64)
    counts = cpu_allocations(lambda: (a * 2, np.ones(1000)), 5)
    assert counts['torch'] >= 1 and counts['numpy'] >= 1
    assert 'aten::mul' in counts['torch_ops']
