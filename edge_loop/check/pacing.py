# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A calibrated replay at the budget machine's share of the CPU.

On a machine ``slowdown`` times slower than the one the budgets were set on, every stage
takes about ``slowdown`` times longer per frame. Replayed at the camera's own rate, the loop
then asks that many times more of the cores than it does on the budget machine; once that
passes what the cores give, the queues in front of them grow for as long as the replay runs
and no budget scale says anything about the target (a CI host that ran the locator 2.8x
slower had its 2 cores 99 % busy and the controller's p99 at 492 ms, 2026-12-07).

Replayed at ``1 / slowdown`` of its rate instead, each stage's own time and its wait for a
core both grow by the same factor, so the latency distribution is the budget machine's
times ``slowdown`` and the budgets scale linearly (decision 0019). The deadline monitor is
told the slower camera rate (its camera stall watch counts camera periods), and because the
bag's gripper stream slows down with it, the gripper sampling window and stall floor widen
by the same factor. A live camera cannot be paced: there the budgets scale by
``slowdown ** exponent`` as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The sampling window must stay well inside its period: past half of it, a slowed gripper
# stream is sampled almost continuously and the content filter saves the monitor nothing.
MAX_WINDOW_SHARE = 0.5


@dataclass(frozen=True)
class Pacing:
    """Replay rate and deadline-monitor settings for a machine ``slowdown`` times slower."""

    slowdown: float

    def __post_init__(self) -> None:
        if not self.slowdown >= 1.0:     # also rejects NaN
            raise ValueError(f'pacing needs a slowdown >= 1, got {self.slowdown!r}')

    @property
    def rate(self) -> float:
        """Factor on the bag's playback rate."""
        return 1.0 / self.slowdown

    @property
    def budget_scale(self) -> float:
        """Factor on every latency budget: the paced loop's latencies grow by ``slowdown``."""
        return self.slowdown

    def monitor_overrides(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Deadline-monitor parameters for the paced replay (budgets are scaled apart).

        ``params``: the monitor's parameters as deployed (``control_rate_hz``,
        ``gripper_sample_every_ms``, ``gripper_sample_window_ms``, ``gripper_stall_min_ms``,
        ``startup_grace_s``).
        """
        s = self.slowdown
        out: dict[str, Any] = {
            'control_rate_hz': float(params['control_rate_hz']) / s,
            'startup_grace_s': float(params['startup_grace_s']) * s,
        }
        stall_floor = float(params['gripper_stall_min_ms']) * s
        every = float(params['gripper_sample_every_ms'])
        if every > 0:
            window = min(float(params['gripper_sample_window_ms']) * s,
                         MAX_WINDOW_SHARE * every)
            out['gripper_sample_window_ms'] = window
            # The monitor refuses a floor below the longest gap sampling itself leaves.
            stall_floor = max(stall_floor, 2.0 * every + window)
        out['gripper_stall_min_ms'] = stall_floor
        return out

    def monitor_parameters(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every deadline-monitor parameter the paced replay changes.

        The budgets (``end_to_end_budget_ms``, ``stage_budgets_ms``) x :attr:`budget_scale`,
        and :meth:`monitor_overrides`.
        """
        scale = self.budget_scale
        return {'end_to_end_budget_ms': float(params['end_to_end_budget_ms']) * scale,
                'stage_budgets_ms': [float(b) * scale for b in params['stage_budgets_ms']],
                **self.monitor_overrides(params)}

    def describe(self) -> str:
        """For the page's header."""
        return (f"frames replayed at {self.rate:.2f}x their rate (the budget machine's share "
                f'of the CPU), budgets x{self.budget_scale:.2f}')


def monitor_node_defaults() -> dict[str, Any]:
    """The deadline monitor's declared defaults: what a params file may leave out."""
    from edge_loop.nodes.deadline_monitor import DeadlineMonitor

    return {p.name: p.default for p in DeadlineMonitor.PARAMS}


def deployed_monitor_parameters() -> dict[str, Any]:
    """The monitor's parameters as config/pick.yaml deploys them (defaults, stage table, file)."""
    from edge_loop import stages
    from edge_loop.paths import config_path

    return {**monitor_node_defaults(), **stages.monitor_parameters([config_path('pick.yaml')])}
