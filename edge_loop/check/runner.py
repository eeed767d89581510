# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop check``: the one-page deployment checklist, measured on this host.

Brings the deployed graph up once (edge-loop up's description under the lifecycle manager),
measures the items in turn on it (latency window, copy audit, settings, one injected fault,
the lifecycle cycles and the stop), checks the verification pins, the memory budget and the
placement, and writes the page. Exit code 0 only when every required item passed; 1 when
one did not; 2 when the check could not start.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from edge_loop import bringup, stages, topics
from edge_loop.check import (
    copies,
    environment,
    host,
    latency,
    lifecycle,
    monitor,
    resources,
    verification,
    workspace,
)
from edge_loop.check.items import ItemResult, Status, not_run, page_passes
from edge_loop.check.pacing import Pacing, monitor_node_defaults
from edge_loop.check.page import PageHeader, text_table, write_page
from edge_loop.check.session import (
    FRAME_STAGES,
    CheckSession,
    SessionConfig,
    remove_global_file,
    shm_entries,
)
from edge_loop.paths import SOURCE_ROOT, config_path, data_dir

FAULT_STAGE = 'grasp_planner'


@dataclass(frozen=True)
class Mode:
    """How long each live phase runs."""

    warmup_commands: int
    frames: int
    recover_frames: int
    cycles: int = 2


QUICK = Mode(warmup_commands=30, frames=150, recover_frames=30)
FULL = Mode(warmup_commands=45, frames=900, recover_frames=90)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop check``."""
    parser.add_argument('--bag', type=Path, default=None,
                        help='scenario bag replayed in real time (default: the regression '
                        "test's real-time scenario in data/scenarios)")
    parser.add_argument('--live', action='store_true',
                        help='read the live camera (frame_ingest) instead of a bag')
    parser.add_argument('--params-file', type=Path, default=None,
                        help='ROS params file of the deployment (default: config/pick.yaml)')
    parser.add_argument('--device', default=None,
                        help='device of the stages that take one (cpu, cuda, cuda:N, auto)')
    parser.add_argument('--out', type=Path, default=Path('reports/check'),
                        help='folder for check.md, check.html and the plots')
    parser.add_argument('--quick', action='store_true',
                        help='150 frames of latency (under a minute); default 900 frames')
    parser.add_argument('--windows', type=int, default=1, metavar='N',
                        help='measure item 1 in up to N windows, stopping at the first within '
                        'every budget (the page shows every window; default 1)')
    parser.add_argument('--calibrate', action='store_true',
                        help='not the target: replay at 1/slowdown of the rate and scale the '
                        'latency budgets by how much slower this machine runs the deployed '
                        'locator (the page says so)')
    parser.add_argument('--domain-id', default=None,
                        help="ROS_DOMAIN_ID of the check graph (default: the environment's); "
                        "'auto' claims one no other edge_loop test or check holds (CI)")
    parser.add_argument('--memory-config', type=Path, default=None,
                        help='memory budget (default: config/memory.yaml where it exists)')
    parser.add_argument('--require', default='',
                        help='items required even when this deployment does not need them, '
                        'e.g. 5,6')
    parser.add_argument('--set', action='append', default=[], metavar='NODE.PARAM=VALUE',
                        help='override a parameter of the checked graph (YAML value)')


@dataclass
class CheckOptions:
    """Everything a check run needs (the CLI's arguments, or a test's)."""

    params_file: Path
    out: Path
    bag: Path | None = None
    live: bool = False
    device: str | None = None
    quick: bool = True
    calibrate: bool = False
    latency_windows: int = 1               # item 1: up to N windows, the first passing one
    domain_id: int | str | None = None    # 'auto': claimed by run()
    memory_config: Path | None = None
    require: frozenset[int] = frozenset()
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    log_dir: Path | None = None


@dataclass
class CheckOutcome:
    """The page's items plus what tests may judge again."""

    items: list[ItemResult]
    header: PageHeader
    files: dict[str, Path] = field(default_factory=dict)
    fault_samples: latency.LatencySamples | None = None
    budgets: latency.Budgets | None = None
    scale: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Every required item passed."""
        return page_passes(self.items)

    def item(self, number: int) -> ItemResult:
        """The result of item ``number``."""
        return next(i for i in self.items if i.number == number)


# A hook the tests use between the fault and the lifecycle phases (same bring-up).
Hook = Callable[[CheckSession, 'CheckOutcome'], None]


def _monitor_params(params_file: Path) -> dict[str, Any]:
    return stages.monitor_parameters([params_file])   # the stage table, then the file


def run_check(opts: CheckOptions, hook: Hook | None = None,
              say: Callable[[str], None] = print) -> CheckOutcome:
    """Measure every item and write the page; never raises for a failing item."""
    regression = yaml.safe_load(config_path('regression.yaml').read_text())
    gates = regression['gates']
    mode = QUICK if opts.quick else FULL
    monitor_params = _monitor_params(opts.params_file)
    budgets = latency.Budgets.from_monitor_params(monitor_params)
    bag = None if opts.live else (opts.bag or data_dir() / 'scenarios'
                                  / regression['realtime_scenario'])
    header = PageHeader(host=socket.gethostname(),
                        when=datetime.datetime.now(datetime.UTC).strftime(
                            '%Y-%m-%d %H:%M UTC'),
                        mode='quick' if opts.quick else 'full',
                        source='live camera' if opts.live else str(bag),
                        revision=environment.git_revision(SOURCE_ROOT) or '?')
    out = CheckOutcome(items=[], header=header, budgets=budgets)
    load_before = host.host_load()      # the neighbours' load alone (no graph yet)
    shared = (f'SHARED HOST ({load_before.text()} before the check started): '
              if host.is_shared(load_before) else '')
    items: dict[int, ItemResult] = {}
    versions = environment.collect_versions(SOURCE_ROOT)
    items[9] = environment.judge_versions(versions)

    scale, slowdown, judge_latency, stop_floor = 1.0, 1.0, True, 0.0
    paced: Pacing | None = None
    if opts.calibrate:
        # A replay is paced to this machine (edge_loop.check.pacing): at 1 / slowdown of its
        # rate the loop takes the budget machine's share of the CPU and its latencies scale
        # by slowdown. A live camera cannot be paced: its budgets scale by
        # slowdown ** exponent, as the replay regression test's (config/regression.yaml).
        # Where the config has a judging limit, a slower machine is not judged at all.
        calibration = latency.calibrate(gates)
        slowdown, exponent = calibration.slowdown, calibration.exponent
        limit = gates.get('realtime_judge_max_slowdown')
        judge_latency = limit is None or slowdown <= limit
        if judge_latency and not opts.live:
            paced = Pacing(slowdown)
            scale = paced.budget_scale
            how = paced.describe()
        elif judge_latency:
            scale = calibration.budget_scale
            how = f'budgets scaled by slowdown ** {exponent:g}'
        else:
            scale = gates.get('realtime_unjudged_budget_scale', 5.0)
            how = f'over {limit}: latency not judged'
        header.calibration = (
            f'latency budgets x{scale:.2f}: {latency.describe_calibration(calibration)} '
            f'({slowdown:.2f}x slower, {how})')
        floors = gates.get('realtime_reference_stage_p99_ms') or {}
        if floors:
            margin = float(gates['realtime_stage_floor_margin'])
            budgets = latency.floored(budgets, floors, margin)
            out.budgets = budgets
            stop_floor = margin * float(gates.get('realtime_reference_stop_received_ms', 0.0))
            header.calibration += (
                f"; stage budgets and the safe stop's delivery at least the budget "
                f"machine's own figures x{margin:g} (its cores are shared by every process "
                'of the loop)')
        say(header.calibration)
    out.scale = scale

    overrides = {k: dict(v) for k, v in opts.overrides.items()}
    if scale != 1.0:   # the monitor judges the same scaled budgets as the page
        overrides.setdefault('deadline_monitor', {}).update({
            'end_to_end_budget_ms': budgets.end_to_end_ms * scale,
            'stage_budgets_ms': [b * scale for b in monitor_params['stage_budgets_ms']]})
    if paced is not None and paced.slowdown > 1.0:
        player = overrides.setdefault('bag_player', {})
        player['rate'] = float(player.get('rate', 1.0)) * paced.rate
        overrides['deadline_monitor'].update(paced.monitor_overrides(
            {**monitor_node_defaults(), **monitor_params, **overrides['deadline_monitor']}))
    if opts.device:
        for stage in FRAME_STAGES:
            overrides.setdefault(stage, {}).setdefault('device', opts.device)
    log_dir = opts.log_dir or opts.out / 'logs'
    session = CheckSession(SessionConfig(params_file=opts.params_file, log_dir=log_dir,
                                         bag=bag, live=opts.live, domain_id=opts.domain_id,
                                         extra=overrides))
    stages = [n for n in session.names if n in FRAME_STAGES]
    devices: dict[str, str] = {}
    handoffs: dict[str, Any] = {}
    handoff_failed: dict[str, str] = {}
    try:
        say(f'edge-loop check: bringing up {len(session.nodes)} nodes (logs in {log_dir})')
        started = session.start()
        say(f'edge-loop check: graph active after {started:.1f} s; measuring latency over '
            f'{mode.frames} frames')
        items[1], samples = measure_latency(session, mode, budgets, scale, opts,
                                            max(1, opts.latency_windows), shared, say)
        load_during = host.host_load()
        header.notes.append(host.header_line(load_before, load_during))
        if not judge_latency:
            items[1] = latency.too_slow_to_judge(slowdown,
                                                 gates['realtime_judge_max_slowdown'])
        out.extra['latency_samples'] = samples
        out.extra['host_load'] = (load_before, load_during)

        # None: the node did not answer get_parameters (a name it lacks is just absent).
        answers = {n: session.get_parameters(n, [
            'transport', 'use_sim_time', 'cpu_affinity', 'nice', 'require_verified',
            'device']) for n in session.names}
        out.extra['node_params'] = answers
        unanswered = sorted(n for n, p in answers.items() if p is None)
        params = {n: p or {} for n, p in answers.items()}
        pids = session.process_pids()
        procs = {n: environment.process_cpus(pids[n]) for n in session.names if n in pids}
        devices = {s: str(params[s].get('device', 'cpu')) for s in stages}
        handoffs, handoff_failed = measure_handoffs(devices, session)
        items[3] = copies.judge_copies(session.copies_per_frame(), stages, devices, {})
        items[8] = environment.judge_settings(params, procs, session.env,
                                              environment.cpu_governors(),
                                              realtime_source=True, unanswered=unanswered)
        gated = [s for s in stages if s in verification.GATED_STAGES]
        # None: the node did not answer get_parameters (item 4 is then NOT RUN, not FAIL).
        require_verified = {s: (None if answers[s] is None
                                else bool(params[s].get('require_verified', False)))
                            for s in gated}
        logs = {s: session.node_log(s) for s in gated}

        say(f'edge-loop check: injecting a fault ({FAULT_STAGE} slowed)')
        delay = 2.0 * budgets.end_to_end_ms * scale
        fault = session.inject_delay(
            FAULT_STAGE, delay, int(monitor_params.get('misses_to_deactivate', 3)),
            mode.recover_frames)
        items[2] = monitor.judge_monitor(fault, budgets.end_to_end_ms * scale,
                                         int(monitor_params.get('misses_to_deactivate', 3)),
                                         scale, stop_floor)
        lo, hi = fault.fault_window
        if hi > lo:
            window = session.window(lo, hi)
            out.fault_samples = latency.LatencySamples.from_arrivals(
                window[0], window[1], 'pick_controller', window[2])
        if hook is not None:
            hook(session, out)

        say(f'edge-loop check: lifecycle, {mode.cycles} cycles and shutdown')
        steps = session.lifecycle_cycles(mode.cycles)
        exits = session.stop()
        time.sleep(0.2)
        leftovers = [p for p in shm_entries(session.prefix) if p not in session.shm_before]
        remove_global_file(session.prefix)
        items[7] = lifecycle.judge_lifecycle(steps, mode.cycles, exits, leftovers,
                                             session.cfg.exit_timeout_s)
        out.extra['session_prefix'] = session.prefix
        ops = sorted({op for log in logs.values() for op in verification.logged_ops(log)})
        items[4] = verification.judge_verification(gated, require_verified, logs,
                                                   verification.pin_problems(ops))
    except Exception as exc:  # noqa: BLE001 - every item not measured says why
        why = 'the graph failed: ' + _reason(exc, session)
        say(f'edge-loop check: {why}')
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / 'check_error.txt').write_text(traceback.format_exc())
        gate = next((line for name in verification.GATED_STAGES
                     for line in session.node_log(name).splitlines()
                     if 'configure failed: deployment gate' in line), '')
        if gate and 4 not in items:   # the nodes refused a kernel: item 4 is measured
            items[4] = ItemResult(4, Status.FAIL, gate.split('configure failed: ')[-1][:300],
                                  'every op pinned, none stale',
                                  fix='a node refused its kernel: run `make verify` on this '
                                  'host and deploy its record')
        for n in (1, 2, 3, 4, 7, 8):
            items.setdefault(n, not_run(n, why))
    finally:
        session.kill_all()

    memory_config = opts.memory_config or _default_memory_config()
    items[5] = resources.memory_item(memory_config, required=5 in opts.require or (
        memory_config is not None and memory_config.is_file()))
    items[6] = resources.placement_item(devices or {s: 'cpu' for s in stages}, handoffs,
                                        require=6 in opts.require, not_measured=handoff_failed)
    items[10] = workspace.workspace_item(
        list(dict.fromkeys(Path(f).resolve() for f in (bringup.default_params_file(),
                                                      opts.params_file))),
        required=10 in opts.require)
    for n in opts.require:
        if n in items:
            items[n].required = True
    out.items = [items[n] for n in sorted(items)]
    out.files = write_page(out.items, header, opts.out)
    return out


def measure_latency(session: CheckSession, mode: Mode, budgets: latency.Budgets, scale: float,
                    opts: CheckOptions, windows: int, shared: str,
                    say: Callable[[str], None]) -> tuple[ItemResult, latency.LatencySamples]:
    """Item 1: up to ``windows`` latency windows, stopping at the first within every budget.

    Each window is judged with what the deadline monitor did in it; a controller the monitor
    took down is brought back (``~/reactivate``) and warmed up before the next window. The
    item says which window it reports and how every earlier one failed.
    """
    rec = session.recorder
    assert rec is not None
    earlier: list[str] = []
    warmup = mode.warmup_commands
    for n in range(1, windows + 1):
        arrivals, commands, stamps, sampled = session.latency_window(
            rec.count(topics.ARM_CMD) + warmup if n > 1 else warmup, mode.frames,
            timeout_s=60.0 + mode.frames / 10.0)
        samples = latency.LatencySamples.from_arrivals(
            arrivals, commands, 'pick_controller', stamps,
            {'grasp_state': sampled} if 'grasp_state' in session.names else {})
        lo, hi = (stamps[0], stamps[-1]) if stamps else (0, -1)
        misses = sum(1 for stamp, _, why in session.safe_stops()
                     if why == 'deadline_miss' and lo <= stamp <= hi)
        state = session.node_state('pick_controller', 'active')
        item = latency.judge_latency(samples, budgets, scale, calibrated=opts.calibrate,
                                     monitor=latency.MonitorInWindow(misses, state),
                                     shared_host=shared)
        if windows > 1:
            item.measured = f'window {n} of up to {windows}: {item.measured}'
            if earlier:
                item.rows.insert(0, ('earlier windows', '; '.join(earlier), 'within budget',
                                     'NO'))
        if item.status is Status.PASS or n == windows:
            return item, samples
        earlier.append(f'{n}: ' + item.fix.split(': make ')[0].removeprefix(shared)[:160])
        say(f'edge-loop check: latency window {n} failed ({earlier[-1]}); measuring again')
        if state != 'active':
            # The loop must first be healthy for the monitor's healthy periods, which a paced
            # (or slower) replay takes longer to give: the wait grows with the budgets.
            ok, msg = session.reactivate(time.monotonic() + 20.0 * max(1.0, scale))
            say(f'edge-loop check: ~/reactivate before the next window: {msg}')
            if not ok:
                return item, samples
        warmup = mode.warmup_commands // 2
    raise AssertionError('unreachable')


def measure_handoffs(devices: dict[str, str], session: CheckSession
                     ) -> tuple[dict[str, Any], dict[str, str]]:
    """Item 6's handoff of every stage whose device is not the CPU, at the camera's size.

    The device is the one the node resolved from its parameter (``auto`` included); the frame
    size is the last camera_info the check received (VGA when none came).
    """
    from edge_loop.check import handoff
    from edge_loop.placement import resolve_device

    resolved: dict[str, str] = {}
    failed: dict[str, str] = {}
    for stage, spec in devices.items():
        try:
            resolved[stage] = resolve_device(spec).device
        except Exception as exc:  # noqa: BLE001 - item 6 names the bad device itself
            failed[stage] = f'device {spec!r}: {exc}'
    if all(d == 'cpu' for d in resolved.values()):
        return {}, failed
    info = session.recorder.last(topics.CAMERA_INFO) if session.recorder else None
    width, height = (int(info.width), int(info.height)) if info is not None else (640, 480)
    measured, not_measured = handoff.measure_stages(resolved, width, height)
    return measured, {**failed, **not_measured}


def _reason(exc: Exception, session: CheckSession) -> str:
    """One line: the manager's abort line or a node's failure, else the exception's."""
    text = str(exc)
    for line in text.splitlines() + session.node_log('lifecycle_manager').splitlines():
        if 'bring-up aborted: ' in line and line.split('bring-up aborted: ')[1].strip():
            return 'bring-up aborted: ' + line.split('bring-up aborted: ')[1].strip()[:240]
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return f'{type(exc).__name__}: {first[:240]}'


def _default_memory_config() -> Path | None:
    try:
        path = config_path('memory.yaml')
    except Exception:  # noqa: BLE001 - no share dir, no budget file
        return None
    return path if path.is_file() else None


def options_from_args(args: argparse.Namespace) -> CheckOptions:
    """CheckOptions from parsed CLI arguments (ValueError for a bad one)."""
    from edge_loop.launcher import parse_overrides

    params_file = args.params_file or bringup.default_params_file()
    if not Path(params_file).is_file():
        raise ValueError(f'params file {params_file} not found')
    if args.bag is not None and not Path(args.bag).exists():
        raise ValueError(f'bag {args.bag} not found')
    domain = args.domain_id
    if domain not in (None, 'auto'):
        try:
            domain = int(domain)
        except ValueError:
            raise ValueError(f"--domain-id {domain!r}: an integer or 'auto'") from None
    if args.windows < 1:
        raise ValueError(f'--windows {args.windows}: at least 1')
    require = frozenset(int(x) for x in args.require.replace(' ', '').split(',') if x)
    if not require <= set(range(1, 11)):
        raise ValueError(f'--require {args.require!r}: items are 1..10')
    return CheckOptions(params_file=Path(params_file), out=args.out, bag=args.bag,
                        live=args.live, device=args.device, quick=args.quick,
                        calibrate=args.calibrate, latency_windows=args.windows,
                        domain_id=domain,
                        memory_config=args.memory_config, require=require,
                        overrides=parse_overrides(args.set))


def run(args: argparse.Namespace) -> int:
    """Entry of ``edge-loop check``: 0 when every required item passed, 1 if not."""
    try:
        opts = options_from_args(args)
    except ValueError as exc:
        print(f'edge-loop check: {exc}', file=sys.stderr)
        return 2
    t0 = time.monotonic()
    lock = None
    if opts.domain_id == 'auto':
        from edge_loop.testing import claim_domain_id

        opts.domain_id, lock = claim_domain_id()
        print(f'edge-loop check: on ROS_DOMAIN_ID {opts.domain_id}')
    try:
        outcome = run_check(opts)
    finally:
        if lock is not None:
            lock.close()
    print()
    print(text_table(outcome.items, outcome.header))
    print(f'\npage: {outcome.files["markdown"]} and {outcome.files["html"]} '
          f'({time.monotonic() - t0:.0f} s)')
    return 0 if outcome.passed else 1


__all__ = ['CheckOptions', 'CheckOutcome', 'run', 'run_check', 'Status']
