# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The live part of ``edge-loop check``: the deployed graph on this host, and what it does.

One bring-up serves every live item: the graph of ``edge-loop up`` (one process per node,
the lifecycle manager, frames over shared memory) replays a scenario bag in real time (or
reads the live camera). The session records the stamps of every stage's output as the
middleware received them (raw samples: only the header stamp is read, so the check costs
the graph little CPU), the safe stops and ``/diagnostics``, and offers the phases the runner
calls in turn: a latency window, an injected fault, the lifecycle cycles, the stop.

The iceoryx2 files of the session carry a prefix of their own, so a segment left behind is
the session's and nobody else's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_loop import bringup, stages, topics
from edge_loop.check.node_params import declared_values
from edge_loop.check.recorder import StampRecorder
from edge_loop.launcher import Graph
from edge_loop.stats import percentiles

FRAME_STAGES = {name: stages.BY_NAME[name].topic for name in stages.FRAME_STAGES}
PREFIX_ENV = 'EDGE_LOOP_IOX2_PREFIX'   # edge_loop/transport/shm.py reads it
SHM_DIRS = (Path('/dev/shm'), Path('/tmp/iceoryx2'))


def fault_detection_ms(events: list[Any]) -> list[float]:
    """Detection delays (ms) of the deadline-miss safe stops that carry both times."""
    return [(e.detected_ns - e.deadline_ns) / 1e6 for e in events
            if e is not None and e.reason == 'deadline_miss'
            and e.deadline_ns is not None and e.detected_ns is not None]


@dataclass
class FaultRecord:
    """What happened around one injected stage delay (times: system clock ns)."""

    stage: str
    delay_ms: float
    monitor_in_graph: bool
    injected_ns: int = 0
    stops: list[tuple[int, int, str]] = field(default_factory=list)   # (stamp, received, why)
    controller_before_fault: str = 'unknown'
    prepared: str = ''       # what it took to have the controller active before the fault
    controller_after_fault: str = 'unknown'
    monitor_detect_p99_ms: float | None = None
    monitor_detect_max_ms: float | None = None
    cleared_ns: int = 0
    reactivated: bool = False
    reactivate_message: str = ''
    recovered_ns: int = 0
    controller_after_recovery: str = 'unknown'
    commands_after_recovery: int = 0
    frames_after_recovery: int = 0
    stops_after_recovery: int = 0
    fault_window: tuple[int, int] = (0, 0)      # stamps judged as the slowed window
    note: str = ''


@dataclass
class StepRecord:
    """One lifecycle step of the whole graph through the manager."""

    step: str
    ok: bool
    seconds: float
    message: str
    states: dict[str, str] = field(default_factory=dict)


@dataclass
class ExitRecord:
    """How one process ended after the graph was shut down."""

    name: str
    code: int | None
    seconds: float
    signal_needed: str     # 'SIGINT' (clean), 'SIGTERM' or 'SIGKILL' (did not shut down)


@dataclass
class SessionConfig:
    """What to bring up and where."""

    params_file: Path
    log_dir: Path
    bag: Path | None = None
    live: bool = False
    domain_id: int | None = None
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    startup_timeout_s: float = 120.0
    exit_timeout_s: float = 10.0


def shm_entries(prefix: str, *, with_global: bool = False) -> list[str]:
    """Files under /dev/shm and /tmp/iceoryx2 whose name starts with ``prefix``.

    iceoryx2 keeps one small ``global_mgmt`` file per prefix once any node existed (by
    design, not per process: docs/transport.md); it is left out unless ``with_global``.
    """
    found = []
    for root in SHM_DIRS:
        if not root.is_dir():
            continue
        for path in root.rglob(f'{prefix}*'):
            if with_global or not path.name.endswith('global_mgmt'):
                found.append(str(path))
    return sorted(found)


