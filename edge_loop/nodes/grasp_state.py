# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""grasp_state: the tactile grasp state from the gripper's joint states.

Inputs: ``/gripper/joint_states`` (sensor_msgs/JointState: ``left_finger``/``right_finger``
positions (m from the centreline), velocities (m/s), efforts = pad normal forces (N)) and
``/edge_loop/cmd/gripper`` (sensor_msgs/JointState ``gripper``: commanded opening), which tells
a release from a loss. Optional shear channel: when the joint_states message also names
``left_finger_shear`` and ``right_finger_shear``, their efforts are the tangential forces on the
pads (N) and the estimator uses them (both pads at the friction limit = slipping, at once when
one of them was well inside it a moment before; one pad jumping to it = a pivot); without them
it works from the normal forces alone. Output at the input rate: ``/edge_loop/grasp_state``
(diagnostic_msgs/DiagnosticArray, header stamp = the joint_states stamp, frame ``gripper``) with
one DiagnosticStatus named ``grasp_state``: message = open | closing | holding | closed_empty |
slipping | lost; level OK, WARN for slipping and lost; values = left_force, right_force
(bias-corrected, N), opening (m), commanded_opening (m or nan), closing_speed (m/s).

A sample with missing fingers, non-finite values or a stamp older than the previous one gives
a throttled warning and a ``/diagnostics`` entry and no output. The kernel is
:class:`edge_loop.kernels.grasp_state.GraspStateEstimator` (the harness checks its batch twin,
``grasp_state.classify_trace``, against it sample for sample).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from edge_loop import topics
from edge_loop.kernels import grasp_state as gs
from edge_loop.nodes.stage_base import ConfigError, Param, StageNode, run_node

FINGERS = ('left_finger', 'right_finger')
SHEARS = ('left_finger_shear', 'right_finger_shear')
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=50,
                       reliability=ReliabilityPolicy.RELIABLE)
WARN_PERIOD_S = 1.0
_DEF = gs.DEFAULT_PARAMS


def stamp_seconds(stamp: Any) -> float:
    """builtin_interfaces/Time as float seconds."""
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


def finger_sample(msg: JointState) -> tuple[list[float], list[float], list[float],
                                            list[float] | None]:
    """(positions, velocities, forces, shears or None) of the two fingers by name.

    Raises ValueError if unusable.
    """
    names = list(msg.name)
    try:
        idx = [names.index(f) for f in FINGERS]
    except ValueError as exc:
        raise ValueError(f'joint_states names {names} lack {", ".join(FINGERS)}') from exc
    out = []
    for field in ('position', 'velocity', 'effort'):
        values = getattr(msg, field)
        if len(values) != len(names):
            raise ValueError(f'joint_states has {len(values)} {field} values for '
                             f'{len(names)} names')
        row = [float(values[i]) for i in idx]
        if not all(math.isfinite(v) for v in row):
            raise ValueError(f'non-finite {field} {row}')
        out.append(row)
    shears = None
    if all(name in names for name in SHEARS):
        shears = [float(msg.effort[names.index(name)]) for name in SHEARS]
        if not all(math.isfinite(v) for v in shears):
            raise ValueError(f'non-finite shear {shears}')
    return out[0], out[1], out[2], shears


