# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Lifecycle manager: brings the loop up in order, watches it, takes it down in reverse.

A plain rclpy node (not itself managed), like Nav2's lifecycle manager:

- ``node_names`` (string array, required) is the bring-up order (edge_loop/bringup.py).
  Startup configures every node in that order, then activates every node in that order;
  each transition has a timeout and is confirmed with ``get_state``. The first failure
  aborts bring-up with a log line naming the node and the transition, and deactivates what
  was already active (the controller first).
- Shutdown deactivates (controller first, then the others in reverse order), cleans up and
  shuts down in reverse order; reset stops after cleanup, so startup can run again.
- While up, every node's ``get_state`` is polled each ``heartbeat_period_s`` (one request
  in flight per node, a companion after ``RESEND_S`` unanswered; a late answer still counts,
  and the slowest round trip per node is on /diagnostics); a node that has not answered for
  ``heartbeat_timeout_s`` (a hung process), whose process has exited (nodes on this host
  publish ``host:pid`` in their read-only ``process`` parameter, checked every heartbeat),
  has left the ROS graph, or is no longer active is a failure: the controller is
  deactivated first (safe state), then the failure is reported (ERROR on /diagnostics, a
  log line naming the node, ``~/active`` false).
  The controller alone being inactive is the deadline monitor's safe state: a warning only.
- Services ``~/startup``, ``~/shutdown``, ``~/reset`` (std_srvs/Trigger); ``~/active``
  (std_msgs/Bool, transient local) says whether the whole graph is up.

Every call to another node runs in a reentrant callback group on a multi-threaded executor
(edge_loop.executors), so a service callback can wait for other nodes' answers.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from lifecycle_msgs.srv import GetState
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from edge_loop import topics
from edge_loop.executors import MultiThreadedExecutor
from edge_loop.lifecycle_client import STATE_LABELS, LifecycleClient, LifecycleError
from edge_loop.nodes.stage_base import context_shuts_down


class ManagerConfigError(ValueError):
    """A parameter of the manager that makes it unable to start."""


RESEND_S = 0.5   # an unanswered get_state gets a companion request after this long (s)


class _Watch:
    """Heartbeat bookkeeping of one node."""

    def __init__(self, now: float) -> None:
        self.last_answer = now
        self.state = 'unknown'
        self.pending: list[tuple[float, Any]] = []   # (sent at, future), oldest first
        self.pid: int | None = None   # when the node runs on this host
        self.answer_ms: list[float] = []   # get_state round trips since the last diagnostics


def _process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return False
    return stat.rsplit(')', 1)[1].split()[0] != 'Z'


def local_pid(process: str) -> int | None:
    """The pid of a ``host:pid`` string when host is this machine, else None."""
    host, _, pid = process.rpartition(':')
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid)


