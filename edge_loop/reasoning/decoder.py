# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A Llama-style decoder in plain torch, device-agnostic, with a preallocated KV cache.

Shapes follow Llama-2-7B (:data:`LLAMA2_7B`: 32 layers, hidden 4096, 32 heads, MLP 11008,
vocabulary 32000) or any config read from a checkpoint's ``config.json``; :data:`TINY` is the
two-layer model the CPU tests use. Everything the decoder needs at run time (weights, the KV
cache for ``context`` tokens, rotary tables) is allocated when it is built, so a decode step
allocates nothing outside the temporaries a CUDA graph keeps in its own pool.

Positions are a tensor, never a Python int, so one decode step can be captured in a CUDA
graph and replayed (:class:`DecodeRunner`): the step writes the next token (greedy argmax) and
the next position back into its own input tensors, on the device.
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from edge_loop.reasoning import quant
from edge_loop.reasoning.shapes import (  # noqa: F401 - re-exported
    LLAMA2_7B,
    PRESETS,
    TINY,
    DecoderConfig,
    kv_cache_nbytes,
    weights_nbytes,
)


@dataclass
class Layer:
    """One transformer block's weights."""

    attn_norm: torch.Tensor
    qkv: Any
    o: Any
    mlp_norm: torch.Tensor
    gate_up: Any
    down: Any


