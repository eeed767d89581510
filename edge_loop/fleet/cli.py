# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""``edge-loop regress BAGS...``: replay many bags (on Ray), merge, compare with a baseline.

Exit codes: 0 no regression, 1 a regression beyond config/fleet.yaml's tolerances (or a bad
bag with ``fail_on_bad_bags``), 2 a usage error (no bags, unknown mode, unreadable baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

MODES = ('fast', 'graph')


def load_config(path: Path | None = None) -> dict[str, Any]:
    """config/fleet.yaml (or ``path``)."""
    import yaml

    from edge_loop.paths import config_path

    return yaml.safe_load((path or config_path('fleet.yaml')).read_text())


def regress(inputs: list[str | Path], *, out: Path | None, address: str = 'local',
            workers: int | None = None, cache_dir: Path | None = None,
            config: dict[str, Any] | None = None, baseline: Path | None = None,
            mode: str = 'fast', ship: bool = False, progress: bool = True,
            params: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """One regression run; (report, per-bag results). ``address='serial'``: no Ray."""
    from edge_loop.fleet import engine, merge
    from edge_loop.fleet import report as report_mod
    from edge_loop.fleet.cache import ResultCache, package_revision, result_key
    from edge_loop.fleet.replay import default_params
    from edge_loop.fleet.sharding import discover, shards

    if mode not in MODES:
        raise ValueError(f'mode {mode!r} not one of {", ".join(MODES)}')
    cfg = config or load_config()
    old = _load_baseline(baseline) if baseline is not None else None
    t0 = time.perf_counter()
    bags = discover(inputs)
    if not bags:
        raise ValueError(f'no bags under {", ".join(str(i) for i in inputs)}')
    params = params or default_params()
    revision = package_revision()
    keys = {b.bag_id: result_key(b.content_hash, revision, params, mode) for b in bags}
    cache = ResultCache(cache_dir)
    bar = None
    collector = engine.Collector(bags, keys, cache)
    todo = []
    for bag in bags:
        hit = cache.get(keys[bag.bag_id])
        if hit is not None and hit.get('bag') == bag.bag_id:
            collector.add_cached(hit)
        else:
            todo.append(bag)
    if progress:
        bar = report_mod.Progress(len(bags), cached=len(bags) - len(todo))
        collector.on_bag = bar.bag
    task = dict(cfg['task'])
    if mode == 'graph':
        task.update(cfg.get('graph_task') or {})
    n_workers = workers or os.cpu_count() or 1
    started = False
    t_start = t_replay = time.perf_counter()
    try:
        if todo and address == 'serial':
            engine.run_serial(shards(todo, 1, task['max_chunk']), params, collector, mode)
        elif todo:
            temp = (out / 'ray') if out is not None else None
            started = engine.ray_init(address, n_workers if address == 'local' else None, temp)
            t_replay = time.perf_counter()
            if address != 'local':
                import ray

                n_workers = int(ray.cluster_resources().get('CPU', n_workers))
            engine.run_ray(shards(todo, n_workers, task['max_chunk'],
                                  task.get('chunks_per_worker', 4)), params, collector,
                           task=task, ship=ship, mode=mode)
    finally:
        t_end = time.perf_counter()
        if bar is not None:
            bar.close()
        if started:
            import ray

            ray.shutdown()
    report = merge.merge(collector.results, worst=int(cfg.get('worst_frames', 12)))
    if old is not None:
        report['comparison'] = merge.compare(report, old, cfg['tolerances'])
    report['run'] = {'mode': mode, 'revision': revision, 'address': address,
                     'workers': 1 if address == 'serial' else n_workers,
                     'fresh': len(todo), 'cached': len(bags) - len(todo),
                     'repeats_dropped': collector.repeats,
                     'bags_per_worker': _counts(collector.workers.values()),
                     'cache': str(cache_dir or ''),
                     'baseline': str(baseline or ''), 'wall_s': time.perf_counter() - t0,
                     # discovery and hashing, cluster start, replay (first task to last
                     # result), merge and report; the cluster's stop is in wall_s only
                     'discover_s': t_start - t0, 'start_s': t_replay - t_start,
                     'replay_s': t_end - t_replay}
    if out is not None:
        report_mod.write(out, report, collector.results)
    return report, collector.results


def _counts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _load_baseline(path: Path) -> dict[str, Any]:
    file = path / 'report.json' if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f'baseline {file}: cannot read a report ({exc})') from None
    if data.get('schema') != 1 or 'bags' not in data:
        raise ValueError(f'baseline {file}: not an edge-loop regress report.json')
    return data


def exit_code(report: dict[str, Any], cfg: dict[str, Any]) -> int:
    """1 when the run regressed (or has bad bags and the config fails on them), else 0."""
    regressed = bool(report.get('comparison', {}).get('regressions'))
    bad = cfg.get('fail_on_bad_bags', False) and report['summary']['bad'] > 0
    return 1 if regressed or bad else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``edge-loop regress``."""
    from edge_loop.fleet.cache import default_cache_dir

    parser.add_argument('bags', nargs='+', metavar='BAGS',
                        help='bags, folders of bags or list files (one bag path a line)')
    parser.add_argument('--address', default='local',
                        help="Ray cluster: 'local' (start one on this machine, default), "
                             "'auto' (the running cluster), 'ray://host:port', or 'serial' "
                             '(no Ray: this process)')
    parser.add_argument('--baseline', type=Path, default=None,
                        help='an earlier run (its --out folder or report.json) to compare with')
    parser.add_argument('--out', type=Path, default=Path('reports/regress'),
                        help='report folder (default reports/regress)')
    parser.add_argument('--mode', choices=MODES, default='fast',
                        help='fast: the kernels in lock-step; graph: the node graph in '
                             'lock-step, one per bag on a ROS domain of its own (slower)')
    parser.add_argument('--workers', type=int, default=None,
                        help='CPUs of the local cluster (default: all cores)')
    parser.add_argument('--cache', type=Path, default=default_cache_dir(),
                        help='result cache folder (default %(default)s)')
    parser.add_argument('--no-cache', action='store_true', help='replay every bag')
    parser.add_argument('--config', type=Path, default=None,
                        help='fleet config (default config/fleet.yaml)')
    parser.add_argument('--ship', action='store_true',
                        help='send the bags to the workers through the object store (a '
                             'cluster without a shared file system)')
    parser.add_argument('--quiet', action='store_true', help='no progress bar')


def run(args: argparse.Namespace) -> int:
    """Entry point of ``edge-loop regress``."""
    cfg = load_config(args.config)
    try:
        report, _ = regress(args.bags, out=args.out, address=args.address,
                            workers=args.workers, cache_dir=None if args.no_cache else args.cache,
                            config=cfg, baseline=args.baseline, mode=args.mode,
                            ship=args.ship, progress=not args.quiet)
    except (ValueError, FileNotFoundError) as exc:
        print(f'edge-loop regress: {exc}', file=sys.stderr)
        return 2
    s, run_info = report['summary'], report['run']
    print(f"{s['bags']} bags ({run_info['fresh']} replayed, {run_info['cached']} cached), "
          f"{s['frames']} frames, {s['bad']} bad, {run_info['wall_s']:.1f} s; "
          f"report {args.out / 'report.md'}")
    for bad in report['bad_bags']:
        print(f"  bad bag {bad['bag']} ({bad['kind']}): {bad['reason']}")
    comparison = report.get('comparison')
    if comparison is not None:
        for line in comparison['regressions'][:20]:
            print(f'  REGRESSION {line}')
        print(f"{len(comparison['regressions'])} regressions against {args.baseline}")
    return exit_code(report, cfg)
