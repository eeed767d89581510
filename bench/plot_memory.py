# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Plots of bench_memory.py's results for docs/memory.md.

python3 bench/plot_memory.py bench/results/memory_h200.json docs/memory
python3 bench/plot_memory.py --graphed bench/results/memory_h200_graphed/memory_h200.json \
    docs/memory          # the real loop (GraphedLoopStep): graphed_loop.png, graphed_soak.png
python3 bench/plot_memory.py --gated-soak docs/memory \
    bench/results/memory_h100_gate_fixed/call2/soak_default/soak_default_gated.json \
    bench/results/memory_h100_gate_fixed/call1/soak_expandable/soak_expandable_gated.json
                         # soaks with the decoder gated (--soak-gate): gated_soak.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

GIB = 2**30

def soak_figure(plt, series: list[tuple[str, list[dict]]], pool_gib: float, title: str,
                path: Path) -> None:
    """Reserved - allocated (% of the pool) and the largest free block over a soak, per run."""
    pool = pool_gib * GIB
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for i, (label, samples) in enumerate(series):
        t = [s['t'] for s in samples]
        axes[0].plot(t, [100 * s['reserved_minus_allocated'] / pool for s in samples], f'C{i}',
                     label=label)
        axes[1].plot(t, [s['largest_free_block'] / 2**20 for s in samples], f'C{i}',
                     label=label)
    axes[0].axhline(5, color='r', ls='--', lw=0.8, label='target 5 % of the pool')
    axes[0].set_ylim(bottom=0)
    axes[0].set_ylabel(f'reserved - allocated, % of the {pool_gib:g} GiB pool')
    axes[1].set_ylabel('largest free block, MiB')
    for ax in axes:
        ax.set_xlabel('soak time, s')
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(result: Path, out: Path) -> None:
    """Draw the three figures of docs/memory.md from a bench_memory results JSON."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    data = json.loads(Path(result).read_text())
    out.mkdir(parents=True, exist_ok=True)
    conditions = [('loop alone', data['loop']['high_priority_stream'])] + [
        (name.replace('_', ' '), data['interference'][name]) for name in (
            'same_process_default_priority', 'same_process_high_priority',
            'same_process_high_priority_paced', 'second_process', 'second_process_paced')]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    labels = [c[0] for c in conditions]
    x = np.arange(len(labels))
    for offset, key in ((-0.2, 'p50'), (0.2, 'p99')):
        axes[0].bar(x + offset, [c[1]['end_to_end_ms'][key] for c in conditions], 0.4,
                    label=f'end to end {key}')
    axes[0].set_xticks(x, labels, rotation=25, ha='right', fontsize=8)
    axes[0].set_ylabel('ms')
    axes[0].set_title('loop step (representative) beside the 7B fp16 decoder')
    axes[0].legend()
    stages = list(conditions[0][1]['stages_ms'])
    for i, stage in enumerate(stages):
        axes[1].bar(x + (i - 1.5) * 0.2, [c[1]['stages_ms'][stage]['p99'] for c in conditions],
                    0.2, label=stage)
    axes[1].set_xticks(x, labels, rotation=25, ha='right', fontsize=8)
    axes[1].set_ylabel('p99 ms (CUDA events)')
    axes[1].set_title('per-stage p99')
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / 'loop_latency.png', dpi=110)
    plt.close(fig)

    fmts = [f for f in ('fp16', 'int8', 'int4') if f in data['formats']]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    parts = [('weights', [data['formats'][f]['weights_bytes'] for f in fmts]),
             ('KV cache', [data['formats'][f]['kv_cache_bytes'] for f in fmts]),
             ('decode graph pool', [data['formats'][f]['graph_pool_bytes'] for f in fmts]),
             ('loop step', [data['loop']['allocated_bytes']] * len(fmts))]
    bottom = np.zeros(len(fmts))
    for name, values in parts:
        gib = np.asarray(values) / GIB
        axes[0].bar(fmts, gib, bottom=bottom, label=name)
        bottom += gib
    for pool in (8, 16):
        axes[0].axhline(pool, color='k', ls='--', lw=0.8)
        axes[0].text(-0.45, pool + 0.2, f'{pool} GiB pool', fontsize=8)
    axes[0].set_ylabel('GiB allocated (torch)')
    axes[0].set_title('memory per tenant (CUDA context of ~0.5 GiB per process not shown)')
    axes[0].legend(fontsize=8)
    tps = [data['formats'][f]['tokens_per_s_graph'] for f in fmts]
    axes[1].bar(fmts, tps, label='alone, CUDA-graph replay')
    beside = data['interference']['same_process_high_priority']['decoder_tokens_per_s']
    axes[1].bar(['fp16 beside loop'], [beside], label='fp16 beside the loop (same process)')
    axes[1].axhline(150, color='r', ls='--', lw=0.8, label='target 150 tok/s')
    axes[1].set_ylabel('tokens/s, batch 1')
    axes[1].set_title('decoder throughput')
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / 'decoder_formats.png', dpi=110)
    plt.close(fig)

    soak_figure(plt, [(key.replace('_', ' '), data['soak'][key]['samples'])
                      for key in ('default_segments', 'expandable_segments')],
                data['soak']['default_segments']['pool_gib'],
                'soak: frames at 100 Hz + decode requests (prompts 16-511 tokens, 64 new)',
                out / 'soak_fragmentation.png')
    print('plots in', out)



def plot_graphed(result: Path, out: Path) -> None:
    """The real loop's run: latency per condition and per stage, and its soak."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    data = json.loads(Path(result).read_text())
    inter = data['interference']
    out.mkdir(parents=True, exist_ok=True)
    names = ['loop_alone_before', 'same_process_default_priority', 'same_process_high_priority',
             'same_process_high_priority_paced', 'loop_alone_after', 'second_process',
             'second_process_paced', 'loop_alone_end']
    conds = [(n.replace('_', ' '), inter[n]) for n in names if n in inter]
    labels = [c[0] for c in conds]
    x = np.arange(len(labels))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for offset, key in ((-0.2, 'p50'), (0.2, 'p99')):
        axes[0].bar(x + offset, [c[1]['end_to_end_ms'][key] for c in conds], 0.4,
                    label=f'end to end {key}')
    axes[0].axhline(1.2 * inter['loop_alone_before']['end_to_end_ms']['p99'], color='r',
                    ls='--', lw=0.8, label='1.2 x p99 alone')
    axes[0].set_xticks(x, labels, rotation=30, ha='right', fontsize=8)
    axes[0].set_ylabel('ms (deadline 10 ms)')
    axes[0].set_title('GraphedLoopStep (VGA, 4 GPU stages) beside the 7B fp16 decoder')
    axes[0].legend(fontsize=8)
    stages = list(conds[0][1]['stages_ms'])
    w = 0.8 / len(stages)
    for i, stage in enumerate(stages):
        axes[1].bar(x + (i - len(stages) / 2 + 0.5) * w,
                    [c[1]['stages_ms'][stage]['p99'] for c in conds], w, label=stage)
    axes[1].set_xticks(x, labels, rotation=30, ha='right', fontsize=8)
    axes[1].set_ylabel('p99 ms (CUDA events)')
    axes[1].set_title('per-stage p99')
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / 'graphed_loop.png', dpi=110)
    plt.close(fig)

    soaks = {key: data['soak'][key] for key in ('default_segments', 'expandable_segments')
             if key in data.get('soak', {})}
    if soaks:
        soak_figure(plt, [(key.replace('_', ' '), soak['samples']) for key, soak in soaks.items()],
                    next(iter(soaks.values()))['pool_gib'],
                    'soak with the real loop step: 100 Hz frames + decode requests',
                    out / 'graphed_soak.png')
    print('plots in', out)


