# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Closed-loop simulation cost: wall time per pick and CPU per process, variants side by side.

Runs ``edge-loop demo --episodes N`` (the whole graph against ``sim_robot``, lock-step, on
simulated time) once per variant and round, interleaved (A B A B ...) so that every variant
sees the same machine load, and samples every process of the graph from /proc while the
episodes run (from "graph active" to the progress bar's last episode, before the graph
stops). A variant is a source tree (its
``edge_loop`` package is put first on PYTHONPATH, default this checkout) plus parameter
overrides (``key=value`` for sim_robot, ``node.key=value`` for another node) written into a
copy of that tree's ``config/pick.yaml``:

    python bench/bench_sim_loop.py --episodes 3 --rounds 2 \
        --variant before=/tmp/base:clock_rate_hz=240 --variant after=.

Prints per variant: picks and successes, wall seconds per pick, real-time factor (simulated
seconds per wall second), and the CPU of each process in % of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml
from proc_stats import cpu_of, stat_fields

from edge_loop.testing import domain_env

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Variant:
    """A source tree and the sim_robot parameters to run it with."""

    name: str
    root: Path
    params: dict[str, dict[str, object]] = field(default_factory=dict)   # node -> overrides

    @classmethod
    def parse(cls, text: str) -> Variant:
        """``name=ROOT[:[node.]key=value,...]`` (values parsed as YAML; node: sim_robot)."""
        name, _, rest = text.partition('=')
        root, _, params = rest.partition(':')
        overrides: dict[str, dict[str, object]] = {}
        for item in filter(None, params.split(',')):
            key, _, value = item.partition('=')
            node, _, key = key.rpartition('.')
            overrides.setdefault(node or 'sim_robot', {})[key] = yaml.safe_load(value)
        return cls(name, Path(root or ROOT).resolve(), overrides)


@dataclass
class Run:
    """What one demo run measured."""

    variant: str
    wall_s: float = float('nan')
    episodes: list[tuple[bool, float, float]] = field(default_factory=list)  # ok, sim s, wall s
    cpu_s: dict[str, float] = field(default_factory=dict)
    frames: int = 0
    misses: int = 0
    error: str = ''


def process_tree(root_pid: int) -> dict[int, tuple[str, float]]:
    """Node name and CPU seconds of ``root_pid`` and every descendant, by pid."""
    parent, info = {}, {}
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = stat_fields(entry / 'stat')
            cmdline = (entry / 'cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(stat[1])
        info[pid] = (_label(cmdline), cpu_of(stat))
    out = {}
    for pid in info:
        p = pid
        while p in parent and p != root_pid:
            p = parent[p]
        if p == root_pid:
            out[pid] = info[pid]
    return out


def _label(cmdline: list[bytes]) -> str:
    args = [a.decode(errors='replace') for a in cmdline]
    for arg in args:
        if arg.startswith('__node:='):
            return arg.split('=', 1)[1]
    if 'demo' in args:
        return 'demo (observer)'
    return Path(args[0]).name if args and args[0] else '?'


def run_demo(variant: Variant, episodes: int, seed: int, work: Path, index: int) -> Run:
    """One ``edge-loop demo`` run of ``variant``."""
    run = Run(variant.name)
    params = yaml.safe_load((variant.root / 'config' / 'pick.yaml').read_text())
    for node, overrides in variant.params.items():
        params.setdefault(node, {}).setdefault('ros__parameters', {}).update(overrides)
    out = work / f'{index:02d}_{variant.name}'
    out.mkdir(parents=True)
    params_file = out / 'pick.yaml'
    params_file.write_text(yaml.safe_dump(params))
    env = domain_env(150 + (os.getpid() + index) % 60, out / 'ros_log')
    env['PYTHONPATH'] = os.pathsep.join([str(variant.root), env.get('PYTHONPATH', '')])
    cmd = [sys.executable, '-m', 'edge_loop.cli', 'demo', '--episodes', str(episodes),
           '--seed', str(seed), '--params-file', str(params_file), '--report', str(out / 'report'),
           '--log-dir', str(out / 'logs')]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=variant.root, text=True)
    marks: dict[str, tuple[float, dict[int, tuple[str, float]]]] = {}
    lines: list[str] = []

    last_episode = f'{episodes}/{episodes} picks'   # progress bar, before the graph stops

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            for key, text in (('start', 'graph active'), ('end', last_episode)):
                if text in line and key not in marks:
                    marks[key] = (time.monotonic(), process_tree(proc.pid))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=episodes * 600 + 300)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(30)
    reader.join(10)
    (out / 'demo.log').write_text(''.join(lines))
    if 'start' not in marks or 'end' not in marks:
        run.error = f'no table (exit {proc.returncode}); see {out / "demo.log"}'
        return run
    (t0, cpu0), (t1, cpu1) = marks['start'], marks['end']
    run.wall_s = t1 - t0
    for pid, (name, cpu) in cpu1.items():
        before = cpu0.get(pid, (name, 0.0))[1] if pid in cpu0 else 0.0
        run.cpu_s[name] = run.cpu_s.get(name, 0.0) + cpu - before
    report = (out / 'report' / 'README.md')
    rows = re.findall(r'^\| \d+ \| \w+ \| -?\d+ \| ([\w ]+?) \| \d+ \| ([\d.]+) \| ([\d.]+) \|$',
                      report.read_text() if report.exists() else '', re.MULTILINE)
    run.episodes = [(result == 'success', float(sim), float(wall)) for result, sim, wall in rows]
    found = re.search(r'frames (\d+), commands \d+, deadline misses (\d+)', ''.join(lines))
    if found:
        run.frames, run.misses = int(found.group(1)), int(found.group(2))
    return run