class LifecycleManager(Node):
    """Configures, activates, watches and shuts down the loop's lifecycle nodes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('lifecycle_manager', **kwargs)
        try:
            self.declare_parameter('node_names', Parameter.Type.STRING_ARRAY,
                                   ParameterDescriptor(description='Lifecycle nodes to manage, '
                                                       'in bring-up order (required)'))
        except Exception as exc:  # noqa: BLE001 - e.g. node_names:=[] has no string type
            raise ManagerConfigError(
                f"parameter 'node_names' is required: the lifecycle nodes to manage in "
                f'bring-up order (string array) ({type(exc).__name__}: {exc})') from exc
        self.declare_parameter('transition_timeout_s', 20.0, ParameterDescriptor(
            description='Timeout of one lifecycle transition of one node (s)'))
        self.declare_parameter('heartbeat_period_s', 0.1, ParameterDescriptor(
            description='Period of the get_state polls while up (s)'))
        self.declare_parameter('heartbeat_timeout_s', 3.0, ParameterDescriptor(
            description='No get_state answer for this long = the node hangs (s); an exited '
                        'process on this host is noticed within one heartbeat period'))
        self.declare_parameter('autostart', False, ParameterDescriptor(
            description='Bring the nodes up when the manager starts'))
        self.declare_parameter('controller_node', 'pick_controller', ParameterDescriptor(
            description='Deactivated first on any failure and at shutdown'))
        self.declare_parameter('diagnostics_period_s', 1.0, ParameterDescriptor(
            description='Period of the status on /diagnostics (s)'))
        try:
            names = list(self.get_parameter('node_names').value or [])
        except rclpy.exceptions.ParameterUninitializedException:
            names = []
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ManagerConfigError(
                "parameter 'node_names' is required: the lifecycle nodes to manage in "
                "bring-up order (string array), e.g. -p node_names:=['a','b']")
        if len(set(names)) != len(names):
            raise ManagerConfigError(f"parameter 'node_names' = {names!r}: duplicates")
        self.node_names = [n.lstrip('/') for n in names]
        self.timeout = float(self.get_parameter('transition_timeout_s').value)
        self.heartbeat_period = float(self.get_parameter('heartbeat_period_s').value)
        self.heartbeat_timeout = float(self.get_parameter('heartbeat_timeout_s').value)
        self.controller = str(self.get_parameter('controller_node').value).lstrip('/')
        for key, value in (('transition_timeout_s', self.timeout),
                           ('heartbeat_period_s', self.heartbeat_period),
                           ('heartbeat_timeout_s', self.heartbeat_timeout)):
            if not value > 0.0:
                raise ManagerConfigError(f"parameter '{key}' = {value}: must be > 0")

        self._group = ReentrantCallbackGroup()
        self._lifecycle = {n: LifecycleClient(self, n) for n in self.node_names}
        self._heartbeat = {n: self.create_client(GetState, f'{n}/get_state',
                                                 callback_group=self._group)
                           for n in self.node_names}
        self._watch: dict[str, _Watch] = {}
        self._busy = threading.Lock()
        self._lock = threading.Lock()
        self.state = 'down'          # down | starting | up | stopping | failed
        self.error = ''
        self.controller_note = ''
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._active_pub = self.create_publisher(Bool, '~/active', latched)
        self._diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        for name, handler in (('startup', self._srv_startup), ('shutdown', self._srv_shutdown),
                              ('reset', self._srv_reset)):
            self.create_service(Trigger, f'~/{name}', handler, callback_group=self._group)
        self.create_timer(self.heartbeat_period, self._on_heartbeat,
                          callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(float(self.get_parameter('diagnostics_period_s').value),
                          self._publish_diagnostics)
        self._publish_active(False)
        self.get_logger().info(f'managing {", ".join(self.node_names)}')
        if self.get_parameter('autostart').value:
            threading.Thread(target=self.startup, name='autostart', daemon=True).start()

    # --- helpers ----------------------------------------------------------------------------
    def _publish_active(self, active: bool) -> None:
        self._active_pub.publish(Bool(data=active))

    def _set_state(self, state: str) -> None:
        with self._lock:
            self.state = state

    def _current(self, name: str) -> str:
        client = self._lifecycle[name]
        client.wait_ready(self.timeout)
        return client.get_state(self.timeout)

    def _ensure(self, name: str, transition: str, before: str) -> None:
        """Run ``transition`` on ``name`` if it is in state ``before`` (else nothing)."""
        if self._current(name) == before:
            self.get_logger().info(f'{transition} {name}')
            self._lifecycle[name].transition(transition, self.timeout)

    def _down_order(self) -> list[str]:
        """Reverse bring-up order with the controller first."""
        order = list(reversed(self.node_names))
        if self.controller in order:
            order.remove(self.controller)
            order.insert(0, self.controller)
        return order

    def _deactivate_controller(self) -> str:
        if self.controller not in self._lifecycle:
            return 'no controller managed'
        try:
            client = self._lifecycle[self.controller]
            if client.get_state(min(self.timeout, 1.0)) == 'active':
                client.transition('deactivate', min(self.timeout, 2.0))
                return 'controller deactivated'
            return 'controller not active'
        except LifecycleError as exc:
            return f'controller not reachable ({exc})'

    # --- startup / shutdown / reset -----------------------------------------------------------
    def startup(self) -> tuple[bool, str]:
        """Configure all, then activate all, in order; abort on the first failure."""
        if not self._busy.acquire(timeout=self.timeout):   # wait for a running request
            return False, 'busy with another request'
        try:
            self._set_state('starting')
            self._publish_active(False)
            for transition, before in (('configure', 'unconfigured'),
                                       ('activate', 'inactive')):
                for name in self.node_names:
                    try:
                        self._ensure(name, transition, before)
                        state = self._current(name)
                        want = 'inactive' if transition == 'configure' else 'active'
                        if transition == 'configure' and state == 'active':
                            continue
                        if state != want:
                            raise LifecycleError(f'node {name!r}: {state} instead of {want}')
                    except LifecycleError as exc:
                        return False, self._abort(name, transition, exc)
            now = time.monotonic()
            watches = {n: _Watch(now) for n in self.node_names}
            for name, watch in watches.items():
                watch.pid = self._node_pid(name)
            with self._lock:
                self._watch = watches
                self.state = 'up'
                self.error = ''
                self.controller_note = ''
            self._publish_active(True)
            message = f'all {len(self.node_names)} nodes active'
            self.get_logger().info(message)
            return True, message
        finally:
            self._busy.release()

    def _abort(self, name: str, transition: str, exc: Exception) -> str:
        message = f'bring-up aborted: {transition} of {name!r} failed: {exc}'
        self.get_logger().error(message)
        undone = []
        for other in self._down_order():
            try:
                if self._lifecycle[other].get_state(min(self.timeout, 2.0)) == 'active':
                    self._lifecycle[other].transition('deactivate', self.timeout)
                    undone.append(other)
            except LifecycleError as err:
                self.get_logger().error(f'could not deactivate {other!r}: {err}')
        if undone:
            self.get_logger().warn(f'deactivated {", ".join(undone)}')
        with self._lock:
            self.state = 'failed'
            self.error = message
        self._publish_active(False)
        return message

    def _take_down(self, final: bool) -> tuple[bool, str]:
        if not self._busy.acquire(timeout=self.timeout):   # wait for a running request
            return False, 'busy with another request'
        try:
            self._set_state('stopping')
            self._publish_active(False)
            errors = []
            steps = [('deactivate', 'active', self._down_order()),
                     ('cleanup', 'inactive', list(reversed(self.node_names)))]
            if final:
                steps.append(('shutdown', 'unconfigured', list(reversed(self.node_names))))
            for transition, before, order in steps:
                for name in order:
                    try:
                        self._ensure(name, transition, before)
                    except LifecycleError as exc:
                        errors.append(f'{transition} {name}: {exc}')
                        self.get_logger().error(f'{transition} of {name!r} failed: {exc}')
            with self._lock:
                self.state = 'down' if not errors else 'failed'
                self.error = '; '.join(errors)
            what = 'shut down' if final else 'reset'
            if errors:
                return False, f'{what} with errors: ' + '; '.join(errors)
            self.get_logger().info(f'all nodes {what}')
            return True, f'all {len(self.node_names)} nodes {what}'
        finally:
            self._busy.release()

    def shutdown(self) -> tuple[bool, str]:
        """Deactivate (controller first), clean up and shut down in reverse order."""
        return self._take_down(final=True)

    def reset(self) -> tuple[bool, str]:
        """Deactivate (controller first) and clean up in reverse order: ready for startup."""
        return self._take_down(final=False)

    def _srv(self, fn: Any, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = fn()
        return response

    def _srv_startup(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        return self._srv(self.startup, response)

    def _srv_shutdown(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        return self._srv(self.shutdown, response)

    def _srv_reset(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        return self._srv(self.reset, response)

    # --- watching -------------------------------------------------------------------------------
    def _on_heartbeat(self) -> None:
        with self._lock:
            if self.state != 'up':
                return
            watches = dict(self._watch)
        now = time.monotonic()
        graph = {(ns.rstrip('/') + '/' + n).lstrip('/')
                 for n, ns in self.get_node_names_and_namespaces()}
        own = self.get_namespace().strip('/')
        if own:   # node_names are relative to this manager's namespace (launch namespace:=)
            graph |= {g[len(own) + 1:] for g in graph if g.startswith(own + '/')}
        for name, watch in watches.items():
            if watch.pid is not None and not _process_alive(watch.pid):
                self._failure(name, f'process {watch.pid} exited')
                return
            silent = now - watch.last_answer
            if silent > self.heartbeat_timeout:
                self._failure(name, f'no get_state answer for {silent * 1000:.0f} ms '
                                    '(process dead or hung)')
                return
            if name not in graph and silent > self.heartbeat_period:
                self._failure(name, 'left the ROS graph')
                return
            if watch.state not in ('active', 'unknown'):
                if name != self.controller or watch.state != 'inactive':
                    self._failure(name, f'no longer active (now {watch.state})')
                    return
                # The controller in its safe state: still watched (its heartbeat goes on).
                if not self.controller_note:
                    self.controller_note = 'controller inactive (safe state)'
                    self.get_logger().warn(
                        f'{name!r} is inactive (deactivated by the deadline monitor?)')
            elif watch.state == 'active' and name == self.controller:
                self.controller_note = ''
            self._poll(name, watch, now)

    def _poll(self, name: str, watch: _Watch, now: float) -> None:
        """Keep one get_state in flight; a late answer still counts as a sign of life.

        A busy node can answer hundreds of ms late (the GIL-hogging dummy of the tests: up to
        1 s). Requests used to be dropped two periods after they were sent, which threw such
        answers away; now a request is given up only after ``heartbeat_timeout_s``, and one
        unanswered for ``RESEND_S`` gets a companion in case the request or its reply was
        lost. Each answer's round trip goes to /diagnostics.
        """
        keep = []
        for sent, future in watch.pending:
            if future.done():
                continue
            if now - sent > self.heartbeat_timeout:
                self._heartbeat[name].remove_pending_request(future)
                continue
            keep.append((sent, future))
        watch.pending = keep
        if keep and now - keep[-1][0] < RESEND_S:
            return
        future = self._heartbeat[name].call_async(GetState.Request())
        future.add_done_callback(lambda f, w=watch, t=now: self._on_answer(w, f, t))
        watch.pending.append((now, future))

    def _node_pid(self, name: str) -> int | None:
        """The pid of ``name`` from its ``process`` parameter, when it runs on this host."""
        from rcl_interfaces.srv import GetParameters

        client = self.create_client(GetParameters, f'{name}/get_parameters',
                                    callback_group=self._group)
        try:
            if not client.wait_for_service(timeout_sec=2.0):
                return None
            done = threading.Event()
            future = client.call_async(GetParameters.Request(names=['process']))
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(2.0) or future.result() is None:
                return None
            values = future.result().values
            return local_pid(values[0].string_value) if values else None
        finally:
            self.destroy_client(client)

    def _on_answer(self, watch: _Watch, future: Any, sent: float) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        state = future.result().current_state
        now = time.monotonic()
        with self._lock:
            watch.last_answer = max(watch.last_answer, now)
            watch.state = STATE_LABELS.get(state.id, state.label)
            watch.answer_ms.append((now - sent) * 1000.0)

    def _failure(self, name: str, reason: str) -> None:
        with self._lock:
            if self.state != 'up':
                return
            self.state = 'failed'
            self.error = f'{name}: {reason}'
        self.get_logger().error(f'failure detected: node {name!r}: {reason}; '
                                'deactivating the controller')
        threading.Thread(target=self._safe_state, args=(name, reason), daemon=True).start()

    def _safe_state(self, name: str, reason: str) -> None:
        outcome = (self._deactivate_controller() if name != self.controller
                   else 'the controller itself failed')
        self._publish_active(False)
        with self._lock:
            self.error = f'{name}: {reason}; {outcome}'
        self.get_logger().error(f'node {name!r} failed ({reason}); {outcome}; '
                                'call ~/reset then ~/startup to bring the loop back')
        self._publish_diagnostics()

    # --- diagnostics ----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self._lock:
            state, error, note = self.state, self.error, self.controller_note
            nodes = {n: w.state for n, w in self._watch.items()}
            answers = {}
            for n, w in self._watch.items():
                answers[n], w.answer_ms = w.answer_ms, []
        status = DiagnosticStatus(name=f'{self.get_name()}: lifecycle', hardware_id='edge_loop')
        if state == 'failed':
            status.level, status.message = DiagnosticStatus.ERROR, error
        elif state == 'up' and not note:
            status.level, status.message = DiagnosticStatus.OK, 'all nodes active'
        else:
            status.level = DiagnosticStatus.WARN
            status.message = note or state
        status.values = [KeyValue(key='state', value=state)] + [
            KeyValue(key=f'node {n}', value=nodes.get(n, 'not started'))
            for n in self.node_names] + [
            KeyValue(key=f'heartbeat {n} max ms', value=f'{max(answers[n]):.1f}')
            for n in self.node_names if answers.get(n)]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)


def main(args: list[str] | None = None) -> int:
    """Run the lifecycle manager until Ctrl-C."""
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        node = LifecycleManager()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        executor.spin()
    except ManagerConfigError as exc:
        rclpy.logging.get_logger('lifecycle_manager').fatal(str(exc))
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        # The stop signal shut the context down while the executor was building its wait set
        # ('the given context is not valid', a fresh-clone CI run): the shutdown asked for, as
        # in run_node, not a crash.
        if not context_shuts_down(1.0):
            raise
    finally:
        if node is not None:
            with contextlib.suppress(Exception):   # shutting down anyway
                node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
