# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The safe-stop channel: ``/edge_loop/safe_stop``, what it carries and how to read it.

The deadline monitor publishes one ``diagnostic_msgs/DiagnosticArray`` per safe stop; the pick
controller obeys it and is the only writer of the command topics (one writer per topic, so the
monitor never races the controller on ``/edge_loop/cmd/arm``). Fields mean what they say:

- ``header.stamp``: the stopped frame's camera stamp (a deadline miss) or the monitor's time
  of a stall. Every command for a frame stamped at or before it is refused by the controller.
- ``status[0]``: name ``safe_stop``, level ERROR, ``message`` the reason (``deadline_miss``,
  ``camera_stall`` or ``gripper_stall``), values ``reason``, ``deadline_ns`` and
  ``detected_ns`` (when it fell due and when the monitor saw it, on the stamps' clock), and
  the gripper hold the monitor measured: ``hold_opening_m`` (the measured opening, never
  wider than the last gripper command) and ``hold_force_n`` (the last commanded force, or
  its ``hold_force_n`` parameter); '' when unknown.

QoS: reliable, transient local, depth :data:`HISTORY`: a controller (re)started after a stop
still learns of it. Consumers that count stops subscribe reliable (volatile or transient
local) with a deep queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

STATUS_NAME = 'safe_stop'
REASONS = ('deadline_miss', 'camera_stall', 'gripper_stall')
HISTORY = 10
NS_PER_S = 1_000_000_000


def qos(depth: int = HISTORY) -> QoSProfile:
    """Reliable, transient-local QoS of the channel (publisher, and the controller's reader)."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


@dataclass(frozen=True)
class SafeStopEvent:
    """One safe stop as read from the channel."""

    stamp_ns: int
    reason: str
    hold_opening_m: float | None = None
    hold_force_n: float | None = None
    deadline_ns: int | None = None
    detected_ns: int | None = None


def _optional(value: float | None) -> str:
    return '' if value is None else repr(float(value))


def to_message(event: SafeStopEvent, source: str = 'deadline_monitor') -> DiagnosticArray:
    """The channel's message for ``event``."""
    msg = DiagnosticArray()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(event.stamp_ns), NS_PER_S)
    values = {'reason': event.reason,
              'deadline_ns': '' if event.deadline_ns is None else str(int(event.deadline_ns)),
              'detected_ns': '' if event.detected_ns is None else str(int(event.detected_ns)),
              'hold_opening_m': _optional(event.hold_opening_m),
              'hold_force_n': _optional(event.hold_force_n)}
    msg.status = [DiagnosticStatus(
        level=DiagnosticStatus.ERROR, name=STATUS_NAME, message=event.reason,
        hardware_id=source, values=[KeyValue(key=k, value=v) for k, v in values.items()])]
    return msg


def _float(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _int(text: str) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def from_message(msg: Any) -> SafeStopEvent | None:
    """The event in a channel message; None when it carries no ``safe_stop`` status."""
    status = next((s for s in msg.status if s.name == STATUS_NAME), None)
    if status is None:
        return None
    values = {kv.key: kv.value for kv in status.values}
    return SafeStopEvent(
        stamp_ns=int(msg.header.stamp.sec) * NS_PER_S + int(msg.header.stamp.nanosec),
        reason=values.get('reason') or status.message,
        hold_opening_m=_float(values.get('hold_opening_m', '')),
        hold_force_n=_float(values.get('hold_force_n', '')),
        deadline_ns=_int(values.get('deadline_ns', '')),
        detected_ns=_int(values.get('detected_ns', '')))
