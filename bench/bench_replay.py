# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Real-time bag replay through the whole graph: end-to-end latency and deadline misses.

Replays a scenario bag in real time (looped, restamped to replay time) through every stage,
frames over shared memory, with the deadline monitor enforcing the budget, and measures the
latency from each frame's camera stamp to the first command for it (the controller's or the
monitor's safe stop) as the middleware stamps its arrival in this process. Variants run
interleaved (A B A B ...) so that both see the same machine:

- ``shipped``: config/pick.yaml as shipped (every stage at nice 0);
- ``path_first``: the stages on the camera-to-command path (object_locator, grasp_planner,
  pick_controller) at nice -5 and the occupancy mapper, off that path, at +2.

    python bench/bench_replay.py --seconds 60 --rounds 2 [--hog]

``--hog`` adds a process at nice 0 that spins on one core for the whole measurement (another
tenant of the robot's computer, a test runner), which leaves the graph one core.

Prints per variant: frames judged, end-to-end p50/p99/p99.9/max against the budget, commands
over the budget, and the monitor's safe stops by reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TwistStamped
from rclpy.qos import QoSProfile

from edge_loop import bringup, topics
from edge_loop.launcher import Graph
from edge_loop.nodes import safe_stop
from edge_loop.paths import data_dir
from edge_loop.testing import claim_domain_id, domain_env, ros_harness

VARIANTS = {
    'shipped': {},
    'path_first': {'object_locator': {'nice': -5}, 'grasp_planner': {'nice': -5},
                   'pick_controller': {'nice': -5}, 'occupancy_mapper': {'nice': 2}},
}


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


HOG = 'while True: pass'


def run_once(variant: str, bag: Path, seconds: float, warmup_s: float,
             log_dir: Path, hog: bool = False) -> dict[str, object]:
    """One replay of ``seconds`` (after ``warmup_s``); latencies in ms and stops by reason."""
    extra = {stage: dict(params) for stage, params in VARIANTS[variant].items()}
    extra['bag_player'] = {'mode': 'timed', 'restamp': True, 'loop': True,
                           'wait_topics': [topics.CAMERA_INFO], 'start_delay_s': 1.0}
    nodes = bringup.graph('bag', bag=str(bag), transport='shm', monitor=True, extra=extra)
    domain, lock = claim_domain_id()
    try:
        graph = Graph(nodes, bringup.default_params_file(), log_dir,
                      env=domain_env(domain, log_dir / 'ros_log'))
        with ros_harness(domain, 'bench_replay') as h:
            commands = h.receive_probe(TwistStamped, topics.ARM_CMD, QoSProfile(depth=500))
            stops = h.receive_probe(DiagnosticArray, topics.SAFE_STOP, QoSProfile(depth=500))
            try:
                graph.start()
                graph.wait_active(120.0)
                time.sleep(warmup_s)
                first_cmd, first_stop = len(commands.samples), len(stops.samples)
                spinner = subprocess.Popen([sys.executable, '-c', HOG]) if hog else None
                try:
                    time.sleep(seconds)
                finally:
                    if spinner is not None:
                        spinner.kill()
                        spinner.wait()
                if graph.dead():
                    raise RuntimeError(f'{variant}: process(es) died: {graph.dead()}')
                taken = list(commands.samples)[first_cmd:]
                stopped = list(stops.samples)[first_stop:]
            finally:
                graph.stop()
    finally:
        lock.close()
    latency: dict[int, float] = {}
    for msg, received_ns in taken:
        stamp = _ns(msg.header.stamp)
        latency.setdefault(stamp, (received_ns - stamp) / 1e6)   # a frame's first command
    reasons: dict[str, int] = {}
    for msg, _ in stopped:
        event = safe_stop.from_message(msg)
        reason = event.reason if event else '?'
        reasons[reason] = reasons.get(reason, 0) + 1
    return {'latency_ms': list(latency.values()), 'stops': reasons}


def main(argv: list[str] | None = None) -> int:
    """Run the variants interleaved and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bag', type=Path, default=data_dir() / 'scenarios' / 'grasp_nominal')
    parser.add_argument('--seconds', type=float, default=60.0, help='measured per round')
    parser.add_argument('--warmup', type=float, default=5.0, help='not judged per round')
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument('--budget-ms', type=float, default=66.0)
    parser.add_argument('--hog', action='store_true',
                        help='a competing process spins on one core while measuring')
    parser.add_argument('--json', type=Path, help='also write the results here')
    args = parser.parse_args(argv)
    if not (args.bag / 'metadata.yaml').exists():
        print(f'bench_replay: no bag at {args.bag} (make record-default)', file=sys.stderr)
        return 2
    results: dict[str, dict[str, object]] = {
        v: {'latency_ms': [], 'stops': {}} for v in args.variants}
    with tempfile.TemporaryDirectory(prefix='bench_replay_') as tmp:
        for round_index in range(args.rounds):
            for variant in args.variants:
                print(f'round {round_index + 1}/{args.rounds}: {variant} '
                      f'({args.seconds:.0f} s)', flush=True)
                out = run_once(variant, args.bag, args.seconds, args.warmup,
                               Path(tmp) / f'{variant}_{round_index}', args.hog)
                results[variant]['latency_ms'] += out['latency_ms']
                for reason, count in out['stops'].items():
                    stops = results[variant]['stops']
                    stops[reason] = stops.get(reason, 0) + count
    print(f'\nreal-time replay of {args.bag.name}: end-to-end latency (camera stamp -> first '
          f'command), budget {args.budget_ms:.0f} ms'
          f'{", one core taken by a competing process" if args.hog else ""}')
    print(f'{"variant":<12}{"frames":>8}{"p50":>8}{"p99":>8}{"p99.9":>8}{"max":>8}'
          f'{"> budget":>10}  safe stops')
    for variant, res in results.items():
        lat = np.asarray(res['latency_ms'])
        if lat.size == 0:
            print(f'{variant:<12}{0:>8}  no commands')
            continue
        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
        stops = ', '.join(f'{k} {v}' for k, v in sorted(res['stops'].items())) or 'none'
        print(f'{variant:<12}{lat.size:>8}{p50:>8.1f}{p99:>8.1f}{p999:>8.1f}{lat.max():>8.1f}'
              f'{int((lat > args.budget_ms).sum()):>10}  {stops}')
    if args.json:
        args.json.write_text(json.dumps(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
