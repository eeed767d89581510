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
