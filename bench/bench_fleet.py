# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge-loop regress at scale: Ray's overhead over a serial replay, and scaling with workers.

1. Overhead: ``--bags`` short bags (2 frames each) replayed serially in this process, through
   a local Ray cluster of one worker and one of ``--workers`` (cluster start and stop
   included), ``--rounds`` rounds of the three in rotated order because the machine is
   shared; the ratios are taken within a round, their median with a bootstrap interval and
   the range over the rounds. One worker against one process is Ray's overhead, ``--workers``
   against one process the speed-up. Every run replays the same bags with the cache off and
   writes no report.
2. Scaling: a simulated cluster on this machine (``ray.cluster_utils.Cluster``: a head
   without CPUs and N one-CPU worker nodes, N = 1 .. ``--nodes``); the throughput (bags/s,
   cluster start excluded) of ``--scale-bags`` bags with N workers.

The bag set: ``--unique`` scenes recorded with ``edge-loop record`` (8 lighting conditions,
consecutive seeds, 2 frames) and hard-linked copies of them up to ``--bags`` folders, so every
bag is opened, decoded and replayed on its own while the set records in a minute.
Results: ``--out`` (default bench/results/fleet): results.json and summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from edge_loop.fleet import cli, merge
from edge_loop.sim.lighting import CONDITION_NAMES


def make_bag_set(folder: Path, bags: int, unique: int) -> Path:
    """``bags`` bag folders under ``folder`` (recorded once, then reused)."""
    from edge_loop.sim.record import record

    scenes = folder / 'scenes'
    names = [f'{CONDITION_NAMES[i % len(CONDITION_NAMES)]}_s{1000 + i}' for i in range(unique)]
    for name in names:
        if not (scenes / name / 'metadata.yaml').is_file():
            scenario, seed = name.rsplit('_s', 1)
            record(scenario, int(seed), 2, scenes / name)
    fleet = folder / f'fleet_{bags}'
    for i in range(bags):
        src = scenes / names[i % unique]
        dest = fleet / f'{src.name}_c{i:04d}'
        if dest.is_dir():
            continue
        dest.mkdir(parents=True)
        for f in src.iterdir():
            os.link(f, dest / f.name)
    return fleet


def timed_regress(bags: Path, address: str, workers: int | None = None) -> tuple[float, dict]:
    """(wall seconds, report) of one run, cache off, no report folder."""
    t0 = time.perf_counter()
    report, _ = cli.regress([bags], out=None, address=address, workers=workers,
                            progress=False)
    return time.perf_counter() - t0, report


