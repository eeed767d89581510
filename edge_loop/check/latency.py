# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Item 1: every stage's p99 and the end-to-end p99 against the budget.

The samples come from a real-time replay (or the live camera) through the deployed graph:
each output's arrival at the check's reader (the middleware's receive time) less the camera
stamp it carries. The controller's own share is its command's arrival less the latest of the
frame's upstream outputs, as the deadline monitor measures it. Judging is a pure function of
those samples and the budgets, so a test can feed it the samples of a slowed stage.

Calibration (``--calibrate``): on a machine that is not the target the budgets are multiplied
by how much slower this machine runs the deployed locator, alone and in parallel processes,
than the machine the budgets were set on (``config/regression.yaml``:
``realtime_reference_locator_ms`` and ``realtime_reference_locator_parallel_ms``), and the page
says so.
Beyond ``realtime_judge_max_slowdown`` nothing on the target is predicted (seven processes
slow down superlinearly, see regression.yaml), so the item is NOT RUN there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_loop.check.items import ItemResult, Status, not_run

if TYPE_CHECKING:
    from edge_loop.regression import MachineCalibration

# Fewer judged frames than this share of the frames the window should have had is a failure:
# a stage that answers only some frames hides its slow ones.
MIN_FRAME_SHARE = 0.5


@dataclass(frozen=True)
class Budgets:
    """Per-stage and end-to-end budgets (ms), as the deadline monitor is configured."""

    stages: dict[str, float]
    end_to_end_ms: float
    sampled: tuple[str, ...] = ()    # stages on the gripper clock, not per camera frame

    @classmethod
    def from_monitor_params(cls, params: Mapping) -> Budgets:
        """From the deadline_monitor section of the params file."""
        return cls(dict(zip(params['stage_names'], map(float, params['stage_budgets_ms']))),
                   float(params['end_to_end_budget_ms']),
                   tuple(params.get('sampled_stages', ())))


def floored(budgets: Budgets, floors: Mapping[str, float], margin: float) -> Budgets:
    """``budgets`` with each stage's budget at least ``floors[stage] * margin`` (calibration).

    Only for a machine that is not the target: ``floors`` are the stage p99s the deployed
    graph itself reaches on the budget machine (config/regression.yaml), where seven processes
    share two cores and a stage's tail is mostly its wait for one, which the target's budgets
    in config/pick.yaml do not allow for. A stage that gets ``margin`` slower than that still
    fails; the end-to-end budget is never floored.
    """
    if margin < 1.0:
        raise ValueError(f'a floor margin below 1 would tighten the budgets, got {margin}')
    unknown = set(floors) - set(budgets.stages)
    if unknown:
        raise ValueError(f'stage floors for stages without a budget: {sorted(unknown)}')
    stages = {s: max(b, float(floors.get(s, 0.0)) * margin) for s, b in budgets.stages.items()}
    return Budgets(stages, budgets.end_to_end_ms, budgets.sampled)


@dataclass
class LatencySamples:
    """Latencies (ms) of one measurement window."""

    stages: dict[str, list[float]] = field(default_factory=dict)
    end_to_end: list[float] = field(default_factory=list)
    expected_frames: int = 0      # frames the camera sent in the window

    @classmethod
    def from_arrivals(cls, arrivals: Mapping[str, Mapping[int, int]],
                      commands: Mapping[int, int], command_stage: str,
                      frame_stamps: Sequence[int], sampled: Mapping[str, Sequence[float]] = {}
                      ) -> LatencySamples:
        """Latencies from receive times (ns) keyed by the camera stamp (ns) they answer.

        ``arrivals[stage][stamp]`` is the first arrival of that stage's output for the frame,
        ``commands[stamp]`` the frame's first command; only ``frame_stamps`` are counted.
        """
        out = cls(expected_frames=len(frame_stamps))
        for stage, got in arrivals.items():
            out.stages[stage] = [(got[s] - s) / 1e6 for s in frame_stamps if s in got]
        own = []
        for s in frame_stamps:
            if s not in commands:
                continue
            out.end_to_end.append((commands[s] - s) / 1e6)
            upstream = [got[s] for got in arrivals.values() if s in got]
            own.append((commands[s] - max(upstream, default=s)) / 1e6)
        out.stages[command_stage] = own
        for stage, values in sampled.items():
            out.stages[stage] = list(values)
        return out


def p99(values: Sequence[float]) -> float:
    """99th percentile (linear, NaN for none)."""
    return float(np.percentile(values, 99)) if len(values) else float('nan')


@dataclass(frozen=True)
class MonitorInWindow:
    """What the deadline monitor did during the latency window."""

    misses: int                # deadline_miss safe stops for frames of the window
    controller: str            # pick_controller's state after the window


def judge_latency(samples: LatencySamples, budgets: Budgets, scale: float = 1.0,
                  calibrated: bool = False, monitor: MonitorInWindow | None = None,
                  shared_host: str = '') -> ItemResult:
    """Item 1 from one window's samples: every p99 within its (scaled) budget.

    ``monitor``: the deadline monitor's misses in the window (a row; the controller taken
    down fails the item and is named first, since it explains the unanswered frames).
    ``shared_host``: non-empty when other work loaded the host (said in the fix line).
    """
    rows = []
    bad = []
    taken_down = monitor is not None and monitor.controller != 'active'
    min_frames = max(1, int(samples.expected_frames * MIN_FRAME_SHARE))
    figures = [(stage, samples.stages.get(stage, []), budget)
               for stage, budget in budgets.stages.items()]
    figures.append(('end-to-end', samples.end_to_end, budgets.end_to_end_ms))
    for name, values, budget in figures:
        limit = budget * scale
        value = p99(values)
        per_frame = name not in budgets.sampled
        enough = len(values) >= (min_frames if per_frame else 1)
        ok = enough and value <= limit
        rows.append((name, f'p99 {value:.1f} ms (p50 {_p50(values):.1f}) over {len(values)} '
                     f'{"frames" if per_frame else "samples"}', f'<= {limit:.1f} ms',
                     'yes' if ok else 'NO'))
        if not enough:
            bad.append(f'{name}: {len(values)} of {samples.expected_frames} frames answered')
        elif not ok:
            bad.append(f'{name} p99 {value:.1f} ms > {limit:.1f} ms')
    if monitor is not None:
        rows.append(('deadline monitor', f'{monitor.misses} deadline misses; pick_controller '
                     f'{monitor.controller} after the window', 'controller stays active',
                     'NO' if taken_down else 'yes'))
    e2e = p99(samples.end_to_end)
    scaled = f' (budget x{scale:.2f}, calibrated)' if calibrated else ''
    measured = (f'end-to-end p99 {e2e:.1f} ms over {len(samples.end_to_end)} frames; '
                f'worst stage ' + _worst(samples, budgets, scale))
    plot = {'kind': 'latency', 'stages': {k: list(v) for k, v in samples.stages.items()},
            'end_to_end': list(samples.end_to_end),
            'budgets': {**{k: v * scale for k, v in budgets.stages.items()},
                        'end-to-end': budgets.end_to_end_ms * scale}}
    if bad or taken_down:
        first = bad[0].split(' ')[0].rstrip(':') if bad else 'the slowest stage'
        if taken_down:   # unanswered frames follow from it: name the slowest upstream stage
            first = _worst(samples, budgets, scale).split(' at ')[0]
            bad.insert(0, f'the deadline monitor took pick_controller down in the window '
                       f'({monitor.misses} misses)')
        more = '; ...' if len(bad) > 3 else ''
        fix = (f'{shared_host}{"; ".join(bad[:3])}{more}: make {first} faster (profile it '
               'with make bench-vision / bench-occupancy; check nice and cpu_affinity) before '
               'deploying; a budget in '
               "config/pick.yaml is the control period's, not to be raised to pass")
        return ItemResult(1, Status.FAIL, measured + scaled, f'budgets{scaled}', fix=fix,
                          rows=rows, plot=plot)
    return ItemResult(1, Status.PASS, measured + scaled, f'budgets{scaled}', rows=rows,
                      plot=plot)


def _p50(values: Sequence[float]) -> float:
    return float(np.percentile(values, 50)) if len(values) else float('nan')


def _worst(samples: LatencySamples, budgets: Budgets, scale: float) -> str:
    shares = [(p99(samples.stages.get(s, [])) / (b * scale), s) for s, b in budgets.stages.items()
              if samples.stages.get(s)]
    if not shares:
        return '(none measured)'
    share, stage = max(shares)
    return f'{stage} at {share:.0%} of its budget'


def calibrate(gates: Mapping[str, Any]) -> MachineCalibration:
    """This machine against the budget machine, as the replay regression test measures it.

    The deployed locator on verify's fixed case, alone and in parallel processes
    (:meth:`edge_loop.regression.MachineCalibration.measure`), against config/regression.yaml.
    """
    from edge_loop.regression import MachineCalibration

    return MachineCalibration.measure(dict(gates))


def describe_calibration(cal: MachineCalibration) -> str:
    """What was timed, for the page's header."""
    text = (f'the deployed locator takes {cal.kernel_ms:.2f} ms here against '
            f'{cal.reference_ms} ms on the budget machine')
    if cal.parallel_ms is not None:
        text += (f', {cal.parallel_ms:.2f} against {cal.parallel_reference_ms} ms with '
                 f'{cal.parallel_workers} at once')
    return text


def too_slow_to_judge(slowdown: float, max_slowdown: float) -> ItemResult:
    """Item 1 when the calibrated machine is too slow for its latency to predict the target's."""
    return not_run(1, f'this machine runs the locator {slowdown:.2f}x slower than the budget '
                   f'machine (over {max_slowdown}); latency is judged on the target, or on a '
                   'machine within that factor')
