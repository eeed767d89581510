# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A plain Llama forward pass written from the paper's equations, independent of the decoder.

float64, whole sequence at once, explicit causal mask, unfused q/k/v and gate/up, RoPE with
rotate_half: the yardstick the tests hold edge_loop.reasoning.decoder against.
"""

from __future__ import annotations

import torch


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def llama_logits(cfg, tensors, tokens):
    """Logits (T, vocab) of ``tokens`` (T,) from Hugging Face-named ``tensors``, in float64."""
    t = {k: v.double() for k, v in tensors.items()}
    n = tokens.shape[0]
    nh, kvh, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang, ang], 1).cos(), torch.cat([ang, ang], 1).sin()
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    x = t['model.embed_tokens.weight'][tokens]
    for i in range(cfg.num_hidden_layers):
        p = f'model.layers.{i}.'
        h = rms_norm(x, t[p + 'input_layernorm.weight'], cfg.rms_norm_eps)
        q = (h @ t[p + 'self_attn.q_proj.weight'].T).view(n, nh, hd).transpose(0, 1)
        k = (h @ t[p + 'self_attn.k_proj.weight'].T).view(n, kvh, hd).transpose(0, 1)
        v = (h @ t[p + 'self_attn.v_proj.weight'].T).view(n, kvh, hd).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // kvh, 0)
        v = v.repeat_interleave(nh // kvh, 0)
        scores = (q @ k.transpose(1, 2)) / hd ** 0.5
        att = torch.softmax(scores.masked_fill(~causal, float('-inf')), -1) @ v
        x = x + att.transpose(0, 1).reshape(n, nh * hd) @ t[p + 'self_attn.o_proj.weight'].T
        h = rms_norm(x, t[p + 'post_attention_layernorm.weight'], cfg.rms_norm_eps)
        gate = h @ t[p + 'mlp.gate_proj.weight'].T
        up = h @ t[p + 'mlp.up_proj.weight'].T
        x = x + (torch.nn.functional.silu(gate) * up) @ t[p + 'mlp.down_proj.weight'].T
    return rms_norm(x, t['model.norm.weight'], cfg.rms_norm_eps) @ t['lm_head.weight'].T
