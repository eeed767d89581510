# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle stage base: declared, described and validated parameters; clean release.

Every edge_loop node derives from :class:`StageNode`. A subclass lists its parameters as
:class:`Param` records; the base declares them with descriptors (type, range, description),
reads and validates them in ``on_configure`` and fails the transition with one log line that
names the parameter and the value (rclpy turns an exception in a hook into ERROR without
logging it, so the base catches and logs). ``on_cleanup``/``on_shutdown``/``on_error`` call
:meth:`StageNode.release`, which subclasses extend to free files, shared memory and threads.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import rclpy
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.executors import ExternalShutdownException
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from edge_loop.cpu import check_cpus, for_each_thread, format_cpu_list, parse_cpu_list, pin_process

_PTYPE = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
    'float[]': ParameterType.PARAMETER_DOUBLE_ARRAY,
    'int[]': ParameterType.PARAMETER_INTEGER_ARRAY,
    'str[]': ParameterType.PARAMETER_STRING_ARRAY,
}
_TYPE_NAME = {bool: 'bool', int: 'integer', float: 'double', str: 'string',
              'float[]': 'double array', 'int[]': 'integer array', 'str[]': 'string array'}


PROCESS_PARAM = 'process'


class ConfigError(Exception):
    """A parameter or resource that makes configure fail; the message is logged as is."""


@dataclass(frozen=True)
class Param:
    """One declared parameter: name, default, description and constraints."""

    name: str
    default: Any
    description: str
    type: Any = None            # bool/int/float/str or 'float[]'/'int[]'/'str[]'; from default
    min: float | None = None
    max: float | None = None
    choices: Sequence[Any] | None = None
    length: int | None = None   # exact length of an array parameter
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)
    # Who sets it: 'user' (must be set for a robot: extrinsics, workspace, hand, budgets),
    # 'tuning' (works as shipped; change with a measurement) or 'internal' (wiring, tests,
    # debugging). `edge-loop params` lists them by tier (docs/parameters.md).
    tier: str = 'tuning'
    # What a change through set_parameters does while the node is configured: 'configure'
    # (refused with the reason: the node reads it at configure), 'live' (validated and in
    # effect at once) or 'later' (accepted; the node reads it again at a point its docs name).
    at_runtime: str = 'configure'

    def ptype(self) -> Any:
        """The declared type (inferred from the default when not given)."""
        if self.type is not None:
            return self.type
        d = self.default
        if isinstance(d, bool):
            return bool
        if isinstance(d, (list, tuple)):
            if d and all(isinstance(x, str) for x in d):
                return 'str[]'
            if d and all(isinstance(x, int) and not isinstance(x, bool) for x in d):
                return 'int[]'
            return 'float[]'
        return type(d)

    def descriptor(self) -> ParameterDescriptor:
        """ParameterDescriptor with type, description and range, for ros2 param describe."""
        t = self.ptype()
        desc = ParameterDescriptor(description=self.description, type=_PTYPE[t],
                                   dynamic_typing=True)
        extra = []
        if self.choices is not None:
            extra.append('one of ' + ', '.join(map(str, self.choices)))
        if self.length is not None:
            extra.append(f'{self.length} values')
        if self.min is not None or self.max is not None:
            extra.append(f'range [{self.min}, {self.max}]')
            # Only a scalar of the declared type can carry a range (rclpy enforces it at set).
            if t is float and self.min is not None and self.max is not None:
                desc.floating_point_range = [FloatingPointRange(
                    from_value=float(self.min), to_value=float(self.max), step=0.0)]
            elif t is int and self.min is not None and self.max is not None:
                desc.integer_range = [IntegerRange(
                    from_value=int(self.min), to_value=int(self.max), step=0)]
        if extra:
            desc.additional_constraints = '; '.join(extra)
        return desc

    def validate(self, value: Any) -> Any:
        """Return ``value`` converted to the declared type, or raise ConfigError."""
        t = self.ptype()
        bad = f"parameter '{self.name}' = {value!r}"
        if t is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if t == 'float[]' and isinstance(value, (list, tuple)):
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
                raise ConfigError(f'{bad}: expected a {_TYPE_NAME[t]}')
            value = [float(x) for x in value]
        elif t in ('int[]', 'str[]'):
            want = int if t == 'int[]' else str
            if not isinstance(value, (list, tuple)) or not all(
                    isinstance(x, want) and not isinstance(x, bool) for x in value):
                raise ConfigError(f'{bad}: expected a {_TYPE_NAME[t]}')
            value = list(value)
        elif t in (bool, int, float, str):
            if not isinstance(value, t) or (t is int and isinstance(value, bool)):
                raise ConfigError(f'{bad}: expected a {_TYPE_NAME[t]}, got '
                                  f'{type(value).__name__}')
        elif not isinstance(value, list):
            raise ConfigError(f'{bad}: expected a {_TYPE_NAME[t]}')
        if self.length is not None and len(value) != self.length:
            raise ConfigError(f'{bad}: expected {self.length} values, got {len(value)}')
        scalars = value if isinstance(value, list) else [value]
        for v in scalars:
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f'{bad}: must be finite')
            if self.min is not None and v < self.min:
                raise ConfigError(f'{bad}: must be >= {self.min}')
            if self.max is not None and v > self.max:
                raise ConfigError(f'{bad}: must be <= {self.max}')
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f'{bad}: must be one of {", ".join(map(str, self.choices))}')
        if self.check is not None:
            reason = self.check(value)
            if reason:
                raise ConfigError(f'{bad}: {reason}')
        return value