class Decoder:
    """Weights, rotary tables and the KV cache of one Llama-style decoder (batch 1)."""

    def __init__(self, cfg: DecoderConfig, embed: torch.Tensor, layers: list[Layer],
                 norm: torch.Tensor, lm_head: Any, *, fmt: str, context: int,
                 meaningful: bool) -> None:
        if context > cfg.max_position_embeddings:
            raise ValueError(f'context {context} exceeds max_position_embeddings '
                             f'{cfg.max_position_embeddings}')
        self.cfg, self.embed, self.layers, self.norm, self.lm_head = (
            cfg, embed, layers, norm, lm_head)
        self.fmt, self.context = fmt, context
        # Random weights give answers that mean nothing: callers must never act on them.
        self.meaningful = meaningful
        self.device, self.dtype = embed.device, embed.dtype
        hd, kvh = cfg.head_dim, cfg.num_key_value_heads
        # One tensor per layer (not views of one block): a compiled block then sees the same
        # kind of input in every layer and is compiled once, not once per storage offset.
        self.k_cache = [torch.zeros(kvh, context, hd, dtype=self.dtype, device=self.device)
                        for _ in range(cfg.num_hidden_layers)]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        # 'sdpa': F.scaled_dot_product_attention with the visibility mask; 'matmul': scores,
        # masked softmax in float32, weighted sum (three kernels a compiled block can fuse).
        self.attention = 'sdpa'
        self._block_fn: Any = None
        inv = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
        angles = torch.outer(torch.arange(context, dtype=torch.float32), inv)
        angles = torch.cat([angles, angles], dim=1)   # Llama's rotate_half layout
        self.cos = angles.cos().to(self.device, self.dtype)
        half = hd // 2
        sin = angles.sin()
        self.sin_signed = torch.cat([-sin[:, :half], sin[:, half:]], dim=1).to(
            self.device, self.dtype)
        self.slots = torch.arange(context, device=self.device)

    # --- accounting -------------------------------------------------------------------------
    def linear_weights(self) -> list[Any]:
        out = [self.lm_head]
        for layer in self.layers:
            out += [layer.qkv, layer.o, layer.gate_up, layer.down]
        return out

    def weights_nbytes(self) -> int:
        dense = self.embed.numel() + self.norm.numel() + sum(
            layer.attn_norm.numel() + layer.mlp_norm.numel() for layer in self.layers)
        return dense * self.embed.element_size() + sum(
            w.nbytes for w in self.linear_weights())

    def kv_nbytes(self) -> int:
        return sum(2 * k.numel() * k.element_size() for k in self.k_cache)

    def compile_blocks(self, mode: str = 'default') -> None:
        """Run every transformer block through one ``torch.compile``d function.

        Fp16/dense weights only (the packed formats call their own kernels); decode steps
        only (one token: prompts keep the eager block, their lengths vary). The function
        takes the layer's tensors as arguments, so the 32 layers share one compilation;
        Inductor fuses the norms, RoPE, cache writes, softmax and residual adds around the
        matrix products. ``mode`` must leave CUDA-graph capture to :class:`DecodeRunner`
        ('default' or 'max-autotune-no-cudagraphs').
        """
        if mode not in ('default', 'max-autotune-no-cudagraphs'):
            raise ValueError(f'compile mode {mode!r}: default or max-autotune-no-cudagraphs')
        if not all(isinstance(w, quant.DenseWeight) for w in self.linear_weights()):
            raise ValueError(f'compiled blocks need dense weights, not {self.fmt}')
        cfg = self.cfg
        self._block_fn = torch.compile(functools.partial(
            transformer_block, eps=cfg.rms_norm_eps, n_heads=cfg.num_attention_heads,
            n_kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
            attention=self.attention), mode=mode, dynamic=False)

    # --- compute ----------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor,
                last_only: bool = False) -> torch.Tensor:
        """Logits (T, vocab) for ``tokens`` (T,) at ``positions`` (T,), filling the KV cache.

        Each token attends to every cached position up to its own, so a prompt can be fed in
        one call (prefill) or one token at a time (decode) with the same result.
        """
        x, cos, sin, visible = self.prologue(tokens, positions)
        x = self.blocks(x, cos, sin, positions, visible, 0, len(self.layers))
        return self.epilogue(x, last_only)

    def prologue(self, tokens: torch.Tensor, positions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Embeddings, rotary tables and visibility of ``tokens`` (the start of a forward)."""
        x = F.embedding(tokens, self.embed)
        cos = self.cos.index_select(0, positions)[:, None, :]
        sin = self.sin_signed.index_select(0, positions)[:, None, :]
        # (1, T, context): True where the cached slot is visible from that token
        visible = (self.slots[None, :] <= positions[:, None])[None]
        return x, cos, sin, visible

    def blocks(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor, visible: torch.Tensor, first: int,
               stop: int) -> torch.Tensor:
        """Layers ``first`` to ``stop - 1`` on ``x`` (a forward can run in layer chunks)."""
        cfg = self.cfg
        # decode steps only: a prompt's length varies, and each length would be a compilation
        compiled_block = self._block_fn if x.shape[0] == 1 else None
        for i in range(first, stop):
            layer = self.layers[i]
            if compiled_block is not None:
                x = compiled_block(x, layer.attn_norm, layer.qkv.weight, layer.o.weight,
                                   layer.mlp_norm, layer.gate_up.weight, layer.down.weight,
                                   self.k_cache[i], self.v_cache[i], cos, sin, positions,
                                   visible)
            else:
                x = transformer_block(x, layer.attn_norm, layer.qkv, layer.o, layer.mlp_norm,
                                      layer.gate_up, layer.down, self.k_cache[i],
                                      self.v_cache[i], cos, sin, positions, visible,
                                      eps=cfg.rms_norm_eps, n_heads=cfg.num_attention_heads,
                                      n_kv_heads=cfg.num_key_value_heads,
                                      head_dim=cfg.head_dim, attention=self.attention)
        return x

    def epilogue(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Logits from the last layer's output (the end of a forward)."""
        if last_only:
            x = x[-1:]
        return self.lm_head.forward(_rms(x, self.norm, self.cfg.rms_norm_eps))

    def reset(self) -> None:
        """Forget the cached keys and values."""
        for t in (*self.k_cache, *self.v_cache):
            t.zero_()


def _linear(w: Any, x: torch.Tensor) -> torch.Tensor:
    """``x @ W.T`` for a plain weight tensor or a :mod:`quant` weight object."""
    return F.linear(x, w) if isinstance(w, torch.Tensor) else w.forward(x)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """Llama's rotary embedding, ``x * cos + rotate_half(x) * sin``, in three kernels.

    ``rotate_half(x) = cat(-x2, x1)``; swapping the halves (one flip) and multiplying by
    ``cat(-sin, sin)`` gives the same, for q and k at once.
    """
    n_tok, heads, hd = x.shape
    swapped = x.view(n_tok, heads, 2, hd // 2).flip(2).view(n_tok, heads, hd)
    return torch.addcmul(x * cos, swapped, sin_signed)


def transformer_block(x: torch.Tensor, attn_norm: torch.Tensor, qkv: Any, o: Any,
                      mlp_norm: torch.Tensor, gate_up: Any, down: Any, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      positions: torch.Tensor, visible: torch.Tensor, *, eps: float,
                      n_heads: int, n_kv_heads: int, head_dim: int,
                      attention: str = 'sdpa') -> torch.Tensor:
    """One Llama block on ``x`` (T, hidden), writing the tokens' keys/values into the cache.

    The weights are tensors (``F.linear``) or :mod:`quant` objects; a pure function of its
    arguments, so :meth:`Decoder.compile_blocks` compiles it once for every layer.
    """
    n_tok = x.shape[0]
    nh, kvh, hd = n_heads, n_kv_heads, head_dim
    h = _rms(x, attn_norm, eps)
    qkv_out = _linear(qkv, h)
    qk = _rope(qkv_out[:, :(nh + kvh) * hd].view(n_tok, nh + kvh, hd), cos, sin)
    q, k = qk[:, :nh], qk[:, nh:]
    v = qkv_out[:, (nh + kvh) * hd:].view(n_tok, kvh, hd)
    k_cache.index_copy_(1, positions, k.transpose(0, 1))
    v_cache.index_copy_(1, positions, v.transpose(0, 1))
    keys, values = k_cache, v_cache
    if kvh != nh:
        keys = keys.repeat_interleave(nh // kvh, dim=0)
        values = values.repeat_interleave(nh // kvh, dim=0)
    qh = q.transpose(0, 1)                                        # (nh, T, hd)
    if attention == 'matmul':
        scores = torch.matmul(qh, keys.transpose(1, 2)).float() * (hd ** -0.5)
        scores = scores.masked_fill(~visible, float('-inf'))
        att = torch.matmul(torch.softmax(scores, dim=-1).to(values.dtype), values)
    else:
        att = F.scaled_dot_product_attention(qh, keys, values, attn_mask=visible)
    x = x + _linear(o, att.transpose(0, 1).reshape(n_tok, nh * hd))
    h = _rms(x, mlp_norm, eps)
    gate, up = _linear(gate_up, h).chunk(2, dim=-1)
    return x + _linear(down, F.silu(gate) * up)


def _layer_from(weights: dict[str, torch.Tensor], fmt: str, i: int,
                dtype: torch.dtype) -> Layer:
    p = f'model.layers.{i}.'

    def w(name: str) -> torch.Tensor:
        return weights[p + name].to(dtype)

    qkv = torch.cat([w('self_attn.q_proj.weight'), w('self_attn.k_proj.weight'),
                     w('self_attn.v_proj.weight')])
    gate_up = torch.cat([w('mlp.gate_proj.weight'), w('mlp.up_proj.weight')])
    return Layer(attn_norm=w('input_layernorm.weight'), qkv=quant.make_weight(qkv, fmt),
                 o=quant.make_weight(w('self_attn.o_proj.weight'), fmt),
                 mlp_norm=w('post_attention_layernorm.weight'),
                 gate_up=quant.make_weight(gate_up, fmt),
                 down=quant.make_weight(w('mlp.down_proj.weight'), fmt))


def decoder_from_weights(cfg: DecoderConfig, weights: dict[str, torch.Tensor], *,
                         fmt: str = 'fp16', context: int = 1024,
                         device: torch.device | str = 'cpu',
                         dtype: torch.dtype = torch.float16) -> Decoder:
    """A decoder from Hugging Face Llama tensor names (``model.layers.N.self_attn.q_proj...``).

    Tensors are moved to ``device`` one layer at a time and quantised there, so the dense
    checkpoint never sits on the device whole.
    """
    device = torch.device(device)
    missing = [n for n in ('model.embed_tokens.weight', 'model.norm.weight') if n not in weights]
    if missing:
        raise KeyError(f'checkpoint lacks {", ".join(missing)}')
    on_dev = {}
    layers = []
    for i in range(cfg.num_hidden_layers):
        prefix = f'model.layers.{i}.'
        on_dev = {k: v.to(device) for k, v in weights.items() if k.startswith(prefix)}
        layers.append(_layer_from(on_dev, fmt, i, dtype))
    del on_dev
    embed = weights['model.embed_tokens.weight'].to(device, dtype)
    head = weights.get('lm_head.weight', weights['model.embed_tokens.weight']).to(device, dtype)
    return Decoder(cfg, embed, layers, weights['model.norm.weight'].to(device, dtype),
                   quant.make_weight(head, fmt), fmt=fmt, context=context, meaningful=True)


def random_decoder(cfg: DecoderConfig, *, fmt: str = 'fp16', context: int = 1024,
                   device: torch.device | str = 'cpu', dtype: torch.dtype = torch.float16,
                   seed: int = 0) -> Decoder:
    """A decoder of ``cfg``'s full shapes with random weights, built directly on ``device``.

    For memory and interference measurements only: its answers are marked meaningless.
    """
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    std, out_std = 0.02, 0.02 / (2 * cfg.num_hidden_layers) ** 0.5
    shapes = {name: (o, i) for name, o, i in cfg.linear_shapes()}

    def rnd(name: str, s: float) -> Any:
        o, i = shapes[name]
        return quant.random_weight(o, i, fmt, std=s, dtype=dtype, device=device, generator=gen)

    ones = torch.ones(cfg.hidden_size, dtype=dtype, device=device)
    layers = [Layer(attn_norm=ones.clone(), qkv=rnd('qkv', std), o=rnd('o', out_std),
                    mlp_norm=ones.clone(), gate_up=rnd('gate_up', std),
                    down=rnd('down', out_std)) for _ in range(cfg.num_hidden_layers)]
    embed = torch.empty(cfg.vocab_size, cfg.hidden_size, dtype=dtype, device=device)
    embed.normal_(0.0, 1.0, generator=gen)
    head = quant.random_weight(cfg.vocab_size, cfg.hidden_size, fmt, std=std, dtype=dtype,
                               device=device, generator=gen)
    return Decoder(cfg, embed, layers, ones.clone(), head, fmt=fmt, context=context,
                   meaningful=False)


def layer_bounds(n_layers: int, chunks: int) -> list[int]:
    """Layer indices bounding ``chunks`` runs of consecutive layers, as even as they come."""
    if not 1 <= chunks <= n_layers:
        raise ValueError(f'chunks must be 1..{n_layers} (the layers), got {chunks}')
    return [round(i * n_layers / chunks) for i in range(chunks + 1)]


# Gated forwards go in blocks of at most this many tokens (forward_between_frames): a prompt's
# pieces stay bounded whatever its length.
PREFILL_BLOCK_TOKENS = 64


def forward_between_frames(decoder: Decoder, tokens: torch.Tensor, positions: torch.Tensor,
                           gate: Any, bounds: list[int], *, last_only: bool = False,
                           stream: Any = None, done: Any = None,
                           kind: object = 'forward',
                           block_tokens: int = PREFILL_BLOCK_TOKENS) -> torch.Tensor:
    """``decoder.forward`` in token blocks x layer chunks, each piece when ``gate`` lets it.

    The same result as the one-piece forward (same KV cache writes, same logits up to the
    order of additions); eager, as a prompt's length varies. Tokens go in blocks of at most
    ``block_tokens`` (<= 0: one block), each attending to the cache the earlier ones wrote,
    as a decode step does, and each block in the layer chunks ``bounds``: in layer chunks
    alone a piece grows with the prompt (a 500-token prompt's first chunk took 8-29 ms on an
    H100; the gate cannot predict a length it has not seen, and each new activation size is a
    new allocation), in blocks every piece is bounded and the allocator sees the same sizes
    again. ``gate.run(fn, (kind, k))`` times chunk ``k`` and launches it only between the
    loop's frames; ``done`` (a reusable ``torch.cuda.Event``) makes each chunk return once
    its device work is done, so the gate measures the device time.
    """
    n = int(tokens.shape[0])
    block = n if block_tokens <= 0 else int(block_tokens)
    outs = [_layer_chunks_between_frames(decoder, tokens[s:s + block],
                                         positions[s:s + block], gate, bounds,
                                         last_only=last_only, stream=stream, done=done,
                                         kind=kind)
            for s in range(0, n, block)]
    return outs[-1] if last_only or len(outs) == 1 else torch.cat(outs)


def _layer_chunks_between_frames(decoder: Decoder, tokens: torch.Tensor,
                                 positions: torch.Tensor, gate: Any, bounds: list[int], *,
                                 last_only: bool, stream: Any, done: Any,
                                 kind: object) -> torch.Tensor:
    """One block of :func:`forward_between_frames`: its layer chunks through the gate."""
    ctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
    state: dict[str, Any] = {}

    def chunk(k: int) -> None:
        with ctx:
            if k == 0:
                state['x'], state['cos'], state['sin'], state['visible'] = decoder.prologue(
                    tokens, positions)
            x = decoder.blocks(state['x'], state['cos'], state['sin'], positions,
                               state['visible'], bounds[k], bounds[k + 1])
            state['x'] = decoder.epilogue(x, last_only) if k == len(bounds) - 2 else x
            if done is not None:
                done.record()
        if done is not None:
            done.synchronize()

    for k in range(len(bounds) - 1):
        gate.run(functools.partial(chunk, k), (kind, k))
    return state['x']


class DecodeRunner:
    """Greedy decoding one token per call, replayed from CUDA graphs where there are some.

    The step reads ``token`` and ``position`` (device tensors of shape (1,)), writes the argmax
    token back into ``token`` and advances ``position`` (wrapping at the cache's end, so a
    benchmark can generate forever), all on the device: no host round trip per token.

    ``chunks`` > 1 captures the step as that many graphs of consecutive layers (the hidden
    state, rotary rows and visibility kept in static buffers between them), replayed in order:
    the same arithmetic, in pieces short enough to be scheduled between a control loop's
    frames (:meth:`step_between_frames`, :class:`edge_loop.reasoning.gate.FrameGate`).
    """

    def __init__(self, decoder: Decoder, *, use_graph: bool | None = None,
                 stream: torch.cuda.Stream | None = None,
                 compile_mode: str | None = None, chunks: int = 1) -> None:
        self.decoder = decoder
        if compile_mode is not None:
            decoder.compile_blocks(compile_mode)   # compiled at the first step (capture)
        self.bounds = layer_bounds(len(decoder.layers), chunks)
        dev = decoder.device
        self.token = torch.zeros(1, dtype=torch.long, device=dev)
        self.position = torch.zeros(1, dtype=torch.long, device=dev)
        self.use_graph = dev.type == 'cuda' if use_graph is None else use_graph
        self.stream = stream
        self.graph: Any = None
        self.chunk_graphs: list[Any] = []
        self._state: tuple[torch.Tensor, ...] | None = None

    def _step(self) -> None:
        logits = self.decoder.forward(self.token, self.position)
        self.token.copy_(logits[-1].argmax())
        self.position.add_(1).remainder_(self.decoder.context)

    def _chunk(self, k: int) -> None:
        """Chunk ``k`` of a decode step; reads and writes the static state buffers."""
        dec, b = self.decoder, self.bounds
        x_buf, cos, sin, visible = self._state
        if k == 0:
            x, c, s, v = dec.prologue(self.token, self.position)
            cos.copy_(c)
            sin.copy_(s)
            visible.copy_(v)
        else:
            x = x_buf
        x = dec.blocks(x, cos, sin, self.position, visible, b[k], b[k + 1])
        if k == len(b) - 2:
            self.token.copy_(dec.epilogue(x)[-1].argmax())
            self.position.add_(1).remainder_(dec.context)
        else:
            x_buf.copy_(x)

    def capture(self, warmup: int = 3) -> None:
        """Warm up and capture one decode step (CUDA; elsewhere only the chunks' buffers)."""
        chunked = len(self.bounds) > 2
        if chunked:   # the buffers the chunks hand the hidden state over in
            self._state = tuple(t.clone() for t in self.decoder.prologue(self.token,
                                                                         self.position))
        if not self.use_graph:
            return
        stream = self.stream or torch.cuda.Stream(device=self.decoder.device)
        stream.wait_stream(torch.cuda.current_stream(self.decoder.device))
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._step()
                if chunked:
                    for k in range(len(self.bounds) - 1):
                        self._chunk(k)
        torch.cuda.current_stream(self.decoder.device).wait_stream(stream)
        if not chunked:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=stream):
                self._step()
        else:
            # one memory pool for the chunks: captured and replayed in the same order
            pool = torch.cuda.graph_pool_handle()
            for k in range(len(self.bounds) - 1):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=stream, pool=pool):
                    self._chunk(k)
                self.chunk_graphs.append(g)
        torch.cuda.synchronize(self.decoder.device)

    def start(self, token: int, position: int) -> None:
        self.token.fill_(token)
        self.position.fill_(position)

    def step(self) -> None:
        """Decode one token (replay the graph or graphs, or run eagerly)."""
        # A graph replays on the calling thread's current stream, not the one it was
        # captured on: enter the runner's stream so its priority applies.
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                self._replay_or_run()
        else:
            self._replay_or_run()

    def _replay_or_run(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        elif self.chunk_graphs:
            for g in self.chunk_graphs:
                g.replay()
        elif self._state is not None:   # chunked, eager (no graphs on this device)
            for k in range(len(self.bounds) - 1):
                self._chunk(k)
        else:
            self._step()

    def step_between_frames(self, gate: Any, done: Any = None) -> None:
        """Decode one token chunk by chunk, each launched only when ``gate`` lets it.

        ``gate.run(fn, kind)`` launches ``fn`` when no frame is in flight and the chunk is
        expected to finish before the next frame, and returns once the chunk is done on the
        device (``done``: a reusable ``torch.cuda.Event``; on the CPU the work is synchronous).
        Without chunk graphs the whole step is one chunk.
        """
        ctx = (torch.cuda.stream(self.stream) if self.stream is not None
               else contextlib.nullcontext())
        if self.chunk_graphs:
            parts = [g.replay for g in self.chunk_graphs]
        elif self._state is not None:
            parts = [functools.partial(self._chunk, k) for k in range(len(self.bounds) - 1)]
        else:
            parts = [self._replay_or_run]

        def launch_and_wait(fn: Any) -> None:
            with ctx:
                fn()
                if done is not None:
                    done.record()
            if done is not None:
                done.synchronize()

        for k, fn in enumerate(parts):
            gate.run(functools.partial(launch_and_wait, fn), k)

    def prefill_between_frames(self, prompt: torch.Tensor, gate: Any, done: Any = None,
                               block_tokens: int = PREFILL_BLOCK_TOKENS) -> None:
        """Feed a prompt (T,) in token blocks x layer chunks, each piece when ``gate`` lets it.

        A prompt of a few hundred tokens is a forward of tens of milliseconds in one piece,
        longer than a control frame's period; in blocks of ``block_tokens`` x layer chunks
        (:func:`forward_between_frames`) each piece fits between frames. Afterwards the
        runner decodes on from the prompt: ``token`` holds its greedy next token and
        ``position`` its length, as ``start(argmax, len(prompt))`` after a one-piece
        ``decoder.forward(prompt)``. ``done`` as in :meth:`step_between_frames`.
        """
        dec = self.decoder
        n = int(prompt.shape[0])
        if not 0 < n < dec.context:
            raise ValueError(f'a prompt of {n} tokens does not fit the {dec.context}-slot cache')
        logits = forward_between_frames(dec, prompt, torch.arange(n, device=dec.device), gate,
                                        self.bounds, last_only=True, stream=self.stream,
                                        done=done, kind='prefill', block_tokens=block_tokens)
        ctx = (torch.cuda.stream(self.stream) if self.stream is not None
               else contextlib.nullcontext())
        with ctx:
            self.token.copy_(logits[-1].argmax())
            self.position.fill_(n)

    def tokens_per_second(self, n_tokens: int) -> float:
        """Generate ``n_tokens`` back to back and return the rate (synchronised)."""
        sync = (torch.cuda.synchronize if self.decoder.device.type == 'cuda'
                else (lambda *a: None))
        sync(self.decoder.device)
        t0 = time.perf_counter()
        for _ in range(n_tokens):
            self.step()
        sync(self.decoder.device)
        return n_tokens / (time.perf_counter() - t0)
