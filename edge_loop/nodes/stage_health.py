# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Per-stage helpers: input health (warnings, diagnostics, summaries), the deployment gate.

Shared by every frame-reading stage (object_locator, grasp_planner, occupancy_mapper).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Header

from edge_loop import topics
from edge_loop.nodes.stage_base import ConfigError

WARN_PERIOD_S = 1.0


class StageHealth:
    """Throttled warnings, /diagnostics entries and processing-time stats of one stage."""

    def __init__(self, node: Any, name: str) -> None:
        self.node = node
        self.name = name
        self.pub = node.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.times_ms: deque[float] = deque(maxlen=200)
        self.frames = 0
        self.bad = 0
        self._last_warn: dict[str, float] = {}
        self._last_dropped = 0
        self._last_received = 0
        self.audited = 0     # frames whose kernel inputs were audited (copy_audit)
        self.copies = 0      # kernel input arrays that were not views on the frame
        self.ledger: Any = None  # a GPU-placed stage's CopyLedger (host<->device transfers)
        self.blind_share = 0.0   # largest depth blind spot share since the last summary
        self._blind_warn = 0.0   # ... and the share from which it is a warning (0: never)
        self._blind_since: float | None = None
        self.extra: Any = None   # a callable giving more values for the summary (stage's own)
        self._lock = threading.Lock()

    def _publish(self, level: bytes, message: str, stamp: Any, values: dict[str, Any]) -> None:
        status = DiagnosticStatus(level=level, name=f'{self.name}: input', message=message,
                                  hardware_id=self.node.get_name(),
                                  values=[KeyValue(key=k, value=str(v))
                                          for k, v in values.items()])
        header = Header(stamp=stamp) if stamp is not None else Header(
            stamp=self.node.get_clock().now().to_msg())
        self.pub.publish(DiagnosticArray(header=header, status=[status]))

    def _warn_due(self, reason: str) -> bool:
        """Whether a warning of this kind (its text before ':') is due (caller holds the lock)."""
        now = time.monotonic()
        key = reason.split(':')[0]
        if now - self._last_warn.get(key, -1e9) < WARN_PERIOD_S:
            return False
        self._last_warn[key] = now
        return True

    def warn_throttled(self, reason: str) -> None:
        """Log ``reason`` as a warning, at most once a period per kind (no diagnostic)."""
        with self._lock:
            due = self._warn_due(reason)
        if due:
            self.node.get_logger().warning(reason)

    def bad_frame(self, reason: str, stamp: Any) -> None:
        """Warn (throttled per reason) and publish a WARN diagnostic for a dropped frame."""
        with self._lock:
            self.bad += 1
            due = self._warn_due(reason)
        if not due:
            return
        self.node.get_logger().warning(f'frame dropped: {reason}')
        values: dict[str, Any] = {'bad_frames': self.bad, 'frames': self.frames}
        if self.audited:
            # The copy audit goes out with a WARN too: a loaded loop can drop a frame in every
            # period, and the periodic OK summary then never comes (edge-loop check item 3
            # read 'no copy audit' from grasp_planner).
            values['audited_frames'] = self.audited
            values['copies_per_frame'] = f'{self.copies / self.audited:g}'
        self._publish(DiagnosticStatus.WARN, f'frame dropped: {reason}', stamp, values)

    def audit(self, frame: Any, *arrays: Any) -> None:
        """Copy audit (``copy_audit``): count the kernel inputs that are not views on ``frame``."""
        if not self.node.params.get('copy_audit', False):
            return
        copies = frame.audit(*arrays)
        with self._lock:
            self.audited += 1
            self.copies += copies
        if copies:
            self.bad_frame(f'copy audit: {copies} kernel input(s) copied from the frame', None)

    def transfers_per_frame(self) -> dict[str, str]:
        """A GPU-placed stage's copy audit: host<->device transfers per processed frame.

        Keys ``transfers_per_frame: h2d image``, ``... d2h grid``, ... from the stage's
        ``CopyLedger`` (``kernels.gpu.transfer``); empty on the CPU.
        """
        if self.ledger is None or not self.frames:
            return {}
        return {f'transfers_per_frame: {kind}': f'{n:.3g}'
                for kind, n in self.ledger.per_frame(self.frames).items()}

    def processed(self, elapsed_ms: float) -> None:
        """Count one processed frame."""
        with self._lock:
            self.frames += 1
            self.times_ms.append(elapsed_ms)

    def blind_spot(self, share: float, warn_share: float) -> None:
        """Record one frame's depth blind-spot share of the tray (see ``blind_spot_share``).

        The next summary is WARN when a frame since the last one reached ``warn_share`` (> 0);
        the log says so once when a blind spot appears and once when it has shrunk below half
        of that (a share hovering at the threshold does not flood the log).
        """
        with self._lock:
            self.blind_share = max(self.blind_share, share)
            self._blind_warn = warn_share
            started = 0 < warn_share <= share and self._blind_since is None
            ended = self._blind_since is not None and not 2 * share >= warn_share > 0
            if started:
                self._blind_since = time.monotonic()
            elif ended:
                lasted, self._blind_since = time.monotonic() - self._blind_since, None
        if started:
            self.node.get_logger().warning(
                f'depth camera blind over {share:.0%} of the tray (glare?): objects there '
                'cannot be found')
        elif ended:
            self.node.get_logger().info(f'depth blind spot gone after {lasted:.1f} s')

    def summary(self, reader: Any) -> None:
        """Periodic OK/WARN summary; flags frames the transport could not pair."""
        stats = reader.stats if reader is not None else {}
        dropped, received = int(stats.get('unpaired', 0)), int(stats.get('received', 0))
        new_drops, self._last_dropped = dropped - self._last_dropped, dropped
        new_frames, self._last_received = received - self._last_received, received
        # Colour/depth waiting for their partner (ros transport): nothing gets through when
        # camera_info is missing.
        waiting = reader.pending() if reader is not None else 0
        times = list(self.times_ms)
        values = {'frames': self.frames, 'bad_frames': self.bad, 'dropped': dropped,
                  'p50_ms': f'{np.median(times):.2f}' if times else 'nan',
                  'p99_ms': f'{np.percentile(times, 99):.2f}' if times else 'nan'}
        if self.audited:
            values['audited_frames'] = self.audited
            values['copies_per_frame'] = f'{self.copies / self.audited:g}'
        values.update(self.transfers_per_frame())
        if self.extra is not None:
            values.update(self.extra())
        if new_drops > 0 or (waiting and not new_frames):
            self.bad_frame(f'{max(new_drops, waiting)} incomplete frame(s): colour, depth and '
                           'camera_info not paired by stamp (missing camera_info?)', None)
            return   # (a blind spot seen meanwhile goes out with the next summary)
        with self._lock:
            blind, self.blind_share = self.blind_share, 0.0
            blind_warn = self._blind_warn
        if blind_warn > 0:
            values['blind_share'] = f'{blind:.3f}'
        if blind_warn > 0 and blind >= blind_warn:
            self._publish(DiagnosticStatus.WARN, f'depth blind spot over {blind:.0%} of the '
                          'tray (glare?): objects in it cannot be found', None, values)
            return
        self._publish(DiagnosticStatus.OK, 'ok', None, values)


