# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The machine calibration that scales the real-time replay's budgets (no ROS)."""

from __future__ import annotations

import pytest

from edge_loop.regression import MachineCalibration


def test_a_slower_machine_scales_the_budgets_by_the_slowdown_to_the_exponent():
    cal = MachineCalibration(kernel_ms=8.0, reference_ms=5.0, exponent=2.0)
    assert cal.slowdown == pytest.approx(1.6)
    assert cal.budget_scale == pytest.approx(2.56)


def test_a_faster_machine_keeps_the_budgets_of_the_target():
    assert MachineCalibration(3.0, 5.0, 2.0).budget_scale == 1.0


def test_the_description_names_the_measurement_and_the_scale():
    line = MachineCalibration(13.1, 5.31, 2.0).describe()
    assert '13.10 ms here' in line and '2.47x slower' in line and 'x6.09' in line


@pytest.mark.parametrize('args', [(0.0, 5.0, 2.0), (5.0, -1.0, 2.0), (5.0, 5.0, 0.5)])
def test_a_calibration_without_meaning_is_refused(args):
    with pytest.raises(ValueError, match='calibration needs'):
        MachineCalibration(*args)


def test_cores_that_do_not_hold_up_together_count_even_at_full_single_thread_speed():
    # Two vCPUs that are one core's hyperthreads: one locator at full speed, two much slower.
    cal = MachineCalibration(5.3, 5.31, 2.0, parallel_ms=8.8, parallel_reference_ms=5.85,
                             parallel_workers=2)
    assert cal.slowdown == pytest.approx(8.8 / 5.85)
    assert 'with 2 at once' in cal.describe() and '1.50x slower' in cal.describe()
    # ... and the slower of the two ratios counts either way.
    assert MachineCalibration(10.62, 5.31, 2.0, 5.85, 5.85, 2).slowdown == pytest.approx(2.0)


@pytest.mark.parametrize('parallel', [(6.0, None), (None, 6.0), (0.0, 6.0)])
def test_a_parallel_figure_without_its_reference_is_refused(parallel):
    with pytest.raises(ValueError, match='parallel figure'):
        MachineCalibration(5.0, 5.0, 2.0, *parallel)


def test_the_parallel_figure_is_measured_in_separate_processes_at_once():
    from edge_loop.verify.timing import locator_ms_p50_parallel
    ms = locator_ms_p50_parallel(2, repeats=5)
    assert 0.1 < ms < 1000.0
    with pytest.raises(ValueError, match='workers'):
        locator_ms_p50_parallel(0)
