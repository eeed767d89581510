# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""edge-loop regress at scale: Ray's overhead over a serial replay, and scaling with workers.

1. Overhead: ``--bags`` short bags (2 frames each) replayed serially in this process and
   through a local Ray cluster (``--workers`` CPUs, cluster start and stop included),
   alternated serial, Ray, serial, Ray (``--pairs`` pairs) because the machine is shared:
   each pair's ratio Ray / serial is reported, not one run of each. Both runs replay the same
   bags with the cache off and write no report.
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


def overhead(bags: Path, pairs: int, workers: int) -> dict:
    """Serial / Ray pairs, alternated."""
    rows = []
    reference = None
    for i in range(pairs):
        t_serial, r_serial = timed_regress(bags, 'serial')
        t_ray, r_ray = timed_regress(bags, 'local', workers)
        same = merge.without_timing(r_serial) == merge.without_timing(r_ray)
        reference = reference or merge.without_timing(r_serial)
        replay_serial, replay_ray = r_serial['run']['replay_s'], r_ray['run']['replay_s']
        rows.append({'pair': i, 'serial_s': round(t_serial, 2), 'ray_s': round(t_ray, 2),
                     'ratio': round(t_ray / t_serial, 3),
                     'ray_start_s': round(r_ray['run']['start_s'], 2),
                     'serial_replay_s': round(replay_serial, 2),
                     'ray_replay_s': round(replay_ray, 2),
                     'replay_ratio': round(replay_ray / replay_serial, 3),
                     'reports_identical': same, 'load_1min': os.getloadavg()[0]})
        print(f'pair {i}: serial {t_serial:.1f} s, Ray ({workers} workers) {t_ray:.1f} s '
              f'(start {r_ray["run"]["start_s"]:.1f} s), ratio {t_ray / t_serial:.3f}; '
              f'replay only {replay_ray / replay_serial:.3f}; identical reports: {same}, '
              f'load {os.getloadavg()[0]:.1f}', flush=True)
    return {'workers': workers, 'pairs': rows,
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
             f"(shared with other sessions: see the load column).", '',
             f"## Ray ({o['workers']} workers, local cluster start included) vs serial", '',
             '| pair | serial s | Ray s | Ray / serial | of it Ray start s | replay only: '
             'serial s | Ray s | Ray / serial | reports identical | load |',
             '|---|---|---|---|---|---|---|---|---|---|']
    lines += [f"| {r['pair']} | {r['serial_s']} | {r['ray_s']} | {r['ratio']} | "
              f"{r['ray_start_s']} | {r['serial_replay_s']} | {r['ray_replay_s']} | "
              f"{r['replay_ratio']} | {r['reports_identical']} | {r['load_1min']:.1f} |"
              for r in o['pairs']]
    if result.get('scaling'):
        lines += ['', f"## Simulated cluster ({result['scale_bags']} bags, start excluded)", '',
                  '| worker nodes | s | bags/s | load |', '|---|---|---|---|']
        lines += [f"| {r['workers']} | {r['seconds']} | {r['bags_per_s']} | "
                  f"{r['load_1min']:.1f} |" for r in result['scaling']]
    return '\n'.join(lines) + '\n'


def main(argv: list[str] | None = None) -> int:
    """Entry point (make bench-fleet)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bags', type=int, default=1000)
    parser.add_argument('--unique', type=int, default=40)
    parser.add_argument('--pairs', type=int, default=2)
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
              'overhead': ({'workers': args.workers, 'pairs': [], 'frames': 0}
                           if args.skip_overhead else
                           overhead(bags, args.pairs, args.workers))}
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
