# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The calibrated check's paced replay: rate, budget scale and monitor settings."""

import math

import pytest

from edge_loop.check.pacing import MAX_WINDOW_SHARE, Pacing, deployed_monitor_parameters
from edge_loop.nodes import deadline_monitor


def _deployed() -> dict:
    return deployed_monitor_parameters()


def test_paced_replay_keeps_the_budget_machines_cpu_share():
    paced = Pacing(2.8)
    assert paced.rate * paced.slowdown == pytest.approx(1.0)
    # Frames per second of CPU work: the same as at full rate on a machine 2.8x faster.
    assert paced.budget_scale == pytest.approx(2.8)
    assert 'x2.80' in paced.describe()
    params = _deployed()
    changed = paced.monitor_parameters(params)
    assert changed['end_to_end_budget_ms'] == pytest.approx(params['end_to_end_budget_ms'] * 2.8)
    assert changed['stage_budgets_ms'] == pytest.approx(
        [b * 2.8 for b in params['stage_budgets_ms']])
    assert changed.items() >= paced.monitor_overrides(params).items()


@pytest.mark.parametrize('slowdown', [1.0, 1.5, 2.8, 7.0, 40.0])
def test_monitor_settings_follow_the_slower_streams_and_are_accepted(slowdown):
    params = _deployed()
    out = Pacing(slowdown).monitor_overrides(params)
    assert out['control_rate_hz'] == pytest.approx(params['control_rate_hz'] / slowdown)
    assert out['startup_grace_s'] == pytest.approx(params['startup_grace_s'] * slowdown)
    every = params['gripper_sample_every_ms']
    window = out['gripper_sample_window_ms']
    assert window == pytest.approx(min(params['gripper_sample_window_ms'] * slowdown,
                                       MAX_WINDOW_SHARE * every))
    assert out['gripper_stall_min_ms'] >= params['gripper_stall_min_ms'] * slowdown
    # The monitor's own validation accepts the paced settings (it raises otherwise).
    sampling = deadline_monitor._gripper_sampling({**params, **out})
    assert sampling == (round(every * 1e6), round(window * 1e6))


def test_sampling_off_keeps_no_window():
    params = {**_deployed(), 'gripper_sample_every_ms': 0.0}
    out = Pacing(3.0).monitor_overrides(params)
    assert 'gripper_sample_window_ms' not in out
    assert out['gripper_stall_min_ms'] == pytest.approx(params['gripper_stall_min_ms'] * 3.0)


@pytest.mark.parametrize('slowdown', [0.5, 0.0, -1.0, math.nan])
def test_a_faster_machine_is_not_paced(slowdown):
    with pytest.raises(ValueError, match='slowdown >= 1'):
        Pacing(slowdown)
