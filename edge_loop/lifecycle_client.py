# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Drive other nodes' lifecycles through their ``change_state``/``get_state`` services.

Used by the lifecycle manager, ``edge-loop up`` and the tests. Every call has a timeout and
each transition is confirmed with ``get_state`` (as Nav2's manager does).
"""

from __future__ import annotations

import threading
import time

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

RESEND_S = 2.0   # get_state is a query: resent when unanswered this long

# transition id -> (label, primary state it must reach)
TRANSITIONS = {
    'configure': (Transition.TRANSITION_CONFIGURE, State.PRIMARY_STATE_INACTIVE),
    'activate': (Transition.TRANSITION_ACTIVATE, State.PRIMARY_STATE_ACTIVE),
    'deactivate': (Transition.TRANSITION_DEACTIVATE, State.PRIMARY_STATE_INACTIVE),
    'cleanup': (Transition.TRANSITION_CLEANUP, State.PRIMARY_STATE_UNCONFIGURED),
    'shutdown': (Transition.TRANSITION_INACTIVE_SHUTDOWN, State.PRIMARY_STATE_FINALIZED),
}
STATE_LABELS = {
    State.PRIMARY_STATE_UNKNOWN: 'unknown',
    State.PRIMARY_STATE_UNCONFIGURED: 'unconfigured',
    State.PRIMARY_STATE_INACTIVE: 'inactive',
    State.PRIMARY_STATE_ACTIVE: 'active',
    State.PRIMARY_STATE_FINALIZED: 'finalized',
}
# the state each transition starts from (shutdown: any primary state, below)
_FROM = {
    'configure': State.PRIMARY_STATE_UNCONFIGURED,
    'activate': State.PRIMARY_STATE_INACTIVE,
    'deactivate': State.PRIMARY_STATE_ACTIVE,
    'cleanup': State.PRIMARY_STATE_INACTIVE,
}
# shutdown has one transition id per source state
_SHUTDOWN_FROM = {
    State.PRIMARY_STATE_UNCONFIGURED: Transition.TRANSITION_UNCONFIGURED_SHUTDOWN,
    State.PRIMARY_STATE_INACTIVE: Transition.TRANSITION_INACTIVE_SHUTDOWN,
    State.PRIMARY_STATE_ACTIVE: Transition.TRANSITION_ACTIVE_SHUTDOWN,
}


class LifecycleError(RuntimeError):
    """A transition that failed, timed out or landed in the wrong state."""


class LifecycleClient:
    """Synchronous lifecycle client for one remote node.

    The owning node must be spun by an executor in another thread (or by a
    MultiThreadedExecutor, with this client's callbacks in their own group).
    """

    def __init__(self, node: Node, target: str) -> None:
        self.target = target.lstrip('/')
        group = ReentrantCallbackGroup()
        self._change = node.create_client(ChangeState, f'{self.target}/change_state',
                                          callback_group=group)
        self._get = node.create_client(GetState, f'{self.target}/get_state',
                                       callback_group=group)
        self._node = node

    def destroy(self) -> None:
        """Destroy the service clients."""
        self._node.destroy_client(self._change)
        self._node.destroy_client(self._get)

    def wait_ready(self, timeout: float) -> None:
        """Wait until both services are discovered."""
        deadline = time.monotonic() + timeout
        for client in (self._get, self._change):
            left = deadline - time.monotonic()
            if left <= 0 or not client.wait_for_service(timeout_sec=left):
                raise LifecycleError(
                    f'node {self.target!r}: lifecycle services not available after '
                    f'{timeout:.1f} s (is the process running?)')

    def _call(self, client, request, timeout: float, resend_s: float | None = None):
        """Call ``client``; with ``resend_s`` (idempotent requests only) resend that often.

        A request sent before this client has discovered the server, or whose reply the
        server sends before it has matched this client's reply reader (a node process that
        has only just started), is never answered: wait for the service first, and resend a
        query that got no answer.
        """
        deadline = time.monotonic() + timeout
        if resend_s:   # at least one resend within the timeout (CI: a first get_state to a
            resend_s = min(resend_s, max(timeout / 4.0, 0.25))   # new node lost its reply)
        if not client.wait_for_service(timeout_sec=timeout):
            raise LifecycleError(f'node {self.target!r}: {client.srv_name} not available after '
                                 f'{timeout:.1f} s (is the process running?)')
        while True:
            event = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _f, done=event: done.set())
            left = max(deadline - time.monotonic(), 0.0)
            if event.wait(min(left, resend_s) if resend_s else left):
                break
            client.remove_pending_request(future)
            if time.monotonic() >= deadline:
                raise LifecycleError(f'node {self.target!r}: {client.srv_name} timed out '
                                     f'after {timeout:.1f} s')
        if future.exception() is not None:
            raise LifecycleError(f'node {self.target!r}: {future.exception()}')
        return future.result()

    def get_state(self, timeout: float = 2.0) -> str:
        """Current primary state label ('unconfigured', 'inactive', 'active', ...)."""
        if not self._get.service_is_ready() and not self._get.wait_for_service(timeout):
            raise LifecycleError(f'node {self.target!r}: get_state not available')
        resp = self._call(self._get, GetState.Request(), timeout, resend_s=RESEND_S)
        return STATE_LABELS.get(resp.current_state.id, resp.current_state.label)

    def state_id(self, timeout: float = 2.0) -> int:
        """Current primary state id."""
        resp = self._call(self._get, GetState.Request(), timeout, resend_s=RESEND_S)
        return int(resp.current_state.id)

    def transition(self, name: str, timeout: float = 10.0) -> None:
        """Run transition ``name`` and confirm the resulting state; raise LifecycleError."""
        if name not in TRANSITIONS:
            raise ValueError(f'unknown transition {name!r}; known: {", ".join(TRANSITIONS)}')
        self.wait_ready(timeout)
        tid, expect = TRANSITIONS[name]
        current = self.state_id(timeout)
        if current == expect:
            return  # already there (e.g. the manager and the monitor both deactivate)
        if name == 'shutdown':
            tid = _SHUTDOWN_FROM.get(current, tid)
        elif current != _FROM[name]:
            # Asking rcl for an unregistered transition raises inside the target's service
            # callback (rclpy 7.1), which can take that node down: refuse here instead.
            raise LifecycleError(f'node {self.target!r}: cannot {name} from '
                                 f'{STATE_LABELS.get(current, current)}')
        req = ChangeState.Request()
        req.transition.id = tid
        resp = self._call(self._change, req, timeout)
        state = self.get_state(timeout)
        if not resp.success or state != STATE_LABELS[expect]:
            raise LifecycleError(
                f'node {self.target!r}: {name} failed (now {state}); see its log for the reason')

    def wait_for_state(self, label: str, timeout: float) -> None:
        """Poll get_state until it reports ``label``."""
        deadline = time.monotonic() + timeout
        last = 'unreachable'
        while time.monotonic() < deadline:
            try:
                last = self.get_state(timeout=min(1.0, max(0.05, deadline - time.monotonic())))
                if last == label:
                    return
            except LifecycleError:
                pass
            time.sleep(0.05)
        raise LifecycleError(f'node {self.target!r}: not {label} after {timeout:.1f} s '
                             f'(last state: {last})')
