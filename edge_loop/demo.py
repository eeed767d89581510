# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop demo``: the main job, a thin client of :mod:`edge_loop.commander`.

Brings the whole graph up (one process per node, frames over shared memory, the deadline
monitor enforcing the budget, the lifecycle manager in charge) against ``sim_robot`` or a bag,
runs picks across every lighting condition on held-out objects, prints a table (pick success
with its 95% interval, per-stage and end-to-end latency p50/p99 against the budget, deadline
misses, copies per frame) and writes a report folder (Markdown + PNG). Bringing up, picking,
reading the results and recovering are the commander's; this module is the episode plan and
the report. How latency is measured: :mod:`edge_loop.commander`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_loop import bringup, stages
from edge_loop.commander import STAGE_OUTPUTS, LoopCommander, Observation
from edge_loop.stats import percentiles, wilson_interval

LIGHTING = ('nominal', 'dim', 'overexposed', 'harsh_shadow', 'color_cast', 'glare', 'flicker',
            'motion_blur')   # every condition of edge_loop.sim.lighting


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop demo``."""
    parser.add_argument('--episodes', type=int, default=8,
                        help='pick episodes (cycling through every lighting condition)')
    parser.add_argument('--bag', type=Path, default=None,
                        help='replay this bag through the graph instead of the simulator')
    parser.add_argument('--transport', choices=bringup.TRANSPORTS, default='shm')
    parser.add_argument('--seed', type=int, default=800, help='first scene seed')
    parser.add_argument('--objects', type=int, default=3, help='objects per scene (1-5)')
    parser.add_argument('--episode-timeout', type=float, default=40.0,
                        help='simulated seconds before an episode counts as failed')
    parser.add_argument('--report', type=Path, default=Path('reports/demo'),
                        help='report folder (Markdown + PNG)')
    parser.add_argument('--max-minutes', type=float, default=0.0,
                        help='start no new episode after this many minutes of wall time '
                             '(0: no limit); the report says how many ran')
    parser.add_argument('--device', default='',
                        help="compute device of the nodes that declare one (cpu, cuda, cuda:N, "
                             "auto; '' leaves their parameters)")
    parser.add_argument('--log-dir', type=Path, default=None)
    parser.add_argument('--params-file', type=Path, default=None)


@dataclass
class Episode:
    """One pick episode's result."""

    index: int
    lighting: str
    seed: int
    success: bool
    reason: str
    attempts: int
    sim_seconds: float
    wall_seconds: float


def _budgets(params_file: Path) -> tuple[float, dict[str, float]]:
    return stages.budgets_ms(stages.monitor_parameters([params_file]))


def _progress(done: int, total: int, ok: int, note: str) -> None:
    width = 28
    filled = int(width * done / max(total, 1))
    bar = '#' * filled + '.' * (width - filled)
    sys.stderr.write(f'\r[{bar}] {done}/{total} picks, {ok} ok  {note:<40}')
    sys.stderr.flush()
    if done == total:
        sys.stderr.write('\n')


def run_episodes(args: argparse.Namespace, loop: LoopCommander,
                 episodes: list[Episode]) -> list[Episode]:
    """Run the pick episodes against sim_robot, appending results to ``episodes``.

    A safety intervention or a stuck simulation ends the episode as failed with that reason;
    the loop is brought back (:meth:`LoopCommander.recover`) and the run goes on, each
    intervention listed in the table. An exited node process ends the run (RuntimeError).
    """
    total = args.episodes
    stop_at = time.monotonic() + args.max_minutes * 60.0 if args.max_minutes > 0 else None
    _progress(0, total, 0, 'starting')
    for i in range(total):
        if stop_at is not None and time.monotonic() > stop_at:
            print(f'\nedge-loop demo: --max-minutes {args.max_minutes:g} reached after {i} of '
                  f'{total} episodes', flush=True)
            break
        lighting = LIGHTING[i % len(LIGHTING)]
        scene = loop.new_scene(lighting)
        pick = loop.run_pick(args.episode_timeout)
        seed = int(scene.split(':')[0].split()[-1]) if scene.startswith('seed') else -1
        ep = Episode(i, lighting, seed, pick.success, pick.reason, pick.attempts,
                     pick.sim_seconds, pick.wall_seconds)
        episodes.append(ep)
        _progress(i + 1, total, sum(e.success for e in episodes),
                  f'{lighting}: {"ok" if ep.success else ep.reason}')
        if pick.fault is not None:
            how = loop.recover(pick.fault)
            loop.obs.interventions.append(f'episode {i} ({lighting}): {pick.fault}; '
                                          f'back by {how}')
    return episodes