def remove_global_file(prefix: str) -> None:
    """Remove the session prefix's iceoryx2 global file (every process of it has exited)."""
    for name in shm_entries(prefix, with_global=True):
        if name.endswith('global_mgmt'):
            with contextlib.suppress(OSError):
                os.unlink(name)


def stop_processes(procs: list[Any], timeout_s: float) -> list[ExitRecord]:
    """SIGINT each process in turn (the manager first); escalate only for one that hangs.

    ``procs`` have ``name`` and ``proc`` (a Popen). A process that needs more than SIGINT
    within ``timeout_s`` did not shut down: the record names the signal that ended it.
    """
    records = []
    for p in procs:
        start = time.monotonic()
        used = 'SIGINT'
        for sig, wait in ((signal.SIGINT, timeout_s), (signal.SIGTERM, 3.0),
                          (signal.SIGKILL, 3.0)):
            if p.proc.poll() is not None:
                break
            used = sig.name
            try:
                os.killpg(p.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                p.proc.send_signal(sig)
            try:
                p.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        records.append(ExitRecord(p.name, p.proc.poll(), time.monotonic() - start, used))
        log = getattr(p, '_log', None)
        if log is not None:
            log.close()
    return records


class CheckSession:
    """The deployed graph up on this host, with the recorders the items read."""

    def __init__(self, cfg: SessionConfig) -> None:
        self.cfg = cfg
        self.prefix = f'elchk{os.getpid()}_{int(time.time()) % 100000}_'
        self.env = dict(os.environ)
        self.env[PREFIX_ENV] = self.prefix
        self.env.setdefault('PYTHONUNBUFFERED', '1')
        if cfg.domain_id is not None:
            self.env['ROS_DOMAIN_ID'] = str(cfg.domain_id)
        self.domain_id = int(self.env.get('ROS_DOMAIN_ID', '0') or 0)
        extra = {k: dict(v) for k, v in cfg.extra.items()}
        # The copy audit is on (as in the demo and the replay regression): item 3.
        for stage in FRAME_STAGES:
            extra.setdefault(stage, {}).setdefault('copy_audit', True)
        if cfg.live:
            self.nodes = bringup.graph('driver', transport='shm', use_sim_time=False,
                                       extra=extra)
        else:
            extra.setdefault('bag_player', {}).update({
                'mode': 'timed', 'restamp': True, 'loop': True,
                'wait_topics': [topics.CAMERA_INFO], 'start_delay_s': 1.0})
            self.nodes = bringup.graph('bag', bag=str(cfg.bag), transport='shm', extra=extra)
        self.names = bringup.managed_node_names(self.nodes)
        self.graph = Graph(self.nodes, cfg.params_file, cfg.log_dir, env=self.env)
        self.harness: Any = None
        self._clients: dict[str, Any] = {}
        self.recorder: StampRecorder | None = None
        self.stops: list[tuple[int, int, str]] = []
        self.diagnostics: list[Any] = []
        self.shm_before = shm_entries(self.prefix)
        self.started_s = 0.0
        self._stopped = False

    @property
    def monitor_in_graph(self) -> bool:
        """The deadline monitor is one of the graph's nodes."""
        return 'deadline_monitor' in self.names

    # --- bring-up -------------------------------------------------------------------------
    def start(self) -> float:
        """Start every process and wait until the manager has them all active (seconds)."""
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile

        from edge_loop.testing import RosHarness

        t0 = time.monotonic()
        self.harness = RosHarness(self.domain_id, name=f'edge_loop_check_{os.getpid()}')
        self.recorder = StampRecorder(self.harness.context, [
            topics.CAMERA_INFO, topics.ARM_CMD, topics.GRASP_STATE, *FRAME_STAGES.values()])
        probe = self.harness.receive_probe(DiagnosticArray, topics.SAFE_STOP,
                                           QoSProfile(depth=1000))
        self._stop_probe = probe
        self.harness.subscribe(DiagnosticArray, topics.DIAGNOSTICS, self.diagnostics.append,
                               QoSProfile(depth=100))
        # The check's graph must be alone on its domain: a loop already running there would
        # answer the check's frames and lifecycle calls (same node names).
        time.sleep(1.0)   # discovery
        clash = sorted(set(self.names + ['lifecycle_manager'])
                       & set(self.harness.node.get_node_names()))
        if clash:
            raise RuntimeError(f'nodes already running on ROS_DOMAIN_ID {self.domain_id}: '
                               f'{", ".join(clash)}; stop them or use --domain-id')
        self.graph.start()
        self.graph.wait_active(self.cfg.startup_timeout_s)
        self.started_s = time.monotonic() - t0
        return self.started_s

    def safe_stops(self, since_ns: int = 0) -> list[tuple[int, int, str]]:
        """(stamp, receive ns, reason) of the safe stops received at or after ``since_ns``."""
        from edge_loop.nodes.safe_stop import from_message

        out = []
        for msg, received in list(self._stop_probe.samples):
            event = from_message(msg)
            if event is not None and received >= since_ns:
                out.append((event.stamp_ns, received, event.reason))
        return out

    def fault_detection_ms(self, since_ns: int) -> list[float]:
        """Deadline -> noticed (ms) of each deadline-miss stop received at or after ``since_ns``.

        From the stops' own ``deadline_ns`` / ``detected_ns``: the monitor's running window
        (``detect_delay_p99_ms``) holds every miss of the session, so a latency window the
        machine ran late in would be judged again as the injected fault's detection.
        """
        from edge_loop.nodes.safe_stop import from_message

        return fault_detection_ms([from_message(msg) for msg, received
                                   in list(self._stop_probe.samples) if received >= since_ns])

    def wait(self, predicate: Any, timeout: float, what: str) -> bool:
        """Poll ``predicate`` (False on timeout, never raises); dead processes end the wait."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.graph.dead():
                raise RuntimeError(f'node process(es) exited while waiting for {what}: '
                                   f'{self.graph.dead()}')
            time.sleep(0.02)
        return False

    # --- item 1: a latency window ---------------------------------------------------------
    def latency_window(self, warmup_commands: int, frames: int, timeout_s: float
                       ) -> tuple[dict[str, dict[int, int]], dict[int, int], list[int],
                                  list[float]]:
        """Wait for ``warmup_commands``, then record ``frames`` camera frames.

        Returns (arrivals per frame stage, first command per stamp, the window's camera
        stamps, grasp_state latencies in ms).
        """
        rec = self.recorder
        assert rec is not None
        if not self.wait(lambda: rec.count(topics.ARM_CMD) >= warmup_commands, timeout_s,
                         f'{warmup_commands} warm-up commands'):
            raise RuntimeError(f'only {rec.count(topics.ARM_CMD)} commands in {timeout_s:.0f}'
                               f' s of warm-up (the controller is not answering frames)')
        start_ns = time.time_ns()
        first = rec.count(topics.CAMERA_INFO)
        self.wait(lambda: rec.count(topics.CAMERA_INFO) >= first + frames, timeout_s,
                  f'{frames} camera frames')
        end_ns = time.time_ns()
        time.sleep(0.5)      # the last frames' outputs are still on their way
        return self.window(start_ns, end_ns)

    def window(self, start_ns: int, end_ns: int) -> tuple[dict[str, dict[int, int]],
                                                           dict[int, int], list[int],
                                                           list[float]]:
        """What was recorded for camera frames stamped in [start_ns, end_ns] (see above)."""
        rec = self.recorder
        assert rec is not None
        stamps = sorted(s for s in rec.first_arrivals(topics.CAMERA_INFO, start_ns)
                        if start_ns <= s <= end_ns)
        arrivals = {stage: rec.first_arrivals(topic, start_ns)
                    for stage, topic in FRAME_STAGES.items()
                    if any(n.name == stage for n in self.nodes)}
        commands = rec.first_arrivals(topics.ARM_CMD, start_ns)
        sampled = [(r - s) / 1e6 for s, r in list(rec.arrivals[topics.GRASP_STATE])
                   if start_ns <= s <= end_ns]
        return arrivals, commands, stamps, sampled

    # --- item 2: an injected fault --------------------------------------------------------
    def set_parameter(self, node: str, name: str, value: float, timeout: float = 5.0) -> str:
        """Set a double parameter on a running node; '' on success, else the reason."""
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        client = self.harness.node.create_client(SetParameters, f'/{node}/set_parameters')
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                return f'{node}/set_parameters not available'
            req = SetParameters.Request()
            req.parameters = [Parameter(name=name, value=ParameterValue(
                type=ParameterType.PARAMETER_DOUBLE, double_value=float(value)))]
            future = client.call_async(req)
            if not self.wait(future.done, timeout, f'{node}/set_parameters'):
                return f'{node}/set_parameters timed out'
            result = future.result().results[0]
            return '' if result.successful else (result.reason or 'refused')
        finally:
            self.harness.node.destroy_client(client)

    def get_parameters(self, node: str, names: list[str], timeout: float = 10.0,
                       attempts: int = 3) -> dict[str, Any] | None:
        """Values of the ``names`` declared on a running node; None when it never answered.

        A loaded host can leave one call unanswered for seconds: it is asked ``attempts``
        times. A name the node does not declare is simply absent (see
        :func:`declared_values`).
        """
        from rcl_interfaces.srv import GetParameters

        client = self.harness.node.create_client(GetParameters, f'/{node}/get_parameters')

        def ask(subset: list[str]) -> list[Any] | None:
            for _ in range(attempts):
                if not client.wait_for_service(timeout_sec=timeout):
                    continue
                future = client.call_async(GetParameters.Request(names=subset))
                if self.wait(future.done, timeout, f'{node}/get_parameters'):
                    return list(future.result().values)
            return None

        try:
            return declared_values(names, ask)
        finally:
            self.harness.node.destroy_client(client)

    def trigger(self, service: str, timeout: float) -> tuple[bool, str]:
        """Call a std_srvs/Trigger service; (success, message)."""
        from std_srvs.srv import Trigger

        client = self.harness.node.create_client(Trigger, service)
        try:
            if not client.wait_for_service(timeout_sec=min(timeout, 5.0)):
                return False, f'{service} not available'
            future = client.call_async(Trigger.Request())
            if not self.wait(future.done, timeout, service):
                return False, f'{service} timed out after {timeout:.0f} s'
            res = future.result()
            return bool(res.success), str(res.message)
        finally:
            self.harness.node.destroy_client(client)

    def node_state(self, name: str, want: str | None = None, settle_s: float = 3.0) -> str:
        """Lifecycle state of ``name`` ('unreachable' when it does not answer).

        With ``want``, asks again for up to ``settle_s`` while the answer differs (a reply
        can describe the state just before a transition the manager already confirmed).
        """
        from edge_loop.lifecycle_client import LifecycleError

        if name not in self._clients:
            self._clients[name] = self.harness.lifecycle(name)
        client = self._clients[name]
        deadline = time.monotonic() + settle_s
        while True:
            try:
                state = client.get_state(timeout=5.0)
            except LifecycleError:
                state = 'unreachable'
            if want is None or state == want or time.monotonic() > deadline:
                return state
            time.sleep(0.1)

    def monitor_loop_values(self) -> dict[str, str]:
        """The deadline monitor's newest loop status values ({} before the first)."""
        from edge_loop.testing import monitor_loop_status

        return monitor_loop_status(self.diagnostics)[1]

    def inject_delay(self, stage: str, delay_ms: float, misses: int,
                     recover_frames: int, timeout_s: float = 20.0) -> FaultRecord:
        """Slow ``stage`` by ``delay_ms`` a frame, wait for the safe state, clear, recover."""
        rec = FaultRecord(stage, delay_ms, self.monitor_in_graph)
        controller = 'pick_controller'
        if self.monitor_in_graph:   # a fault before the monitor enforces would not count
            self.wait(lambda: self.monitor_loop_values().get('enforcing') == 'yes', timeout_s,
                      'the monitor enforcing')
        rec.controller_before_fault = self.node_state(controller)
        if self.monitor_in_graph and rec.controller_before_fault != 'active':
            # Taken down earlier (misses in the latency window): the safe state can only be
            # shown from an active controller, so the documented recovery comes first.
            before = rec.controller_before_fault
            ok, msg = self.reactivate(time.monotonic() + timeout_s)
            rec.controller_before_fault = self.node_state(controller, 'active')
            rec.prepared = f'pick_controller was {before} before the fault; ~/reactivate: {msg}'
            if rec.controller_before_fault != 'active':
                rec.note = (f'pick_controller was {before} before the fault and the recovery '
                            f'did not bring it back ({msg})')
                return rec
            self.wait(lambda: self.monitor_loop_values().get('enforcing') == 'yes', timeout_s,
                      'the monitor enforcing')
        rec.injected_ns = time.time_ns()
        # The slowed stage sleeps in its executor: a parameter call waits for one frame.
        call_timeout = 5.0 + 2.0 * delay_ms / 1000.0
        why = self.set_parameter(stage, 'debug_delay_ms', delay_ms, call_timeout)
        if why:
            rec.note = f'could not slow {stage}: {why}'
            return rec

        def missed() -> list:
            return [s for s in self.safe_stops(rec.injected_ns) if s[2] == 'deadline_miss']
        self.wait(lambda: len(missed()) >= misses and self.node_state(controller) != 'active',
                  timeout_s, 'the safe state')
        time.sleep(0.3)     # stops still in flight
        rec.stops = self.safe_stops(rec.injected_ns)
        rec.controller_after_fault = self.node_state(controller)
        rec.fault_window = (rec.injected_ns, time.time_ns())   # frames stamped after it
        own = self.fault_detection_ms(rec.injected_ns)
        if own:     # none: judge_monitor fails the item for want of a deadline_miss stop
            rec.monitor_detect_p99_ms = percentiles(own, [99])[0]
            rec.monitor_detect_max_ms = max(own)
        why = self.set_parameter(stage, 'debug_delay_ms', 0.0, call_timeout)
        rec.cleared_ns = time.time_ns()
        if why:
            rec.note = f'could not clear the delay of {stage}: {why}'
            return rec
        if not self.monitor_in_graph:
            return rec
        # The documented recovery: the loop healthy again, then the monitor's ~/reactivate.
        # The frame being slowed when the delay was cleared still takes delay_ms: the window
        # grows with it (a calibrated budget on a slow machine scales the delay).
        rec.reactivated, rec.reactivate_message = self.reactivate(
            time.monotonic() + timeout_s + 2.0 * delay_ms / 1000.0)
        rec.recovered_ns = time.time_ns()
        cam = self.recorder.count(topics.CAMERA_INFO)
        self.wait(lambda: self.recorder.count(topics.CAMERA_INFO) >= cam + recover_frames,
                  timeout_s, 'frames after recovery')
        time.sleep(0.3)
        end = time.time_ns()
        # Commands answering frames after the controller came back (stops are commands too).
        stop_stamps = {s for s, _, _ in self.safe_stops(rec.recovered_ns)}
        cmds = self.recorder.first_arrivals(topics.ARM_CMD, rec.recovered_ns)
        frames = [s for s in self.recorder.first_arrivals(topics.CAMERA_INFO, rec.recovered_ns)
                  if s <= end]
        rec.frames_after_recovery = len(frames)
        rec.commands_after_recovery = sum(1 for s in frames if s in cmds and
                                          s not in stop_stamps)
        rec.stops_after_recovery = sum(1 for _, _, why in self.safe_stops(rec.recovered_ns)
                                       if why == 'deadline_miss')
        rec.controller_after_recovery = self.node_state(controller, 'active')
        return rec

    def reactivate(self, deadline: float) -> tuple[bool, str]:
        """Call the monitor's ``~/reactivate`` until it accepts or ``deadline`` (monotonic)."""
        ok, msg = False, 'not called'
        while time.monotonic() < deadline:
            ok, msg = self.trigger('/deadline_monitor/reactivate', 10.0)
            if ok:
                break
            time.sleep(0.25)
        return ok, msg

    def set_monitor_active(self, active: bool) -> str:
        """Deactivate or activate the deadline monitor behind the manager's back (tests)."""
        from edge_loop.lifecycle_client import LifecycleError

        client = self.harness.lifecycle('deadline_monitor')
        try:
            client.transition('activate' if active else 'deactivate', 10.0)
            return ''
        except LifecycleError as exc:
            return str(exc)
        finally:
            client.destroy()

    # --- item 3 ---------------------------------------------------------------------------
    def copies_per_frame(self) -> dict[str, tuple[float, int]]:
        """{stage: (copies per frame, audited frames)} from the stages' newest diagnostics."""
        out: dict[str, tuple[float, int]] = {}
        for msg in list(self.diagnostics):
            for status in msg.status:
                stage = status.name.removesuffix(': input')
                values = {kv.key: kv.value for kv in status.values}
                if stage in FRAME_STAGES and 'copies_per_frame' in values:
                    out[stage] = (float(values['copies_per_frame']),
                                  int(values.get('audited_frames', 0)))
        return out

    # --- item 7 ---------------------------------------------------------------------------
    def lifecycle_cycles(self, cycles: int, timeout_s: float = 90.0) -> list[StepRecord]:
        """``reset`` + ``startup`` through the manager ``cycles`` times, then ``shutdown``.

        Each step's resulting state of every node is read back from the node itself.
        """
        steps: list[StepRecord] = []
        plan = [('reset', 'unconfigured'), ('startup', 'active')] * cycles
        plan.append(('shutdown', 'finalized'))
        for step, want in plan:
            t = time.monotonic()
            ok, message = self.trigger(f'/lifecycle_manager/{step}', timeout_s)
            seconds = time.monotonic() - t
            states = {n: self.node_state(n, want) for n in self.names}
            ok = ok and all(s == want for s in states.values())
            steps.append(StepRecord(step, ok, seconds, message, states))
            if not ok:
                break
        return steps

    def stop(self) -> list[ExitRecord]:
        """Stop every process (the manager first) and close this process's ROS side."""
        if self._stopped:
            return []
        self._stopped = True
        procs = list(self.graph.procs)
        records = stop_processes(procs[-1:] + procs[:-1][::-1], self.cfg.exit_timeout_s)
        self.close()
        return records

    def close(self) -> None:
        """Close the recorders and the harness (idempotent); processes are stop()'s job."""
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        for client in self._clients.values():
            client.destroy()
        self._clients = {}
        if self.harness is not None:
            self.harness.close()
            self.harness = None

    def kill_all(self) -> None:
        """After an error: stop whatever still runs (Graph.stop escalates by itself)."""
        if not self._stopped:
            self._stopped = True
            self.graph.stop()
        self.close()

    def process_pids(self) -> dict[str, int]:
        """{node name: pid} of the running node processes."""
        return {p.name: p.pid for p in self.graph.procs if p.alive()}

    def node_log(self, name: str) -> str:
        """What node ``name`` has logged so far ('' when there is no such process)."""
        for p in self.graph.procs:
            if p.name == name:
                return p.log_path.read_text(errors='replace') if p.log_path.exists() else ''
        return ''
