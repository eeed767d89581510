# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Which located object to pick, from an instruction, by scoring each candidate with the decoder.

The prompt lists the objects (index and position in ``world``, metres) after the instruction;
each candidate answer ``"<index>"`` is scored by the decoder's log-probability of its tokens
after the prompt, and the best one wins. Scoring instead of free generation always yields a
valid index. The prompt is fed once; each candidate then reuses the prompt's KV cache.

An answer is *meaningful* only when the decoder holds real weights and the tokenizer is the
checkpoint's own; random weights or the byte fallback give an index that means nothing, and
callers must not act on it (the controller keeps its rule-based choice by default).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

BYTE_OFFSET = 3   # byte-level ids start after the usual <unk>, <s>, </s>


class ByteTokenizer:
    """Fallback: one id per UTF-8 byte (never the checkpoint's own, so answers are marked)."""

    real = False

    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 256 + BYTE_OFFSET:
            raise ValueError(f'vocabulary of {vocab_size} is too small for byte tokens')

    def encode(self, text: str) -> list[int]:
        return [b + BYTE_OFFSET for b in text.encode()]


class HFTokenizer:
    """The checkpoint's ``tokenizer.json`` through the ``tokenizers`` package."""

    real = True

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids


def tokenizer_for(checkpoint_dir: str | Path | None, vocab_size: int) -> Any:
    """The checkpoint's tokenizer where it and the package exist, else the byte fallback."""
    if checkpoint_dir:
        path = Path(checkpoint_dir) / 'tokenizer.json'
        if path.exists():
            try:
                return HFTokenizer(path)
            except ImportError:
                pass
    return ByteTokenizer(vocab_size)


def prompt_for(instruction: str, positions: list[tuple[float, float, float]]) -> str:
    """The prompt: the instruction, then one line per object (index and position)."""
    lines = [f'Instruction: {instruction.strip()}', 'Objects (x, y, z in metres):']
    lines += [f'{i}: {x:.3f} {y:.3f} {z:.3f}' for i, (x, y, z) in enumerate(positions)]
    return '\n'.join(lines) + '\nPick object '


@dataclass(frozen=True)
class Choice:
    """The chosen index, every candidate's score, and whether the answer means anything."""

    index: int
    scores: tuple[float, ...]
    meaningful: bool
    prompt_tokens: int
    seconds: float


def choose_target(decoder: Any, tokenizer: Any, instruction: str,
                  positions: list[tuple[float, float, float]], gate: Any = None,
                  chunks: int = 8) -> Choice | None:
    """Score each candidate index after the prompt; None when there is no object.

    ``gate`` (an :class:`edge_loop.reasoning.gate.FrameGate`): every forward runs in
    ``chunks`` layer chunks, each only between the control loop's frames (the same scores).
    Raises ValueError when the prompt does not fit the decoder's context.
    """
    if not positions:
        return None
    t0 = time.perf_counter()
    dev = decoder.device
    prompt = [1] + tokenizer.encode(prompt_for(instruction, positions))   # 1 = <s>
    answers = [tokenizer.encode(str(i)) for i in range(len(positions))]
    longest = max(len(a) for a in answers)
    if len(prompt) + longest > decoder.context:
        raise ValueError(f'prompt of {len(prompt)} tokens and answers of {longest} exceed the '
                         f'context of {decoder.context}')
    forward = decoder.forward
    if gate is not None:
        from edge_loop.reasoning.decoder import forward_between_frames, layer_bounds

        bounds = layer_bounds(len(decoder.layers), min(chunks, len(decoder.layers)))
        done = torch.cuda.Event() if dev.type == 'cuda' else None

        def forward(tokens: torch.Tensor, pos: torch.Tensor,
                    last_only: bool = False) -> torch.Tensor:
            return forward_between_frames(decoder, tokens, pos, gate, bounds,
                                          last_only=last_only, done=done,
                                          kind=('choice', len(tokens) > 1))
    with torch.inference_mode():
        decoder.reset()
        n = len(prompt)
        last = forward(torch.tensor(prompt, device=dev), torch.arange(n, device=dev),
                       last_only=True)[-1].float().log_softmax(-1)
        scores = []
        for answer in answers:
            score = float(last[answer[0]])
            if len(answer) > 1:
                ids = torch.tensor(answer[:-1], device=dev)
                logp = forward(ids, torch.arange(n, n + len(ids), device=dev)
                               ).float().log_softmax(-1)
                score += float(sum(logp[k, answer[k + 1]] for k in range(len(ids))))
            scores.append(score)
    best = max(range(len(scores)), key=scores.__getitem__)
    return Choice(best, tuple(scores), bool(decoder.meaningful and tokenizer.real), n,
                  time.perf_counter() - t0)
