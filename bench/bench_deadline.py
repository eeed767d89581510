# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Deadline monitor benchmark: detection delay, reaction, CPU, fault accounting.

The monitor runs as its own process (``edge_loop.nodes.deadline_monitor``, default 15 Hz /
66 ms budget, six watched stages); this process is the fake camera, six fake stages, the fake
controller and a 200 Hz fake gripper (test/ros/dummy_stage.py's FakeLoop), and the
subscriber that receives the safe stops. Phases:

1. nominal frames only: the monitor's CPU (utime + stime of all its threads from /proc) and
   the number of safe stops (every one a false positive);
2. injected faults, separated by nominal frames: late commands (after the deadline), missing
   commands, bursts of 5 late frames, camera stalls (7 silent periods). Every late or missing
   frame must get exactly one ``deadline_miss`` stop with its stamp (else a false negative),
   every stall at least one ``camera_stall`` stop, and no nominal frame any stop.

Detection delay (deadline -> miss noticed) and reaction (noticed -> safe stop published) come
from the monitor's own /diagnostics; "received" is deadline -> stop in this process's callback.
False negatives / positives are judged by when each command really went out.

Before those phases (``--cpu-rounds``), the monitor's CPU side by side: a fresh monitor
process per round and configuration, alternating, with the gripper topics sampled by the
content filter (the default) and with every sample taken (``gripper_sample_every_ms: 0``),
plus any ``--cpu-variant``.

Then the lifecycle manager: a managed dummy node process is SIGKILLed ``--manager-kills``
times; the time from the kill to the manager's "failure detected" log line, and whether the
controller was deactivated each time.

    python bench/bench_deadline.py                 # CPU rounds, >= 200 faults, 10 kills (~5 min)
    python bench/bench_deadline.py --faults 40 --nominal-s 5 --manager-kills 3
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from measure import cpu_of, cpu_seconds, stat_fields

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'test' / 'ros'))

from dummy_stage import FakeLoop, FramePlan, start_dummy  # noqa: E402

from edge_loop.stats import percentiles  # noqa: E402
from edge_loop.testing import (  # noqa: E402
    domain_env,
    monitor_loop_status,
    next_domain_id,
    ros_harness,
    start_node,
)

STAGES = (  # six watched stages: (name, topic, type)
    ('object_locator', '/edge_loop/objects', 'geometry_msgs/msg/PoseArray'),
    ('object', '/edge_loop/object', 'geometry_msgs/msg/PoseStamped'),
    ('grasp_planner', '/edge_loop/grasp', 'geometry_msgs/msg/PolygonStamped'),
    ('occupancy_mapper', '/edge_loop/occupancy', 'nav_msgs/msg/OccupancyGrid'),
    ('grasp_state', '/edge_loop/grasp_state', 'diagnostic_msgs/msg/DiagnosticArray'),
    ('pick_controller', '/edge_loop/cmd/arm', 'geometry_msgs/msg/TwistStamped'),
)
BUDGETS_MS = [30.0, 30.0, 30.0, 30.0, 10.0, 10.0]


_POLICY = {0: 'other', 1: 'fifo', 2: 'rr', 3: 'batch', 5: 'idle'}


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds and name (with scheduling policy) of every thread of a process, by tid."""
    out = {}
    for task in Path(f'/proc/{pid}/task').iterdir():
        try:
            comm = (task / 'comm').read_text().strip()
            fields = stat_fields(task / 'stat')
        except OSError:
            continue   # the thread ended
        policy = _POLICY.get(int(fields[38]), fields[38])
        label = f'{comm} ({policy}{" " + fields[37] if policy == "fifo" else ""})'
        out[int(task.name)] = (label, cpu_of(fields))
    return out


def thread_table(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                 wall_s: float, top: int = 6) -> list[str]:
    """The threads that used the most CPU between two :func:`thread_cpu` snapshots."""
    rows = sorted(((after[t][1] - before.get(t, ('', 0.0))[1], after[t][0], t) for t in after),
                  reverse=True)
    return [f'    thread {tid:<8} {name:<28} {100.0 * cpu / wall_s:6.2f} %'
            for cpu, name, tid in rows[:top] if cpu > 0]


def loop_values(diags: list) -> dict[str, str]:
    """The monitor's newest loop status as {key: value} ({} before the first)."""
    return monitor_loop_status(diags)[1]


