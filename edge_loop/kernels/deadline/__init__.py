# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline kernels of the pick loop: the loop judge and the parts it is built from.

- :mod:`.judge`: :class:`LoopJudge`, from the stamps the monitor sees to its verdicts (safe
  stops, log notes, deactivation); the deadline monitor node is its thin ROS shell.
- :mod:`.parts`: frames and their deadlines, latency windows, stall watches, health state.

Every public name is importable from ``edge_loop.kernels.deadline``.
"""

from __future__ import annotations

from edge_loop.kernels.deadline.judge import (
    Deactivate,
    JudgeConfig,
    LoopJudge,
    Note,
    SafeStop,
    StageStats,
)
from edge_loop.kernels.deadline.parts import (
    NS_PER_MS,
    NS_PER_S,
    BatchRate,
    CommandResult,
    Frame,
    FrameTracker,
    Health,
    LatencyWindow,
    Level,
    MonotonicMap,
    ReceiveLatency,
    StallWatch,
    StampOrder,
    frame_report,
    header_stamp_ns,
    next_frame_check_ns,
)

__all__ = [
    'Deactivate',
    'JudgeConfig',
    'LoopJudge',
    'Note',
    'SafeStop',
    'StageStats',
    'BatchRate',
    'CommandResult',
    'Frame',
    'FrameTracker',
    'Health',
    'LatencyWindow',
    'Level',
    'MonotonicMap',
    'NS_PER_MS',
    'NS_PER_S',
    'ReceiveLatency',
    'StallWatch',
    'StampOrder',
    'frame_report',
    'header_stamp_ns',
    'next_frame_check_ns',
]