def _cpu_list_error(text: str) -> str | None:
    try:
        cpus = parse_cpu_list(text)
        if cpus:
            check_cpus(cpus)
    except ValueError as exc:
        return str(exc)
    return None


# Parameters every node in the loop shares (from the '/**' section of config/pick.yaml).
COMMON_PARAMS = (
    Param('camera_position', [0.0, 0.0, 0.75],
          'Position [x, y, z] of camera_color_optical_frame in world (m)', length=3,
          tier='user'),
    Param('camera_orientation', [1.0, 0.0, 0.0, 0.0],
          'Orientation [qx, qy, qz, qw] of camera_color_optical_frame in world', length=4,
          check=lambda q: None if sum(x * x for x in q) > 1e-6 else 'quaternion has zero norm',
          tier='user'),
    Param('world_frame', 'world', 'Frame id of the workspace frame (z up)',
          check=lambda s: 'must not start with /' if s.startswith('/') or not s else None),
    Param('extrinsics_source', 'params', 'Where the stages that use the camera pose read it: '
          'params (camera_position/camera_orientation) or tf (world_frame -> camera_frame, '
          'looked up at configure; needs tf2_ros)', choices=('params', 'tf'), tier='user'),
    Param('camera_frame', 'camera_color_optical_frame', 'TF frame of the colour optical '
          'frame (extrinsics_source tf)',
          check=lambda s: 'must not start with /' if s.startswith('/') or not s else None),
    Param('tf_timeout_s', 5.0, 'How long configure waits for the camera pose in TF (s)',
          min=0.0, max=120.0),
    Param('transport', 'shm', 'Frame transport: shm (iceoryx2 loans) or ros (Image topics)',
          choices=('shm', 'ros')),
    Param('frame_channel', 'edge_loop/rgbd', 'iceoryx2 service name of the RGB-D frames',
          tier='internal'),
    Param('debug_delay_ms', 0.0, 'Test only: extra processing delay per frame (fault injection)',
          min=0.0, max=10000.0, at_runtime='live', tier='internal'),
    Param('nice', 0, 'CPU priority of this process (Linux nice, -20..19; below 0 needs '
          'CAP_SYS_NICE), for a host shared with other work (make bench-replay compares)',
          min=-20, max=19),
    Param('cpu_affinity', '', "CPUs this process runs on, as taskset -c lists them ('2', "
          "'0,2', '1-3'; '' leaves it to the OS): a frame consumer on a core of its own wakes "
          'sooner (docs/transport.md)', check=_cpu_list_error),
    Param('copy_audit', False, 'Debug: check per frame that the arrays handed to the kernel '
          'are views on the received frame (shared memory), and report copies per frame',
          tier='internal'),
)