def _bootstrap_median(values: list[float], n: int = 10_000, seed: int = 0
                      ) -> tuple[float, float]:
    """95 % bootstrap interval of the median of ``values`` (resampled with replacement)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    data = np.asarray(values, float)
    medians = np.median(rng.choice(data, size=(n, len(data)), replace=True), axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def _stats(values: list[float]) -> dict:
    import numpy as np

    lo, hi = _bootstrap_median(values)
    return {'median': round(float(np.median(values)), 3), 'min': round(min(values), 3),
            'max': round(max(values), 3), 'boot95': [round(lo, 3), round(hi, 3)],
            'values': [round(v, 3) for v in values]}


def overhead(bags: Path, reps: int, workers: int,
             partial: Path | None = None) -> dict:
    """Serial (one process), Ray with one worker, Ray with ``workers``: ``reps`` rounds.

    Each round runs the three once, in an order rotated round by round (S R1 RN, R1 RN S,
    RN S R1, ...) so that a drift of the machine's load does not favour one of them; the
    ratios are taken within a round. One Ray worker against one process is the overhead;
    ``workers`` against one process is the speed-up. With ``partial``, the rounds so far are
    written there (JSON) after each round, so a run cut short keeps them.
    """
    arms = ['serial', 'ray1', f'ray{workers}']
    rows = []
    reference = None
    for i in range(reps):
        order = arms[i % 3:] + arms[:i % 3]
        row: dict = {'round': i, 'order': order}
        for arm in order:
            load_before = os.getloadavg()[0]
            address = 'serial' if arm == 'serial' else 'local'
            n = None if arm == 'serial' else int(arm[3:])
            seconds, report = timed_regress(bags, address, n)
            body = merge.without_timing(report)
            reference = reference or body
            row[arm] = {'s': round(seconds, 2), 'replay_s': round(report['run']['replay_s'], 2),
                        'start_s': round(report['run']['start_s'], 2),
                        'identical': body == reference,
                        'load_before': round(load_before, 2),
                        'load_after': round(os.getloadavg()[0], 2)}
            print(f'round {i} {arm}: {seconds:.1f} s (replay {report["run"]["replay_s"]:.1f} s, '
                  f'start {report["run"]["start_s"]:.1f} s), identical {body == reference}, '
                  f'load {load_before:.2f} -> {os.getloadavg()[0]:.2f}', flush=True)
        for arm in arms[1:]:
            row[f'{arm}/serial'] = round(row[arm]['s'] / row['serial']['s'], 3)
            row[f'{arm}/serial replay'] = round(row[arm]['replay_s'] / row['serial']['replay_s'],
                                                3)
        rows.append(row)
        print(f"round {i}: ray1/serial {row['ray1/serial']}, "
              f"{arms[2]}/serial {row[arms[2] + '/serial']}", flush=True)
        if partial is not None:
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(rows, indent=1) + '\n')
    ratios = {key: _stats([r[key] for r in rows]) for key in rows[0] if '/serial' in key}
    return {'workers': workers, 'rounds': rows, 'ratios': ratios, 'arms': arms,
            'frames': reference['summary']['frames'] if reference else 0}


def scaling(bags: Path, nodes: int, rounds: int = 1) -> list[dict]:
    """Throughput of a simulated cluster of 1 .. ``nodes`` one-CPU worker nodes.

    ``rounds`` > 1 goes up and down again (1..N, N..1, ...): other load drifts over minutes.
    """
    import ray
    from ray.cluster_utils import Cluster

    rows = []
    order = [n if r % 2 == 0 else nodes + 1 - n for r in range(rounds)
             for n in range(1, nodes + 1)]
    for n in order:
        cluster = Cluster(initialize_head=True,
                          head_node_args={'num_cpus': 0, 'include_dashboard': False})
        for _ in range(n):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            seconds, report = timed_regress(bags, 'auto')
        finally:
            ray.shutdown()
            cluster.shutdown()
        rows.append({'workers': n, 'seconds': round(seconds, 2),
                     'bags_per_s': round(report['summary']['bags'] / seconds, 2),
                     'load_1min': os.getloadavg()[0]})
        print(f'{n} worker nodes: {seconds:.1f} s, '
              f'{report["summary"]["bags"] / seconds:.2f} bags/s', flush=True)
    return rows


def summary_md(result: dict) -> str:
    """The results as a short Markdown page."""
    o = result['overhead']
    lines = ['# edge-loop regress benchmark', '',
             f"{result['bags']} bags ({result['unique']} recorded scenes, hard-linked copies), "
             f"{o['frames']} frames; host {result['host']}, {result['cores']} cores "
             f"(shared with other sessions: see the load columns); commit {result.get('commit')}.",
             '']
    if o.get('rounds'):
        arms = o['arms']
        lines += [f"## Serial (one process) vs a local Ray cluster (1 and {o['workers']} workers, "
                  'cluster start and stop included), rounds in rotated order', '',
                  '| round | order | ' + ' | '.join(f'{a} s (replay s)' for a in arms)
                  + ' | ray1 / serial | ' + f'{arms[2]} / serial | load 1-min before each |'
                  + ' reports identical |',
                  '|---|---|' + '---|' * len(arms) + '---|---|---|---|']
        for r in o['rounds']:
            lines.append(
                f"| {r['round']} | {' '.join(r['order'])} | "
                + ' | '.join(f"{r[a]['s']} ({r[a]['replay_s']})" for a in arms)
                + f" | {r['ray1/serial']} | {r[arms[2] + '/serial']} | "
                + ' '.join(f"{r[a]['load_before']:.2f}" for a in r['order']) + ' | '
                + str(all(r[a]['identical'] for a in arms)) + ' |')
        lines += ['', '| ratio | median | 95 % bootstrap of the median | min - max |',
                  '|---|---|---|---|']
        lines += [f"| {k} | {v['median']} | {v['boot95'][0]} - {v['boot95'][1]} | "
                  f"{v['min']} - {v['max']} |" for k, v in o['ratios'].items()]
    if result.get('scaling'):
        lines += ['', f"## Simulated cluster ({result['scale_bags']} bags, start excluded)", '',
                  '| worker nodes | s | bags/s | load |', '|---|---|---|---|']
        lines += [f"| {r['workers']} | {r['seconds']} | {r['bags_per_s']} | "
                  f"{r['load_1min']:.1f} |" for r in result['scaling']]
    return '\n'.join(lines) + '\n'


def _commit() -> str:
    import subprocess

    try:
        head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', 'edge_loop'],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'
    return head + (' (edge_loop/ has uncommitted changes)' if dirty else '')


def main(argv: list[str] | None = None) -> int:
    """Entry point (make bench-fleet)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bags', type=int, default=1000)
    parser.add_argument('--unique', type=int, default=40)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--workers', type=int, default=os.cpu_count())
    parser.add_argument('--nodes', type=int, default=4)
    parser.add_argument('--scale-bags', type=int, default=200)
    parser.add_argument('--skip-scaling', action='store_true')
    parser.add_argument('--skip-overhead', action='store_true')
    parser.add_argument('--scale-rounds', type=int, default=1)
    parser.add_argument('--workdir', type=Path, default=Path('/tmp/edge_loop_bench_fleet'))
    parser.add_argument('--out', type=Path, default=Path('bench/results/fleet'))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    bags = make_bag_set(args.workdir, args.bags, args.unique)
    print(f'bag set {bags}: {time.perf_counter() - t0:.1f} s', flush=True)
    result = {'bags': args.bags, 'unique': args.unique, 'host': platform.node(),
              'cores': os.cpu_count(), 'python': sys.version.split()[0],
              'commit': _commit(),
              'overhead': ({'workers': args.workers, 'rounds': [], 'frames': 0}
                           if args.skip_overhead else
                           overhead(bags, args.rounds, args.workers,
                                    args.out / 'rounds_partial.json'))}
    if not args.skip_scaling:
        small = make_bag_set(args.workdir, args.scale_bags, args.unique)
        result['scale_bags'] = args.scale_bags
        result['scaling'] = scaling(small, args.nodes, args.scale_rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / 'results.json').write_text(json.dumps(result, indent=1) + '\n')
    (args.out / 'summary.md').write_text(summary_md(result))
    print(summary_md(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