ALLOW_STALE_PARAM = 'allow_stale_verification'


def allow_stale_verification(node: Any) -> bool:
    """The node's ``allow_stale_verification`` parameter (false by default).

    Declared here, on the first configure, for every node that runs the deployment gate, so
    that each kernel node has it without listing it (overrides from the launch file or the
    YAML apply at declaration).
    """
    if ALLOW_STALE_PARAM in node.params:
        return bool(node.params[ALLOW_STALE_PARAM])
    if not node.has_parameter(ALLOW_STALE_PARAM):
        from rcl_interfaces.msg import ParameterDescriptor, ParameterType

        node.declare_parameter(ALLOW_STALE_PARAM, False, ParameterDescriptor(
            type=ParameterType.PARAMETER_BOOL, description=(
                'Run a kernel whose verification is stale (verified with other library '
                'versions or another accelerator): WARN on every activation instead of '
                'refusing (docs/verification.md)')))
    value = node.get_parameter(ALLOW_STALE_PARAM).value
    if not isinstance(value, bool):
        raise ConfigError(f"parameter '{ALLOW_STALE_PARAM}' = {value!r}: expected a bool")
    return value


def _verification_check(node: Any, op_names: list[str]) -> None:
    from edge_loop.verify.gate import DeploymentGateError, check_deployable

    allow = allow_stale_verification(node)
    try:
        stale = check_deployable(op_names, node.params['verified_record'] or None,
                                 allow_stale=allow)
    except DeploymentGateError as exc:
        raise ConfigError(f'deployment gate: {exc}') from exc
    for message in stale:
        node.get_logger().warning(f'deployment gate: {message} ({ALLOW_STALE_PARAM} is true: '
                                  'running it anyway)')
    if not stale:
        node.get_logger().info(f'deployment gate: {", ".join(op_names)} verified')


def check_deployable_or_fail(node: Any, op_names: list[str]) -> None:
    """The deployment gate in configure, and again on every activation.

    Raises ConfigError with the gate's message. A stale entry (verified with other library
    versions, see :mod:`edge_loop.verify.gate`) fails too, unless the node's
    ``allow_stale_verification`` parameter is true: then it is a WARN, on configure and on
    every activation.
    """
    if not node.params['require_verified']:
        node.get_logger().warning('require_verified is false: running a kernel without '
                                  'checking its verification record')
        return
    _verification_check(node, op_names)
    checks = getattr(node, 'activation_checks', None)
    if checks is not None:
        # A re-configure (after cleanup) replaces the previous configure's check.
        checks[:] = [c for c in checks if getattr(c, 'deployment_gate', False) is False]

        def on_activate() -> None:
            _verification_check(node, op_names)

        on_activate.deployment_gate = True  # type: ignore[attr-defined]
        checks.append(on_activate)