class StageNode(LifecycleNode):
    """Base of every edge_loop lifecycle node.

    Subclasses set ``PARAMS`` (and ``USES_COMMON_PARAMS``) and override the ``*_stage`` hooks,
    which may raise :class:`ConfigError` for a clean, named failure.
    """

    PARAMS: tuple[Param, ...] = ()
    USES_COMMON_PARAMS = True

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        self.params: dict[str, Any] = {}
        self._configured = False
        self._declare_errors: list[str] = []
        self.frame_reader: Any = None
        self._summary_timer: Any = None
        # Run (in order) before activate_stage on every activation; one that raises fails the
        # activation (the deployment gate re-checks the verification record here).
        self.activation_checks: list[Callable[[], None]] = []
        super().__init__(node_name, **kwargs)
        # Where this node runs, for the lifecycle manager's liveness watch: a process that is
        # gone is noticed at once, one that is merely busy (a 1 s render) is not taken for dead.
        self.declare_parameter(
            PROCESS_PARAM, f'{socket.gethostname()}:{os.getpid()}',
            ParameterDescriptor(description='host:pid of this node (read only)', read_only=True),
            ignore_override=True)
        for spec in self.all_params():
            try:
                self.declare_parameter(spec.name, spec.default, spec.descriptor())
            except Exception as exc:  # noqa: BLE001 - e.g. an override out of the range
                self._declare_errors.append(self._describe_bad_override(spec, exc))
                self.declare_parameter(spec.name, spec.default, spec.descriptor(),
                                       ignore_override=True)
        # A change at runtime is validated like the parameter files, and refused with its reason
        # while configured unless the parameter says it can change then (Param.at_runtime):
        # never accepted and silently ignored. debug_delay_ms is live (edge-loop check slows a
        # running stage).
        self._specs = {spec.name: spec for spec in self.all_params()}
        self.add_on_set_parameters_callback(self._check_params_set)
        self.add_post_set_parameters_callback(self._on_params_set)

    @property
    def configured(self) -> bool:
        """True from a successful configure until cleanup, shutdown or error."""
        return self._configured

    def _check_params_set(self, params: list[Any]) -> SetParametersResult:
        for p in params:
            spec = self._specs.get(p.name)
            if spec is None:
                continue
            try:
                spec.validate(p.value)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            if self.configured and spec.at_runtime == 'configure':
                return SetParametersResult(successful=False, reason=(
                    f"'{p.name}' is read at configure: deactivate and clean up "
                    f'{self.get_fully_qualified_name()}, set it, then configure again (or '
                    'set it in the params file)'))
        return SetParametersResult(successful=True)

    def _on_params_set(self, params: list[Any]) -> None:
        for p in params:
            spec = self._specs.get(p.name)
            if spec is not None and spec.at_runtime == 'live' and self.configured:
                self.params[p.name] = spec.validate(p.value)

    def _describe_bad_override(self, spec: Param, exc: Exception) -> str:
        override = getattr(self, '_parameter_overrides', {}).get(spec.name)
        if override is not None:
            try:
                spec.validate(override.value)
            except ConfigError as err:
                return str(err)
        return f"parameter '{spec.name}': {exc}"

    @classmethod
    def all_params(cls) -> tuple[Param, ...]:
        """Own parameters plus the shared ones."""
        return (COMMON_PARAMS if cls.USES_COMMON_PARAMS else ()) + cls.PARAMS

    def read_params(self) -> dict[str, Any]:
        """Read and validate every declared parameter (raises ConfigError)."""
        if self._declare_errors:
            raise ConfigError('; '.join(self._declare_errors))
        out = {}
        for spec in self.all_params():
            out[spec.name] = spec.validate(self.get_parameter(spec.name).value)
        return out

    # --- hooks for subclasses -------------------------------------------------------------
    def configure_stage(self) -> None:
        """Create publishers, subscriptions, load models (params are in self.params)."""

    def activate_stage(self) -> None:
        """Start processing."""

    def deactivate_stage(self) -> None:
        """Stop processing; keep resources."""

    def release(self) -> None:
        """Free everything configure created (idempotent)."""

    def open_frames(self, callback: Callable[[Any], None], summary: Callable[[], None],
                    transport: str | None = None, **reader_kwargs: Any) -> None:
        """Read the frame channel into ``callback``; call ``summary`` every diagnostics period.

        The reader is ``self.frame_reader``; :meth:`close_frames` undoes this (idempotent).
        """
        from edge_loop.transport import FrameReader

        self.watch_frames(FrameReader(
            self, transport or self.params['transport'], channel=self.params['frame_channel'],
            callback=callback, **reader_kwargs), summary)

    def watch_frames(self, reader: Any, summary: Callable[[], None]) -> None:
        """Make ``reader`` (anything with ``close()``) this node's frame reader, with ``summary``.

        For a reader other than FrameReader (frame_ingest's compressed images);
        :meth:`close_frames` closes it.
        """
        self.frame_reader = reader
        self._summary_timer = self.create_timer(self.params['diagnostics_period_s'], summary)

    def close_frames(self) -> None:
        """Stop the summary timer and close the frame reader (idempotent)."""
        timer, self._summary_timer = self._summary_timer, None
        if timer is not None:
            self.destroy_timer(timer)
        reader, self.frame_reader = self.frame_reader, None
        if reader is not None:
            reader.close()

    def debug_delay(self) -> None:
        """Sleep ``debug_delay_ms`` (fault injection for the deadline tests; 0 in deployment)."""
        delay = self.params.get('debug_delay_ms', 0.0)
        if delay > 0.0:
            time.sleep(delay / 1000.0)

    # --- lifecycle transitions ------------------------------------------------------------
    def _guarded(self, what: str, fn: Callable[[], None]) -> TransitionCallbackReturn:
        try:
            fn()
        except ConfigError as exc:
            self.get_logger().error(f'{what} failed: {exc}')
            self._safe_release()
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:  # noqa: BLE001 - rclpy would swallow it without a log
            self.get_logger().error(f'{what} failed: {type(exc).__name__}: {exc}')
            self.get_logger().debug(traceback.format_exc())
            self._safe_release()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def _set_nice(self, nice: int) -> None:
        """Give every thread of this process the niceness ``nice`` (new threads inherit it)."""
        if nice == 0 and os.getpriority(os.PRIO_PROCESS, 0) == 0:
            return
        failed = for_each_thread(lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice))
        if failed:
            self.get_logger().warning(f'nice {nice} not applied ({failed}); running at '
                                      f'{os.getpriority(os.PRIO_PROCESS, 0)}')
        else:
            self.get_logger().info(f'process niceness {nice}')

    def _safe_release(self) -> None:
        try:
            self.release()
        except Exception as exc:  # noqa: BLE001
            self.get_logger().error(f'release failed: {type(exc).__name__}: {exc}')

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        def configure() -> None:
            self.params = self.read_params()
            if 'nice' in self.params:
                self._set_nice(self.params['nice'])
            if self.params.get('cpu_affinity'):
                cpus = parse_cpu_list(self.params['cpu_affinity'])
                pin_process(cpus)
                self.get_logger().info(f'process pinned to CPUs {format_cpu_list(cpus)}')
            self.configure_stage()
        result = self._guarded('configure', configure)
        self._configured = result == TransitionCallbackReturn.SUCCESS
        if self._configured:
            self.get_logger().info('configured')
        return result

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        # Enable the lifecycle publishers first: a stage that starts a thread in
        # activate_stage would otherwise publish its first messages into disabled publishers.
        result = super().on_activate(state)
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        for check in self.activation_checks:
            result = self._guarded('activate', check)
            if result != TransitionCallbackReturn.SUCCESS:
                super().on_deactivate(state)
                return result
        result = self._guarded('activate', self.activate_stage)
        if result != TransitionCallbackReturn.SUCCESS:
            super().on_deactivate(state)
            return result
        self.get_logger().info('activated')
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = self._guarded('deactivate', self.deactivate_stage)
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        self.get_logger().info('deactivated')
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._configured = False
        self._safe_release()
        self.get_logger().info('cleaned up')
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._configured = False
        self._safe_release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._configured = False
        self._safe_release()
        return TransitionCallbackReturn.SUCCESS


def context_shuts_down(within_s: float) -> bool:
    """Whether the default context is (or within ``within_s`` becomes) shut down."""
    deadline = time.monotonic() + within_s
    while rclpy.ok():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def run_node(node_cls: type[LifecycleNode], args: list[str] | None = None,
             executor_cls: Any = None) -> int:
    """Standard ``main()`` body: init, spin, exit quietly on Ctrl-C or external shutdown."""
    from rclpy.executors import SingleThreadedExecutor

    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = node_cls()
        executor = (executor_cls or SingleThreadedExecutor)()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        # A signal shut the context down while the executor was taking a message: rclpy then
        # raises from the take (seen at 240 Hz). That is the shutdown asked for, not a crash.
        # rclpy's signal thread may mark the context shut down only just after the take
        # failed (seen under load: 'Unable to convert call argument'), so give it a moment.
        if not context_shuts_down(1.0):
            raise
    finally:
        if node is not None:
            try:
                if hasattr(node, 'release'):
                    node.release()
                node.destroy_node()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
        if rclpy.ok():
            rclpy.try_shutdown()
    return 0