def summary_table(episodes: list[Episode], obs: Observation, e2e_budget: float,
                  stage_budgets: dict[str, float]) -> str:
    """The table the demo prints."""
    lines = []
    if episodes:
        ok = sum(e.success for e in episodes)
        lo, hi = wilson_interval(ok, len(episodes))
        times = [e.sim_seconds for e in episodes if e.success]
        lines.append(f'pick success: {ok}/{len(episodes)} = {ok / len(episodes):.0%} '
                     f'(95% Wilson interval {lo:.0%}-{hi:.0%}); time per successful pick '
                     f'(sim s) p50 {percentiles(times, [50])[0]:.1f}')
        per = defaultdict(lambda: [0, 0])
        for e in episodes:
            per[e.lighting][0] += e.success
            per[e.lighting][1] += 1
        lines.append('per lighting: ' + ', '.join(f'{k} {v[0]}/{v[1]}' for k, v in per.items()))
    else:
        lines.append('pick success: n/a (bag replay: no physics)')
    lines.append('')
    lines.append(f'{"stage":<18} {"n":>6} {"p50 ms":>8} {"p99 ms":>8} {"budget ms":>10}  ok')
    for stage in STAGE_OUTPUTS:
        values = obs.latencies_ms.get(stage, [])
        p50, p99 = percentiles(values)
        budget = e2e_budget if stage == 'pick_controller' else stage_budgets.get(stage, 0.0)
        name = 'end-to-end' if stage == 'pick_controller' else stage
        verdict = 'yes' if values and p99 <= budget else ('-' if not values else 'NO')
        lines.append(f'{name:<18} {len(values):>6} {p50:>8.1f} {p99:>8.1f} {budget:>10.1f}  '
                     f'{verdict}')
    lines.append('')
    misses, stops = obs.at_input_end or (obs.misses, obs.safe_stops)
    lines.append(f'frames {obs.frames}, commands {obs.commands}, deadline misses '
                 f'{misses}, safe stops {stops}')
    if obs.at_input_end and (obs.misses, obs.safe_stops) != obs.at_input_end:
        lines.append(f'after the bag ended: {obs.misses - misses} more misses, '
                     f'{obs.safe_stops - stops} more safe stops (the monitor judging the '
                     'silent input; not counted above)')
    if obs.early_outputs:
        lines.append(f'{obs.early_outputs} stage outputs reached the observer before their '
                     "frame's camera_info (faster than its delivery here: not timed)")
    if obs.interventions:
        lines.append(f'safety interventions that ended an episode: {len(obs.interventions)}')
        lines.extend(f'  - {note}' for note in obs.interventions)
    if obs.copies:
        lines.append('copies per frame after ingest: ' + ', '.join(
            f'{k} {v:g}' for k, v in sorted(obs.copies.items())))
    for stage, kinds in sorted(obs.transfers.items()):
        # a GPU-placed stage's copy audit: no image may come back to the host
        lines.append(f'{stage} host<->device transfers per frame: ' + ', '.join(
            f'{k} {v:g}' for k, v in sorted(kinds.items())))
    return '\n'.join(lines)


def run(args: argparse.Namespace) -> int:
    """Bring the graph up, run the episodes (or the bag), print the table, write the report."""
    if args.episodes < 1:
        print('edge-loop demo: --episodes must be >= 1', file=sys.stderr)
        return 2
    if args.bag is not None and not args.bag.exists():
        print(f'edge-loop demo: bag {args.bag} does not exist', file=sys.stderr)
        return 2
    params_file = Path(args.params_file or bringup.default_params_file())
    # The copy audit is on for the frame-reading stages: the table reports copies per frame.
    extra: dict[str, dict[str, Any]] = {stage: {'copy_audit': True}
                                        for stage in stages.FRAME_STAGES}
    if args.bag is not None:
        nodes = bringup.graph('bag', bag=str(args.bag), transport=args.transport, extra=extra,
                              device=args.device)
    else:
        # lock-step and sim time come with the graph description (bringup.SOURCE_SETTINGS)
        extra['sim_robot'] = {'split': 'heldout', 'seed': args.seed - 1,
                              'n_objects': args.objects}
        nodes = bringup.graph('sim', transport=args.transport, extra=extra, device=args.device)
    loop = LoopCommander(nodes, params_file, args.log_dir)

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt('terminated')

    signal.signal(signal.SIGTERM, on_term)
    episodes: list[Episode] = []
    print(f'edge-loop demo: starting {len(nodes)} nodes (logs in {loop.log_dir})', flush=True)
    try:
        with loop:
            loop.bring_up(120.0)
            print('edge-loop demo: graph active: ' + ', '.join(n.name for n in nodes),
                  flush=True)
            if args.bag is not None:
                loop.wait_bag_done()
                time.sleep(0.5)  # outputs of the last frame
            else:
                run_episodes(args, loop, episodes)
            obs = loop.obs
    except (RuntimeError, KeyboardInterrupt) as exc:
        print(f'\nedge-loop demo: stopping: {exc or type(exc).__name__}', file=sys.stderr)
        if loop.observer is None or not episodes:
            return 1
        # nothing lost: what ran so far is still reported
        print(f'edge-loop demo: results of the {len(episodes)} episode(s) that ran:',
              file=sys.stderr)
        _finish(args, episodes, loop.observer.obs, params_file)
        return 1
    _finish(args, episodes, obs, params_file)
    return 0


def _finish(args: argparse.Namespace, episodes: list[Episode], obs: Observation,
            params_file: Path) -> None:
    """Print the table and write the report folder."""
    e2e, stage_budgets = _budgets(params_file)
    table = summary_table(episodes, obs, e2e, stage_budgets)
    print(table)
    from edge_loop.report import write_report

    path = write_report(args.report, table, episodes, obs, e2e, stage_budgets)
    print(f'report: {path}')
