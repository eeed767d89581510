# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Decoder shapes and their bytes, without torch (the memory budget imports only this).

:class:`DecoderConfig` follows Hugging Face's LlamaConfig names; :data:`LLAMA2_7B` and the
two-layer :data:`TINY` are the presets. :func:`weights_nbytes` and :func:`kv_cache_nbytes`
give the bytes a decoder will allocate, so a budget can be checked before anything is built.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

FORMATS = ('fp16', 'int8', 'int4')
INT4_GROUP = 128


def weight_bytes(out_features: int, in_features: int, fmt: str, group: int = INT4_GROUP,
                 scale_bytes: int = 2) -> int:
    """Bytes one ``out x in`` weight takes in ``fmt`` (codes plus scales)."""
    n = out_features * in_features
    if fmt == 'fp16':
        return 2 * n
    if fmt == 'int8':
        return n + scale_bytes * out_features
    if fmt == 'int4':
        return n // 2 + scale_bytes * out_features * (in_features // group)
    raise ValueError(f'weight format {fmt!r}: must be one of {", ".join(FORMATS)}')



@dataclass(frozen=True)
class DecoderConfig:
    """Shape of a Llama-style decoder (names follow Hugging Face's LlamaConfig)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_json(cls, path: str | Path) -> DecoderConfig:
        """Read the fields we use from a Hugging Face ``config.json`` (others are ignored)."""
        raw = json.loads(Path(path).read_text())
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in raw.items() if k in names and v is not None}
        kwargs.setdefault('num_key_value_heads', raw.get('num_attention_heads', 32))
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    def linear_shapes(self) -> list[tuple[str, int, int]]:
        """(name, out, in) of every linear in one layer, q/k/v and gate/up fused."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        return [('qkv', h + 2 * kv, h), ('o', h, h),
                ('gate_up', 2 * self.intermediate_size, h), ('down', h, self.intermediate_size)]

    def parameter_count(self) -> int:
        per_layer = sum(o * i for _, o, i in self.linear_shapes()) + 2 * self.hidden_size
        return (self.num_hidden_layers * per_layer + 2 * self.vocab_size * self.hidden_size
                + self.hidden_size)


LLAMA2_7B = DecoderConfig()
TINY = DecoderConfig(vocab_size=384, hidden_size=128, intermediate_size=256,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=512)
PRESETS = {'llama2_7b': LLAMA2_7B, 'tiny': TINY}


def weights_nbytes(cfg: DecoderConfig, fmt: str, element_size: int = 2) -> int:
    """Bytes of every weight in ``fmt``.

    The linears of the layers and lm_head are in ``fmt``; the embedding table and the norms
    stay in the compute dtype of ``element_size`` bytes (a lookup reads one row).
    """
    es = element_size
    layers = sum(weight_bytes(o, i, fmt, scale_bytes=es) for _, o, i in cfg.linear_shapes())
    if fmt == 'fp16':
        layers = layers // 2 * es
    dense = es * (cfg.vocab_size * cfg.hidden_size + (2 * cfg.num_hidden_layers + 1)
                 * cfg.hidden_size)
    head = weight_bytes(cfg.vocab_size, cfg.hidden_size, fmt, scale_bytes=es)
    if fmt == 'fp16':
        head = head // 2 * es
    return cfg.num_hidden_layers * layers + head + dense


def kv_cache_nbytes(cfg: DecoderConfig, context: int, element_size: int = 2) -> int:
    """Bytes of the keys and values of ``context`` tokens for every layer."""
    return (2 * cfg.num_hidden_layers * context * cfg.num_key_value_heads * cfg.head_dim
            * element_size)
