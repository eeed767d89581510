# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The one stage table: each processing stage's name, output topic, message type and budget.

Everything that needs a stage's name, topic or budget takes it from here: the bring-up order
(:mod:`edge_loop.bringup`), the deadline monitor's parameter defaults, the demo's latency table
and the check. ``config/pick.yaml`` does not repeat them (a test fails if it does); a robot's
params file may override the monitor's ``stage_budgets_ms`` and ``end_to_end_budget_ms``, and
:func:`monitor_parameters` gives what then applies. Pure data: no rclpy.

Budgets are source stamp -> output (ms), except the command stage's: its own time after the
last upstream output. Why each number is what it is: docs/decisions/0013-stage-budgets.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_loop import topics

END_TO_END_BUDGET_MS = 66.0   # camera header.stamp -> arm command published (one 15 Hz period)


@dataclass(frozen=True)
class Stage:
    """One processing stage of the loop."""

    name: str                # node and executable name
    topic: str               # output topic, stamped with the source camera stamp
    msg_type: str            # 'package/msg/Type' of that topic
    budget_ms: float         # see the module docstring
    reads_frames: bool       # reads the RGB-D frame channel (copy audit, verified kernels)
    sampled: bool = False    # at sensor rate, not once per camera frame
    command: bool = False    # its output closes a frame (the arm command)


STAGES: tuple[Stage, ...] = (
    Stage('object_locator', topics.OBJECTS, 'geometry_msgs/msg/PoseArray', 30.0, True),
    # Waits for the locator's result of its frame (one perception pass): its budget covers
    # the locator too (decision 0013).
    Stage('grasp_planner', topics.GRASP, 'geometry_msgs/msg/PolygonStamped', 45.0, True),
    Stage('occupancy_mapper', topics.OCCUPANCY, 'nav_msgs/msg/OccupancyGrid', 30.0, True),
    Stage('grasp_state', topics.GRASP_STATE, 'diagnostic_msgs/msg/DiagnosticArray', 10.0,
          False, sampled=True),
    Stage('pick_controller', topics.ARM_CMD, 'geometry_msgs/msg/TwistStamped', 10.0, False,
          command=True),
)
BY_NAME = {s.name: s for s in STAGES}
NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
FRAME_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.reads_frames)
COMMAND_STAGE: str = next(s.name for s in STAGES if s.command)

# The deadline monitor's parameters that this table defines (its declared defaults).
TABLE_KEYS = ('end_to_end_budget_ms', 'stage_names', 'stage_topics', 'stage_types',
              'stage_budgets_ms', 'sampled_stages')


def monitor_defaults() -> dict[str, Any]:
    """The deadline monitor's stage parameters as the table gives them."""
    return {
        'end_to_end_budget_ms': END_TO_END_BUDGET_MS,
        'stage_names': list(NAMES),
        'stage_topics': [s.topic for s in STAGES],
        'stage_types': [s.msg_type for s in STAGES],
        'stage_budgets_ms': [s.budget_ms for s in STAGES],
        'sampled_stages': [s.name for s in STAGES if s.sampled],
    }


def monitor_parameters(params_files: Iterable[Path]) -> dict[str, Any]:
    """The deadline_monitor parameters that apply: the table, then each file's section.

    Later files win, as rcl layers them; only the ``deadline_monitor`` section is read (its
    other keys, e.g. ``stall_periods``, come through as the files give them).
    """
    import yaml

    merged = monitor_defaults()
    for path in params_files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        merged.update((data.get('deadline_monitor') or {}).get('ros__parameters') or {})
    return merged


def budgets_ms(params: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """(end-to-end budget, {stage: budget}) from monitor parameters (:func:`monitor_parameters`)."""
    return (float(params['end_to_end_budget_ms']),
            {name: float(b) for name, b in zip(params['stage_names'],
                                               params['stage_budgets_ms'])})