def plot_gated_soak(results: list[Path], out: Path) -> None:
    """Gated soaks (one JSON per allocator setting): fragmentation and free block over time."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    soaks = [json.loads(Path(result).read_text()) for result in results]
    soak_figure(plt, [(f"{'expandable' if soak['expandable_segments'] else 'default'} segments: "
                       f"{soak['requests']} requests, {soak['deadline_misses']} misses",
                       soak['samples']) for soak in soaks], soaks[0]['pool_gib'],
                'gated soak: 100 Hz graphed loop step, decoder prefill and decode between frames',
                out / 'gated_soak.png')
    print('plot in', out / 'gated_soak.png')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('paths', type=Path, nargs='+',
                        help='RESULT OUT; with --gated-soak: OUT then one soak JSON per run')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--graphed', action='store_true',
                      help='a --loop-step graphed run (interference, soak)')
    mode.add_argument('--gated-soak', action='store_true',
                      help='soaks of --soak-gate runs (gated_soak.png)')
    args = parser.parse_args()
    if args.gated_soak:
        if len(args.paths) < 2:
            parser.error('--gated-soak needs OUT and at least one soak JSON')
        plot_gated_soak(args.paths[1:], args.paths[0])
        return
    if len(args.paths) != 2:
        parser.error('expected RESULT OUT')
    (plot_graphed if args.graphed else plot)(*args.paths)


if __name__ == '__main__':
    main()