def pct(values: list[float], q: float) -> float:
    return percentiles(values, (q,))[0]


def fault_cycle(budget_s: float) -> list[tuple[str, FramePlan | None, int]]:
    """(kind, plan, frames) units of one cycle; None plan = nominal frames."""
    late = FramePlan(command_delay_s=budget_s + 0.015)
    return [('late', late, 1), ('nominal', None, 2),
            ('missing', FramePlan(None), 1), ('nominal', None, 2),
            ('burst', late, 5), ('nominal', None, 2),
            ('missing', FramePlan(None), 1), ('nominal', None, 2),
            ('stall', FramePlan(camera=False), 7), ('nominal', None, 3)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--faults', type=int, default=200, help='minimum injected faults')
    parser.add_argument('--nominal-s', type=float, default=20.0, help='nominal phase (s)')
    parser.add_argument('--rate', type=float, default=15.0)
    parser.add_argument('--budget-ms', type=float, default=66.0)
    parser.add_argument('--manager-kills', type=int, default=10,
                        help='lifecycle manager: node processes killed (0: skip)')
    parser.add_argument('--joint-rate', type=float, default=200.0,
                        help='fake gripper joint_states rate (0: none, and no grasp_state)')
    parser.add_argument('--grasp-state-every', type=int, default=1,
                        help='joint-state samples per fake grasp_state (1: at the input rate, '
                             'as the grasp_state node publishes)')
    parser.add_argument('--cpu-rounds', type=int, default=2,
                        help='side-by-side CPU rounds: the monitor taking the gripper topics '
                             'sampled (content filter) vs every sample, alternately (0: skip)')
    parser.add_argument('--cpu-s', type=float, default=15.0, help='seconds per CPU round')
    parser.add_argument('--cpu-variant', action='append', default=[], metavar='NAME=K:V,...',
                        help='another monitor configuration in the CPU rounds, e.g. '
                             "'every100=gripper_sample_every_ms:100,gripper_stall_min_ms:210'")
    args = parser.parse_args()
    budget_s = args.budget_ms / 1000.0

    domain = next_domain_id()
    log_dir = Path(tempfile.mkdtemp(prefix='bench_deadline_'))
    env = domain_env(domain, log_dir / 'ros_log')
    params = {'control_rate_hz': args.rate, 'end_to_end_budget_ms': args.budget_ms,
              'stage_names': [s[0] for s in STAGES], 'stage_topics': [s[1] for s in STAGES],
              'stage_types': [s[2] for s in STAGES], 'stage_budgets_ms': BUDGETS_MS,
              'misses_to_deactivate': 1_000_000, 'startup_grace_s': 5.0,
              'diagnostics_period_s': 1.0}
    if args.cpu_rounds > 0:
        with ros_harness(domain, 'bench_deadline_cpu') as h:
            cpu_side_by_side(h, env, log_dir / 'cpu', params, args)
        domain = next_domain_id()
        env = domain_env(domain, log_dir / 'ros_log')
    monitor = start_node('deadline_monitor', env, log_dir, params=params)
    try:
        with ros_harness(domain, 'bench_deadline') as h:
            result = run(h, monitor, args, budget_s)
    finally:
        monitor.stop()
        print(f'monitor log: {monitor.log_path}')
    if args.manager_kills > 0:
        domain = next_domain_id()
        env = domain_env(domain, log_dir / 'ros_log')
        with ros_harness(domain, 'bench_manager') as h:
            result |= bench_manager(h, env, log_dir / 'manager', args.manager_kills)
    return result


def _configure_active(h) -> None:
    client = h.lifecycle('deadline_monitor')
    client.wait_for_state('unconfigured', 30.0)
    client.transition('configure', 30.0)
    client.transition('activate', 10.0)


def _fake_loop(h, args) -> FakeLoop:
    fake_stages = tuple((n, topic, typ.replace('/msg/', '.msg.'))
                        for n, topic, typ in STAGES if n not in ('grasp_state',
                                                                 'pick_controller'))
    return FakeLoop(h.node, rate_hz=args.rate, joint_rate_hz=args.joint_rate,
                    stages=fake_stages, grasp_state_every=args.grasp_state_every)


def _gripper_topics(args) -> str:
    if args.joint_rate <= 0:
        return 'no joint states / grasp_state'
    return (f'{args.joint_rate:g} Hz joint states, '
            f'{args.joint_rate / args.grasp_state_every:g} Hz grasp_state')


def cpu_side_by_side(h, env: dict[str, str], log_dir: Path, params: dict, args) -> None:
    """Monitor CPU with the gripper topics sampled by a content filter vs every sample.

    One fake loop runs throughout; a fresh monitor process per round and variant, in
    alternating order (ABBA...), measured over ``--cpu-s`` after a 3 s warm-up.
    """
    variants = {'sampled (default)': {}, 'every sample': {'gripper_sample_every_ms': 0.0}}
    for spec in args.cpu_variant:
        name, _, pairs = spec.partition('=')
        variants[name] = {k: float(v) for k, v in (kv.split(':') for kv in pairs.split(','))}
    from diagnostic_msgs.msg import DiagnosticArray

    # Subscribed as in the main run (and on a robot, where an aggregator takes /diagnostics).
    h.node.create_subscription(DiagnosticArray, '/diagnostics', lambda _: None, 10)
    h.node.create_subscription(DiagnosticArray, '/edge_loop/safe_stop', lambda _: None, 100)
    fake = _fake_loop(h, args)
    fake.start()
    results: dict[str, list[float]] = {name: [] for name in variants}
    threads: dict[str, list[str]] = {}
    sampling: dict[str, str] = {}
    try:
        for r in range(args.cpu_rounds):
            order = list(variants) if r % 2 == 0 else list(variants)[::-1]   # ABBA
            for name in order:
                monitor = start_node('deadline_monitor', env, log_dir,
                                     params={**params, **variants[name]})
                try:
                    _configure_active(h)
                    time.sleep(3.0)
                    cpu0, wall0 = cpu_seconds(monitor.pid), time.monotonic()
                    t0 = thread_cpu(monitor.pid)
                    time.sleep(args.cpu_s)
                    cpu1, wall1 = cpu_seconds(monitor.pid), time.monotonic()
                    results[name].append(100.0 * (cpu1 - cpu0) / (wall1 - wall0))
                    threads[name] = thread_table(t0, thread_cpu(monitor.pid), wall1 - wall0,
                                                 top=3)
                    sampling[name] = _grep_sampling(monitor.log_path)
                finally:
                    monitor.stop()
    finally:
        fake.stop()
    print(f'\nmonitor CPU, side by side ({args.cpu_rounds} rounds x {args.cpu_s:g} s, '
          f'alternating), {args.rate:g} Hz, 6 stages, {_gripper_topics(args)}:')
    print(f'{"gripper topics taken":<22}{"mean %":>8}{"min %":>8}{"max %":>8}  rounds')
    for name, values in results.items():
        print(f'{name[:22]:<22}{np.mean(values):8.2f}{min(values):8.2f}{max(values):8.2f}  '
              + ' '.join(f'{v:.2f}' for v in values))
    for name in variants:
        print(f'  {name}: {sampling.get(name, "?")}; last round\'s busiest threads:')
        print('\n'.join(threads.get(name, [])))


def _grep_sampling(log_path: Path) -> str:
    """The monitor's last word on how it takes the gripper topics (its log)."""
    try:
        lines = [ln for ln in Path(log_path).read_text().splitlines()
                 if 'gripper topics taken' in ln or 'taking every sample' in ln]
    except OSError:
        return 'log unreadable'
    return lines[-1].split(']: ')[-1].strip() if lines else 'not logged'


def run(h, monitor, args, budget_s: float) -> int:
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import Header

    stops: list[tuple[int, Header]] = []
    lock = threading.Lock()

    from edge_loop.nodes import safe_stop

    def on_stop(msg: DiagnosticArray) -> None:
        # kept as (stamp, reason) in a Header, as the channel carried them before
        event = safe_stop.from_message(msg)
        with lock:
            stops.append((time.time_ns(), Header(stamp=msg.header.stamp,
                                                 frame_id=event.reason if event else '')))

    h.node.create_subscription(DiagnosticArray, '/edge_loop/safe_stop', on_stop, 100)
    diags: list[DiagnosticArray] = []
    h.node.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 10)
    _configure_active(h)
    fake = _fake_loop(h, args)
    for pub in fake.publishers():
        h.wait_until(lambda p=pub: p.get_subscription_count() >= 1, 30.0, pub.topic_name)
    h.wait_for_publishers('/edge_loop/safe_stop', 1, 30.0)

    # --- phase 0: idle (active, no input) ---------------------------------------------------
    cpu0, wall0 = cpu_seconds(monitor.pid), time.monotonic()
    time.sleep(3.0)
    idle_pct = 100.0 * (cpu_seconds(monitor.pid) - cpu0) / (time.monotonic() - wall0)

    # --- phase 1: nominal ------------------------------------------------------------------
    fake.start()
    h.wait_until(lambda: fake.frame_index > 2 * args.rate, 30.0, 'warm-up frames')
    with lock:
        stops.clear()
    first_nominal = fake.frame_index
    cpu0, wall0 = cpu_seconds(monitor.pid), time.monotonic()
    threads0 = thread_cpu(monitor.pid)
    wakes0 = loop_values(diags).get('deadline_thread_wakeups')
    time.sleep(args.nominal_s)
    cpu1, wall1 = cpu_seconds(monitor.pid), time.monotonic()
    threads1 = thread_cpu(monitor.pid)
    nominal_frames = fake.frame_index - first_nominal
    seen = len(diags)
    h.wait_until(lambda: loop_values(diags[seen:]), 5.0, "the monitor's next diagnostics")
    wakes1 = loop_values(diags).get('deadline_thread_wakeups')
    with lock:
        nominal_stops = list(stops)
    cpu_pct = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)

    # --- phase 2: faults -------------------------------------------------------------------
    cycle = fault_cycle(budget_s)
    per_cycle = sum(n for kind, _, n in cycle if kind in ('late', 'missing', 'burst')) + 1
    cycles = -(-args.faults // per_cycle)
    schedule: dict[int, tuple[str, FramePlan]] = {}
    start = fake.frame_index + 5
    i = start
    for _ in range(cycles):
        for kind, plan, frames in cycle:
            for k in range(frames):
                if plan is not None:
                    schedule[i] = (kind if kind != 'stall' else f'stall{k}', plan)
                i += 1
    end = i
    fake.plan = lambda n: schedule.get(n, ('nominal', FramePlan()))
    h.wait_until(lambda: fake.frame_index > end + 5, 30.0 + (end - start) / args.rate * 2,
                 'fault phase')
    time.sleep(1.5)   # last diagnostics of the fault phase
    with lock:
        all_stops = list(stops)
    diags_end = len(diags)
    fake.stop()

    # --- accounting ------------------------------------------------------------------------
    sent = fake.sent
    by_stamp = {f.stamp_ns: f for f in sent if f.stamp_ns >= 0}
    fault_frames = {f.stamp_ns for f in sent[start:end]
                    if f.kind in ('late', 'missing', 'burst')}
    nominal_stamps = {f.stamp_ns for f in sent[first_nominal:end]
                      if f.kind == 'nominal' and f.stamp_ns >= 0}
    miss_stops = [(t, m) for t, m in all_stops if m.frame_id == 'deadline_miss']
    stop_stamps = [m.stamp.sec * 10**9 + m.stamp.nanosec for _, m in miss_stops]
    counts: dict[int, int] = {}
    for s in stop_stamps:
        counts[s] = counts.get(s, 0) + 1
    # The oracle is when each command really went out: on a loaded machine the fake loop
    # itself is sometimes late, and then a stop is the right answer for a "nominal" frame.
    budget_ns = int(budget_s * 1e9)
    judged = [f for f in sent[first_nominal:end] if f.stamp_ns >= 0]
    really = {f.stamp_ns for f in judged if f.missed(budget_ns)}
    either = {f.stamp_ns for f in judged if f.missed(budget_ns) is None}
    on_time = {f.stamp_ns for f in judged} - really - either
    starved = sum(1 for f in judged if f.kind == 'nominal' and f.stamp_ns in really)
    fault_fn = sum(1 for s in fault_frames if counts.get(s, 0) == 0)
    false_neg = sum(1 for s in really if counts.get(s, 0) == 0)
    doubles = sum(1 for c in counts.values() if c > 1)
    false_pos = sum(1 for s in stop_stamps if s in on_time)
    nominal_fp = sum(1 for _, m in nominal_stops
                     if m.stamp.sec * 10**9 + m.stamp.nanosec in on_time)
    unknown = sum(1 for s in stop_stamps if s not in by_stamp)
    del nominal_stamps
    # camera stalls: each silent window must contain a camera_stall stop
    stall_windows = []
    for idx in range(start, end):
        if sent[idx].kind == 'stall0':
            prev = sent[idx - 1].stamp_ns
            nxt = next(f.stamp_ns for f in sent[idx:] if f.stamp_ns >= 0)
            stall_windows.append((prev, nxt))
    stall_stops = [m.stamp.sec * 10**9 + m.stamp.nanosec for _, m in all_stops
                   if m.frame_id == 'camera_stall']
    stall_fn = sum(1 for a, b in stall_windows if not any(a < s <= b + 10**8
                                                          for s in stall_stops))
    other = [m.frame_id for _, m in all_stops
             if m.frame_id not in ('deadline_miss', 'camera_stall')]
    received_ms = [(t - (s + int(budget_s * 1e9))) / 1e6
                   for (t, _), s in zip(miss_stops, stop_stamps) if s in fault_frames]

    diags = diags[:diags_end]
    loop = loop_values(diags)
    stage_rows = []
    for msg in reversed(diags):
        for st in msg.status:
            if not st.name.endswith(': loop'):
                v = {kv.key: kv.value for kv in st.values}
                stage_rows.append((st.name.split(': ')[-1], v))
        if stage_rows:
            break

    injected = len(fault_frames) + len(stall_windows)
    print()
    print(f'deadline monitor, {args.rate:g} Hz, budget {args.budget_ms:g} ms, '
          f'{len(STAGES)} stages, real-time scheduling: {loop.get("rt_scheduling", "?")}')
    print(f'{"metric":<52}{"p50":>9}{"p99":>9}{"max":>9}  target')
    rows = [
        ('miss detection delay after the deadline (ms)', loop.get('detect_delay_p50_ms'),
         loop.get('detect_delay_p99_ms'), loop.get('detect_delay_max_ms'), 'p99 <= 2'),
        ('  of which: thread woken after the due time (ms)', loop.get('wake_delay_p50_ms'),
         loop.get('wake_delay_p99_ms'), '', ''),
        ('safe-stop publish after detection (ms)', loop.get('reaction_p50_ms'),
         loop.get('reaction_p99_ms'), '', 'p99 <= 5'),
        ('deadline -> stop received in another process (ms)', f'{pct(received_ms, 50):.2f}',
         f'{pct(received_ms, 99):.2f}', f'{max(received_ms, default=float("nan")):.2f}',
         'p99 < period'),
    ]
    for name, p50, p99, mx, target in rows:
        print(f'{name:<52}{p50 or "":>9}{p99 or "":>9}{mx or "":>9}  {target}')
    print()
    print(f'monitor CPU at {args.rate:g} Hz, 6 stages, {_gripper_topics(args)}: '
          f'{cpu_pct:.2f} % of a core over {wall1 - wall0:.0f} s (target <= 2 %); idle '
          f'(active, no input) {idle_pct:.2f} %')
    print('\n'.join(thread_table(threads0, threads1, wall1 - wall0)))
    if wakes0 is not None and wakes1 is not None:
        print(f'deadline thread wake-ups per nominal frame: '
              f'{(int(wakes1) - int(wakes0)) / max(nominal_frames, 1):.2f}')
    print(f'nominal phase: {nominal_frames} frames, {len(nominal_stops)} safe stops, '
          f'{nominal_fp} of them on frames whose command was on time (false positives)')
    print(f'fault phase: {injected} injected faults ({len(fault_frames)} late/missing frames, '
          f'{len(stall_windows)} camera stalls): missed {fault_fn + stall_fn}')
    print(f'all {len(judged)} frames judged by when the command really went out: '
          f'{len(really)} late/missing ({starved} of them planned nominal: the fake loop '
          f'itself was starved), {len(either)} within 2 ms of the deadline (not judged); '
          f'false negatives {false_neg}, false positives {false_pos}, double stops {doubles}, '
          f'stops for unknown stamps {unknown}, other stops {other or "none"}')
    print(f'end-to-end (nominal, fake stages): p50 {loop.get("e2e_p50_ms")} ms, '
          f'p99 {loop.get("e2e_p99_ms")} ms; frames {loop.get("frames")}, '
          f'misses {loop.get("misses")}, late commands {loop.get("late_commands")}')
    for name, v in stage_rows[::-1]:
        print(f'  stage {name:<18} p50 {v.get("latency_p50_ms"):>7} ms  p99 '
              f'{v.get("latency_p99_ms"):>7} ms  budget {v.get("budget_ms")} ms')
    ok = (false_neg + fault_fn + stall_fn == 0 and false_pos == 0 and doubles == 0
          and injected >= args.faults)
    print('RESULT:', 'PASS' if ok else 'FAIL', '(faults and false positives; timings above)')
    return 0 if ok else 1


def bench_manager(h, env: dict[str, str], log_dir: Path, kills: int) -> int:
    """Kill a managed node process ``kills`` times; time until the manager notices."""
    import re
    import signal

    from std_srvs.srv import Trigger

    names = ['victim_stage', 'pick_controller']
    dummies = {n: start_dummy(n, env, log_dir) for n in names}
    manager = start_node('lifecycle_manager', env, log_dir,
                         params={'node_names': names, 'transition_timeout_s': 5.0})
    pattern = re.compile(r"\[ERROR\] \[(\d+\.\d+)\] \[lifecycle_manager\]: failure detected: "
                         r"node 'victim_stage'")

    def call(service: str) -> Trigger.Response:
        client = h.node.create_client(Trigger, f'/lifecycle_manager/{service}')
        assert client.wait_for_service(30.0)
        done = threading.Event()
        future = client.call_async(Trigger.Request())
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(60.0), service
        return future.result()

    delays, controller_off = [], 0
    try:
        for _ in range(kills):
            for n in names:
                h.lifecycle(n).wait_for_state('unconfigured', 30.0)
            answer = call('startup')
            if not answer.success:
                print('startup failed:', answer.message)
                return 1
            time.sleep(0.5)
            seen = len(pattern.findall(manager.output()))
            killed_at = time.time()
            dummies['victim_stage'].signal(signal.SIGKILL)
            h.wait_until(lambda n=seen: len(pattern.findall(manager.output())) > n, 10.0,
                         'failure detected')
            delays.append(float(pattern.findall(manager.output())[-1]) - killed_at)
            controller = h.lifecycle('pick_controller')
            with contextlib.suppress(Exception):
                controller.wait_for_state('inactive', 5.0)
                controller_off += 1
            dummies['victim_stage'].stop()
            dummies['victim_stage'] = start_dummy('victim_stage', env, log_dir)
            call('reset')
    finally:
        manager.stop()
        for proc in dummies.values():
            proc.stop()
    ms = [d * 1000 for d in delays]
    print()
    print(f'lifecycle manager: {len(ms)} node processes killed (SIGKILL), heartbeat 0.1 s, '
          'timeout 0.35 s')
    print(f'{"metric":<52}{"p50":>9}{"p99":>9}{"max":>9}  target')
    print(f'{"kill -> failure detected (ms)":<52}{pct(ms, 50):>9.0f}{pct(ms, 99):>9.0f}'
          f'{max(ms):>9.0f}  <= 500')
    print(f'controller deactivated after the failure: {controller_off}/{len(ms)}')
    return 0 if ms and max(ms) <= 500 and controller_off == len(ms) else 1


if __name__ == '__main__':
    sys.exit(main())