def summarize(variants: list[Variant], runs: list[Run]) -> None:
    """Print the side-by-side tables."""
    names = [v.name for v in variants]
    by = {n: [r for r in runs if r.variant == n and not r.error] for n in names}
    width = 16
    print()
    print(f'{"":<34}' + ''.join(f'{n:>{width}}' for n in names))

    def row(label: str, fn) -> None:
        cells = []
        for n in names:
            try:
                cells.append(fn(by[n]))
            except (ValueError, ZeroDivisionError, IndexError):
                cells.append('-')
        print(f'{label:<34}' + ''.join(f'{c:>{width}}' for c in cells))

    row('runs', lambda rs: str(len(rs)))
    row('picks ok / episodes', lambda rs: f'{sum(e[0] for r in rs for e in r.episodes)}/'
        f'{sum(len(r.episodes) for r in rs)}')
    row('per run (ok/episodes)', lambda rs: ' '.join(
        f'{sum(e[0] for e in r.episodes)}/{len(r.episodes)}' for r in rs))
    def walls(rs: list[Run]) -> list[float]:
        return [e[2] for r in rs for e in r.episodes]

    def sims(rs: list[Run]) -> list[float]:
        return [e[1] for r in rs for e in r.episodes]

    row('wall s per pick (episode p50)', lambda rs: f'{np.median(walls(rs)):.1f}')
    row('wall s per pick (run means)', lambda rs: ' '.join(
        f'{r.wall_s / max(len(r.episodes), 1):.1f}' for r in rs))
    row('deadline misses / frames', lambda rs: f'{sum(r.misses for r in rs)}/'
        f'{sum(r.frames for r in rs)}')
    row('real-time factor (sim s / wall s)', lambda rs: f'{sum(sims(rs)) / sum(walls(rs)):.3f}')
    print()
    print('CPU in % of one core while the episodes ran (mean over runs):')
    procs = sorted({p for rs in by.values() for r in rs for p in r.cpu_s})
    for proc in procs:
        row(f'  {proc}', lambda rs, p=proc:
            f'{np.mean([r.cpu_s.get(p, 0.0) / r.wall_s for r in rs]):.1%}')
    row('  total', lambda rs: f'{np.mean([sum(r.cpu_s.values()) / r.wall_s for r in rs]):.1%}')
    # What the loop costs, whatever else loads the machine: CPU seconds per simulated second.
    print()
    print('CPU seconds per simulated second (15 frames), all runs together:')
    for proc in procs:
        row(f'  {proc}', lambda rs, p=proc:
            f'{sum(r.cpu_s.get(p, 0.0) for r in rs) / sum(sims(rs)):.3f}')
    row('  total', lambda rs: f'{sum(sum(r.cpu_s.values()) for r in rs) / sum(sims(rs)):.3f}')
    for r in runs:
        if r.error:
            print(f'{r.variant}: {r.error}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=3)
    parser.add_argument('--seed', type=int, default=800)
    parser.add_argument('--rounds', type=int, default=1,
                        help='runs per variant, interleaved')
    parser.add_argument('--variant', action='append', type=Variant.parse,
                        help='name=ROOT[:param=value,...] (repeatable; default: this tree)')
    args = parser.parse_args()
    variants = args.variant or [Variant('this', ROOT)]
    work = Path(tempfile.mkdtemp(prefix='bench_sim_loop_'))
    print(f'runs in {work}', flush=True)
    runs = []
    index = 0
    for _ in range(args.rounds):
        for variant in variants:
            t0 = time.monotonic()
            run = run_demo(variant, args.episodes, args.seed, work, index)
            index += 1
            runs.append(run)
            print(f'{variant.name}: {len(run.episodes)} episodes, '
                  f'{sum(e[0] for e in run.episodes)} ok, {time.monotonic() - t0:.0f} s '
                  f'{run.error}', flush=True)
    (work / 'runs.json').write_text(json.dumps([asdict(r) for r in runs], indent=1))
    summarize(variants, runs)
    return 0 if all(not r.error for r in runs) else 1


if __name__ == '__main__':
    sys.exit(main())
