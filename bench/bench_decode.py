# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Decode-step variants of the 7B-shaped fp16 decoder, alone, one process (issue 32).

One random Llama-2-7B-shaped decoder (fp16, KV cache of ``--context`` tokens, the static
cache every variant shares) and, per variant, a fresh CUDA-graph capture of one greedy decode
step, timed over ``--tokens`` tokens (3 rounds, median):

- ``graph sdpa``: the decoder as deployed (fused QKV and gate-up, SDPA with the mask);
- ``graph matmul``: attention as scores, masked float32 softmax, weighted sum;
- ``graph compiled <attention>``: every block through one ``torch.compile``d function
  (:meth:`Decoder.compile_blocks`), then captured.

Each variant's first tokens are compared with the deployed variant's (greedy tokens from the
same cache state; random weights make near-ties possible, so the logits' max difference is
reported too). ``--profile`` adds the CUDA kernels of one eager step by total time (where
the time per token goes). The memory-bandwidth bound (weights + KV cache read once per token
at the measured device-to-device copy rate) is printed beside.

    python3 bench/bench_decode.py --out $OUT [--profile] [--modes default]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_loop.reasoning.decoder import PRESETS, DecodeRunner, random_decoder  # noqa: E402


def log(*args: Any) -> None:
    print(time.strftime('%H:%M:%S'), *args, flush=True)


def copy_bandwidth(device: torch.device) -> float:
    """Bytes/s of a 2 GiB device-to-device copy (read + write counted)."""
    a = torch.empty(2 ** 30, dtype=torch.float16, device=device)
    b = torch.empty_like(a)
    for _ in range(2):
        b.copy_(a)
    torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    torch.cuda.synchronize(device)
    bw = 10 * 2 * a.numel() * 2 / (time.perf_counter() - t)
    del a, b
    return bw


def profile_step(dec: Any, device: torch.device, top: int = 15) -> list[dict[str, Any]]:
    """CUDA kernels of three eager decode steps, by total device time per step."""
    from torch.profiler import ProfilerActivity, profile

    runner = DecodeRunner(dec, use_graph=False)
    runner.start(1, 10)
    runner.step()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            runner.step()
        torch.cuda.synchronize(device)
    rows = []
    for ev in prof.key_averages():
        t = getattr(ev, 'device_time_total', None) or getattr(ev, 'cuda_time_total', 0)
        if t > 0:
            rows.append({'kernel': ev.key[:90], 'us_per_step': t / 3, 'calls_per_step':
                         ev.count / 3})
    rows.sort(key=lambda r: -r['us_per_step'])
    return rows[:top]


def measure(dec: Any, device: torch.device, tokens: int, compile_mode: str | None,
            attention: str) -> dict[str, Any]:
    """Capture one variant and time it; its first 16 greedy tokens from a fixed start."""
    dec._block_fn = None
    dec.attention = attention
    dec.reset()
    t0 = time.perf_counter()
    runner = DecodeRunner(dec, compile_mode=compile_mode)
    runner.start(1, 0)
    runner.capture()
    setup_s = time.perf_counter() - t0
    dec.reset()
    runner.start(1, 0)
    seq = []
    for _ in range(16):
        runner.step()
        seq.append(int(runner.token.item()))
    rates = [runner.tokens_per_second(tokens) for _ in range(3)]
    # logits of one position from the same cache state, for the comparison
    dec.reset()
    runner.start(1, 0)
    for _ in range(8):
        runner.step()
    logits = dec.forward(runner.token, runner.position).float().cpu()
    out = {'compile_mode': compile_mode, 'attention': attention, 'setup_s': setup_s,
           'tokens_per_s': statistics.median(rates), 'tokens_per_s_rounds': rates,
           'first_tokens': seq, 'logits': logits}
    runner.graph = None
    del runner
    gc.collect()
    torch.cuda.empty_cache()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--preset', default='llama2_7b', choices=sorted(PRESETS))
    ap.add_argument('--context', type=int, default=1024)
    ap.add_argument('--tokens', type=int, default=256)
    ap.add_argument('--modes', default='default', help='torch.compile modes to try ("" none)')
    ap.add_argument('--profile', action='store_true')
    ap.add_argument('--out', type=Path, default=None)
    args = ap.parse_args()
    device = torch.device('cuda')
    cfg = PRESETS[args.preset]
    bw = copy_bandwidth(device)
    dec = random_decoder(cfg, fmt='fp16', context=args.context, device=device)
    streamed = dec.weights_nbytes() - dec.embed.numel() * 2 + dec.kv_nbytes()
    result: dict[str, Any] = {
        'device': torch.cuda.get_device_name(device), 'torch': torch.__version__,
        'preset': args.preset, 'context': args.context, 'copy_bandwidth_GBps': bw / 1e9,
        'bytes_per_token': streamed, 'bound_tokens_per_s': bw / streamed, 'variants': []}
    log(f'copy {bw / 1e9:.0f} GB/s; {streamed / 2**30:.2f} GiB read per token: bound '
        f'{bw / streamed:.0f} tok/s')
    if args.profile:
        result['eager_step_kernels'] = profile_step(dec, device)
        for r in result['eager_step_kernels']:
            log(f'  {r["us_per_step"]:9.1f} us/step {r["calls_per_step"]:6.1f} calls  '
                f'{r["kernel"]}')
    variants = [(None, 'sdpa'), (None, 'matmul')]
    for mode in filter(None, args.modes.split(',')):
        variants += [(mode, 'sdpa'), (mode, 'matmul')]
    base = None
    for mode, attention in variants:
        try:
            v = measure(dec, device, args.tokens, mode, attention)
        except Exception as exc:  # noqa: BLE001 - one variant failing keeps the others
            v = {'compile_mode': mode, 'attention': attention,
                 'error': f'{type(exc).__name__}: {str(exc)[:400]}'}
            log(f'variant {mode} {attention} failed: {v["error"]}')
            result['variants'].append(v)
            continue
        logits = v.pop('logits')
        if base is None:
            base = (v['first_tokens'], logits)
        v['same_first_tokens'] = v['first_tokens'] == base[0]
        v['max_logit_difference'] = float((logits - base[1]).abs().max())
        result['variants'].append(v)
        log(f'variant compile={mode} attention={attention}: {v["tokens_per_s"]:.1f} tok/s '
            f'(setup {v["setup_s"]:.1f} s), same tokens {v["same_first_tokens"]}, '
            f'max logit diff {v["max_logit_difference"]:.3g}')
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / 'decode_variants.json').write_text(json.dumps(result, indent=1))


if __name__ == '__main__':
    main()