class GraspStateNode(StageNode):
    """Lifecycle stage running the tactile grasp-state estimator on every joint_states sample."""

    USES_COMMON_PARAMS = True
    PARAMS = (
        Param('force_on', _DEF.force_on, 'Pad force (N, both fingers) that starts a contact',
              min=0.0, max=1000.0),
        Param('force_off', _DEF.force_off, 'Pad force (N) below which a contact ends',
              min=0.0, max=1000.0),
        Param('force_bias', list(_DEF.force_bias), 'Per-finger force offset to remove (N)',
              length=2, tier='user'),
        Param('moving_velocity', _DEF.moving_velocity,
              'Closing speed (m/s, both fingers) that counts as closing', min=0.0, max=1.0),
        Param('closed_opening', _DEF.closed_opening,
              'Opening (m) at or below which the fingers are together', min=0.0, max=0.2),
        Param('command_tolerance', _DEF.command_tolerance,
              'Commanded vs actual opening (m) that counts as a close/open command', min=0.0,
              max=0.2),
        Param('dwell_s', _DEF.dwell_s, 'A new state must persist this long (s)', min=0.0,
              max=1.0),
        Param('slip_dwell_s', _DEF.slip_dwell_s, 'Slipping must persist this long (s)',
              min=0.0, max=1.0),
        Param('slip_limit_dwell_s', _DEF.slip_limit_dwell_s,
              'Slipping from both pads at the friction limit (without a jump) must persist '
              'this long (s)', min=0.0, max=1.0),
        Param('slip_drop_fraction', _DEF.slip_drop_fraction,
              'Force drop from the recent peak that means slipping', min=0.01, max=0.99),
        Param('slip_window_s', _DEF.slip_window_s, 'Window of that peak (s)', min=0.0, max=2.0),
        Param('slip_velocity', _DEF.slip_velocity,
              'Closing speed while holding that means slipping (m/s)', min=0.0, max=1.0),
        Param('slip_creep_drop_fraction', _DEF.slip_creep_drop_fraction,
              'Force drop from the peak that, with fingers closing in, means slipping',
              min=0.0, max=0.99),
        Param('slip_fast_velocity', _DEF.slip_fast_velocity,
              'Closing speed (m/s) that, with the force slip_fast_drop_fraction below the '
              "hold's peak (or a pad at slip_pre_ratio) is slipping after dwell_s", min=0.0,
              max=10.0),
        Param('slip_fast_drop_fraction', _DEF.slip_fast_drop_fraction,
              'Force drop from the peak for that fast decision', min=0.01, max=0.99),
        Param('slip_pre_ratio', _DEF.slip_pre_ratio,
              "... or a pad's shear/normal this high (with a shear channel)", min=0.01,
              max=100.0),
        Param('slip_settle_s', _DEF.slip_settle_s, 'No slip decisions this early in a hold (s)',
              min=0.0, max=5.0),
        Param('lost_settle_s', _DEF.lost_settle_s,
              'No loss decisions this early in a hold: contact gone earlier is the closing (s)',
              min=0.0, max=5.0),
        Param('lost_closing', _DEF.lost_closing,
              'Closing past the held opening that means lost (m)', min=0.0, max=0.1),
        Param('lost_fraction', _DEF.lost_fraction,
              'Force below this share of its recent peak, fingers closing: lost', min=0.0,
              max=1.0),
        Param('slip_shear_ratio', _DEF.slip_shear_ratio,
              'Shear/normal force on both pads that means sliding (with a shear channel)',
              min=0.01, max=10.0),
        Param('slip_jump_s', _DEF.slip_jump_s,
              'Look-back of the shear jump tests (s)', min=0.0, max=1.0),
        Param('slip_jump_from', _DEF.slip_jump_from,
              'Both pads at slip_shear_ratio with one below this within slip_jump_s before: '
              'slipping at once (no dwell)', min=0.0, max=10.0),
        Param('slip_jump_ratio', _DEF.slip_jump_ratio,
              'Both pads jumping to this shear/normal from below slip_jump_from within '
              'slip_jump_s: a break-loose, slipping at once', min=0.01, max=10.0),
        Param('firm_contact', _DEF.firm_contact,
              'Both pads above this force (N) when a grip starts: holding without dwell_s '
              '(0: always wait dwell_s)', min=0.0, max=1000.0),
        Param('pivot_shear_ratio', _DEF.pivot_shear_ratio,
              "One pad's shear/normal that, jumped to from below pivot_jump_from within "
              'slip_jump_s, means the object pivots about the other pad', min=0.01, max=100.0),
        Param('pivot_jump_from', _DEF.pivot_jump_from,
              "That pad's shear/normal before the jump", min=0.0, max=10.0),
        Param('pivot_keep', _DEF.pivot_keep,
              "The pivot ends when that pad's shear/normal falls below this", min=0.0,
              max=10.0),
        Param('pivot_max_s', _DEF.pivot_max_s,
              'A pivot lasts at most this long after its jump (s)', min=0.0, max=10.0),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('grasp_state', **kwargs)
        self._est: gs.GraspStateEstimator | None = None
        self._pub: Any = None
        self._diag: Any = None
        self._subs: list[Any] = []
        self._commanded: float | None = None
        self._active = False
        self._last_warn: dict[str, float] = {}
        self._bad = 0

    def configure_stage(self) -> None:
        """Estimator parameters, publishers, subscriptions."""
        prm = self.params
        # One node parameter per GraspStateParams field, same name (test_bringup.py checks).
        values = {f.name: prm[f.name] for f in dataclasses.fields(gs.GraspStateParams)}
        params = gs.GraspStateParams(**{**values, 'force_bias': tuple(prm['force_bias'])})
        try:
            self._est = gs.GraspStateEstimator(params)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        self._pub = self.create_lifecycle_publisher(DiagnosticArray, topics.GRASP_STATE, 50)
        self._diag = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self._subs = [
            self.create_subscription(JointState, topics.JOINT_STATES, self._on_joints,
                                     STATE_QOS),
            self.create_subscription(JointState, topics.GRIPPER_CMD, self._on_command, 10),
        ]

    def activate_stage(self) -> None:
        """Start estimating from a clean history."""
        self._est.reset()
        self._active = True

    def deactivate_stage(self) -> None:
        """Stop publishing."""
        self._active = False

    def release(self) -> None:
        """Destroy subscriptions and publishers (idempotent)."""
        self._active = False
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        for name in ('_pub', '_diag'):
            pub = getattr(self, name)
            if pub is not None:
                self.destroy_publisher(pub)
                setattr(self, name, None)
        self._est = None

    def _warn(self, reason: str, stamp: Any) -> None:
        self._bad += 1
        now = time.monotonic()
        key = reason.split(' ')[0]
        if now - self._last_warn.get(key, -1e9) < WARN_PERIOD_S:
            return
        self._last_warn[key] = now
        self.get_logger().warning(f'joint_states sample dropped: {reason}')
        if self._diag is not None:
            status = DiagnosticStatus(level=DiagnosticStatus.WARN, name='grasp_state: input',
                                      message=f'sample dropped: {reason}',
                                      hardware_id=self.get_name(),
                                      values=[KeyValue(key='bad_samples', value=str(self._bad))])
            self._diag.publish(DiagnosticArray(header=Header(stamp=stamp), status=[status]))

    def _on_command(self, msg: JointState) -> None:
        names = list(msg.name)
        idx = names.index('gripper') if 'gripper' in names else 0
        if len(msg.position) > idx and math.isfinite(msg.position[idx]):
            self._commanded = float(msg.position[idx])

    def _on_joints(self, msg: JointState) -> None:
        est = self._est
        if not self._active or est is None or self._pub is None:
            return
        try:
            pos, vel, force, shears = finger_sample(msg)
            t = stamp_seconds(msg.header.stamp)
            if t < est.last_t - 1.0:
                est.reset()          # the clock jumped back (simulator reset, bag loop)
            state = est.update(t, pos, vel, force, self._commanded, shears)
        except ValueError as exc:
            self._warn(str(exc), msg.header.stamp)
            return
        p = est.params
        level = DiagnosticStatus.WARN if state in (gs.SLIPPING, gs.LOST) else DiagnosticStatus.OK
        values = {
            'left_force': f'{force[0] - p.force_bias[0]:.3f}',
            'right_force': f'{force[1] - p.force_bias[1]:.3f}',
            'opening': f'{pos[0] + pos[1]:.4f}',
            'commanded_opening': 'nan' if self._commanded is None else f'{self._commanded:.4f}',
            'closing_speed': f'{-(vel[0] + vel[1]):.4f}',
        }
        status = DiagnosticStatus(level=level, name='grasp_state', message=state,
                                  hardware_id=self.get_name(),
                                  values=[KeyValue(key=k, value=v) for k, v in values.items()])
        header = Header(stamp=msg.header.stamp, frame_id=msg.header.frame_id or 'gripper')
        self._pub.publish(DiagnosticArray(header=header, status=[status]))


def main(args: list[str] | None = None) -> int:
    """Run the grasp_state node."""
    return run_node(GraspStateNode, args)


if __name__ == '__main__':
    main()
